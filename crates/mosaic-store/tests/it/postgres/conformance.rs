//! The backend-independent suite, run against PostgreSQL as the
//! application role: one test per check.

use mosaic_store::conformance;

use super::PgFactory;

macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let Some(factory) = PgFactory::from_env() else { return };
                conformance::$name(&factory).expect(stringify!($name));
            }
        )*

        #[test]
        fn every_conformance_check_has_a_test() {
            let listed: Vec<&str> = conformance::all_checks::<PgFactory>()
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            assert_eq!(listed, vec![$(stringify!($name)),*]);
        }
    };
}

checks!(
    accepted_write_commits_and_is_idempotent,
    rejected_write_stores_only_its_receipt,
    content_digest_mismatch_stores_nothing,
    reads_wait_for_every_required_index,
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
    deletion_lag_is_measured_against_deadline,
    state_survives_reopen,
    listing_filters_and_paginates_without_erased_content,
    listing_never_crosses_tenants,
    current_policy_and_grant_read_back,
);
