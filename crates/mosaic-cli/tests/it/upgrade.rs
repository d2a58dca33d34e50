//! Data directories of earlier releases open with this one. The release
//! before store schema 9 kept keys, tenants, their settings, policy
//! history, verifiers and server settings in the server's own
//! `catalog.sqlite` beside a schema 8 store; the release before schema 11
//! kept the proposals' owners, captured messages, extraction jobs and
//! export copies there. Their rows are imported into the store once, each
//! group in one transaction, and the old file is then removed. Each
//! directory is made by this release's own calls, then laid out as the
//! earlier release kept it (`common::as_released`,
//! `common::as_released_v10`).

use mosaic_service::ServerConfig;
use mosaic_service::Service;
use mosaic_service::api::admin::{PolicyRequest, RegisterVerifierRequest};
use mosaic_service::examples::workspace_fact;
use mosaic_service::settings::ClaimUpdates;

use crate::common::{TENANTS, WORKSPACE, as_released, as_released_v10, world};

fn count(data: &std::path::Path, file: &str, sql: &str) -> i64 {
    rusqlite::Connection::open(data.join(file))
        .expect("open")
        .query_row(sql, [], |r| r.get(0))
        .expect("count")
}

#[test]
fn a_released_data_directory_imports_its_catalog_into_the_store() {
    let w = world();
    let admin = w
        .service
        .authenticate(Some(&w.admin_key))
        .expect("admin key");
    let tenant = TENANTS[0];
    let verifier = w
        .service
        .register_verifier(
            &admin,
            tenant,
            &RegisterVerifierRequest {
                verifier_release: "checker-v1".into(),
                public_key_hex: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"
                    .into(),
            },
        )
        .expect("verifier");
    let alice = &w.principals[0];
    let written = w
        .service
        .propose(
            &alice.credential,
            &workspace_fact(
                "upgrade-1",
                WORKSPACE,
                "The release train leaves on Thursdays",
            ),
        )
        .expect("propose");
    assert_eq!(written.decision, "accepted");
    let record_id = written.record_id.clone();
    // The second tenant settles claim updates by review.
    w.service
        .put_policy(
            &admin,
            TENANTS[1],
            &PolicyRequest {
                claim_updates: Some(ClaimUpdates::Review),
                ..PolicyRequest::default()
            },
            false,
        )
        .expect("policy");
    let keys_before = w.service.list_keys(&admin).expect("keys");
    let (dir, service, principals) = w.into_service();
    drop(service);
    let data = dir.path().join("data");
    as_released(&data);
    let catalog_keys = count(&data, "catalog.sqlite", "SELECT count(*) FROM api_keys");
    assert_eq!(catalog_keys, i64::try_from(keys_before.len()).expect("n"));

    let config = ServerConfig {
        data_dir: data.clone(),
        ..crate::common::config(dir.path())
    };
    let (service, report) = Service::open(config.clone()).expect("open the released directory");
    assert!(
        report.admin_key_file.is_none(),
        "the imported admin key still counts: no new one is made"
    );
    // Every key authenticates as before; the listing is the same.
    let admin_key = std::fs::read_to_string(data.join(mosaic_service::service::ADMIN_KEY_FILE))
        .expect("admin key file");
    let admin = service
        .authenticate(Some(admin_key.trim()))
        .expect("admin key after upgrade");
    assert_eq!(service.list_keys(&admin).expect("keys"), keys_before);
    for p in &principals {
        assert_eq!(
            service.authenticate(Some(&p.key)).expect("principal key"),
            p.credential
        );
    }
    // Tenants, their settings and verifiers survive.
    let mut tenants = service.list_tenants(&admin).expect("tenants");
    tenants.sort();
    assert_eq!(tenants, TENANTS.map(str::to_owned).to_vec());
    let policy = service.get_policy(&admin, Some(tenant)).expect("policy");
    assert_eq!(policy.tenant_id, tenant);
    assert_eq!(
        service.list_verifiers(&admin, tenant).expect("verifiers"),
        [verifier]
    );
    assert_eq!(
        count(
            &data,
            "store.sqlite",
            "SELECT count(*) FROM tenant_settings WHERE claim_updates = 'review' AND tenant_id = 'tenant-b'"
        ),
        1,
        "the second tenant's claim updates were imported"
    );
    // The tenants' write guards were imported: they let a principal's own
    // quotation create a workspace fact (the default refuses it, see
    // `provenance.rs`).
    let again = service
        .propose(
            &principals[0].credential,
            &workspace_fact(
                "upgrade-2",
                WORKSPACE,
                "The staging cluster is rebuilt nightly",
            ),
        )
        .expect("propose after the upgrade");
    assert_eq!(again.decision, "accepted", "{:?}", again.violations);
    // The record written before reads back.
    let got = service
        .get_memory(&principals[0].credential, &record_id)
        .expect("the record reads back");
    assert_eq!(got.record.record_id, record_id);
    // The earlier file is gone once its rows are the store's.
    assert!(!data.join("catalog.sqlite").exists());
    // The owner of the proposal made before answers a retry as before.
    let retried = service
        .propose(
            &principals[0].credential,
            &workspace_fact(
                "upgrade-1",
                WORKSPACE,
                "The release train leaves on Thursdays",
            ),
        )
        .expect("retry");
    assert!(retried.replayed && retried.record_id == record_id);
    // Imported once: a key disabled now stays disabled after a reopen.
    service
        .disable_key(&admin, principals[1].credential.key_id())
        .expect("disable");
    drop(service);
    let (service, _) = Service::open(config).expect("reopen");
    assert!(service.authenticate(Some(&principals[1].key)).is_err());
    assert!(service.authenticate(Some(&principals[0].key)).is_ok());
}

/// A data directory of the release before store schema 11: a retried
/// proposal answers as before (same record, receipt and expiry), a
/// captured message is found by id (a fact cites it), the export copy of a
/// request comes back with its source texts, and nothing is imported
/// twice. (A pending extraction job still running after the upgrade:
/// `extraction.rs`.)
#[test]
fn a_previous_release_directory_serves_its_proposals_messages_and_export_copies() {
    let w = world();
    let alice = &w.principals[0];
    let fact = workspace_fact("v10-fact", WORKSPACE, "The canary deploy runs at noon");
    let first = w
        .service
        .propose(&alice.credential, &fact)
        .expect("propose");
    assert_eq!(first.decision, "accepted");
    let ingest: mosaic_service::api::conversation::IngestRequest =
        serde_json::from_value(serde_json::json!({
            "messages": [
                {"id": "m1", "role": "user", "content": "Our standup moved to 9:30."},
                {"id": "m2", "role": "user", "content": "The office is closed on Friday."}
            ]
        }))
        .expect("ingest request");
    let ingested = w
        .service
        .ingest_conversation(&alice.credential, "chat-v10", &ingest)
        .expect("ingest");
    let export_before =
        serde_json::to_value(w.service.export(&alice.credential, None).expect("export"))
            .expect("json");
    let (dir, service, principals) = w.into_service();
    drop(service);
    let data = dir.path().join("data");
    as_released_v10(&data);
    assert_eq!(
        count(&data, "catalog.sqlite", "SELECT count(*) FROM messages"),
        2
    );
    assert_eq!(count(&data, "store.sqlite", "PRAGMA user_version"), 10);
    let config = ServerConfig {
        data_dir: data.clone(),
        ..crate::common::config(dir.path())
    };
    let (service, _) =
        Service::open(config.clone()).expect("open the previous release's directory");
    assert!(
        !data.join("catalog.sqlite").exists(),
        "imported, then removed"
    );
    let alice = &principals[0];
    // The retry replays the first decision exactly.
    let retried = service.propose(&alice.credential, &fact).expect("retry");
    assert!(retried.replayed);
    assert_eq!(
        (
            &retried.record_id,
            &retried.receipt,
            retried.expires_at_unix_ms
        ),
        (&first.record_id, &first.receipt, first.expires_at_unix_ms)
    );
    // So does the ingest: the captured messages are the store's now, each
    // a replay of the first capture (same record, expiry and digests).
    let again = service
        .ingest_conversation(&alice.credential, "chat-v10", &ingest)
        .expect("ingest again");
    let mut expected = serde_json::to_value(&ingested.messages).expect("json");
    for m in expected.as_array_mut().expect("messages") {
        assert_eq!(m["replayed"], false);
        m["replayed"] = true.into();
    }
    assert_eq!(
        serde_json::to_value(&again.messages).expect("json"),
        expected
    );
    // A fact cites a captured message by id alone.
    let mut cited = mosaic_service::api::ProposeRequest::new(
        "Our standup moved to 9:30.",
        mosaic_harness::MemoryKind::Semantic,
        mosaic_harness::memory_write::MemoryPurpose::Personalization,
        mosaic_harness::MemorySubject::Principal {
            principal_id: alice.principal.clone(),
        },
    );
    cited.consent_receipt_sha256 = Some(alice.consent.clone());
    cited.cites = vec![mosaic_service::api::conversation::CitedMessage {
        conversation_id: "chat-v10".into(),
        message_id: "m1".into(),
    }];
    let fact_of_message = service.propose(&alice.credential, &cited).expect("cite");
    assert_eq!(
        fact_of_message.decision, "accepted",
        "{:?}",
        fact_of_message.violations
    );
    // Another principal cannot cite alice's message: it answers as a
    // missing one (the lookup is keyed by the credential's principal).
    let mut foreign = cited.clone();
    foreign.subject = mosaic_harness::MemorySubject::Principal {
        principal_id: principals[1].principal.clone(),
    };
    foreign.consent_receipt_sha256 = Some(principals[1].consent.clone());
    let refused = service
        .propose(&principals[1].credential, &foreign)
        .expect_err("not bob's message");
    assert_eq!(refused.code(), "not_found");
    // The export copies came along: the export is the same as before.
    let export_after: serde_json::Value =
        serde_json::to_value(service.export(&alice.credential, None).expect("export"))
            .expect("json");
    let requests = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        v.as_array()
            .map(|lines| lines.iter().map(|l| l["data"]["request"].clone()).collect())
            .unwrap_or_default()
    };
    for request in requests(&export_before) {
        assert!(
            requests(&export_after).contains(&request),
            "{request} lost in the upgrade"
        );
    }
    assert!(
        requests(&export_before)
            .iter()
            .any(|r| r["source_texts"].as_object().is_some_and(|t| !t.is_empty())),
        "an export copy holds source texts the store alone does not"
    );
    drop(service);
    let (service, _) = Service::open(config).expect("reopen");
    assert_eq!(
        count(
            &data,
            "store.sqlite",
            "SELECT count(*) FROM captured_messages"
        ),
        2
    );
    drop(service);
}
