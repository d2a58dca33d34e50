//! Listing records a page at a time: the filter, the listed state and the
//! page.

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::WriteRequest;
use super::{RecordState, RevocationStage};

/// Most records one [`crate::Store::list_records`] page returns.
pub const MAX_LIST_LIMIT: usize = 1000;

/// Where a listed record is in its lifecycle: a [`RecordState`] while the
/// record row exists, `Erased` once its content is gone (only the identity
/// survives).
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ListedState {
    /// Committed, waiting for index acknowledgements.
    Publishing,
    /// Readable (subject to the read selector).
    Active,
    /// Replaced by a newer generation of its line.
    Superseded,
    /// Contested through review.
    Contested,
    /// Quarantined (derived from a revoked source).
    Quarantined,
    /// Revoked; its content is still stored until the erase step.
    Revoked,
    /// Revoked and erased: identity only, no content anywhere in the store.
    Erased,
}

impl ListedState {
    /// Every state, in declaration order.
    pub const ALL: [ListedState; 7] = [
        ListedState::Publishing,
        ListedState::Active,
        ListedState::Superseded,
        ListedState::Contested,
        ListedState::Quarantined,
        ListedState::Revoked,
        ListedState::Erased,
    ];

    /// The snake_case name (the [`RecordState`] names plus `erased`).
    pub fn as_str(self) -> &'static str {
        match self {
            ListedState::Publishing => "publishing",
            ListedState::Active => "active",
            ListedState::Superseded => "superseded",
            ListedState::Contested => "contested",
            ListedState::Quarantined => "quarantined",
            ListedState::Revoked => "revoked",
            ListedState::Erased => "erased",
        }
    }

    /// Parses [`ListedState::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        ListedState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
    }
}

impl From<RecordState> for ListedState {
    fn from(state: RecordState) -> Self {
        match state {
            RecordState::Publishing => ListedState::Publishing,
            RecordState::Active => ListedState::Active,
            RecordState::Superseded => ListedState::Superseded,
            RecordState::Contested => ListedState::Contested,
            RecordState::Quarantined => ListedState::Quarantined,
            RecordState::Revoked => ListedState::Revoked,
        }
    }
}

/// Which records of one tenant [`crate::Store::list_records`] returns.
/// Every filter is a conjunction; an empty list or `None` means "any".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordFilter {
    /// The tenant listed (the only tenant whose rows can appear).
    pub tenant_id: String,
    /// Exactly this subject (all of its fields), if set.
    pub subject: Option<mosaic_harness::MemorySubject>,
    /// Only these kinds.
    pub kinds: Vec<mosaic_harness::MemoryKind>,
    /// Only these states.
    pub states: Vec<ListedState>,
    /// Only records proposed by this authenticated principal.
    pub proposer_principal_id: Option<String>,
    /// Only records whose id sorts strictly after this one (byte order):
    /// the previous page's [`RecordPage::next_after`].
    pub after_record_id: Option<String>,
    /// Page size, `1..=MAX_LIST_LIMIT`.
    pub limit: usize,
    /// Whether to return content. Even when set, content is returned only
    /// for records that are not revoked: never for an erased record, and
    /// not for one whose erasure is under way.
    pub include_content: bool,
    /// Only records one principal may read, if set: a walk for a principal
    /// never sees another's rows, so nothing it answers (a count, a page
    /// cursor, how long it took) depends on them.
    pub visible_to: Option<RecordVisibility>,
}

/// The subjects a principal may read under its grant: its own, its own in
/// a granted workspace, a granted workspace's and its procedures', and a
/// granted run's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordVisibility {
    /// The reading principal.
    pub principal_id: String,
    /// The workspaces its grant names.
    pub workspace_ids: Vec<String>,
    /// The runs its grant names.
    pub run_ids: Vec<String>,
}

impl RecordVisibility {
    /// Whether the principal may read memories about `subject`: the one
    /// rule [`RecordFilter::visible_to`]'s walk follows in SQL (a
    /// conformance check holds the two to each other) and the service
    /// applies to every record it answers.
    pub fn admits(&self, subject: &mosaic_harness::MemorySubject) -> bool {
        subject_visible_to(
            &self.principal_id,
            &self.workspace_ids,
            &self.run_ids,
            subject,
        )
    }
}

/// [`RecordVisibility::admits`] for a principal whose grant names
/// `workspace_ids` and `run_ids`, without building the visibility.
pub fn subject_visible_to(
    principal_id: &str,
    workspace_ids: &[String],
    run_ids: &[String],
    subject: &mosaic_harness::MemorySubject,
) -> bool {
    use mosaic_harness::MemorySubject;
    let workspace_ok = |w: &str| workspace_ids.iter().any(|g| g == w);
    match subject {
        MemorySubject::Principal { principal_id: p } => p == principal_id,
        MemorySubject::PrincipalInWorkspace {
            workspace_id,
            principal_id: p,
        } => p == principal_id && workspace_ok(workspace_id),
        MemorySubject::Workspace { workspace_id }
        | MemorySubject::Procedure { workspace_id, .. } => workspace_ok(workspace_id),
        MemorySubject::Run { run_id } => run_ids.iter().any(|r| r == run_id),
    }
}

impl RecordFilter {
    /// Every record of `tenant_id`, first page of `limit`, without content.
    pub fn tenant(tenant_id: &str, limit: usize) -> Self {
        RecordFilter {
            tenant_id: tenant_id.to_owned(),
            subject: None,
            kinds: Vec::new(),
            states: Vec::new(),
            proposer_principal_id: None,
            after_record_id: None,
            limit,
            include_content: false,
            visible_to: None,
        }
    }

    /// Checks the page size.
    pub fn validate(&self) -> Result<(), crate::StoreError> {
        if self.limit == 0 || self.limit > MAX_LIST_LIMIT {
            return Err(crate::StoreError::InvalidArgument(format!(
                "list limit {} (1..={MAX_LIST_LIMIT} allowed)",
                self.limit
            )));
        }
        if self.tenant_id.is_empty() {
            return Err(crate::StoreError::InvalidArgument(
                "list needs a tenant".into(),
            ));
        }
        Ok(())
    }
}

/// One record's identity and lifecycle as listed. Kept for every accepted
/// record, including erased ones, so a listing is the store's own account
/// of what exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedRecord {
    /// Identity.
    pub record_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Kind.
    pub kind: mosaic_harness::MemoryKind,
    /// Subject.
    pub subject: mosaic_harness::MemorySubject,
    /// The authenticated principal whose write created the record
    /// ([`WriteRequest::principal_id`]).
    pub proposer_principal_id: String,
    /// The proposal that created it.
    pub proposal_id: String,
    /// Creation instant.
    pub created_at_unix_ms: u64,
    /// Lifecycle.
    pub state: ListedState,
    /// Revocation stage, for a revoked or erased record.
    pub revocation_stage: Option<RevocationStage>,
    /// Line identity and generation (`None` once erased).
    pub line: Option<(String, u64)>,
    /// Content, only when asked for and the record is not revoked or erased.
    pub content: Option<String>,
}

/// One page of [`crate::Store::list_records`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordPage {
    /// Records sorted by record id (byte order).
    pub records: Vec<ListedRecord>,
    /// When more records match: the id to pass as
    /// [`RecordFilter::after_record_id`] for the next page.
    pub next_after: Option<String>,
}
