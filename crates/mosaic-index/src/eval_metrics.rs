//! Evidence-retrieval metrics shared by the evaluation tools (`mosaic eval`
//! and the `locomo_eval` example): recall@1/5/10 and nDCG@10 of one ranked
//! list, their sums per category, and the LoCoMo category names.
//!
//! Recall@k is the fraction of a question's evidence items among the first
//! k results; nDCG@10 uses binary gains and the ideal order of
//! `min(evidence, 10)` hits first. A question with no evidence scores 0
//! everywhere (callers exclude such questions and report them).

/// Recall@1/5/10 and nDCG@10 of one ranked list.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RankScore {
    /// Fraction of the evidence in the first result.
    pub recall_at_1: f64,
    /// Fraction of the evidence in the first five results.
    pub recall_at_5: f64,
    /// Fraction of the evidence in the first ten results.
    pub recall_at_10: f64,
    /// Normalised discounted cumulative gain of the first ten results.
    pub ndcg_at_10: f64,
}

/// Scores one ranked list: `hits[i]` says whether the i-th result (best
/// first) is an evidence item; `wanted` is the number of distinct evidence
/// items of the question (including any no result can match).
pub fn score_ranking(hits: &[bool], wanted: usize) -> RankScore {
    if wanted == 0 {
        return RankScore::default();
    }
    let at = |k: usize| hits.iter().take(k).filter(|h| **h).count() as f64 / wanted as f64;
    let gain = |i: usize| 1.0 / ((i + 2) as f64).log2();
    let dcg: f64 = hits
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, h)| **h)
        .map(|(i, _)| gain(i))
        .sum();
    let ideal: f64 = (0..wanted.min(10)).map(gain).sum();
    RankScore {
        recall_at_1: at(1),
        recall_at_5: at(5),
        recall_at_10: at(10),
        ndcg_at_10: dcg / ideal,
    }
}

/// Sums of [`RankScore`]s over a group of questions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MetricSums {
    /// Questions added.
    pub n: usize,
    /// Sum of the questions' scores.
    pub sum: RankScore,
}

impl MetricSums {
    /// Adds one question's score.
    pub fn add(&mut self, score: &RankScore) {
        self.n += 1;
        self.sum.recall_at_1 += score.recall_at_1;
        self.sum.recall_at_5 += score.recall_at_5;
        self.sum.recall_at_10 += score.recall_at_10;
        self.sum.ndcg_at_10 += score.ndcg_at_10;
    }

    /// The mean score (all zero for an empty group).
    pub fn mean(&self) -> RankScore {
        if self.n == 0 {
            return RankScore::default();
        }
        let n = self.n as f64;
        RankScore {
            recall_at_1: self.sum.recall_at_1 / n,
            recall_at_5: self.sum.recall_at_5 / n,
            recall_at_10: self.sum.recall_at_10 / n,
            ndcg_at_10: self.sum.ndcg_at_10 / n,
        }
    }

    /// One Markdown row under [`table_header`]: `| name | label | n | ... |`.
    pub fn table_row(&self, name: &str, label: &str) -> String {
        let m = self.mean();
        format!(
            "| {name} | {label} | {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            self.n, m.recall_at_1, m.recall_at_5, m.recall_at_10, m.ndcg_at_10
        )
    }
}

/// The Markdown header (two lines) of the per-category table; `first` names
/// the first column (a variant or a retrieval mode).
pub fn table_header(first: &str) -> String {
    format!(
        "| {first} | category | n | recall@1 | recall@5 | recall@10 | nDCG@10 |\n|---|---|---:|---:|---:|---:|---:|"
    )
}

/// The LoCoMo category name (0 stands for all categories together).
pub fn category_name(category: u8) -> &'static str {
    match category {
        0 => "all",
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "unknown",
    }
}

/// The table label of a category: `all`, or its number and name
/// (`1 multi-hop`).
pub fn category_label(category: u8) -> String {
    if category == 0 {
        "all".to_owned()
    } else {
        format!("{category} {}", category_name(category))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn scores_a_ranked_list() {
        let s = score_ranking(&[false, true, false, false, false, true], 2);
        assert!(close(s.recall_at_1, 0.0));
        assert!(close(s.recall_at_5, 0.5));
        assert!(close(s.recall_at_10, 1.0));
        let ideal = 1.0 + 1.0 / 3f64.log2();
        let dcg = 1.0 / 3f64.log2() + 1.0 / 7f64.log2();
        assert!(close(s.ndcg_at_10, dcg / ideal));
    }

    #[test]
    fn results_past_ten_and_unmatched_evidence_count_as_misses() {
        let mut hits = vec![false; 12];
        hits[10] = true;
        hits[0] = true;
        // Three evidence items, one of which no result can match.
        let s = score_ranking(&hits, 3);
        assert!(close(s.recall_at_1, 1.0 / 3.0));
        assert!(close(s.recall_at_10, 1.0 / 3.0));
        let ideal = 1.0 + 1.0 / 3f64.log2() + 0.5;
        assert!(close(s.ndcg_at_10, 1.0 / ideal));
        // A perfect list has nDCG 1; no evidence scores nothing.
        assert!(close(score_ranking(&[true, true], 2).ndcg_at_10, 1.0));
        assert_eq!(score_ranking(&[true], 0), RankScore::default());
    }

    #[test]
    fn sums_average_per_group() {
        let mut sums = MetricSums::default();
        assert_eq!(sums.mean(), RankScore::default());
        sums.add(&score_ranking(&[true], 1));
        sums.add(&score_ranking(&[false, true], 1));
        let m = sums.mean();
        assert_eq!(sums.n, 2);
        assert!(close(m.recall_at_1, 0.5));
        assert!(close(m.recall_at_5, 1.0));
        assert_eq!(
            sums.table_row("hybrid", &category_label(4)),
            format!(
                "| hybrid | 4 single-hop | 2 | 0.500 | 1.000 | 1.000 | {:.3} |",
                (1.0 + 1.0 / 3f64.log2()) / 2.0
            )
        );
        assert_eq!(category_label(0), "all");
        assert_eq!(category_name(3), "open-domain");
        assert!(table_header("mode").starts_with("| mode | category |"));
    }
}
