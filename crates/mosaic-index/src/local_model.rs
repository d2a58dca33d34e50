//! The local all-MiniLM-L6-v2 sentence embedder.
//!
//! File checks ([`verify_model_dir`]) are always compiled, so a missing or
//! corrupt model gives the same clear error in every build. The model itself
//! (`MiniLmEmbedder`) needs the `local-model` feature (a pure-Rust BERT
//! encoder with SIMD kernels, plus the `tokenizers` crate).
//! Get the files with `scripts/fetch-model.sh DIR`.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::ModelError;

/// Pinned SHA-256 of `model.safetensors`.
pub const MODEL_SAFETENSORS_SHA256: &str =
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";
/// Pinned SHA-256 of `tokenizer.json`.
pub const TOKENIZER_JSON_SHA256: &str =
    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037";
/// Embedding dimension of all-MiniLM-L6-v2.
pub const MINILM_DIMENSION: usize = 384;
/// Longest input in tokens (the model's max_seq_length).
pub const MINILM_MAX_TOKENS: usize = 256;
/// The embedder release bound into receipts.
pub const MINILM_RELEASE: &str = "all-minilm-l6-v2-sha256-53aa5117-mean-l2-v1";
/// The release of the opt-in int8 variant (`MiniLmEmbedder::load_int8`):
/// same files, dense layers in int8, so different (close) vectors.
pub const MINILM_INT8_RELEASE: &str = "all-minilm-l6-v2-sha256-53aa5117-mean-l2-int8-v1";

/// The verified files of a model directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    /// `model.safetensors`.
    pub weights: PathBuf,
    /// `tokenizer.json`.
    pub tokenizer: PathBuf,
    /// `config.json`.
    pub config: PathBuf,
}

fn fix_command(dir: &Path) -> String {
    format!("scripts/fetch-model.sh {}", dir.display())
}

fn file_sha256(path: &Path) -> Result<String, std::io::Error> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// Checks that `dir` holds the three model files and that the weights and
/// tokenizer have their pinned digests. The error names the file and the
/// exact command that fixes it.
pub fn verify_model_dir(dir: &Path) -> Result<ModelFiles, ModelError> {
    let fix = fix_command(dir);
    let need = |name: &str| -> Result<PathBuf, ModelError> {
        let path = dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(ModelError::MissingFile {
                file: name.to_owned(),
                fix: fix.clone(),
            })
        }
    };
    let files = ModelFiles {
        weights: need("model.safetensors")?,
        tokenizer: need("tokenizer.json")?,
        config: need("config.json")?,
    };
    for (name, path, expected) in [
        (
            "model.safetensors",
            &files.weights,
            MODEL_SAFETENSORS_SHA256,
        ),
        ("tokenizer.json", &files.tokenizer, TOKENIZER_JSON_SHA256),
    ] {
        let actual = file_sha256(path).map_err(|_| ModelError::MissingFile {
            file: name.to_owned(),
            fix: fix.clone(),
        })?;
        if actual != expected {
            return Err(ModelError::DigestMismatch {
                file: name.to_owned(),
                expected: expected.to_owned(),
                actual,
                fix: fix.clone(),
            });
        }
    }
    Ok(files)
}

#[cfg(feature = "local-model")]
pub use model::MiniLmEmbedder;

// A sibling file rather than `local_model/`: src/ stays one level deep.
#[cfg(feature = "local-model")]
#[path = "minilm_kernels.rs"]
mod kernels;

#[cfg(feature = "local-model")]
mod model {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, mpsc};

    use safetensors::{Dtype, SafeTensors};
    use tokenizers::{Tokenizer, TruncationParams};

    use mosaic_kernels::{QuantMatrix, QuantRows};

    use super::kernels::{
        PANEL, Packed, add_layer_norm, add_layer_norm_fast, attention, gelu, linear, linear_panels,
    };
    use super::{
        MINILM_DIMENSION, MINILM_INT8_RELEASE, MINILM_MAX_TOKENS, MINILM_RELEASE, verify_model_dir,
    };
    use crate::embed::{Embedder, l2_normalise};
    use crate::error::{IndexError, ModelError};

    fn rt<E: std::fmt::Display>(e: E) -> IndexError {
        IndexError::Model(ModelError::Runtime(e.to_string()))
    }

    const HIDDEN: usize = MINILM_DIMENSION;
    const HEADS: usize = 12;
    const LAYERS: usize = 6;
    const INTERMEDIATE: usize = 1536;
    const VOCAB: usize = 30522;
    const POSITIONS: usize = 512;
    /// Most tokens run through the model at once (one chunk): enough rows
    /// to reuse each weight panel many times while it is in cache, few
    /// enough that a batch gives the workers several chunks to share
    /// (measured: 512 beats 256 by 3% and 128 by 10%).
    const CHUNK_TOKENS: usize = 512;
    /// Batches with fewer tokens run on the calling thread only.
    const PARALLEL_MIN_TOKENS: usize = 96;
    /// Fewest tokens a chunk is cut to for balance: below this the dense
    /// layers stream each weight panel for too few rows.
    const MIN_CHUNK_TOKENS: usize = 64;

    /// Cuts texts of `lens` tokens, taken in the order `order` (longest
    /// first), into the chunks `workers` take in turn. A worker that takes
    /// the last chunk while the others have finished keeps them idle for
    /// as long as that chunk runs, so chunks shrink as the batch runs out:
    /// each holds at most half of the tokens still to cut shared among the
    /// workers ("factoring": `remaining / (2 workers)`, within
    /// [`MIN_CHUNK_TOKENS`]..=[`CHUNK_TOKENS`]), so the first chunks keep
    /// enough rows to reuse each weight panel and the last are small. A
    /// text longer than its limit is a chunk of its own. Each text's vector
    /// is the same whatever chunk it runs in.
    fn cut_chunks<'a>(lens: &[usize], order: &'a [usize], workers: usize) -> Vec<&'a [usize]> {
        let len = |i: usize| lens.get(order[i]).copied().unwrap_or(0);
        let mut remaining: usize = (0..order.len()).map(len).sum();
        let mut chunks = Vec::new();
        let mut start = 0;
        while start < order.len() {
            let limit = (remaining / (2 * workers.max(1))).clamp(MIN_CHUNK_TOKENS, CHUNK_TOKENS);
            let mut end = start + 1;
            let mut tokens = len(start);
            while end < order.len() && tokens + len(end) <= limit {
                tokens += len(end);
                end += 1;
            }
            chunks.push(&order[start..end]);
            remaining = remaining.saturating_sub(tokens);
            start = end;
        }
        chunks
    }

    /// A dense layer `y = x W^T + b`: f32 (the default release), or int8
    /// (weights per output channel, activations per token row, `i32`
    /// accumulation, then dequantised; `mosaic-kernels`).
    enum Dense {
        F32(Packed),
        Int8(QuantMatrix),
    }

    impl Dense {
        fn new(parts: &[(&[f32], &[f32])], k: usize, int8: bool) -> Dense {
            if int8 {
                Dense::Int8(QuantMatrix::quantize(parts, k))
            } else {
                Dense::F32(Packed::new(parts, k))
            }
        }

        fn n(&self) -> usize {
            match self {
                Dense::F32(w) => w.n(),
                Dense::Int8(w) => w.n(),
            }
        }

        fn apply(&self, x: &[f32], out: &mut [f32], q: &mut QuantRows) {
            match self {
                Dense::F32(w) => linear(x, w, out),
                Dense::Int8(w) => {
                    q.quantize(x, w.k());
                    mosaic_kernels::linear(q, w, out);
                }
            }
        }
    }

    struct Layer {
        qkv: Dense,
        attn_out: Dense,
        attn_norm: (Vec<f32>, Vec<f32>),
        intermediate: Dense,
        output: Dense,
        output_norm: (Vec<f32>, Vec<f32>),
    }

    /// One of a layer's four dense products.
    #[derive(Clone, Copy)]
    enum Which {
        Qkv,
        AttnOut,
        Intermediate,
        Output,
    }

    impl Layer {
        fn dense(&self, which: Which) -> &Dense {
            match which {
                Which::Qkv => &self.qkv,
                Which::AttnOut => &self.attn_out,
                Which::Intermediate => &self.intermediate,
                Which::Output => &self.output,
            }
        }
    }

    /// A dense product's upper panels, for the helper thread of a split
    /// query: its input rows and the first panel it computes.
    struct Job {
        layer: usize,
        which: Which,
        from_panel: usize,
        x: Vec<f32>,
        /// Set by whichever thread computes the upper half: the helper
        /// when it gets to it first, else the caller, once its own half is
        /// done (a helper that another process keeps off the CPU then
        /// costs nothing but the hand-off).
        taken: Arc<AtomicBool>,
    }

    /// The calling thread's end of a split query: it sends the upper half
    /// of each f32 dense product to a helper thread and computes the lower
    /// half meanwhile.
    struct Split {
        jobs: mpsc::Sender<Job>,
        done: mpsc::Receiver<Vec<f32>>,
    }

    /// How long a split query's threads spin for the other's next message
    /// before they block: a product's half takes about a hundred
    /// microseconds, and waking a blocked thread on an idle core can cost
    /// tens of them, twice per product.
    const SPIN: std::time::Duration = std::time::Duration::from_micros(300);

    /// The next message of `rx`, spinning up to [`SPIN`] before blocking;
    /// `None` once the sender is gone.
    fn receive_soon<T>(rx: &mpsc::Receiver<T>) -> Option<T> {
        let started = std::time::Instant::now();
        loop {
            match rx.try_recv() {
                Ok(value) => return Some(value),
                Err(mpsc::TryRecvError::Disconnected) => return None,
                Err(mpsc::TryRecvError::Empty) if started.elapsed() < SPIN => {
                    std::hint::spin_loop();
                }
                Err(mpsc::TryRecvError::Empty) => return rx.recv().ok(),
            }
        }
    }

    /// Counts the embedding calls running, so a call can tell whether it
    /// is the only one (the guard leaves on drop, on every path).
    struct InFlight<'a> {
        count: &'a AtomicUsize,
        alone: bool,
    }

    impl<'a> InFlight<'a> {
        fn enter(count: &'a AtomicUsize) -> Self {
            let before = count.fetch_add(1, Ordering::SeqCst);
            InFlight {
                count,
                alone: before == 0,
            }
        }
    }

    impl Drop for InFlight<'_> {
        fn drop(&mut self) {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// all-MiniLM-L6-v2 on the CPU, in plain Rust: the BERT encoder
    /// (token, position and type embeddings; 6 layers of 12-head attention
    /// and exact-GELU feed-forward; layer norms with eps 1e-12), truncation
    /// at 256 tokens, mean pooling over the tokens, L2 normalisation.
    ///
    /// No padding: the dense layers run over the tokens of many texts
    /// packed one after the other, and attention runs per text. Batches
    /// are split across the available cores by token count; a batch too
    /// small for that (one query) splits the f32 release's dense products
    /// by output panels over two threads when no other embedding runs
    /// (the same bits either way).
    pub struct MiniLmEmbedder {
        /// Read-only once loaded: concurrent calls encode on their own
        /// threads.
        tokenizer: Tokenizer,
        /// The same tokenizer without truncation: passage spans.
        untruncated: Tokenizer,
        word: Vec<f32>,
        position: Vec<f32>,
        token_type: Vec<f32>,
        embed_norm: (Vec<f32>, Vec<f32>),
        layers: Vec<Layer>,
        threads: usize,
        release: &'static str,
        /// Embedding calls running now (see [`InFlight`]).
        in_flight: AtomicUsize,
    }

    fn tensor(st: &SafeTensors<'_>, name: &str, shape: &[usize]) -> Result<Vec<f32>, IndexError> {
        let view = st.tensor(name).map_err(|e| rt(format!("{name}: {e}")))?;
        if view.dtype() != Dtype::F32 || view.shape() != shape {
            return Err(rt(format!(
                "{name}: expected F32 {shape:?}, found {:?} {:?}",
                view.dtype(),
                view.shape()
            )));
        }
        Ok(view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    fn norm(st: &SafeTensors<'_>, prefix: &str) -> Result<(Vec<f32>, Vec<f32>), IndexError> {
        Ok((
            tensor(st, &format!("{prefix}.weight"), &[HIDDEN])?,
            tensor(st, &format!("{prefix}.bias"), &[HIDDEN])?,
        ))
    }

    impl MiniLmEmbedder {
        /// Verifies the files in `dir` (pinned SHA-256s) and loads them:
        /// release [`MINILM_RELEASE`], f32 throughout.
        pub fn load(dir: &Path) -> Result<Self, IndexError> {
            Self::load_with(dir, false)
        }

        /// The opt-in int8 variant, release [`MINILM_INT8_RELEASE`]: the
        /// same files, the dense layers (query/key/value, attention output,
        /// feed-forward up and down) quantised to int8 at load and run with
        /// int8 products (AVX-512 VNNI when the CPU has it, a much slower
        /// portable path otherwise); everything else stays f32. Vectors are
        /// close to [`MiniLmEmbedder::load`]'s, not equal, hence the
        /// separate release.
        pub fn load_int8(dir: &Path) -> Result<Self, IndexError> {
            Self::load_with(dir, true)
        }

        fn load_with(dir: &Path, int8: bool) -> Result<Self, IndexError> {
            let files = verify_model_dir(dir)?;
            let mut tokenizer = Tokenizer::from_file(&files.tokenizer).map_err(rt)?;
            // The shipped tokenizer pads and truncates at 128: no padding
            // here (texts are packed, never padded), truncation at 256.
            tokenizer.with_padding(None);
            let mut untruncated = tokenizer.clone();
            untruncated.with_truncation(None).map_err(rt)?;
            tokenizer
                .with_truncation(Some(TruncationParams {
                    max_length: MINILM_MAX_TOKENS,
                    ..Default::default()
                }))
                .map_err(rt)?;
            // Read into memory rather than memory-mapped, so no unsafe code.
            let bytes = std::fs::read(&files.weights).map_err(rt)?;
            let st = SafeTensors::deserialize(&bytes).map_err(rt)?;
            let e = "embeddings";
            let mut layers = Vec::with_capacity(LAYERS);
            for l in 0..LAYERS {
                let p = format!("encoder.layer.{l}");
                let w =
                    |name: &str, n: usize, k: usize| -> Result<(Vec<f32>, Vec<f32>), IndexError> {
                        Ok((
                            tensor(&st, &format!("{p}.{name}.weight"), &[n, k])?,
                            tensor(&st, &format!("{p}.{name}.bias"), &[n])?,
                        ))
                    };
                let q = w("attention.self.query", HIDDEN, HIDDEN)?;
                let k = w("attention.self.key", HIDDEN, HIDDEN)?;
                let v = w("attention.self.value", HIDDEN, HIDDEN)?;
                let o = w("attention.output.dense", HIDDEN, HIDDEN)?;
                let i = w("intermediate.dense", INTERMEDIATE, HIDDEN)?;
                let out = w("output.dense", HIDDEN, INTERMEDIATE)?;
                layers.push(Layer {
                    qkv: Dense::new(&[(&q.0, &q.1), (&k.0, &k.1), (&v.0, &v.1)], HIDDEN, int8),
                    attn_out: Dense::new(&[(&o.0, &o.1)], HIDDEN, int8),
                    attn_norm: norm(&st, &format!("{p}.attention.output.LayerNorm"))?,
                    intermediate: Dense::new(&[(&i.0, &i.1)], HIDDEN, int8),
                    output: Dense::new(&[(&out.0, &out.1)], INTERMEDIATE, int8),
                    output_norm: norm(&st, &format!("{p}.output.LayerNorm"))?,
                });
            }
            let threads = std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1);
            Ok(MiniLmEmbedder {
                tokenizer,
                untruncated,
                word: tensor(
                    &st,
                    &format!("{e}.word_embeddings.weight"),
                    &[VOCAB, HIDDEN],
                )?,
                position: tensor(
                    &st,
                    &format!("{e}.position_embeddings.weight"),
                    &[POSITIONS, HIDDEN],
                )?,
                token_type: tensor(
                    &st,
                    &format!("{e}.token_type_embeddings.weight"),
                    &[2, HIDDEN],
                )?,
                embed_norm: norm(&st, &format!("{e}.LayerNorm"))?,
                layers,
                threads,
                in_flight: AtomicUsize::new(0),
                release: if int8 {
                    MINILM_INT8_RELEASE
                } else {
                    MINILM_RELEASE
                },
            })
        }
    }

    impl Embedder for MiniLmEmbedder {
        fn release(&self) -> &str {
            self.release
        }

        fn dimension(&self) -> usize {
            MINILM_DIMENSION
        }

        fn window(&self) -> Option<usize> {
            Some(MINILM_MAX_TOKENS)
        }

        /// Windows of 254 word pieces (the 256 of the model less `[CLS]`
        /// and `[SEP]`) sharing 32 (`crate::embed::passage_windows`); a
        /// text the tokenizer cannot read is one passage (its embedding
        /// reports the error).
        fn passages(&self, text: &str) -> Vec<crate::embed::Span> {
            let whole = vec![crate::embed::Span {
                start: 0,
                end: text.len(),
            }];
            let Ok(encoding) = self.untruncated.encode(text, false) else {
                return whole;
            };
            let offsets = encoding.get_offsets();
            // Byte offsets on char boundaries, increasing: anything else
            // and the text stays one passage.
            let sound = offsets.iter().all(|&(a, b)| {
                a <= b && b <= text.len() && text.is_char_boundary(a) && text.is_char_boundary(b)
            }) && offsets.windows(2).all(|w| w[0].0 <= w[1].0);
            if !sound {
                return whole;
            }
            crate::embed::passage_windows(offsets, text.len(), MINILM_MAX_TOKENS, 2)
        }

        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, IndexError> {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            let flight = InFlight::enter(&self.in_flight);
            // One text at a time on this thread. The tokenizer's
            // `encode_batch` spreads a batch over a rayon pool whose idle
            // workers spin (`sched_yield`) after every batch, on the cores
            // the forward pass below needs; tokenising is a few percent of
            // an embedding, and without padding the encodings are the same.
            let encodings = texts
                .iter()
                .map(|text| self.tokenizer.encode(*text, true).map_err(rt))
                .collect::<Result<Vec<_>, _>>()?;
            let seqs: Vec<Seq<'_>> = encodings
                .iter()
                .map(|e| Seq {
                    ids: e.get_ids(),
                    types: e.get_type_ids(),
                })
                .collect();
            for s in &seqs {
                if let Some(bad) = s.ids.iter().find(|&&id| id as usize >= VOCAB) {
                    return Err(rt(format!("token id {bad} outside the vocabulary")));
                }
            }
            // Longest first, cut into chunks that shrink as the batch runs
            // out (`cut_chunks`); workers take the next chunk as they
            // finish one, so a worker the OS delays on a busy machine does
            // not hold the others up.
            let lens: Vec<usize> = seqs.iter().map(|s| s.ids.len()).collect();
            let total: usize = lens.iter().sum();
            let mut order: Vec<usize> = (0..seqs.len()).collect();
            order.sort_by_key(|&i| (std::cmp::Reverse(lens[i]), i));
            let chunks = cut_chunks(&lens, &order, self.threads);
            let workers = if total < PARALLEL_MIN_TOKENS {
                1
            } else {
                self.threads.min(chunks.len()).max(1)
            };
            let next = AtomicUsize::new(0);
            let work = || self.run(&seqs, &chunks, &next, None);
            let results: Vec<Vec<(usize, Vec<f32>)>> = if workers == 1 {
                if self.split_when_alone() && flight.alone {
                    vec![self.run_split(&seqs, &chunks, &next)]
                } else {
                    vec![work()]
                }
            } else {
                std::thread::scope(|scope| {
                    let handles: Vec<_> = (1..workers).map(|_| scope.spawn(work)).collect();
                    let mut results = vec![work()];
                    for h in handles {
                        results.push(h.join().unwrap_or_default());
                    }
                    results
                })
            };
            let mut out: Vec<Vec<f32>> = vec![Vec::new(); seqs.len()];
            for (i, v) in results.into_iter().flatten() {
                out[i] = v;
            }
            if out.iter().any(|v| v.len() != MINILM_DIMENSION) {
                return Err(IndexError::BadEmbedding {
                    expected: MINILM_DIMENSION,
                    actual: 0,
                });
            }
            Ok(out)
        }
    }

    /// One tokenised text.
    struct Seq<'a> {
        ids: &'a [u32],
        types: &'a [u32],
    }

    /// Activations of one chunk, reused from layer to layer.
    #[derive(Default)]
    struct Scratch {
        x: Vec<f32>,
        qkv: Vec<f32>,
        ctx: Vec<f32>,
        tmp: Vec<f32>,
        inter: Vec<f32>,
        attn: Vec<f32>,
        quant: QuantRows,
    }

    impl MiniLmEmbedder {
        /// Embeds chunks (lists of indexes into `seqs`) taken from `chunks`
        /// in turn, `next` counting the chunks taken so far by all workers;
        /// each f32 dense product is shared with the helper of `split` when
        /// there is one.
        fn run(
            &self,
            seqs: &[Seq<'_>],
            chunks: &[&[usize]],
            next: &AtomicUsize,
            split: Option<&Split>,
        ) -> Vec<(usize, Vec<f32>)> {
            let mut scratch = Scratch::default();
            let mut out = Vec::new();
            while let Some(which) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) {
                let chunk: Vec<&Seq<'_>> = which.iter().map(|&i| &seqs[i]).collect();
                let vectors = self.forward(&chunk, &mut scratch, split);
                out.extend(which.iter().copied().zip(vectors));
            }
            out
        }

        /// Whether a small batch may split its dense products over two
        /// threads when no other embedding runs: the f32 release on a
        /// machine with a second core. One query's f32 products stream
        /// 42 MB of weights for a few rows, so two cores reading half each
        /// finish sooner; under concurrent calls each keeps one core, as
        /// splitting would only add hand-offs. The int8 release's weights
        /// are a quarter of that and its query takes about a millisecond.
        fn split_when_alone(&self) -> bool {
            self.threads > 1 && self.release == MINILM_RELEASE
        }

        /// [`Self::run`] with a helper thread taking the upper half of
        /// every f32 dense product (the same arithmetic per output, so the
        /// same bits as one thread).
        fn run_split(
            &self,
            seqs: &[Seq<'_>],
            chunks: &[&[usize]],
            next: &AtomicUsize,
        ) -> Vec<(usize, Vec<f32>)> {
            std::thread::scope(|scope| {
                let (jobs, job_rx) = mpsc::channel::<Job>();
                let (done_tx, done) = mpsc::channel::<Vec<f32>>();
                scope.spawn(move || {
                    while let Some(job) = receive_soon(&job_rx) {
                        if job.taken.swap(true, Ordering::AcqRel) {
                            // The caller computed it already.
                            continue;
                        }
                        let Dense::F32(w) = self.layers[job.layer].dense(job.which) else {
                            break;
                        };
                        let rows = job.x.len() / w.k();
                        let panels = job.from_panel..w.panel_count();
                        let mut hi = vec![0.0f32; rows * panels.len() * PANEL];
                        linear_panels(&job.x, w, panels, &mut hi);
                        if done_tx.send(hi).is_err() {
                            break;
                        }
                    }
                });
                // The helper ends when `split` (its job sender) is dropped
                // here, before the scope joins it.
                let split = Split { jobs, done };
                self.run(seqs, chunks, next, Some(&split))
            })
        }

        /// Layer `l`'s product `which` of `x` into `out`: split with the
        /// helper when there is one and the product is f32, else here.
        fn dense(
            &self,
            l: usize,
            which: Which,
            x: &[f32],
            out: &mut [f32],
            q: &mut QuantRows,
            split: Option<&Split>,
        ) {
            let dense = self.layers[l].dense(which);
            let (Some(split), Dense::F32(w)) = (split, dense) else {
                return dense.apply(x, out, q);
            };
            let (n, panels) = (w.n(), w.panel_count());
            let rows = x.len() / w.k();
            let mid = panels.div_ceil(2);
            let taken = Arc::new(AtomicBool::new(false));
            let job = Job {
                layer: l,
                which,
                from_panel: mid,
                x: x.to_vec(),
                taken: taken.clone(),
            };
            if split.jobs.send(job).is_err() {
                return dense.apply(x, out, q);
            }
            let mut lo = vec![0.0f32; rows * mid * PANEL];
            linear_panels(x, w, 0..mid, &mut lo);
            let width_hi = (panels - mid) * PANEL;
            let here = || {
                let mut hi = vec![0.0f32; rows * width_hi];
                linear_panels(x, w, mid..panels, &mut hi);
                hi
            };
            let hi = if taken.swap(true, Ordering::AcqRel) {
                // The helper has it: the next answer is this product's.
                match receive_soon(&split.done) {
                    Some(hi) if hi.len() == rows * width_hi => hi,
                    // A helper that is gone: this thread computes it.
                    _ => here(),
                }
            } else {
                here()
            };
            let width_lo = mid * PANEL;
            for (r, row) in out.chunks_exact_mut(n).enumerate() {
                let (dst_lo, dst_hi) = row.split_at_mut(width_lo);
                dst_lo.copy_from_slice(&lo[r * width_lo..(r + 1) * width_lo]);
                dst_hi.copy_from_slice(&hi[r * width_hi..(r + 1) * width_hi]);
            }
        }

        /// The encoder over the packed tokens of `chunk`, mean pooled and
        /// L2 normalised per text.
        fn forward(
            &self,
            chunk: &[&Seq<'_>],
            s: &mut Scratch,
            split: Option<&Split>,
        ) -> Vec<Vec<f32>> {
            let lens: Vec<usize> = chunk.iter().map(|q| q.ids.len()).collect();
            let t: usize = lens.iter().sum();
            s.x.clear();
            s.x.reserve(t * HIDDEN);
            for q in chunk {
                for (pos, (&id, &ty)) in q.ids.iter().zip(q.types).enumerate() {
                    let word = &self.word[id as usize * HIDDEN..][..HIDDEN];
                    let position = &self.position[pos * HIDDEN..][..HIDDEN];
                    let ty = (ty as usize).min(1);
                    let token_type = &self.token_type[ty * HIDDEN..][..HIDDEN];
                    s.x.extend(
                        word.iter()
                            .zip(position)
                            .zip(token_type)
                            .map(|((w, p), y)| w + p + y),
                    );
                }
            }
            // The int8 release also takes the faster layer norm (its own
            // arithmetic; the f32 release's stays as it was).
            let layer_norm = if self.release == MINILM_INT8_RELEASE {
                add_layer_norm_fast
            } else {
                add_layer_norm
            };
            layer_norm(&mut s.x, &[], &self.embed_norm.0, &self.embed_norm.1);
            s.qkv.resize(t * 3 * HIDDEN, 0.0);
            s.ctx.resize(t * HIDDEN, 0.0);
            s.tmp.resize(t * HIDDEN, 0.0);
            s.inter.resize(t * INTERMEDIATE, 0.0);
            for (l, layer) in self.layers.iter().enumerate() {
                self.dense(l, Which::Qkv, &s.x, &mut s.qkv, &mut s.quant, split);
                let mut offset = 0;
                for &len in &lens {
                    attention(
                        &s.qkv[offset * layer.qkv.n()..(offset + len) * layer.qkv.n()],
                        &mut s.ctx[offset * HIDDEN..(offset + len) * HIDDEN],
                        HEADS,
                        HIDDEN,
                        &mut s.attn,
                    );
                    offset += len;
                }
                self.dense(l, Which::AttnOut, &s.ctx, &mut s.tmp, &mut s.quant, split);
                layer_norm(&mut s.x, &s.tmp, &layer.attn_norm.0, &layer.attn_norm.1);
                self.dense(
                    l,
                    Which::Intermediate,
                    &s.x,
                    &mut s.inter,
                    &mut s.quant,
                    split,
                );
                gelu(&mut s.inter);
                self.dense(l, Which::Output, &s.inter, &mut s.tmp, &mut s.quant, split);
                layer_norm(&mut s.x, &s.tmp, &layer.output_norm.0, &layer.output_norm.1);
            }
            let mut vectors = Vec::with_capacity(chunk.len());
            let mut offset = 0;
            for &len in &lens {
                let mut v = vec![0.0f32; HIDDEN];
                for row in s.x[offset * HIDDEN..(offset + len) * HIDDEN].chunks_exact(HIDDEN) {
                    for (a, b) in v.iter_mut().zip(row) {
                        *a += b;
                    }
                }
                let count = len.max(1) as f32;
                v.iter_mut().for_each(|a| *a /= count);
                l2_normalise(&mut v);
                vectors.push(v);
                offset += len;
            }
            vectors
        }
    }

    #[cfg(test)]
    mod tests {
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
            let e = MiniLmEmbedder::load(std::path::Path::new(&dir))?;
            assert!(
                MiniLmEmbedder::load_int8(std::path::Path::new(&dir))?.release() != e.release()
            );
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
    }
}
