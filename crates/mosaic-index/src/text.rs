//! Text analysis shared by the lexical index and the hashing embedder:
//! Unicode-aware lowercase word splitting, the common English stopword list,
//! the Porter stemmer (lexical terms) and a light suffix-stripping stemmer
//! (the hashing embedder's features). Deterministic and allocation-light.
//!
//! Useful for: keyword recall over short conversational records.
//! Not useful for: languages that do not separate words with spaces (they
//! fall back to whole runs of letters), or linguistic precision.

/// The analyzer release; part of every feature release and cache key.
pub const ANALYZER_RELEASE: &str = "analyzer-v2-porter";

// The common English function words (the usual IR list), plus the forms
// contractions take once `words` drops their apostrophe (`don't` -> `dont`).
// Sorted, for binary search.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "arent",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "cant",
    "could",
    "couldnt",
    "did",
    "didnt",
    "do",
    "does",
    "doesnt",
    "doing",
    "dont",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadnt",
    "has",
    "hasnt",
    "have",
    "havent",
    "having",
    "he",
    "hed",
    "her",
    "here",
    "hers",
    "herself",
    "hes",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "id",
    "if",
    "im",
    "in",
    "into",
    "is",
    "isnt",
    "it",
    "its",
    "itself",
    "ive",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "shes",
    "should",
    "shouldnt",
    "so",
    "some",
    "such",
    "than",
    "that",
    "thats",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "theres",
    "these",
    "they",
    "theyre",
    "theyve",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "us",
    "very",
    "was",
    "wasnt",
    "we",
    "were",
    "werent",
    "weve",
    "what",
    "whats",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "wont",
    "would",
    "wouldnt",
    "you",
    "youd",
    "youll",
    "your",
    "youre",
    "yours",
    "yourself",
    "yourselves",
    "youve",
];

/// True for a word the lexical index does not index.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// Lowercased runs of letters and digits (apostrophes inside a word are
/// dropped, so `Caroline's` gives `carolines` before stemming).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            current.extend(ch.to_lowercase());
        } else if (ch == '\'' || ch == '\u{2019}') && !current.is_empty() {
            // possessive or contraction: keep the word going
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A light English stemmer: strips common inflections so `hiking`, `hiked`
/// and `hikes` meet at `hik`. Words shorter than four letters are kept.
pub fn stem(word: &str) -> String {
    let w = word;
    if w.len() < 4 || !w.is_ascii() {
        return w.to_owned();
    }
    let strip = |suffix: &str, replacement: &str, min_stem: usize| -> Option<String> {
        w.strip_suffix(suffix)
            .filter(|stem| stem.len() >= min_stem)
            .map(|stem| format!("{stem}{replacement}"))
    };
    strip("ies", "y", 2)
        .or_else(|| strip("sses", "ss", 2))
        .or_else(|| strip("ness", "", 3))
        .or_else(|| strip("ments", "", 3))
        .or_else(|| strip("ment", "", 3))
        .or_else(|| strip("ings", "", 3))
        .or_else(|| strip("ing", "", 3))
        .or_else(|| strip("ied", "y", 2))
        .or_else(|| strip("ed", "", 3))
        .or_else(|| strip("ly", "", 3))
        .or_else(|| {
            strip("es", "", 3)
                .filter(|_| w.ends_with("ches") || w.ends_with("shes") || w.ends_with("xes"))
        })
        .or_else(|| {
            if w.ends_with("ss") || w.ends_with("us") || w.ends_with("is") {
                None
            } else {
                strip("s", "", 3)
            }
        })
        .map(|s| {
            s.strip_suffix('e')
                .filter(|s| s.len() >= 3)
                .map(str::to_owned)
                .unwrap_or(s)
        })
        .unwrap_or_else(|| {
            w.strip_suffix('e')
                .filter(|s| s.len() >= 3)
                .map(str::to_owned)
                .unwrap_or_else(|| w.to_owned())
        })
}

/// Index terms of `text`: words, stopwords removed, Porter-stemmed.
pub fn terms(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .map(|w| porter_stem(&w))
        .collect()
}

/// The speaker label of a transcript line: the one to three words before a
/// colon at its start (`Caroline: ...`), after an optional bracketed prefix
/// such as a date (`[1:56 pm on 8 May, 2023] Caroline: ...`). Empty when
/// the text has none. The funnel prefers the lines of a speaker a query
/// names.
pub fn speaker_label(text: &str) -> &str {
    label_and_body(text).0
}

/// What a transcript line says: the text after its bracketed prefix and
/// speaker label (see [`speaker_label`]); the whole text when it has
/// neither.
pub fn line_body(text: &str) -> &str {
    label_and_body(text).1
}

fn label_and_body(text: &str) -> (&str, &str) {
    let mut rest = text;
    if let Some(after) = rest.strip_prefix('[')
        && let Some(close) = after.find(']').filter(|c| *c < 80)
    {
        rest = after[close + 1..].trim_start();
    }
    let Some(colon) = rest.find(':').filter(|c| *c > 0 && *c <= 40) else {
        return ("", rest);
    };
    let name = &rest[..colon];
    let words = name.split_whitespace().count();
    let plain = name
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '.' | '\''));
    let starts = name.chars().next().is_some_and(char::is_alphanumeric);
    let spaced = rest[colon + 1..]
        .chars()
        .next()
        .is_none_or(char::is_whitespace);
    if (1..=3).contains(&words) && plain && starts && spaced {
        (name, rest[colon + 1..].trim_start())
    } else {
        ("", rest)
    }
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn is_year(w: &str) -> bool {
    w.len() == 4
        && (w.starts_with("19") || w.starts_with("20"))
        && w.bytes().all(|b| b.is_ascii_digit())
}

/// Whether a question asks when something happened or for how long:
/// it starts with `when`, or holds `how long`, `how many days` (weeks,
/// months, years), `what year` (month, date, day, time) or `which year`
/// (month, day).
pub fn asks_when(text: &str) -> bool {
    let words = lower_words(text);
    const UNITS: [&str; 8] = [
        "day", "days", "week", "weeks", "month", "months", "year", "years",
    ];
    words.first().is_some_and(|w| w == "when")
        || words.windows(2).any(|p| {
            (p[0] == "how" && p[1] == "long")
                || ((p[0] == "what" || p[0] == "which")
                    && matches!(p[1].as_str(), "year" | "month" | "date" | "day" | "time"))
        })
        || words
            .windows(3)
            .any(|p| p[0] == "how" && p[1] == "many" && UNITS.contains(&p[2].as_str()))
}

/// Whether a line places something in time relative to when it was said
/// or on a date of its own: `yesterday`, `tomorrow`, `tonight`, `ago`, a
/// weekday, a month, a year, `last`/`next`/`this`/`past` followed by a unit
/// of time (`last week`, `this morning`), or a count of units (`for 3
/// years`, `two weeks`). Only the line's body counts (see [`line_body`]):
/// a dated prefix is on every line.
pub fn places_in_time(text: &str) -> bool {
    let words = lower_words(line_body(text));
    const SINGLE: [&str; 11] = [
        "yesterday",
        "tomorrow",
        "tonight",
        "ago",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    const UNITS: [&str; 20] = [
        "day",
        "days",
        "week",
        "weeks",
        "weekend",
        "weekends",
        "month",
        "months",
        "year",
        "years",
        "night",
        "morning",
        "afternoon",
        "evening",
        "summer",
        "winter",
        "spring",
        "fall",
        "autumn",
        "semester",
    ];
    const COUNTS: [&str; 13] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "few",
        "couple", "several",
    ];
    // "May" is also a verb: it counts beside a number ("May 5", "5 May").
    let month = |i: usize, w: &str| {
        MONTHS.contains(&w)
            && (w != "may"
                || [i.wrapping_sub(1), i + 1]
                    .iter()
                    .filter_map(|&j| words.get(j))
                    .any(|n| n.bytes().all(|b| b.is_ascii_digit())))
    };
    words
        .iter()
        .enumerate()
        .any(|(i, w)| SINGLE.contains(&w.as_str()) || month(i, w) || is_year(w))
        || words.windows(2).any(|p| {
            let unit = UNITS.contains(&p[1].as_str());
            unit && (matches!(
                p[0].as_str(),
                "last" | "next" | "this" | "past" | "coming" | "previous"
            ) || COUNTS.contains(&p[0].as_str())
                || p[0].bytes().all(|b| b.is_ascii_digit()))
        })
}

/// A conversational role, as opposed to a person's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The person the assistant serves (`user:`, `human:`).
    User,
    /// The assistant (`assistant:`, `ai:`, `bot:`).
    Assistant,
}

/// The role a speaker label names, if it is a role rather than a name:
/// `user`/`human` or `assistant`/`ai`/`bot` (any case).
pub fn speaker_role(label: &str) -> Option<Role> {
    match label.trim().to_ascii_lowercase().as_str() {
        "user" | "human" => Some(Role::User),
        "assistant" | "ai" | "bot" => Some(Role::Assistant),
        _ => None,
    }
}

/// Whom a question asks about when the speakers are roles: a question in
/// the first person (`I`, `my`, `me`, `we`, `our`, ...) asks about what the
/// user said; one in the second person only (`you`, `your`) about what the
/// assistant said; otherwise nobody in particular.
pub fn query_person(text: &str) -> Option<Role> {
    let words: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('\'', ""))
        .collect();
    let has = |set: &[&str]| words.iter().any(|w| set.contains(&w.as_str()));
    if has(&[
        "i", "im", "ive", "id", "ill", "me", "my", "mine", "myself", "we", "our", "ours", "us",
        "weve", "were",
    ]) {
        Some(Role::User)
    } else if has(&["you", "your", "yours", "youve", "youre", "yourself"]) {
        Some(Role::Assistant)
    } else {
        None
    }
}

/// Whether a question asks for the current state of something ("where do
/// we deploy now?", "what is my current budget?"): it holds `now`,
/// `currently`, `current`, `latest`, `nowadays`, `presently`, `anymore`,
/// `these days` or `at the moment`, and names no time of its own (a year or
/// a month: "what was she currently reading in July 2023?" asks about July
/// 2023, not about now).
pub fn asks_current_state(text: &str) -> bool {
    let words = lower_words(text);
    let dated = words
        .iter()
        .any(|w| MONTHS.contains(&w.as_str()) || is_year(w));
    if dated {
        return false;
    }
    let single = [
        "now",
        "currently",
        "current",
        "latest",
        "nowadays",
        "presently",
        "anymore",
    ];
    words.iter().any(|w| single.contains(&w.as_str()))
        || words.windows(2).any(|p| p[0] == "these" && p[1] == "days")
        || words
            .windows(3)
            .any(|p| p[0] == "at" && p[1] == "the" && p[2] == "moment")
}

/// Whether a line states that something changed (a value replaced by
/// another): "I moved to Porto", "I drink coffee instead", "we renamed the
/// cat", "I don't eat meat anymore", "I work from home now". Read on the
/// line's body (after any speaker label); words, not meanings, so it is a
/// cue, not a proof: it is one of the conditions of an update pair
/// (`FunnelConfig::update_head`), never evidence of relevance by itself.
pub fn states_change(text: &str) -> bool {
    let words = lower_words(line_body(text));
    const SINGLE: [&str; 13] = [
        "now",
        "nowadays",
        "currently",
        "anymore",
        "instead",
        "moved",
        "relocated",
        "switched",
        "changed",
        "replaced",
        "renamed",
        "quit",
        "became",
    ];
    words.iter().any(|w| SINGLE.contains(&w.as_str()))
        || words
            .windows(2)
            .any(|p| (p[0] == "no" && p[1] == "longer") || (p[0] == "these" && p[1] == "days"))
}

/// Whether a question asks about the past rather than how things stand:
/// it asks when (`asks_when`), is in the past tense ("where did she
/// live", "what was the budget"), or asks for an earlier value ("before",
/// "previously", "originally", "first", "used to"). Such a question wants
/// the older of two values as much as the newer one.
pub fn asks_about_the_past(text: &str) -> bool {
    if asks_when(text) {
        return true;
    }
    const PAST: [&str; 18] = [
        "did",
        "didn",
        "was",
        "wasn",
        "were",
        "weren",
        "had",
        "hadn",
        "before",
        "previously",
        "previous",
        "originally",
        "formerly",
        "former",
        "earlier",
        "first",
        "ago",
        "used",
    ];
    lower_words(text).iter().any(|w| PAST.contains(&w.as_str()))
}

/// The Porter (1980) stemmer, with the published revisions (`bli` ->
/// `ble`, `logi` -> `log`). Words that are not lowercase ASCII letters, or
/// are shorter than three letters, are returned unchanged.
pub fn porter_stem(word: &str) -> String {
    if word.len() < 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_owned();
    }
    let mut w = word.as_bytes().to_vec();
    step_1ab(&mut w);
    step_1c(&mut w);
    replace_first(&mut w, STEP_2, 0);
    replace_first(&mut w, STEP_3, 0);
    step_4(&mut w);
    step_5(&mut w);
    String::from_utf8(w).unwrap_or_else(|_| word.to_owned())
}

fn is_consonant(w: &[u8], i: usize) -> bool {
    match w[i] {
        b'a' | b'e' | b'i' | b'o' | b'u' => false,
        b'y' => i == 0 || !is_consonant(w, i - 1),
        _ => true,
    }
}

/// Porter's m: the number of vowel-consonant sequences in `w[..len]`.
fn measure(w: &[u8], len: usize) -> usize {
    let mut m = 0;
    let mut i = 0;
    while i < len && is_consonant(w, i) {
        i += 1;
    }
    loop {
        while i < len && !is_consonant(w, i) {
            i += 1;
        }
        if i >= len {
            return m;
        }
        while i < len && is_consonant(w, i) {
            i += 1;
        }
        m += 1;
    }
}

fn has_vowel(w: &[u8], len: usize) -> bool {
    (0..len).any(|i| !is_consonant(w, i))
}

fn double_consonant(w: &[u8], len: usize) -> bool {
    len >= 2 && w[len - 1] == w[len - 2] && is_consonant(w, len - 1)
}

/// Consonant-vowel-consonant ending, the last not `w`, `x` or `y`.
fn cvc(w: &[u8], len: usize) -> bool {
    len >= 3
        && is_consonant(w, len - 3)
        && !is_consonant(w, len - 2)
        && is_consonant(w, len - 1)
        && !matches!(w[len - 1], b'w' | b'x' | b'y')
}

fn set_suffix(w: &mut Vec<u8>, suffix_len: usize, replacement: &str) {
    w.truncate(w.len() - suffix_len);
    w.extend_from_slice(replacement.as_bytes());
}

fn step_1ab(w: &mut Vec<u8>) {
    if w.ends_with(b"sses") || w.ends_with(b"ies") {
        w.truncate(w.len() - 2);
    } else if !w.ends_with(b"ss") && w.ends_with(b"s") {
        w.truncate(w.len() - 1);
    }
    if w.ends_with(b"eed") {
        if measure(w, w.len() - 3) > 0 {
            w.truncate(w.len() - 1);
        }
        return;
    }
    let cut = if w.ends_with(b"ed") && has_vowel(w, w.len() - 2) {
        2
    } else if w.ends_with(b"ing") && has_vowel(w, w.len() - 3) {
        3
    } else {
        return;
    };
    w.truncate(w.len() - cut);
    let n = w.len();
    if w.ends_with(b"at") || w.ends_with(b"bl") || w.ends_with(b"iz") {
        w.push(b'e');
    } else if double_consonant(w, n) && !matches!(w[n - 1], b'l' | b's' | b'z') {
        w.truncate(n - 1);
    } else if measure(w, n) == 1 && cvc(w, n) {
        w.push(b'e');
    }
}

fn step_1c(w: &mut [u8]) {
    let n = w.len();
    if w.ends_with(b"y") && has_vowel(w, n - 1) {
        w[n - 1] = b'i';
    }
}

// Longer suffixes come before the shorter suffixes they end with, so the
// first match is the longest.
const STEP_2: &[(&str, &str)] = &[
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
];

const STEP_3: &[(&str, &str)] = &[
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
];

/// Replaces the first (longest) matching suffix when the rest has a
/// measure above `min_measure`.
fn replace_first(w: &mut Vec<u8>, rules: &[(&str, &str)], min_measure: usize) {
    for (suffix, replacement) in rules {
        if w.ends_with(suffix.as_bytes()) {
            if measure(w, w.len() - suffix.len()) > min_measure {
                set_suffix(w, suffix.len(), replacement);
            }
            return;
        }
    }
}

const STEP_4: &[&str] = &[
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
];

fn step_4(w: &mut Vec<u8>) {
    for suffix in STEP_4 {
        if !w.ends_with(suffix.as_bytes()) {
            continue;
        }
        let stem = w.len() - suffix.len();
        if *suffix == "ion" && !(stem > 0 && matches!(w[stem - 1], b's' | b't')) {
            continue;
        }
        if measure(w, stem) > 1 {
            w.truncate(stem);
        }
        return;
    }
}

fn step_5(w: &mut Vec<u8>) {
    let n = w.len();
    if w.ends_with(b"e") {
        let m = measure(w, n - 1);
        if m > 1 || (m == 1 && !cvc(w, n - 1)) {
            w.truncate(n - 1);
        }
    }
    let n = w.len();
    if w.ends_with(b"l") && double_consonant(w, n) && measure(w, n) > 1 {
        w.truncate(n - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speaker_labels_are_found_after_a_bracketed_prefix() {
        let line = "[1:56 pm on 8 May, 2023] Caroline: I went to a group: it helped.";
        assert_eq!(speaker_label(line), "Caroline");
        assert_eq!(speaker_label("Jon Smith Jr: hi"), "Jon Smith Jr");
        assert_eq!(speaker_label("User:"), "User");
        // Not a label: a long clause or a sentence before a colon, a URL,
        // punctuation, no colon, an unclosed bracket.
        assert_eq!(speaker_label("We agreed on three things: a, b and c"), "");
        assert_eq!(speaker_label("Note, then: this"), "");
        assert_eq!(speaker_label("see http://example.org"), "");
        assert_eq!(speaker_label("http://example.org"), "");
        assert_eq!(speaker_label("[note] plain text"), "");
        assert_eq!(speaker_label("[unclosed Caroline: hi"), "");
        assert_eq!(speaker_label(": hi"), "");
        assert_eq!(speaker_label(""), "");
    }

    #[test]
    fn roles_are_not_names_and_pronouns_choose_a_role() {
        assert_eq!(speaker_role("user"), Some(Role::User));
        assert_eq!(speaker_role("Assistant"), Some(Role::Assistant));
        assert_eq!(speaker_role("Caroline"), None);
        assert_eq!(speaker_role(""), None);
        assert_eq!(
            query_person("What did I say about emojis?"),
            Some(Role::User)
        );
        assert_eq!(
            query_person("How do I like your answers?"),
            Some(Role::User)
        );
        assert_eq!(
            query_person("Which crate did you suggest?"),
            Some(Role::Assistant)
        );
        assert_eq!(query_person("When did Caroline go hiking?"), None);
        // Contractions and case.
        assert_eq!(
            query_person("What's the thing I'm using?"),
            Some(Role::User)
        );
        assert_eq!(query_person("What's YOUR advice?"), Some(Role::Assistant));
    }

    #[test]
    fn current_state_questions_are_recognised() {
        assert!(asks_current_state("Where is the shop hosted now?"));
        assert!(asks_current_state("What is our CURRENT budget?"));
        assert!(asks_current_state("How do I get to work these days?"));
        assert!(asks_current_state("Where does the CI run at the moment?"));
        assert!(!asks_current_state("Where was the shop hosted first?"));
        // A question that names its own time asks about that time.
        assert!(!asks_current_state(
            "What was she currently reading in July 2023?"
        ));
        assert!(!asks_current_state(
            "What game is he currently playing in 2022?"
        ));
        assert!(!asks_current_state("What did I know about the momentum?"));
        assert!(!asks_current_state("Did we talk these over some days ago?"));
    }

    #[test]
    fn lines_stating_a_change_are_recognised() {
        for line in [
            "user: I moved to Porto.",
            "[1 May] Ana: We renamed the cat Milo.",
            "user: I drink black coffee instead.",
            "user: I don't eat meat anymore.",
            "user: I no longer work at the bakery.",
            "user: I work as a nurse now.",
            "user: I quit the bakery last week.",
        ] {
            assert!(states_change(line), "{line}");
        }
        for line in [
            "user: I live in Lisbon.",
            "user: Green tea is my favourite drink.",
            // The label is not the line: a speaker called Now says nothing.
            "Now: I live in Lisbon.",
            "user: How long have you known?",
        ] {
            assert!(!states_change(line), "{line}");
        }
    }

    #[test]
    fn questions_about_the_past_are_recognised() {
        for q in [
            "Where did the user live before?",
            "What was my budget?",
            "Which city did I live in first?",
            "When did I move?",
            "What job did I have previously?",
            "What did I use to drink?",
        ] {
            assert!(asks_about_the_past(q), "{q}");
        }
        for q in [
            "Where does the user live?",
            "What is my budget?",
            "What's the cat called now?",
            "Which job do I have?",
        ] {
            assert!(!asks_about_the_past(q), "{q}");
        }
    }

    #[test]
    fn questions_asking_when_are_recognised() {
        for q in [
            "When did Caroline go to the support group?",
            "when was the migration finished",
            "How long has Nate had his turtles?",
            "What year did I switch to Rust?",
            "In which month did we move the shop?",
            "How many weeks ago did the outage happen?",
        ] {
            assert!(asks_when(q), "{q}");
        }
        for q in [
            "What did Caroline paint?",
            "Where do we deploy now?",
            "How many turtles does Nate have?",
            "Which tools do I use for tracking time?",
            "Did we say when to meet?",
        ] {
            assert!(!asks_when(q), "{q}");
        }
    }

    #[test]
    fn lines_placing_something_in_time_are_recognised_by_their_body() {
        for line in [
            "[8 May, 2023] Caroline: I went to the support group yesterday.",
            "[8 May, 2023] Caroline: We had a blast last year at the Pride fest.",
            "[8 May, 2023] Nate: I've had them for 3 years now.",
            "[8 May, 2023] Jon: A few weeks ago I started a studio.",
            "Joanna: I'll come over tomorrow if that's fine.",
            "user: The launch is planned for March.",
            "user: We shipped it on May 5.",
            "assistant: The release went out in 2021.",
            "Melanie: See you on Saturday!",
            "John: I started this morning.",
        ] {
            assert!(places_in_time(line), "{line}");
        }
        for line in [
            // The dated prefix and the speaker are not the line's body.
            "[1:50 pm on 17 August, 2023] Caroline: Thanks, that means a lot!",
            "[8 May, 2023] Tuesday: I love painting.",
            "Melanie: You may want to try pottery.",
            "user: What a day it has been.",
            "assistant: Use a weekly backup with 30 copies.",
        ] {
            assert!(!places_in_time(line), "{line}");
        }
        assert_eq!(line_body("[8 May, 2023] Nate: Hi there"), "Hi there");
        assert_eq!(line_body("no label here"), "no label here");
    }

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn inflections_meet() {
        assert_eq!(stem("hiking"), stem("hiked"));
        assert_eq!(stem("hikes"), stem("hike"));
        assert_eq!(stem("parties"), stem("party"));
        assert_eq!(stem("painting"), stem("paintings"));
        assert_eq!(stem("bus"), "bus");
    }

    #[test]
    fn terms_drop_stopwords_and_punctuation() {
        assert_eq!(
            terms("What did Caroline's mum paint?"),
            vec!["carolin", "mum", "paint"]
        );
        assert_eq!(terms("I don't think so"), vec!["think"]);
    }

    #[test]
    fn porter_matches_the_published_examples() {
        for (word, expected) in [
            ("caresses", "caress"),
            ("ponies", "poni"),
            ("cats", "cat"),
            ("feed", "feed"),
            ("agreed", "agre"),
            ("plastered", "plaster"),
            ("motoring", "motor"),
            ("sing", "sing"),
            ("conflated", "conflat"),
            ("troubled", "troubl"),
            ("sized", "size"),
            ("hopping", "hop"),
            ("falling", "fall"),
            ("filing", "file"),
            ("happy", "happi"),
            ("relational", "relat"),
            ("conditional", "condit"),
            ("rational", "ration"),
            ("digitizer", "digit"),
            ("generalization", "gener"),
            ("triplicate", "triplic"),
            ("hopeful", "hope"),
            ("goodness", "good"),
            ("revival", "reviv"),
            ("adoption", "adopt"),
            ("replacement", "replac"),
            ("probate", "probat"),
            ("controll", "control"),
            ("roll", "roll"),
        ] {
            assert_eq!(porter_stem(word), expected, "{word}");
        }
    }

    #[test]
    fn porter_joins_inflections_and_leaves_other_scripts() {
        assert_eq!(porter_stem("hiking"), porter_stem("hikes"));
        assert_eq!(porter_stem("hiked"), "hike");
        assert_eq!(porter_stem("adopting"), porter_stem("adoption"));
        assert_eq!(porter_stem("caroline"), porter_stem("carolines"));
        assert_eq!(porter_stem("grüße"), "grüße");
        assert_eq!(porter_stem("2023"), "2023");
    }
}
