//! The OpenAPI 3 document served at `/openapi.json`. Its schemas are
//! generated from the Rust types the handlers decode and encode; tests
//! check it against the router: every documented path and method exists,
//! every route is documented and typed.

// Where things live: `types` holds the tables' row types; the route groups
// `service`, `memories`, `mem0`, `principal` and `admin` each hold their
// operations and types; `document` assembles the document from the joined
// tables (whose row order does not change the document: its paths and
// schemas are keyed maps).
mod admin;
mod document;
mod mem0;
mod memories;
mod principal;
mod service;
mod types;

pub use document::{ERROR_STATUSES, QUERIES, document};
pub use types::{Answer, Operation, SchemaFn, Typed};

/// The tables of the route groups joined, in this order, at compile time.
const fn join<T: Copy, const N: usize>(groups: &[&[T]]) -> [T; N] {
    let mut out = [groups[0][0]; N];
    let (mut g, mut at) = (0, 0);
    while g < groups.len() {
        let mut i = 0;
        while i < groups[g].len() {
            out[at] = groups[g][i];
            at += 1;
            i += 1;
        }
        g += 1;
    }
    assert!(
        at == N,
        "the joined length is the sum of the groups' lengths"
    );
    out
}

/// The number of rows of all `groups`.
const fn total<T>(groups: &[&[T]]) -> usize {
    let (mut g, mut n) = (0, 0);
    while g < groups.len() {
        n += groups[g].len();
        g += 1;
    }
    n
}

const OPERATION_GROUPS: &[&[Operation]] = &[
    service::OPERATIONS,
    memories::OPERATIONS,
    mem0::OPERATIONS,
    principal::OPERATIONS,
    admin::OPERATIONS,
];

const TYPED_GROUPS: &[&[Typed]] = &[
    service::TYPED,
    memories::TYPED,
    mem0::TYPED,
    principal::TYPED,
    admin::TYPED,
];

/// Every operation of the API.
pub const OPERATIONS: &[Operation] =
    &join::<Operation, { total(OPERATION_GROUPS) }>(OPERATION_GROUPS);

/// Every operation's types.
pub const TYPED: &[Typed] = &join::<Typed, { total(TYPED_GROUPS) }>(TYPED_GROUPS);

#[cfg(test)]
mod tests {
    use super::*;

    /// The served bytes of the document (`/openapi.json` answers
    /// `axum::Json(document())`, serde_json's compact form), pinned by their
    /// SHA-256, so that a change to how the document is assembled cannot
    /// alter it unnoticed. A deliberate change to the API (a route, a type,
    /// a summary, the crate version) changes the digest: take the new one
    /// from this test's failure message after checking the document's diff.
    #[test]
    fn served_document_bytes_are_pinned() {
        let bytes = serde_json::to_vec(&document())
            .unwrap_or_else(|e| panic!("the document serializes: {e}"));
        assert_eq!(
            mosaic_harness::canonical::sha256_hex(&bytes),
            "acd1ce311ce2fd3663167f52b55c80e1fe479f943a04c175f1ebb7399f7d5a90",
            "the served OpenAPI document changed"
        );
    }
}
