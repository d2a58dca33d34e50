//! The encoder itself (feature `local-model`): loading the weights, the
//! forward pass, and the batch workers that split a call's texts.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};

use safetensors::{Dtype, SafeTensors};
use tokenizers::{Tokenizer, TruncationParams};

use mosaic_kernels::{QuantMatrix, QuantRows};

use super::kernels::{
    PANEL, Packed, RelativeBias, add_layer_norm, add_layer_norm_fast, attention, gelu, linear,
    linear_panels,
};
use super::{
    MINILM_DIMENSION, MINILM_INT8_RELEASE, MINILM_MAX_TOKENS, MINILM_RELEASE, MPNET_DIMENSION,
    MPNET_MAX_TOKENS, MPNET_RELEASE, ModelFiles, mpnet_relative_bucket, verify_model_dir,
    verify_mpnet_model_dir,
};
use crate::embed::{Embedder, l2_normalise};
use crate::error::{IndexError, ModelError};

fn rt<E: std::fmt::Display>(e: E) -> IndexError {
    IndexError::Model(ModelError::Runtime(e.to_string()))
}

/// The shape of an encoder: all-MiniLM-L6-v2 (BERT) or
/// all-mpnet-base-v2 (MPNet: BERT-like layers without token types,
/// positions from 2, one relative position bias shared by every
/// layer's attention, layer norms with eps 1e-5).
struct Spec {
    hidden: usize,
    heads: usize,
    layers: usize,
    intermediate: usize,
    vocab: usize,
    positions: usize,
    max_tokens: usize,
    eps: f32,
    mpnet: bool,
}

impl Spec {
    /// The first position id: MPNet counts from its padding id + 1.
    fn first_position(&self) -> usize {
        if self.mpnet { 2 } else { 0 }
    }
}

const MINILM: Spec = Spec {
    hidden: MINILM_DIMENSION,
    heads: 12,
    layers: 6,
    intermediate: 1536,
    vocab: 30522,
    positions: 512,
    max_tokens: MINILM_MAX_TOKENS,
    eps: 1e-12,
    mpnet: false,
};

const MPNET: Spec = Spec {
    hidden: MPNET_DIMENSION,
    heads: 12,
    layers: 12,
    intermediate: 3072,
    vocab: 30527,
    positions: 514,
    max_tokens: MPNET_MAX_TOKENS,
    eps: 1e-5,
    mpnet: true,
};

/// MPNet's relative attention buckets.
const RELATIVE_BUCKETS: usize = 32;
/// The window's tokens that are the model's own (`[CLS]` and `[SEP]`, or
/// MPNet's `<s>` and `</s>`): a passage holds the rest.
const PASSAGE_RESERVED: usize = 2;
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

/// A local sentence embedder on the CPU, in plain Rust.
///
/// all-MiniLM-L6-v2 ([`LocalEmbedder::load`]): the BERT encoder (token,
/// position and type embeddings; 6 layers of 12-head attention and
/// exact-GELU feed-forward; layer norms with eps 1e-12), truncation at
/// 256 tokens, mean pooling over the tokens, L2 normalisation.
///
/// all-mpnet-base-v2 ([`LocalEmbedder::load_mpnet`]): the MPNet encoder
/// (token and position embeddings, positions counted from 2; 12 layers
/// of 12-head attention whose scores get one relative position bias,
/// 32 buckets up to distance 128, shared by every layer; exact-GELU
/// feed-forward; layer norms with eps 1e-5), truncation at 384 tokens,
/// mean pooling, L2 normalisation: 768 dimensions.
///
/// No padding: the dense layers run over the tokens of many texts
/// packed one after the other, and attention runs per text. Batches
/// are split across the available cores by token count; a batch too
/// small for that (one query) splits the f32 release's dense products
/// by output panels over two threads when no other embedding runs
/// (the same bits either way).
pub struct LocalEmbedder {
    /// Read-only once loaded: concurrent calls encode on their own
    /// threads.
    tokenizer: Tokenizer,
    /// The same tokenizer without truncation: passage spans.
    untruncated: Tokenizer,
    spec: &'static Spec,
    word: Vec<f32>,
    position: Vec<f32>,
    /// Empty for MPNet (no token types).
    token_type: Vec<f32>,
    /// MPNet's relative position bias by distance, `[heads][2 *
    /// max_tokens - 1]` (see [`RelativeBias`]); empty for MiniLM.
    relative: Vec<f32>,
    embed_norm: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
    threads: usize,
    release: &'static str,
    /// Dense layers in int8 (and the faster layer norm).
    int8: bool,
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

fn norm(
    st: &SafeTensors<'_>,
    prefix: &str,
    hidden: usize,
) -> Result<(Vec<f32>, Vec<f32>), IndexError> {
    Ok((
        tensor(st, &format!("{prefix}.weight"), &[hidden])?,
        tensor(st, &format!("{prefix}.bias"), &[hidden])?,
    ))
}

impl LocalEmbedder {
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
    /// close to [`LocalEmbedder::load`]'s, not equal, hence the
    /// separate release.
    pub fn load_int8(dir: &Path) -> Result<Self, IndexError> {
        Self::load_with(dir, true)
    }

    /// all-mpnet-base-v2 from `dir` (verified by
    /// [`verify_mpnet_model_dir`]): release [`MPNET_RELEASE`], f32
    /// throughout, 768 dimensions.
    pub fn load_mpnet(dir: &Path) -> Result<Self, IndexError> {
        let files = verify_mpnet_model_dir(dir)?;
        Self::load_files(&files, &MPNET, false, MPNET_RELEASE)
    }

    fn load_with(dir: &Path, int8: bool) -> Result<Self, IndexError> {
        let files = verify_model_dir(dir)?;
        let release = if int8 {
            MINILM_INT8_RELEASE
        } else {
            MINILM_RELEASE
        };
        Self::load_files(&files, &MINILM, int8, release)
    }

    fn load_files(
        files: &ModelFiles,
        spec: &'static Spec,
        int8: bool,
        release: &'static str,
    ) -> Result<Self, IndexError> {
        let hidden = spec.hidden;
        let mut tokenizer = Tokenizer::from_file(&files.tokenizer).map_err(rt)?;
        // The shipped tokenizers pad and truncate at 128: no padding
        // here (texts are packed, never padded), truncation at the
        // model's limit.
        tokenizer.with_padding(None);
        let mut untruncated = tokenizer.clone();
        untruncated.with_truncation(None).map_err(rt)?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: spec.max_tokens,
                ..Default::default()
            }))
            .map_err(rt)?;
        // Read into memory rather than memory-mapped, so no unsafe code.
        let bytes = std::fs::read(&files.weights).map_err(rt)?;
        let st = SafeTensors::deserialize(&bytes).map_err(rt)?;
        let e = "embeddings";
        // MPNet names the attention's parts differently.
        let (q_name, k_name, v_name, o_name, attn_norm_name) = if spec.mpnet {
            (
                "attention.attn.q",
                "attention.attn.k",
                "attention.attn.v",
                "attention.attn.o",
                "attention.LayerNorm",
            )
        } else {
            (
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
                "attention.output.LayerNorm",
            )
        };
        let (inter, layer_count) = (spec.intermediate, spec.layers);
        let mut layers = Vec::with_capacity(layer_count);
        for l in 0..layer_count {
            let p = format!("encoder.layer.{l}");
            let w = |name: &str, n: usize, k: usize| -> Result<(Vec<f32>, Vec<f32>), IndexError> {
                Ok((
                    tensor(&st, &format!("{p}.{name}.weight"), &[n, k])?,
                    tensor(&st, &format!("{p}.{name}.bias"), &[n])?,
                ))
            };
            let q = w(q_name, hidden, hidden)?;
            let k = w(k_name, hidden, hidden)?;
            let v = w(v_name, hidden, hidden)?;
            let o = w(o_name, hidden, hidden)?;
            let i = w("intermediate.dense", inter, hidden)?;
            let out = w("output.dense", hidden, inter)?;
            layers.push(Layer {
                qkv: Dense::new(&[(&q.0, &q.1), (&k.0, &k.1), (&v.0, &v.1)], hidden, int8),
                attn_out: Dense::new(&[(&o.0, &o.1)], hidden, int8),
                attn_norm: norm(&st, &format!("{p}.{attn_norm_name}"), hidden)?,
                intermediate: Dense::new(&[(&i.0, &i.1)], hidden, int8),
                output: Dense::new(&[(&out.0, &out.1)], inter, int8),
                output_norm: norm(&st, &format!("{p}.output.LayerNorm"), hidden)?,
            });
        }
        let (token_type, relative) = if spec.mpnet {
            let weight = tensor(
                &st,
                "encoder.relative_attention_bias.weight",
                &[RELATIVE_BUCKETS, spec.heads],
            )?;
            (Vec::new(), relative_table(&weight, spec))
        } else {
            let token_type = tensor(
                &st,
                &format!("{e}.token_type_embeddings.weight"),
                &[2, hidden],
            )?;
            (token_type, Vec::new())
        };
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Ok(LocalEmbedder {
            tokenizer,
            untruncated,
            spec,
            word: tensor(
                &st,
                &format!("{e}.word_embeddings.weight"),
                &[spec.vocab, hidden],
            )?,
            position: tensor(
                &st,
                &format!("{e}.position_embeddings.weight"),
                &[spec.positions, hidden],
            )?,
            token_type,
            relative,
            embed_norm: norm(&st, &format!("{e}.LayerNorm"), hidden)?,
            layers,
            threads,
            in_flight: AtomicUsize::new(0),
            release,
            int8,
        })
    }
}

/// MPNet's bias by distance: `[heads][2 * max_tokens - 1]`, entry
/// `center + d` holding the bias of key position minus query position
/// `d` (the bucket table `weight` is `[buckets][heads]`).
fn relative_table(weight: &[f32], spec: &Spec) -> Vec<f32> {
    let center = spec.max_tokens - 1;
    let width = 2 * center + 1;
    let mut table = vec![0.0f32; spec.heads * width];
    for at in 0..width {
        let bucket = mpnet_relative_bucket(at as i64 - center as i64);
        for h in 0..spec.heads {
            table[h * width + at] = weight[bucket * spec.heads + h];
        }
    }
    table
}

impl Embedder for LocalEmbedder {
    fn release(&self) -> &str {
        self.release
    }

    fn dimension(&self) -> usize {
        self.spec.hidden
    }

    fn window(&self) -> Option<usize> {
        Some(self.spec.max_tokens)
    }

    /// Windows of the model's limit less its two special tokens
    /// (`[CLS]`/`[SEP]`, `<s>`/`</s>`): 254 word pieces for MiniLM,
    /// 382 for MPNet, sharing 32 (`crate::embed::passage_windows`); a
    /// text the tokenizer cannot read is one passage (its embedding
    /// reports the error).
    fn passages(&self, text: &str) -> Vec<crate::embed::Span> {
        let whole = vec![crate::embed::Span {
            start: 0,
            end: text.len(),
        }];
        // Every word piece covers at least one character of the normalised
        // text, and normalising (accents stripped after decomposition,
        // lowercase, control characters dropped, spaces around Chinese
        // characters) never makes more characters than the text has bytes
        // (a Hangul syllable, three bytes, decomposes into three jamo). So
        // a text of at most the window's bytes is one passage: most turns
        // of a conversation skip the tokenizer here, which would only say
        // so.
        if text.len() <= self.spec.max_tokens.saturating_sub(PASSAGE_RESERVED) {
            return whole;
        }
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
        crate::embed::passage_windows(offsets, text.len(), self.spec.max_tokens, PASSAGE_RESERVED)
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
            if let Some(bad) = s.ids.iter().find(|&&id| id as usize >= self.spec.vocab) {
                return Err(rt(format!("token id {bad} outside the vocabulary")));
            }
            // Truncation keeps every text within the model's limit;
            // the position table and the relative bias count on it.
            if s.ids.len() > self.spec.max_tokens {
                return Err(rt(format!("{} tokens past the limit", s.ids.len())));
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
        if out.iter().any(|v| v.len() != self.spec.hidden) {
            return Err(IndexError::BadEmbedding {
                expected: self.spec.hidden,
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

impl LocalEmbedder {
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
        self.threads > 1 && !self.int8
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
    fn forward(&self, chunk: &[&Seq<'_>], s: &mut Scratch, split: Option<&Split>) -> Vec<Vec<f32>> {
        let spec = self.spec;
        let hidden = spec.hidden;
        let lens: Vec<usize> = chunk.iter().map(|q| q.ids.len()).collect();
        let t: usize = lens.iter().sum();
        s.x.clear();
        s.x.reserve(t * hidden);
        let first = spec.first_position();
        for q in chunk {
            for (pos, (&id, &ty)) in q.ids.iter().zip(q.types).enumerate() {
                let word = &self.word[id as usize * hidden..][..hidden];
                let position = &self.position[(first + pos) * hidden..][..hidden];
                if self.token_type.is_empty() {
                    s.x.extend(word.iter().zip(position).map(|(w, p)| w + p));
                } else {
                    let ty = (ty as usize).min(1);
                    let token_type = &self.token_type[ty * hidden..][..hidden];
                    s.x.extend(
                        word.iter()
                            .zip(position)
                            .zip(token_type)
                            .map(|((w, p), y)| w + p + y),
                    );
                }
            }
        }
        // The int8 release also takes the faster layer norm (its own
        // arithmetic; the f32 release's stays as it was).
        let kernel = if self.int8 {
            add_layer_norm_fast
        } else {
            add_layer_norm
        };
        let layer_norm = |x: &mut [f32], residual: &[f32], gamma: &[f32], beta: &[f32]| {
            kernel(x, residual, gamma, beta, spec.eps)
        };
        let bias = (!self.relative.is_empty()).then_some(RelativeBias {
            table: &self.relative,
            center: spec.max_tokens - 1,
        });
        layer_norm(&mut s.x, &[], &self.embed_norm.0, &self.embed_norm.1);
        s.qkv.resize(t * 3 * hidden, 0.0);
        s.ctx.resize(t * hidden, 0.0);
        s.tmp.resize(t * hidden, 0.0);
        s.inter.resize(t * spec.intermediate, 0.0);
        for (l, layer) in self.layers.iter().enumerate() {
            self.dense(l, Which::Qkv, &s.x, &mut s.qkv, &mut s.quant, split);
            let mut offset = 0;
            for &len in &lens {
                attention(
                    &s.qkv[offset * layer.qkv.n()..(offset + len) * layer.qkv.n()],
                    &mut s.ctx[offset * hidden..(offset + len) * hidden],
                    spec.heads,
                    hidden,
                    bias,
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
            let mut v = vec![0.0f32; hidden];
            for row in s.x[offset * hidden..(offset + len) * hidden].chunks_exact(hidden) {
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
mod tests;
