//! The retrieval suite against `mosaic-index`'s in-memory targets: one test
//! per check.

use mosaic_pgsearch::conformance::{self, MemoryFactory};

macro_rules! checks {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                conformance::$name(&MemoryFactory).expect(stringify!($name));
            }
        )*

        #[test]
        fn every_retrieval_check_has_a_test() {
            let listed: Vec<&str> = conformance::all_checks::<MemoryFactory>()
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            assert_eq!(listed, vec![$(stringify!($name)),*]);
        }
    };
}

checks!(
    replay_once_is_idempotent,
    replay_twice_is_idempotent,
    replay_thrice_is_idempotent,
    out_of_order_delivery_converges,
    no_resurrection_after_tombstone_or_revocation,
    tenant_and_subject_scopes_never_cross,
    filtered_vector_recall_at_one_percent,
    lexical_ranking_is_sane,
);
