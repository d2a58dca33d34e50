//! A record's life after its write: supersession, revocation to its
//! receipt, consent withdrawal, quarantine of derived records, deletion
//! lag, and conflict review cases.

use super::*;

/// Point 3: supersession is immutable and fenced on the line generation.
pub fn supersession_is_generation_fenced<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let base = Spec::principal(fixtures::TENANT_A, "alice", "v1").build();
    store.write(&base)?;
    publish_all(&mut store, &config.required_index_targets, T0)?;

    let mut s2 = Spec::principal(fixtures::TENANT_A, "alice", "v2");
    s2.supersedes = Some(("v1".into(), 1));
    let before = store.change_stamp()?;
    let second = store.write(&s2.build())?;
    assert_ne!(
        store.change_stamp()?,
        before,
        "supersession must move the change stamp"
    );
    match &second.decision {
        WriteDecision::Accepted {
            line_id,
            line_generation,
            ..
        } => {
            assert_eq!(line_id, "v1");
            assert_eq!(*line_generation, 2);
        }
        other => panic!("supersession rejected: {other:?}"),
    }
    let old = store.get_record("v1")?.expect("old record kept");
    assert_eq!(old.state, RecordState::Superseded);
    assert_eq!(old.content, base.content, "history is immutable");
    // A superseded record is no write guard's candidate; its successor is.
    let live: Vec<String> = store
        .live_contents(
            fixtures::TENANT_A,
            &["v1".to_owned(), "v2".to_owned()],
            old.record.kind,
            &old.record.subject,
        )?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(live, ["v2"]);

    // A second writer that also observed generation 1 loses.
    let mut s3 = Spec::principal(fixtures::TENANT_A, "alice", "v3");
    s3.supersedes = Some(("v1".into(), 1));
    match store.write(&s3.build()) {
        Err(StoreError::StaleGeneration {
            found_record_id,
            found_generation,
            ..
        }) => {
            assert_eq!(found_record_id, "v2");
            assert_eq!(found_generation, 2);
        }
        other => panic!("expected StaleGeneration, got {other:?}"),
    }
    assert!(store.get_record("v3")?.is_none());
    // Reads see exactly one generation of the line once published.
    publish_all(&mut store, &config.required_index_targets, T0 + 1)?;
    let q = alice_run_1();
    assert_eq!(readable_ids(&mut store, &q)?, vec!["v2".to_string()]);
    Ok(())
}

/// Point 3: two threads, two connections, one barrier: exactly one of two
/// concurrent supersessions of one generation wins.
pub fn concurrent_supersession_has_one_winner<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    for round in 0..4 {
        let (db, mut store) = setup(factory, &config)?;
        let base = Spec::principal(fixtures::TENANT_A, "alice", "base").build();
        store.write(&base)?;
        let mut requests = Vec::new();
        for writer in ["a", "b"] {
            let mut spec = Spec::principal(
                fixtures::TENANT_A,
                "alice",
                &format!("next-{writer}-{round}"),
            );
            spec.supersedes = Some(("base".into(), 1));
            requests.push(spec.build());
        }
        drop(store);
        let barrier = Arc::new(Barrier::new(2));
        let results: Vec<StoreResult<crate::types::WriteOutcome>> = std::thread::scope(|scope| {
            let handles: Vec<_> = requests
                .iter()
                .map(|request| {
                    let barrier = Arc::clone(&barrier);
                    let db = &db;
                    let config = &config;
                    scope.spawn(move || {
                        let mut conn = factory.connect(db, config)?;
                        barrier.wait();
                        conn.write(request)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(StoreError::Backend("writer panicked".into())))
                })
                .collect()
        });
        let winners = results
            .iter()
            .filter(|r| matches!(r, Ok(o) if o.is_accepted()))
            .count();
        let stale = results
            .iter()
            .filter(|r| matches!(r, Err(StoreError::StaleGeneration { .. })))
            .count();
        assert_eq!((winners, stale), (1, 1), "round {round}: {results:?}");
        let mut store = factory.connect(&db, &config)?;
        let heads: Vec<_> = requests
            .iter()
            .filter_map(|r| store.get_record(&r.proposal.record_id).transpose())
            .collect::<Result<_, _>>()?;
        assert_eq!(heads.len(), 1, "exactly one new generation stored");
        assert_eq!(heads[0].line_generation, 2);
    }
    Ok(())
}

/// Point 4: active → ineligible → deletion requested → indexes acknowledged
/// → erased → receipt, with a tombstone left and content gone.
pub fn revocation_walks_every_state_to_a_receipt<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let written = store.change_stamp()?;
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let q = alice_run_1();
    let before = store.eligible_records(&q)?;
    assert_eq!(before.records.len(), 1);
    // Activation moved the change stamp; reads do not, and the identity
    // read answers the stamp it saw.
    let active = store.change_stamp()?;
    assert_ne!(active, written, "activation must move the change stamp");
    let (found, _) = store.eligible_unknown(&q, &|_| false)?;
    assert_eq!(found.stamp, active);
    assert_eq!(store.change_stamp()?, active);

    let auth = fixtures::authorization("alice");
    let ineligible = store.revoke("r1", &RevocationReason::Requested, &auth, T0 + 100)?;
    // Ineligible at once, and the read's generation moved.
    let after = store.eligible_records(&q)?;
    assert!(after.records.is_empty());
    assert!(after.snapshot.revocation_generation > before.snapshot.revocation_generation);
    let revoked = store.change_stamp()?;
    assert_ne!(revoked, active, "revocation must move the change stamp");
    assert_eq!(
        ineligible.revocation_generation(),
        after.snapshot.revocation_generation
    );
    // Revoking twice is refused.
    assert!(
        store
            .revoke("r1", &RevocationReason::Requested, &auth, T0 + 101)
            .is_err()
    );
    // Workers see no erase before deletion is requested.
    assert!(store.pending_outbox("lexical", 10)?.is_empty());

    let requested = store.request_deletion(ineligible, T0 + 200)?;
    let erase_tasks = store.pending_outbox("lexical", 10)?;
    assert_eq!(erase_tasks.len(), 1);
    assert_eq!(erase_tasks[0].op, OutboxOp::Erase);
    assert_eq!(
        erase_tasks[0].content, None,
        "erase messages carry no content"
    );
    store.acknowledge_index("r1", erase_tasks[0].generation, "lexical", T0 + 300)?;
    // Not every index acknowledged: the step is refused, the token comes back
    // through resume_revocation.
    assert!(matches!(
        store.confirm_indexes_acknowledged(requested, T0 + 301),
        Err(StoreError::RevocationNotReady { .. })
    ));
    let Some(RevocationState::DeletionRequested(requested)) = store.resume_revocation("r1")? else {
        panic!("expected deletion_requested stage");
    };
    let vector = store.pending_outbox("vector", 10)?;
    store.acknowledge_index("r1", vector[0].generation, "vector", T0 + 400)?;
    let acknowledged = store.confirm_indexes_acknowledged(requested, T0 + 401)?;
    let before_erasure = store.change_stamp()?;
    let ids = ["r1".to_owned()];
    assert_eq!(store.record_states_of(fixtures::TENANT_A, &ids)?.len(), 1);
    let erased = store.erase(acknowledged, T0 + 500)?;
    assert!(store.get_record("r1")?.is_none(), "content erased");
    assert_eq!(store.record_states_of(fixtures::TENANT_A, &ids)?, vec![]);
    assert_ne!(
        store.change_stamp()?,
        before_erasure,
        "erasure must move the change stamp"
    );
    // A store outside the outbox may be named as purged, never one the
    // outbox acknowledges (that acknowledgement is the store's to give).
    assert!(matches!(
        store.finalize_deletion_purged(erased, T0 + 550, &["lexical"]),
        Err(StoreError::InvalidArgument(_))
    ));
    let Some(RevocationState::Erased(erased)) = store.resume_revocation("r1")? else {
        panic!("expected erased stage");
    };
    let receipt = store.finalize_deletion_purged(erased, T0 + 600, &["result_cache"])?;
    assert!(receipt.verify());
    let stores: Vec<_> = receipt
        .body
        .stores
        .iter()
        .map(|s| s.store.as_str())
        .collect();
    assert_eq!(stores, ["lexical", "primary", "result_cache", "vector"]);
    assert!(
        receipt
            .body
            .stores
            .iter()
            .all(|s| s.acknowledged_generation == receipt.body.revocation_generation)
    );
    assert_eq!(receipt.body.tombstone.erased_at_unix_ms, Some(T0 + 500));
    let tombstone = store.tombstone("r1")?.expect("tombstone kept");
    assert_eq!(tombstone.reason, RevocationReason::Requested);
    assert_eq!(tombstone.authorization, auth);
    assert!(
        matches!(store.resume_revocation("r1")?, Some(RevocationState::Finalized(r)) if *r == receipt)
    );
    assert!(store.pending_deletions(T0 + 700)?.is_empty());
    // The record id stays burned.
    assert!(matches!(store.write(&request), Ok(o) if o.replayed));
    let mut reuse = Spec::principal(fixtures::TENANT_A, "alice", "r1").build();
    reuse.proposal.proposal_id = "p-reuse".into();
    assert!(matches!(
        store.write(&reuse),
        Err(StoreError::RecordIdInUse(_))
    ));
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    Ok(())
}

/// Point 5: withdrawing consent makes every dependent record (and what was
/// derived from it) ineligible in one transaction and starts deletion.
pub fn consent_withdrawal_revokes_dependents_and_derived<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    for id in ["c1", "c2"] {
        let request = Spec::principal(fixtures::TENANT_A, "alice", id).build();
        assert!(store.write(&request)?.is_accepted());
    }
    // A workspace summary derived from c1 (no consent of its own).
    let mut summary = Spec::workspace(fixtures::TENANT_A, "alice", "sum1");
    summary.derived_from = vec!["c1".into()];
    assert!(store.write(&summary.build())?.is_accepted());
    // Bob's record uses Bob's consent and must survive.
    let bob = Spec::principal(fixtures::TENANT_A, "bob", "b1").build();
    assert!(store.write(&bob)?.is_accepted());
    publish_all(&mut store, &config.required_index_targets, T0)?;

    let consent = fixtures::consent(fixtures::TENANT_A, "alice");
    let digest = fixtures::consent_digest(&consent);
    let given = store.consents_of(fixtures::TENANT_A, "alice")?;
    assert_eq!(given.len(), 1);
    assert_eq!(given[0].consent_sha256, digest);
    assert_eq!(given[0].receipt, consent);
    assert_eq!(given[0].withdrawn_at_unix_ms, None);
    let elsewhere = store.consents_of(fixtures::TENANT_B, "alice")?;
    assert!(
        elsewhere
            .iter()
            .all(|c| c.receipt.tenant_id == fixtures::TENANT_B && c.consent_sha256 != digest),
        "another tenant's consents only"
    );
    let withdrawal = store.withdraw_consent(
        fixtures::TENANT_A,
        &digest,
        &fixtures::authorization("alice"),
        T0 + 50,
    )?;
    let ids: Vec<&str> = withdrawal.revoked.iter().map(|t| t.record_id()).collect();
    assert_eq!(ids, ["c1", "c2", "sum1"]);
    let withdrawn = store.consents_of(fixtures::TENANT_A, "alice")?;
    assert_eq!(withdrawn[0].withdrawn_at_unix_ms, Some(T0 + 50));
    assert_eq!(store.consents_of(fixtures::TENANT_A, "bob")?.len(), 1);
    for id in ["c1", "c2", "sum1"] {
        assert_eq!(
            store.get_record(id)?.map(|r| r.state),
            Some(RecordState::Revoked),
            "{id}"
        );
        assert!(matches!(
            store.resume_revocation(id)?,
            Some(RevocationState::DeletionRequested(_))
        ));
    }
    assert_eq!(
        store.get_record("b1")?.map(|r| r.state),
        Some(RecordState::Active)
    );
    assert_eq!(
        store.tombstone("sum1")?.map(|t| t.reason),
        Some(RevocationReason::SourceRevoked {
            source_record_id: "c1".into()
        })
    );
    // A later proposal relying on the withdrawn consent is rejected.
    let late = Spec::principal(fixtures::TENANT_A, "alice", "c3").build();
    assert!(!store.write(&late)?.is_accepted());
    // Withdrawing twice is refused.
    assert!(
        store
            .withdraw_consent(
                fixtures::TENANT_A,
                &digest,
                &fixtures::authorization("alice"),
                T0 + 51
            )
            .is_err()
    );
    Ok(())
}

/// Point 5: with `DerivedAction::Quarantine`, a derived record becomes
/// unreadable and a review case opens instead of a revocation.
pub fn derived_records_can_be_quarantined<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let mut config = test_config();
    config.derived_on_source_revocation = DerivedAction::Quarantine;
    let (_db, mut store) = setup(factory, &config)?;
    let source = Spec::workspace(fixtures::TENANT_A, "alice", "src1").build();
    store.write(&source)?;
    let mut derived = Spec::workspace(fixtures::TENANT_A, "alice", "sum1");
    derived.derived_from = vec!["src1".into()];
    store.write(&derived.build())?;
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let q = alice_run_1();
    assert_eq!(
        readable_ids(&mut store, &q)?,
        vec!["src1".to_string(), "sum1".to_string()]
    );
    store.revoke(
        "src1",
        &RevocationReason::Requested,
        &fixtures::authorization("ops"),
        T0 + 20,
    )?;
    assert!(readable_ids(&mut store, &q)?.is_empty());
    assert_eq!(
        store.get_record("sum1")?.map(|r| r.state),
        Some(RecordState::Quarantined)
    );
    let cases = store.open_review_cases(fixtures::TENANT_A)?;
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0].existing_record_id, "sum1");
    Ok(())
}

/// Point 6: a contradiction opens a review case with both identities; every
/// review action is an operation with a receipt.
pub fn conflicts_open_review_cases_with_receipts<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let existing = Spec::principal(fixtures::TENANT_A, "alice", "old").build();
    store.write(&existing)?;
    publish_all(&mut store, &config.required_index_targets, T0)?;

    let contradicting = |id: &str, relation: ConflictRelation| {
        let mut spec = Spec::principal(fixtures::TENANT_A, "alice", id);
        spec.conflicts = vec![ConflictObservation {
            observation_id: format!("obs-{id}"),
            existing_record_id: "old".into(),
            relation,
            detector_release: "detector-v1".into(),
            existing_claim: None,
        }];
        Ok::<_, StoreError>(spec.build())
    };
    let reviewer = fixtures::authorization("reviewer");
    let mut case_ids = Vec::new();
    for (id, relation) in [
        ("new1", ConflictRelation::Contradicts),
        ("new2", ConflictRelation::Duplicate),
        ("new3", ConflictRelation::Contradicts),
        ("new4", ConflictRelation::Contradicts),
    ] {
        let request = contradicting(id, relation)?;
        let outcome = store.write(&request)?;
        let WriteDecision::Rejected {
            review_case_ids, ..
        } = &outcome.decision
        else {
            panic!("conflict must reject: {:?}", outcome.decision);
        };
        assert_eq!(review_case_ids.len(), 1);
        let case = store
            .review_case(&review_case_ids[0])?
            .expect("case stored");
        assert_eq!(
            (
                case.proposed_record_id.as_str(),
                case.existing_record_id.as_str()
            ),
            (id, "old")
        );
        assert_eq!(case.status, ReviewStatus::Open);
        assert!(
            store.get_record(id)?.is_none(),
            "rejected proposal is not a record"
        );
        case_ids.push(review_case_ids[0].clone());
    }
    assert_eq!(store.open_review_cases(fixtures::TENANT_A)?.len(), 4);

    // Request stronger evidence: stays open.
    let r = store.resolve_review(
        &case_ids[0],
        ReviewAction::RequestEvidence,
        &reviewer,
        T0 + 1,
    )?;
    assert_eq!(r.body.status_after, ReviewStatus::EvidenceRequested);
    // Reject the proposal.
    let r = store.resolve_review(
        &case_ids[1],
        ReviewAction::RejectProposal,
        &reviewer,
        T0 + 2,
    )?;
    assert_eq!(r.body.status_after, ReviewStatus::Resolved);
    assert!(
        store
            .resolve_review(
                &case_ids[1],
                ReviewAction::RejectProposal,
                &reviewer,
                T0 + 3
            )
            .is_err()
    );
    // Accept a narrower proposition (a new, gated proposal).
    let narrower = Spec::principal(fixtures::TENANT_A, "alice", "narrow").build();
    let r = store.resolve_review(
        &case_ids[2],
        ReviewAction::AcceptNarrower(Box::new(narrower)),
        &reviewer,
        T0 + 4,
    )?;
    assert_eq!(r.body.new_proposal_accepted, Some(true));
    assert!(store.get_record("narrow")?.is_some());
    // Supersede the existing record.
    let mut sup = Spec::principal(fixtures::TENANT_A, "alice", "replacement");
    sup.supersedes = Some(("old".into(), 1));
    let r = store.resolve_review(
        &case_ids[3],
        ReviewAction::Supersede(Box::new(sup.build())),
        &reviewer,
        T0 + 5,
    )?;
    assert_eq!(r.body.new_proposal_accepted, Some(true));
    assert_eq!(
        store.get_record("old")?.map(|r| r.state),
        Some(RecordState::Superseded)
    );
    // The superseded record can no longer be contested; close that case.
    assert!(matches!(
        store.resolve_review(
            &case_ids[0],
            ReviewAction::ContestExisting,
            &reviewer,
            T0 + 6
        ),
        Err(StoreError::InvalidState { .. })
    ));
    store.resolve_review(
        &case_ids[0],
        ReviewAction::RejectProposal,
        &reviewer,
        T0 + 7,
    )?;
    assert!(store.open_review_cases(fixtures::TENANT_A)?.is_empty());

    // Contest: the existing record becomes unreadable.
    let other = Spec::principal(fixtures::TENANT_A, "alice", "other").build();
    store.write(&other)?;
    publish_all(&mut store, &config.required_index_targets, T0 + 8)?;
    let mut spec = Spec::principal(fixtures::TENANT_A, "alice", "new5");
    spec.conflicts = vec![ConflictObservation {
        observation_id: "obs-new5".into(),
        existing_record_id: "other".into(),
        relation: ConflictRelation::Contradicts,
        detector_release: "detector-v1".into(),
        existing_claim: None,
    }];
    let outcome = store.write(&spec.build())?;
    let WriteDecision::Rejected {
        review_case_ids, ..
    } = &outcome.decision
    else {
        panic!("conflict must reject");
    };
    let q = alice_run_1();
    assert!(readable_ids(&mut store, &q)?.contains(&"other".to_string()));
    let before = store.change_stamp()?;
    let r = store.resolve_review(
        &review_case_ids[0],
        ReviewAction::ContestExisting,
        &reviewer,
        T0 + 9,
    )?;
    assert_ne!(
        store.change_stamp()?,
        before,
        "a contest must move the change stamp"
    );
    assert_eq!(r.body.status_after, ReviewStatus::Resolved);
    assert_eq!(
        store.get_record("other")?.map(|r| r.state),
        Some(RecordState::Contested)
    );
    assert!(!readable_ids(&mut store, &q)?.contains(&"other".to_string()));
    assert!(matches!(
        store.verify_audit_chain()?,
        AuditVerification::Intact { .. }
    ));
    Ok(())
}

/// Point 4: pending deletions report their age against the declared deadline.
pub fn deletion_lag_is_measured_against_deadline<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let request = Spec::workspace(fixtures::TENANT_A, "alice", "r1").build();
    store.write(&request)?;
    let token = store.revoke(
        "r1",
        &RevocationReason::PolicyForbids,
        &fixtures::authorization("ops"),
        T0 + 1_000,
    )?;
    store.request_deletion(token, T0 + 1_000)?;
    let lag = store.pending_deletions(T0 + 1_000 + config.deletion_deadline_ms)?;
    assert_eq!(lag.len(), 1);
    assert_eq!(lag[0].stage, RevocationStage::DeletionRequested);
    assert_eq!(lag[0].age_ms, config.deletion_deadline_ms);
    assert!(!lag[0].deadline_exceeded);
    assert_eq!(lag[0].unacknowledged_targets, ["lexical", "vector"]);
    let lag = store.pending_deletions(T0 + 1_001 + config.deletion_deadline_ms)?;
    assert!(lag[0].deadline_exceeded);
    Ok(())
}
