//! Text analysis shared by the lexical index and the hashing embedder:
//! Unicode-aware lowercase word splitting, a small English stopword list and
//! a light suffix-stripping stemmer. Deterministic and allocation-light.
//!
//! Useful for: keyword recall over short conversational records.
//! Not useful for: languages that do not separate words with spaces (they
//! fall back to whole runs of letters), or linguistic precision.

/// The analyzer release; part of every feature release and cache key.
pub const ANALYZER_RELEASE: &str = "analyzer-v1";

const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "for", "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "of", "on", "or",
    "our", "ours", "she", "so", "some", "such", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "to", "too", "us", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you",
    "your", "yours",
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

/// Index terms of `text`: words, stopwords removed, stemmed.
pub fn terms(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stopword(w))
        .map(|w| stem(&w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
