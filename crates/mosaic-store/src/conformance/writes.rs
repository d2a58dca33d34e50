//! The write path: accepted, rejected and mismatched writes, index
//! acknowledgements and activation, batches, reopening, the audit head,
//! the current policy and grant, and claims.

use super::*;

/// Point 2: one accepted write commits record, receipt, sources, outbox and
/// audit; retrying it creates nothing new; its receipt re-verifies.
pub fn accepted_write_commits_and_is_idempotent<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    let first = store.write(&request)?;
    assert!(
        first.is_accepted(),
        "baseline write must be accepted: {:?}",
        first.decision
    );
    assert!(!first.replayed);
    let audit_before = match store.verify_audit_chain()? {
        AuditVerification::Intact { events, .. } => events,
        broken => panic!("audit chain broken: {broken:?}"),
    };
    let stored = store.get_record("r1")?.expect("record stored");
    assert_eq!(stored.state, RecordState::Publishing);
    assert_eq!(stored.content, request.content);
    // The write guards' read: a publishing record is live, for its own
    // tenant, kind and subject only.
    let ids = ["r1".to_owned(), "unknown".to_owned()];
    let (kind, subject) = (stored.record.kind, &stored.record.subject);
    assert_eq!(
        store.live_contents(fixtures::TENANT_A, &ids, kind, subject)?,
        vec![("r1".to_owned(), request.content.clone())]
    );
    assert!(
        store
            .live_contents(fixtures::TENANT_B, &ids, kind, subject)?
            .is_empty()
    );
    let other_kind = MemoryKind::ALL
        .into_iter()
        .find(|k| *k != kind)
        .expect("more than one kind");
    assert!(
        store
            .live_contents(fixtures::TENANT_A, &ids, other_kind, subject)?
            .is_empty()
    );
    let other_subject = MemorySubject::Principal {
        principal_id: "bob".into(),
    };
    assert_ne!(subject, &other_subject);
    assert!(
        store
            .live_contents(fixtures::TENANT_A, &ids, kind, &other_subject)?
            .is_empty()
    );
    // Recall's read of the texts it hands off: any state, the tenant's
    // own only.
    assert_eq!(
        store.contents_of(fixtures::TENANT_A, &ids)?,
        vec![("r1".to_owned(), request.content.clone())]
    );
    assert!(store.contents_of(fixtures::TENANT_B, &ids)?.is_empty());
    assert_eq!(stored.line_generation, 1);
    for target in &config.required_index_targets {
        let tasks = store.pending_outbox(target, 10)?;
        assert_eq!(tasks.len(), 1, "one outbox row per target");
        assert_eq!(tasks[0].op, OutboxOp::Publish);
        assert_eq!(tasks[0].content.as_deref(), Some(request.content.as_str()));
    }
    store.verify_write_receipt(&request.proposal.proposal_id)?;
    assert_eq!(
        store.write_receipt(&request.proposal.proposal_id)?.as_ref(),
        Some(&first.receipt),
        "the stored receipt reads back"
    );
    assert_eq!(store.write_receipt("no-such-proposal")?, None);

    // Retry, even at a later instant: same decision, nothing new.
    let mut retry = request.clone();
    retry.now_unix_ms += 5_000;
    let second = store.write(&retry)?;
    assert!(second.replayed);
    assert_eq!(second.decision, first.decision);
    assert_eq!(second.receipt, first.receipt);
    match store.verify_audit_chain()? {
        AuditVerification::Intact { events, .. } => assert_eq!(events, audit_before),
        broken => panic!("audit chain broken: {broken:?}"),
    }
    for target in &config.required_index_targets {
        assert_eq!(store.pending_outbox(target, 10)?.len(), 1);
    }
    // Same proposal id, different request: refused.
    let mut reused = Spec::principal(fixtures::TENANT_A, "alice", "r1-other").build();
    reused.proposal.proposal_id = request.proposal.proposal_id.clone();
    assert!(matches!(
        store.write(&reused),
        Err(StoreError::ProposalIdReused(_))
    ));
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    Ok(())
}

/// Point 2: a rejected proposal stores its receipt and nothing else.
pub fn rejected_write_stores_only_its_receipt<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    // Principal semantic memory without consent: the gate rejects.
    let mut spec = Spec::principal(fixtures::TENANT_A, "alice", "r-noconsent");
    spec.with_consent = false;
    let request = spec.build();
    let events_before = audit_events(&mut store)?;
    let outcome = store.write(&request)?;
    match &outcome.decision {
        WriteDecision::Rejected {
            violations,
            review_case_ids,
        } => {
            assert!(
                violations
                    .iter()
                    .any(|v| matches!(v, MemoryWriteViolation::MissingConsent { .. })),
                "{violations:?}"
            );
            assert!(review_case_ids.is_empty());
        }
        other => panic!("expected rejection, got {other:?}"),
    }
    assert!(store.get_record("r-noconsent")?.is_none());
    for target in &config.required_index_targets {
        assert!(store.pending_outbox(target, 10)?.is_empty());
    }
    assert_eq!(audit_events(&mut store)?, events_before);
    // The rejection receipt is stored and re-verifies.
    store.verify_write_receipt(&request.proposal.proposal_id)?;
    let replay = store.write(&request)?;
    assert!(replay.replayed && !replay.is_accepted());
    Ok(())
}

/// Point 2: the store binds content bytes to `content_sha256`.
pub fn content_digest_mismatch_stores_nothing<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let (_db, mut store) = setup(factory, &test_config())?;
    let mut request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    request.content.push_str(" (tampered)");
    assert!(matches!(
        store.write(&request),
        Err(StoreError::ContentDigestMismatch)
    ));
    assert!(store.get_record("r1")?.is_none());
    assert!(matches!(
        store.verify_write_receipt(&request.proposal.proposal_id),
        Err(StoreError::NotFound { .. })
    ));
    Ok(())
}

/// Point 8: a record is unreadable until every required index acknowledged
/// its publication generation.
pub fn reads_wait_for_every_required_index<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let q = alice_run_1();
    assert!(
        readable_ids(&mut store, &q)?.is_empty(),
        "publishing record must be unreadable"
    );
    // The writer's readability check: states by id, the tenant's only.
    let ids = ["r1".to_owned(), "unknown".to_owned(), "r1".to_owned()];
    let states = |store: &mut F::Store, tenant: &str| store.record_states_of(tenant, &ids);
    assert_eq!(
        states(&mut store, fixtures::TENANT_A)?,
        vec![("r1".to_owned(), RecordState::Publishing)]
    );
    assert_eq!(states(&mut store, fixtures::TENANT_B)?, vec![]);
    let lexical = store.pending_outbox("lexical", 10)?;
    let ack = store.acknowledge_index("r1", lexical[0].generation, "lexical", T0 + 1)?;
    assert!(!ack.activated);
    assert_eq!(ack.record_state, Some(RecordState::Publishing));
    assert!(
        readable_ids(&mut store, &q)?.is_empty(),
        "one of two indexes is not enough"
    );
    // Duplicate acknowledgement is idempotent.
    let again = store.acknowledge_index("r1", lexical[0].generation, "lexical", T0 + 2)?;
    assert!(again.duplicate && !again.activated);
    assert_eq!(again.record_state, Some(RecordState::Publishing));
    let vector = store.pending_outbox("vector", 10)?;
    let ack = store.acknowledge_index("r1", vector[0].generation, "vector", T0 + 3)?;
    assert!(ack.activated);
    assert_eq!(ack.record_state, Some(RecordState::Active));
    assert_eq!(readable_ids(&mut store, &q)?, vec!["r1".to_string()]);
    assert_eq!(
        states(&mut store, fixtures::TENANT_A)?,
        vec![("r1".to_owned(), RecordState::Active)]
    );
    // The activation event names the record's tenant.
    let trail = store.record_audit_trail("r1")?;
    let activated = trail
        .iter()
        .find(|e| e.kind == crate::audit::AuditKind::RecordActivated)
        .expect("an activation event");
    assert_eq!(activated.tenant_id, fixtures::TENANT_A);
    assert!(store.pending_outbox("vector", 10)?.is_empty());
    // A generation never issued is refused.
    assert!(
        store
            .acknowledge_index("r1", vector[0].generation + 7, "vector", T0 + 4)
            .is_err()
    );
    Ok(())
}

/// Point 8, degraded activation: a failed index that the policy names
/// optional may be omitted, and the activation event records the omission;
/// a required index's failure keeps the record unreadable.
pub fn degraded_activation_needs_policy_and_records_the_omission<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let q = alice_run_1();
    let refused =
        |r: StoreResult<AckOutcome>| matches!(r, Err(StoreError::DegradedActivationRefused { .. }));

    // Policy without optional indexes: the vector index's failure keeps the
    // record unreadable and its publication visible in the outbox.
    let (_db, mut store) = setup(factory, &test_config())?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let lexical = store.pending_outbox("lexical", 10)?;
    store.acknowledge_index("r1", lexical[0].generation, "lexical", T0 + 1)?;
    let vector = store.pending_outbox("vector", 10)?;
    assert!(refused(store.activate_degraded(
        "r1",
        vector[0].generation,
        &["vector"],
        T0 + 2
    )));
    assert!(readable_ids(&mut store, &q)?.is_empty());
    assert_eq!(store.pending_outbox("vector", 10)?.len(), 1);

    // Policy naming the vector index optional.
    let config = StoreConfig {
        optional_index_targets: vec!["vector".into()],
        ..test_config()
    };
    let (_db, mut store) = setup(factory, &config)?;
    store.write(&request)?;
    let vector = store.pending_outbox("vector", 10)?;
    let generation = vector[0].generation;
    // Not before every other index acknowledged.
    assert!(refused(store.activate_degraded(
        "r1",
        generation,
        &["vector"],
        T0 + 1
    )));
    let lexical = store.pending_outbox("lexical", 10)?;
    store.acknowledge_index("r1", lexical[0].generation, "lexical", T0 + 2)?;
    // Never without a required index, nor with an unknown or empty list.
    assert!(refused(store.activate_degraded(
        "r1",
        generation,
        &["lexical"],
        T0 + 3
    )));
    assert!(refused(store.activate_degraded(
        "r1",
        generation,
        &["vector", "lexical"],
        T0 + 3
    )));
    assert!(
        store
            .activate_degraded("r1", generation, &[], T0 + 3)
            .is_err()
    );
    assert!(
        store
            .activate_degraded("r1", generation + 1, &["vector"], T0 + 3)
            .is_err()
    );
    assert!(readable_ids(&mut store, &q)?.is_empty());

    let outcome = store.activate_degraded("r1", generation, &["vector"], T0 + 4)?;
    assert!(outcome.activated);
    assert_eq!(outcome.record_state, Some(RecordState::Active));
    assert_eq!(readable_ids(&mut store, &q)?, vec!["r1".to_string()]);
    let trail = store.record_audit_trail("r1")?;
    let activation = trail
        .iter()
        .find(|e| e.kind == AuditKind::RecordActivated)
        .expect("an activation event");
    assert_eq!(activation.payload["degraded"], serde_json::json!(true));
    assert_eq!(
        activation.payload["omitted_targets"],
        serde_json::json!(["vector"])
    );
    assert_eq!(activation.at_unix_ms, T0 + 4);
    // The omitted publication stays queued; its late acknowledgement
    // completes it without a second activation.
    assert_eq!(store.pending_outbox("vector", 10)?.len(), 1);
    let late = store.acknowledge_index("r1", generation, "vector", T0 + 5)?;
    assert!(!late.activated && !late.duplicate);
    assert!(store.pending_outbox("vector", 10)?.is_empty());
    assert!(matches!(
        store.activate_degraded("r1", generation, &["vector"], T0 + 6),
        Err(StoreError::InvalidState { .. })
    ));
    assert_eq!(
        store
            .record_audit_trail("r1")?
            .iter()
            .filter(|e| e.kind == AuditKind::RecordActivated)
            .count(),
        1
    );
    audit_events(&mut store)?;
    Ok(())
}

/// The audit head can be published to an external witness and checked
/// later: the digest stored for a sequence number is the head digest the
/// chain walk reported when that event was the last. The log is also a
/// Merkle tree: the head the store keeps is the tree the walk rebuilds, and
/// its proofs show an event in a tree and an earlier tree inside a later
/// one, which a changed root or leaf refutes.
pub fn audit_head_can_be_witnessed<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    use mosaic_harness::merkle;
    let (_db, mut store) = setup(factory, &test_config())?;
    let AuditVerification::Intact {
        events: before,
        head_sha256: witnessed,
        root_sha256: witnessed_root,
    } = store.verify_audit_chain()?
    else {
        panic!("a fresh chain is intact");
    };
    assert!(before > 0, "seeding writes audit events");
    let kept = store.audit_tree_head()?;
    assert_eq!(
        (kept.tree_size, &kept.root_sha256, &kept.chain_sha256),
        (before, &witnessed_root, &witnessed)
    );
    store.write(&Spec::principal(fixtures::TENANT_B, "alice", "r1").build())?;
    let AuditVerification::Intact {
        events: after,
        head_sha256: head,
        root_sha256: root,
    } = store.verify_audit_chain()?
    else {
        panic!("the chain stays intact");
    };
    assert!(after > before);
    assert_eq!(store.audit_event_sha256(before)?, Some(witnessed.clone()));
    assert_eq!(store.audit_event_sha256(after)?, Some(head.clone()));
    assert_ne!(witnessed, head);
    assert_eq!(store.audit_event_sha256(after + 1)?, None);
    assert_eq!(store.audit_event_sha256(0)?, None);
    assert_eq!(store.audit_tree_head()?.root_sha256, root);
    assert_ne!(root, witnessed_root);

    let (old_root, new_root) = (
        merkle::from_hex(&witnessed_root).map_err(|e| StoreError::Corrupt(e.to_string()))?,
        merkle::from_hex(&root).map_err(|e| StoreError::Corrupt(e.to_string()))?,
    );
    // The earlier tree is a prefix of the later one.
    let (proof, first, second) = store.audit_consistency_proof(before, after)?;
    assert_eq!((first, second), (witnessed_root.clone(), root.clone()));
    assert_eq!(proof.verify(&old_root, &new_root), Ok(()));
    assert!(proof.verify(&new_root, &new_root).is_err());
    // Every event is in both trees it belongs to, under its own leaf.
    for seq in 1..=after {
        let (inclusion, at) = store.audit_inclusion_proof(seq, after)?;
        assert_eq!(at, root);
        assert_eq!(inclusion.verify(&new_root), Ok(()), "event {seq}");
        assert!(inclusion.verify(&old_root).is_err());
        if seq <= before {
            let (inclusion, at) = store.audit_inclusion_proof(seq, before)?;
            assert_eq!(at, witnessed_root);
            assert_eq!(inclusion.verify(&old_root), Ok(()), "event {seq}");
        }
    }
    // The last event's leaf is its body's.
    let (inclusion, _) = store.audit_inclusion_proof(after, after)?;
    let trail = store.record_audit_trail("r1")?;
    let last = trail
        .iter()
        .find(|e| e.seq == after)
        .ok_or_else(|| StoreError::Corrupt("the last event names r1".into()))?;
    assert_eq!(inclusion.leaf_sha256, last.digests()?.1);
    // Nothing past the log, and no empty or reversed sizes.
    for (seq, size) in [(0, after), (after + 1, after + 1), (1, after + 1)] {
        assert!(matches!(
            store.audit_inclusion_proof(seq, size),
            Err(StoreError::NotFound { .. })
        ));
    }
    for (first, second) in [(0, after), (after, before), (1, after + 1)] {
        assert!(matches!(
            store.audit_consistency_proof(first, second),
            Err(StoreError::NotFound { .. })
        ));
    }
    Ok(())
}

/// Point 4: a worker holding the publication generation cannot publish a
/// record revoked at a newer generation.
pub fn stale_index_generation_is_refused<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let task = store.pending_outbox("lexical", 10)?.remove(0);
    store.revoke(
        "r1",
        &RevocationReason::Requested,
        &fixtures::authorization("ops"),
        T0 + 5,
    )?;
    match store.acknowledge_index("r1", task.generation, "lexical", T0 + 6) {
        Err(StoreError::StaleIndexGeneration { held, current, .. }) => assert!(held < current),
        other => panic!("expected StaleIndexGeneration, got {other:?}"),
    }
    assert_eq!(
        store.get_record("r1")?.map(|r| r.state),
        Some(RecordState::Revoked)
    );
    Ok(())
}

/// Point 12: a batch commits several gate outcomes in one transaction, and
/// an error in any request rolls back all of them.
pub fn batch_write_is_one_transaction<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let mut batch = Vec::new();
    for idx in 0..5 {
        batch.push(Spec::workspace(fixtures::TENANT_A, "alice", &format!("batch-{idx}")).build());
    }
    let mut bad = batch.clone();
    bad[3].content.push('!');
    assert!(matches!(
        store.write_batch(&bad),
        Err(StoreError::ContentDigestMismatch)
    ));
    for idx in 0..5 {
        assert!(
            store.get_record(&format!("batch-{idx}"))?.is_none(),
            "batch must roll back"
        );
    }
    let outcomes = store.write_batch(&batch)?;
    assert_eq!(outcomes.len(), 5);
    assert!(outcomes.iter().all(|o| o.is_accepted() && !o.replayed));
    assert!(accepted_id(&outcomes[4].decision) == Some("batch-4"));
    assert_eq!(store.pending_outbox("lexical", 100)?.len(), 5);
    assert!(store.write_batch(&[]).is_err());
    Ok(())
}

/// Point 10/11: everything committed survives dropping every connection.
pub fn state_survives_reopen<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    let outcome = store.write(&request)?;
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let token = store.revoke(
        "r1",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0 + 5,
    )?;
    let generation = token.revocation_generation();
    drop(token);
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(store.revocation_generation()?, generation);
    assert!(matches!(
        store.resume_revocation("r1")?,
        Some(RevocationState::Ineligible(_))
    ));
    assert_eq!(store.write(&request)?.receipt, outcome.receipt);
    store.verify_write_receipt(&request.proposal.proposal_id)?;
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    // Subjects keep their shape.
    let stored = store.get_record("r1")?.expect("still stored until erased");
    assert!(matches!(
        stored.record.subject,
        MemorySubject::Principal { .. }
    ));
    Ok(())
}

/// Index acknowledgements committed [`Durability::Deferred`] act as synced
/// ones: one transaction activates the record, its tenant's reads see it,
/// a stale row is refused alone, and the activation is still there when the
/// store is opened again (a commit that returned is in the database's log;
/// only a power cut may lose it). The connection's later writes still
/// commit.
pub fn deferred_acknowledgements_activate_and_persist<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "r1").build())?;
    let mut acks = Vec::new();
    for target in &config.required_index_targets {
        for task in store.pending_outbox(target, 10)? {
            acks.push(IndexAck {
                record_id: task.record_id,
                generation: task.generation,
                target: task.target,
            });
        }
    }
    assert_eq!(acks.len(), config.required_index_targets.len());
    let stale = IndexAck {
        generation: acks[0].generation + 7,
        ..acks[0].clone()
    };
    acks.push(stale);
    let results = store.acknowledge_indexes(&acks, T0 + 1, Durability::Deferred)?;
    assert_eq!(results.len(), acks.len());
    assert!(results[..acks.len() - 1].iter().all(Result::is_ok));
    assert!(results[acks.len() - 1].is_err(), "the stale row is refused");
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .any(|outcome| outcome.activated)
    );
    let q = alice_run_1();
    assert_eq!(readable_ids(&mut store, &q)?, vec!["r1".to_string()]);
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(
        store.record_states_of(fixtures::TENANT_A, &["r1".to_owned()])?,
        vec![("r1".to_owned(), RecordState::Active)]
    );
    for target in &config.required_index_targets {
        assert!(store.pending_outbox(target, 10)?.is_empty());
    }
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "r2").build())?;
    assert_eq!(
        store.record_states_of(fixtures::TENANT_A, &["r2".to_owned()])?,
        vec![("r2".to_owned(), RecordState::Publishing)]
    );
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    Ok(())
}

/// The latest creation instant is 0 on a fresh store, rises with each
/// accepted write (in another tenant too: it is store-wide), is never
/// lowered by a write with an earlier instant, nor by a rejected one, and
/// holds across a reopen and an erasure of the record that set it.
pub fn latest_creation_instant_only_rises<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    assert_eq!(store.latest_created_at()?, 0);
    let created = |store: &mut F::Store, id: &str| -> StoreResult<u64> {
        Ok(store
            .get_record(id)?
            .expect("written")
            .record
            .created_at_unix_ms)
    };
    let mut first = Spec::principal(fixtures::TENANT_A, "alice", "r-first");
    first.now = T0 + 10;
    assert!(store.write(&first.build())?.is_accepted());
    let first_at = created(&mut store, "r-first")?;
    assert_eq!(store.latest_created_at()?, first_at);
    let mut later = Spec::principal(fixtures::TENANT_B, "alice", "r-later");
    later.now = T0 + 20;
    assert!(store.write(&later.build())?.is_accepted());
    let later_at = created(&mut store, "r-later")?;
    assert!(later_at > first_at);
    assert_eq!(store.latest_created_at()?, later_at);
    // An earlier instant, accepted: the latest stays.
    let mut earlier = Spec::principal(fixtures::TENANT_A, "alice", "r-earlier");
    earlier.now = T0 + 5;
    assert!(store.write(&earlier.build())?.is_accepted());
    assert_eq!(store.latest_created_at()?, later_at);
    // A rejection creates no record and moves nothing.
    let mut rejected = Spec::principal(fixtures::TENANT_A, "alice", "r-rejected");
    rejected.now = T0 + 30;
    rejected.with_consent = false;
    assert!(!store.write(&rejected.build())?.is_accepted());
    assert_eq!(store.latest_created_at()?, later_at);
    // Erasing the record that set it leaves it: instants are never reused.
    publish_all(&mut store, &config.required_index_targets, T0 + 40)?;
    revoke_to_receipt(
        &mut store,
        "r-later",
        &config.required_index_targets,
        T0 + 50,
    )?;
    assert!(store.get_record("r-later")?.is_none());
    assert!(
        store
            .contents_of(fixtures::TENANT_B, &["r-later".to_owned()])?
            .is_empty(),
        "an erased record's text is gone"
    );
    assert_eq!(store.latest_created_at()?, later_at);
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(store.latest_created_at()?, later_at);
    Ok(())
}

/// `current_policy` and `current_grant` return exactly what the write path
/// re-reads: the last stored value per tenant and per (tenant, principal).
pub fn current_policy_and_grant_read_back<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let (a, b) = (fixtures::TENANT_A, fixtures::TENANT_B);
    assert_eq!(store.current_policy(a)?, Some(fixtures::policy(a)));
    assert_eq!(store.current_policy(b)?, Some(fixtures::policy(b)));
    assert_eq!(store.current_policy("tenant-unknown")?, None);
    assert_eq!(
        store.current_grant(a, "bob")?,
        Some(fixtures::grant(a, "bob"))
    );
    assert_eq!(
        store.current_grant(b, "bob")?,
        None,
        "bob has no grant in B"
    );
    assert_eq!(store.current_grant(a, "carol")?, None);

    // Replacing them: the last one stored is in force, for the write path
    // too.
    let mut narrowed = fixtures::grant(a, "alice");
    narrowed.grant_id = "grant-alice-narrow".into();
    narrowed.allowed_kinds = vec![mosaic_harness::MemoryKind::Working];
    store.put_grant(&narrowed, T0)?;
    assert_eq!(store.current_grant(a, "alice")?, Some(narrowed));
    assert_eq!(
        store.current_grant(b, "alice")?,
        Some(fixtures::grant(b, "alice")),
        "another tenant's grant is untouched"
    );
    assert!(
        !store
            .write(&Spec::principal(a, "alice", "a-1").build())?
            .is_accepted(),
        "the write path uses the grant current_grant reports"
    );
    let mut policy = fixtures::policy(a);
    policy.max_ttl_ms /= 2;
    store.put_policy(&policy, T0)?;
    assert_eq!(store.current_policy(a)?, Some(policy));
    assert_eq!(store.current_policy(b)?, Some(fixtures::policy(b)));
    Ok(())
}

/// `read_access` answers, in one snapshot, what the separate reads answer
/// (settings, policy, grant, earlier policies, change stamp and access
/// generation), each in the asked tenant only; every change of a policy,
/// a grant or a tenant's settings moves the access generation (and the
/// change stamp), and a record's write, activation or revocation moves the
/// change stamp and not the access generation: what lets a reader keep an
/// access read for as long as the generation stays the same.
pub fn access_read_agrees_with_each_read_and_moves_with_the_stamp<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    use crate::directory::{AccessRead, TenantPolicyUpdate};
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let (a, b) = (fixtures::TENANT_A, fixtures::TENANT_B);
    let each = |store: &mut F::Store, tenant: &str, principal: &str| -> StoreResult<AccessRead> {
        let policy = store.current_policy(tenant)?;
        let earlier_policies = match &policy {
            Some(p) => store.earlier_policies(tenant, &p.policy_sha256, 1)?,
            None => Vec::new(),
        };
        let stamp = store.access_stamp()?;
        assert_eq!(stamp.change, store.change_stamp()?);
        Ok(AccessRead {
            stamp: stamp.change,
            access_generation: stamp.access_generation,
            settings: store.tenant_settings(tenant)?,
            policy,
            grant: store.current_grant(tenant, principal)?,
            earlier_policies,
        })
    };
    let agree = |store: &mut F::Store, tenant: &str, principal: &str| -> StoreResult<AccessRead> {
        let read = store.read_access(tenant, principal, 1)?;
        assert_eq!(
            read,
            each(store, tenant, principal)?,
            "{tenant}/{principal}"
        );
        Ok(read)
    };
    let first = agree(&mut store, a, "alice")?;
    assert!(first.settings.is_some() && first.policy.is_some() && first.grant.is_some());
    assert!(first.earlier_policies.is_empty());
    // Another tenant's principal, and a tenant that does not exist: the
    // other tenant's rows are never answered.
    assert_eq!(
        agree(&mut store, b, "bob")?.grant,
        None,
        "bob has no grant in B"
    );
    let unknown = agree(&mut store, "tenant-unknown", "alice")?;
    assert_eq!(
        (unknown.settings, unknown.policy, unknown.grant),
        (None, None, None)
    );
    assert!(unknown.earlier_policies.is_empty());

    // Records written, published and revoked: the stamp moves, the access
    // generation does not.
    let written = Spec::principal(a, "alice", "access-kept").build();
    store.write(&written)?;
    publish_all(&mut store, &config.required_index_targets, T0)?;
    store.revoke(
        "access-kept",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0,
    )?;
    let after_records = agree(&mut store, a, "alice")?;
    assert_ne!(after_records.stamp, first.stamp, "records move the stamp");
    assert_eq!(
        after_records.access_generation, first.access_generation,
        "records leave the access generation"
    );

    // A grant put: the stamp moves and the new grant is read.
    let mut narrowed = fixtures::grant(a, "alice");
    narrowed.grant_id = "grant-alice-narrow".into();
    narrowed.allowed_kinds = vec![mosaic_harness::MemoryKind::Working];
    store.put_grant(&narrowed, T0)?;
    let after_grant = agree(&mut store, a, "alice")?;
    assert_ne!(
        after_grant.stamp, first.stamp,
        "a grant put moves the stamp"
    );
    assert!(
        after_grant.access_generation > after_records.access_generation,
        "a grant put moves the access generation"
    );
    assert_eq!(after_grant.grant, Some(narrowed));

    // A policy put: the stamp moves, the earlier policy is listed.
    let mut next = fixtures::policy(a);
    next.max_ttl_ms /= 2;
    next.policy_sha256 = fixtures::label("policy/tenant-a/access-v2");
    store.put_policy(&next, T0 + 1)?;
    let after_policy = agree(&mut store, a, "alice")?;
    assert_ne!(
        after_policy.stamp, after_grant.stamp,
        "a policy put moves the stamp"
    );
    assert!(
        after_policy.access_generation > after_grant.access_generation,
        "a policy put moves the access generation"
    );
    assert_eq!(after_policy.policy, Some(next.clone()));
    assert_eq!(
        after_policy.earlier_policies,
        [fixtures::policy(a).policy_sha256]
    );

    // The settings alone changed (the same policy put again): the stamp
    // moves all the same.
    store.put_tenant_policy(&TenantPolicyUpdate {
        policy: next,
        at_ms: T0 + 2,
        claim_updates: Some("review".into()),
        write_guards_json: None,
    })?;
    let after_settings = agree(&mut store, a, "alice")?;
    assert_ne!(
        after_settings.stamp, after_policy.stamp,
        "a settings change moves the stamp"
    );
    assert!(
        after_settings.access_generation > after_policy.access_generation,
        "a settings change moves the access generation"
    );
    assert_eq!(
        after_settings
            .settings
            .and_then(|s| s.claim_updates)
            .as_deref(),
        Some("review")
    );
    // The other tenant's access read is untouched by all of it.
    let other = agree(&mut store, b, "alice")?;
    assert_eq!(other.policy, Some(fixtures::policy(b)));
    assert_eq!(other.grant, Some(fixtures::grant(b, "alice")));
    Ok(())
}

/// A record's structured claims are written in its own write transaction:
/// they exist exactly when the record does. A transaction that fails after
/// writing them (a batch whose last request fails) leaves neither; a
/// rejected proposal leaves none; an accepted one leaves both, found by
/// their key in the record's tenant only, across a reopen; erasure
/// removes them with the content.
pub fn claims_commit_with_their_record<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    let subject = format!("workspace:{}", fixtures::WORKSPACE);
    let key =
        |store: &mut F::Store, tenant: &str| store.claims_by_key(tenant, &subject, "deploy_day");
    let mut claimed = Spec::workspace(fixtures::TENANT_A, "alice", "r-claim").build();
    fixtures::with_claim(&mut claimed, "c1", &subject, "deploy_day", "tuesday");

    // Aborted: the claimed write runs first in the batch, then the batch
    // fails; nothing of it stays.
    let mut broken = Spec::workspace(fixtures::TENANT_A, "alice", "r-broken").build();
    broken.content.push('!');
    assert!(matches!(
        store.write_batch(&[claimed.clone(), broken]),
        Err(StoreError::ContentDigestMismatch)
    ));
    assert!(store.get_record("r-claim")?.is_none());
    assert!(store.record_claims("r-claim")?.is_empty());
    assert!(key(&mut store, fixtures::TENANT_A)?.is_empty());

    // Rejected by the gate (the claim's judgments withheld): no claims.
    let mut unjudged = Spec::workspace(fixtures::TENANT_A, "alice", "r-unjudged").build();
    fixtures::with_claim(&mut unjudged, "c1", &subject, "deploy_day", "friday");
    unjudged.judgments.clear();
    assert!(!store.write(&unjudged)?.is_accepted());
    assert!(store.record_claims("r-unjudged")?.is_empty());
    assert!(key(&mut store, fixtures::TENANT_A)?.is_empty());

    // Accepted: record and claim together.
    let outcome = store.write(&claimed)?;
    assert!(outcome.is_accepted(), "{:?}", outcome.decision);
    assert!(store.get_record("r-claim")?.is_some());
    let expected = claimed.proposal.claims.clone();
    assert_eq!(store.record_claims("r-claim")?, expected);
    assert_eq!(
        key(&mut store, fixtures::TENANT_A)?,
        vec![("r-claim".to_owned(), expected[0].clone())]
    );
    // Another tenant's scan never sees them; another key finds nothing.
    assert!(key(&mut store, fixtures::TENANT_B)?.is_empty());
    assert!(
        store
            .claims_by_key(fixtures::TENANT_A, &subject, "deploy_hour")?
            .is_empty()
    );
    // A record without claims has none; an unknown id has none.
    let plain = Spec::workspace(fixtures::TENANT_A, "alice", "r-plain").build();
    assert!(store.write(&plain)?.is_accepted());
    assert!(store.record_claims("r-plain")?.is_empty());
    assert!(store.record_claims("no-such-record")?.is_empty());
    // The whole-tenant reads (one query each) agree with the per-record
    // ones and stay inside their tenant.
    assert_eq!(
        store.tenant_claims(fixtures::TENANT_A)?,
        vec![("r-claim".to_owned(), expected[0].clone())]
    );
    assert!(store.tenant_claims(fixtures::TENANT_B)?.is_empty());
    let listed = |store: &mut F::Store, tenant: &str| -> StoreResult<Vec<_>> {
        Ok(store
            .list_records(&RecordFilter::tenant(tenant, MAX_LIST_LIMIT))?
            .records
            .into_iter()
            .map(|r| (r.record_id, r.state))
            .collect())
    };
    let states = store.record_states(fixtures::TENANT_A)?;
    assert_eq!(states, listed(&mut store, fixtures::TENANT_A)?);
    assert!(states.iter().any(|(id, _)| id == "r-plain"));
    assert!(
        store
            .record_states(fixtures::TENANT_B)?
            .iter()
            .all(|(id, _)| id != "r-claim" && id != "r-plain")
    );
    // A replay writes nothing twice.
    assert!(store.write(&claimed)?.replayed);
    assert_eq!(key(&mut store, fixtures::TENANT_A)?.len(), 1);

    // Durable: a restart reads them back.
    drop(store);
    let mut store = factory.connect(&db, &config)?;
    assert_eq!(store.record_claims("r-claim")?, expected);
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");

    // Erasure takes them with the content.
    revoke_to_receipt(
        &mut store,
        "r-claim",
        &config.required_index_targets,
        T0 + 10,
    )?;
    assert!(store.record_claims("r-claim")?.is_empty());
    assert!(key(&mut store, fixtures::TENANT_A)?.is_empty());
    assert!(store.tenant_claims(fixtures::TENANT_A)?.is_empty());
    assert!(
        store
            .record_states(fixtures::TENANT_A)?
            .contains(&("r-claim".to_owned(), ListedState::Erased)),
        "an erased record keeps its identity and says so"
    );
    Ok(())
}
