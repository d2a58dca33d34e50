//! Golden vectors for every read-side digest kind: fixture → canonical bytes
//! → SHA-256. The expected values live in `tests/golden/memory_scope.json`;
//! an accidental encoding change fails here. After an intentional change,
//! regenerate with `UPDATE_GOLDEN=1 cargo test -p mosaic-harness --test
//! golden_memory_scope` and review the diff.

use std::collections::BTreeMap;

use mosaic_harness::MemoryAddress;
use mosaic_harness::canonical::{domain_bytes, sha256_hex};
use mosaic_harness::fixtures::{
    fixture_source, scoped_selection_context, scoped_selection_records,
};
use mosaic_harness::memory_scope::{
    ContextBudget, ContextLane, DECIDED_RECORDS_DOMAIN, DecisionOutcome, ELIGIBLE_ENTRIES_DOMAIN,
    ELIGIBLE_SET_DOMAIN, ELIGIBLE_SET_V3_DOMAIN, READ_CONTEXT_DOMAIN, RECORD_DOMAIN,
    RECORD_SET_DOMAIN, RELEVANCE_RECEIPT_V2_DOMAIN, ReadScope, RelevanceInput,
    SELECTION_DECISIONS_DOMAIN, SELECTION_EXCEPTIONS_DOMAIN, SELECTION_RECEIPT_V4_DOMAIN,
    SELECTION_RECEIPT_V5_DOMAIN, ScopeCommitment, ScopeEntry, ScoredCandidate, SourceSetManifest,
    allocate_selected_memory, bind_scope_exceptions, bind_scope_roots, eligible_set,
    rank_relevance, record_set_digest, scope_root, select_memory, sign_source_set,
};
use mosaic_harness::merkle::to_hex;
use serde_json::{Value, json};

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/memory_scope.json"
);

fn vectors() -> BTreeMap<String, Value> {
    let ctx = scoped_selection_context();
    let records: Vec<_> = scoped_selection_records()
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    let selection = select_memory(&ctx, &records).unwrap();
    let receipt = selection.receipt.clone();
    let eligible = eligible_set(&ctx, &records).unwrap();
    let relevance_input = RelevanceInput {
        query_sha256: sha256_hex(b"golden query"),
        eligible: eligible.clone(),
        feature_release: "bm25-v1".into(),
        ranker_release: "rrf-v1".into(),
        scores: vec![
            ScoredCandidate {
                record_id: "semantic-user".into(),
                score: 750_000,
            },
            ScoredCandidate {
                record_id: "episode-user".into(),
                score: 750_000,
            },
        ],
        max_results: 5,
    };
    let relevance = rank_relevance(&relevance_input).unwrap();
    let manifest = SourceSetManifest::new(
        "summarizer-v1",
        vec![fixture_source("b"), fixture_source("a")],
    );
    let signed = sign_source_set(manifest.clone(), "key-1", &[9u8; 32]).unwrap();
    let budget = ContextBudget {
        token_counter_release: "whitespace-v1".into(),
        total_tokens: 30,
        lane_limits: [(ContextLane::Memory, 25)].into_iter().collect(),
    };
    let (allocation, report) = allocate_selected_memory(&receipt, &records, &[], &budget).unwrap();

    let context_bytes = domain_bytes(READ_CONTEXT_DOMAIN, &{
        let mut c = ctx.clone();
        c.allowed_kinds.sort();
        c
    })
    .unwrap();
    let mut out = BTreeMap::new();
    out.insert(
        "mosaic.memory.read_context.v1".into(),
        json!({"bytes": String::from_utf8(context_bytes.clone()).unwrap(),
               "sha256": sha256_hex(&context_bytes)}),
    );
    assert_eq!(sha256_hex(&context_bytes), ctx.digest().unwrap());
    // Each record's digest, then the set of (id, digest) pairs by id,
    // recomputed here from the documented encoding.
    let mut sorted = records.clone();
    sorted.sort_by(|a, b| a.record_id.cmp(&b.record_id));
    let record_bytes = domain_bytes(RECORD_DOMAIN, &sorted[0]).unwrap();
    out.insert(
        RECORD_DOMAIN.into(),
        json!({"record_id": sorted[0].record_id,
               "bytes": String::from_utf8(record_bytes.clone()).unwrap(),
               "sha256": sha256_hex(&record_bytes)}),
    );
    // A record with application metadata and an address: the two members
    // appear only when present, so the record above (without them)
    // encodes exactly as before they existed.
    let mut addressed = sorted[0].clone();
    addressed.metadata = Some(
        serde_json::from_value(
            json!({"category": "alerts", "priority": 2, "tags": ["ops", "pager"]}),
        )
        .unwrap(),
    );
    addressed.address = Some(MemoryAddress {
        namespace: vec!["user-vinay".into(), "preferences".into()],
        key: "alerts".into(),
    });
    addressed.validate().unwrap();
    let addressed_bytes = domain_bytes(RECORD_DOMAIN, &addressed).unwrap();
    out.insert(
        format!("{RECORD_DOMAIN} with metadata and address"),
        json!({"record_id": addressed.record_id,
               "bytes": String::from_utf8(addressed_bytes.clone()).unwrap(),
               "sha256": sha256_hex(&addressed_bytes)}),
    );
    let entries: Vec<Value> = sorted
        .iter()
        .map(|r| {
            json!({"record_id": r.record_id,
                   "record_sha256": sha256_hex(&domain_bytes(RECORD_DOMAIN, r).unwrap())})
        })
        .collect();
    let set_bytes = domain_bytes(RECORD_SET_DOMAIN, &entries).unwrap();
    assert_eq!(sha256_hex(&set_bytes), record_set_digest(&records).unwrap());
    assert_eq!(Some(sha256_hex(&set_bytes)), receipt.record_set_sha256);
    out.insert(
        RECORD_SET_DOMAIN.into(),
        json!({"bytes": String::from_utf8(set_bytes.clone()).unwrap(),
               "sha256": sha256_hex(&set_bytes)}),
    );
    out.insert(
        "mosaic.memory.selection_receipt.v2".into(),
        json!({"sha256": receipt.receipt_sha256}),
    );
    // The same selection bound to its read scopes' roots in place of the
    // record set (every fixture record of the tenant active in its scope),
    // recomputed here from the documented encoding.
    let commitments: Vec<ScopeCommitment> = ReadScope::of_context(&ctx)
        .into_iter()
        .map(|scope| {
            let entries: Vec<ScopeEntry> = records
                .iter()
                .filter(|r| r.tenant_id == ctx.tenant_id)
                .filter(|r| ReadScope::of_subject(&r.subject) == scope)
                .map(|r| ScopeEntry::of_record(r, "active").unwrap())
                .collect();
            ScopeCommitment {
                scope,
                generation: entries.len() as u64,
                root_sha256: to_hex(&scope_root(&entries).unwrap()),
            }
        })
        .collect();
    let mut v4 = receipt.clone();
    bind_scope_roots(&mut v4, commitments.clone()).unwrap();
    let mut v4_body = serde_json::to_value(&v4).unwrap();
    v4_body.as_object_mut().unwrap().remove("receipt_sha256");
    assert!(v4_body.get("record_set_sha256").is_none());
    let v4_bytes = domain_bytes(SELECTION_RECEIPT_V4_DOMAIN, &v4_body).unwrap();
    assert_eq!(sha256_hex(&v4_bytes), v4.receipt_sha256);
    // docs/ENCODING.md shows the same bytes and digest.
    let encoding = include_str!("../../../docs/ENCODING.md");
    let v4_text = String::from_utf8(v4_bytes.clone()).unwrap();
    for line in v4_text.lines().chain([v4.receipt_sha256.as_str()]) {
        assert!(
            encoding.contains(line),
            "docs/ENCODING.md does not show {line}"
        );
    }
    out.insert(
        SELECTION_RECEIPT_V4_DOMAIN.into(),
        json!({"bytes": String::from_utf8(v4_bytes.clone()).unwrap(),
               "sha256": v4.receipt_sha256}),
    );
    // The decision list in its compressed form, recomputed here from the
    // documented encoding: which records were decided on, the usual drop
    // (two of the fixture's four drops are subject mismatches), and every
    // other decision.
    let decided: Vec<Value> = selection
        .decisions
        .iter()
        .map(|d| json!({"record_id": d.record_id, "kind": d.kind}))
        .collect();
    let decided_bytes = domain_bytes(DECIDED_RECORDS_DOMAIN, &decided).unwrap();
    let mut reasons: Vec<&str> = selection
        .decisions
        .iter()
        .filter_map(|d| match d.outcome {
            DecisionOutcome::Dropped { reason } => Some(reason.as_str()),
            DecisionOutcome::Selected { .. } => None,
        })
        .collect();
    reasons.sort_unstable();
    assert_eq!(
        reasons,
        ["expired", "revoked", "subject_mismatch", "subject_mismatch"]
    );
    let usual = json!({"decision": "dropped", "reason": "subject_mismatch"});
    let exceptions: Vec<&_> = selection
        .decisions
        .iter()
        .filter(|d| serde_json::to_value(d.outcome).unwrap() != usual)
        .collect();
    assert_eq!(exceptions.len(), 6);
    let decisions_bytes = domain_bytes(
        SELECTION_DECISIONS_DOMAIN,
        &json!({"decided_sha256": sha256_hex(&decided_bytes),
                "usual": usual,
                "exceptions": exceptions}),
    )
    .unwrap();
    assert_eq!(Some(sha256_hex(&decisions_bytes)), receipt.decisions_sha256);
    out.insert(
        DECIDED_RECORDS_DOMAIN.into(),
        json!({"bytes": String::from_utf8(decided_bytes.clone()).unwrap(),
               "sha256": sha256_hex(&decided_bytes)}),
    );
    out.insert(
        SELECTION_DECISIONS_DOMAIN.into(),
        json!({"bytes": String::from_utf8(decisions_bytes.clone()).unwrap(),
               "sha256": sha256_hex(&decisions_bytes)}),
    );
    // v5: the same selection bound to the same roots, its decisions
    // committed to by the usual outcome and the exceptions alone (no
    // `decided_sha256`), recomputed here from the documented encoding.
    let exceptions_bytes = domain_bytes(
        SELECTION_EXCEPTIONS_DOMAIN,
        &json!({"usual": usual, "exceptions": exceptions}),
    )
    .unwrap();
    let mut v5 = receipt.clone();
    bind_scope_exceptions(&mut v5, &selection.decisions, commitments.clone()).unwrap();
    assert_eq!(v5.exceptions_sha256, Some(sha256_hex(&exceptions_bytes)));
    let mut v5_body = serde_json::to_value(&v5).unwrap();
    v5_body.as_object_mut().unwrap().remove("receipt_sha256");
    assert!(v5_body.get("record_set_sha256").is_none());
    assert!(v5_body.get("decisions_sha256").is_none());
    let v5_bytes = domain_bytes(SELECTION_RECEIPT_V5_DOMAIN, &v5_body).unwrap();
    assert_eq!(sha256_hex(&v5_bytes), v5.receipt_sha256);
    // docs/ENCODING.md shows the same bytes and digest.
    let v5_text = String::from_utf8(v5_bytes.clone()).unwrap();
    let exceptions_text = String::from_utf8(exceptions_bytes.clone()).unwrap();
    for line in v5_text
        .lines()
        .chain(exceptions_text.lines())
        .chain([v5.receipt_sha256.as_str()])
    {
        assert!(
            encoding.contains(line),
            "docs/ENCODING.md does not show {line}"
        );
    }
    out.insert(
        SELECTION_EXCEPTIONS_DOMAIN.into(),
        json!({"bytes": exceptions_text,
               "sha256": sha256_hex(&exceptions_bytes)}),
    );
    out.insert(
        SELECTION_RECEIPT_V5_DOMAIN.into(),
        json!({"bytes": v5_text, "sha256": v5.receipt_sha256}),
    );
    // The eligible set: its entries' digest, then the set's over it.
    let entries_bytes = domain_bytes(ELIGIBLE_ENTRIES_DOMAIN, &eligible.entries).unwrap();
    let set_bytes = domain_bytes(
        ELIGIBLE_SET_DOMAIN,
        &json!({"read_context_sha256": eligible.read_context_sha256,
                "entries_sha256": sha256_hex(&entries_bytes)}),
    )
    .unwrap();
    assert_eq!(sha256_hex(&set_bytes), eligible.digest().unwrap());
    out.insert(
        ELIGIBLE_ENTRIES_DOMAIN.into(),
        json!({"bytes": String::from_utf8(entries_bytes.clone()).unwrap(),
               "sha256": sha256_hex(&entries_bytes)}),
    );
    out.insert(
        ELIGIBLE_SET_DOMAIN.into(),
        json!({"bytes": String::from_utf8(set_bytes.clone()).unwrap(),
               "sha256": sha256_hex(&set_bytes)}),
    );
    // The same set named by its scopes' commitments (v3): no entry in it.
    let scoped = mosaic_harness::memory_scope::EligibleSet {
        scope_commitments: commitments.clone(),
        ..eligible.clone()
    };
    let scoped_bytes = domain_bytes(
        ELIGIBLE_SET_V3_DOMAIN,
        &json!({"read_context_sha256": eligible.read_context_sha256,
                "scope_commitments": commitments}),
    )
    .unwrap();
    assert_eq!(sha256_hex(&scoped_bytes), scoped.digest().unwrap());
    out.insert(
        ELIGIBLE_SET_V3_DOMAIN.into(),
        json!({"bytes": String::from_utf8(scoped_bytes.clone()).unwrap(),
               "sha256": sha256_hex(&scoped_bytes)}),
    );
    // A ranking over it binds it as `eligible_scopes_sha256`, under the
    // relevance receipt's v2 tag.
    let scoped_relevance = rank_relevance(&RelevanceInput {
        eligible: scoped,
        ..relevance_input.clone()
    })
    .unwrap();
    assert_eq!(scoped_relevance.eligible_set_sha256, None);
    assert_eq!(
        scoped_relevance.eligible_scopes_sha256,
        Some(sha256_hex(&scoped_bytes))
    );
    let mut relevance_body = serde_json::to_value(&scoped_relevance).unwrap();
    relevance_body
        .as_object_mut()
        .unwrap()
        .remove("receipt_sha256");
    assert_eq!(
        sha256_hex(&domain_bytes(RELEVANCE_RECEIPT_V2_DOMAIN, &relevance_body).unwrap()),
        scoped_relevance.receipt_sha256
    );
    out.insert(
        RELEVANCE_RECEIPT_V2_DOMAIN.into(),
        json!({"sha256": scoped_relevance.receipt_sha256}),
    );
    out.insert(
        "mosaic.memory.relevance_receipt.v1".into(),
        json!({"sha256": relevance.receipt_sha256}),
    );
    out.insert(
        "mosaic.memory.source_set.v1".into(),
        json!({"sha256": manifest.digest().unwrap(), "ed25519_signature": signed.signature_hex}),
    );
    out.insert(
        "mosaic.context.allocation.v1".into(),
        json!({"sha256": allocation.allocation_sha256}),
    );
    out.insert(
        "mosaic.memory.context_report.v1".into(),
        json!({"sha256": report.report_sha256}),
    );
    out
}

#[test]
fn memory_scope_golden_vectors_match() {
    let actual = vectors();
    let rendered = serde_json::to_string_pretty(&actual).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(GOLDEN, &rendered).unwrap();
    }
    let expected: BTreeMap<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(GOLDEN).unwrap()).unwrap();
    for (domain, value) in &actual {
        assert_eq!(
            expected.get(domain),
            Some(value),
            "golden vector for {domain} changed"
        );
    }
    assert_eq!(
        expected.len(),
        actual.len(),
        "golden file lists other domains"
    );
}
