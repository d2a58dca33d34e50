//! The dataset in its normalized LoCoMo form: conversations of sessions of
//! turns, questions with their evidence turns and categories, read from
//! JSON Lines files; and which categories are scored.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use serde_json::{Value, json};

/// A question's category: a number (LoCoMo's 1-5) or a name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// A non-negative integer.
    Number(u64),
    /// A non-empty name.
    Name(String),
}

impl Category {
    /// Reads a category from its JSON value: a non-negative integer or a
    /// non-empty string (trimmed).
    pub(super) fn from_json(value: &Value) -> std::result::Result<Category, String> {
        match value {
            Value::Number(n) => n
                .as_u64()
                .map(Category::Number)
                .ok_or_else(|| format!("category {n} is not a non-negative integer or a string")),
            Value::String(s) if !s.trim().is_empty() => Ok(Category::Name(s.trim().to_owned())),
            Value::String(_) => Err("category is an empty string".to_owned()),
            other => Err(format!(
                "category {other} is not a non-negative integer or a string"
            )),
        }
    }

    /// As written on the command line and in the tables: `2`, `preference`.
    pub(super) fn key(&self) -> String {
        match self {
            Category::Number(n) => n.to_string(),
            Category::Name(s) => s.clone(),
        }
    }

    /// As printed in the JSON lines: a number stays a number.
    pub(super) fn json(&self) -> Value {
        match self {
            Category::Number(n) => json!(n),
            Category::Name(s) => json!(s),
        }
    }
}

/// Which categories `mosaic eval` scores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CategoryFilter {
    /// Score only these (by [`Category::key`]); `None` scores all.
    pub only: Option<Vec<String>>,
    /// Skip these; `None` skips the number 5 (LoCoMo's adversarial
    /// category) and nothing else.
    pub skip: Option<Vec<String>>,
}

impl CategoryFilter {
    /// Parses the `--categories` and `--skip-categories` values
    /// (comma-separated category numbers or names; `--skip-categories ""`
    /// skips nothing).
    pub fn parse(only: Option<&str>, skip: Option<&str>) -> Result<CategoryFilter> {
        let list = |spec: &str| -> Vec<String> {
            spec.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let only = only.map(list);
        if only.as_ref().is_some_and(Vec::is_empty) {
            bail!("--categories names no category");
        }
        Ok(CategoryFilter {
            only,
            skip: skip.map(list),
        })
    }

    pub(super) fn scores(&self, category: &Category) -> bool {
        let key = category.key();
        let listed = |names: &[String]| names.contains(&key);
        if self.only.as_deref().is_some_and(|only| !listed(only)) {
            return false;
        }
        match &self.skip {
            Some(skip) => !listed(skip),
            None => *category != Category::Number(5),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Conversation {
    pub(super) conversation_id: String,
    pub(super) sessions: Vec<Session>,
}

#[derive(Deserialize)]
pub(super) struct Session {
    #[serde(default)]
    pub(super) session_id: String,
    #[serde(default)]
    pub(super) date_time: String,
    pub(super) turns: Vec<Turn>,
}

#[derive(Deserialize)]
pub(super) struct Turn {
    pub(super) turn_id: String,
    pub(super) speaker: String,
    pub(super) text: String,
}

#[derive(Deserialize)]
pub(super) struct Question {
    pub(super) conversation_id: String,
    pub(super) question_id: String,
    pub(super) question: String,
    pub(super) category: Value,
    #[serde(default)]
    pub(super) category_name: Option<String>,
    pub(super) evidence: Vec<String>,
    /// The turn that asks the question, where it is one of the history.
    #[serde(default)]
    pub(super) query_turn_id: Option<String>,
    /// The turn that answered it (its reference reply).
    #[serde(default)]
    pub(super) answer_turn_id: Option<String>,
}

/// Reads a JSON lines file; blank lines are skipped, and an error names the
/// file and the line.
pub(super) fn read_jsonl<T: for<'de> Deserialize<'de>>(
    path: &Path,
    what: &str,
) -> Result<Vec<(usize, T)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str(line)
            .map_err(|e| anyhow!("{}: line {}: not a {what}: {e}", path.display(), index + 1))?;
        out.push((index + 1, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_numbers_or_names() {
        assert_eq!(Category::from_json(&json!(2)), Ok(Category::Number(2)));
        assert_eq!(
            Category::from_json(&json!(" preference ")),
            Ok(Category::Name("preference".into()))
        );
        for bad in [json!(-1), json!(1.5), json!(""), json!(null), json!([1])] {
            assert!(Category::from_json(&bad).is_err(), "{bad}");
        }
        // Numbers sort before names, numbers by value.
        let mut c = [
            Category::Name("b".into()),
            Category::Number(10),
            Category::Name("a".into()),
            Category::Number(2),
        ];
        c.sort();
        assert_eq!(
            c.iter().map(Category::key).collect::<Vec<_>>(),
            ["2", "10", "a", "b"]
        );
    }

    #[test]
    fn the_default_filter_skips_only_locomo_adversarial_questions() {
        let default = CategoryFilter::default();
        assert!(default.scores(&Category::Number(1)));
        assert!(default.scores(&Category::Number(7)));
        assert!(!default.scores(&Category::Number(5)));
        // A name "5" is not LoCoMo's number 5.
        assert!(default.scores(&Category::Name("5".into())));
        let skip_none = CategoryFilter::parse(None, Some("")).unwrap_or_default();
        assert!(skip_none.scores(&Category::Number(5)));
        let only = CategoryFilter::parse(Some("preference, 2"), Some("2")).unwrap_or_default();
        assert!(only.scores(&Category::Name("preference".into())));
        assert!(!only.scores(&Category::Number(2)));
        assert!(!only.scores(&Category::Name("update".into())));
        assert!(CategoryFilter::parse(Some(" , "), None).is_err());
    }
}
