//! A deletion receipt binds the record's leaf as revoked: the scope's
//! commitment its revocation made and the inclusion proof of the entry
//! in state `revoked`, captured in the revocation's own transaction, on
//! both backends.

use mosaic_harness::canonical::domain_digest;
use mosaic_store::conformance::fixtures::{self, Spec, T0};
use mosaic_store::conformance::{StoreFactory, publish_all, test_config};
use mosaic_store::{
    DELETION_RECEIPT_DOMAIN, DELETION_RECEIPT_V2_DOMAIN, DeletionReceipt, RevocationReason,
    ScopeInclusion, Store, StoreResult,
};

/// Erases `record_id` (already revoked, deletion requested) and finalizes
/// its receipt.
fn finish<S: Store + ?Sized>(
    store: &mut S,
    requested: mosaic_store::revocation::DeletionRequested,
    targets: &[String],
    at: u64,
) -> StoreResult<DeletionReceipt> {
    let record_id = requested.record_id().to_owned();
    for target in targets {
        for task in store.pending_outbox(target, usize::MAX)? {
            if task.record_id == record_id {
                store.acknowledge_index(&record_id, task.generation, target, at)?;
            }
        }
    }
    let acknowledged = store.confirm_indexes_acknowledged(requested, at + 1)?;
    let erased = store.erase(acknowledged, at + 2)?;
    store.finalize_deletion(erased, at + 3)
}

fn current(store: &mut dyn Store, record_id: &str) -> ScopeInclusion {
    store
        .scope_inclusion(fixtures::TENANT_A, record_id)
        .expect("inclusion")
        .expect("the record is in its scope")
}

/// One revocation: the receipt's leaf is the entry the store held right
/// after the revocation, against the commitment it kept then.
fn one_revocation<F: StoreFactory>(factory: &F) {
    let config = test_config();
    let db = factory.fresh().expect("fresh");
    let mut store = factory.connect(&db, &config).expect("connect");
    fixtures::seed(&mut store, fixtures::TENANT_A, &["alice"]).expect("seed");
    for id in ["r1", "r2"] {
        let request = Spec::principal(fixtures::TENANT_A, "alice", id).build();
        assert!(store.write(&request).expect("write").is_accepted());
    }
    publish_all(&mut store, &config.required_index_targets, T0).expect("publish");
    let auth = fixtures::authorization("alice");
    let ineligible = store
        .revoke("r1", &RevocationReason::Requested, &auth, T0 + 100)
        .expect("revoke");
    let after = current(&mut store, "r1");
    assert_eq!(after.entry.state, "revoked");
    let requested = store
        .request_deletion(ineligible, T0 + 200)
        .expect("request");
    let receipt = finish(
        &mut store,
        requested,
        &config.required_index_targets,
        T0 + 300,
    )
    .expect("finalized");
    // Erased: the entry left the tree.
    assert!(
        store
            .scope_inclusion(fixtures::TENANT_A, "r1")
            .expect("inclusion")
            .is_none()
    );
    let leaf = receipt.body.revoked_leaf.as_ref().expect("a v2 receipt");
    assert_eq!(receipt.body.schema_version, 2);
    assert_eq!(leaf.commitment, after.commitment);
    assert_eq!(leaf.record_sha256, after.entry.record_sha256);
    assert_eq!(leaf.proof, after.proof);
    assert_eq!(leaf.verify("r1"), Ok(()));
    // Not another record's leaf, and not the record's leaf in another state.
    assert!(leaf.verify("r2").is_err());
    let mut active = leaf.entry("r1");
    active.state = "active".into();
    let root = mosaic_harness::merkle::from_hex(&leaf.commitment.root_sha256).expect("hex");
    assert!(
        mosaic_harness::memory_scope::verify_scope_inclusion(&active, &leaf.proof, &root).is_err()
    );
    // Its digest is under the v2 tag, and it is what the store keeps.
    assert!(receipt.verify());
    assert_eq!(
        receipt.receipt_sha256,
        domain_digest(DELETION_RECEIPT_V2_DOMAIN, &receipt.body).expect("digest")
    );
    assert_ne!(
        receipt.receipt_sha256,
        domain_digest(DELETION_RECEIPT_DOMAIN, &receipt.body).expect("digest")
    );
    assert!(matches!(
        store.resume_revocation("r1").expect("resume"),
        Some(mosaic_store::revocation::RevocationState::Finalized(r)) if *r == receipt
    ));
    // The scope's root moved on with the erasure; the receipt keeps the
    // root the revocation made.
    let now = current(&mut store, "r2").commitment;
    assert_ne!(now.root_sha256, leaf.commitment.root_sha256);
    assert!(now.generation > leaf.commitment.generation);
}

/// A consent withdrawal revokes several records of one scope in one
/// transaction: each leaf is proved against the root that transaction
/// committed, the same for all.
fn cascade<F: StoreFactory>(factory: &F) {
    let config = test_config();
    let db = factory.fresh().expect("fresh");
    let mut store = factory.connect(&db, &config).expect("connect");
    fixtures::seed(&mut store, fixtures::TENANT_A, &["alice"]).expect("seed");
    for id in ["c1", "c2", "c3"] {
        let request = Spec::principal(fixtures::TENANT_A, "alice", id).build();
        assert!(store.write(&request).expect("write").is_accepted());
    }
    publish_all(&mut store, &config.required_index_targets, T0).expect("publish");
    let consent = fixtures::consent(fixtures::TENANT_A, "alice");
    let withdrawal = store
        .withdraw_consent(
            fixtures::TENANT_A,
            &fixtures::consent_digest(&consent),
            &fixtures::authorization("alice"),
            T0 + 50,
        )
        .expect("withdraw");
    let committed = current(&mut store, "c1").commitment;
    let mut at = T0 + 100;
    for token in withdrawal.revoked {
        let id = token.record_id().to_owned();
        let receipt =
            finish(&mut store, token, &config.required_index_targets, at).expect("finalized");
        at += 10;
        let leaf = receipt.body.revoked_leaf.expect("a v2 receipt");
        assert_eq!(leaf.commitment, committed, "{id}");
        assert_eq!(leaf.verify(&id), Ok(()), "{id}");
    }
}

#[test]
fn sqlite_receipt_binds_the_revoked_leaf() {
    one_revocation(&crate::common::SqliteFactory);
}

#[test]
fn sqlite_cascade_leaves_bind_the_committed_root() {
    cascade(&crate::common::SqliteFactory);
}

/// A revocation whose row kept no leaf (made before the store captured
/// it) still finalizes, to a v1 receipt that verifies as before.
#[test]
fn sqlite_revocation_without_a_kept_leaf_gives_a_v1_receipt() {
    let factory = crate::common::SqliteFactory;
    let config = test_config();
    let db = factory.fresh().expect("fresh");
    let mut store = factory.connect(&db, &config).expect("connect");
    fixtures::seed(&mut store, fixtures::TENANT_A, &["alice"]).expect("seed");
    let request = Spec::principal(fixtures::TENANT_A, "alice", "old").build();
    store.write(&request).expect("write");
    publish_all(&mut store, &config.required_index_targets, T0).expect("publish");
    let ineligible = store
        .revoke(
            "old",
            &RevocationReason::Requested,
            &fixtures::authorization("alice"),
            T0 + 1,
        )
        .expect("revoke");
    rusqlite::Connection::open(&db.path)
        .expect("raw")
        .execute(
            "UPDATE revocations SET receipt_json = NULL WHERE record_id = 'old'",
            [],
        )
        .expect("forget the leaf");
    let requested = store.request_deletion(ineligible, T0 + 2).expect("request");
    let receipt = finish(
        &mut store,
        requested,
        &config.required_index_targets,
        T0 + 3,
    )
    .expect("finalized");
    assert_eq!(receipt.body.schema_version, 1);
    assert!(receipt.body.revoked_leaf.is_none());
    assert!(receipt.verify());
    assert_eq!(
        receipt.receipt_sha256,
        domain_digest(DELETION_RECEIPT_DOMAIN, &receipt.body).expect("digest")
    );
    let json = serde_json::to_value(&receipt.body).expect("json");
    assert!(
        json.get("revoked_leaf").is_none(),
        "v1 bodies keep their shape"
    );
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_receipt_binds_the_revoked_leaf() {
    let Some(factory) = crate::postgres::PgFactory::from_env() else {
        return;
    };
    one_revocation(&factory);
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_cascade_leaves_bind_the_committed_root() {
    let Some(factory) = crate::postgres::PgFactory::from_env() else {
        return;
    };
    cascade(&factory);
}
