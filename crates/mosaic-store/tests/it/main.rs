//! Integration tests of mosaic-store: one binary, one module per area.

/// One test per backend-independent conformance check for one backend
/// (`$factory` gives an `Option` of the backend's factory; `None` skips),
/// plus a test that the list below names every check the suite has.
macro_rules! conformance_tests {
    ($factory_ty:ty, $factory:expr) => {
        conformance_tests!(
            @checks $factory_ty, $factory;
            accepted_write_commits_and_is_idempotent,
            rejected_write_stores_only_its_receipt,
            content_digest_mismatch_stores_nothing,
            reads_wait_for_every_required_index,
            degraded_activation_needs_policy_and_records_the_omission,
            audit_head_can_be_witnessed,
            scope_commitments_follow_every_change,
            eligible_changes_follow_every_change,
            eligible_changes_hold_each_changed_record_to_the_readers_subjects,
            supersession_is_generation_fenced,
            concurrent_supersession_has_one_winner,
            revocation_walks_every_state_to_a_receipt,
            stale_index_generation_is_refused,
            consent_withdrawal_revokes_dependents_and_derived,
            derived_records_can_be_quarantined,
            conflicts_open_review_cases_with_receipts,
            reads_never_cross_scope,
            snapshot_identity_ignores_insertion_order,
            batch_write_is_one_transaction,
            all_or_nothing_batch_writes_nothing_when_one_is_refused,
            deletion_lag_is_measured_against_deadline,
            state_survives_reopen,
            listing_filters_and_paginates_without_erased_content,
            listing_never_crosses_tenants,
            visibility_walk_admits_what_the_visibility_rule_admits,
            current_policy_and_grant_read_back,
            access_read_agrees_with_each_read_and_moves_with_the_stamp,
            claims_commit_with_their_record,
            latest_creation_instant_only_rises,
            deferred_acknowledgements_activate_and_persist,
            addresses_name_the_current_record,
            address_namespaces_list_current_records_of_one_subject,
            directory_rows_are_the_stores,
            intake_rows_are_the_stores,
        );
    };
    (@checks $factory_ty:ty, $factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let Some(factory) = $factory else { return };
                ::mosaic_store::conformance::$name(&factory).expect(stringify!($name));
            }
        )*

        #[test]
        fn every_conformance_check_has_a_test() {
            let listed: Vec<&str> = ::mosaic_store::conformance::all_checks::<$factory_ty>()
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            assert_eq!(listed, vec![$(stringify!($name)),*]);
        }
    };
}

mod common;
mod conformance;
mod crash;
mod deletion_leaf;
mod model;
mod postgres;
mod sqlite;
mod write_cost;

/// Skipped suites, listed after the test command (`testing/skip.rs`).
#[path = "../../../../testing/skip.rs"]
mod skip;
