//! Read-scope commitments and the eligibility read of what changed since
//! an earlier read.

use super::*;

/// Every scope's root as the store keeps it equals the root recomputed
/// from the records themselves (body digest and state), over every record
/// of `tenant` (erased ones are gone from their scope), and
/// every record has an inclusion proof against it. Answers the kept
/// commitments (alice's reader scopes and every scope holding a record),
/// sorted by scope. Panics on a difference.
pub fn assert_scope_roots<S: Store + ?Sized>(
    store: &mut S,
    tenant: &str,
) -> StoreResult<Vec<mosaic_harness::memory_scope::ScopeCommitment>> {
    use mosaic_harness::memory_scope::{ReadScope, ScopeEntry, scope_root};
    use std::collections::BTreeMap;
    let mut scopes: BTreeMap<ReadScope, Vec<ScopeEntry>> = BTreeMap::new();
    for (id, _) in store.record_states(tenant)? {
        if let Some(stored) = store.get_record(&id)? {
            if stored.record.tenant_id != tenant {
                continue;
            }
            let entry = ScopeEntry::of_record(&stored.record, stored.state.as_str())
                .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
            scopes
                .entry(ReadScope::of_subject(&stored.record.subject))
                .or_default()
                .push(entry);
        }
    }
    let mut asked: Vec<ReadScope> = ReadScope::of_reader("alice", fixtures::WORKSPACE, "run-1");
    asked.extend(scopes.keys().cloned());
    asked.sort();
    asked.dedup();
    let kept = store.scope_commitments(tenant, &asked)?;
    assert_eq!(kept.len(), asked.len());
    for commitment in &kept {
        let entries = scopes.get(&commitment.scope).cloned().unwrap_or_default();
        let recomputed = mosaic_harness::merkle::to_hex(
            &scope_root(&entries).map_err(|e| StoreError::InvalidArgument(e.to_string()))?,
        );
        assert_eq!(
            commitment.root_sha256, recomputed,
            "kept root of {:?} differs from the records'",
            commitment.scope
        );
        // Every record of the scope has a proof against the kept root;
        // its entry is the record's digest and state.
        for entry in &entries {
            let inclusion = store
                .scope_inclusion(tenant, &entry.record_id)?
                .expect("a held record has a proof");
            assert_eq!(&inclusion.entry, entry);
            assert_eq!(&inclusion.commitment, commitment);
            let root = mosaic_harness::merkle::from_hex(&commitment.root_sha256)
                .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
            mosaic_harness::memory_scope::verify_scope_inclusion(entry, &inclusion.proof, &root)
                .map_err(|e| StoreError::InvalidArgument(e.to_string()))?;
        }
    }
    Ok(kept)
}

/// A read scope's commitment is kept in the transaction of every change
/// to a record of the scope (write, activation, supersession, contest,
/// quarantine, revocation, erasure), and equals the commitment recomputed
/// from the records after each; reads change nothing; another tenant's
/// records and ids are not in the tenant's scopes (layer: the store).
pub fn scope_commitments_follow_every_change<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let mut config = test_config();
    config.derived_on_source_revocation = DerivedAction::Quarantine;
    let (_db, mut store) = setup(factory, &config)?;
    let empty = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    assert!(empty.iter().all(|c| c.generation == 0));
    let generation = |kept: &[mosaic_harness::memory_scope::ScopeCommitment]| -> u64 {
        kept.iter().map(|c| c.generation).sum()
    };
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "p1").build())?;
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "p2").build())?;
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "p3").build())?;
    store.write(&Spec::workspace(fixtures::TENANT_A, "alice", "w1").build())?;
    store.write(&Spec::workspace(fixtures::TENANT_A, "alice", "w2").build())?;
    let mut derived = Spec::workspace(fixtures::TENANT_A, "alice", "sum");
    derived.derived_from = vec!["w2".into()];
    store.write(&derived.build())?;
    store.write(&Spec::run(fixtures::TENANT_A, "alice", "r1", "run-1").build())?;
    // The same principal and workspace names in another tenant.
    store.write(&Spec::principal(fixtures::TENANT_B, "alice", "b1").build())?;
    // One transaction changing several scopes of two tenants: each scope
    // is rehashed once, as its tenant, before the commit.
    let batch: Vec<crate::types::WriteRequest> = (0..40)
        .map(|i| match i % 4 {
            0 => Spec::principal(fixtures::TENANT_A, "alice", &format!("pb{i}")).build(),
            1 => Spec::workspace(fixtures::TENANT_A, "alice", &format!("wb{i}")).build(),
            2 => Spec::principal(fixtures::TENANT_B, "alice", &format!("bb{i}")).build(),
            _ => Spec::principal(fixtures::TENANT_A, "bob", &format!("ob{i}")).build(),
        })
        .collect();
    for outcome in store.write_batch(&batch)? {
        assert!(outcome.is_accepted(), "{outcome:?}");
    }
    assert_scope_roots(&mut store, fixtures::TENANT_B)?;
    let written = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    assert!(generation(&written) >= 7);
    let publishing = written.clone();
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let active = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    assert_ne!(active, publishing, "activation changes the roots");
    // A read changes nothing.
    let q = alice_run_1();
    store.eligible_records(&q)?;
    let (found, _) = store.eligible_unknown(&q, &|_| false)?;
    let mut reader_scopes: Vec<_> = found.scope_commitments.clone();
    reader_scopes.sort_by(|a, b| a.scope.cmp(&b.scope));
    assert_eq!(reader_scopes, found.scope_commitments, "sorted by scope");
    let reader = store.scope_commitments(
        fixtures::TENANT_A,
        &mosaic_harness::memory_scope::ReadScope::of_reader("alice", fixtures::WORKSPACE, "run-1"),
    )?;
    assert_eq!(found.scope_commitments, reader);
    assert_eq!(assert_scope_roots(&mut store, fixtures::TENANT_A)?, active);
    // Supersession, then its activation.
    let mut v2 = Spec::principal(fixtures::TENANT_A, "alice", "v2");
    v2.supersedes = Some(("p1".into(), 1));
    store.write(&v2.build())?;
    assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    publish_all(&mut store, &config.required_index_targets, T0 + 1)?;
    assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    // A contest through review.
    let mut conflicting = Spec::principal(fixtures::TENANT_A, "alice", "new1");
    conflicting.conflicts = vec![ConflictObservation {
        observation_id: "obs-new1".into(),
        existing_record_id: "p2".into(),
        relation: ConflictRelation::Contradicts,
        detector_release: "detector-v1".into(),
        existing_claim: None,
    }];
    let outcome = store.write(&conflicting.build())?;
    let WriteDecision::Rejected {
        review_case_ids, ..
    } = &outcome.decision
    else {
        panic!("conflict must reject: {:?}", outcome.decision);
    };
    store.resolve_review(
        &review_case_ids[0],
        ReviewAction::ContestExisting,
        &fixtures::authorization("reviewer"),
        T0 + 2,
    )?;
    assert_eq!(
        store.get_record("p2")?.map(|r| r.state),
        Some(RecordState::Contested)
    );
    assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    // A revocation that quarantines what was derived from it.
    let auth = fixtures::authorization("alice");
    store.revoke("w2", &RevocationReason::Requested, &auth, T0 + 3)?;
    assert_eq!(
        store.get_record("sum")?.map(|r| r.state),
        Some(RecordState::Quarantined)
    );
    assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    // A revocation carried to erasure: the record leaves its scope.
    let before_erasure = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    let ineligible = store.revoke("p3", &RevocationReason::Requested, &auth, T0 + 4)?;
    let requested = store.request_deletion(ineligible, T0 + 5)?;
    for target in &config.required_index_targets {
        for task in store.pending_outbox(target, usize::MAX)? {
            store.acknowledge_index(&task.record_id, task.generation, target, T0 + 6)?;
        }
    }
    let acknowledged = store.confirm_indexes_acknowledged(requested, T0 + 7)?;
    store.erase(acknowledged, T0 + 8)?;
    assert!(store.scope_inclusion(fixtures::TENANT_A, "p3")?.is_none());
    let after_erasure = assert_scope_roots(&mut store, fixtures::TENANT_A)?;
    assert!(generation(&after_erasure) > generation(&before_erasure));
    // Another tenant's record is not in this tenant's scopes: no proof for
    // it here, and the same names' scopes differ per tenant.
    assert!(store.scope_inclusion(fixtures::TENANT_A, "b1")?.is_none());
    assert!(
        store
            .scope_inclusion(fixtures::TENANT_A, "unknown")?
            .is_none()
    );
    assert!(store.scope_inclusion(fixtures::TENANT_B, "b1")?.is_some());
    let other = assert_scope_roots(&mut store, fixtures::TENANT_B)?;
    assert_ne!(other, after_erasure);
    let report = store.integrity_check()?;
    assert!(report.is_ok(), "integrity: {report:?}");
    Ok(())
}

/// How [`KeptRead::refresh`] brought a kept read up to date.
#[derive(Debug, PartialEq, Eq)]
enum Refresh {
    /// From what changed: these ids.
    Changes(Vec<String>),
    /// The kept read's time had run out: a full read.
    TimeRanOut,
    /// The store answered `None`: a full read.
    ReadEverything,
}

/// A reader's kept eligibility read, brought up to date as a service keeps
/// it: a full read when the instant reaches the kept read's
/// `stable_until` or [`Store::eligible_changes`] answers `None`; otherwise
/// the changed ids are removed and the eligible ones added.
struct KeptRead {
    ids: std::collections::BTreeMap<String, u64>,
    since: Vec<mosaic_harness::memory_scope::ScopeCommitment>,
    stamp: crate::types::ChangeStamp,
    stable_until: Option<u64>,
    /// The `stable_until_unix_ms` of the last changes applied.
    changes_until: Option<u64>,
    known: std::collections::BTreeSet<String>,
}

impl KeptRead {
    fn full<S: Store + ?Sized>(store: &mut S, q: &EligibilityQuery) -> StoreResult<Self> {
        let (found, bodies) = store.eligible_unknown(q, &|_| false)?;
        Ok(KeptRead {
            ids: found.ids.into_iter().collect(),
            since: found.scope_commitments,
            stamp: found.stamp,
            stable_until: found.stable_until_unix_ms,
            changes_until: None,
            known: bodies.into_iter().map(|b| b.record.record_id).collect(),
        })
    }

    fn refresh<S: Store + ?Sized>(
        &mut self,
        store: &mut S,
        q: &EligibilityQuery,
    ) -> StoreResult<Refresh> {
        if self.stable_until.is_some_and(|t| t <= q.now_unix_ms) {
            *self = Self::full(store, q)?;
            return Ok(Refresh::TimeRanOut);
        }
        let known = self.known.clone();
        let Some((changes, bodies)) =
            store.eligible_changes(q, &self.since, &|id| known.contains(id))?
        else {
            *self = Self::full(store, q)?;
            return Ok(Refresh::ReadEverything);
        };
        assert!(
            changes.changed.windows(2).all(|w| w[0] < w[1]),
            "sorted, each once: {:?}",
            changes.changed
        );
        assert!(
            changes.eligible.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, each once: {:?}",
            changes.eligible
        );
        // The bodies are those of the eligible ids not known, held to the
        // query.
        let unknown: Vec<&str> = changes
            .eligible
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| !known.contains(*id))
            .collect();
        let read: Vec<&str> = bodies.iter().map(|b| b.record.record_id.as_str()).collect();
        assert_eq!(read, unknown, "bodies of the unknown eligible ids");
        assert!(
            bodies
                .iter()
                .all(|b| crate::types::body_matches_query(&b.record, q))
        );
        for id in &changes.changed {
            self.ids.remove(id);
        }
        for (id, generation) in &changes.eligible {
            assert!(changes.changed.contains(id), "{id} is eligible unchanged");
            self.ids.insert(id.clone(), *generation);
        }
        self.known
            .extend(bodies.into_iter().map(|b| b.record.record_id));
        self.since = changes.scope_commitments;
        self.stamp = changes.stamp;
        self.changes_until = changes.stable_until_unix_ms;
        self.stable_until = match (self.stable_until, changes.stable_until_unix_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(Refresh::Changes(changes.changed))
    }

    /// Panics unless the kept read holds what a full read finds now: the
    /// same ids and line generations, scope commitments and stamp, and a
    /// `stable_until` no later than the full read's.
    fn assert_current<S: Store + ?Sized>(
        &self,
        store: &mut S,
        q: &EligibilityQuery,
        what: &str,
    ) -> StoreResult<()> {
        let (found, _) = store.eligible_unknown(q, &|_| true)?;
        let kept: Vec<(String, u64)> = self.ids.clone().into_iter().collect();
        assert_eq!(kept, found.ids, "{what}: ids");
        assert_eq!(self.since, found.scope_commitments, "{what}: commitments");
        assert_eq!(self.stamp, found.stamp, "{what}: stamp");
        if let Some(truth) = found.stable_until_unix_ms {
            assert!(
                self.stable_until.is_some_and(|kept| kept <= truth),
                "{what}: kept until {:?}, the answer changes at {truth}",
                self.stable_until
            );
        }
        Ok(())
    }

    /// [`KeptRead::refresh`], checked to be `expected` and current.
    fn step<S: Store + ?Sized>(
        &mut self,
        store: &mut S,
        q: &EligibilityQuery,
        what: &str,
        expected: Refresh,
    ) -> StoreResult<()> {
        assert_eq!(self.refresh(store, q)?, expected, "{what}");
        self.assert_current(store, q, what)
    }
}

fn changes(ids: &[&str]) -> Refresh {
    Refresh::Changes(ids.iter().map(|id| (*id).to_owned()).collect())
}

/// A kept eligibility read brought up to date by
/// [`Store::eligible_changes`] after each kind of change (a write, a
/// batch, an activation, a supersession, a contest, a revocation, a
/// consent withdrawal, a record coming of age, expiry) equals a full read
/// at that moment: the same ids, line generations, scope commitments and
/// stamp. `changed` names exactly the records of the reader's scopes that
/// changed: another principal's own records, another run's and another
/// tenant's never appear (layer: the store's scope entries, read by
/// tenant and scope). An erasure (by another connection to the same
/// database) and a `since` that is not the reader's answer `None`.
pub fn eligible_changes_follow_every_change<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    use mosaic_harness::memory_scope::ReadScope;
    let config = test_config();
    let targets = &config.required_index_targets;
    let (db, mut store) = setup(factory, &config)?;
    let mut sum = Spec::workspace(fixtures::TENANT_A, "alice", "sum");
    sum.derived_from = vec!["a2".into()];
    for request in [
        Spec::principal(fixtures::TENANT_A, "alice", "a1").build(),
        Spec::principal(fixtures::TENANT_A, "alice", "a2").build(),
        Spec::workspace(fixtures::TENANT_A, "alice", "w1").build(),
        Spec::workspace(fixtures::TENANT_A, "bob", "w-gone").build(),
        Spec::run(fixtures::TENANT_A, "alice", "r1", "run-1").build(),
        Spec::principal(fixtures::TENANT_A, "bob", "b1").build(),
        sum.build(),
    ] {
        assert!(store.write(&request)?.is_accepted(), "{request:?}");
    }
    publish_all(&mut store, targets, T0)?;
    let q = alice_run_1();
    let mut kept = KeptRead::full(&mut store, &q)?;
    assert_eq!(kept.ids.len(), 6, "{:?}", kept.ids);
    kept.assert_current(&mut store, &q, "the first read")?;

    kept.step(&mut store, &q, "nothing changed", changes(&[]))?;
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "n1").build())?;
    kept.step(&mut store, &q, "a write, publishing", changes(&["n1"]))?;
    publish_all(&mut store, targets, T0)?;
    kept.step(&mut store, &q, "its activation", changes(&["n1"]))?;
    assert!(kept.ids.contains_key("n1"));

    // A batch: alice's record, bob's workspace record (alice reads her
    // workspace's), and records of scopes alice does not read: bob's own,
    // another run's, another tenant's.
    let batch = [
        Spec::principal(fixtures::TENANT_A, "alice", "nb1").build(),
        Spec::workspace(fixtures::TENANT_A, "bob", "nb2").build(),
        Spec::principal(fixtures::TENANT_A, "bob", "nb3").build(),
        Spec::run(fixtures::TENANT_A, "alice", "nb4", "run-2").build(),
        Spec::principal(fixtures::TENANT_B, "alice", "nb5").build(),
    ];
    for outcome in store.write_batch(&batch)? {
        assert!(outcome.is_accepted(), "{outcome:?}");
    }
    publish_all(&mut store, targets, T0)?;
    kept.step(&mut store, &q, "a batch", changes(&["nb1", "nb2"]))?;

    // Supersession: the old record leaves, the new one comes in with its
    // line's next generation.
    let mut v2 = Spec::principal(fixtures::TENANT_A, "alice", "v2");
    v2.supersedes = Some(("a1".into(), 1));
    assert!(store.write(&v2.build())?.is_accepted());
    publish_all(&mut store, targets, T0)?;
    kept.step(&mut store, &q, "a supersession", changes(&["a1", "v2"]))?;
    assert_eq!(kept.ids.get("v2"), Some(&2));

    // A contest through review.
    let mut conflicting = Spec::principal(fixtures::TENANT_A, "alice", "c-new");
    conflicting.conflicts = vec![ConflictObservation {
        observation_id: "obs-c-new".into(),
        existing_record_id: "n1".into(),
        relation: ConflictRelation::Contradicts,
        detector_release: "detector-v1".into(),
        existing_claim: None,
    }];
    let WriteDecision::Rejected {
        review_case_ids, ..
    } = store.write(&conflicting.build())?.decision
    else {
        panic!("a conflict must reject");
    };
    store.resolve_review(
        &review_case_ids[0],
        ReviewAction::ContestExisting,
        &fixtures::authorization("reviewer"),
        T0 + 2,
    )?;
    kept.step(&mut store, &q, "a contest", changes(&["n1"]))?;
    assert!(!kept.ids.contains_key("n1"));

    let auth = fixtures::authorization("alice");
    store.revoke("w1", &RevocationReason::Requested, &auth, T0 + 3)?;
    kept.step(&mut store, &q, "a revocation", changes(&["w1"]))?;

    // Only other scopes change.
    store.write(&Spec::principal(fixtures::TENANT_B, "alice", "other-tenant").build())?;
    store.write(&Spec::principal(fixtures::TENANT_A, "bob", "other-principal").build())?;
    store.write(&Spec::run(fixtures::TENANT_A, "alice", "other-run", "run-3").build())?;
    publish_all(&mut store, targets, T0)?;
    kept.step(&mut store, &q, "other scopes", changes(&[]))?;

    // A record created after the read's instant: changed, not eligible
    // yet, and its creation is when the kept read's time runs out.
    let mut later = Spec::principal(fixtures::TENANT_A, "alice", "later");
    later.now = T0 + 1_000;
    assert!(store.write(&later.build())?.is_accepted());
    publish_all(&mut store, targets, T0 + 1_000)?;
    kept.step(
        &mut store,
        &q,
        "a record of the future",
        changes(&["later"]),
    )?;
    assert!(!kept.ids.contains_key("later"));
    assert_eq!(kept.changes_until, Some(T0 + 1_000));
    assert_eq!(kept.stable_until, Some(T0 + 1_000));
    // At that instant nothing changed in the store, yet the answer did:
    // the changes alone are not the answer, the kept read's time is.
    let mut q = q;
    q.now_unix_ms = T0 + 1_000;
    let (unchanged, _) = store
        .eligible_changes(&q, &kept.since, &|_| true)?
        .expect("the same scopes");
    assert_eq!(unchanged.changed, Vec::<String>::new());
    kept.step(&mut store, &q, "it comes of age", Refresh::TimeRanOut)?;
    assert!(kept.ids.contains_key("later"));

    // Expiry: past the records' lifetime the kept read's time has run
    // out; after that, a changed record already expired at the read's
    // instant is not eligible, one still live is.
    q.now_unix_ms = T0 + fixtures::TTL_MS + 500;
    kept.step(&mut store, &q, "expiry", Refresh::TimeRanOut)?;
    let mut expired = Spec::principal(fixtures::TENANT_A, "alice", "expired");
    expired.now = T0 + 100;
    let mut fresh = Spec::principal(fixtures::TENANT_A, "alice", "fresh");
    fresh.now = T0 + fixtures::TTL_MS + 400;
    for spec in [&expired, &fresh] {
        assert!(
            store.write(&spec.build())?.is_accepted(),
            "{}",
            spec.record_id
        );
    }
    publish_all(&mut store, targets, q.now_unix_ms)?;
    kept.step(
        &mut store,
        &q,
        "an expired and a live write",
        changes(&["expired", "fresh"]),
    )?;
    assert!(kept.ids.contains_key("fresh") && !kept.ids.contains_key("expired"));
    // The changes' own time is fresh's expiry; the kept read's, the
    // earlier expiry of the record that came of age.
    assert_eq!(
        kept.changes_until,
        Some(T0 + fixtures::TTL_MS + 400 + fixtures::TTL_MS)
    );
    assert_eq!(kept.stable_until, Some(T0 + 1_000 + fixtures::TTL_MS));

    // Consent withdrawal revokes alice's records and what was derived
    // from them, in one transaction.
    let withdrawal = store.withdraw_consent(
        fixtures::TENANT_A,
        &fixtures::consent_digest(&fixtures::consent(fixtures::TENANT_A, "alice")),
        &auth,
        q.now_unix_ms,
    )?;
    let mut revoked: Vec<&str> = withdrawal.revoked.iter().map(|t| t.record_id()).collect();
    revoked.sort_unstable();
    assert!(revoked.contains(&"sum") && revoked.contains(&"fresh"));
    kept.step(&mut store, &q, "a consent withdrawal", changes(&revoked))?;

    // An erasure, by another connection to the same database: the read
    // answers `None` and the reader reads everything.
    let mut other = factory.connect(&db, &config)?;
    revoke_to_receipt(&mut other, "w-gone", targets, q.now_unix_ms)?;
    drop(other);
    kept.step(&mut store, &q, "an erasure", Refresh::ReadEverything)?;
    kept.step(&mut store, &q, "after the full read", changes(&[]))?;

    // A `since` that is not this reader's, or not this database's.
    let none = |store: &mut F::Store,
                since: &[mosaic_harness::memory_scope::ScopeCommitment],
                what: &str|
     -> StoreResult<()> {
        assert!(
            store.eligible_changes(&q, since, &|_| true)?.is_none(),
            "{what}"
        );
        Ok(())
    };
    none(&mut store, &[], "no scopes")?;
    none(&mut store, &kept.since[1..], "a scope missing")?;
    let mut reversed = kept.since.clone();
    reversed.reverse();
    none(&mut store, &reversed, "out of order")?;
    let bobs = store.scope_commitments(
        fixtures::TENANT_A,
        &ReadScope::of_reader("bob", fixtures::WORKSPACE, "run-2"),
    )?;
    none(&mut store, &bobs, "another reader's scopes")?;
    let mut ahead = kept.since.clone();
    ahead[0].generation += 1;
    none(&mut store, &ahead, "a generation ahead of the store's")?;
    let mut other_root = kept.since.clone();
    let moved = other_root
        .iter_mut()
        .find(|c| c.generation > 0)
        .expect("a scope with records");
    moved.root_sha256 = mosaic_harness::merkle::to_hex(&[7; 32]);
    none(&mut store, &other_root, "the same generation, another root")?;
    kept.step(&mut store, &q, "the reader's own since", changes(&[]))?;
    Ok(())
}

/// The records [`Store::eligible_changes`] reads again are held to the
/// reader's subjects, not only found through the reader's scopes: an entry
/// of another principal's record moved, by a corruption of the store, into
/// alice's own scope and marked changed comes back among the `changed` ids
/// but never as eligible, and a full read agrees. Layer: the subject
/// predicate of the restricted eligibility statement (the scope entries
/// alone would let it through).
pub fn eligible_changes_hold_each_changed_record_to_the_readers_subjects<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let targets = &config.required_index_targets;
    let (db, mut store) = setup(factory, &config)?;
    for request in [
        Spec::principal(fixtures::TENANT_A, "alice", "a1").build(),
        Spec::principal(fixtures::TENANT_A, "bob", "b1").build(),
    ] {
        assert!(store.write(&request)?.is_accepted(), "{request:?}");
    }
    publish_all(&mut store, targets, T0)?;
    let q = alice_run_1();
    let kept = KeptRead::full(&mut store, &q)?;
    assert!(kept.ids.contains_key("a1"), "{:?}", kept.ids);
    assert!(!kept.ids.contains_key("b1"));
    // Alice's scope moves on, and bob's record's entry is moved into it
    // with that change's generation: the changes read finds it.
    store.write(&Spec::principal(fixtures::TENANT_A, "alice", "a2").build())?;
    publish_all(&mut store, targets, T0)?;
    factory.execute_as_owner(
        &db,
        "UPDATE scope_entries SET scope_type = 'principal', scope_a = 'alice', scope_b = '', \
           changed_generation = (SELECT changed_generation FROM scope_entries WHERE record_id = 'a2') \
         WHERE record_id = 'b1'",
    )?;
    // Every body known: the eligibility statement alone decides (no body
    // is read, so the check of a body against its columns does not run).
    let (changes, bodies) = store
        .eligible_changes(&q, &kept.since, &|_| true)?
        .expect("the same scopes, nothing erased");
    assert_eq!(changes.changed, ["a2", "b1"], "{changes:?}");
    let eligible: Vec<&str> = changes.eligible.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        eligible,
        ["a2"],
        "another principal's record came back eligible"
    );
    assert!(bodies.is_empty());
    // No body known: the eligible one's body comes with it.
    let (again, bodies) = store
        .eligible_changes(&q, &kept.since, &|_| false)?
        .expect("the same scopes, nothing erased");
    assert_eq!(again.eligible, changes.eligible);
    let bodies: Vec<&str> = bodies.iter().map(|b| b.record.record_id.as_str()).collect();
    assert_eq!(bodies, ["a2"]);
    let (full, _) = store.eligible_unknown(&q, &|_| true)?;
    assert!(full.ids.iter().all(|(id, _)| id != "b1"), "{:?}", full.ids);
    Ok(())
}
