//! The intake rows (owners, captured messages, export copies, extraction
//! jobs) and the directory rows (keys, tenant settings, policy history,
//! verifiers, server settings) the store keeps.

use super::*;

/// Proposal owners, captured messages, export copies and extraction jobs
/// are the store's rows: a message and an export copy commit in their
/// record's own write transaction (a message that is not the writer's, or
/// not held by that record, fails the write whole: nothing is stored), a
/// replay writes nothing again, erasure deletes the export copy, a job is
/// queued once and found due, updated and counted across tenants, and no
/// lookup finds another tenant's or principal's row.
pub fn intake_rows_are_the_stores<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    use crate::intake::{CapturedMessage, ExtractionJob, IntakeImport, KeptWithRecord};
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let (a, b) = (fixtures::TENANT_A, fixtures::TENANT_B);
    let message = |tenant: &str, principal: &str, record: &str| CapturedMessage {
        tenant_id: tenant.into(),
        principal_id: principal.into(),
        conversation_id: "conv".into(),
        message_id: "m1".into(),
        record_id: record.into(),
        content_sha256: fixtures::label("text"),
        provenance_sha256: fixtures::label("provenance"),
        locator_sha256: fixtures::label("locator"),
        captured_at_ms: T0,
    };
    let mut request = Spec::principal(a, "alice", "r1").build();
    request.kept = KeptWithRecord {
        export_request_json: Some("{\"copy\":1}".into()),
        message: Some(message(a, "alice", "r1")),
    };
    // Refused whole: a message of another principal, or held elsewhere.
    for wrong in [message(a, "bob", "r1"), message(a, "alice", "r-other")] {
        let mut bad = request.clone();
        bad.kept.message = Some(wrong);
        assert!(matches!(
            store.write(&bad),
            Err(StoreError::InvalidArgument(_))
        ));
        assert!(store.get_record("r1")?.is_none(), "nothing is stored");
        assert_eq!(store.proposal_owner(&request.proposal.proposal_id)?, None);
    }
    assert!(store.write(&request)?.is_accepted());
    let owner = store
        .proposal_owner(&request.proposal.proposal_id)?
        .expect("decided");
    assert_eq!(
        (owner.tenant_id.as_str(), owner.principal_id.as_deref()),
        (a, Some("alice"))
    );
    assert!(
        owner.accepted && owner.record_id == "r1" && owner.decided_at_ms == request.now_unix_ms
    );
    assert_eq!(
        store.captured_message(a, "alice", "conv", "m1")?,
        Some(message(a, "alice", "r1"))
    );
    assert_eq!(store.captured_message(a, "bob", "conv", "m1")?, None);
    assert_eq!(store.captured_message(b, "alice", "conv", "m1")?, None);
    assert_eq!(
        store.export_request(a, "r1")?.as_deref(),
        Some("{\"copy\":1}")
    );
    assert_eq!(store.export_request(b, "r1")?, None, "another tenant's");
    // A replay carrying other rows writes nothing.
    let mut replay = request.clone();
    replay.kept.export_request_json = Some("{\"copy\":2}".into());
    assert!(store.write(&replay)?.replayed);
    assert_eq!(
        store.export_request(a, "r1")?.as_deref(),
        Some("{\"copy\":1}")
    );

    // Erasure deletes the export copy; the message's digests stay (its
    // text was the record's).
    let auth = fixtures::authorization("alice");
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let ineligible = store.revoke("r1", &RevocationReason::Requested, &auth, T0 + 100)?;
    let requested = store.request_deletion(ineligible, T0 + 200)?;
    for target in &config.required_index_targets {
        for task in store.pending_outbox(target, 10)? {
            store.acknowledge_index(&task.record_id, task.generation, target, T0 + 300)?;
        }
    }
    let acknowledged = store.confirm_indexes_acknowledged(requested, T0 + 400)?;
    store.erase(acknowledged, T0 + 500)?;
    assert_eq!(
        store.export_request(a, "r1")?,
        None,
        "erased with the record"
    );
    assert!(store.captured_message(a, "alice", "conv", "m1")?.is_some());

    // Extraction jobs.
    let job = |tenant: &str, id: &str, next: u64| ExtractionJob {
        job_id: id.into(),
        tenant_id: tenant.into(),
        principal_id: "alice".into(),
        key_id: "k-alice".into(),
        conversation_id: "conv".into(),
        message_ids: vec!["m1".into(), "m2".into()],
        state: "pending".into(),
        attempts: 0,
        next_attempt_ms: next,
        last_error: None,
        report_json: None,
        created_at_ms: next,
    };
    assert!(store.queue_extraction_job(&job(a, "x-1", T0 + 20))?);
    assert!(store.queue_extraction_job(&job(b, "x-2", T0 + 10))?);
    assert!(
        !store.queue_extraction_job(&job(a, "x-1", T0 + 99))?,
        "queued once"
    );
    let mut bad = job(a, "x-3", T0);
    bad.state = "running".into();
    assert!(matches!(
        store.queue_extraction_job(&bad),
        Err(StoreError::InvalidArgument(_))
    ));
    let due: Vec<String> = store
        .due_extraction_jobs(T0 + 20, 10)?
        .into_iter()
        .map(|j| j.job_id)
        .collect();
    assert_eq!(due, ["x-2", "x-1"], "oldest first, every tenant's");
    assert_eq!(store.due_extraction_jobs(T0 + 15, 10)?.len(), 1);
    assert_eq!(store.due_extraction_jobs(T0 + 20, 1)?.len(), 1);
    let mut done = job(a, "x-1", T0 + 20);
    done.state = "done".into();
    done.attempts = 1;
    done.report_json = Some("{\"proposed\":1}".into());
    assert!(store.update_extraction_job(&done)?);
    // Another tenant's job of that id is not updated.
    assert!(!store.update_extraction_job(&job(b, "x-1", T0))?);
    assert_eq!(
        store.extraction_job_counts()?,
        [("done".to_owned(), 1), ("pending".to_owned(), 1)]
    );
    let recent = store.recent_extraction_jobs(10)?;
    assert_eq!(recent.len(), 2);
    assert_eq!(recent[0], done, "the latest queued first, as updated");

    // An earlier server's rows are imported once (a backend whose
    // migration moved them has nothing to import).
    if !store.intake_imported()? {
        let import = IntakeImport {
            jobs: vec![job(a, "x-old", T0)],
            ..IntakeImport::default()
        };
        assert!(store.import_intake(&import)?);
        assert!(store.intake_imported()?);
        assert!(!store.import_intake(&import)?, "imported once");
        assert_eq!(store.recent_extraction_jobs(10)?.len(), 3);
    }
    Ok(())
}

/// Keys, tenant settings, policy history, verifiers and server settings
/// are the store's rows: a key is found by its hash and disabled by id or
/// with its principal; a policy change writes the policy, its settings,
/// its history and every principal's re-bound grant in one transaction
/// (the write path then accepts under the new digest); a verifier is one
/// tenant's only; a setting keeps its first value; an earlier server's
/// rows are imported once; everything survives a reopen.
pub fn directory_rows_are_the_stores<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    use crate::directory::{
        ApiKey, DirectoryImport, StoredVerifier, TenantPolicyUpdate, TenantSettings,
    };
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    let (a, b) = (fixtures::TENANT_A, fixtures::TENANT_B);

    // Keys.
    let key = |id: &str, role: &str, tenant: Option<&str>, principal: Option<&str>| ApiKey {
        key_id: id.into(),
        key_sha256: fixtures::label(id),
        role: role.into(),
        tenant_id: tenant.map(Into::into),
        principal_id: principal.map(Into::into),
        bounds_json: (role == "application").then(|| "{\"kinds\":[]}".to_owned()),
        created_at_ms: T0,
        disabled: false,
    };
    let admin = key("k-admin", "admin", None, None);
    let alice = key("k-alice", "principal", Some(a), Some("alice"));
    let alice2 = key("k-alice-2", "principal", Some(a), Some("alice"));
    let app = key("k-app", "application", Some(b), None);
    for k in [&admin, &alice, &alice2, &app] {
        store.insert_api_key(k)?;
    }
    assert!(
        store.insert_api_key(&alice).is_err(),
        "a key id is stored once"
    );
    let mut bad = key("k-bad", "root", None, None);
    bad.key_sha256 = fixtures::label("k-bad");
    assert!(matches!(
        store.insert_api_key(&bad),
        Err(StoreError::InvalidArgument(_))
    ));
    assert_eq!(
        store.api_key_by_sha256(&alice.key_sha256)?,
        Some(alice.clone())
    );
    assert_eq!(store.api_key_by_sha256(&app.key_sha256)?, Some(app.clone()));
    assert_eq!(store.api_key_by_sha256(&fixtures::label("nobody"))?, None);
    assert_eq!(store.enabled_admin_keys()?, 1);
    assert_eq!(
        store
            .api_keys()?
            .iter()
            .map(|k| k.key_id.as_str())
            .collect::<Vec<_>>(),
        ["k-admin", "k-alice", "k-alice-2", "k-app"]
    );
    assert!(store.disable_api_key("k-admin")?);
    assert!(!store.disable_api_key("k-none")?);
    assert_eq!(store.enabled_admin_keys()?, 0);
    assert_eq!(store.disable_principal_api_keys(a, "alice")?, 2);
    assert_eq!(store.disable_principal_api_keys(b, "alice")?, 0);
    assert!(
        store
            .api_key_by_sha256(&alice2.key_sha256)?
            .is_some_and(|k| k.disabled)
    );
    assert!(
        store
            .api_key_by_sha256(&app.key_sha256)?
            .is_some_and(|k| !k.disabled),
        "another tenant's key is untouched"
    );

    // Server settings: the first value stays.
    assert_eq!(store.setting_or_insert("embedder", "e1")?, "e1");
    assert_eq!(store.setting_or_insert("embedder", "e2")?, "e1");

    // Tenants: the seeded ones exist, with the instant of their policy.
    assert_eq!(store.tenant_ids()?, [a, b]);
    let seeded = store.tenant_settings(a)?.expect("seeded tenant");
    assert_eq!(seeded.policy_valid_from_ms, T0 - fixtures::DAY_MS);
    assert_eq!(seeded.claim_updates, None);
    assert_eq!(store.tenant_settings("tenant-unknown")?, None);
    assert_eq!(
        store.earlier_policies(a, &fixtures::policy(a).policy_sha256, 10)?,
        Vec::<String>::new()
    );

    // A policy change: policy, settings, history and re-bound grants.
    let mut next = fixtures::policy(a);
    next.max_ttl_ms /= 2;
    next.policy_sha256 = fixtures::label("policy/tenant-a/v2");
    store.put_tenant_policy(&TenantPolicyUpdate {
        policy: next.clone(),
        at_ms: T0,
        claim_updates: Some("review".into()),
        write_guards_json: Some("{\"near_duplicate_permille\":800}".into()),
    })?;
    assert_eq!(store.current_policy(a)?, Some(next.clone()));
    assert_eq!(
        store.tenant_settings(a)?,
        Some(TenantSettings {
            tenant_id: a.into(),
            policy_valid_from_ms: T0,
            claim_updates: Some("review".into()),
            write_guards_json: Some("{\"near_duplicate_permille\":800}".into()),
        })
    );
    for principal in ["alice", "bob"] {
        let grant = store.current_grant(a, principal)?.expect("grant");
        assert_eq!(
            grant.policy_sha256, next.policy_sha256,
            "{principal} re-bound"
        );
    }
    assert_eq!(
        store.current_grant(b, "alice")?.map(|g| g.policy_sha256),
        Some(fixtures::policy(b).policy_sha256),
        "another tenant's grants keep their policy"
    );
    let mut request = Spec::workspace(a, "alice", "dir-1").build();
    request
        .proposal
        .policy_sha256
        .clone_from(&next.policy_sha256);
    let outcome = store.write(&request)?;
    assert!(outcome.is_accepted(), "{:?}", outcome.decision);
    // Options not given are kept.
    let mut third = next.clone();
    third.policy_sha256 = fixtures::label("policy/tenant-a/v3");
    store.put_tenant_policy(&TenantPolicyUpdate {
        policy: third.clone(),
        at_ms: T0 + 1,
        claim_updates: None,
        write_guards_json: None,
    })?;
    let kept = store.tenant_settings(a)?.expect("tenant");
    assert_eq!(kept.claim_updates.as_deref(), Some("review"));
    assert_eq!(kept.policy_valid_from_ms, T0 + 1);
    assert_eq!(
        store.earlier_policies(a, &third.policy_sha256, 10)?,
        [
            next.policy_sha256.clone(),
            fixtures::policy(a).policy_sha256
        ]
    );
    assert_eq!(store.earlier_policies(a, &third.policy_sha256, 1)?.len(), 1);
    assert_eq!(
        store.earlier_policies(b, &fixtures::policy(b).policy_sha256, 10)?,
        Vec::<String>::new(),
        "another tenant's history is its own"
    );

    // Verifiers: one tenant's only.
    let verifier = StoredVerifier {
        tenant_id: a.into(),
        verifier_id: "v1".into(),
        verifier_release: "checker-1".into(),
        public_key_hex: "ab".repeat(32),
        created_at_ms: T0,
        disabled: false,
    };
    assert!(store.insert_verifier(&verifier)?);
    assert!(!store.insert_verifier(&verifier)?, "registered once");
    assert_eq!(
        store.verifiers(a, Some("v1"))?,
        std::slice::from_ref(&verifier)
    );
    assert_eq!(store.verifiers(b, Some("v1"))?, []);
    assert_eq!(store.verifiers(b, None)?, []);
    assert!(!store.disable_verifier(b, "v1")?, "not another tenant's");
    assert!(store.disable_verifier(a, "v1")?);
    assert!(store.verifiers(a, None)?[0].disabled);

    // An earlier server's rows: imported once.
    let import = DirectoryImport {
        keys: vec![key("k-old", "principal", Some(b), Some("bob"))],
        tenants: vec![TenantSettings {
            tenant_id: b.into(),
            policy_valid_from_ms: T0 - 5,
            claim_updates: Some("review".into()),
            write_guards_json: None,
        }],
        policy_history: vec![(b.into(), fixtures::label("policy/tenant-b/v0"), T0 - 9)],
        verifiers: vec![StoredVerifier {
            tenant_id: b.into(),
            ..verifier.clone()
        }],
        settings: vec![("embedder".into(), "e-old".into())],
    };
    if !store.directory_imported()? {
        assert!(store.import_directory(&import)?);
        assert!(store.directory_imported()?);
        let old = store
            .api_key_by_sha256(&fixtures::label("k-old"))?
            .expect("imported key");
        assert_eq!(old.principal_id.as_deref(), Some("bob"));
        assert_eq!(
            store.tenant_settings(b)?.and_then(|t| t.claim_updates),
            Some("review".into())
        );
        assert_eq!(
            store.earlier_policies(b, &fixtures::policy(b).policy_sha256, 10)?,
            [fixtures::label("policy/tenant-b/v0")]
        );
        assert_eq!(store.verifiers(b, None)?.len(), 1);
        assert_eq!(
            store.setting_or_insert("embedder", "e3")?,
            "e1",
            "a setting is kept"
        );
    }
    assert!(!store.import_directory(&import)?, "imported once");

    // Everything survives a reopen.
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(
        store.api_keys()?.len(),
        if store
            .api_key_by_sha256(&fixtures::label("k-old"))?
            .is_some()
        {
            5
        } else {
            4
        }
    );
    assert_eq!(
        store.tenant_settings(a)?.map(|t| t.policy_valid_from_ms),
        Some(T0 + 1)
    );
    assert_eq!(store.verifiers(a, None)?.len(), 1);
    assert_eq!(store.setting_or_insert("embedder", "e4")?, "e1");
    Ok(())
}
