//! Dense layers: weights packed in panels and the tiled matrix product
//! every linear layer (and attention's two products) runs through.

use pulp::{Arch, Simd, WithSimd};

/// Output columns per packed weight panel.
pub(in crate::local_model) const PANEL: usize = 32;

/// The weights and bias of a linear layer `y = x W^T + b`, packed for
/// [`linear`]: panels of [`PANEL`] output columns, each stored `[k][PANEL]`,
/// so the kernel streams one panel contiguously.
pub(in crate::local_model) struct Packed {
    k: usize,
    n: usize,
    data: Vec<f32>,
    bias: Vec<f32>,
}

impl Packed {
    /// Packs `weight` (`[n][k]`, row-major, the PyTorch `Linear` layout).
    /// Several weights with the same `k` are stacked along `n`.
    pub(in crate::local_model) fn new(weights: &[(&[f32], &[f32])], k: usize) -> Packed {
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
    pub(in crate::local_model) fn n(&self) -> usize {
        self.n
    }

    /// Input width.
    pub(in crate::local_model) fn k(&self) -> usize {
        self.k
    }

    /// Panels of [`PANEL`] output columns.
    pub(in crate::local_model) fn panel_count(&self) -> usize {
        self.n / PANEL
    }

    pub(super) fn panels(&self) -> Panels<'_> {
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
pub(super) struct Panels<'a> {
    pub(super) k: usize,
    pub(super) n: usize,
    pub(super) data: &'a [f32],
    pub(super) bias: &'a [f32],
}

/// `out[t][n] = x[t][k] W^T + b` for every row of `x`.
pub(in crate::local_model) fn linear(x: &[f32], w: &Packed, out: &mut [f32]) {
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
pub(in crate::local_model) fn linear_panels(
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

pub(super) struct Linear<'a> {
    pub(super) x: &'a [f32],
    pub(super) w: Panels<'a>,
    pub(super) out: &'a mut [f32],
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
pub(super) fn matmul<S: Simd>(simd: S, x: &[f32], w: &Panels<'_>, out: &mut [f32]) {
    let lanes = core::mem::size_of::<S::f32s>() / core::mem::size_of::<f32>();
    match lanes {
        // 6 rows x 2 panels (4 vectors) = 24 of the 32 AVX-512 registers:
        // 10 loads per 24 fused multiply-adds, where 12 rows x 1 panel
        // took 14 (12 broadcasts), and rows left over in one tile, not
        // 8 + 2 + 1 passes over the panel. Faster on Zen 4 in each of
        // MiniLM's four dense shapes at 15 to 138 rows (thread CPU time,
        // alternated: 1% to 24% on the means). The same bits: each
        // output is its bias and one fused multiply-add per `k` in order.
        16 => linear_pairs(simd, x, w, out),
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

/// Rows in tiles of [`PAIR_ROWS`] over two panels at once, then the
/// remaining rows in one tile of their count; an odd last panel as
/// [`linear_blocks`] computes it.
#[inline(always)]
fn linear_pairs<S: Simd>(simd: S, x: &[f32], w: &Panels<'_>, out: &mut [f32]) {
    let k = w.k;
    let n = w.n;
    let t = x.len() / k;
    let panel_len = k * PANEL;
    let panel_count = w.data.len() / panel_len;
    for q in 0..panel_count / 2 {
        let p = 2 * q;
        let panels = [
            &w.data[p * panel_len..(p + 1) * panel_len],
            &w.data[(p + 1) * panel_len..(p + 2) * panel_len],
        ];
        let bias = &w.bias[p * PANEL..(p + 2) * PANEL];
        let mut r = 0;
        while r + PAIR_ROWS <= t {
            tile_pair::<S, PAIR_ROWS>(simd, x, r, k, panels, bias, out, n, p);
            r += PAIR_ROWS;
        }
        match t - r {
            5 => tile_pair::<S, 5>(simd, x, r, k, panels, bias, out, n, p),
            4 => tile_pair::<S, 4>(simd, x, r, k, panels, bias, out, n, p),
            3 => tile_pair::<S, 3>(simd, x, r, k, panels, bias, out, n, p),
            2 => tile_pair::<S, 2>(simd, x, r, k, panels, bias, out, n, p),
            1 => tile_pair::<S, 1>(simd, x, r, k, panels, bias, out, n, p),
            _ => {}
        }
    }
    if panel_count % 2 == 1 {
        let p = panel_count - 1;
        let last = Panels {
            k,
            n,
            data: &w.data[..(p + 1) * panel_len],
            bias: w.bias,
        };
        linear_blocks_from::<S, 2, 12>(simd, x, &last, out, p);
    }
}

/// Rows per tile of [`tile_pair`]: 6 rows x 4 vectors = 24 of the 32
/// AVX-512 registers, 4 weight loads and 6 broadcasts per 24 fused
/// multiply-adds.
const PAIR_ROWS: usize = 6;

/// One `M x 2 PANEL` output tile: rows `r..r + M`, panels `p` and `p + 1`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn tile_pair<S: Simd, const M: usize>(
    simd: S,
    x: &[f32],
    r: usize,
    k: usize,
    panels: [&[f32]; 2],
    bias: &[f32],
    out: &mut [f32],
    n: usize,
    p: usize,
) {
    let rows: [&[f32]; M] = core::array::from_fn(|i| &x[(r + i) * k..(r + i + 1) * k]);
    let (bias_v, _) = S::as_simd_f32s(bias);
    let mut acc: [[S::f32s; 4]; M] = [core::array::from_fn(|v| bias_v[v]); M];
    for (kk, (l0, l1)) in panels[0]
        .chunks_exact(PANEL)
        .zip(panels[1].chunks_exact(PANEL))
        .enumerate()
    {
        let (b0, _) = S::as_simd_f32s(l0);
        let (b1, _) = S::as_simd_f32s(l1);
        let b = [b0[0], b0[1], b1[0], b1[1]];
        for i in 0..M {
            let a = simd.splat_f32s(rows[i][kk]);
            for v in 0..4 {
                acc[i][v] = simd.mul_add_e_f32s(a, b[v], acc[i][v]);
            }
        }
    }
    for (i, acc_row) in acc.iter().enumerate() {
        let start = (r + i) * n + p * PANEL;
        let (dst, _) = S::as_mut_simd_f32s(&mut out[start..start + 2 * PANEL]);
        dst[..4].copy_from_slice(acc_row);
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
    linear_blocks_from::<S, NV, MR>(simd, x, w, out, 0)
}

/// [`linear_blocks`] from panel `first` on.
#[inline(always)]
fn linear_blocks_from<S: Simd, const NV: usize, const MR: usize>(
    simd: S,
    x: &[f32],
    w: &Panels<'_>,
    out: &mut [f32],
    first: usize,
) {
    let k = w.k;
    let n = w.n;
    let t = x.len() / k;
    let full = t / MR * MR;
    for (p, panel) in w.data.chunks_exact(k * PANEL).enumerate().skip(first) {
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
