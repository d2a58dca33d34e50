//! `mosaic demo`: the spec's story against an embedded service in a
//! temporary directory.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::MemoryPurpose;
use mosaic_harness::memory_write::SourceJudgment;
use mosaic_harness::{MemoryKind, MemorySubject};
use mosaic_service::api::signed::Signed;
use mosaic_service::api::{
    ConsentRequest, ProposeRequest, RecallRequest, RevokeRequest, VerifyRequest,
    admin::{CreateKeyRequest, CreateTenantRequest, GrantRequest, PolicyRequest},
};
use mosaic_service::examples::{preference, quoted_proposal, supported_proposal, workspace_fact};
use mosaic_service::service::ADMIN_KEY_FILE;
use mosaic_service::{ServerConfig, Service};
use serde_json::json;

struct Out {
    json: bool,
}

impl Out {
    fn say(&self, kind: &str, human: &str, data: serde_json::Value) {
        let mut stdout = std::io::stdout().lock();
        let _ = if self.json {
            writeln!(stdout, "{}", json!({"type": kind, "data": data}))
        } else {
            writeln!(stdout, "{human}")
        };
    }
}

fn e(err: mosaic_service::ServiceError) -> anyhow::Error {
    anyhow!("{err}")
}

/// Runs the tour.
pub fn run(json: bool) -> Result<ExitCode> {
    let out = Out { json };
    let dir = tempfile::tempdir()?;
    let config = ServerConfig {
        data_dir: dir.path().join("data"),
        // A temporary directory holds no model: the tour is deterministic.
        embedder: Some(mosaic_service::embedder::EmbedderKind::Hash),
        ..ServerConfig::default()
    };
    let (service, _) = Service::open(config.clone()).map_err(e)?;
    let admin_key = std::fs::read_to_string(config.data_dir.join(ADMIN_KEY_FILE))?;
    let admin = service.authenticate(Some(admin_key.trim())).map_err(e)?;
    out.say(
        "step",
        "== 1. An operator creates tenant `acme` and a key for principal `vinay`.",
        json!({"step": 1}),
    );
    service
        .create_tenant(
            &admin,
            &CreateTenantRequest {
                tenant_id: "acme".into(),
                policy: Some(PolicyRequest {
                    allowed_kinds: None,
                    max_ttl_ms: Some(180 * 86_400_000),
                    require_consent_for_principal_semantic: Some(true),
                    minimum_procedure_eval_cases: None,
                    claim_updates: None,
                    // The story's workspace facts quote their own sources;
                    // by default shared facts need a registered verifier.
                    write_guards: Some(mosaic_service::settings::WriteGuards {
                        shared_semantic_evidence:
                            mosaic_service::settings::SharedSemanticEvidence::Any,
                        ..mosaic_service::settings::WriteGuards::default()
                    }),
                }),
            },
        )
        .map_err(e)?;
    let key = service
        .create_key(
            &admin,
            &CreateKeyRequest {
                tenant_id: "acme".into(),
                principal_id: "vinay".into(),
                grant: Some(GrantRequest {
                    allowed_kinds: None,
                    allowed_purposes: None,
                    allowed_workspace_ids: Some(vec!["support".into()]),
                    allowed_run_ids: Some(vec!["run-1".into()]),
                    expires_at_unix_ms: None,
                }),
            },
        )
        .map_err(e)?;
    let vinay = service.authenticate(Some(&key.key)).map_err(e)?;
    out.say(
        "key",
        &format!(
            "   key {} (the secret is shown once, stored only as SHA-256)",
            key.key_id
        ),
        json!({"key_id": key.key_id}),
    );
    let consent = service
        .give_consent(
            &vinay,
            &ConsentRequest {
                purpose: MemoryPurpose::Personalization,
                ui_release: "consent-ui-v1".into(),
                consent_id: None,
            },
        )
        .map_err(e)?;
    out.say(
        "consent",
        &format!(
            "   vinay consents to personalization: {}",
            consent.consent_sha256
        ),
        json!(consent),
    );

    out.say(
        "step",
        "\n== 2. Gated writes: the model proposes, deterministic software decides.\n   Evidence is the exact source text; the server's verbatim verifier judges it.",
        json!({"step": 2}),
    );
    let mut attempts: Vec<(&str, ProposeRequest)> = vec![
        (
            "a preference with consent and a supporting source",
            preference(
                "pref",
                "vinay",
                "Vinay wants alerts kept concise: one line, no emoji.",
                Some(consent.consent_sha256.clone()),
            ),
        ),
        (
            "the same kind of preference without consent",
            preference("noconsent", "vinay", "Vinay prefers dark mode.", None),
        ),
    ];
    attempts.push((
        "a workspace fact its source does not say",
        quoted_proposal(
            "unsupported",
            "The support queue closes at 5pm.",
            "The support queue closes at 6pm on weekdays.",
            MemoryKind::Semantic,
            MemoryPurpose::WorkspaceKnowledge,
            MemorySubject::Workspace {
                workspace_id: "support".into(),
            },
            None,
        ),
    ));
    let mut too_long = workspace_fact("ttl", "support", "Escalations go to the on-call lead.");
    too_long.ttl_ms = Some(400 * 86_400_000);
    attempts.push((
        "a workspace fact asking to live longer than policy allows",
        too_long,
    ));
    attempts.push((
        "a procedure the grant does not allow",
        supported_proposal(
            "proc",
            "Always restart the router first.",
            MemoryKind::Procedural,
            MemoryPurpose::ProcedureImprovement,
            MemorySubject::Procedure {
                workspace_id: "support".into(),
                procedure_id: "triage".into(),
            },
            None,
        ),
    ));
    let mut accepted_id = String::new();
    let mut accepted_proposal = String::new();
    for (what, request) in &attempts {
        let r = service.propose(&vinay, request).map_err(e)?;
        let reasons: Vec<String> = r.violations.iter().map(|v| v.code()).collect();
        let human = if r.decision == "accepted" {
            accepted_id.clone_from(&r.record_id);
            accepted_proposal.clone_from(&r.proposal_id);
            format!(
                "   ACCEPTED  {what}\n             record {} receipt {}",
                r.record_id, r.receipt.receipt_sha256
            )
        } else {
            format!(
                "   REJECTED  {what}\n             because: {}",
                reasons.join(", ")
            )
        };
        out.say("propose", &human, json!({"what": what, "decision": r.decision, "violations": r.violations, "receipt_sha256": r.receipt.receipt_sha256}));
    }
    // The agent certifies its own evidence: refused before anything is written.
    let mut self_certified = workspace_fact("self", "support", "Refunds need no approval.");
    self_certified.source_texts.clear();
    if let Some(source) = self_certified.sources.first() {
        self_certified
            .judgments
            .push(Signed::unsigned(SourceJudgment {
                source_id: source.source_id.clone(),
                claim_id: None,
                source_content_sha256: source.content_sha256.clone(),
                supports_proposal: true,
                verifier_release: "verifier-v1".into(),
                judgment_sha256: sha256_hex(b"self-certified"),
            }));
    }
    if let Err(err) = service.propose(&vinay, &self_certified) {
        out.say(
            "refused",
            &format!(
                "   REFUSED   a memory whose agent vouches for its own evidence: {} ({})",
                err.code(),
                err.status()
            ),
            json!({"code": err.code()}),
        );
    }
    let cross = preference("other", "someone-else", "Someone else's secret.", None);
    if let Err(err) = service.propose(&vinay, &cross) {
        out.say(
            "refused",
            &format!(
                "   REFUSED   a memory about another principal: {} ({})",
                err.code(),
                err.status()
            ),
            json!({"code": err.code()}),
        );
    }

    out.say(
        "step",
        "\n== 3. Recall: eligibility, ranking, selection, and a receipt.",
        json!({"step": 3}),
    );
    let recall_request = RecallRequest {
        workspace_id: Some("support".into()),
        query: Some("how should alerts look".into()),
        ..RecallRequest::default()
    };
    let recall = service.recall(&vinay, &recall_request).map_err(e)?;
    out.say("recall", &format!("{}\n   selection receipt {}", recall.context, recall.selection_receipt.receipt_sha256), json!({"selected": recall.selected_record_ids, "receipt_sha256": recall.selection_receipt.receipt_sha256}));
    let verified = service
        .verify(
            &vinay,
            &VerifyRequest::Write {
                proposal_id: accepted_proposal.clone(),
                receipt: None,
                receipt_signature: None,
            },
        )
        .map_err(e)?;
    out.say(
        "verify",
        &format!(
            "   the write receipt of {accepted_id} re-verifies from stored inputs: {}",
            verified.valid
        ),
        json!(verified),
    );

    out.say(
        "step",
        "\n== 4. Vinay revokes the memory; deletion ends in a receipt.",
        json!({"step": 4}),
    );
    let revoked = service
        .revoke(&vinay, &accepted_id, &RevokeRequest::default())
        .map_err(e)?;
    if let Some(receipt) = &revoked.deletion_receipt {
        let stores: Vec<String> = receipt
            .body
            .stores
            .iter()
            .map(|s| format!("{}@{}", s.store, s.acknowledged_generation))
            .collect();
        out.say(
            "deletion",
            &format!(
                "   stage {}; deletion receipt {}\n   acknowledged by: {}",
                revoked.stage,
                receipt.receipt_sha256,
                stores.join(", ")
            ),
            json!(revoked),
        );
    }
    let again = service.recall(&vinay, &recall_request).map_err(e)?;
    out.say(
        "recall",
        &format!(
            "   recall after revocation selects {} memories",
            again.selected_record_ids.len()
        ),
        json!({"selected": again.selected_record_ids}),
    );
    out.say(
        "done",
        "\nDone. Run `mosaic serve` to keep a service running.",
        json!({}),
    );
    Ok(ExitCode::SUCCESS)
}
