//! The server's addressed memory, items, metadata and read filters (recall,
//! listing, mem0's filters) on a PostgreSQL-backed service: the same tests
//! as `addresses.rs` and `mem0.rs`, each on a fresh schema migrated by the
//! owner and served as the application role, so row-level security
//! applies. Skips like `postgres.rs` without a server.

use std::future::Future;
use std::pin::Pin;

use crate::common::{World, world_with};
use crate::postgres::{in_schema, urls};
use crate::postgres_erasure::migrated_schema;

type Body = for<'a> fn(&'a World) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Runs `body` on a world whose store, indexes and catalog live in a fresh
/// schema (dropped afterwards); nothing without PostgreSQL. The service's
/// PostgreSQL client blocks on a runtime of its own, so the world is
/// opened and dropped outside the test's runtime, and the body drives the
/// router within it.
fn on_postgres(label: &str, body: Body) {
    let Some((owner, app)) = urls() else {
        return;
    };
    let schema = migrated_schema(&owner, &app, label);
    let url = in_schema(&app, &schema.name);
    let world = world_with(|config| config.postgres = Some(url));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(body(&world));
    drop(world);
    // The memories the body wrote are rows of the schema, not of a file.
    let mut client = postgres::Client::connect(&owner, postgres::NoTls).expect("owner");
    let records: i64 = client
        .query_one(
            &format!("SELECT count(*) FROM \"{}\".records", schema.name),
            &[],
        )
        .expect("count records")
        .get(0);
    assert!(records > 0, "the service wrote to PostgreSQL");
    drop(client);
    drop(schema);
}

#[test]
fn templated_notes_under_distinct_keys_are_distinct_items_and_unaddressed_repeats_stay_guarded() {
    on_postgres("items0", |w| {
        Box::pin(crate::addresses::templated_notes_under_distinct_keys_are_distinct_items_and_unaddressed_repeats_stay_guarded_on(w))
    });
}

#[test]
fn a_write_to_an_address_supersedes_its_current_record_through_the_gate() {
    on_postgres("items1", |w| {
        Box::pin(crate::addresses::a_write_to_an_address_supersedes_its_current_record_through_the_gate_on(w))
    });
}

#[test]
fn metadata_is_returned_by_every_read_and_bounded_with_named_limits() {
    on_postgres("items2", |w| {
        Box::pin(
            crate::addresses::metadata_is_returned_by_every_read_and_bounded_with_named_limits_on(
                w,
            ),
        )
    });
}

#[test]
fn an_address_never_reads_across_principals_subjects_or_tenants() {
    on_postgres("items3", |w| {
        Box::pin(
            crate::addresses::an_address_never_reads_across_principals_subjects_or_tenants_on(w),
        )
    });
}

#[test]
fn a_recall_filter_restricts_the_eligible_set_and_is_bound_into_the_receipt() {
    on_postgres("items4", |w| {
        Box::pin(crate::addresses::a_recall_filter_restricts_the_eligible_set_and_is_bound_into_the_receipt_on(w))
    });
}

#[test]
fn a_list_filter_lists_only_matching_memories() {
    on_postgres("items5", |w| {
        Box::pin(crate::addresses::a_list_filter_lists_only_matching_memories_on(w))
    });
}

#[test]
fn mem0_filters_restrict_the_memories_before_ranking_and_paging() {
    on_postgres("items6", |w| {
        Box::pin(crate::mem0::mem0_filters_restrict_the_memories_before_ranking_and_paging_on(w))
    });
}
