//! Per-record facts the funnel reads: claim keys, speaker label and
//! role, whether a line places something in time or states a change, and
//! creation time.

use super::LexicalIndex;
use super::postings::LexDoc;
use crate::scope::DocSet;
use crate::target::DocId;
use crate::text::Role;

impl LexicalIndex {
    /// Eligible records carrying exactly `claim_key`, sorted by record id.
    pub(crate) fn claim_docs(
        &self,
        tenant_id: &str,
        claim_key: &str,
        docs: &DocSet,
    ) -> Vec<String> {
        let mut out: Vec<String> = self
            .backend
            .claims
            .get(&(tenant_id.to_owned(), claim_key.to_owned()))
            .into_iter()
            .flatten()
            .filter(|d| docs.contains(**d))
            .filter_map(|d| self.record_of(*d).map(str::to_owned))
            .collect();
        out.sort();
        out
    }

    /// The live doc of `record_id` here, if any: what the per-doc facts
    /// below are read by. A read that already holds its candidates' docs
    /// (see `fusion::MemorySource`) reads them without this lookup.
    pub(crate) fn doc_of(&self, record_id: &str) -> Option<DocId> {
        self.fence.doc_of(record_id)
    }

    /// Whether the speaker label of `doc` (see `text::speaker_label`)
    /// holds one of `query_terms` (analysed terms, as `text::terms` gives).
    ///
    /// With `person` (see `text::query_person`: whom a question in the first
    /// or second person asks about), a record whose label is a role
    /// (`user:`, `assistant:`) is named when its role is that person, and
    /// never by a query term: a role is not a name.
    pub(crate) fn speaker_named(
        &self,
        doc: DocId,
        query_terms: &[String],
        person: Option<Option<Role>>,
    ) -> bool {
        let Some(d) = self.doc(doc) else {
            return false;
        };
        if let (Some(person), Some(role)) = (person, d.role) {
            return person == Some(role);
        }
        !d.speaker.is_empty()
            && query_terms.iter().any(|t| {
                self.backend
                    .vocab
                    .get(t.as_str())
                    .is_some_and(|tid| d.speaker.binary_search(tid).is_ok())
            })
    }

    /// The role `doc`'s speaker label names (`user:`, `assistant:`), if it
    /// names one.
    pub(crate) fn speaker_role(&self, doc: DocId) -> Option<Role> {
        self.doc(doc).and_then(|d| d.role)
    }

    /// Whether `doc`'s text places something in time
    /// (`text::places_in_time`).
    pub(crate) fn places_in_time(&self, doc: DocId) -> bool {
        self.doc(doc).is_some_and(|d| d.timed)
    }

    /// Whether `doc` states a current value: its text states a change
    /// (`text::states_change`), or it carries a claim key (an eligible
    /// record holding a claim is its line's current value: the values it
    /// replaced are superseded).
    pub(crate) fn states_change(&self, doc: DocId) -> bool {
        self.doc(doc)
            .is_some_and(|d| d.changes || !d.claims.is_empty())
    }

    /// `doc`'s place in time: its creation time, then its publication
    /// order (the order of its subject's timeline).
    pub(crate) fn recorded_order(&self, doc: DocId) -> Option<(u64, u64)> {
        let d = self.doc(doc)?;
        Some((d.created_at_unix_ms, u64::from(doc)))
    }

    /// Whether two docs are lines of one speaker in one subject's
    /// timeline: the same subject, and the same speaker label and role,
    /// or a record with no label (a statement about the subject itself,
    /// as a fact is) on either side.
    pub(crate) fn same_speaker(&self, a: DocId, b: DocId) -> bool {
        let (Some(x), Some(y)) = (self.doc(a), self.doc(b)) else {
            return false;
        };
        x.partition == y.partition
            && (x.speaker.is_empty()
                || y.speaker.is_empty()
                || (x.speaker == y.speaker && x.role == y.role))
    }

    /// Asks for what the features above read of `doc` (its terms and
    /// speaker label, behind its entry) before they are read: a hint only,
    /// nothing read depends on it. Called for many docs in turn, the
    /// entries' misses overlap.
    pub(crate) fn prefetch_doc(&self, doc: DocId) {
        if let Some(d) = self.doc(doc) {
            if let Some(t) = d.terms.first() {
                mosaic_kernels::prefetch(t);
            }
            if let Some(s) = d.speaker.first() {
                mosaic_kernels::prefetch(s);
            }
        }
    }

    fn doc(&self, doc: DocId) -> Option<&LexDoc> {
        self.backend.docs.get(doc as usize).and_then(|x| x.as_ref())
    }

    /// Whether `doc`'s own text (not its turn window) holds one of
    /// `query_terms`.
    pub(crate) fn holds_any(&self, doc: DocId, query_terms: &[String]) -> bool {
        let Some(d) = self.doc(doc) else {
            return false;
        };
        query_terms.iter().any(|t| {
            self.backend
                .vocab
                .get(t.as_str())
                .is_some_and(|tid| d.terms.iter().any(|(x, _)| x == tid))
        })
    }

    /// The creation time of `doc`, if it is indexed.
    pub(crate) fn created_at(&self, doc: DocId) -> Option<u64> {
        self.doc(doc).map(|d| d.created_at_unix_ms)
    }
}
