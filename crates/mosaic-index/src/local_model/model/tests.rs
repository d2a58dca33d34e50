use super::*;

/// Chunks cover every text once, in order; their limit falls as
/// the batch runs out, so the last chunk of a batch is small
/// whatever its size, while a large batch starts with full ones.
#[test]
fn chunks_shrink_as_the_batch_runs_out() {
    // One conversation session: 22 texts of 36 down to 15 tokens,
    // 561 in all.
    let session: Vec<usize> = (0..22).map(|i| 36 - i).collect();
    // A bulk load: 400 texts of 30 tokens, and one past the limit.
    let bulk: Vec<usize> = std::iter::once(600).chain([30; 400]).collect();
    for (lens, workers) in [(&session, 2), (&session, 8), (&bulk, 2), (&vec![5], 2)] {
        let order: Vec<usize> = (0..lens.len()).collect();
        let chunks = cut_chunks(lens, &order, workers);
        let flat: Vec<usize> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(flat, order);
        let tokens: Vec<usize> = chunks
            .iter()
            .map(|c| c.iter().map(|&i| lens[i]).sum())
            .collect();
        let last = tokens.last().copied().unwrap_or(0);
        assert!(last <= MIN_CHUNK_TOKENS, "{tokens:?}");
        for (chunk, t) in chunks.iter().zip(&tokens) {
            assert!(chunk.len() == 1 || *t <= CHUNK_TOKENS, "{tokens:?}");
        }
    }
    let session_order: Vec<usize> = (0..session.len()).collect();
    let session_cut = cut_chunks(&session, &session_order, 2);
    let sizes: Vec<usize> = session_cut
        .iter()
        .map(|c| c.iter().map(|&i| session[i]).sum())
        .collect();
    // A first chunk near a quarter of the tokens, then smaller
    // ones: several for each of the two workers.
    assert!(
        sizes[0] > 2 * MIN_CHUNK_TOKENS && sizes[0] <= 561 / 4,
        "{sizes:?}"
    );
    assert!(sizes.len() >= 6, "{sizes:?}");
    let bulk_order: Vec<usize> = (0..bulk.len()).collect();
    let bulk_cut = cut_chunks(&bulk, &bulk_order, 2);
    assert_eq!(bulk_cut[0], &[0]);
    let second: usize = bulk_cut[1].iter().map(|&i| bulk[i]).sum();
    assert!(second > CHUNK_TOKENS - 30, "{second}");
}

/// Only a call that starts with no other embedding running may
/// split; the count goes down again when a call ends.
#[test]
fn a_call_is_alone_only_when_no_other_embeds() {
    let count = AtomicUsize::new(0);
    let first = InFlight::enter(&count);
    assert!(first.alone);
    {
        let second = InFlight::enter(&count);
        assert!(!second.alone);
    }
    assert!(!InFlight::enter(&count).alone);
    drop(first);
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert!(InFlight::enter(&count).alone);
}

/// A query split over two threads gets the bits one thread gets,
/// for texts from one token to just under the parallel threshold.
/// Needs `MOSAIC_MODEL_DIR`; skips without it unless `CI=true`.
#[test]
fn a_split_query_embeds_the_same_bits_as_one_thread() -> Result<(), IndexError> {
    let Some(dir) = std::env::var_os("MOSAIC_MODEL_DIR") else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "CI=true but MOSAIC_MODEL_DIR is not set");
        return Ok(());
    };
    let e = LocalEmbedder::load(std::path::Path::new(&dir))?;
    assert!(LocalEmbedder::load_int8(std::path::Path::new(&dir))?.release() != e.release());
    let texts = [
        "Hi!".to_owned(),
        "What did Caroline research after the support group meeting?".to_owned(),
        "word ".repeat(60),
    ];
    for text in &texts {
        let encoding = e.tokenizer.encode(text.as_str(), true).map_err(rt)?;
        let seqs = [Seq {
            ids: encoding.get_ids(),
            types: encoding.get_type_ids(),
        }];
        assert!(seqs[0].ids.len() < PARALLEL_MIN_TOKENS);
        let chunks: [&[usize]; 1] = [&[0]];
        let one = e.run(&seqs, &chunks, &AtomicUsize::new(0), None);
        let two = e.run_split(&seqs, &chunks, &AtomicUsize::new(0));
        assert_eq!(one.len(), 1);
        assert_eq!(two.len(), 1);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&one[0].1), bits(&two[0].1), "{text:.40}");
        // And the public call, split when nothing else embeds.
        assert_eq!(bits(&e.embed(text)?), bits(&one[0].1), "{text:.40}");
    }
    Ok(())
}
