//! Typed memory records: kinds, subjects, status, sources, summaries, and the
//! validation every record must pass before a selector or store will use it.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::canonical::{MAX_CANONICAL_INT, is_sha256_hex};

/// The one record schema version this release reads and writes.
pub const MEMORY_SCHEMA_VERSION: u32 = 1;

/// Longest identifier (record, tenant, principal, ...) accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Most sources one record may cite. Bounds verifier and database work.
pub const MAX_SOURCES: usize = 64;

/// The four memory jobs of chapter 7.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// State for one active run.
    Working,
    /// An event or outcome associated with a principal.
    Episodic,
    /// A durable proposition about a principal or workspace.
    Semantic,
    /// A named strategy or operating procedure within a workspace.
    Procedural,
}

impl MemoryKind {
    /// Every kind, in declaration order.
    pub const ALL: [MemoryKind; 4] = [
        MemoryKind::Working,
        MemoryKind::Episodic,
        MemoryKind::Semantic,
        MemoryKind::Procedural,
    ];

    /// Selection priority: working, semantic, procedural, then episodic.
    pub fn selection_rank(self) -> u8 {
        match self {
            MemoryKind::Working => 0,
            MemoryKind::Semantic => 1,
            MemoryKind::Procedural => 2,
            MemoryKind::Episodic => 3,
        }
    }

    /// The snake_case name used on the wire and in rendered blocks.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Working => "working",
            MemoryKind::Episodic => "episodic",
            MemoryKind::Semantic => "semantic",
            MemoryKind::Procedural => "procedural",
        }
    }

    /// Whether `subject` is a legal subject for this kind.
    ///
    /// working → run; episodic → principal, or principal within a workspace;
    /// semantic → principal or workspace; procedural → procedure in a workspace.
    pub fn permits(self, subject: &MemorySubject) -> bool {
        matches!(
            (self, subject),
            (MemoryKind::Working, MemorySubject::Run { .. })
                | (MemoryKind::Episodic, MemorySubject::Principal { .. })
                | (
                    MemoryKind::Episodic,
                    MemorySubject::PrincipalInWorkspace { .. }
                )
                | (MemoryKind::Semantic, MemorySubject::Principal { .. })
                | (MemoryKind::Semantic, MemorySubject::Workspace { .. })
                | (MemoryKind::Procedural, MemorySubject::Procedure { .. })
        )
    }
}

impl fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who or what a record is about. The shape is part of the type: a working
/// record cannot name a principal, and so on (see [`MemoryKind::permits`]).
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum MemorySubject {
    /// One run's working state.
    Run {
        /// The run identity.
        run_id: String,
    },
    /// A principal (a user or service account) across workspaces.
    Principal {
        /// The principal identity.
        principal_id: String,
    },
    /// A principal's episodes inside one workspace only; never recalled in
    /// another workspace, even for the same principal.
    PrincipalInWorkspace {
        /// The workspace the episode belongs to.
        workspace_id: String,
        /// The principal identity.
        principal_id: String,
    },
    /// A workspace as a whole.
    Workspace {
        /// The workspace identity.
        workspace_id: String,
    },
    /// A named procedure owned by a workspace.
    Procedure {
        /// The owning workspace.
        workspace_id: String,
        /// The procedure's name.
        procedure_id: String,
    },
}

impl MemorySubject {
    fn ids(&self) -> [Option<(&'static str, &str)>; 2] {
        match self {
            MemorySubject::Run { run_id } => [Some(("run_id", run_id)), None],
            MemorySubject::Principal { principal_id } => {
                [Some(("principal_id", principal_id)), None]
            }
            MemorySubject::PrincipalInWorkspace {
                workspace_id,
                principal_id,
            } => [
                Some(("workspace_id", workspace_id)),
                Some(("principal_id", principal_id)),
            ],
            MemorySubject::Workspace { workspace_id } => {
                [Some(("workspace_id", workspace_id)), None]
            }
            MemorySubject::Procedure {
                workspace_id,
                procedure_id,
            } => [
                Some(("workspace_id", workspace_id)),
                Some(("procedure_id", procedure_id)),
            ],
        }
    }

    /// The principal this subject names, if any.
    pub fn principal_id(&self) -> Option<&str> {
        match self {
            MemorySubject::Principal { principal_id }
            | MemorySubject::PrincipalInWorkspace { principal_id, .. } => Some(principal_id),
            _ => None,
        }
    }

    /// The workspace this subject names, if any.
    pub fn workspace_id(&self) -> Option<&str> {
        match self {
            MemorySubject::Workspace { workspace_id }
            | MemorySubject::PrincipalInWorkspace { workspace_id, .. }
            | MemorySubject::Procedure { workspace_id, .. } => Some(workspace_id),
            _ => None,
        }
    }

    /// The run this subject names, if any.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            MemorySubject::Run { run_id } => Some(run_id),
            _ => None,
        }
    }

    /// A stable one-line key such as `principal:alice` or
    /// `procedure:ws-1/build` (used for conflict keys and store indexes).
    pub fn key(&self) -> String {
        match self {
            MemorySubject::Run { run_id } => format!("run:{run_id}"),
            MemorySubject::Principal { principal_id } => format!("principal:{principal_id}"),
            MemorySubject::PrincipalInWorkspace {
                workspace_id,
                principal_id,
            } => format!("principal_in_workspace:{workspace_id}/{principal_id}"),
            MemorySubject::Workspace { workspace_id } => format!("workspace:{workspace_id}"),
            MemorySubject::Procedure {
                workspace_id,
                procedure_id,
            } => format!("procedure:{workspace_id}/{procedure_id}"),
        }
    }
}

/// Epistemic and lifecycle status. Expiry is separate (a time bound on the
/// record), and so is physical deletion (a store concern).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case", deny_unknown_fields)]
pub enum MemoryStatus {
    /// Accepted by the write gate and not since disputed.
    Verified,
    /// Unresolved or contradicted; excluded from recall until adjudicated.
    Contested,
    /// Explicitly withdrawn from influence at `revoked_at_unix_ms`. Reads at
    /// or after that instant drop the record; a replayed read from before it
    /// still sees the record as it was.
    Revoked {
        /// The instant the revocation took effect (inclusive).
        revoked_at_unix_ms: u64,
    },
    /// Replaced by another record through an immutable supersession edge.
    Superseded {
        /// The replacing record.
        replacement_id: String,
    },
}

/// One piece of evidence a record rests on.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct MemorySource {
    /// Stable identity of the source (unique within one record).
    pub source_id: String,
    /// SHA-256 of the source's exact content bytes.
    pub content_sha256: String,
    /// SHA-256 of the source's provenance (who produced it, how, when).
    pub provenance_sha256: String,
    /// SHA-256 of the locator that retrieves the original source.
    pub locator_sha256: String,
}

/// What a lossy summary was made for and from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummaryDescriptor {
    /// What the summary was meant to preserve.
    pub objective: String,
    /// The summarizer that produced it.
    pub summarizer_release: String,
    /// Digest of the source-set manifest (see `memory_scope::SourceSetManifest`).
    pub source_set_sha256: String,
    /// Details deliberately left out.
    pub known_omissions: Vec<String>,
}

/// A durable memory record: the state plus its validity rules.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryRecord {
    /// Must equal [`MEMORY_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Stable identity.
    pub record_id: String,
    /// The memory job.
    pub kind: MemoryKind,
    /// Owning tenant.
    pub tenant_id: String,
    /// Digest of the policy the record was written under.
    pub policy_sha256: String,
    /// Who or what the record is about.
    pub subject: MemorySubject,
    /// Epistemic and lifecycle status.
    pub status: MemoryStatus,
    /// SHA-256 of the exact content bytes.
    pub content_sha256: String,
    /// SHA-256 of the record's provenance.
    pub provenance_sha256: String,
    /// Tokens the content occupies under `token_counter_release`.
    pub token_count: u32,
    /// The token counter that produced `token_count`.
    pub token_counter_release: String,
    /// Creation instant (inclusive start of validity).
    pub created_at_unix_ms: u64,
    /// Expiry instant (exclusive end of validity); `None` only where policy
    /// explicitly allows unbounded records.
    pub expires_at_unix_ms: Option<u64>,
    /// The writer that proposed the record.
    pub writer_release: String,
    /// Evidence; never empty.
    pub sources: Vec<MemorySource>,
    /// Present when the content is a lossy summary.
    pub summary: Option<SummaryDescriptor>,
    /// What the application attached to the memory (absent when none: a
    /// record without metadata encodes exactly as before metadata existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MemoryMetadata>,
    /// The application's address of the memory (absent when unaddressed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<MemoryAddress>,
}

/// Most canonical JSON bytes a record's metadata may take.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
/// Deepest nesting of metadata: the top object is depth 1.
pub const MAX_METADATA_DEPTH: usize = 4;
/// Longest metadata member name, in characters.
pub const MAX_METADATA_KEY_CHARS: usize = 128;
/// Most segments an address namespace may have.
pub const MAX_NAMESPACE_SEGMENTS: usize = 8;
/// Longest namespace segment, in characters.
pub const MAX_NAMESPACE_SEGMENT_CHARS: usize = 128;
/// Longest address key, in characters.
pub const MAX_ADDRESS_KEY_CHARS: usize = 256;

/// Application metadata: a JSON object of strings, booleans, nulls,
/// integers (at most 2^53 - 1 in magnitude; no fractions, as the canonical
/// encoding has none), arrays and objects, bounded by
/// [`MAX_METADATA_BYTES`], [`MAX_METADATA_DEPTH`] and
/// [`MAX_METADATA_KEY_CHARS`] (see [`MemoryMetadata::check`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(transparent)]
pub struct MemoryMetadata(pub serde_json::Map<String, serde_json::Value>);

impl std::hash::Hash for MemoryMetadata {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // serde_json's map is ordered by name, so equal metadata renders
        // to equal text.
        serde_json::to_string(&self.0)
            .unwrap_or_default()
            .hash(state);
    }
}

impl MemoryMetadata {
    /// The first limit the metadata breaks, named, or `Ok`.
    pub fn check(&self) -> Result<(), String> {
        // `depth` is the value's own: members of the top object are at 2.
        fn walk(value: &serde_json::Value, depth: usize) -> Result<(), String> {
            use serde_json::Value;
            match value {
                Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
                Value::Number(n) => {
                    let fits = n.as_u64().is_some_and(|v| v <= MAX_CANONICAL_INT)
                        || n.as_i64()
                            .is_some_and(|v| v.unsigned_abs() <= MAX_CANONICAL_INT);
                    if fits {
                        Ok(())
                    } else {
                        Err(format!(
                            "metadata numbers must be integers of magnitude at most 2^53-1 (found {n})"
                        ))
                    }
                }
                Value::Array(items) => {
                    if depth > MAX_METADATA_DEPTH {
                        return Err(format!(
                            "metadata nests deeper than {MAX_METADATA_DEPTH} levels"
                        ));
                    }
                    items.iter().try_for_each(|v| walk(v, depth + 1))
                }
                Value::Object(members) => {
                    if depth > MAX_METADATA_DEPTH {
                        return Err(format!(
                            "metadata nests deeper than {MAX_METADATA_DEPTH} levels"
                        ));
                    }
                    members.iter().try_for_each(|(k, v)| {
                        check_key(k)?;
                        walk(v, depth + 1)
                    })
                }
            }
        }
        fn check_key(key: &str) -> Result<(), String> {
            if key.is_empty()
                || key.chars().count() > MAX_METADATA_KEY_CHARS
                || key.chars().any(char::is_control)
            {
                return Err(format!(
                    "metadata member names are 1 to {MAX_METADATA_KEY_CHARS} characters without control characters"
                ));
            }
            Ok(())
        }
        for (key, value) in &self.0 {
            check_key(key)?;
            walk(value, 2)?;
        }
        let bytes = crate::canonical::canonical_json(self)
            .map_err(|e| format!("metadata is not canonically encodable: {e}"))?;
        if bytes.len() > MAX_METADATA_BYTES {
            return Err(format!(
                "metadata takes {} canonical bytes, more than {MAX_METADATA_BYTES}",
                bytes.len()
            ));
        }
        Ok(())
    }
}

/// Where an application keeps a memory: a namespace path and a key within
/// it. Within one tenant and subject an address names one line of records:
/// a write to it supersedes the line's current record.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct MemoryAddress {
    /// Path of segments: 1 to [`MAX_NAMESPACE_SEGMENTS`], each 1 to
    /// [`MAX_NAMESPACE_SEGMENT_CHARS`] characters without control
    /// characters or `/`.
    pub namespace: Vec<String>,
    /// 1 to [`MAX_ADDRESS_KEY_CHARS`] characters without control characters.
    pub key: String,
}

impl MemoryAddress {
    /// The first limit the address breaks, named, or `Ok`.
    pub fn check(&self) -> Result<(), String> {
        if self.namespace.is_empty() || self.namespace.len() > MAX_NAMESPACE_SEGMENTS {
            return Err(format!(
                "a namespace has 1 to {MAX_NAMESPACE_SEGMENTS} segments"
            ));
        }
        for segment in &self.namespace {
            if segment.is_empty()
                || segment.chars().count() > MAX_NAMESPACE_SEGMENT_CHARS
                || segment.chars().any(|c| c.is_control() || c == '/')
            {
                return Err(format!(
                    "namespace segments are 1 to {MAX_NAMESPACE_SEGMENT_CHARS} characters without control characters or '/'"
                ));
            }
        }
        if self.key.is_empty()
            || self.key.chars().count() > MAX_ADDRESS_KEY_CHARS
            || self.key.chars().any(char::is_control)
        {
            return Err(format!(
                "a key is 1 to {MAX_ADDRESS_KEY_CHARS} characters without control characters"
            ));
        }
        Ok(())
    }

    /// The namespace as one string, its segments joined by `/` (segments
    /// hold no `/`, so the join is reversible and a prefix of segments is
    /// a string prefix ending in `/`).
    pub fn namespace_path(&self) -> String {
        self.namespace.join("/")
    }
}

/// Why a record (or another input) is malformed. Reported all at once.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum InvalidField {
    /// The schema version is not one this release understands.
    UnknownSchemaVersion {
        /// The version found.
        found: u32,
    },
    /// An identifier is empty, too long, or holds control characters.
    BadIdentifier {
        /// Which field.
        field: String,
    },
    /// A digest is not 64 lowercase hex characters.
    MalformedSha256 {
        /// Which field.
        field: String,
    },
    /// The subject shape is not permitted for the kind.
    KindSubjectMismatch {
        /// The record's kind.
        kind: MemoryKind,
        /// The subject key.
        subject: String,
    },
    /// `expires_at` is not strictly after `created_at`.
    ExpiryNotAfterCreation,
    /// The record cites no source.
    NoSources,
    /// More sources than [`MAX_SOURCES`].
    TooManySources,
    /// Two sources share one `source_id`.
    DuplicateSourceId {
        /// The repeated identity.
        source_id: String,
    },
    /// A superseded record names itself as its replacement.
    SelfSupersession,
    /// An integer exceeds 2^53 - 1 and cannot be encoded canonically.
    IntegerOutOfRange {
        /// Which field.
        field: String,
    },
    /// The metadata breaks a limit (see [`MemoryMetadata::check`]).
    BadMetadata {
        /// Which limit.
        reason: String,
    },
    /// The address breaks a limit (see [`MemoryAddress::check`]).
    BadAddress {
        /// Which limit.
        reason: String,
    },
    /// A read filter breaks a limit (see `filter::ReadFilter::check`).
    BadFilter {
        /// Which limit.
        reason: String,
    },
}

impl fmt::Display for InvalidField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidField::UnknownSchemaVersion { found } => {
                write!(f, "unknown schema version {found}")
            }
            InvalidField::BadIdentifier { field } => write!(f, "{field}: bad identifier"),
            InvalidField::MalformedSha256 { field } => write!(f, "{field}: malformed SHA-256 hex"),
            InvalidField::KindSubjectMismatch { kind, subject } => {
                write!(f, "kind {kind} may not have subject {subject}")
            }
            InvalidField::ExpiryNotAfterCreation => f.write_str("expiry is not after creation"),
            InvalidField::NoSources => f.write_str("record has no sources"),
            InvalidField::TooManySources => write!(f, "more than {MAX_SOURCES} sources"),
            InvalidField::DuplicateSourceId { source_id } => {
                write!(f, "duplicate source id {source_id}")
            }
            InvalidField::SelfSupersession => f.write_str("record supersedes itself"),
            InvalidField::IntegerOutOfRange { field } => {
                write!(f, "{field}: integer above 2^53-1")
            }
            InvalidField::BadMetadata { reason } => write!(f, "metadata: {reason}"),
            InvalidField::BadAddress { reason } => write!(f, "address: {reason}"),
            InvalidField::BadFilter { reason } => write!(f, "filter: {reason}"),
        }
    }
}

/// Accumulates [`InvalidField`]s; shared by every validator in the crate.
#[derive(Default, Debug)]
pub(crate) struct Problems(pub(crate) Vec<InvalidField>);

impl Problems {
    pub(crate) fn id(&mut self, field: &str, value: &str) {
        if !is_identifier(value) {
            self.0.push(InvalidField::BadIdentifier {
                field: field.to_owned(),
            });
        }
    }

    pub(crate) fn sha(&mut self, field: &str, value: &str) {
        if !is_sha256_hex(value) {
            self.0.push(InvalidField::MalformedSha256 {
                field: field.to_owned(),
            });
        }
    }

    pub(crate) fn int(&mut self, field: &str, value: u64) {
        if value > MAX_CANONICAL_INT {
            self.0.push(InvalidField::IntegerOutOfRange {
                field: field.to_owned(),
            });
        }
    }

    pub(crate) fn schema(&mut self, version: u32) {
        if version != MEMORY_SCHEMA_VERSION {
            self.0
                .push(InvalidField::UnknownSchemaVersion { found: version });
        }
    }

    pub(crate) fn subject(&mut self, prefix: &str, subject: &MemorySubject) {
        for (name, value) in subject.ids().into_iter().flatten() {
            if !is_identifier(value) {
                self.0.push(InvalidField::BadIdentifier {
                    field: format!("{prefix}.{name}"),
                });
            }
        }
    }

    pub(crate) fn sources(&mut self, prefix: &str, sources: &[MemorySource]) {
        if sources.is_empty() {
            self.0.push(InvalidField::NoSources);
        }
        if sources.len() > MAX_SOURCES {
            self.0.push(InvalidField::TooManySources);
        }
        let mut seen = BTreeSet::new();
        for (idx, source) in sources.iter().enumerate() {
            // Field names are formatted only when a check fails: validation
            // runs on every record of every read.
            let field = |name: &str| format!("{prefix}[{idx}].{name}");
            if !is_identifier(&source.source_id) {
                self.0.push(InvalidField::BadIdentifier {
                    field: field("source_id"),
                });
            }
            for (name, digest) in [
                ("content_sha256", &source.content_sha256),
                ("provenance_sha256", &source.provenance_sha256),
                ("locator_sha256", &source.locator_sha256),
            ] {
                if !is_sha256_hex(digest) {
                    self.0
                        .push(InvalidField::MalformedSha256 { field: field(name) });
                }
            }
            if !seen.insert(source.source_id.as_str()) {
                self.0.push(InvalidField::DuplicateSourceId {
                    source_id: source.source_id.clone(),
                });
            }
        }
    }

    pub(crate) fn summary(&mut self, summary: &Option<SummaryDescriptor>) {
        if let Some(summary) = summary {
            if summary.objective.trim().is_empty() {
                self.0.push(InvalidField::BadIdentifier {
                    field: "summary.objective".into(),
                });
            }
            self.id("summary.summarizer_release", &summary.summarizer_release);
            self.sha("summary.source_set_sha256", &summary.source_set_sha256);
        }
    }

    pub(crate) fn attachments(
        &mut self,
        metadata: &Option<MemoryMetadata>,
        address: &Option<MemoryAddress>,
    ) {
        if let Some(Err(reason)) = metadata.as_ref().map(MemoryMetadata::check) {
            self.0.push(InvalidField::BadMetadata { reason });
        }
        if let Some(Err(reason)) = address.as_ref().map(MemoryAddress::check) {
            self.0.push(InvalidField::BadAddress { reason });
        }
    }

    pub(crate) fn finish(mut self) -> Result<(), Vec<InvalidField>> {
        if self.0.is_empty() {
            Ok(())
        } else {
            self.0.sort();
            self.0.dedup();
            Err(self.0)
        }
    }
}

/// The source id of a message captured in a conversation:
/// `msg:{conversation_id}/{message_id}` (neither holds a `/`).
pub fn message_source_id(conversation_id: &str, message_id: &str) -> String {
    format!("msg:{conversation_id}/{message_id}")
}

/// The conversation a captured message's source id
/// ([`message_source_id`]) names; `None` for any other source.
pub fn message_conversation(source_id: &str) -> Option<&str> {
    let rest = source_id.strip_prefix("msg:")?;
    rest.rfind('/').map(|at| &rest[..at])
}

/// True for a non-empty identifier of at most [`MAX_ID_BYTES`] bytes without
/// whitespace or control characters.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_BYTES
        && !s.chars().any(|c| c.is_control() || c.is_whitespace())
}

impl MemoryRecord {
    /// Checks every structural invariant of a single record and returns all
    /// problems found, sorted. Cross-record rules (supersession edges) are
    /// checked by the selector over the whole set.
    pub fn validate(&self) -> Result<(), Vec<InvalidField>> {
        let mut p = Problems::default();
        p.schema(self.schema_version);
        p.id("record_id", &self.record_id);
        p.id("tenant_id", &self.tenant_id);
        p.sha("policy_sha256", &self.policy_sha256);
        p.subject("subject", &self.subject);
        if !self.kind.permits(&self.subject) {
            p.0.push(InvalidField::KindSubjectMismatch {
                kind: self.kind,
                subject: self.subject.key(),
            });
        }
        match &self.status {
            MemoryStatus::Superseded { replacement_id } => {
                p.id("status.replacement_id", replacement_id);
                if replacement_id == &self.record_id {
                    p.0.push(InvalidField::SelfSupersession);
                }
            }
            MemoryStatus::Revoked { revoked_at_unix_ms } => {
                p.int("status.revoked_at_unix_ms", *revoked_at_unix_ms)
            }
            MemoryStatus::Verified | MemoryStatus::Contested => {}
        }
        p.sha("content_sha256", &self.content_sha256);
        p.sha("provenance_sha256", &self.provenance_sha256);
        p.id("token_counter_release", &self.token_counter_release);
        p.int("created_at_unix_ms", self.created_at_unix_ms);
        if let Some(expires) = self.expires_at_unix_ms {
            p.int("expires_at_unix_ms", expires);
            if expires <= self.created_at_unix_ms {
                p.0.push(InvalidField::ExpiryNotAfterCreation);
            }
        }
        p.id("writer_release", &self.writer_release);
        p.sources("sources", &self.sources);
        p.summary(&self.summary);
        p.attachments(&self.metadata, &self.address);
        p.finish()
    }

    /// Half-open validity: `created_at <= now < expires_at`.
    pub fn is_live_at(&self, now_unix_ms: u64) -> bool {
        self.created_at_unix_ms <= now_unix_ms
            && self
                .expires_at_unix_ms
                .is_none_or(|expires| now_unix_ms < expires)
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::canonical::sha256_hex;

    /// A digest derived from a label, for readable fixtures.
    pub fn d(label: &str) -> String {
        sha256_hex(label.as_bytes())
    }

    pub fn source(id: &str) -> MemorySource {
        MemorySource {
            source_id: id.into(),
            content_sha256: d(&format!("{id}/content")),
            provenance_sha256: d(&format!("{id}/provenance")),
            locator_sha256: d(&format!("{id}/locator")),
        }
    }

    pub fn record(id: &str, kind: MemoryKind, subject: MemorySubject) -> MemoryRecord {
        MemoryRecord {
            schema_version: MEMORY_SCHEMA_VERSION,
            record_id: id.into(),
            kind,
            tenant_id: "tenant-a".into(),
            policy_sha256: d("policy-v1"),
            subject,
            status: MemoryStatus::Verified,
            content_sha256: d(&format!("{id}/content")),
            provenance_sha256: d(&format!("{id}/provenance")),
            token_count: 10,
            token_counter_release: "tok-v1".into(),
            created_at_unix_ms: 1_000,
            expires_at_unix_ms: Some(10_000),
            writer_release: "writer-v1".into(),
            sources: vec![source(&format!("{id}-src"))],
            summary: None,
            metadata: None,
            address: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    fn principal(id: &str) -> MemorySubject {
        MemorySubject::Principal {
            principal_id: id.into(),
        }
    }

    #[test]
    fn record_valid_fixture_passes() {
        record("r1", MemoryKind::Semantic, principal("p"))
            .validate()
            .unwrap();
    }

    #[test]
    fn record_kind_subject_pairs_are_enforced() {
        let run = MemorySubject::Run { run_id: "r".into() };
        let ws = MemorySubject::Workspace {
            workspace_id: "w".into(),
        };
        let proc_ = MemorySubject::Procedure {
            workspace_id: "w".into(),
            procedure_id: "build".into(),
        };
        let pw = MemorySubject::PrincipalInWorkspace {
            workspace_id: "w".into(),
            principal_id: "p".into(),
        };
        let subjects = [run, principal("p"), pw, ws, proc_];
        let mut allowed = Vec::new();
        for kind in MemoryKind::ALL {
            for subject in &subjects {
                if record("r", kind, subject.clone()).validate().is_ok() {
                    allowed.push(format!("{kind}->{}", subject.key()));
                }
            }
        }
        assert_eq!(
            allowed,
            [
                "working->run:r",
                "episodic->principal:p",
                "episodic->principal_in_workspace:w/p",
                "semantic->principal:p",
                "semantic->workspace:w",
                "procedural->procedure:w/build",
            ]
        );
    }

    #[test]
    fn record_reports_every_problem() {
        let mut r = record("r1", MemoryKind::Working, principal("p"));
        r.schema_version = 2;
        r.policy_sha256 = "ABC".into();
        r.expires_at_unix_ms = Some(r.created_at_unix_ms);
        r.sources.clear();
        let problems = r.validate().unwrap_err();
        assert!(problems.contains(&InvalidField::UnknownSchemaVersion { found: 2 }));
        assert!(problems.contains(&InvalidField::MalformedSha256 {
            field: "policy_sha256".into()
        }));
        assert!(problems.contains(&InvalidField::ExpiryNotAfterCreation));
        assert!(problems.contains(&InvalidField::NoSources));
        assert!(
            problems
                .iter()
                .any(|p| matches!(p, InvalidField::KindSubjectMismatch { .. }))
        );
        assert_eq!(problems.len(), 5);
    }

    #[test]
    fn record_rejects_self_supersession_and_duplicate_sources() {
        let mut r = record("r1", MemoryKind::Semantic, principal("p"));
        r.status = MemoryStatus::Superseded {
            replacement_id: "r1".into(),
        };
        r.sources.push(r.sources[0].clone());
        let problems = r.validate().unwrap_err();
        assert!(problems.contains(&InvalidField::SelfSupersession));
        assert!(
            problems
                .iter()
                .any(|p| matches!(p, InvalidField::DuplicateSourceId { .. }))
        );
    }

    #[test]
    fn record_decoding_is_strict() {
        let r = record("r1", MemoryKind::Semantic, principal("p"));
        let mut v = serde_json::to_value(&r).unwrap();
        v["extra"] = serde_json::json!(1);
        assert!(serde_json::from_value::<MemoryRecord>(v).is_err());
        let mut v = serde_json::to_value(&r).unwrap();
        v["subject"]["extra"] = serde_json::json!("x");
        assert!(serde_json::from_value::<MemoryRecord>(v).is_err());
        let text = serde_json::to_string(&r).unwrap();
        let dup = text.replacen("{", "{\"record_id\":\"other\",", 1);
        assert!(serde_json::from_str::<MemoryRecord>(&dup).is_err());
        assert!(serde_json::from_str::<MemoryRecord>(&format!("{text} {{}}")).is_err());
        assert_eq!(serde_json::from_str::<MemoryRecord>(&text).unwrap(), r);
    }

    fn meta(v: serde_json::Value) -> Option<MemoryMetadata> {
        Some(serde_json::from_value(v).unwrap())
    }

    fn reasons(r: &MemoryRecord) -> Vec<String> {
        r.validate()
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|p| p.to_string())
            .collect()
    }

    #[test]
    fn record_without_metadata_or_address_encodes_as_before() {
        let r = record("r1", MemoryKind::Semantic, principal("p"));
        let text = String::from_utf8(crate::canonical::canonical_json(&r).unwrap()).unwrap();
        assert!(!text.contains("metadata") && !text.contains("address"));
        // A stored record of an earlier release (no such members) decodes.
        let back: MemoryRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        let mut with = r.clone();
        with.metadata = meta(serde_json::json!({"a": 1}));
        assert_ne!(
            crate::canonical::canonical_json(&with).unwrap(),
            crate::canonical::canonical_json(&r).unwrap(),
            "metadata is covered by the record's digest"
        );
    }

    #[test]
    fn record_metadata_limits_are_enforced_and_named() {
        let mut r = record("r1", MemoryKind::Semantic, principal("p"));
        r.metadata = meta(serde_json::json!({"a": {"b": {"c": [1, -2, null, true, "s"]}}}));
        r.validate().unwrap();
        r.metadata = meta(serde_json::json!({"a": {"b": {"c": {"d": 1}}}}));
        r.validate().unwrap();
        r.metadata = meta(serde_json::json!({"a": {"b": {"c": {"d": {"e": 1}}}}}));
        assert!(
            reasons(&r)[0].contains("deeper than 4"),
            "{:?}",
            reasons(&r)
        );
        r.metadata = meta(serde_json::json!({"score": 0.5}));
        assert!(reasons(&r)[0].contains("integers"));
        r.metadata = meta(serde_json::json!({"n": 9_007_199_254_740_992u64}));
        assert!(reasons(&r)[0].contains("2^53-1"));
        r.metadata = meta(serde_json::json!({"x".repeat(129): 1}));
        assert!(reasons(&r)[0].contains("128 characters"));
        r.metadata = meta(serde_json::json!({"a\u{7}": 1}));
        assert!(reasons(&r)[0].contains("control"));
        r.metadata = meta(serde_json::json!({"big": "x".repeat(MAX_METADATA_BYTES)}));
        assert!(reasons(&r)[0].contains("16384"));
    }

    #[test]
    fn record_address_limits_are_enforced_and_named() {
        let mut r = record("r1", MemoryKind::Semantic, principal("p"));
        let addr = |ns: &[&str], key: &str| {
            Some(MemoryAddress {
                namespace: ns.iter().map(|s| s.to_string()).collect(),
                key: key.into(),
            })
        };
        r.address = addr(&["a", "b c"], "k 1");
        r.validate().unwrap();
        assert_eq!(r.address.as_ref().unwrap().namespace_path(), "a/b c");
        for (bad, why) in [
            (addr(&[], "k"), "segments"),
            (addr(&["a"; 9], "k"), "segments"),
            (addr(&[""], "k"), "segments are"),
            (addr(&["a/b"], "k"), "'/'"),
            (addr(&["a\n"], "k"), "control"),
            (addr(&["a"], ""), "key"),
            (addr(&["a"], &"k".repeat(257)), "256"),
        ] {
            r.address = bad;
            let got = reasons(&r);
            assert!(
                got.len() == 1 && got[0].contains(why),
                "{got:?} lacks {why}"
            );
        }
    }

    #[test]
    fn record_time_is_half_open() {
        let r = record("r1", MemoryKind::Semantic, principal("p"));
        assert!(!r.is_live_at(999));
        assert!(r.is_live_at(1_000));
        assert!(r.is_live_at(9_999));
        assert!(!r.is_live_at(10_000));
    }
}
