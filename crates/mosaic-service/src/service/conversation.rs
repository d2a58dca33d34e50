//! The front door for agents: conversations in, facts from them.
//!
//! A conversation ingest captures each message as a source the server
//! itself vouches for: it renders the message as one transcript line
//! (`[created_at] speaker: content`), computes the digests, binds the
//! provenance to the authenticated key, tenant, principal and
//! conversation and the locator to the message, and proposes the line as
//! an episodic memory whose one source is that capture. The text is kept
//! once, as the episode's content in the store: erasing the episode
//! erases the captured text, and the store keeps beside it only the
//! digests and which record holds it (committed with that record). Facts then cite captured messages by id
//! (`ProposeRequest::cites`); the capture verifier judges them.

use mosaic_harness::MemorySource;
use mosaic_harness::memory_write::MemoryPurpose;
use mosaic_harness::record::message_source_id;
use serde::Serialize;

use super::ids::{self, MessageLocator};
use super::propose::CapturedProposal;
use super::*;
use crate::evidence::CapturedSource;
use mosaic_store::intake::CapturedMessage;

/// Most messages one ingest call takes.
pub const MAX_MESSAGES: usize = 1000;
/// Longest conversation or message id, in bytes.
pub const MAX_MESSAGE_ID_BYTES: usize = 100;
/// Longest speaker name or `created_at`, in bytes.
pub const MAX_LABEL_BYTES: usize = 100;
/// Domain tag of a captured message's provenance digest.
pub const CAPTURE_PROVENANCE_DOMAIN: &str = "mosaic.server.captured_message.provenance.v1";
/// Domain tag of a captured message's locator digest.
pub const CAPTURE_LOCATOR_DOMAIN: &str = "mosaic.server.captured_message.locator.v1";
/// Domain tag of a derived message id.
pub const MESSAGE_ID_DOMAIN: &str = "mosaic.server.message_id.v1";
/// Why a message was skipped: its content is empty or whitespace.
pub const EMPTY_CONTENT: &str = "empty_content";
/// The pseudo-conversation of statements remembered one by one.
pub const STATEMENTS: &str = "statements";
/// Writer release of captured episodes.
pub const CAPTURE_WRITER: &str = "mosaic.server.conversation-capture.v1";

#[derive(Serialize)]
struct CaptureProvenance<'a> {
    tenant_id: &'a str,
    principal_id: &'a str,
    key_id: &'a str,
    conversation_id: &'a str,
    message_id: &'a str,
    role: &'a str,
}

#[derive(Serialize)]
struct DerivedMessageId<'a> {
    role: &'a str,
    name: Option<&'a str>,
    created_at: Option<&'a str>,
    content: &'a str,
}

/// An identifier the API accepts for conversations and messages: 1 to
/// [`MAX_MESSAGE_ID_BYTES`] bytes of ASCII letters, digits and `._:@-`.
fn check_name(field: &str, value: &str) -> ServiceResult<()> {
    let ok = !value.is_empty()
        && value.len() <= MAX_MESSAGE_ID_BYTES
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:@-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ServiceError::bad_request(
            "invalid_identifier",
            format!("{field} must be 1 to {MAX_MESSAGE_ID_BYTES} ASCII letters, digits or `._:@-`"),
        ))
    }
}

/// A speaker name or time label: one line of at most [`MAX_LABEL_BYTES`].
fn check_label(field: &str, value: &str) -> ServiceResult<()> {
    if value.trim().is_empty()
        || value.len() > MAX_LABEL_BYTES
        || value
            .chars()
            .any(|c| c.is_control() || c == '[' || c == ']')
    {
        return Err(ServiceError::bad_request(
            "invalid_message",
            format!(
                "{field} must be non-blank, at most {MAX_LABEL_BYTES} bytes, without control characters or brackets"
            ),
        ));
    }
    Ok(())
}

/// The transcript line a message is remembered as.
pub fn render_message(message: &ConversationMessage) -> String {
    let speaker = message
        .name
        .as_deref()
        .map(str::trim)
        .unwrap_or(message.role.as_str());
    let content = message.content.trim();
    match message.created_at.as_deref().map(str::trim) {
        Some(at) => format!("[{at}] {speaker}: {content}"),
        None => format!("{speaker}: {content}"),
    }
}

/// A message's id: the client's, or one derived from what it says.
fn message_id(message: &ConversationMessage) -> ServiceResult<String> {
    match &message.id {
        Some(id) => Ok(id.clone()),
        None => {
            let digest = domain_digest(
                MESSAGE_ID_DOMAIN,
                &DerivedMessageId {
                    role: message.role.as_str(),
                    name: message.name.as_deref(),
                    created_at: message.created_at.as_deref(),
                    content: &message.content,
                },
            )?;
            Ok(format!("h-{}", digest.get(..24).unwrap_or(&digest)))
        }
    }
}

impl ServiceCore {
    /// Captures `request.messages` into the conversation and proposes
    /// each as an episodic memory of the credential's principal (of the
    /// principal in `workspace_id`, when given). A message already
    /// captured with the same text is a replay (nothing new is written);
    /// the same id with other text is refused (409 `message_id_in_use`)
    /// before anything is written.
    pub fn ingest_conversation(
        &self,
        credential: &Credential,
        conversation_id: &str,
        request: &IngestRequest,
    ) -> ServiceResult<IngestResponse> {
        let (_, principal) = credential.principal()?;
        check_name("conversation_id", conversation_id)?;
        if conversation_id == STATEMENTS {
            return Err(ServiceError::bad_request(
                "invalid_field",
                format!(
                    "the conversation id {STATEMENTS:?} is reserved for the statements \
                     remembered one by one; name the conversation otherwise"
                ),
            ));
        }
        if request.messages.is_empty() || request.messages.len() > MAX_MESSAGES {
            return Err(ServiceError::bad_request(
                "invalid_message",
                format!("send 1 to {MAX_MESSAGES} messages per call"),
            ));
        }
        crate::api::checked_attachments(request.metadata.as_ref(), None, None)?;
        let subject = match &request.workspace_id {
            Some(workspace_id) => MemorySubject::PrincipalInWorkspace {
                workspace_id: workspace_id.clone(),
                principal_id: principal.to_owned(),
            },
            None => MemorySubject::Principal {
                principal_id: principal.to_owned(),
            },
        };
        // A message with no text (a tool-call or image-only turn of a chat
        // log) is skipped and reported; the call keeps the others.
        let mut skipped = Vec::new();
        let mut kept_messages = Vec::with_capacity(request.messages.len());
        for (idx, message) in request.messages.iter().enumerate() {
            if message.content.trim().is_empty() {
                skipped.push(SkippedMessage {
                    index: idx,
                    reason: EMPTY_CONTENT.to_owned(),
                });
            } else {
                kept_messages.push((idx, message));
            }
        }
        // The shape of every message first: nothing is embedded for a call
        // refused for its shape.
        let mut texts = Vec::with_capacity(kept_messages.len());
        for &(idx, message) in &kept_messages {
            if let Some(name) = &message.name {
                check_label(&format!("messages[{idx}].name"), name)?;
            }
            if let Some(at) = &message.created_at {
                check_label(&format!("messages[{idx}].created_at"), at)?;
            }
            let message_id = message_id(message)?;
            check_name(&format!("messages[{idx}].id"), &message_id)?;
            texts.push(Capture {
                message_id,
                role: message.role.as_str(),
                text: render_message(message),
            });
        }
        let captured = self.capture(
            credential,
            conversation_id,
            &subject,
            CaptureOptions {
                metadata: request.metadata.as_ref(),
                expires_at_unix_ms: request.expires_at_unix_ms,
            },
            texts,
        )?;
        let mut out = IngestResponse {
            conversation_id: conversation_id.to_owned(),
            kept: 0,
            refused: 0,
            messages: Vec::with_capacity(captured.len()),
            skipped,
            extraction_job_id: None,
        };
        for (captured, &(index, _)) in captured.into_iter().zip(&kept_messages) {
            let Captured {
                message_id,
                source_id,
                source_content_sha256,
                response,
                replayed,
            } = captured;
            if response.decision == "accepted" {
                out.kept += 1;
            } else {
                out.refused += 1;
            }
            out.messages.push(IngestedMessage {
                index,
                message_id,
                source_id,
                source_content_sha256,
                record_id: response.record_id,
                decision: response.decision,
                replayed,
                readable: response.readable,
                violations: response.violations,
                expires_at_unix_ms: response.expires_at_unix_ms,
                expires_at: response.expires_at,
            });
        }
        self.metrics.add(
            "mosaic_messages_ingested_total",
            &[],
            out.messages.len() as u64,
        );
        let fresh: Vec<String> = out
            .messages
            .iter()
            .filter(|m| m.decision == "accepted" && !m.replayed)
            .map(|m| m.message_id.clone())
            .collect();
        out.extraction_job_id = self.queue_extraction(credential, conversation_id, fresh)?;
        Ok(out)
    }

    /// Captures `texts` (each a message's id, role and transcript line)
    /// into the conversation and proposes each as an episodic memory about
    /// `subject`, in one group commit: the conversation ingest's path, and
    /// an import's for the messages of an export. A message already
    /// captured with the same text is a replay (nothing new is written);
    /// the same id with other text is refused (409 `message_id_in_use`)
    /// before anything is written.
    pub(super) fn capture(
        &self,
        credential: &Credential,
        conversation_id: &str,
        subject: &MemorySubject,
        options: CaptureOptions<'_>,
        texts: Vec<Capture>,
    ) -> ServiceResult<Vec<Captured>> {
        let (tenant, principal) = credential.principal()?;
        let now = self.now();
        self.tenant_and_grant(&mut *self.reader()?, tenant, principal)?;
        // The embedding starts now, before the captures' digests and
        // store reads: texts no guard compares are embedded meanwhile.
        let vectors = {
            let contents: Vec<&str> = texts.iter().map(|c| c.text.as_str()).collect();
            self.embed_for_batch(tenant, (MemoryKind::Episodic, subject), &contents)?
        };
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        let mut items = Vec::with_capacity(texts.len());
        let mut captured_before = Vec::with_capacity(texts.len());
        {
            let mut reader = self.reader()?;
            for Capture {
                message_id,
                role,
                text,
            } in texts
            {
                let content_sha256 = sha256_hex(text.as_bytes());
                if let Some(other) = seen.insert(message_id.clone(), content_sha256.clone())
                    && other != content_sha256
                {
                    return Err(message_in_use(&message_id));
                }
                let stored = reader.store.captured_message(
                    tenant,
                    principal,
                    conversation_id,
                    &message_id,
                )?;
                let provenance_sha256 = match &stored {
                    Some(row) if row.content_sha256 != content_sha256 => {
                        return Err(message_in_use(&message_id));
                    }
                    // A replay keeps the first capture's provenance, so
                    // the episode's proposal replays exactly.
                    Some(row) => row.provenance_sha256.clone(),
                    None => domain_digest(
                        CAPTURE_PROVENANCE_DOMAIN,
                        &CaptureProvenance {
                            tenant_id: tenant,
                            principal_id: principal,
                            key_id: credential.key_id(),
                            conversation_id,
                            message_id: &message_id,
                            role,
                        },
                    )?,
                };
                captured_before.push(stored.is_some());
                let located = MessageLocator {
                    tenant_id: tenant,
                    principal_id: principal,
                    conversation_id,
                    message_id: &message_id,
                };
                let locator_sha256 = domain_digest(CAPTURE_LOCATOR_DOMAIN, &located)?;
                let ids::ProposalIds {
                    record_id,
                    proposal_id,
                } = ids::captured_message_keys(&located)?;
                let near_conversation = ids::placed_beside_conversation(
                    (tenant, principal),
                    &record_id,
                    stored.as_ref(),
                )?;
                let source = MemorySource {
                    source_id: message_source_id(conversation_id, &message_id),
                    content_sha256: content_sha256.clone(),
                    provenance_sha256: provenance_sha256.clone(),
                    locator_sha256: locator_sha256.clone(),
                };
                let row = CapturedMessage {
                    tenant_id: tenant.to_owned(),
                    principal_id: principal.to_owned(),
                    conversation_id: conversation_id.to_owned(),
                    message_id: message_id.clone(),
                    record_id: record_id.clone(),
                    content_sha256,
                    provenance_sha256,
                    locator_sha256,
                    captured_at_ms: now,
                };
                // The expiry as a TTL from the instant the write path
                // counts it from: the first decision's (a replay), else now.
                let ttl_ms = match options.expires_at_unix_ms {
                    None => None,
                    Some(at) => {
                        let from = super::directory::proposal_decided_at(
                            reader.store.as_mut(),
                            &proposal_id,
                            tenant,
                            principal,
                        )?
                        .unwrap_or(now);
                        Some(at.checked_sub(from).filter(|t| *t > 0).ok_or_else(|| {
                            ServiceError::bad_request(
                                "invalid_field",
                                "expires_at_unix_ms must lie ahead",
                            )
                        })?)
                    }
                };
                let proposal = ProposeRequest {
                    record_id: Some(record_id),
                    proposal_id: Some(proposal_id),
                    writer_release: Some(CAPTURE_WRITER.to_owned()),
                    ttl_ms,
                    metadata: options.metadata.cloned(),
                    ..ProposeRequest::new(
                        text.clone(),
                        MemoryKind::Episodic,
                        MemoryPurpose::Personalization,
                        subject.clone(),
                    )
                };
                items.push(CapturedProposal {
                    request: proposal,
                    sources: vec![CapturedSource { source, text }],
                    message: row,
                    near_conversation,
                });
            }
        }
        let ids: Vec<(String, String, String)> = items
            .iter()
            .map(|item| {
                let source = &item.sources[0].source;
                (
                    item.message.message_id.clone(),
                    source.source_id.clone(),
                    source.content_sha256.clone(),
                )
            })
            .collect();
        let responses = if items.is_empty() {
            Vec::new()
        } else {
            self.propose_captured(tenant, principal, items, vectors)?
        };
        Ok(ids
            .into_iter()
            .zip(responses)
            .zip(captured_before)
            .map(
                |(((message_id, source_id, source_content_sha256), response), before)| Captured {
                    message_id,
                    source_id,
                    source_content_sha256,
                    replayed: before || response.replayed,
                    response,
                },
            )
            .collect())
    }

    /// Proposes a fact resting on captured messages: semantic memory of
    /// the credential's principal (of `workspace_id`, when given), its
    /// sources the cited captures.
    pub fn add_fact(
        &self,
        credential: &Credential,
        request: &FactRequest,
    ) -> ServiceResult<ProposeResponse> {
        self.propose_fact(credential, request, None)
    }

    /// [`Self::add_fact`] with the writer's release (the extractor's).
    pub(super) fn propose_fact(
        &self,
        credential: &Credential,
        request: &FactRequest,
        writer_release: Option<String>,
    ) -> ServiceResult<ProposeResponse> {
        let (tenant, principal) = credential.principal()?;
        if request.cites.is_empty() {
            return Err(ServiceError::bad_request(
                "missing_cites",
                "a fact cites at least one captured message (POST /v1/conversations/{conversation_id}/messages captures them)",
            ));
        }
        let (purpose, subject) = match &request.workspace_id {
            Some(workspace_id) => (
                MemoryPurpose::WorkspaceKnowledge,
                MemorySubject::Workspace {
                    workspace_id: workspace_id.clone(),
                },
            ),
            None => (
                MemoryPurpose::Personalization,
                MemorySubject::Principal {
                    principal_id: principal.to_owned(),
                },
            ),
        };
        let consent_receipt_sha256 = match (&request.consent_receipt_sha256, &request.workspace_id)
        {
            (Some(c), _) => Some(c.clone()),
            (None, Some(_)) => None,
            (None, None) => self.latest_consent(tenant, principal)?,
        };
        let proposal = ProposeRequest {
            cites: request.cites.clone(),
            claims: request.claims.clone(),
            judgments: request.judgments.clone(),
            consent_receipt_sha256,
            supersedes_record_id: request.supersedes_record_id.clone(),
            expected_line_generation: request.expected_line_generation,
            ttl_ms: request.ttl_ms,
            writer_release,
            metadata: request.metadata.clone(),
            namespace: request.namespace.clone(),
            key: request.key.clone(),
            ..ProposeRequest::new(
                request.content.clone(),
                MemoryKind::Semantic,
                purpose,
                subject,
            )
        };
        self.propose(credential, &proposal)
    }

    /// Remembers `text` as the credential's principal states it (the MCP
    /// `remember` tool): the server builds the one source itself, the
    /// statement as received from the authenticated key (provenance bound
    /// to key, tenant and principal, like a captured message), and its
    /// verbatim verifier judges it. `semantic` (the default) is the
    /// principal's own fact, or workspace knowledge with `workspace_id`;
    /// `episodic` is an episode of the principal.
    pub fn remember_text(
        &self,
        credential: &Credential,
        text: &str,
        kind: MemoryKind,
        workspace_id: Option<&str>,
    ) -> ServiceResult<ProposeResponse> {
        self.remember_text_with(
            credential,
            text,
            kind,
            workspace_id,
            StatementAttachments::default(),
        )
    }

    /// [`Self::remember_text`] with the application metadata and address
    /// the statement carries (as a proposal's `metadata`, `namespace` and
    /// `key`: 400 `invalid_metadata` or `invalid_address` beyond their
    /// limits, and a write to an address supersedes its current record).
    pub fn remember_text_with(
        &self,
        credential: &Credential,
        text: &str,
        kind: MemoryKind,
        workspace_id: Option<&str>,
        attachments: StatementAttachments,
    ) -> ServiceResult<ProposeResponse> {
        let (tenant, principal) = credential.principal()?;
        let text = text.trim();
        if text.is_empty() {
            return Err(ServiceError::bad_request(
                "invalid_message",
                "there is no text to remember",
            ));
        }
        let (purpose, subject) = match (kind, workspace_id) {
            (MemoryKind::Semantic, Some(w)) => (
                MemoryPurpose::WorkspaceKnowledge,
                MemorySubject::Workspace {
                    workspace_id: w.to_owned(),
                },
            ),
            (MemoryKind::Semantic, None) | (MemoryKind::Episodic, None) => (
                MemoryPurpose::Personalization,
                MemorySubject::Principal {
                    principal_id: principal.to_owned(),
                },
            ),
            (MemoryKind::Episodic, Some(w)) => (
                MemoryPurpose::Personalization,
                MemorySubject::PrincipalInWorkspace {
                    workspace_id: w.to_owned(),
                    principal_id: principal.to_owned(),
                },
            ),
            _ => {
                return Err(ServiceError::bad_request(
                    "unsupported_kind",
                    "remember writes semantic or episodic memory",
                ));
            }
        };
        let consent_receipt_sha256 = match (kind, workspace_id) {
            (MemoryKind::Semantic, None) => self.latest_consent(tenant, principal)?,
            _ => None,
        };
        let proposal = ProposeRequest {
            consent_receipt_sha256,
            metadata: attachments.metadata,
            namespace: attachments.namespace,
            key: attachments.key,
            ..statement_proposal(credential, text, kind, purpose, subject)?
        };
        self.propose(credential, &proposal)
    }

    /// Replaces one of the principal's memories with `text` (the
    /// mem0-compatible update): a new record of the same kind and subject
    /// whose source is the statement as received, superseding the old one
    /// at the generation read now. The gate decides, as for any
    /// supersession; the old record stays as history.
    pub fn update_text(
        &self,
        credential: &Credential,
        record_id: &str,
        text: &str,
    ) -> ServiceResult<ProposeResponse> {
        let proposal = self.update_proposal(credential, record_id, text)?;
        self.propose(credential, &proposal)
    }

    /// Replaces several of the principal's memories at once (the
    /// mem0-compatible batch update), all or nothing: each update is the
    /// proposal [`Self::update_text`] makes, and all are committed in one
    /// store transaction that rolls back when the gate refuses any of them.
    /// `Ok(Err((i, refusal)))` says the gate refused update `i`: nothing
    /// of the batch was written (not even the refusal, so it names no
    /// review case).
    #[allow(clippy::type_complexity)]
    pub fn update_texts(
        &self,
        credential: &Credential,
        updates: &[(String, String)],
    ) -> ServiceResult<Result<Vec<ProposeResponse>, (usize, ProposeResponse)>> {
        let proposals = updates
            .iter()
            .map(|(record_id, text)| self.update_proposal(credential, record_id, text))
            .collect::<ServiceResult<Vec<_>>>()?;
        self.propose_all_or_nothing(credential, &proposals)
    }

    /// The proposal replacing `record_id` with `text` ([`Self::update_text`]).
    fn update_proposal(
        &self,
        credential: &Credential,
        record_id: &str,
        text: &str,
    ) -> ServiceResult<ProposeRequest> {
        let (tenant, principal) = credential.principal()?;
        let text = text.trim();
        if text.is_empty() {
            return Err(ServiceError::bad_request(
                "invalid_message",
                "there is no text to remember",
            ));
        }
        let old = self.get_memory(credential, record_id)?;
        let purpose = purpose_of(&old.record.subject);
        let consent_receipt_sha256 = match (&old.record.kind, &old.record.subject) {
            (MemoryKind::Semantic, MemorySubject::Principal { .. }) => {
                self.latest_consent(tenant, principal)?
            }
            _ => None,
        };
        let proposal = ProposeRequest {
            consent_receipt_sha256,
            supersedes_record_id: Some(record_id.to_owned()),
            expected_line_generation: Some(old.line_generation),
            ..statement_proposal(
                credential,
                text,
                old.record.kind,
                purpose,
                old.record.subject.clone(),
            )?
        };
        Ok(proposal)
    }

    /// The principal's active memories, newest first (MCP `list` and the
    /// mem0-compatible routes).
    pub fn active_memories(&self, credential: &Credential) -> ServiceResult<Vec<ListEntry>> {
        self.active_memories_matching(credential, None)
    }

    /// The principal's active memories whose record matches `filter` (the
    /// read filter of recall, `mosaic_harness::filter`; 400
    /// `invalid_filter` when it is malformed), newest first: the mem0
    /// platform listing's filters.
    pub fn active_memories_matching(
        &self,
        credential: &Credential,
        filter: Option<&serde_json::Value>,
    ) -> ServiceResult<Vec<ListEntry>> {
        let (_, principal) = credential.principal()?;
        let mut entries = self.list_by_subject(
            credential,
            &ListQuery {
                subject_type: "principal".into(),
                run_id: None,
                principal_id: Some(principal.to_owned()),
                workspace_id: None,
                procedure_id: None,
                filter: filter.map(serde_json::Value::to_string),
            },
        )?;
        entries.retain(|e| e.state == "active");
        entries.sort_by(|a, b| {
            b.created_at_unix_ms
                .cmp(&a.created_at_unix_ms)
                .then_with(|| a.record_id.cmp(&b.record_id))
        });
        Ok(entries)
    }

    /// Revokes every version of a memory's line (the record, the versions
    /// it superseded and the one that superseded it), newest first, each
    /// to its deletion receipt: the mem0-compatible deletion, which must
    /// not leave replaced text readable. A record the credential may not
    /// see, or one already erased, is not found. Each version goes
    /// through [`Service::revoke`](super::ServiceCore::revoke), with its
    /// visibility check.
    pub fn forget_line(
        &self,
        credential: &Credential,
        record_id: &str,
    ) -> ServiceResult<Vec<RevocationResponse>> {
        let (tenant, principal) = credential.principal()?;
        let versions = {
            let mut reader = self.reader()?;
            self.tenant_and_grant(&mut reader, tenant, principal)?;
            let row = self.visible_row(&mut reader, credential, record_id)?;
            // An erased record has no line left (and no content).
            let Some((line_id, _)) = row.line.clone() else {
                return Err(ServiceError::not_found("memory", record_id));
            };
            // A line keeps its subject: a supersession proposes the new
            // version about the old one's subject.
            let filter = RecordFilter {
                subject: Some(row.subject.clone()),
                ..RecordFilter::tenant(tenant, MAX_LIST_LIMIT)
            };
            let mut versions: Vec<ListedRecord> = list_all(reader.store.as_mut(), filter)?
                .into_iter()
                .filter(|r| r.line.as_ref().is_some_and(|(line, _)| *line == line_id))
                .collect();
            versions.sort_by_key(|r| std::cmp::Reverse(r.line.as_ref().map_or(0, |(_, g)| *g)));
            versions
        };
        let mut out = Vec::with_capacity(versions.len());
        for row in versions {
            if row.state == ListedState::Erased {
                continue;
            }
            // Revoking one version may already have revoked another
            // (revocation cascades to what was derived from it): then its
            // deletion is reported as it stands.
            let revoked = match self.revoke(credential, &row.record_id, &RevokeRequest::default()) {
                Err(ServiceError::Conflict {
                    code: "invalid_state",
                    ..
                }) => self.deletion_status(credential, &row.record_id)?,
                other => other?,
            };
            out.push(revoked);
        }
        Ok(out)
    }

    /// The principal's most recently given consent that the store still
    /// holds unwithdrawn, if the policy needs one for principal facts.
    pub(super) fn latest_consent(
        &self,
        tenant: &str,
        principal: &str,
    ) -> ServiceResult<Option<String>> {
        let mut reader = self.reader()?;
        let Some(row) = super::directory::tenant(reader.store.as_mut(), tenant)? else {
            return Ok(None);
        };
        if !row.policy.require_consent_for_principal_semantic {
            return Ok(None);
        }
        super::directory::latest_consent(
            reader.store.as_mut(),
            tenant,
            principal,
            "personalization",
            &row.policy.policy_sha256,
        )
    }
}

/// One message to capture: its id, the role its provenance names and its
/// transcript line.
pub(super) struct Capture {
    pub message_id: String,
    pub role: &'static str,
    pub text: String,
}

/// What a capture's proposals carry besides their texts.
pub(super) struct CaptureOptions<'a> {
    /// Application metadata of every episode.
    pub metadata: Option<&'a mosaic_harness::MemoryMetadata>,
    /// The episodes' expiry (Unix ms), when the caller sets one.
    pub expires_at_unix_ms: Option<u64>,
}

/// A captured message's decision.
pub(super) struct Captured {
    pub message_id: String,
    pub source_id: String,
    pub source_content_sha256: String,
    /// The decision (its `replayed` the store's own).
    pub response: ProposeResponse,
    /// The message was captured before with the same text, or its
    /// proposal's decision replayed: nothing new was written.
    pub replayed: bool,
}

/// The role an imported message's capture provenance names: the export
/// keeps the transcript line, not who spoke it, so the import vouches for
/// what it can, that the importing key sent the line.
pub(super) const IMPORTED_ROLE: &str = "imported";

/// Checks an exported message's ids and text as the conversation endpoint
/// checks a message's.
pub(super) fn check_imported_message(
    conversation_id: &str,
    message_id: &str,
    text: &str,
) -> ServiceResult<()> {
    check_name("conversation_id", conversation_id)?;
    check_name("message_id", message_id)?;
    if conversation_id == STATEMENTS || text.trim().is_empty() || text.trim() != text {
        return Err(ServiceError::bad_request(
            "invalid_message",
            "an imported message names a conversation other than `statements` and holds its transcript line, trimmed and not blank",
        ));
    }
    Ok(())
}

/// What a remembered statement may carry beside its text: application
/// metadata and an address (`namespace` with `key`).
#[derive(Clone, Debug, Default)]
pub struct StatementAttachments {
    /// Application metadata (a JSON object within its limits).
    pub metadata: Option<mosaic_harness::MemoryMetadata>,
    /// The address's namespace segments.
    pub namespace: Option<Vec<String>>,
    /// The address's key within the namespace.
    pub key: Option<String>,
}

/// A proposal of `text` whose one source is the statement as the server
/// received it from the authenticated key (provenance bound to key,
/// tenant and principal, like a captured message); the verbatim verifier
/// judges it, since the text travels with the request.
pub(super) fn statement_proposal(
    credential: &Credential,
    text: &str,
    kind: MemoryKind,
    purpose: MemoryPurpose,
    subject: MemorySubject,
) -> ServiceResult<ProposeRequest> {
    let (tenant, principal) = credential.principal()?;
    let statement_id = message_id(&ConversationMessage {
        id: None,
        role: MessageRole::Assistant,
        content: text.to_owned(),
        name: None,
        created_at: None,
    })?;
    let located = MessageLocator {
        tenant_id: tenant,
        principal_id: principal,
        conversation_id: STATEMENTS,
        message_id: &statement_id,
    };
    let source = MemorySource {
        source_id: message_source_id(STATEMENTS, &statement_id),
        content_sha256: sha256_hex(text.as_bytes()),
        provenance_sha256: domain_digest(
            CAPTURE_PROVENANCE_DOMAIN,
            &CaptureProvenance {
                tenant_id: tenant,
                principal_id: principal,
                key_id: credential.key_id(),
                conversation_id: STATEMENTS,
                message_id: &statement_id,
                role: MessageRole::Assistant.as_str(),
            },
        )?,
        locator_sha256: domain_digest(CAPTURE_LOCATOR_DOMAIN, &located)?,
    };
    Ok(ProposeRequest {
        source_texts: BTreeMap::from([(source.source_id.clone(), text.to_owned())]),
        sources: vec![source],
        writer_release: Some(CAPTURE_WRITER.to_owned()),
        ..ProposeRequest::new(text, kind, purpose, subject)
    })
}

/// The purpose a record about `subject` was written for.
pub(super) fn purpose_of(subject: &MemorySubject) -> MemoryPurpose {
    match subject {
        MemorySubject::Run { .. } => MemoryPurpose::RunContinuity,
        MemorySubject::Principal { .. } | MemorySubject::PrincipalInWorkspace { .. } => {
            MemoryPurpose::Personalization
        }
        MemorySubject::Workspace { .. } => MemoryPurpose::WorkspaceKnowledge,
        MemorySubject::Procedure { .. } => MemoryPurpose::ProcedureImprovement,
    }
}

fn message_in_use(message_id: &str) -> ServiceError {
    ServiceError::Conflict {
        code: "message_id_in_use",
        message: format!(
            "message {message_id} was captured with other content; a message id names one message"
        ),
    }
}
