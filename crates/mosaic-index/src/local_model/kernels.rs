//! The numeric kernels of the MiniLM encoder, in safe Rust.
//!
//! SIMD comes from `pulp`: each kernel is a [`WithSimd`] operation that
//! `pulp::Arch` dispatches at run time to the widest instruction set the CPU
//! has (AVX-512 with the `x86-v4` feature, AVX2+FMA, SSE, NEON or scalar).
//! Everything a kernel calls is `#[inline(always)]`, so plain loops inside
//! it are vectorised for the selected instruction set too.

use pulp::{Arch, Simd, WithSimd};

/// Output columns per packed weight panel.
pub(super) const PANEL: usize = 32;

/// The weights and bias of a linear layer `y = x W^T + b`, packed for
/// [`linear`]: panels of [`PANEL`] output columns, each stored `[k][PANEL]`,
/// so the kernel streams one panel contiguously.
pub(super) struct Packed {
    k: usize,
    n: usize,
    data: Vec<f32>,
    bias: Vec<f32>,
}

impl Packed {
    /// Packs `weight` (`[n][k]`, row-major, the PyTorch `Linear` layout).
    /// Several weights with the same `k` are stacked along `n`.
    pub(super) fn new(weights: &[(&[f32], &[f32])], k: usize) -> Packed {
        let mut rows: Vec<&[f32]> = Vec::new();
        let mut bias = Vec::new();
        for (w, b) in weights {
            debug_assert_eq!(w.len(), b.len() * k);
            rows.extend(w.chunks_exact(k));
            bias.extend_from_slice(b);
        }
        let n = rows.len();
        assert_eq!(n % PANEL, 0, "output width must be a multiple of {PANEL}");
        let mut data = vec![0.0f32; n * k];
        for (p, panel) in data.chunks_exact_mut(k * PANEL).enumerate() {
            for (kk, line) in panel.chunks_exact_mut(PANEL).enumerate() {
                for (j, slot) in line.iter_mut().enumerate() {
                    *slot = rows[p * PANEL + j][kk];
                }
            }
        }
        Packed { k, n, data, bias }
    }

    /// Output width.
    pub(super) fn n(&self) -> usize {
        self.n
    }

    /// Input width.
    pub(super) fn k(&self) -> usize {
        self.k
    }

    /// Panels of [`PANEL`] output columns.
    pub(super) fn panel_count(&self) -> usize {
        self.n / PANEL
    }

    fn panels(&self) -> Panels<'_> {
        Panels {
            k: self.k,
            n: self.n,
            data: &self.data,
            bias: &self.bias,
        }
    }
}

/// A borrowed right-hand side in the packed layout of [`Packed`]: `n / PANEL`
/// panels of `[k][PANEL]`, and `n` biases.
#[derive(Clone, Copy)]
struct Panels<'a> {
    k: usize,
    n: usize,
    data: &'a [f32],
    bias: &'a [f32],
}

/// `out[t][n] = x[t][k] W^T + b` for every row of `x`.
pub(super) fn linear(x: &[f32], w: &Packed, out: &mut [f32]) {
    assert_eq!(x.len() % w.k, 0);
    assert_eq!(out.len(), x.len() / w.k * w.n);
    Arch::new().dispatch(Linear {
        x,
        w: w.panels(),
        out,
    });
}

/// [`linear`] for the output columns of panels `panels` only:
/// `out[t][panels.len() * PANEL]`. Each output is computed exactly as
/// [`linear`] computes it (the same products in the same order), so two
/// threads that split a layer's panels between them get its bits.
pub(super) fn linear_panels(
    x: &[f32],
    w: &Packed,
    panels: std::ops::Range<usize>,
    out: &mut [f32],
) {
    let width = panels.len() * PANEL;
    assert!(panels.end * PANEL <= w.n);
    assert_eq!(x.len() % w.k, 0);
    assert_eq!(out.len(), x.len() / w.k * width);
    let sub = Panels {
        k: w.k,
        n: width,
        data: &w.data[panels.start * w.k * PANEL..panels.end * w.k * PANEL],
        bias: &w.bias[panels.start * PANEL..panels.end * PANEL],
    };
    Arch::new().dispatch(Linear { x, w: sub, out });
}

struct Linear<'a> {
    x: &'a [f32],
    w: Panels<'a>,
    out: &'a mut [f32],
}

impl WithSimd for Linear<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        matmul(simd, self.x, &self.w, self.out);
    }
}

/// `out[t][n] = x[t][k] * w + bias` with the register tile that suits the
/// vector width.
#[inline(always)]
fn matmul<S: Simd>(simd: S, x: &[f32], w: &Panels<'_>, out: &mut [f32]) {
    let lanes = core::mem::size_of::<S::f32s>() / core::mem::size_of::<f32>();
    match lanes {
        // 12 rows x 2 vectors = 24 of the 32 AVX-512 registers.
        16 => linear_blocks::<S, 2, 12>(simd, x, w, out),
        // 2 rows x 4 vectors: 8 accumulators, the 4 weight vectors and a
        // broadcast row value, 13 of the 16 AVX2 registers. (3 rows needed
        // 17: the compiler kept two accumulators on the stack, and the
        // store-to-load chain through them made the whole encoder 1.7x
        // slower. 6 rows over half a panel, 15 registers, was slower in
        // one whole-encoder run: 65 s against 58 s on LoCoMo, on a machine
        // whose speed drifted.)
        8 => linear_blocks::<S, 4, 2>(simd, x, w, out),
        4 => linear_blocks::<S, 8, 1>(simd, x, w, out),
        _ => linear_scalar(x, w, out),
    }
}

/// Rows in blocks of `MR`, then the remaining rows in blocks of 8, 4, 2
/// and 1 (a one-row tile has too few independent accumulators to keep the
/// FMA units busy).
#[inline(always)]
fn linear_blocks<S: Simd, const NV: usize, const MR: usize>(
    simd: S,
    x: &[f32],
    w: &Panels<'_>,
    out: &mut [f32],
) {
    let k = w.k;
    let n = w.n;
    let t = x.len() / k;
    let full = t / MR * MR;
    for (p, panel) in w.data.chunks_exact(k * PANEL).enumerate() {
        let bias = &w.bias[p * PANEL..(p + 1) * PANEL];
        let mut r = 0;
        while r < full {
            tile::<S, NV, MR>(simd, x, r, k, panel, bias, out, n, p);
            r += MR;
        }
        while r < t {
            let left = t - r;
            if left >= 8 && MR > 8 {
                tile::<S, NV, 8>(simd, x, r, k, panel, bias, out, n, p);
                r += 8;
            } else if left >= 4 && MR > 4 {
                tile::<S, NV, 4>(simd, x, r, k, panel, bias, out, n, p);
                r += 4;
            } else if left >= 2 && MR > 2 {
                tile::<S, NV, 2>(simd, x, r, k, panel, bias, out, n, p);
                r += 2;
            } else {
                tile::<S, NV, 1>(simd, x, r, k, panel, bias, out, n, p);
                r += 1;
            }
        }
    }
}

/// One `M x PANEL` output tile: rows `r..r + M`, panel `p`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn tile<S: Simd, const NV: usize, const M: usize>(
    simd: S,
    x: &[f32],
    r: usize,
    k: usize,
    panel: &[f32],
    bias: &[f32],
    out: &mut [f32],
    n: usize,
    p: usize,
) {
    let rows: [&[f32]; M] = core::array::from_fn(|i| &x[(r + i) * k..(r + i + 1) * k]);
    let (bias_v, _) = S::as_simd_f32s(bias);
    let mut acc: [[S::f32s; NV]; M] = [core::array::from_fn(|v| bias_v[v]); M];
    for (kk, line) in panel.chunks_exact(PANEL).enumerate() {
        let (b, _) = S::as_simd_f32s(line);
        let b: [S::f32s; NV] = core::array::from_fn(|v| b[v]);
        for i in 0..M {
            let a = simd.splat_f32s(rows[i][kk]);
            for v in 0..NV {
                acc[i][v] = simd.mul_add_e_f32s(a, b[v], acc[i][v]);
            }
        }
    }
    for (i, acc_row) in acc.iter().enumerate() {
        let start = (r + i) * n + p * PANEL;
        let (dst, _) = S::as_mut_simd_f32s(&mut out[start..start + PANEL]);
        dst[..NV].copy_from_slice(acc_row);
    }
}

fn linear_scalar(x: &[f32], w: &Panels<'_>, out: &mut [f32]) {
    let k = w.k;
    for (row, dst) in x.chunks_exact(k).zip(out.chunks_exact_mut(w.n)) {
        for (p, panel) in w.data.chunks_exact(k * PANEL).enumerate() {
            let mut acc = [0.0f32; PANEL];
            acc.copy_from_slice(&w.bias[p * PANEL..(p + 1) * PANEL]);
            for (a, line) in row.iter().zip(panel.chunks_exact(PANEL)) {
                for (s, b) in acc.iter_mut().zip(line) {
                    *s = a.mul_add(*b, *s);
                }
            }
            dst[p * PANEL..(p + 1) * PANEL].copy_from_slice(&acc);
        }
    }
}

/// `x = gelu(x)` with the exact (erf) GELU BERT uses.
pub(super) fn gelu(x: &mut [f32]) {
    Arch::new().dispatch(Gelu { x });
}

struct Gelu<'a> {
    x: &'a mut [f32],
}

impl WithSimd for Gelu<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let (head, tail) = S::as_mut_simd_f32s(self.x);
        for v in head {
            *v = gelu_v(simd, *v);
        }
        for v in tail {
            *v = gelu_scalar(*v);
        }
    }
}

// erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (and +-1 beyond, to f32
// precision): the rational approximation of Eigen's `generic_fast_erf_float`,
// accurate to a few ulp in f32.
const ERF_ALPHA: [f32; 7] = [
    -2.726_142_3e-10,
    2.770_681_4e-8,
    -2.101_024e-6,
    -5.692_506_4e-5,
    -7.349_906_3e-4,
    -2.954_600_1e-3,
    -1.609_603_3e-2,
];
const ERF_BETA: [f32; 5] = [
    -1.456_607_2e-5,
    -2.133_740_6e-4,
    -1.682_827e-3,
    -7.373_329_2e-3,
    -1.426_474e-2,
];
const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;

#[inline(always)]
fn gelu_v<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    let z = simd.mul_f32s(x, simd.splat_f32s(FRAC_1_SQRT_2));
    let z = simd.min_f32s(
        simd.max_f32s(z, simd.splat_f32s(-4.0)),
        simd.splat_f32s(4.0),
    );
    let z2 = simd.mul_f32s(z, z);
    let mut p = simd.splat_f32s(ERF_ALPHA[0]);
    for c in &ERF_ALPHA[1..] {
        p = simd.mul_add_e_f32s(p, z2, simd.splat_f32s(*c));
    }
    p = simd.mul_f32s(p, z);
    let mut q = simd.splat_f32s(ERF_BETA[0]);
    for c in &ERF_BETA[1..] {
        q = simd.mul_add_e_f32s(q, z2, simd.splat_f32s(*c));
    }
    let erf = simd.div_f32s(p, q);
    let half_x = simd.mul_f32s(x, simd.splat_f32s(0.5));
    simd.mul_add_e_f32s(half_x, erf, half_x)
}

#[inline(always)]
fn gelu_scalar(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * FRAC_1_SQRT_2))
}

/// The same rational approximation as [`gelu_v`], one value.
#[inline(always)]
pub(super) fn erf(x: f32) -> f32 {
    let z = x.clamp(-4.0, 4.0);
    let z2 = z * z;
    let mut p = ERF_ALPHA[0];
    for c in &ERF_ALPHA[1..] {
        p = p.mul_add(z2, *c);
    }
    p *= z;
    let mut q = ERF_BETA[0];
    for c in &ERF_BETA[1..] {
        q = q.mul_add(z2, *c);
    }
    p / q
}

/// `x = layer_norm(x + residual) * gamma + beta`, row by row (width
/// `gamma.len()`), with `eps` (1e-12 in BERT, 1e-5 in MPNet). `residual`
/// may be empty.
pub(super) fn add_layer_norm(
    x: &mut [f32],
    residual: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    Arch::new().dispatch(AddLayerNorm {
        x,
        residual,
        gamma,
        beta,
        eps,
    });
}

struct AddLayerNorm<'a> {
    x: &'a mut [f32],
    residual: &'a [f32],
    gamma: &'a [f32],
    beta: &'a [f32],
    eps: f32,
}

impl WithSimd for AddLayerNorm<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let width = self.gamma.len();
        if !self.residual.is_empty() {
            for (a, b) in self.x.iter_mut().zip(self.residual) {
                *a += *b;
            }
        }
        for row in self.x.chunks_exact_mut(width) {
            // Two passes in f64 sums: mean, then variance of the centred row.
            let mean = (row.iter().map(|v| f64::from(*v)).sum::<f64>() / width as f64) as f32;
            for v in row.iter_mut() {
                *v -= mean;
            }
            let var = (row.iter().map(|v| f64::from(*v * *v)).sum::<f64>() / width as f64) as f32;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(self.gamma).zip(self.beta) {
                *v = *v * inv * *g + *b;
            }
        }
    }
}

/// [`add_layer_norm`] with f32 vector sums instead of sequential f64
/// ones: several times faster, and not bit-identical to it (sums in
/// another order), so only the int8 release uses it; the f32 release keeps
/// its exact arithmetic.
pub(super) fn add_layer_norm_fast(
    x: &mut [f32],
    residual: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    Arch::new().dispatch(AddLayerNormFast {
        x,
        residual,
        gamma,
        beta,
        eps,
    });
}

struct AddLayerNormFast<'a> {
    x: &'a mut [f32],
    residual: &'a [f32],
    gamma: &'a [f32],
    beta: &'a [f32],
    eps: f32,
}

impl WithSimd for AddLayerNormFast<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let width = self.gamma.len();
        if !self.residual.is_empty() {
            for (a, b) in self.x.iter_mut().zip(self.residual) {
                *a += *b;
            }
        }
        for row in self.x.chunks_exact_mut(width) {
            let inv = {
                let (head, tail) = S::as_mut_simd_f32s(row);
                let mut acc = simd.splat_f32s(0.0);
                for v in head.iter() {
                    acc = simd.add_f32s(acc, *v);
                }
                let sum = simd.reduce_sum_f32s(acc) + tail.iter().sum::<f32>();
                let mean = sum / width as f32;
                let m = simd.splat_f32s(mean);
                let mut acc = simd.splat_f32s(0.0);
                for v in head.iter_mut() {
                    *v = simd.sub_f32s(*v, m);
                    acc = simd.mul_add_e_f32s(*v, *v, acc);
                }
                let mut tail_sq = 0.0f32;
                for v in tail.iter_mut() {
                    *v -= mean;
                    tail_sq += *v * *v;
                }
                let var = (simd.reduce_sum_f32s(acc) + tail_sq) / width as f32;
                1.0 / (var + self.eps).sqrt()
            };
            for ((v, g), b) in row.iter_mut().zip(self.gamma).zip(self.beta) {
                *v = *v * inv * *g + *b;
            }
        }
    }
}

/// A relative position bias added to every attention score (MPNet):
/// `table[h * width + center + j - i]` for query `i` and key `j` of head
/// `h`, where `width = 2 * center + 1`, so a sequence may be up to
/// `center + 1` tokens long.
#[derive(Clone, Copy)]
pub(super) struct RelativeBias<'a> {
    pub(super) table: &'a [f32],
    pub(super) center: usize,
}

/// Multi-head self-attention of one sequence without padding.
///
/// `qkv` is `[len][3 * hidden]` (queries, keys, values side by side), `out`
/// is `[len][hidden]`; `scratch` is reused between calls. The head width
/// (`hidden / heads`) is a multiple of [`PANEL`]. Per head, both products
/// (`Q K^T` and `P V`) run through the same tiled kernel as the dense
/// layers, with keys and values packed as its right-hand side. `bias`,
/// when given, is added to the scaled scores before the softmax.
pub(super) fn attention(
    qkv: &[f32],
    out: &mut [f32],
    heads: usize,
    hidden: usize,
    bias: Option<RelativeBias<'_>>,
    scratch: &mut Vec<f32>,
) {
    Arch::new().dispatch(Attention {
        qkv,
        out,
        heads,
        hidden,
        bias,
        scratch,
    });
}

struct Attention<'a> {
    qkv: &'a [f32],
    out: &'a mut [f32],
    heads: usize,
    hidden: usize,
    bias: Option<RelativeBias<'a>>,
    scratch: &'a mut Vec<f32>,
}

impl WithSimd for Attention<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Attention {
            qkv,
            out,
            heads,
            hidden,
            bias,
            scratch,
        } = self;
        let stride = 3 * hidden;
        let len = qkv.len() / stride;
        let dh = hidden / heads;
        assert_eq!(dh % PANEL, 0, "head width must be a multiple of {PANEL}");
        if let Some(b) = bias {
            assert!(len <= b.center + 1, "sequence longer than the bias table");
            assert_eq!(b.table.len(), heads * (2 * b.center + 1));
        }
        // Keys padded to whole panels; padded scores are never read.
        let padded = len.div_ceil(PANEL) * PANEL;
        let scale = 1.0 / (dh as f32).sqrt();
        let sizes = [
            len * dh,       // q: scaled queries of one head, [len][dh]
            dh * padded,    // kp: keys packed, panels of [dh][PANEL]
            len * padded,   // s: scores, [len][padded]
            len * len,      // prob: probabilities, [len][len]
            len * dh,       // vp: values packed, panels of [len][PANEL]
            len * dh,       // ctx: [len][dh]
            padded.max(dh), // zero: the (absent) bias
        ];
        scratch.clear();
        scratch.resize(sizes.iter().sum(), 0.0);
        let (q, rest) = scratch.split_at_mut(sizes[0]);
        let (kp, rest) = rest.split_at_mut(sizes[1]);
        let (s, rest) = rest.split_at_mut(sizes[2]);
        let (prob, rest) = rest.split_at_mut(sizes[3]);
        let (vp, rest) = rest.split_at_mut(sizes[4]);
        let (ctx, zero) = rest.split_at_mut(sizes[5]);
        for h in 0..heads {
            let q0 = h * dh;
            let k0 = hidden + h * dh;
            let v0 = 2 * hidden + h * dh;
            for (j, row) in qkv.chunks_exact(stride).enumerate() {
                let (p, c) = (j / PANEL, j % PANEL);
                for (d, value) in row[k0..k0 + dh].iter().enumerate() {
                    kp[p * dh * PANEL + d * PANEL + c] = *value;
                }
                for (dst, value) in q[j * dh..(j + 1) * dh].iter_mut().zip(&row[q0..q0 + dh]) {
                    *dst = value * scale;
                }
                // Values as panels of PANEL columns, each `[len][PANEL]`
                // (one panel when the head is PANEL wide: the row as is).
                for (p, part) in row[v0..v0 + dh].chunks_exact(PANEL).enumerate() {
                    vp[p * len * PANEL + j * PANEL..][..PANEL].copy_from_slice(part);
                }
            }
            let keys = Panels {
                k: dh,
                n: padded,
                data: kp,
                bias: &zero[..padded],
            };
            matmul(simd, q, &keys, s);
            for (i, (srow, prow)) in s
                .chunks_exact_mut(padded)
                .zip(prob.chunks_exact_mut(len))
                .enumerate()
            {
                if let Some(b) = bias {
                    let width = 2 * b.center + 1;
                    let from = h * width + b.center - i;
                    for (score, add) in srow[..len].iter_mut().zip(&b.table[from..from + len]) {
                        *score += *add;
                    }
                }
                softmax_row(simd, srow, len);
                prow.copy_from_slice(&srow[..len]);
            }
            let values = Panels {
                k: len,
                n: dh,
                data: vp,
                bias: &zero[..dh],
            };
            matmul(simd, prob, &values, ctx);
            for (dst, src) in out.chunks_exact_mut(hidden).zip(ctx.chunks_exact(dh)) {
                dst[q0..q0 + dh].copy_from_slice(src);
            }
        }
    }
}

/// Softmax over `row[..len]`, in place; `row.len()` is a multiple of
/// [`PANEL`] (so of every vector width), and `row[len..]` is scratch.
#[inline(always)]
fn softmax_row<S: Simd>(simd: S, row: &mut [f32], len: usize) {
    row[len..].fill(f32::NEG_INFINITY);
    let (vectors, tail) = S::as_mut_simd_f32s(row);
    debug_assert!(tail.is_empty());
    let mut max = simd.splat_f32s(f32::NEG_INFINITY);
    for v in vectors.iter() {
        max = simd.max_f32s(max, *v);
    }
    let max = simd.splat_f32s(simd.reduce_max_f32s(max));
    let mut sum = simd.splat_f32s(0.0);
    for v in vectors.iter_mut() {
        // exp(-inf - max) comes out as exp(-87), about 1e-38: the padding
        // adds nothing visible to the sum and is never read.
        *v = exp_nonpositive(simd, simd.sub_f32s(*v, max));
        sum = simd.add_f32s(sum, *v);
    }
    let inv = simd.splat_f32s(1.0 / simd.reduce_sum_f32s(sum));
    // The padding's exp(-87), about 1.6e-38, times `inv` would be a
    // subnormal: each vector product with one takes a microcode assist,
    // which made a sequence whose length is not a whole number of panels
    // up to twice as slow. Nothing reads the padding, so it is zeroed
    // first (the sum above is untouched, and with it every bit read).
    row[len..].fill(0.0);
    let (vectors, _) = S::as_mut_simd_f32s(row);
    for v in vectors.iter_mut() {
        *v = simd.mul_f32s(*v, inv);
    }
}

/// `exp(x)` for `x <= 0` (clamped at -87), to about 2 ulp: `2^n e^r` with
/// `n = round(x / ln 2)` and Cephes' polynomial for `e^r` on
/// `|r| <= ln 2 / 2`.
#[inline(always)]
fn exp_nonpositive<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    // Adding 1.5 * 2^23 rounds to an integer, which lands in the low
    // mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = simd.max_f32s(x, simd.splat_f32s(-87.0));
    let t = simd.mul_add_e_f32s(
        x,
        simd.splat_f32s(std::f32::consts::LOG2_E),
        simd.splat_f32s(ROUND),
    );
    let n = simd.sub_f32s(t, simd.splat_f32s(ROUND));
    let r = simd.mul_add_e_f32s(n, simd.splat_f32s(-0.693_359_4), x);
    let r = simd.mul_add_e_f32s(n, simd.splat_f32s(2.121_944_4e-4), r);
    let mut p = simd.splat_f32s(1.987_569_1e-4);
    for c in [
        1.398_2e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        1.666_666_5e-1,
        0.5,
    ] {
        p = simd.mul_add_e_f32s(p, r, simd.splat_f32s(c));
    }
    let r2 = simd.mul_f32s(r, r);
    let y = simd.mul_add_e_f32s(p, r2, simd.add_f32s(r, simd.splat_f32s(1.0)));
    // 2^n: the integer in t's low bits, moved to the exponent field
    // (n + 127 lies in 1..=127 for x in -87..=0).
    let bits = simd.transmute_u32s_f32s(t);
    let bits = simd.add_u32s(bits, simd.splat_u32s(127u32.wrapping_sub(0x4B40_0000)));
    let scale = simd.transmute_f32s_u32s(simd.wrapping_dyn_shl_u32s(bits, simd.splat_u32s(23)));
    simd.mul_f32s(y, scale)
}

#[cfg(test)]
mod tests {
    //! Every SIMD path against a plain f64 reference, not only the one
    //! this machine dispatches to.
    use super::*;

    fn data(len: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// The scalar and 4-lane paths, and the AVX2 and AVX-512 paths when
    /// this machine has them.
    fn paths() -> Vec<Path> {
        #[allow(unused_mut)]
        let mut paths = vec![Path::Scalar, Path::Lanes4];
        #[cfg(target_arch = "x86_64")]
        {
            if pulp::x86::V3::try_new().is_some() {
                paths.push(Path::V3);
            }
            if pulp::x86::V4::try_new().is_some() {
                paths.push(Path::V4);
            }
        }
        paths
    }

    #[derive(Clone, Copy, Debug)]
    enum Path {
        Scalar,
        Lanes4,
        #[cfg(target_arch = "x86_64")]
        V3,
        #[cfg(target_arch = "x86_64")]
        V4,
    }

    fn run<Op: WithSimd>(path: Path, op: Op) -> Op::Output {
        match path {
            Path::Scalar => Simd::vectorize(pulp::Scalar, op),
            Path::Lanes4 => Simd::vectorize(pulp::Scalar128b, op),
            #[cfg(target_arch = "x86_64")]
            Path::V3 => Simd::vectorize(pulp::x86::V3::try_new().unwrap(), op),
            #[cfg(target_arch = "x86_64")]
            Path::V4 => Simd::vectorize(pulp::x86::V4::try_new().unwrap(), op),
        }
    }

    #[test]
    fn linear_matches_reference_on_every_path_and_row_count() {
        let (k, n) = (48, 64);
        let w = data(n * k, 1);
        let b = data(n, 2);
        let packed = Packed::new(
            &[
                (&w[..n / 2 * k], &b[..n / 2]),
                (&w[n / 2 * k..], &b[n / 2..]),
            ],
            k,
        );
        for t in 1..=30 {
            let x = data(t * k, 3 + t as u64);
            let mut want = vec![0.0f32; t * n];
            for r in 0..t {
                for c in 0..n {
                    let dot: f64 = (0..k)
                        .map(|i| f64::from(x[r * k + i]) * f64::from(w[c * k + i]))
                        .sum();
                    want[r * n + c] = (dot + f64::from(b[c])) as f32;
                }
            }
            for path in paths() {
                let mut out = vec![0.0f32; t * n];
                run(
                    path,
                    Linear {
                        x: &x,
                        w: packed.panels(),
                        out: &mut out,
                    },
                );
                let diff = want
                    .iter()
                    .zip(&out)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f32::max);
                assert!(diff < 1e-5, "{path:?}, {t} rows: max diff {diff}");
            }
        }
    }

    #[test]
    fn panels_split_between_two_callers_give_the_layers_bits() {
        // One query's dense layers may be split by panels over two
        // threads: each half must hold exactly the whole layer's columns.
        let (k, n) = (40, 4 * PANEL);
        let w = data(n * k, 7);
        let b = data(n, 8);
        let packed = Packed::new(&[(&w, &b)], k);
        assert_eq!(packed.panel_count(), 4);
        for t in [1, 2, 5, 13, 15, 27] {
            let x = data(t * k, 9 + t as u64);
            let mut whole = vec![0.0f32; t * n];
            linear(&x, &packed, &mut whole);
            for mid in 0..=4 {
                let mut lo = vec![0.0f32; t * mid * PANEL];
                let mut hi = vec![0.0f32; t * (4 - mid) * PANEL];
                linear_panels(&x, &packed, 0..mid, &mut lo);
                linear_panels(&x, &packed, mid..4, &mut hi);
                for r in 0..t {
                    let row = &whole[r * n..(r + 1) * n];
                    let (want_lo, want_hi) = row.split_at(mid * PANEL);
                    let got_lo = &lo[r * mid * PANEL..(r + 1) * mid * PANEL];
                    let got_hi = &hi[r * (4 - mid) * PANEL..(r + 1) * (4 - mid) * PANEL];
                    for (a, b) in want_lo.iter().zip(got_lo).chain(want_hi.iter().zip(got_hi)) {
                        assert_eq!(a.to_bits(), b.to_bits(), "{t} rows, split at {mid}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_row_gives_the_same_bits_in_every_tile_shape() {
        // A text's vector must not depend on the batch it is embedded in:
        // each output is the bias plus one fused multiply-add per `k` in
        // order, whichever tile (12, 8, 4, 2 or 1 rows) computes it.
        let (k, n) = (40, 64);
        let w = data(n * k, 7);
        let b = data(n, 8);
        let packed = Packed::new(&[(&w, &b)], k);
        let t = 27;
        let x = data(t * k, 9);
        for path in paths() {
            let mut all = vec![0.0f32; t * n];
            run(
                path,
                Linear {
                    x: &x,
                    w: packed.panels(),
                    out: &mut all,
                },
            );
            for r in 0..t {
                let mut one = vec![0.0f32; n];
                run(
                    path,
                    Linear {
                        x: &x[r * k..(r + 1) * k],
                        w: packed.panels(),
                        out: &mut one,
                    },
                );
                let same = one
                    .iter()
                    .zip(&all[r * n..(r + 1) * n])
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{path:?}: row {r} of {t} differs from the row alone");
            }
        }
    }

    /// Attention against an f64 reference: heads of one panel (MiniLM)
    /// and of two (MPNet), without and with a relative position bias.
    #[test]
    fn attention_matches_reference_on_every_path() {
        for (heads, hidden, biased) in [(2, 64, false), (2, 128, false), (3, 192, true)] {
            let dh = hidden / heads;
            let center = 80;
            let table = data(heads * (2 * center + 1), 77);
            let bias = biased.then_some(RelativeBias {
                table: &table,
                center,
            });
            for len in [1, 5, 33, 70] {
                let qkv = data(len * 3 * hidden, 10 + len as u64);
                let mut want = vec![0.0f32; len * hidden];
                for h in 0..heads {
                    for i in 0..len {
                        let at = |j: usize, part: usize, d: usize| {
                            f64::from(qkv[j * 3 * hidden + part * hidden + h * dh + d])
                        };
                        let scores: Vec<f64> = (0..len)
                            .map(|j| {
                                let b = if biased {
                                    f64::from(table[h * (2 * center + 1) + center + j - i])
                                } else {
                                    0.0
                                };
                                (0..dh).map(|d| at(i, 0, d) * at(j, 1, d)).sum::<f64>()
                                    / (dh as f64).sqrt()
                                    + b
                            })
                            .collect();
                        let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                        let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                        let sum: f64 = exps.iter().sum();
                        for d in 0..dh {
                            let v: f64 = (0..len).map(|j| exps[j] / sum * at(j, 2, d)).sum();
                            want[i * hidden + h * dh + d] = v as f32;
                        }
                    }
                }
                for path in paths() {
                    let mut out = vec![0.0f32; len * hidden];
                    let mut scratch = Vec::new();
                    run(
                        path,
                        Attention {
                            qkv: &qkv,
                            out: &mut out,
                            heads,
                            hidden,
                            bias,
                            scratch: &mut scratch,
                        },
                    );
                    let diff = want
                        .iter()
                        .zip(&out)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0.0, f32::max);
                    assert!(
                        diff < 1e-5,
                        "{path:?}, head width {dh}, bias {biased}, len {len}: max diff {diff}"
                    );
                }
            }
        }
    }

    struct Softmax<'a> {
        row: &'a mut [f32],
        len: usize,
    }

    impl WithSimd for Softmax<'_> {
        type Output = ();

        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) {
            softmax_row(simd, self.row, self.len);
        }
    }

    #[test]
    fn softmax_matches_reference_on_every_path() {
        for len in [1, 7, 32, 45] {
            let mut scores = data(len, 40 + len as u64);
            scores.iter_mut().for_each(|v| *v *= 30.0);
            scores[0] = -200.0; // below the clamp: its weight must be ~0
            let max = scores
                .iter()
                .fold(f64::NEG_INFINITY, |m, v| m.max(f64::from(*v)));
            let sum: f64 = scores.iter().map(|v| (f64::from(*v) - max).exp()).sum();
            for path in paths() {
                let mut row = scores.clone();
                row.resize(len.div_ceil(PANEL) * PANEL, 123.0);
                run(path, Softmax { row: &mut row, len });
                for (v, got) in scores.iter().zip(&row) {
                    let want = ((f64::from(*v) - max).exp() / sum) as f32;
                    assert!(
                        (want - got).abs() <= 2e-7 + want * 4e-7,
                        "{path:?}, len {len}: {got} vs {want}"
                    );
                }
                // The padding ends as zeros, never as the subnormal
                // products that cost a microcode assist each.
                assert!(
                    row[len..].iter().all(|v| *v == 0.0),
                    "{path:?}, len {len}: padding {:?}",
                    &row[len..]
                );
            }
        }
    }

    #[test]
    fn fast_layer_norm_matches_the_exact_one_on_every_path() {
        let width = 384;
        let x = data(5 * width, 50);
        let residual = data(5 * width, 51);
        let gamma = data(width, 52);
        let beta = data(width, 53);
        let mut want = x.clone();
        add_layer_norm(&mut want, &residual, &gamma, &beta, 1e-12);
        for path in paths() {
            let mut got = x.clone();
            run(
                path,
                AddLayerNormFast {
                    x: &mut got,
                    residual: &residual,
                    gamma: &gamma,
                    beta: &beta,
                    eps: 1e-12,
                },
            );
            let diff = want
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(diff < 1e-5, "{path:?}: max diff {diff}");
        }
    }

    #[test]
    fn gelu_uses_an_accurate_erf_on_every_path() {
        // erf from tables (Abramowitz & Stegun 7.1).
        for (x, erf_x) in [
            (0.0f32, 0.0f32),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
            (3.5, 0.999_999_3),
            (-1.0, -0.842_700_8),
            (6.0, 1.0),
        ] {
            assert!((erf(x) - erf_x).abs() < 1e-6, "erf({x}) = {}", erf(x));
        }
        let x: Vec<f32> = (0..203).map(|i| (i as f32 - 101.0) / 10.0).collect();
        let want: Vec<f32> = x.iter().map(|v| gelu_scalar(*v)).collect();
        for path in paths() {
            let mut got = x.clone();
            run(path, Gelu { x: &mut got });
            let diff = want
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(diff < 1e-6, "{path:?}: max diff {diff}");
        }
    }
}
