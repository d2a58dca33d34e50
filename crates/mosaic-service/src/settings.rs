//! A tenant's server-side settings (how it settles claim updates, its
//! write guards) and its policy with the instant it came into force: the
//! types the service reads from and writes to the store's tenant settings
//! (`mosaic_store::directory`, see `service/directory.rs`).

use mosaic_harness::memory_write::MemoryWritePolicy;

/// What happens when a proposal gives a new value for a structured claim
/// that a live record of the same subject, written by the same principal,
/// holds.
#[derive(
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ClaimUpdates {
    /// The newer observation (a claim valid from no earlier than the
    /// stored one) supersedes the stored record, which stays as history.
    #[default]
    NewerWins,
    /// Every contradiction goes to review.
    Review,
}

impl ClaimUpdates {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimUpdates::NewerWins => "newer_wins",
            ClaimUpdates::Review => "review",
        }
    }
}

/// What a tenant's write guards refuse (server-side options, not part of
/// the policy digest: they decide which observations and refusals the
/// server makes before the gate, which checks every observation).
#[derive(
    serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct WriteGuards {
    /// A live record of the same subject and kind whose words overlap a
    /// proposal's by at least this token Jaccard similarity (permille,
    /// `1..=1000`; 1000 = only identical after normalisation) makes the
    /// proposal a duplicate.
    #[serde(default = "default_near_duplicate")]
    pub near_duplicate_permille: u32,
    /// A live record of the same subject and kind whose stored embedding
    /// has at least this cosine similarity with the proposal's (permille,
    /// `1..=1000`; 1000 turns the vector guard off: identical texts are
    /// the lexical guard's) makes the proposal a duplicate.
    #[serde(default = "default_near_duplicate_cosine")]
    pub near_duplicate_cosine_permille: u32,
    /// Whether the vector guard also compares a principal's own episodic
    /// memories (its conversation turns, run notes). Off by default: an
    /// episodic record says what happened when, so a rewording said later
    /// is another event, and refusing it would cut the record of it; the
    /// lexical guard still refuses copies. Facts, procedures, working
    /// state and anything shared (workspace subjects) always get both.
    #[serde(default)]
    pub vector_guard_private_episodic: bool,
    /// Whether a prose statement contradicting a live record by a
    /// deterministic pattern is sent to review.
    #[serde(default = "default_true")]
    pub prose_contradictions: bool,
    /// Which evidence may create shared (workspace) semantic memory.
    #[serde(default)]
    pub shared_semantic_evidence: SharedSemanticEvidence,
}

/// The default near-duplicate threshold: 0.7 token Jaccard (measured on
/// LoCoMo's turns, see BENCHMARKS.md).
pub const DEFAULT_NEAR_DUPLICATE_PERMILLE: u32 = 700;

fn default_near_duplicate() -> u32 {
    DEFAULT_NEAR_DUPLICATE_PERMILLE
}

/// The default vector near-duplicate threshold: cosine 0.9. The embedder
/// in force by default, all-MiniLM-L6-v2, is trained contrastively so that
/// a sentence and its rewording land close together: restatements of one
/// statement score about 0.9 and above, while sentences of one topic that
/// say different things (another activity, another fact about the same
/// thing) score well below, typically 0.4 to 0.8. 0.9 refuses rewordings
/// and leaves related statements alone; it is argued from the model, not
/// tuned on LoCoMo (whose false refusals at this threshold are measured in
/// BENCHMARKS.md). Cosine cannot tell a paraphrase from a changed value
/// ("due on Friday" / "due on Monday" score about 0.9): the lexical
/// guard's contradiction patterns run first and name those.
pub const DEFAULT_NEAR_DUPLICATE_COSINE_PERMILLE: u32 = 900;

fn default_near_duplicate_cosine() -> u32 {
    DEFAULT_NEAR_DUPLICATE_COSINE_PERMILLE
}

fn default_true() -> bool {
    true
}

impl Default for WriteGuards {
    fn default() -> Self {
        WriteGuards {
            near_duplicate_permille: DEFAULT_NEAR_DUPLICATE_PERMILLE,
            near_duplicate_cosine_permille: DEFAULT_NEAR_DUPLICATE_COSINE_PERMILLE,
            vector_guard_private_episodic: false,
            prose_contradictions: true,
            shared_semantic_evidence: SharedSemanticEvidence::default(),
        }
    }
}

/// Which evidence may create shared semantic memory.
#[derive(
    serde::Serialize,
    serde::Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SharedSemanticEvidence {
    /// A supporting judgment signed by a registered verifier; a principal
    /// quoting itself is not enough.
    #[default]
    Verifier,
    /// Any evidence the gate accepts, a principal's own quotation included.
    Any,
}

/// A tenant with its policy in force (the store's `current_policy`) and
/// the instant it came into force (its settings row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantRow {
    /// The current policy document.
    pub policy: MemoryWritePolicy,
    /// When it came into force.
    pub policy_valid_from_ms: u64,
}
