//! The AVX2 kernel. Without VNNI there is no `u8 x i8` product that
//! sums four bytes into a 32-bit lane exactly (`VPMADDUBSW` saturates
//! its 16-bit pair sums), so both operands are widened to `i16` and
//! `VPMADDWD` sums products in pairs into 32-bit lanes: a column's four
//! `k` values of a group land in two lanes, added together once a tile
//! is done. Each output then goes through the scalar [`super::finish`],
//! so the results are the scalar backend's bit for bit.

use core::arch::x86_64::*;

use super::{GROUP, Out, PANEL, PANEL_GROUP, QuantMatrix, QuantRows};

/// Rows per register tile: 6 rows x 2 vectors = 12 accumulators, the
/// 2 widened weight vectors and a broadcast row value, 15 of the 16
/// registers.
const MR: usize = 6;
/// Output columns per tile: a quarter of a panel.
const COLS: usize = 8;

pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// See [`super::product`], which checked every length this relies on.
#[target_feature(enable = "avx2,fma")]
pub(super) fn product(a: &QuantRows, w: &QuantMatrix, mut out: Out<'_>) {
    let stride = a.groups * GROUP;
    let panel_len = w.groups * PANEL_GROUP;
    // The activations widened once per product, not once per panel.
    let wide: Vec<i16> = a.data.iter().map(|&v| i16::from(v)).collect();
    for p in 0..w.n.div_ceil(PANEL) {
        let panel = &w.data[p * panel_len..(p + 1) * panel_len];
        for quarter in 0..PANEL / COLS {
            let c0 = p * PANEL + quarter * COLS;
            if c0 >= w.n {
                break;
            }
            let cols = (w.n - c0).min(COLS);
            let mut r = 0;
            while r < a.rows {
                let m = match a.rows - r {
                    left if left >= MR => MR,
                    left if left >= 4 => 4,
                    left if left >= 2 => 2,
                    _ => 1,
                };
                let rows = &wide[r * stride..(r + m) * stride];
                match m {
                    MR => {
                        let sums = tile::<MR>(rows, a.groups, panel, quarter);
                        write(a, w, r, c0, cols, &sums, &mut out);
                    }
                    4 => {
                        let sums = tile::<4>(rows, a.groups, panel, quarter);
                        write(a, w, r, c0, cols, &sums, &mut out);
                    }
                    2 => {
                        let sums = tile::<2>(rows, a.groups, panel, quarter);
                        write(a, w, r, c0, cols, &sums, &mut out);
                    }
                    _ => {
                        let sums = tile::<1>(rows, a.groups, panel, quarter);
                        write(a, w, r, c0, cols, &sums, &mut out);
                    }
                }
                r += m;
            }
        }
    }
}

/// Writes the raw sums of rows `r..` and columns `c0..c0 + cols`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn write(
    a: &QuantRows,
    w: &QuantMatrix,
    r: usize,
    c0: usize,
    cols: usize,
    sums: &[[i32; COLS]],
    out: &mut Out<'_>,
) {
    for (i, row) in sums.iter().enumerate() {
        for (j, &acc) in row.iter().enumerate().take(cols) {
            super::finish(a, w, r + i, c0 + j, acc, out);
        }
    }
}

/// The raw sums of `M` widened rows (`rows`: `[M][groups * 4]`) and
/// columns `8 * quarter..8 * quarter + 8` of one panel
/// (`[groups][32][4]`).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn tile<const M: usize>(
    rows: &[i16],
    groups: usize,
    panel: &[i8],
    quarter: usize,
) -> [[i32; COLS]; M] {
    let stride = groups * GROUP;
    assert!(rows.len() >= M * stride);
    assert!(panel.len() >= groups * PANEL_GROUP);
    assert!(quarter < PANEL / COLS);
    let a = rows.as_ptr();
    let b = panel.as_ptr();
    let mut acc = [[_mm256_setzero_si256(); 2]; M];
    for g in 0..groups {
        // SAFETY: g < groups and the panel holds groups * 128 bytes;
        // the quarter's 32 bytes start at g * 128 + 32 * quarter, with
        // quarter < 4, so both 16-byte loads are in bounds (unaligned).
        let (w0, w1) = unsafe {
            let at = b.add(g * PANEL_GROUP + quarter * COLS * GROUP);
            (
                _mm256_cvtepi8_epi16(_mm_loadu_si128(at.cast())),
                _mm256_cvtepi8_epi16(_mm_loadu_si128(at.add(16).cast())),
            )
        };
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: i < M and g < groups: the four values at
            // i * stride + 4g lie inside `rows` (M * stride values).
            let quad = unsafe { a.add(i * stride + GROUP * g).cast::<i64>().read_unaligned() };
            let x = _mm256_set1_epi64x(quad);
            acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(x, w0));
            acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(x, w1));
        }
    }
    // Lanes hold [c0 k0+k1, c0 k2+k3, c1 ..] for columns 0-3 and 4-7:
    // the pair sums come out as [c0 c1 c4 c5 | c2 c3 c6 c7].
    let order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    let mut sums = [[0i32; COLS]; M];
    for (acc, dst) in acc.iter().zip(sums.iter_mut()) {
        let pairs = _mm256_hadd_epi32(acc[0], acc[1]);
        let ordered = _mm256_permutevar8x32_epi32(pairs, order);
        // SAFETY: `dst` holds exactly 8 i32 (unaligned store).
        unsafe { _mm256_storeu_si256(dst.as_mut_ptr().cast(), ordered) };
    }
    sums
}
