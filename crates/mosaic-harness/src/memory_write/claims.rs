//! Structured claims and narrow conflict reasoning.
//!
//! Free prose is too ambiguous to be a conflict key. A proposal can carry
//! [`StructuredClaim`]s `(subject, predicate, object, qualifiers, validity)`;
//! [`claim_relation`] decides, without any model, how a proposed claim
//! relates to an existing one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a proposed memory relates to an existing record.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ConflictRelation {
    /// States the same thing over the same validity: rejected (no false
    /// corroboration, no unbounded repetition).
    Duplicate,
    /// Agrees with the existing record without repeating it exactly.
    Supports,
    /// States something incompatible: rejected (no last-write-wins).
    Contradicts,
    /// The proposal explicitly replaces the existing record.
    Supersedes,
    /// About something else.
    Unrelated,
}

/// One inspectable proposition: `subject predicate object`, true only under
/// `qualifiers` and within `[valid_from, valid_until)`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StructuredClaim {
    /// Identity of the claim within its proposal; judgments name it.
    pub claim_id: String,
    /// What the claim is about, e.g. `principal:vinay` or `service:billing`.
    pub subject: String,
    /// The relation asserted, e.g. `response_detail_preference`.
    pub predicate: String,
    /// The value asserted, e.g. `concise`.
    pub object: String,
    /// Conditions under which the claim holds, e.g. `surface=alerts`.
    /// A `BTreeMap`, so keys are unique and canonically ordered.
    pub qualifiers: BTreeMap<String, String>,
    /// First instant the claim holds (inclusive).
    pub valid_from_unix_ms: u64,
    /// Instant the claim stops holding (exclusive); `None` = open-ended.
    pub valid_until_unix_ms: Option<u64>,
    /// The proposal sources this claim rests on; each `(source, claim)` pair
    /// needs its own supporting judgment.
    pub source_ids: Vec<String>,
}

impl StructuredClaim {
    /// The conflict key: claims with different keys never conflict.
    pub fn conflict_key(&self) -> (&str, &str, &BTreeMap<String, String>) {
        (&self.subject, &self.predicate, &self.qualifiers)
    }

    /// The keys an index matches this claim by (recall's `claim_keys`):
    /// `subject|predicate`, and when the claim has qualifiers also
    /// `subject|predicate|k1=v1,k2=v2` (qualifiers in key order). The
    /// object and the validity are not part of a key: a key names what a
    /// claim is about, so every value ever claimed for it matches. Inside
    /// a component `%`, `|`, `,` and `=` are written `%25`, `%7C`, `%2C`
    /// and `%3D` (see [`claim_key_component`]), so two different keys never
    /// render the same.
    pub fn index_keys(&self) -> Vec<String> {
        let base = format!(
            "{}|{}",
            claim_key_component(&self.subject),
            claim_key_component(&self.predicate)
        );
        if self.qualifiers.is_empty() {
            return vec![base];
        }
        let qualifiers: Vec<String> = self
            .qualifiers
            .iter()
            .map(|(k, v)| format!("{}={}", claim_key_component(k), claim_key_component(v)))
            .collect();
        let qualified = format!("{base}|{}", qualifiers.join(","));
        vec![base, qualified]
    }

    /// Whether the two half-open validity intervals share an instant.
    pub fn overlaps(&self, other: &StructuredClaim) -> bool {
        let starts_before_other_ends = other
            .valid_until_unix_ms
            .is_none_or(|until| self.valid_from_unix_ms < until);
        let other_starts_before_self_ends = self
            .valid_until_unix_ms
            .is_none_or(|until| other.valid_from_unix_ms < until);
        starts_before_other_ends && other_starts_before_self_ends
    }
}

/// One component of a claim key ([`StructuredClaim::index_keys`]): the
/// text with `%`, `|`, `,` and `=` percent-escaped, everything else as is.
pub fn claim_key_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '|' => out.push_str("%7C"),
            ',' => out.push_str("%2C"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
    out
}

/// The distinct index keys of a record's claims, sorted.
pub fn claim_index_keys(claims: &[StructuredClaim]) -> Vec<String> {
    let keys: std::collections::BTreeSet<String> = claims
        .iter()
        .flat_map(StructuredClaim::index_keys)
        .collect();
    keys.into_iter().collect()
}

/// Narrow conflict reasoning between a proposed and an existing claim.
///
/// * different subject, predicate or qualifiers, or disjoint validity →
///   [`ConflictRelation::Unrelated`] ("concise for alerts" says nothing about
///   tutorials);
/// * same key, overlapping validity, different object →
///   [`ConflictRelation::Contradicts`];
/// * same key, same object, same validity → [`ConflictRelation::Duplicate`];
/// * same key, same object, different but overlapping validity →
///   [`ConflictRelation::Supports`].
///
/// [`ConflictRelation::Supersedes`] is never inferred: replacing a record is
/// an explicit act of the proposal, confirmed by an independent observation.
/// Source identities do not take part: the same proposition from another
/// source is still a duplicate.
pub fn claim_relation(proposed: &StructuredClaim, existing: &StructuredClaim) -> ConflictRelation {
    if proposed.conflict_key() != existing.conflict_key() || !proposed.overlaps(existing) {
        return ConflictRelation::Unrelated;
    }
    if proposed.object != existing.object {
        return ConflictRelation::Contradicts;
    }
    let same_validity = proposed.valid_from_unix_ms == existing.valid_from_unix_ms
        && proposed.valid_until_unix_ms == existing.valid_until_unix_ms;
    if same_validity {
        ConflictRelation::Duplicate
    } else {
        ConflictRelation::Supports
    }
}
