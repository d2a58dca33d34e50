//! Deterministic fixtures shared by the examples, tests, golden vectors and
//! benchmarks. They are plain values: building them does no I/O.

use crate::canonical::sha256_hex;
use crate::memory_scope::MemoryReadContext;
use crate::record::{
    MEMORY_SCHEMA_VERSION, MemoryKind, MemoryRecord, MemorySource, MemoryStatus, MemorySubject,
};

/// 2026-07-25T00:00:00Z, the fixed "now" of the scoped selection fixture.
pub const FIXTURE_NOW_UNIX_MS: u64 = 1_784_937_600_000;
const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;

/// The tenant of every fixture record.
pub const FIXTURE_TENANT: &str = "tenant-acme";

/// The digest of the fixture's current policy.
pub fn fixture_policy_sha256() -> String {
    sha256_hex(b"policy: acme memory policy v3")
}

/// The read context of the scoped selection fixture: principal
/// `user-vinay` in workspace `ws-rust`, run `run-current`, every kind
/// allowed, room for eight records.
pub fn scoped_selection_context() -> MemoryReadContext {
    MemoryReadContext {
        schema_version: MEMORY_SCHEMA_VERSION,
        selector_release: "memory-scope-v1".into(),
        tenant_id: FIXTURE_TENANT.into(),
        policy_sha256: fixture_policy_sha256(),
        policy_valid_from_unix_ms: FIXTURE_NOW_UNIX_MS - 30 * DAY_MS,
        policy_valid_until_unix_ms: None,
        principal_id: "user-vinay".into(),
        workspace_id: "ws-rust".into(),
        run_id: "run-current".into(),
        now_unix_ms: FIXTURE_NOW_UNIX_MS,
        allowed_kinds: MemoryKind::ALL.to_vec(),
        max_records: 8,
        filter: None,
    }
}

/// A source whose digests derive from `label`.
pub fn fixture_source(label: &str) -> MemorySource {
    MemorySource {
        source_id: format!("src-{label}"),
        content_sha256: sha256_hex(format!("source content: {label}").as_bytes()),
        provenance_sha256: sha256_hex(format!("source provenance: {label}").as_bytes()),
        locator_sha256: sha256_hex(format!("source locator: {label}").as_bytes()),
    }
}

/// A verified record with the given content; digests derive from it.
pub fn fixture_record(
    record_id: &str,
    kind: MemoryKind,
    subject: MemorySubject,
    content: &str,
    created_at_unix_ms: u64,
) -> MemoryRecord {
    MemoryRecord {
        schema_version: MEMORY_SCHEMA_VERSION,
        record_id: record_id.into(),
        kind,
        tenant_id: FIXTURE_TENANT.into(),
        policy_sha256: fixture_policy_sha256(),
        subject,
        status: MemoryStatus::Verified,
        content_sha256: sha256_hex(content.as_bytes()),
        provenance_sha256: sha256_hex(format!("provenance of {record_id}").as_bytes()),
        token_count: u32::try_from(content.split_whitespace().count()).unwrap_or(u32::MAX),
        token_counter_release: "whitespace-v1".into(),
        created_at_unix_ms,
        expires_at_unix_ms: Some(created_at_unix_ms + 90 * DAY_MS),
        writer_release: "memory-writer-v1".into(),
        sources: vec![fixture_source(record_id)],
        summary: None,
        metadata: None,
        address: None,
    }
}

/// The chapter 7 fixture: eight records, with their contents. Four are
/// selected (working-current, semantic-user, procedure-build, episode-user)
/// and four dropped (working state of another run, semantic state of
/// another principal, an expired episode, a revoked procedure).
pub fn scoped_selection_records() -> Vec<(MemoryRecord, String)> {
    let now = FIXTURE_NOW_UNIX_MS;
    let run = |id: &str| MemorySubject::Run { run_id: id.into() };
    let principal = |id: &str| MemorySubject::Principal {
        principal_id: id.into(),
    };
    let procedure = |id: &str| MemorySubject::Procedure {
        workspace_id: "ws-rust".into(),
        procedure_id: id.into(),
    };
    let spec: Vec<(&str, MemoryKind, MemorySubject, &str, u64)> = vec![
        (
            "working-current",
            MemoryKind::Working,
            run("run-current"),
            "Plan: fix the failing migration test, then rerun the workspace tests.",
            now - HOUR_MS,
        ),
        (
            "working-old",
            MemoryKind::Working,
            run("run-old"),
            "Hypothesis from an abandoned run: the cache is corrupt.",
            now - 2 * DAY_MS,
        ),
        (
            "semantic-user",
            MemoryKind::Semantic,
            principal("user-vinay"),
            "For alerts, keep the first response concise.",
            now - 10 * DAY_MS,
        ),
        (
            "semantic-other",
            MemoryKind::Semantic,
            principal("user-other"),
            "Prefers long tutorials with every step explained.",
            now - 3 * DAY_MS,
        ),
        (
            "procedure-build",
            MemoryKind::Procedural,
            procedure("build"),
            "Build with cargo build --workspace, then run cargo test.",
            now - 20 * DAY_MS,
        ),
        (
            "procedure-revoked",
            MemoryKind::Procedural,
            procedure("deploy"),
            "Deploy by pushing straight to production.",
            now - 15 * DAY_MS,
        ),
        (
            "episode-user",
            MemoryKind::Episodic,
            principal("user-vinay"),
            "The user rejected a verbose answer in run-41.",
            now - 5 * DAY_MS,
        ),
        (
            "episode-expired",
            MemoryKind::Episodic,
            principal("user-vinay"),
            "The user asked for a weekly report in an old project.",
            now - 120 * DAY_MS,
        ),
    ];
    spec.into_iter()
        .map(|(id, kind, subject, content, created)| {
            let mut record = fixture_record(id, kind, subject, content, created);
            match id {
                "procedure-revoked" => {
                    record.status = MemoryStatus::Revoked {
                        revoked_at_unix_ms: now - DAY_MS,
                    }
                }
                "episode-expired" => record.expires_at_unix_ms = Some(now - 30 * DAY_MS),
                _ => {}
            }
            (record, content.to_owned())
        })
        .collect()
}
