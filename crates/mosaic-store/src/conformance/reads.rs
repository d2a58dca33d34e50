//! Reads: scope isolation, snapshot identity, and listing (filters,
//! pagination, erased content, tenants).

use super::*;

/// Point 8 / invariant 2: no read returns another tenant's, principal's,
/// run's or workspace's record.
pub fn reads_never_cross_scope<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let specs = [
        Spec::principal(fixtures::TENANT_A, "alice", "a-alice"),
        Spec::principal(fixtures::TENANT_A, "bob", "a-bob"),
        Spec::principal(fixtures::TENANT_B, "alice", "b-alice"),
        Spec::workspace(fixtures::TENANT_A, "alice", "a-ws"),
        Spec::run(fixtures::TENANT_A, "alice", "a-run1", "run-1"),
        Spec::run(fixtures::TENANT_A, "alice", "a-run2", "run-2"),
    ];
    for spec in specs {
        let request = spec.build();
        assert!(
            store.write(&request)?.is_accepted(),
            "{}",
            request.proposal.record_id
        );
    }
    publish_all(&mut store, &config.required_index_targets, T0)?;
    let cases = [
        (
            fixtures::TENANT_A,
            "alice",
            fixtures::WORKSPACE,
            "run-1",
            vec!["a-alice", "a-run1", "a-ws"],
        ),
        (
            fixtures::TENANT_A,
            "bob",
            fixtures::WORKSPACE,
            "run-9",
            vec!["a-bob", "a-ws"],
        ),
        (
            fixtures::TENANT_A,
            "alice",
            "ws-other",
            "run-2",
            vec!["a-alice", "a-run2"],
        ),
        (
            fixtures::TENANT_B,
            "alice",
            fixtures::WORKSPACE,
            "run-1",
            vec!["b-alice"],
        ),
        (
            fixtures::TENANT_B,
            "bob",
            fixtures::WORKSPACE,
            "run-1",
            vec![],
        ),
    ];
    for (tenant, principal, workspace, run, expected) in cases {
        let q = query(tenant, principal, workspace, run, T0 + 10);
        assert_eq!(
            readable_ids(&mut store, &q)?,
            expected,
            "{tenant}/{principal}/{workspace}/{run}"
        );
        // The identity read recall runs finds the same records, with the
        // same snapshot, and the bodies only of the ids the caller lacks.
        let full = store.eligible_records(&q)?;
        let (found, bodies) = store.eligible_unknown(&q, &|_| false)?;
        let ids: Vec<&str> = found.ids.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, expected, "{tenant}/{principal}/{workspace}/{run}");
        assert_eq!(found.snapshot, full.snapshot);
        assert_eq!(bodies, full.records);
        let (_, none) = store.eligible_unknown(&q, &|_| true)?;
        assert!(none.is_empty());
        // Read by id, a record answers only for its own tenant.
        let wanted: Vec<String> = expected.iter().map(|id| (*id).to_owned()).collect();
        assert_eq!(store.get_records(tenant, &wanted)?, full.records);
        let other = if tenant == fixtures::TENANT_A {
            fixtures::TENANT_B
        } else {
            fixtures::TENANT_A
        };
        assert!(store.get_records(other, &wanted)?.is_empty());
    }
    // Expiry is half-open.
    let q = query(
        fixtures::TENANT_A,
        "bob",
        fixtures::WORKSPACE,
        "run-9",
        T0 + fixtures::TTL_MS,
    );
    assert!(readable_ids(&mut store, &q)?.is_empty());
    let (found, _) = store.eligible_unknown(&q, &|_| true)?;
    assert_eq!(found.stable_until_unix_ms, None, "nothing left to change");
    let q = query(
        fixtures::TENANT_A,
        "bob",
        fixtures::WORKSPACE,
        "run-9",
        T0 + fixtures::TTL_MS - 1,
    );
    assert_eq!(readable_ids(&mut store, &q)?.len(), 2);
    // The answer holds until the first expiry...
    let (found, _) = store.eligible_unknown(&q, &|_| true)?;
    assert_eq!(found.stable_until_unix_ms, Some(T0 + fixtures::TTL_MS));
    // ...and, before the records were created, until the first comes of age.
    let mut early = q.clone();
    early.now_unix_ms = T0 - 1;
    let (found, _) = store.eligible_unknown(&early, &|_| true)?;
    assert!(found.ids.is_empty());
    assert_eq!(found.stable_until_unix_ms, Some(T0));
    // A stale policy digest sees nothing.
    let mut q = alice_run_1();
    q.policy_sha256 = fixtures::policy(fixtures::TENANT_B).policy_sha256;
    assert!(readable_ids(&mut store, &q)?.is_empty());
    Ok(())
}

/// Point 8: the snapshot identity is canonical, not iteration order.
pub fn snapshot_identity_ignores_insertion_order<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let mut snapshots = Vec::new();
    for order in [["x1", "x2", "x3"], ["x3", "x1", "x2"]] {
        let (_db, mut store) = setup(factory, &config)?;
        for id in order {
            let request = Spec::workspace(fixtures::TENANT_A, "alice", id).build();
            store.write(&request)?;
        }
        publish_all(&mut store, &config.required_index_targets, T0)?;
        let q = alice_run_1();
        let set = store.eligible_records(&q)?;
        let ids: Vec<_> = set
            .records
            .iter()
            .map(|r| r.record.record_id.clone())
            .collect();
        assert_eq!(ids, ["x1", "x2", "x3"]);
        snapshots.push(set.snapshot);
    }
    assert_eq!(snapshots[0], snapshots[1]);
    Ok(())
}

/// The store lists every accepted record of a tenant (erased ones as
/// identities), filtered by exact subject, kind, state and proposing
/// principal, paginated by record id; content only when asked for and never
/// for a revoked or erased record.
pub fn listing_filters_and_paginates_without_erased_content<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let a = fixtures::TENANT_A;
    let specs = [
        Spec::principal(a, "alice", "a-pref-1"),
        Spec::principal(a, "alice", "a-pref-2"),
        Spec::principal(a, "bob", "b-pref-1"),
        Spec::workspace(a, "bob", "b-ws-1"),
        Spec::workspace(a, "alice", "a-ws-1"),
        Spec::run(a, "alice", "a-run-1", "run-1"),
        Spec::run(a, "alice", "a-run-2", "run-2"),
    ];
    for spec in &specs {
        let outcome = store.write(&spec.build())?;
        assert!(outcome.is_accepted(), "{:?}", outcome.decision);
    }
    // A rejected proposal creates no record and is not listed.
    let mut rejected = Spec::principal(a, "alice", "a-rejected").build();
    rejected.judgments.clear();
    assert!(!store.write(&rejected)?.is_accepted());
    // One stays publishing (written after publication), one is erased, one
    // revoked (content still stored), one superseded.
    publish_all(&mut store, &config.required_index_targets, T0 + 1)?;
    let superseding = Spec {
        supersedes: Some(("a-pref-2".into(), 1)),
        now: T0 + 2,
        ..Spec::principal(a, "alice", "a-pref-3")
    };
    assert!(store.write(&superseding.build())?.is_accepted());
    publish_all(&mut store, &config.required_index_targets, T0 + 3)?;
    assert!(
        store
            .write(&Spec::principal(a, "bob", "b-pref-2").build())?
            .is_accepted()
    );
    revoke_to_receipt(
        &mut store,
        "a-run-1",
        &config.required_index_targets,
        T0 + 10,
    )?;
    store.revoke(
        "a-ws-1",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0 + 20,
    )?;

    let mut all = RecordFilter::tenant(a, 3);
    all.include_content = true;
    let listed = list_all(&mut store, &all)?;
    let mut expected = vec![
        "a-pref-1", "a-pref-2", "a-pref-3", "a-run-1", "a-run-2", "a-ws-1", "b-pref-1", "b-pref-2",
        "b-ws-1",
    ];
    expected.sort_unstable();
    assert_eq!(ids(&listed), expected, "every accepted record, by id");
    let state_of = |id: &str| listed.iter().find(|r| r.record_id == id).map(|r| r.state);
    assert_eq!(state_of("a-pref-1"), Some(ListedState::Active));
    assert_eq!(state_of("a-pref-2"), Some(ListedState::Superseded));
    assert_eq!(state_of("b-pref-2"), Some(ListedState::Publishing));
    assert_eq!(state_of("a-ws-1"), Some(ListedState::Revoked));
    assert_eq!(state_of("a-run-1"), Some(ListedState::Erased));
    for record in &listed {
        assert_eq!(record.tenant_id, a);
        let spec = specs
            .iter()
            .chain([&superseding])
            .find(|s| s.record_id == record.record_id);
        if let Some(spec) = spec {
            assert_eq!(record.subject, spec.subject, "{}", record.record_id);
            assert_eq!(record.kind, spec.kind, "{}", record.record_id);
            assert_eq!(
                record.proposer_principal_id, spec.principal,
                "the authenticated writer is stored"
            );
            assert_eq!(record.proposal_id, format!("p-{}", spec.record_id));
        }
        match record.state {
            ListedState::Erased => {
                assert_eq!(record.content, None, "erased content is never listed");
                assert_eq!(record.line, None);
                assert_eq!(record.revocation_stage, Some(RevocationStage::Finalized));
            }
            ListedState::Revoked => {
                assert_eq!(record.content, None, "revoked content is not listed");
                assert_eq!(record.revocation_stage, Some(RevocationStage::Ineligible));
            }
            _ => {
                let stored = store
                    .get_record(&record.record_id)?
                    .expect("listed record exists");
                assert_eq!(record.content.as_deref(), Some(stored.content.as_str()));
                assert_eq!(
                    record.line,
                    Some((stored.line_id.clone(), stored.line_generation))
                );
                assert_eq!(record.created_at_unix_ms, stored.record.created_at_unix_ms);
                assert_eq!(record.revocation_stage, None);
            }
        }
    }
    // Without include_content, no content at all.
    let bare = list_all(&mut store, &RecordFilter::tenant(a, MAX_LIST_LIMIT))?;
    assert_eq!(ids(&bare), expected);
    assert!(bare.iter().all(|r| r.content.is_none()));

    // Pages: exact boundaries, and `after` excludes its own id.
    let page = store.list_records(&RecordFilter::tenant(a, expected.len()))?;
    assert_eq!(page.records.len(), expected.len());
    assert_eq!(page.next_after, None, "a full last page has no next");
    let page = store.list_records(&RecordFilter {
        after_record_id: Some("a-run-1".into()),
        ..RecordFilter::tenant(a, 2)
    })?;
    assert_eq!(ids(&page.records), ["a-run-2", "a-ws-1"]);
    assert_eq!(page.next_after.as_deref(), Some("a-ws-1"));

    // Filters.
    let filtered = |f: RecordFilter, store: &mut F::Store| -> StoreResult<Vec<String>> {
        Ok(list_all(store, &f)?
            .into_iter()
            .map(|r| r.record_id)
            .collect())
    };
    let alice = mosaic_harness::MemorySubject::Principal {
        principal_id: "alice".into(),
    };
    assert_eq!(
        filtered(
            RecordFilter {
                subject: Some(alice.clone()),
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["a-pref-1", "a-pref-2", "a-pref-3"]
    );
    assert_eq!(
        filtered(
            RecordFilter {
                subject: Some(mosaic_harness::MemorySubject::Run {
                    run_id: "run-2".into()
                }),
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["a-run-2"],
        "exact subject: another run's working state is not listed"
    );
    assert_eq!(
        filtered(
            RecordFilter {
                subject: Some(mosaic_harness::MemorySubject::PrincipalInWorkspace {
                    workspace_id: fixtures::WORKSPACE.into(),
                    principal_id: "alice".into(),
                }),
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        Vec::<String>::new(),
        "a different subject shape naming the same principal matches nothing"
    );
    assert_eq!(
        filtered(
            RecordFilter {
                kinds: vec![mosaic_harness::MemoryKind::Working],
                ..RecordFilter::tenant(a, 1)
            },
            &mut store
        )?,
        ["a-run-1", "a-run-2"]
    );
    assert_eq!(
        filtered(
            RecordFilter {
                proposer_principal_id: Some("bob".into()),
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["b-pref-1", "b-pref-2", "b-ws-1"]
    );
    assert_eq!(
        filtered(
            RecordFilter {
                states: vec![ListedState::Erased, ListedState::Revoked],
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["a-run-1", "a-ws-1"]
    );
    assert_eq!(
        filtered(
            RecordFilter {
                states: vec![ListedState::Active],
                proposer_principal_id: Some("alice".into()),
                kinds: vec![mosaic_harness::MemoryKind::Semantic],
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        ["a-pref-1", "a-pref-3"],
        "filters combine"
    );
    // What one principal may read: its own subject, a granted workspace's
    // and a granted run's, never another principal's (nor a run it was
    // not granted), with the other filters and the cursor applied within.
    let reader = |principal: &str, workspaces: &[&str], runs: &[&str]| RecordVisibility {
        principal_id: principal.into(),
        workspace_ids: workspaces.iter().map(|w| (*w).to_owned()).collect(),
        run_ids: runs.iter().map(|r| (*r).to_owned()).collect(),
    };
    assert_eq!(
        filtered(
            RecordFilter {
                visible_to: Some(reader("alice", &[fixtures::WORKSPACE], &["run-2"])),
                ..RecordFilter::tenant(a, 2)
            },
            &mut store
        )?,
        [
            "a-pref-1", "a-pref-2", "a-pref-3", "a-run-2", "a-ws-1", "b-ws-1"
        ]
    );
    assert_eq!(
        filtered(
            RecordFilter {
                visible_to: Some(reader("bob", &[], &[])),
                ..RecordFilter::tenant(a, 1)
            },
            &mut store
        )?,
        ["b-pref-1", "b-pref-2"],
        "no granted workspace or run: its own subject only"
    );
    let page = store.list_records(&RecordFilter {
        visible_to: Some(reader("bob", &[fixtures::WORKSPACE], &[])),
        after_record_id: Some("a-pref-1".into()),
        ..RecordFilter::tenant(a, 1)
    })?;
    assert_eq!(ids(&page.records), ["a-ws-1"]);
    assert_eq!(
        page.next_after.as_deref(),
        Some("a-ws-1"),
        "a page ends on a record the reader may read"
    );
    // Page sizes outside 1..=MAX_LIST_LIMIT are refused.
    for limit in [0, MAX_LIST_LIMIT + 1] {
        assert!(matches!(
            store.list_records(&RecordFilter::tenant(a, limit)),
            Err(StoreError::InvalidArgument(_))
        ));
    }
    Ok(())
}

/// Listing as one tenant never yields another tenant's rows, whatever the
/// filters (same principal names, same subject, an `after` cursor taken
/// from the other tenant).
pub fn listing_never_crosses_tenants<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let (a, b) = (fixtures::TENANT_A, fixtures::TENANT_B);
    for spec in [
        Spec::principal(a, "alice", "a-1"),
        Spec::workspace(a, "alice", "a-2"),
        Spec::principal(b, "alice", "b-1"),
        Spec::workspace(b, "alice", "b-2"),
        Spec::run(b, "alice", "b-3", "run-1"),
    ] {
        assert!(store.write(&spec.build())?.is_accepted());
    }
    publish_all(&mut store, &config.required_index_targets, T0 + 1)?;
    revoke_to_receipt(&mut store, "b-3", &config.required_index_targets, T0 + 10)?;
    let alice = mosaic_harness::MemorySubject::Principal {
        principal_id: "alice".into(),
    };
    for (tenant, own) in [(a, vec!["a-1", "a-2"]), (b, vec!["b-1", "b-2", "b-3"])] {
        let filters = [
            RecordFilter::tenant(tenant, 1),
            RecordFilter {
                subject: Some(alice.clone()),
                ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
            },
            RecordFilter {
                proposer_principal_id: Some("alice".into()),
                include_content: true,
                ..RecordFilter::tenant(tenant, 2)
            },
            RecordFilter {
                states: ListedState::ALL.to_vec(),
                after_record_id: Some(String::new()),
                ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
            },
        ];
        for filter in filters {
            for record in list_all(&mut store, &filter)? {
                assert_eq!(record.tenant_id, tenant, "{filter:?} crossed tenants");
                assert!(
                    own.contains(&record.record_id.as_str()),
                    "{} listed under {tenant}",
                    record.record_id
                );
            }
        }
        assert_eq!(
            ids(&list_all(&mut store, &RecordFilter::tenant(tenant, 1))?),
            own
        );
    }
    // A cursor from the other tenant's id space changes nothing.
    let page = store.list_records(&RecordFilter {
        after_record_id: Some("a-1".into()),
        ..RecordFilter::tenant(b, MAX_LIST_LIMIT)
    })?;
    assert_eq!(ids(&page.records), ["b-1", "b-2", "b-3"]);
    assert!(
        store
            .list_records(&RecordFilter::tenant("tenant-unknown", 10))?
            .records
            .is_empty()
    );
    Ok(())
}

/// The visibility walk (`RecordFilter::visible_to`, in SQL) returns
/// exactly the records [`RecordVisibility::admits`] (the service's rule
/// for every record it answers) admits, for every kind of subject (run,
/// principal, principal in a workspace, workspace, procedure; the
/// reader's own and another's; ids that are SQL wildcards or look like
/// another subject's) and every grant shape (no workspace or run, one,
/// several, a wildcard-looking one; an application key's user reads under
/// a grant stored from the key's bounds, so it is one of these shapes):
/// neither hides a record the other shows. Another tenant's rows never
/// come back.
pub fn visibility_walk_admits_what_the_visibility_rule_admits<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let (db, mut store) = setup(factory, &config)?;
    let principal = |p: &str| MemorySubject::Principal {
        principal_id: p.into(),
    };
    let in_workspace = |w: &str, p: &str| MemorySubject::PrincipalInWorkspace {
        workspace_id: w.into(),
        principal_id: p.into(),
    };
    let workspace = |w: &str| MemorySubject::Workspace {
        workspace_id: w.into(),
    };
    let procedure = |w: &str, id: &str| MemorySubject::Procedure {
        workspace_id: w.into(),
        procedure_id: id.into(),
    };
    let run = |r: &str| MemorySubject::Run { run_id: r.into() };
    let subjects = vec![
        principal("alice"),
        principal("bob"),
        principal("ws-a"),
        principal("al%"),
        in_workspace("ws-a", "alice"),
        in_workspace("ws-b", "alice"),
        in_workspace("ws-a", "bob"),
        in_workspace("alice", "ws-a"),
        in_workspace("ws_a", "alice"),
        workspace("ws-a"),
        workspace("ws-b"),
        workspace("ws_a"),
        workspace("ws-%"),
        workspace("alice"),
        procedure("ws-a", "proc-1"),
        procedure("ws-b", "proc-2"),
        procedure("proc-1", "ws-a"),
        run("run-a"),
        run("run-b"),
        run("run_a"),
        run("alice"),
    ];
    let mut sql = String::new();
    let mut ours = Vec::new();
    for (tenant, prefix) in [(fixtures::TENANT_A, "v"), (fixtures::TENANT_B, "x")] {
        for (i, subject) in subjects.iter().enumerate() {
            let id = format!("{prefix}-{i:02}");
            let (t, a, b) = crate::ops::subject_columns(subject);
            sql.push_str(&format!(
                "INSERT INTO record_catalog (record_id, tenant_id, kind, subject_type, \
                 subject_a, subject_b, proposer_principal_id, proposal_id, created_at_ms) \
                 VALUES ('{id}', '{tenant}', 'semantic', '{t}', '{a}', '{b}', 'alice', \
                 'p-{id}', {T0});\n"
            ));
            if tenant == fixtures::TENANT_A {
                ours.push((id, subject.clone()));
            }
        }
    }
    factory.execute_as_owner(&db, &sql)?;
    let sets = |names: &[&str]| -> Vec<String> { names.iter().map(|n| (*n).to_owned()).collect() };
    let workspace_grants = [
        sets(&[]),
        sets(&["ws-a"]),
        sets(&["ws-a", "ws-b"]),
        sets(&["ws-%"]),
        sets(&["ws_a"]),
    ];
    let run_grants = [sets(&[]), sets(&["run-a"]), sets(&["run-a", "run-b"])];
    let mut readers = 0;
    for reader in ["alice", "bob", "carol", "ws-a"] {
        for workspace_ids in &workspace_grants {
            for run_ids in &run_grants {
                let visibility = RecordVisibility {
                    principal_id: reader.to_owned(),
                    workspace_ids: workspace_ids.clone(),
                    run_ids: run_ids.clone(),
                };
                let mut walked = Vec::new();
                let mut filter = RecordFilter {
                    visible_to: Some(visibility.clone()),
                    ..RecordFilter::tenant(fixtures::TENANT_A, 4)
                };
                loop {
                    let page = store.list_records(&filter)?;
                    walked.extend(page.records.into_iter().map(|r| r.record_id));
                    match page.next_after {
                        Some(next) => filter.after_record_id = Some(next),
                        None => break,
                    }
                }
                let admitted: Vec<String> = ours
                    .iter()
                    .filter(|(_, subject)| visibility.admits(subject))
                    .map(|(id, _)| id.clone())
                    .collect();
                assert_eq!(walked, admitted, "{visibility:?}");
                readers += 1;
            }
        }
    }
    assert_eq!(readers, 4 * 5 * 3);
    Ok(())
}
