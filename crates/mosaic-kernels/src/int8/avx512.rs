//! The AVX-512 VNNI kernels. Each function enables the features
//! itself; callers must have checked them with [`available`].

use core::arch::x86_64::*;

use super::{GROUP, Out, PANEL, PANEL_GROUP, QuantMatrix, QuantRows, row_params};

/// Rows per register tile: 12 rows x 2 vectors = 24 accumulators of the
/// 32 registers.
const MR: usize = 12;

pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vnni")
}

/// See [`super::QuantRows::quantize_with`]; `data` is `[rows][stride]`,
/// zeroed.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) fn quantize_rows(
    x: &[f32],
    k: usize,
    stride: usize,
    data: &mut [u8],
    scales: &mut [f32],
    zero_points: &mut [i32],
) {
    assert!(stride >= k);
    assert_eq!(data.len(), x.len() / k * stride);
    for (r, (row, dst)) in x
        .chunks_exact(k)
        .zip(data.chunks_exact_mut(stride))
        .enumerate()
    {
        let full = row.chunks_exact(16);
        let tail = full.remainder();
        let mut vlo = _mm512_setzero_ps();
        let mut vhi = _mm512_setzero_ps();
        for c in full.clone() {
            // SAFETY: `c` holds exactly 16 floats.
            let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
            vlo = _mm512_min_ps(vlo, v);
            vhi = _mm512_max_ps(vhi, v);
        }
        let (lo, hi) = tail.iter().fold(
            (_mm512_reduce_min_ps(vlo), _mm512_reduce_max_ps(vhi)),
            |(lo, hi), &v| (lo.min(v), hi.max(v)),
        );
        let (scale, inv, zp) = row_params(lo, hi);
        scales[r] = scale;
        zero_points[r] = zp;
        let vinv = _mm512_set1_ps(inv);
        let vzp = _mm512_set1_epi32(zp);
        let zero = _mm512_setzero_si512();
        let top = _mm512_set1_epi32(255);
        for (c, d) in full.zip(dst.chunks_exact_mut(16)) {
            // SAFETY: `c` holds exactly 16 floats.
            let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
            // Round to nearest even, as `round_ties_even` does.
            let q = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v, vinv)), vzp);
            let q = _mm512_min_epi32(_mm512_max_epi32(q, zero), top);
            let bytes = _mm512_cvtepi32_epi8(q);
            // SAFETY: `d` holds exactly 16 bytes; unaligned store.
            unsafe { _mm_storeu_si128(d.as_mut_ptr().cast(), bytes) };
        }
        let done = k - tail.len();
        for (d, &v) in dst[done..k].iter_mut().zip(tail) {
            *d = super::quantize_value(v, inv, zp);
        }
    }
}

/// See [`super::product`], which checked every length this relies on.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) fn product(a: &QuantRows, w: &QuantMatrix, mut out: Out<'_>) {
    let rows = a.rows;
    let panels = w.n.div_ceil(PANEL);
    let full = rows / MR * MR;
    for p in 0..panels {
        let mut r = 0;
        while r < full {
            block::<MR>(a, w, p, r, &mut out);
            r += MR;
        }
        while r < rows {
            let left = rows - r;
            if left >= 8 {
                block::<8>(a, w, p, r, &mut out);
                r += 8;
            } else if left >= 4 {
                block::<4>(a, w, p, r, &mut out);
                r += 4;
            } else if left >= 2 {
                block::<2>(a, w, p, r, &mut out);
                r += 2;
            } else {
                block::<1>(a, w, p, r, &mut out);
                r += 1;
            }
        }
    }
}

/// Rows `r..r + M` times panel `p`, written to `out`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
fn block<const M: usize>(a: &QuantRows, w: &QuantMatrix, p: usize, r: usize, out: &mut Out<'_>) {
    let stride = a.groups * GROUP;
    let panel_len = w.groups * PANEL_GROUP;
    let acc = tile::<M>(
        &a.data[r * stride..(r + M) * stride],
        a.groups,
        &w.data[p * panel_len..(p + 1) * panel_len],
    );
    let epilogue = Epilogue::new(w, p);
    for (i, &acc) in acc.iter().enumerate() {
        epilogue.row(a, r + i, acc, out);
    }
}

/// What turns the raw sums of one panel into outputs: the panel's
/// column sums, scales and biases, and which of its columns exist.
/// Shared by every kernel that produces raw sums (VNNI and AMX).
pub(super) struct Epilogue {
    c0: usize,
    n: usize,
    sums: [__m512i; 2],
    scales: [__m512; 2],
    bias: [__m512; 2],
    /// Columns of the panel that exist, per vector.
    lanes: [usize; 2],
}

impl Epilogue {
    /// The epilogue of panel `p` of `w`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    pub(super) fn new(w: &QuantMatrix, p: usize) -> Epilogue {
        let c0 = p * PANEL;
        let cols = c0..c0 + PANEL;
        let (sums, scales, bias) = (
            &w.sums[cols.clone()],
            &w.scales[cols.clone()],
            &w.bias[cols],
        );
        // SAFETY: each of the three slices holds exactly 32 values, so
        // both 16-lane loads at 0 and 16 stay inside it.
        let (sums, scales, bias) = unsafe {
            (
                [
                    _mm512_loadu_epi32(sums.as_ptr()),
                    _mm512_loadu_epi32(sums.as_ptr().add(16)),
                ],
                [
                    _mm512_loadu_ps(scales.as_ptr()),
                    _mm512_loadu_ps(scales.as_ptr().add(16)),
                ],
                [
                    _mm512_loadu_ps(bias.as_ptr()),
                    _mm512_loadu_ps(bias.as_ptr().add(16)),
                ],
            )
        };
        let valid = (w.n - c0).min(PANEL);
        Epilogue {
            c0,
            n: w.n,
            sums,
            scales,
            bias,
            lanes: [valid.min(16), valid.saturating_sub(16)],
        }
    }

    /// Writes row `row` of the product from its raw sums `acc` (the
    /// panel's 32 columns as two 16-lane vectors).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    pub(super) fn row(&self, a: &QuantRows, row: usize, acc: [__m512i; 2], out: &mut Out<'_>) {
        let zp = _mm512_set1_epi32(a.zero_points[row]);
        let row_scale = _mm512_set1_ps(a.scales[row]);
        for (v, acc) in acc.into_iter().enumerate() {
            let lanes = self.lanes[v];
            if lanes == 0 {
                continue;
            }
            let mask: __mmask16 = if lanes == 16 {
                0xFFFF
            } else {
                (1u16 << lanes) - 1
            };
            let exact = _mm512_sub_epi32(acc, _mm512_mullo_epi32(zp, self.sums[v]));
            let start = row * self.n + self.c0 + 16 * v;
            match out {
                Out::Int(o) => {
                    let dst = &mut o[start..start + lanes];
                    // SAFETY: the mask selects exactly the first
                    // `dst.len()` lanes, so only `dst` is written.
                    unsafe { _mm512_mask_storeu_epi32(dst.as_mut_ptr(), mask, exact) };
                }
                Out::Float(o) => {
                    let y = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(exact),
                        _mm512_mul_ps(row_scale, self.scales[v]),
                        self.bias[v],
                    );
                    let dst = &mut o[start..start + lanes];
                    // SAFETY: as above.
                    unsafe { _mm512_mask_storeu_ps(dst.as_mut_ptr(), mask, y) };
                }
            }
        }
    }
}

/// The raw `u8 x i8` sums of `M` rows (`rows`: `[M][groups * 4]`) and
/// one panel (`[groups][32][4]`), as two 16-lane vectors per row.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
fn tile<const M: usize>(rows: &[u8], groups: usize, panel: &[i8]) -> [[__m512i; 2]; M] {
    let stride = groups * GROUP;
    assert!(rows.len() >= M * stride);
    assert!(panel.len() >= groups * PANEL_GROUP);
    let a = rows.as_ptr();
    let b = panel.as_ptr();
    let mut acc = [[_mm512_setzero_si512(); 2]; M];
    for g in 0..groups {
        // SAFETY: g < groups and the panel holds groups * 128 bytes,
        // so both 64-byte loads at g * 128 and g * 128 + 64 are in
        // bounds (unaligned loads).
        let (b0, b1) = unsafe {
            (
                _mm512_loadu_si512(b.add(g * PANEL_GROUP).cast()),
                _mm512_loadu_si512(b.add(g * PANEL_GROUP + 64).cast()),
            )
        };
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: i < M and g < groups: the four bytes at
            // i * stride + 4g lie inside `rows` (M * stride bytes).
            let quad = unsafe { a.add(i * stride + GROUP * g).cast::<i32>().read_unaligned() };
            let x = _mm512_set1_epi32(quad);
            acc[0] = _mm512_dpbusd_epi32(acc[0], x, b0);
            acc[1] = _mm512_dpbusd_epi32(acc[1], x, b1);
        }
    }
    acc
}
