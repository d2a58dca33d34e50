//! The one [`Store`] implementation, for any [`Backend`]: each method is
//! one transaction of the backend, entered as the tenant the request names
//! (or the tenant the addressed id belongs to), running one shared
//! operation. A backend implements [`Backend`] and invokes
//! [`impl_store!`](crate::ops::store::impl_store) for its type.

use crate::error::StoreResult;
use crate::ops::Tx;
#[cfg(doc)]
use crate::store::Store;
use crate::types::Durability;

/// A database a [`Store`] runs on: how it opens a transaction.
pub(crate) trait Backend: Send {
    /// One open transaction.
    type Tx<'t>: Tx
    where
        Self: 't;

    /// Runs `f` in one writing transaction and commits it synced (the
    /// backend may run `f` again when the database asks for a retry).
    fn write_tx<T>(&mut self, f: impl Fn(&Self::Tx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        self.write_tx_as(Durability::Synced, f)
    }

    /// [`Backend::write_tx`], committed with `durability`.
    fn write_tx_as<T>(
        &mut self,
        durability: Durability,
        f: impl Fn(&Self::Tx<'_>) -> StoreResult<T>,
    ) -> StoreResult<T>;

    /// Runs `f` in one reading transaction (one snapshot).
    fn read_tx<T>(&mut self, f: impl Fn(&Self::Tx<'_>) -> StoreResult<T>) -> StoreResult<T>;

    /// Runs `f`, a read of one statement that enters no tenant, where a
    /// backend may run it outside an explicit transaction (one statement
    /// is one snapshot): one round trip instead of three on a database
    /// server. Entering a tenant in `f` may fail there; by default this is
    /// [`Backend::read_tx`].
    fn read_statement<T>(&mut self, f: impl Fn(&Self::Tx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        self.read_tx(f)
    }

    /// The schema version of the open database.
    fn stored_schema_version(&mut self) -> StoreResult<i64>;
}

/// Implements [`Store`] for a [`Backend`] (a macro rather than a blanket
/// impl, so the crate-private transaction types stay out of the public
/// interface).
macro_rules! impl_store {
    ($backend:ty) => {
        const _: () = {
            use ::mosaic_harness::memory_write::{
                ConsentReceipt, MemoryWriteGrant, MemoryWritePolicy,
            };

            use $crate::audit::AuditVerification;
            use $crate::error::{StoreError, StoreResult};
            use $crate::ops::store::Backend;
            use $crate::ops::{
                CASE, PROPOSAL, RECORD, Tx, directory, intake, read, review, revocation, write,
            };
            use $crate::revocation::{
                DeletionRequested, Erased, IndexesAcknowledged, Ineligible, RevocationState,
            };
            use $crate::sqlite::MAX_BATCH;
            use $crate::store::Store;
            use $crate::types::{
                AckOutcome, Authorization, ConsentWithdrawal, DeletionReceipt, Durability,
                EligibilityQuery, EligibleIds, EligibleSet, IndexAck, IntegrityReport, OutboxTask,
                PendingDeletion, RecordFilter, RecordPage, ReviewAction, ReviewCase, ReviewReceipt,
                RevocationReason, StoredRecord, Tombstone, WriteOutcome, WriteRequest,
            };

            impl Store for $backend {
                fn schema_version(&mut self) -> StoreResult<i64> {
                    self.stored_schema_version()
                }

                fn revocation_generation(&mut self) -> StoreResult<u64> {
                    self.read_tx(|c| $crate::ops::revocation_generation(c))
                }

                fn put_policy(
                    &mut self,
                    policy: &MemoryWritePolicy,
                    at_unix_ms: u64,
                ) -> StoreResult<()> {
                    self.write_tx(|c| write::put_policy(c, policy, at_unix_ms))
                }

                fn put_grant(
                    &mut self,
                    grant: &MemoryWriteGrant,
                    at_unix_ms: u64,
                ) -> StoreResult<()> {
                    self.write_tx(|c| write::put_grant(c, grant, at_unix_ms))
                }

                fn put_consent(
                    &mut self,
                    consent: &ConsentReceipt,
                    at_unix_ms: u64,
                ) -> StoreResult<String> {
                    self.write_tx(|c| write::put_consent(c, consent, at_unix_ms))
                }

                fn withdraw_consent(
                    &mut self,
                    tenant_id: &str,
                    consent_sha256: &str,
                    authorization: &Authorization,
                    at_unix_ms: u64,
                ) -> StoreResult<ConsentWithdrawal> {
                    self.write_tx(|c| {
                        revocation::withdraw_consent(
                            c,
                            tenant_id,
                            consent_sha256,
                            authorization,
                            at_unix_ms,
                        )
                    })
                }

                fn write(&mut self, request: &WriteRequest) -> StoreResult<WriteOutcome> {
                    self.write_tx(|c| write::write_one(c, request))
                }

                fn write_batch(
                    &mut self,
                    requests: &[WriteRequest],
                ) -> StoreResult<Vec<WriteOutcome>> {
                    if requests.is_empty() || requests.len() > MAX_BATCH {
                        return Err(StoreError::InvalidBatch(format!(
                            "{} requests (1..={MAX_BATCH} allowed)",
                            requests.len()
                        )));
                    }
                    self.write_tx(|c| requests.iter().map(|r| write::write_one(c, r)).collect())
                }

                fn pending_outbox(
                    &mut self,
                    target: &str,
                    limit: usize,
                ) -> StoreResult<Vec<OutboxTask>> {
                    self.read_tx(|c| revocation::pending_outbox(c, target, limit))
                }

                fn acknowledge_index(
                    &mut self,
                    record_id: &str,
                    generation: u64,
                    target: &str,
                    at_unix_ms: u64,
                ) -> StoreResult<AckOutcome> {
                    self.write_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, record_id)?;
                        revocation::acknowledge_index(c, record_id, generation, target, at_unix_ms)
                    })
                }

                fn acknowledge_indexes(
                    &mut self,
                    acks: &[IndexAck],
                    at_unix_ms: u64,
                    durability: Durability,
                ) -> StoreResult<Vec<StoreResult<AckOutcome>>> {
                    if acks.is_empty() {
                        return Ok(Vec::new());
                    }
                    self.write_tx_as(durability, |c| {
                        let mut out = Vec::with_capacity(acks.len());
                        for ack in acks {
                            let one =
                                Tx::enter_tenant_of(c, RECORD, &ack.record_id).and_then(|()| {
                                    revocation::acknowledge_index(
                                        c,
                                        &ack.record_id,
                                        ack.generation,
                                        &ack.target,
                                        at_unix_ms,
                                    )
                                });
                            match one {
                                // Refusals of this row alone: checked before
                                // anything was written for it.
                                Err(
                                    e @ (StoreError::StaleIndexGeneration { .. }
                                    | StoreError::NotFound { .. }
                                    | StoreError::InvalidArgument(_)),
                                ) => out.push(Err(e)),
                                Err(e) => return Err(e),
                                Ok(outcome) => out.push(Ok(outcome)),
                            }
                        }
                        Ok(out)
                    })
                }

                fn activate_degraded(
                    &mut self,
                    record_id: &str,
                    generation: u64,
                    omitted: &[&str],
                    at_unix_ms: u64,
                ) -> StoreResult<AckOutcome> {
                    self.write_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, record_id)?;
                        revocation::activate_degraded(c, record_id, generation, omitted, at_unix_ms)
                    })
                }

                fn revoke(
                    &mut self,
                    record_id: &str,
                    reason: &RevocationReason,
                    authorization: &Authorization,
                    at_unix_ms: u64,
                ) -> StoreResult<Ineligible> {
                    self.write_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, record_id)?;
                        revocation::revoke(c, record_id, reason, authorization, at_unix_ms)
                    })
                }

                fn request_deletion(
                    &mut self,
                    token: Ineligible,
                    at_unix_ms: u64,
                ) -> StoreResult<DeletionRequested> {
                    self.write_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, token.record_id())?;
                        revocation::request_deletion(c, token.record_id(), at_unix_ms)
                    })
                }

                fn confirm_indexes_acknowledged(
                    &mut self,
                    token: DeletionRequested,
                    at_unix_ms: u64,
                ) -> StoreResult<IndexesAcknowledged> {
                    self.write_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, token.record_id())?;
                        revocation::confirm_indexes_acknowledged(c, token.record_id(), at_unix_ms)
                    })
                }

                fn erase(
                    &mut self,
                    token: IndexesAcknowledged,
                    at_unix_ms: u64,
                ) -> StoreResult<Erased> {
                    self.write_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, token.record_id())?;
                        revocation::erase(c, token.record_id(), at_unix_ms)
                    })
                }

                fn finalize_deletion(
                    &mut self,
                    token: Erased,
                    at_unix_ms: u64,
                ) -> StoreResult<DeletionReceipt> {
                    self.finalize_deletion_purged(token, at_unix_ms, &[])
                }

                fn finalize_deletion_purged(
                    &mut self,
                    token: Erased,
                    at_unix_ms: u64,
                    purged: &[&str],
                ) -> StoreResult<DeletionReceipt> {
                    self.write_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, token.record_id())?;
                        revocation::finalize_deletion(c, token.record_id(), at_unix_ms, purged)
                    })
                }

                fn resume_revocation(
                    &mut self,
                    record_id: &str,
                ) -> StoreResult<Option<RevocationState>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, record_id)?;
                        revocation::resume_revocation(c, record_id)
                    })
                }

                fn pending_deletions(
                    &mut self,
                    now_unix_ms: u64,
                ) -> StoreResult<Vec<PendingDeletion>> {
                    self.read_tx(|c| revocation::pending_deletions(c, now_unix_ms))
                }

                fn tombstone(&mut self, record_id: &str) -> StoreResult<Option<Tombstone>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, record_id)?;
                        revocation::tombstone(c, record_id)
                    })
                }

                fn review_case(&mut self, case_id: &str) -> StoreResult<Option<ReviewCase>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant_of(c, CASE, case_id)?;
                        review::review_case(c, case_id)
                    })
                }

                fn open_review_cases(&mut self, tenant_id: &str) -> StoreResult<Vec<ReviewCase>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        review::open_review_cases(c, tenant_id)
                    })
                }

                fn resolve_review(
                    &mut self,
                    case_id: &str,
                    action: ReviewAction,
                    reviewer: &Authorization,
                    at_unix_ms: u64,
                ) -> StoreResult<ReviewReceipt> {
                    self.write_tx(|c| {
                        Tx::enter_tenant_of(c, CASE, case_id)?;
                        review::resolve_review(c, case_id, &action, reviewer, at_unix_ms)
                    })
                }

                fn eligible_records(
                    &mut self,
                    query: &EligibilityQuery,
                ) -> StoreResult<EligibleSet> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, &query.tenant_id)?;
                        read::eligible_records(c, query)
                    })
                }

                fn eligible_unknown(
                    &mut self,
                    query: &EligibilityQuery,
                    known: &dyn Fn(&str) -> bool,
                ) -> StoreResult<(EligibleIds, Vec<StoredRecord>)> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, &query.tenant_id)?;
                        let found = read::eligible_ids(c, query)?;
                        let records = read::unknown_bodies(c, query, &found.ids, known)?;
                        Ok((found, records))
                    })
                }

                fn eligible_changes(
                    &mut self,
                    query: &EligibilityQuery,
                    since: &[::mosaic_harness::memory_scope::ScopeCommitment],
                    known: &dyn Fn(&str) -> bool,
                ) -> StoreResult<Option<($crate::types::EligibleChanges, Vec<StoredRecord>)>>
                {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, &query.tenant_id)?;
                        let Some(changes) = read::eligible_changes(c, query, since)? else {
                            return Ok(None);
                        };
                        let records = read::unknown_bodies(c, query, &changes.eligible, known)?;
                        Ok(Some((changes, records)))
                    })
                }

                fn scope_commitments(
                    &mut self,
                    tenant_id: &str,
                    scopes: &[::mosaic_harness::memory_scope::ReadScope],
                ) -> StoreResult<Vec<::mosaic_harness::memory_scope::ScopeCommitment>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        $crate::ops::scope::commitments(c, tenant_id, scopes)
                    })
                }

                fn scope_inclusion(
                    &mut self,
                    tenant_id: &str,
                    record_id: &str,
                ) -> StoreResult<Option<$crate::types::ScopeInclusion>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        Ok($crate::ops::scope::inclusion(c, tenant_id, record_id)?.map(
                            |(entry, proof, commitment)| $crate::types::ScopeInclusion {
                                entry,
                                proof,
                                commitment,
                            },
                        ))
                    })
                }

                fn change_stamp(&mut self) -> StoreResult<$crate::types::ChangeStamp> {
                    self.read_statement(|c| read::change_stamp(c))
                }

                fn access_stamp(&mut self) -> StoreResult<$crate::types::AccessStamp> {
                    self.read_statement(|c| read::access_stamp(c))
                }

                fn latest_created_at(&mut self) -> StoreResult<u64> {
                    self.read_tx(|c| read::latest_created_at(c))
                }

                fn get_records(
                    &mut self,
                    tenant_id: &str,
                    ids: &[String],
                ) -> StoreResult<Vec<StoredRecord>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::get_records(c, tenant_id, ids)
                    })
                }

                fn record_states_of(
                    &mut self,
                    tenant_id: &str,
                    ids: &[String],
                ) -> StoreResult<Vec<(String, $crate::types::RecordState)>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::record_states_of(c, tenant_id, ids)
                    })
                }

                fn contents_of(
                    &mut self,
                    tenant_id: &str,
                    ids: &[String],
                ) -> StoreResult<Vec<(String, String)>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::contents_of(c, tenant_id, ids)
                    })
                }

                fn live_contents(
                    &mut self,
                    tenant_id: &str,
                    ids: &[String],
                    kind: ::mosaic_harness::MemoryKind,
                    subject: &::mosaic_harness::MemorySubject,
                ) -> StoreResult<Vec<(String, String)>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::live_contents(c, tenant_id, ids, kind, subject)
                    })
                }

                fn get_record(&mut self, record_id: &str) -> StoreResult<Option<StoredRecord>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, record_id)?;
                        read::get_record(c, record_id)
                    })
                }

                fn record_claims(
                    &mut self,
                    record_id: &str,
                ) -> StoreResult<Vec<::mosaic_harness::memory_write::StructuredClaim>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, record_id)?;
                        read::record_claims(c, record_id)
                    })
                }

                fn record_states(
                    &mut self,
                    tenant_id: &str,
                ) -> StoreResult<Vec<(String, crate::types::ListedState)>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::record_states(c, tenant_id)
                    })
                }

                fn tenant_claims(
                    &mut self,
                    tenant_id: &str,
                ) -> StoreResult<Vec<(String, ::mosaic_harness::memory_write::StructuredClaim)>>
                {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::tenant_claims(c, tenant_id)
                    })
                }

                fn claims_by_key(
                    &mut self,
                    tenant_id: &str,
                    subject: &str,
                    predicate: &str,
                ) -> StoreResult<Vec<(String, ::mosaic_harness::memory_write::StructuredClaim)>>
                {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::claims_by_key(c, tenant_id, subject, predicate)
                    })
                }

                fn record_at_address(
                    &mut self,
                    tenant_id: &str,
                    subject: &::mosaic_harness::MemorySubject,
                    address: &::mosaic_harness::MemoryAddress,
                ) -> StoreResult<Option<(String, u64)>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::record_at_address(c, tenant_id, subject, address)
                    })
                }

                fn address_namespaces(
                    &mut self,
                    tenant_id: &str,
                    subject: &::mosaic_harness::MemorySubject,
                    prefix: Option<&str>,
                    now_ms: u64,
                    limit: usize,
                ) -> StoreResult<Vec<String>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::address_namespaces(c, tenant_id, subject, prefix, now_ms, limit)
                    })
                }

                fn list_records(&mut self, filter: &RecordFilter) -> StoreResult<RecordPage> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, &filter.tenant_id)?;
                        read::list_records(c, filter)
                    })
                }

                fn current_policy(
                    &mut self,
                    tenant_id: &str,
                ) -> StoreResult<Option<MemoryWritePolicy>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::current_policy(c, tenant_id)
                    })
                }

                fn current_grant(
                    &mut self,
                    tenant_id: &str,
                    principal_id: &str,
                ) -> StoreResult<Option<MemoryWriteGrant>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::current_grant(c, tenant_id, principal_id)
                    })
                }

                fn verify_write_receipt(&mut self, proposal_id: &str) -> StoreResult<()> {
                    self.read_tx(|c| {
                        Tx::enter_tenant_of(c, PROPOSAL, proposal_id)?;
                        write::verify_write_receipt(c, proposal_id)
                    })
                }

                fn write_receipt(
                    &mut self,
                    proposal_id: &str,
                ) -> StoreResult<Option<::mosaic_harness::memory_write::MemoryWriteReceipt>>
                {
                    self.read_tx(|c| {
                        Tx::enter_tenant_of(c, PROPOSAL, proposal_id)?;
                        read::write_receipt(c, proposal_id)
                    })
                }

                fn consents_of(
                    &mut self,
                    tenant_id: &str,
                    principal_id: &str,
                ) -> StoreResult<Vec<$crate::types::StoredConsent>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        read::consents_of(c, tenant_id, principal_id)
                    })
                }

                fn record_audit_trail(
                    &mut self,
                    record_id: &str,
                ) -> StoreResult<Vec<$crate::audit::AuditEventBody>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant_of(c, RECORD, record_id)?;
                        $crate::ops::record_audit_trail(c, record_id)
                    })
                }

                fn audit_event_sha256(&mut self, seq: u64) -> StoreResult<Option<String>> {
                    self.read_tx(|c| $crate::ops::audit_event_sha256(c, seq))
                }

                fn verify_audit_chain(&mut self) -> StoreResult<AuditVerification> {
                    self.read_tx(|c| $crate::ops::verify_audit_chain(c))
                }

                fn audit_tree_head(&mut self) -> StoreResult<$crate::audit::AuditTreeHead> {
                    self.read_tx(|c| $crate::ops::audit_tree_head(c))
                }

                fn audit_inclusion_proof(
                    &mut self,
                    seq: u64,
                    tree_size: u64,
                ) -> StoreResult<(::mosaic_harness::merkle::InclusionProof, String)> {
                    self.read_tx(|c| $crate::ops::audit_inclusion_proof(c, seq, tree_size))
                }

                fn audit_consistency_proof(
                    &mut self,
                    first_size: u64,
                    second_size: u64,
                ) -> StoreResult<(::mosaic_harness::merkle::ConsistencyProof, String, String)>
                {
                    self.read_tx(|c| {
                        $crate::ops::audit_consistency_proof(c, first_size, second_size)
                    })
                }

                fn integrity_check(&mut self) -> StoreResult<IntegrityReport> {
                    self.read_tx(|c| read::cross_table_check(c))
                }

                fn insert_api_key(&mut self, key: &$crate::directory::ApiKey) -> StoreResult<()> {
                    self.write_tx(|c| directory::insert_api_key(c, key))
                }

                fn api_key_by_sha256(
                    &mut self,
                    key_sha256: &str,
                ) -> StoreResult<Option<$crate::directory::ApiKey>> {
                    self.read_statement(|c| directory::api_key_by_sha256(c, key_sha256))
                }

                fn api_keys(&mut self) -> StoreResult<Vec<$crate::directory::ApiKey>> {
                    self.read_tx(|c| directory::api_keys(c))
                }

                fn disable_api_key(&mut self, key_id: &str) -> StoreResult<bool> {
                    self.write_tx(|c| directory::disable_api_key(c, key_id))
                }

                fn disable_principal_api_keys(
                    &mut self,
                    tenant_id: &str,
                    principal_id: &str,
                ) -> StoreResult<u64> {
                    self.write_tx(|c| {
                        directory::disable_principal_api_keys(c, tenant_id, principal_id)
                    })
                }

                fn enabled_admin_keys(&mut self) -> StoreResult<u64> {
                    self.read_tx(|c| directory::enabled_admin_keys(c))
                }

                fn setting_or_insert(&mut self, name: &str, value: &str) -> StoreResult<String> {
                    self.write_tx(|c| directory::setting_or_insert(c, name, value))
                }

                fn put_tenant_policy(
                    &mut self,
                    update: &$crate::directory::TenantPolicyUpdate,
                ) -> StoreResult<()> {
                    self.write_tx(|c| directory::put_tenant_policy(c, update))
                }

                fn tenant_settings(
                    &mut self,
                    tenant_id: &str,
                ) -> StoreResult<Option<$crate::directory::TenantSettings>> {
                    self.read_tx(|c| directory::tenant_settings(c, tenant_id))
                }

                fn tenant_ids(&mut self) -> StoreResult<Vec<String>> {
                    self.read_tx(|c| directory::tenant_ids(c))
                }

                fn earlier_policies(
                    &mut self,
                    tenant_id: &str,
                    current: &str,
                    limit: usize,
                ) -> StoreResult<Vec<String>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        directory::earlier_policies(c, tenant_id, current, limit)
                    })
                }

                fn read_access(
                    &mut self,
                    tenant_id: &str,
                    principal_id: &str,
                    earlier_limit: usize,
                ) -> StoreResult<$crate::directory::AccessRead> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        directory::access_read(c, tenant_id, principal_id, earlier_limit)
                    })
                }

                fn insert_verifier(
                    &mut self,
                    verifier: &$crate::directory::StoredVerifier,
                ) -> StoreResult<bool> {
                    self.write_tx(|c| directory::insert_verifier(c, verifier))
                }

                fn verifiers(
                    &mut self,
                    tenant_id: &str,
                    verifier_id: Option<&str>,
                ) -> StoreResult<Vec<$crate::directory::StoredVerifier>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        directory::verifiers(c, tenant_id, verifier_id)
                    })
                }

                fn disable_verifier(
                    &mut self,
                    tenant_id: &str,
                    verifier_id: &str,
                ) -> StoreResult<bool> {
                    self.write_tx(|c| directory::disable_verifier(c, tenant_id, verifier_id))
                }

                fn directory_imported(&mut self) -> StoreResult<bool> {
                    self.read_tx(|c| directory::directory_imported(c))
                }

                fn import_directory(
                    &mut self,
                    import: &$crate::directory::DirectoryImport,
                ) -> StoreResult<bool> {
                    self.write_tx(|c| directory::import_directory(c, import))
                }

                fn proposal_owner(
                    &mut self,
                    proposal_id: &str,
                ) -> StoreResult<Option<$crate::intake::ProposalOwner>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant_of(c, PROPOSAL, proposal_id)?;
                        intake::proposal_owner(c, proposal_id)
                    })
                }

                fn captured_message(
                    &mut self,
                    tenant_id: &str,
                    principal_id: &str,
                    conversation_id: &str,
                    message_id: &str,
                ) -> StoreResult<Option<$crate::intake::CapturedMessage>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        intake::captured_message(
                            c,
                            tenant_id,
                            principal_id,
                            conversation_id,
                            message_id,
                        )
                    })
                }

                fn queue_extraction_job(
                    &mut self,
                    job: &$crate::intake::ExtractionJob,
                ) -> StoreResult<bool> {
                    self.write_tx(|c| intake::queue_extraction_job(c, job))
                }

                fn update_extraction_job(
                    &mut self,
                    job: &$crate::intake::ExtractionJob,
                ) -> StoreResult<bool> {
                    self.write_tx(|c| intake::update_extraction_job(c, job))
                }

                fn due_extraction_jobs(
                    &mut self,
                    now_ms: u64,
                    limit: usize,
                ) -> StoreResult<Vec<$crate::intake::ExtractionJob>> {
                    self.read_tx(|c| intake::due_extraction_jobs(c, now_ms, limit))
                }

                fn recent_extraction_jobs(
                    &mut self,
                    limit: usize,
                ) -> StoreResult<Vec<$crate::intake::ExtractionJob>> {
                    self.read_tx(|c| intake::recent_extraction_jobs(c, limit))
                }

                fn extraction_job_counts(&mut self) -> StoreResult<Vec<(String, u64)>> {
                    self.read_tx(|c| intake::extraction_job_counts(c))
                }

                fn export_request(
                    &mut self,
                    tenant_id: &str,
                    record_id: &str,
                ) -> StoreResult<Option<String>> {
                    self.read_tx(|c| {
                        Tx::enter_tenant(c, tenant_id)?;
                        intake::export_request(c, tenant_id, record_id)
                    })
                }

                fn intake_imported(&mut self) -> StoreResult<bool> {
                    self.read_tx(|c| intake::intake_imported(c))
                }

                fn import_intake(
                    &mut self,
                    import: &$crate::intake::IntakeImport,
                ) -> StoreResult<bool> {
                    self.write_tx(|c| intake::import_intake(c, import))
                }
            }
        };
    };
}
pub(crate) use impl_store;
