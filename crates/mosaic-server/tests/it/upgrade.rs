//! A data directory of the release before store schema 9 (keys, tenants,
//! their settings, policy history, verifiers and server settings in the
//! server's own `catalog.sqlite`, the store at schema 8) opens with this
//! release: those rows are imported into the store once, in one
//! transaction, and the old file is left in place, unchanged. The
//! directory is made by this release's own calls, then laid out as the
//! earlier release kept it (the earlier catalog's statements below).

use mosaic_server::ServerConfig;
use mosaic_server::Service;
use mosaic_server::api::{PolicyRequest, RegisterVerifierRequest};
use mosaic_server::catalog::ClaimUpdates;
use mosaic_server::examples::workspace_fact;

use crate::common::{TENANTS, WORKSPACE, as_released, world};

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
    let admin_key = std::fs::read_to_string(data.join(mosaic_server::service::ADMIN_KEY_FILE))
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
    // The earlier file is left in place, its rows unchanged.
    assert_eq!(
        count(&data, "catalog.sqlite", "SELECT count(*) FROM api_keys"),
        catalog_keys
    );
    // Imported once: a key disabled now stays disabled after a reopen.
    service
        .disable_key(&admin, principals[1].credential.key_id())
        .expect("disable");
    drop(service);
    let (service, _) = Service::open(config).expect("reopen");
    assert!(service.authenticate(Some(&principals[1].key)).is_err());
    assert!(service.authenticate(Some(&principals[0].key)).is_ok());
}
