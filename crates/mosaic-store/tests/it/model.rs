//! Model-based test: random sequences of write, supersede, revoke, withdraw
//! consent, publish, advance the clock and reopen, against the SQLite store
//! and a small in-memory model. After every step every read must agree with
//! the model (zero divergences) and must never return a record of another
//! tenant, principal, run or workspace.

use std::collections::BTreeSet;

use mosaic_harness::{MemoryKind, MemorySubject};
use mosaic_store::conformance::fixtures::{self, Spec, T0};
use mosaic_store::conformance::{publish_all, test_config};
use mosaic_store::{
    EligibilityQuery, RevocationReason, SqliteStore, Store, StoreError, WriteDecision,
};
use proptest::prelude::*;

const TENANTS: [&str; 2] = [fixtures::TENANT_A, fixtures::TENANT_B];
const PRINCIPALS: [&str; 2] = ["alice", "bob"];
const RUNS: [&str; 2] = ["run-0", "run-1"];
const WORKSPACES: [&str; 2] = [fixtures::WORKSPACE, "ws-other"];

#[derive(Clone, Debug)]
enum Op {
    Write {
        tenant: usize,
        principal: usize,
        shape: u8,
        run: usize,
    },
    Supersede {
        pick: usize,
    },
    Revoke {
        pick: usize,
    },
    Withdraw {
        tenant: usize,
        principal: usize,
    },
    Publish,
    Advance {
        ms: u64,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, 0..2usize, 0..3u8, 0..2usize).prop_map(|(tenant, principal, shape, run)| Op::Write { tenant, principal, shape, run }),
        2 => any::<usize>().prop_map(|pick| Op::Supersede { pick }),
        2 => any::<usize>().prop_map(|pick| Op::Revoke { pick }),
        1 => (0..2usize, 0..2usize).prop_map(|(tenant, principal)| Op::Withdraw { tenant, principal }),
        3 => Just(Op::Publish),
        2 => (1..20 * fixtures::DAY_MS).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Publishing,
    Active,
    Superseded,
    Revoked,
}

#[derive(Clone, Debug)]
struct Rec {
    spec: Spec,
    state: State,
    /// Replaced in its line (stays true after a later revocation).
    superseded: bool,
    generation: u64,
    created: u64,
    expires: u64,
}

#[derive(Default)]
struct Model {
    recs: Vec<Rec>,
    withdrawn: BTreeSet<(String, String)>,
    next: usize,
}

impl Model {
    fn visible(&self, q: &EligibilityQuery) -> Vec<String> {
        let mut ids: Vec<String> = self
            .recs
            .iter()
            .filter(|r| {
                r.state == State::Active
                    && r.spec.tenant == q.tenant_id
                    && r.created <= q.now_unix_ms
                    && q.now_unix_ms < r.expires
                    && subject_matches(&r.spec.subject, q)
            })
            .map(|r| r.spec.record_id.clone())
            .collect();
        ids.sort();
        ids
    }
}

fn subject_matches(subject: &MemorySubject, q: &EligibilityQuery) -> bool {
    match subject {
        MemorySubject::Run { run_id } => run_id == &q.run_id,
        MemorySubject::Principal { principal_id } => principal_id == &q.principal_id,
        MemorySubject::PrincipalInWorkspace {
            workspace_id,
            principal_id,
        } => workspace_id == &q.workspace_id && principal_id == &q.principal_id,
        MemorySubject::Workspace { workspace_id }
        | MemorySubject::Procedure { workspace_id, .. } => workspace_id == &q.workspace_id,
    }
}

fn open(path: &std::path::Path) -> SqliteStore {
    SqliteStore::open(path, test_config()).expect("open")
}

fn run_ops(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("model.sqlite");
    let mut store = open(&path);
    for tenant in TENANTS {
        fixtures::seed(&mut store, tenant, &PRINCIPALS).expect("seed");
    }
    let targets = test_config().required_index_targets;
    let mut model = Model::default();
    let mut now = T0;
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Write {
                tenant,
                principal,
                shape,
                run,
            } => {
                let id = format!("m{}", model.next);
                model.next += 1;
                let (t, p) = (TENANTS[tenant], PRINCIPALS[principal]);
                let mut spec = match shape {
                    0 => Spec::principal(t, p, &id),
                    1 => Spec::workspace(t, p, &id),
                    _ => Spec::run(t, p, &id, RUNS[run]),
                };
                spec.now = now;
                let outcome = store.write(&spec.build()).expect("write");
                let needs_consent = spec.with_consent;
                let expect_accept =
                    !(needs_consent && model.withdrawn.contains(&(t.into(), p.into())));
                prop_assert_eq!(outcome.is_accepted(), expect_accept, "step {}", step);
                if expect_accept {
                    model.recs.push(Rec {
                        spec,
                        state: State::Publishing,
                        superseded: false,
                        generation: 1,
                        created: now,
                        expires: now + fixtures::TTL_MS,
                    });
                }
            }
            Op::Supersede { pick } => {
                if model.recs.is_empty() {
                    continue;
                }
                let idx = pick % model.recs.len();
                let target = model.recs[idx].clone();
                let id = format!("m{}", model.next);
                model.next += 1;
                let mut spec = target.spec.clone();
                spec.record_id = id;
                spec.now = now;
                spec.supersedes = Some((target.spec.record_id.clone(), target.generation));
                spec.conflicts = Vec::new();
                let result = store.write(&spec.build());
                match target.state {
                    _ if target.superseded => prop_assert!(
                        matches!(result, Err(StoreError::StaleGeneration { .. })),
                        "step {}: {:?}",
                        step,
                        result
                    ),
                    State::Revoked | State::Superseded => prop_assert!(
                        matches!(result, Err(StoreError::InvalidState { .. })),
                        "step {}: {:?}",
                        step,
                        result
                    ),
                    State::Publishing | State::Active => {
                        let withdrawn = spec.with_consent
                            && model
                                .withdrawn
                                .contains(&(spec.tenant.clone(), spec.principal.clone()));
                        let outcome = result.expect("supersede");
                        prop_assert_eq!(outcome.is_accepted(), !withdrawn, "step {}", step);
                        if let WriteDecision::Accepted {
                            line_generation, ..
                        } = outcome.decision
                        {
                            prop_assert_eq!(line_generation, target.generation + 1);
                            model.recs[idx].state = State::Superseded;
                            model.recs[idx].superseded = true;
                            model.recs.push(Rec {
                                spec,
                                state: State::Publishing,
                                superseded: false,
                                generation: line_generation,
                                created: now,
                                expires: now + fixtures::TTL_MS,
                            });
                        }
                    }
                }
            }
            Op::Revoke { pick } => {
                if model.recs.is_empty() {
                    continue;
                }
                let idx = pick % model.recs.len();
                let id = model.recs[idx].spec.record_id.clone();
                let result = store.revoke(
                    &id,
                    &RevocationReason::Requested,
                    &fixtures::authorization("model"),
                    now,
                );
                if model.recs[idx].state == State::Revoked {
                    prop_assert!(result.is_err(), "step {}: double revoke", step);
                } else {
                    result.expect("revoke");
                    model.recs[idx].state = State::Revoked;
                }
            }
            Op::Withdraw { tenant, principal } => {
                let (t, p) = (TENANTS[tenant], PRINCIPALS[principal]);
                let digest = fixtures::consent_digest(&fixtures::consent(t, p));
                let result = store.withdraw_consent(t, &digest, &fixtures::authorization(p), now);
                if !model.withdrawn.insert((t.into(), p.into())) {
                    prop_assert!(result.is_err(), "step {}: double withdrawal", step);
                } else {
                    let withdrawal = result.expect("withdraw");
                    let mut expected = Vec::new();
                    for rec in &mut model.recs {
                        if rec.spec.with_consent
                            && rec.spec.tenant == t
                            && rec.spec.principal == p
                            && rec.state != State::Revoked
                        {
                            rec.state = State::Revoked;
                            expected.push(rec.spec.record_id.clone());
                        }
                    }
                    expected.sort();
                    let got: Vec<String> = withdrawal
                        .revoked
                        .iter()
                        .map(|t| t.record_id().to_owned())
                        .collect();
                    prop_assert_eq!(got, expected, "step {}", step);
                }
            }
            Op::Publish => {
                publish_all(&mut store, &targets, now).expect("publish");
                for rec in &mut model.recs {
                    if rec.state == State::Publishing {
                        rec.state = State::Active;
                    }
                }
            }
            Op::Advance { ms } => now += ms,
            Op::Reopen => {
                drop(store);
                store = open(&path);
            }
        }
        for tenant in TENANTS {
            for principal in PRINCIPALS {
                for run in RUNS {
                    for workspace in WORKSPACES {
                        let q = EligibilityQuery {
                            tenant_id: tenant.into(),
                            policy_sha256: fixtures::policy(tenant).policy_sha256,
                            principal_id: principal.into(),
                            workspace_id: workspace.into(),
                            run_id: run.into(),
                            now_unix_ms: now,
                            kinds: MemoryKind::ALL.to_vec(),
                        };
                        let got = store.eligible_records(&q).expect("read");
                        for r in &got.records {
                            prop_assert_eq!(&r.record.tenant_id, &q.tenant_id, "cross-tenant read");
                            prop_assert!(
                                subject_matches(&r.record.subject, &q),
                                "cross-scope read of {} by {:?}",
                                r.record.record_id,
                                q
                            );
                        }
                        let ids: Vec<String> = got
                            .records
                            .into_iter()
                            .map(|r| r.record.record_id)
                            .collect();
                        prop_assert_eq!(ids, model.visible(&q), "divergence after step {}", step);
                    }
                }
            }
        }
    }
    let report = store.integrity_check().expect("integrity");
    prop_assert!(report.is_ok(), "{:?}", report);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn store_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..30)) {
        run_ops(ops)?;
    }
}
