//! Chapter 7's fixture: eight records, four selected, four dropped, and the
//! digests that make the selection reproducible.
//!
//! Run: `cargo run -q -p mosaic-harness --example scoped_memory_selection`

use mosaic_harness::fixtures::{scoped_selection_context, scoped_selection_records};
use mosaic_harness::memory_scope::{
    DecisionOutcome, MemoryDecision, MemorySelectionReceipt, record_set_digest, select_memory,
    verify_memory_selection, verify_selection_decisions,
};

/// What the example prints, computed without printing (so tests pin it).
struct Report {
    receipt: MemorySelectionReceipt,
    decisions: Vec<MemoryDecision>,
    read_context_sha256: String,
    record_set_sha256: String,
}

fn run() -> Result<Report, Box<dyn std::error::Error>> {
    let ctx = scoped_selection_context();
    let records: Vec<_> = scoped_selection_records()
        .into_iter()
        .map(|(record, _)| record)
        .collect();
    let selection = select_memory(&ctx, &records)?;
    verify_memory_selection(&ctx, &records, None, &selection.receipt)?;
    verify_selection_decisions(&selection.receipt, &selection.decisions)?;
    Ok(Report {
        decisions: selection.decisions,
        read_context_sha256: ctx.digest()?,
        record_set_sha256: record_set_digest(&records)?,
        receipt: selection.receipt,
    })
}

fn main() {
    let report = match run() {
        Ok(report) => report,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(2);
        }
    };
    println!("selected");
    for id in &report.receipt.selected_record_ids {
        println!("  {id}");
    }
    println!("decisions");
    for decision in &report.decisions {
        let outcome = match &decision.outcome {
            DecisionOutcome::Selected { rank } => format!("selected (rank {rank})"),
            DecisionOutcome::Dropped { reason } => format!("dropped: {}", reason.as_str()),
        };
        println!(
            "  {:<20} {:<11} {outcome}",
            decision.record_id,
            decision.kind.as_str()
        );
    }
    println!("read context SHA-256    {}", report.read_context_sha256);
    println!("record set SHA-256      {}", report.record_set_sha256);
    println!(
        "decisions SHA-256       {}",
        report
            .receipt
            .decisions_sha256
            .as_deref()
            .unwrap_or_default()
    );
    println!("receipt SHA-256         {}", report.receipt.receipt_sha256);
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_harness::memory_scope::DropReason;

    #[test]
    fn scoped_memory_selection_example_is_pinned() {
        let report = run().unwrap();
        assert_eq!(
            report.receipt.selected_record_ids,
            [
                "working-current",
                "semantic-user",
                "procedure-build",
                "episode-user"
            ]
        );
        let dropped: Vec<(&str, DropReason)> = report
            .decisions
            .iter()
            .filter_map(|d| match d.outcome {
                DecisionOutcome::Dropped { reason } => Some((d.record_id.as_str(), reason)),
                DecisionOutcome::Selected { .. } => None,
            })
            .collect();
        assert_eq!(
            dropped,
            [
                ("episode-expired", DropReason::Expired),
                ("procedure-revoked", DropReason::Revoked),
                ("semantic-other", DropReason::SubjectMismatch),
                ("working-old", DropReason::SubjectMismatch),
            ]
        );
        assert_eq!(
            report.read_context_sha256,
            "5754c13ffd0c9e38f65bd6a5139d252825bce540e670196d128a682bb27decef"
        );
        assert_eq!(
            report.record_set_sha256,
            "1fe0451ffc2f00daeaac3a09cb8992361eb399e13f512454dda09492f96423e3"
        );
        assert_eq!(
            report.receipt.receipt_sha256,
            "5d024cf254eb00f85adffacb49315a67c1ffedc893b770707641e31bcf4e2958"
        );
    }
}
