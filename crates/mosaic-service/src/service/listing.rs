//! Records as the store lists them: one record a principal may see, every
//! record of a filter, of a tenant or of a principal's erasure, and a
//! proposal rebuilt from a stored record.

use super::*;

/// The subject of a record of `tenant` the principal may see, when the
/// store holds it live (active; or publishing unless `active_only`).
pub(super) fn live_visible(
    inner: &mut Inner,
    tenant: &str,
    principal: &str,
    grant: &MemoryWriteGrant,
    record_id: &str,
    active_only: bool,
) -> ServiceResult<Option<MemorySubject>> {
    let Some(stored) = inner.store.get_record(record_id)? else {
        return Ok(None);
    };
    let subject = stored.record.subject;
    let live = match stored.state {
        RecordState::Active => true,
        RecordState::Publishing => !active_only,
        _ => false,
    };
    let visible = stored.record.tenant_id == tenant && subject_visible(principal, grant, &subject);
    Ok((live && visible).then_some(subject))
}

/// Every record matching `filter`, paging through the store's listing.
pub(super) fn list_all(
    store: &mut dyn Store,
    mut filter: RecordFilter,
) -> ServiceResult<Vec<ListedRecord>> {
    let mut out = Vec::new();
    loop {
        let page = store.list_records(&filter)?;
        out.extend(page.records);
        match page.next_after {
            Some(next) => filter.after_record_id = Some(next),
            None => return Ok(out),
        }
    }
}

/// Every record of every tenant (the tenants list is the store's tenant
/// settings), as the store lists them.
pub(super) fn all_records(inner: &mut Inner) -> ServiceResult<Vec<ListedRecord>> {
    let mut out = Vec::new();
    for tenant in inner.store.tenant_ids()? {
        out.extend(list_all(
            inner.store.as_mut(),
            RecordFilter::tenant(&tenant, MAX_LIST_LIMIT),
        )?);
    }
    Ok(out)
}

/// The records a principal's erasure covers: those they proposed and those
/// about them (any workspace), sorted by record id, each once.
pub(super) fn records_of_principal(
    store: &mut dyn Store,
    tenant: &str,
    principal: &str,
) -> ServiceResult<Vec<ListedRecord>> {
    let mut by_id = BTreeMap::new();
    let proposed = RecordFilter {
        proposer_principal_id: Some(principal.to_owned()),
        ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
    };
    for row in list_all(store, proposed)? {
        by_id.insert(row.record_id.clone(), row);
    }
    // A subject names a principal either alone or within a workspace; the
    // listing filters exact subjects, so the workspace form is matched here.
    for row in list_all(store, RecordFilter::tenant(tenant, MAX_LIST_LIMIT))? {
        if row.subject.principal_id() == Some(principal) {
            by_id.entry(row.record_id.clone()).or_insert(row);
        }
    }
    Ok(by_id.into_values().collect())
}

/// The store's listing of one record of `tenant`, if it has one. Pages from
/// the id without its last character, which sorts just before it.
pub(super) fn find_listed(
    store: &mut dyn Store,
    tenant: &str,
    record_id: &str,
) -> ServiceResult<Option<ListedRecord>> {
    let Some((last, _)) = record_id.char_indices().last() else {
        return Ok(None);
    };
    let mut filter = RecordFilter {
        after_record_id: record_id.get(..last).map(str::to_owned),
        ..RecordFilter::tenant(tenant, 64)
    };
    loop {
        let page = store.list_records(&filter)?;
        for row in page.records {
            match row.record_id.as_str().cmp(record_id) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return Ok(Some(row)),
                std::cmp::Ordering::Greater => return Ok(None),
            }
        }
        match page.next_after {
            Some(next) => filter.after_record_id = Some(next),
            None => return Ok(None),
        }
    }
}

/// A propose request rebuilt from a stored record and its stored claims,
/// for the export of a record an earlier release wrote without keeping
/// its export copy (its two databases were written apart; this release
/// commits the copy with the record): the source texts and signed
/// evidence are not known, so an import judges it without them.
pub(super) fn request_from_record(
    store: &mut dyn Store,
    record: &mosaic_harness::MemoryRecord,
    proposal_id: &str,
) -> ServiceResult<ProposeRequest> {
    let purpose = conversation::purpose_of(&record.subject);
    Ok(ProposeRequest {
        claims: store.record_claims(&record.record_id)?,
        sources: record.sources.clone(),
        summary: record.summary.clone(),
        record_id: Some(record.record_id.clone()),
        proposal_id: Some(proposal_id.to_owned()),
        token_count: Some(record.token_count),
        token_counter_release: Some(record.token_counter_release.clone()),
        provenance_sha256: Some(record.provenance_sha256.clone()),
        writer_release: Some(record.writer_release.clone()),
        ..ProposeRequest::new("", record.kind, purpose, record.subject.clone())
    })
}

/// The index keys of a record's structured claims, as the store holds
/// them (written in the record's own transaction): what recall's
/// `claim_keys` matches.
pub(super) fn stored_claim_keys(
    store: &mut dyn Store,
    record_id: &str,
) -> ServiceResult<Vec<String>> {
    Ok(mosaic_harness::memory_write::claim_index_keys(
        &store.record_claims(record_id)?,
    ))
}
