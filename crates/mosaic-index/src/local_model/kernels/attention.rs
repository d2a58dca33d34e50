//! Multi-head self-attention of one sequence, with its softmax.

use pulp::{Arch, Simd, WithSimd};

use super::linear::{PANEL, Panels, matmul};

/// A relative position bias added to every attention score (MPNet):
/// `table[h * width + center + j - i]` for query `i` and key `j` of head
/// `h`, where `width = 2 * center + 1`, so a sequence may be up to
/// `center + 1` tokens long.
#[derive(Clone, Copy)]
pub(in crate::local_model) struct RelativeBias<'a> {
    pub(in crate::local_model) table: &'a [f32],
    pub(in crate::local_model) center: usize,
}

/// Multi-head self-attention of one sequence without padding.
///
/// `qkv` is `[len][3 * hidden]` (queries, keys, values side by side), `out`
/// is `[len][hidden]`; `scratch` is reused between calls. The head width
/// (`hidden / heads`) is a multiple of [`PANEL`]. Per head, both products
/// (`Q K^T` and `P V`) run through the same tiled kernel as the dense
/// layers, with keys and values packed as its right-hand side. `bias`,
/// when given, is added to the scaled scores before the softmax.
pub(in crate::local_model) fn attention(
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

pub(super) struct Attention<'a> {
    pub(super) qkv: &'a [f32],
    pub(super) out: &'a mut [f32],
    pub(super) heads: usize,
    pub(super) hidden: usize,
    pub(super) bias: Option<RelativeBias<'a>>,
    pub(super) scratch: &'a mut Vec<f32>,
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
pub(super) fn softmax_row<S: Simd>(simd: S, row: &mut [f32], len: usize) {
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
