//! What the benchmark examples share.

/// The value after `name` in `args`, or `default` when it is missing or
/// not a number.
pub fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The publication of one episodic turn `record_id` of `subject` under
/// `tenant` and `policy`, created at `at_ms`, as the benchmarks store
/// their generated turns (first generation, no claim keys). Not every
/// example that includes this module stores turns.
#[allow(dead_code)]
pub fn episodic_turn(
    record_id: String,
    tenant: &str,
    policy: &str,
    subject: &str,
    at_ms: u64,
    text: String,
) -> mosaic_index::PublishMessage {
    mosaic_index::PublishMessage {
        record_id,
        generation: 1,
        revocation_generation: 0,
        scope: mosaic_index::ScopeKeys {
            tenant_id: tenant.into(),
            policy_sha256: policy.into(),
            subject_key: subject.into(),
            kind: mosaic_harness::MemoryKind::Episodic,
        },
        created_at_unix_ms: at_ms,
        claim_keys: Vec::new(),
        text,
    }
}
