//! The text guards' comparison, pure over normalised words: equal texts,
//! near-duplicates by token Jaccard with a bound on new words, and prose
//! contradictions by a deterministic statement pattern.

use mosaic_harness::memory_write::ConflictRelation;

/// The words of `text` after normalisation: lower case, every run of
/// characters that are not letters or digits is one separator.
pub fn normalized_words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    word_spans(&lower)
        .into_iter()
        .filter_map(|(from, to)| lower.get(from..to))
        .map(str::to_owned)
        .collect()
}

/// Where the words of a text already in lower case are, as byte ranges:
/// every run of characters that are not letters or digits is one
/// separator. The one definition of a word for [`normalized_words`] and
/// [`StoredText`].
fn word_spans(lower: &str) -> Vec<(usize, usize)> {
    let mut words = Vec::new();
    let mut start = None;
    for (at, c) in lower.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                words.push((from, at));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        words.push((from, lower.len()));
    }
    words
}

/// Token Jaccard similarity of two word lists, in permille (0..=1000).
#[cfg(test)]
fn jaccard_permille(a: &[String], b: &[String]) -> u32 {
    let (a, b) = (distinct(a), distinct(b));
    jaccard_of(
        a.len(),
        b.len(),
        shared(a.iter().copied(), b.iter().copied()),
    )
}

/// How many distinct words of `new` are not in `old`.
#[cfg(test)]
fn new_words(new: &[String], old: &[String]) -> usize {
    let (new, old) = (distinct(new), distinct(old));
    new.len() - shared(new.iter().copied(), old.iter().copied())
}

/// The distinct words of a list, sorted.
fn distinct<S: AsRef<str>>(words: &[S]) -> Vec<&str> {
    let mut out: Vec<&str> = words.iter().map(AsRef::as_ref).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// How many words two sorted distinct lists share.
fn shared<'x, 'y>(
    a: impl IntoIterator<Item = &'x str>,
    b: impl IntoIterator<Item = &'y str>,
) -> usize {
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    let mut n = 0;
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        match x.cmp(y) {
            std::cmp::Ordering::Less => {
                a.next();
            }
            std::cmp::Ordering::Greater => {
                b.next();
            }
            std::cmp::Ordering::Equal => {
                n += 1;
                a.next();
                b.next();
            }
        }
    }
    n
}

/// Jaccard in permille of two sets of `a` and `b` words sharing `inter`.
fn jaccard_of(a: usize, b: usize, inter: usize) -> u32 {
    let union = a + b - inter;
    if union == 0 {
        return 1000;
    }
    u32::try_from(inter * 1000 / union).unwrap_or(1000)
}

/// At most this many distinct words of a proposal may be missing from a
/// stored text for the proposal to be its near-duplicate. A restatement
/// differs in a few words (another date prefix, a lead-in such as "back to
/// the project", an adverb); a text that adds more than that says something
/// the stored one does not, however many words they share. Without this
/// bound the Jaccard ratio alone refused long answers that repeat an
/// earlier answer's advice and add a sentence of their own.
pub const NEAR_DUPLICATE_MAX_NEW_WORDS: usize = 5;

/// A proposal's normalised words, with what every comparison needs of
/// them computed once: a proposal is compared with many stored texts.
pub struct GuardedText<'a> {
    words: &'a [String],
    distinct: Vec<&'a str>,
    statement: Option<Statement<'a>>,
}

impl<'a> GuardedText<'a> {
    pub fn new(words: &'a [String]) -> Self {
        GuardedText {
            words,
            distinct: distinct(words),
            statement: Statement::parse(words),
        }
    }

    /// How the proposal relates to a stored text.
    pub fn relation(&self, old: &StoredText, near_permille: u32) -> Option<ConflictRelation> {
        if self.words.iter().map(String::as_str).eq(old.words()) {
            return Some(ConflictRelation::Duplicate);
        }
        // A contradiction first: "X is owned by A" and "X is owned by B"
        // share most of their words, and are not the same statement.
        if let Some(a) = &self.statement
            && old.statement
            && let words = old.words().collect::<Vec<_>>()
            && let Some(b) = Statement::parse(&words)
            && a.contradicts(&b)
        {
            return Some(ConflictRelation::Contradicts);
        }
        if near_permille >= 1000 {
            return None;
        }
        let inter = shared(
            self.distinct.iter().copied(),
            old.distinct.iter().map(|&i| old.word(i)),
        );
        // At most NEAR_DUPLICATE_MAX_NEW_WORDS distinct words of the
        // proposal missing from the stored text.
        (jaccard_of(self.distinct.len(), old.distinct.len(), inter) >= near_permille
            && self.distinct.len() - inter <= NEAR_DUPLICATE_MAX_NEW_WORDS)
            .then_some(ConflictRelation::Duplicate)
    }
}

/// A stored text's normalised words, with what every comparison needs of
/// them computed once (see [`GuardTexts`](super::GuardTexts)): the text in lower case and
/// where its words are, so reading one allocates no string per word.
pub struct StoredText {
    lower: String,
    /// The words [`normalized_words`] gives, as byte ranges of `lower`.
    words: Vec<(usize, usize)>,
    /// Indexes into `words` of the distinct words, sorted by word.
    distinct: Vec<usize>,
    /// Whether the words parse as a statement (see [`Statement::parse`]):
    /// only then can they contradict the proposal's.
    statement: bool,
}

impl StoredText {
    /// The stored `content`, normalised as [`normalized_words`] does.
    pub fn of(content: &str) -> Self {
        let lower = content.to_lowercase();
        let words = word_spans(&lower);
        let mut text = StoredText {
            lower,
            words,
            distinct: Vec::new(),
            statement: false,
        };
        let mut distinct: Vec<usize> = (0..text.words.len()).collect();
        distinct.sort_unstable_by(|&a, &b| text.word(a).cmp(text.word(b)));
        distinct.dedup_by(|a, b| text.word(*a) == text.word(*b));
        text.statement = Statement::parse(&text.words().collect::<Vec<_>>()).is_some();
        text.distinct = distinct;
        text
    }

    /// Word `i`.
    fn word(&self, i: usize) -> &str {
        self.words
            .get(i)
            .and_then(|&(from, to)| self.lower.get(from..to))
            .unwrap_or_default()
    }

    /// The words, in order.
    pub(super) fn words(&self) -> impl Iterator<Item = &str> {
        (0..self.words.len()).map(|i| self.word(i))
    }
}

/// Whether `text` is a JSON object or array, after an optional `name: `
/// prefix (a speaker's). The embedding of templated text is mostly its
/// template: two items of a key-value store in one JSON envelope, with
/// different keys and values, are at cosine 0.95 and above under MiniLM,
/// so the vector guard leaves such texts to the lexical guard.
pub fn is_structured(text: &str) -> bool {
    let body = text.trim();
    let body = match body.split_once(": ") {
        Some((name, rest))
            if !name.is_empty()
                && name.len() <= 64
                && !name.contains(['{', '[', '"'])
                && rest.trim_start().starts_with(['{', '[']) =>
        {
            rest.trim()
        }
        _ => body,
    };
    body.starts_with(['{', '[']) && serde_json::from_str::<serde::de::IgnoredAny>(body).is_ok()
}

/// Copulas a statement's subject and predicate are split at.
const COPULAS: [&[&str]; 7] = [
    &["is"],
    &["are"],
    &["was"],
    &["were"],
    &["must", "be"],
    &["should", "be"],
    &["will", "be"],
];

/// Predicates that hold one value at a time for a subject: two
/// statements giving different values contradict each other.
const FUNCTIONAL_PREDICATES: [[&str; 2]; 18] = [
    ["owned", "by"],
    ["managed", "by"],
    ["maintained", "by"],
    ["run", "by"],
    ["led", "by"],
    ["operated", "by"],
    ["approved", "by"],
    ["hosted", "at"],
    ["hosted", "on"],
    ["hosted", "in"],
    ["located", "at"],
    ["located", "in"],
    ["based", "in"],
    ["set", "to"],
    ["sent", "to"],
    ["moved", "to"],
    ["scheduled", "for"],
    ["due", "on"],
];

/// `<subject> <copula> [not] <predicate> <object>`, from normalised words.
#[derive(Debug, PartialEq, Eq)]
struct Statement<'a> {
    subject: Vec<&'a str>,
    negated: bool,
    /// A functional predicate (two words) or empty (`X is Y`).
    predicate: Vec<&'a str>,
    object: Vec<&'a str>,
}

impl<'a> Statement<'a> {
    fn parse<S: AsRef<str>>(words: &'a [S]) -> Option<Self> {
        let w: Vec<&str> = words.iter().map(AsRef::as_ref).collect();
        let (at, len) = (0..w.len()).find_map(|i| {
            COPULAS
                .iter()
                .find(|c| w.get(i..i + c.len()) == Some(c))
                .map(|c| (i, c.len()))
        })?;
        let mut subject: Vec<&str> = w.get(..at)?.to_vec();
        if subject
            .first()
            .is_some_and(|f| matches!(*f, "the" | "a" | "an" | "our"))
        {
            subject.remove(0);
        }
        let mut rest: &[&str] = w.get(at + len..)?;
        let negated = rest.first() == Some(&"not");
        if negated {
            rest = rest.get(1..)?;
        }
        let functional = FUNCTIONAL_PREDICATES
            .iter()
            .find(|p| rest.get(..2) == Some(&p[..]));
        let (predicate, object) = match functional {
            Some(p) => (p.to_vec(), rest.get(2..)?.to_vec()),
            None => (Vec::new(), rest.to_vec()),
        };
        (!subject.is_empty() && !object.is_empty()).then_some(Statement {
            subject,
            negated,
            predicate,
            object,
        })
    }

    /// Whether the two cannot both hold: the same subject and predicate
    /// with one negated and the same object, or the same functional
    /// predicate with different objects, both affirmed.
    fn contradicts(&self, other: &Statement<'_>) -> bool {
        if self.subject != other.subject || self.predicate != other.predicate {
            return false;
        }
        if self.negated != other.negated {
            return self.object == other.object;
        }
        !self.negated && !self.predicate.is_empty() && self.object != other.object
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The merge over sorted distinct words counts what the set
    /// operations count, repeated words and all.
    #[test]
    fn jaccard_and_new_words_match_the_set_definitions() {
        use std::collections::BTreeSet;
        let texts = [
            "",
            "a a a",
            "the heron waits by the north jetty",
            "the heron waits by the north jetty at dawn dawn",
            "north north jetty heron",
            "something else entirely, with words 12 and 13",
        ];
        for a in texts {
            for b in texts {
                let (wa, wb) = (normalized_words(a), normalized_words(b));
                let sa: BTreeSet<&str> = wa.iter().map(String::as_str).collect();
                let sb: BTreeSet<&str> = wb.iter().map(String::as_str).collect();
                let union = sa.union(&sb).count();
                let inter = sa.intersection(&sb).count();
                let want = (inter * 1000).checked_div(union).unwrap_or(1000);
                assert_eq!(jaccard_permille(&wa, &wb) as usize, want, "{a:?} {b:?}");
                assert_eq!(
                    new_words(&wa, &wb),
                    sa.difference(&sb).count(),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    /// How text `a` relates to stored text `b` by the text guards.
    fn rel(a: &str, b: &str) -> Option<ConflictRelation> {
        GuardedText::new(&normalized_words(a)).relation(&StoredText::of(b), 700)
    }

    /// A stored text's words, distinct words and statement are those of
    /// its normalised words, whatever the text.
    #[test]
    fn a_stored_text_reads_as_its_normalised_words() {
        for text in [
            "",
            "   ",
            "!!",
            "a",
            "The heron waits by the North jetty, at dawn.",
            "ends on a word",
            "  leading and trailing  ",
            "Ünïcode İstanbul straße ΣΟΦΊΑ 12:30 x-y_z",
            "the deploy key is owned by Alice",
            "a a a b b",
        ] {
            let words = normalized_words(text);
            // The definition both follow, written independently of them.
            let lower = text.to_lowercase();
            let split: Vec<&str> = lower
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect();
            assert_eq!(words, split, "{text:?}");
            let stored = StoredText::of(text);
            assert!(
                stored.words().eq(words.iter().map(String::as_str)),
                "{text:?}"
            );
            let distinct_words = distinct(&words);
            assert!(
                stored
                    .distinct
                    .iter()
                    .map(|&i| stored.word(i))
                    .eq(distinct_words.iter().copied()),
                "{text:?}"
            );
            assert_eq!(
                stored.statement,
                Statement::parse(&words).is_some(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn duplicates_after_normalisation_and_near() {
        let base = "the refund portal moved to http://refunds.evil.example.";
        assert_eq!(
            rel(
                "The Refund portal   moved to http://refunds.evil.example!",
                base
            ),
            Some(ConflictRelation::Duplicate)
        );
        assert_eq!(
            rel(
                "Reminder: the refund portal has moved to http://refunds.evil.example",
                base
            ),
            Some(ConflictRelation::Duplicate)
        );
        assert_eq!(rel("the cafeteria opens at noon", base), None);
    }

    #[test]
    fn a_long_text_that_adds_a_sentence_is_not_a_near_duplicate() {
        let advice = "Caching is where most of the time goes. Cache the dependency downloads \
            keyed by the lock file, and the build output keyed by the lock file plus the \
            toolchain version. Run the slow integration tests only on the main branch and \
            keep the unit tests on every push, so the feedback stays quick for everyone.";
        let old = format!("[30 September, 2024] assistant: Use array jobs for sweeps. {advice}");
        let new = format!(
            "[30 September, 2024] assistant: A June defence means a complete draft by \
             about March to leave time for revisions. {advice}"
        );
        let (a, b) = (normalized_words(&new), normalized_words(&old));
        // Most words are shared (the ratio alone would refuse it) ...
        assert!(jaccard_permille(&a, &b) >= 700);
        // ... but it adds a sentence the stored text does not hold.
        assert!(new_words(&a, &b) > NEAR_DUPLICATE_MAX_NEW_WORDS);
        assert_eq!(rel(&new, &old), None);
        // A restatement with another lead-in is still refused.
        assert_eq!(
            rel(
                "[2 February, 2025] user: Another thing. The CI run takes twenty minutes. \
                 How can I make it quicker?",
                "[2 February, 2025] user: Back to the project. The CI run takes twenty \
                 minutes. How can I make it quicker?"
            ),
            Some(ConflictRelation::Duplicate)
        );
    }

    #[test]
    fn json_documents_are_structured_and_prose_is_not() {
        assert!(is_structured(
            r#"langgraph-store: {"langgraph_store":1,"key":"a","value":{"text":"alpha"}}"#
        ));
        assert!(is_structured(r#" [1, 2, {"a": "b"}] "#));
        assert!(!is_structured("I love painting landscapes on weekends."));
        assert!(!is_structured("note: {braces} in prose are not JSON"));
        assert!(!is_structured("{ not json"));
        assert!(!is_structured(""));
    }

    #[test]
    fn prose_contradictions_by_pattern() {
        assert_eq!(
            rel(
                "billing service is owned by team-mallory.",
                "billing service is owned by team-payments"
            ),
            Some(ConflictRelation::Contradicts)
        );
        assert_eq!(
            rel("The deploy key is not rotated", "the deploy key is rotated"),
            Some(ConflictRelation::Contradicts)
        );
        // Not functional: both may hold.
        assert_eq!(rel("the team is small", "the team is remote"), None);
        // Different subjects.
        assert_eq!(
            rel(
                "search service is owned by team-b",
                "billing service is owned by team-a"
            ),
            None
        );
    }
}
