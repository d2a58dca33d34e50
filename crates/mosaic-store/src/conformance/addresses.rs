//! Addresses: the current record an address names, and the namespaces of one
//! subject.

use super::*;

/// A record's application address and metadata are stored with it. The
/// address finds the current record of its tenant, subject, namespace and
/// key only (never another tenant's, another subject's, a namespace
/// prefix's or an unaddressed record); a supersession moves it to the
/// replacement; a revoked record is no longer current.
pub fn addresses_name_the_current_record<F: StoreFactory>(factory: &F) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let workspace = MemorySubject::Workspace {
        workspace_id: fixtures::WORKSPACE.into(),
    };
    let address = |ns: &[&str], key: &str| MemoryAddress {
        namespace: ns.iter().map(|s| (*s).to_owned()).collect(),
        key: key.into(),
    };
    let here = address(&["notes", "2026"], "k1");
    let addressed = |spec: Spec, at: &MemoryAddress| {
        let mut request = spec.build();
        request.proposal.address = Some(at.clone());
        request.proposal.metadata = Some(
            serde_json::from_value(serde_json::json!({"topic": "deploys", "n": 1}))
                .expect("metadata"),
        );
        request
    };
    assert_eq!(
        store.record_at_address(fixtures::TENANT_A, &workspace, &here)?,
        None
    );
    let plain = Spec::workspace(fixtures::TENANT_A, "alice", "r-plain").build();
    assert!(store.write(&plain)?.is_accepted());
    let first = addressed(
        Spec::workspace(fixtures::TENANT_A, "alice", "r-addr-1"),
        &here,
    );
    assert!(store.write(&first)?.is_accepted());
    let found = store.record_at_address(fixtures::TENANT_A, &workspace, &here)?;
    assert_eq!(found, Some(("r-addr-1".to_owned(), 1)));
    let stored = store.get_record("r-addr-1")?.expect("stored");
    assert_eq!(stored.record.address.as_ref(), Some(&here));
    assert_eq!(stored.record.metadata, first.proposal.metadata);
    // Neither another tenant, subject, key nor a namespace prefix finds it.
    assert_eq!(
        store.record_at_address(fixtures::TENANT_B, &workspace, &here)?,
        None
    );
    let principal = MemorySubject::Principal {
        principal_id: "alice".into(),
    };
    assert_eq!(
        store.record_at_address(fixtures::TENANT_A, &principal, &here)?,
        None
    );
    for other in [address(&["notes"], "k1"), address(&["notes", "2026"], "k2")] {
        assert_eq!(
            store.record_at_address(fixtures::TENANT_A, &workspace, &other)?,
            None
        );
    }
    // A supersession moves the address to the replacement.
    let mut next = Spec::workspace(fixtures::TENANT_A, "alice", "r-addr-2");
    next.supersedes = Some(("r-addr-1".into(), 1));
    next.now = T0 + 1;
    let outcome = store.write(&addressed(next, &here))?;
    assert!(outcome.is_accepted(), "{:?}", outcome.decision);
    assert_eq!(
        store.record_at_address(fixtures::TENANT_A, &workspace, &here)?,
        Some(("r-addr-2".to_owned(), 2))
    );
    // A revoked record is no longer the address's current record.
    store.revoke(
        "r-addr-2",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0 + 2,
    )?;
    assert_eq!(
        store.record_at_address(fixtures::TENANT_A, &workspace, &here)?,
        None
    );
    Ok(())
}

/// The namespaces of a subject's addressed records: distinct, sorted, of
/// current records only (a revoked or expired record's namespace goes when
/// it was the last one there), narrowed to a prefix by whole segments, and
/// never another tenant's or another subject's.
pub fn address_namespaces_list_current_records_of_one_subject<F: StoreFactory>(
    factory: &F,
) -> StoreResult<()> {
    let config = test_config();
    let (_db, mut store) = setup(factory, &config)?;
    let workspace = MemorySubject::Workspace {
        workspace_id: fixtures::WORKSPACE.into(),
    };
    let alice = MemorySubject::Principal {
        principal_id: "alice".into(),
    };
    let mut write = |spec: Spec, ns: &[&str], key: &str| -> StoreResult<()> {
        let mut request = spec.build();
        request.proposal.address = Some(MemoryAddress {
            namespace: ns.iter().map(|s| (*s).to_owned()).collect(),
            key: key.into(),
        });
        let outcome = store.write(&request)?;
        assert!(outcome.is_accepted(), "{:?}", outcome.decision);
        Ok(())
    };
    let ws = |id: &str| Spec::workspace(fixtures::TENANT_A, "alice", id);
    write(ws("n-1"), &["notes", "2026"], "k1")?;
    write(ws("n-2"), &["notes", "2026"], "k2")?;
    write(ws("n-3"), &["notes"], "k3")?;
    write(ws("n-4"), &["notesx"], "k4")?;
    write(ws("n-5"), &["other", "a", "b"], "k5")?;
    write(
        Spec::principal(fixtures::TENANT_A, "alice", "n-alice"),
        &["secret"],
        "k",
    )?;
    write(
        Spec::workspace(fixtures::TENANT_B, "alice", "n-b"),
        &["tenant-b"],
        "k",
    )?;
    let plain = Spec::workspace(fixtures::TENANT_A, "alice", "n-plain").build();
    assert!(store.write(&plain)?.is_accepted());
    let now = T0 + 10;
    let mut list = |tenant: &str, subject: &MemorySubject, prefix: Option<&str>, limit: usize| {
        store.address_namespaces(tenant, subject, prefix, now, limit)
    };
    assert_eq!(
        list(fixtures::TENANT_A, &workspace, None, 100)?,
        ["notes", "notes/2026", "notesx", "other/a/b"]
    );
    assert_eq!(
        list(fixtures::TENANT_A, &workspace, Some("notes"), 100)?,
        ["notes", "notes/2026"],
        "a prefix is whole segments: notesx is not below notes"
    );
    assert_eq!(
        list(fixtures::TENANT_A, &workspace, Some("other/a"), 100)?,
        ["other/a/b"]
    );
    assert_eq!(
        list(fixtures::TENANT_A, &workspace, None, 2)?,
        ["notes", "notes/2026"]
    );
    // Another subject's and another tenant's namespaces never show.
    assert_eq!(list(fixtures::TENANT_A, &alice, None, 100)?, ["secret"]);
    assert_eq!(
        list(fixtures::TENANT_B, &workspace, None, 100)?,
        ["tenant-b"]
    );
    assert_eq!(
        list(fixtures::TENANT_B, &alice, None, 100)?,
        Vec::<String>::new()
    );
    // A revoked record's namespace goes with it; an expired one's too.
    store.revoke(
        "n-5",
        &RevocationReason::Requested,
        &fixtures::authorization("alice"),
        T0 + 2,
    )?;
    assert_eq!(
        store.address_namespaces(fixtures::TENANT_A, &workspace, None, now, 100)?,
        ["notes", "notes/2026", "notesx"]
    );
    assert_eq!(
        store.address_namespaces(
            fixtures::TENANT_A,
            &workspace,
            None,
            T0 + fixtures::TTL_MS,
            100
        )?,
        Vec::<String>::new()
    );
    Ok(())
}
