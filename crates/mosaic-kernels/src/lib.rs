//! # mosaic-kernels
//!
//! The unsafe SIMD code of Mosaic Memory, kept small and behind a safe API
//! so every other crate can keep `#![forbid(unsafe_code)]`.
//!
//! What is here: [`dots`], the inner products every vector search scores
//! with (AVX2 when the CPU has it, the same bits as the portable loop);
//! [`prefetch`], a cache hint the vector graph's search issues for the
//! neighbours it is about to score; and int8 matrix
//! products for the dense layers of the local embedder. A weight matrix
//! is quantised once, per output channel and symmetrically, to `i8`
//! ([`QuantMatrix`]); activations are quantised per
//! row to `u8` with a per-row scale and zero point ([`QuantRows`]); the
//! product accumulates `u8 x i8` in `i32`, subtracts the zero point times
//! the weight column sums, and [`linear`] dequantises with both scales and
//! adds the bias.
//!
//! The backends ([`Backend`]):
//!
//! - `Scalar`: portable Rust, every CPU.
//! - `Avx2`: `VPMADDWD` on AVX2 registers (x86-64 without AVX-512 VNNI):
//!   the `u8` and `i8` operands widened to `i16` and multiplied in pairs,
//!   exactly (`VPMADDUBSW` would saturate), with the scalar quantisation
//!   and epilogue.
//! - `Avx512Vnni`: `VPDPBUSD` on AVX-512 registers (x86-64).
//! - `Amx`: Intel AMX-INT8 `TDPBUSD` on tile registers (x86-64 Linux), for
//!   the products whose `k` is a multiple of 64 (others run on the VNNI
//!   kernel); quantisation and the epilogue stay on AVX-512 VNNI, which
//!   it therefore also requires. Linux enables the tile state per process
//!   on request: the first [`Backend::is_available`] check of `Amx` checks
//!   CPUID (AMX-TILE, AMX-INT8) and XCR0 (tile state saved by the OS), and
//!   asks for it once with `arch_prctl(ARCH_REQ_XCOMP_PERM,
//!   XFEATURE_XTILEDATA)`; the answer is cached for the process. Each
//!   product call configures the calling thread's tiles and releases them
//!   before it returns.
//!
//! Every kernel has a portable scalar twin with bit-identical results (the
//! integer products exactly; the dequantised floats too, since all
//! backends use the same fused multiply-add and round-to-nearest-even
//! conversions). [`Backend::best`] picks one at run time (AMX, then AVX-512
//! VNNI, then AVX2, then scalar); the `_with` functions force one, for
//! tests.
//!
//! Safety: slices in, slices out. The lengths of all inputs are checked
//! before any unsafe block (the panicking checks are the only failure
//! mode); each unsafe block says why it stays in bounds.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]

/// Output columns per packed weight panel (two 16-lane vectors).
const PANEL: usize = 32;
/// Consecutive `k` values one 32-bit lane of `VPDPBUSD` sums.
const GROUP: usize = 4;
/// Bytes of one packed panel per group of [`GROUP`] `k` values.
const PANEL_GROUP: usize = PANEL * GROUP;

/// The implementation a kernel runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Portable Rust, every CPU.
    Scalar,
    /// AVX2 and FMA, x86-64 only: for CPUs without AVX-512 VNNI.
    Avx2,
    /// AVX-512 (F, BW) with VNNI, x86-64 only.
    Avx512Vnni,
    /// Intel AMX (AMX-TILE, AMX-INT8) tile products, with the AVX-512
    /// VNNI kernels for the rest (quantisation, the epilogue, and shapes
    /// the tiles do not fit); x86-64 Linux only, where the kernel must
    /// enable the tile state and grant this process its use.
    Amx,
}

impl Backend {
    /// The fastest backend this CPU supports.
    pub fn best() -> Backend {
        if Backend::Amx.is_available() {
            Backend::Amx
        } else if Backend::Avx512Vnni.is_available() {
            Backend::Avx512Vnni
        } else if Backend::Avx2.is_available() {
            Backend::Avx2
        } else {
            Backend::Scalar
        }
    }

    /// Whether this CPU can run the backend.
    pub fn is_available(self) -> bool {
        match self {
            Backend::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => avx2::available(),
            #[cfg(not(target_arch = "x86_64"))]
            Backend::Avx2 => false,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512Vnni => avx512::available(),
            #[cfg(not(target_arch = "x86_64"))]
            Backend::Avx512Vnni => false,
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            Backend::Amx => amx::available(),
            #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
            Backend::Amx => false,
        }
    }

    fn check(self) {
        assert!(self.is_available(), "{self:?} is not available on this CPU");
    }
}

/// A weight matrix `W` (`n` outputs by `k` inputs) quantised to `i8` per
/// output channel (`w ~ scale[c] * q[c][k]`, `q` in `-127..=127`), with its
/// bias, packed for the kernels: panels of 32 output columns, each stored
/// as groups of four `k` values per column (`[k / 4][32][4]`).
#[derive(Clone, Debug)]
pub struct QuantMatrix {
    n: usize,
    k: usize,
    /// `k` rounded up to whole groups, divided by [`GROUP`].
    groups: usize,
    /// `n.div_ceil(PANEL)` panels of `groups * PANEL_GROUP` bytes.
    data: Vec<i8>,
    /// Per column, padded with zeros to whole panels (as are the next two).
    scales: Vec<f32>,
    /// Sum of the column's quantised weights.
    sums: Vec<i32>,
    bias: Vec<f32>,
}

impl QuantMatrix {
    /// Quantises and packs `y = x W^T + b` weights. Each part is a weight
    /// `[n_i][k]` (row-major, the PyTorch `Linear` layout) and its bias
    /// `[n_i]`; parts are stacked along the outputs.
    ///
    /// Panics when a weight's length is not its bias's length times `k`,
    /// or `k` is zero.
    pub fn quantize(parts: &[(&[f32], &[f32])], k: usize) -> QuantMatrix {
        assert!(k > 0, "k must be positive");
        let mut q = Vec::new();
        let mut scales = Vec::new();
        let mut bias = Vec::new();
        for (w, b) in parts {
            assert_eq!(w.len(), b.len() * k, "weight is not [bias.len()][k]");
            for row in w.chunks_exact(k) {
                let at = q.len();
                q.resize(at + k, 0);
                scales.push(quantize_i8(row, &mut q[at..]));
            }
            bias.extend_from_slice(b);
        }
        QuantMatrix::from_i8(&q, &scales, &bias, k)
    }

    /// Packs already quantised weights `q` (`[n][k]`, row-major), with
    /// `n = scales.len()`.
    ///
    /// Panics when `q.len() != scales.len() * k`, `bias.len() !=
    /// scales.len()`, or `k` is zero.
    pub fn from_i8(q: &[i8], scales: &[f32], bias: &[f32], k: usize) -> QuantMatrix {
        assert!(k > 0, "k must be positive");
        let n = scales.len();
        assert_eq!(q.len(), n * k, "weights are not [scales.len()][k]");
        assert_eq!(bias.len(), n, "one bias per output");
        let groups = k.div_ceil(GROUP);
        let panels = n.div_ceil(PANEL);
        let mut data = vec![0i8; panels * groups * PANEL_GROUP];
        let mut sums = vec![0i32; panels * PANEL];
        for (c, row) in q.chunks_exact(k).enumerate() {
            let (p, j) = (c / PANEL, c % PANEL);
            for (kk, &v) in row.iter().enumerate() {
                let (g, b) = (kk / GROUP, kk % GROUP);
                data[(p * groups + g) * PANEL_GROUP + j * GROUP + b] = v;
            }
            sums[c] = row.iter().map(|&v| i32::from(v)).sum();
        }
        let pad = |v: &[f32]| {
            let mut v = v.to_vec();
            v.resize(panels * PANEL, 0.0);
            v
        };
        QuantMatrix {
            n,
            k,
            groups,
            data,
            scales: pad(scales),
            sums,
            bias: pad(bias),
        }
    }

    /// Outputs (columns of the product).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Inputs (length of an activation row).
    pub fn k(&self) -> usize {
        self.k
    }

    /// The dequantised weights, `[n][k]` row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.n * self.k);
        for c in 0..self.n {
            let (p, j) = (c / PANEL, c % PANEL);
            for kk in 0..self.k {
                let (g, b) = (kk / GROUP, kk % GROUP);
                let q = self.data[(p * self.groups + g) * PANEL_GROUP + j * GROUP + b];
                out.push(f32::from(q) * self.scales[c]);
            }
        }
        out
    }
}

/// Activation rows quantised to `u8`, each with its own scale and zero
/// point (`x ~ scale[r] * (q[r][k] - zero_point[r])`), stored with each row
/// padded to whole groups of four. Reuse one value to avoid allocations.
#[derive(Clone, Debug, Default)]
pub struct QuantRows {
    rows: usize,
    k: usize,
    groups: usize,
    data: Vec<u8>,
    scales: Vec<f32>,
    zero_points: Vec<i32>,
}

/// Scale, its inverse and the zero point mapping `lo..=hi` (which holds
/// zero) onto `0..=255`.
fn row_params(lo: f32, hi: f32) -> (f32, f32, i32) {
    let range = hi - lo;
    if range > 0.0 && range.is_finite() {
        let inv = 255.0 / range;
        let zp = (-lo * inv).round_ties_even().clamp(0.0, 255.0) as i32;
        (range / 255.0, inv, zp)
    } else {
        (1.0, 1.0, 0)
    }
}

#[inline]
fn quantize_value(v: f32, inv: f32, zp: i32) -> u8 {
    ((v * inv).round_ties_even() as i32 + zp).clamp(0, 255) as u8
}

impl QuantRows {
    /// An empty set of rows.
    pub fn new() -> QuantRows {
        QuantRows::default()
    }

    /// Quantises `x` (rows of `k` values) in place of the current rows, on
    /// the best backend.
    ///
    /// Panics when `k` is zero or `x.len()` is not a multiple of `k`.
    pub fn quantize(&mut self, x: &[f32], k: usize) {
        self.quantize_with(Backend::best(), x, k);
    }

    /// [`QuantRows::quantize`] on a chosen backend (panics when the CPU
    /// lacks it). For finite inputs every backend gives the same bytes,
    /// scales and zero points.
    pub fn quantize_with(&mut self, backend: Backend, x: &[f32], k: usize) {
        backend.check();
        assert!(k > 0, "k must be positive");
        assert_eq!(x.len() % k, 0, "x is not whole rows of k");
        let rows = x.len() / k;
        self.rows = rows;
        self.k = k;
        self.groups = k.div_ceil(GROUP);
        let stride = self.groups * GROUP;
        self.data.clear();
        self.data.resize(rows * stride, 0);
        self.scales.clear();
        self.scales.resize(rows, 0.0);
        self.zero_points.clear();
        self.zero_points.resize(rows, 0);
        match backend {
            // The AVX2 backend quantises with the scalar code: the rows
            // are a small part of a layer's work next to the product.
            Backend::Scalar | Backend::Avx2 => {
                for (r, row) in x.chunks_exact(k).enumerate() {
                    let (lo, hi) = row
                        .iter()
                        .fold((0.0f32, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
                    let (scale, inv, zp) = row_params(lo, hi);
                    self.scales[r] = scale;
                    self.zero_points[r] = zp;
                    for (d, &v) in self.data[r * stride..].iter_mut().zip(row) {
                        *d = quantize_value(v, inv, zp);
                    }
                }
            }
            // AMX has nothing for this; its backend requires AVX-512 VNNI.
            Backend::Avx512Vnni | Backend::Amx => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `backend.check()` above confirmed the CPU has
                // every feature the function enables (AMX's availability
                // includes AVX-512 VNNI's).
                unsafe {
                    avx512::quantize_rows(
                        x,
                        k,
                        stride,
                        &mut self.data,
                        &mut self.scales,
                        &mut self.zero_points,
                    )
                };
            }
        }
    }

    /// Rows of already quantised values `q` (`[scales.len()][k]`) with
    /// their scales and zero points (each in `0..=255`).
    ///
    /// Panics on mismatched lengths, a zero `k` or a zero point outside
    /// `0..=255`.
    pub fn from_u8(q: &[u8], k: usize, scales: &[f32], zero_points: &[i32]) -> QuantRows {
        assert!(k > 0, "k must be positive");
        let rows = scales.len();
        assert_eq!(q.len(), rows * k, "q is not [scales.len()][k]");
        assert_eq!(zero_points.len(), rows, "one zero point per row");
        assert!(
            zero_points.iter().all(|z| (0..=255).contains(z)),
            "zero points lie in 0..=255"
        );
        let groups = k.div_ceil(GROUP);
        let stride = groups * GROUP;
        let mut data = vec![0u8; rows * stride];
        for (dst, src) in data.chunks_exact_mut(stride).zip(q.chunks_exact(k)) {
            dst[..k].copy_from_slice(src);
        }
        QuantRows {
            rows,
            k,
            groups,
            data,
            scales: scales.to_vec(),
            zero_points: zero_points.to_vec(),
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Length of a row.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The dequantised rows, `[rows][k]`.
    pub fn dequantize(&self) -> Vec<f32> {
        let stride = self.groups * GROUP;
        let mut out = Vec::with_capacity(self.rows * self.k);
        for r in 0..self.rows {
            let (scale, zp) = (self.scales[r], self.zero_points[r]);
            out.extend(
                self.data[r * stride..r * stride + self.k]
                    .iter()
                    .map(|&q| (i32::from(q) - zp) as f32 * scale),
            );
        }
        out
    }
}

/// Where a product goes: the exact integers, or dequantised with the bias.
enum Out<'a> {
    Int(&'a mut [i32]),
    Float(&'a mut [f32]),
}

impl Out<'_> {
    fn len(&self) -> usize {
        match self {
            Out::Int(o) => o.len(),
            Out::Float(o) => o.len(),
        }
    }
}

/// `out[r][c] = sum_k (a[r][k] - zero_point[r]) * q[c][k]`, exactly (in
/// wrapping `i32`, which cannot wrap for `k` below 66,000), on the best
/// backend.
///
/// Panics when `a.k() != w.k()` or `out.len() != a.rows() * w.n()`.
pub fn matmul_i32(a: &QuantRows, w: &QuantMatrix, out: &mut [i32]) {
    matmul_i32_with(Backend::best(), a, w, out);
}

/// [`matmul_i32`] on a chosen backend (panics when the CPU lacks it).
pub fn matmul_i32_with(backend: Backend, a: &QuantRows, w: &QuantMatrix, out: &mut [i32]) {
    product(backend, a, w, Out::Int(out));
}

/// `out[r][c] = scale[r] * scale[c] * (the exact product of
/// [`matmul_i32`]) + bias[c]`: the layer `x W^T + b` in int8, on the best
/// backend.
///
/// Panics when `a.k() != w.k()` or `out.len() != a.rows() * w.n()`.
pub fn linear(a: &QuantRows, w: &QuantMatrix, out: &mut [f32]) {
    linear_with(Backend::best(), a, w, out);
}

/// [`linear`] on a chosen backend (panics when the CPU lacks it).
pub fn linear_with(backend: Backend, a: &QuantRows, w: &QuantMatrix, out: &mut [f32]) {
    product(backend, a, w, Out::Float(out));
}

fn product(backend: Backend, a: &QuantRows, w: &QuantMatrix, out: Out<'_>) {
    backend.check();
    assert_eq!(a.k, w.k, "activation rows and weights differ in k");
    assert_eq!(out.len(), a.rows * w.n, "out is not [rows][n]");
    // The invariants the constructors establish, checked again here
    // because the SIMD kernel relies on them.
    let panels = w.n.div_ceil(PANEL);
    assert_eq!(a.groups, w.groups);
    assert_eq!(a.data.len(), a.rows * a.groups * GROUP);
    assert_eq!(a.scales.len(), a.rows);
    assert_eq!(a.zero_points.len(), a.rows);
    assert_eq!(w.data.len(), panels * w.groups * PANEL_GROUP);
    assert_eq!(w.scales.len(), panels * PANEL);
    assert_eq!(w.sums.len(), panels * PANEL);
    assert_eq!(w.bias.len(), panels * PANEL);
    match backend {
        Backend::Scalar => product_scalar(a, w, out),
        Backend::Avx2 => {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `backend.check()` above confirmed the CPU has every
            // feature the function enables; the lengths it relies on were
            // asserted just above.
            unsafe {
                avx2::product(a, w, out)
            };
        }
        Backend::Avx512Vnni => {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `backend.check()` above confirmed the CPU has every
            // feature the function enables; the lengths it relies on were
            // asserted just above.
            unsafe {
                avx512::product(a, w, out)
            };
        }
        Backend::Amx => {
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            // SAFETY: as above; `backend.check()` also confirmed the OS
            // enabled the tile state and granted this process its use.
            unsafe {
                amx::product(a, w, out)
            };
        }
    }
}

fn product_scalar(a: &QuantRows, w: &QuantMatrix, mut out: Out<'_>) {
    let stride = a.groups * GROUP;
    let panel_len = w.groups * PANEL_GROUP;
    for (r, row) in a.data.chunks_exact(stride).enumerate() {
        for (p, panel) in w.data.chunks_exact(panel_len).enumerate() {
            let mut acc = [0i32; PANEL];
            for (quad, line) in row.chunks_exact(GROUP).zip(panel.chunks_exact(PANEL_GROUP)) {
                for (s, wq) in acc.iter_mut().zip(line.chunks_exact(GROUP)) {
                    let dot: i32 = quad
                        .iter()
                        .zip(wq)
                        .map(|(&x, &y)| i32::from(x) * i32::from(y))
                        .sum();
                    *s = s.wrapping_add(dot);
                }
            }
            let c0 = p * PANEL;
            let valid = (w.n - c0).min(PANEL);
            for (j, &acc) in acc.iter().enumerate().take(valid) {
                finish(a, w, r, c0 + j, acc, &mut out);
            }
        }
    }
}

/// Output `(r, c)` from its raw `u8 x i8` sum `acc`: the zero point's share
/// taken off, then the exact integer or its dequantised value.
#[inline(always)]
fn finish(a: &QuantRows, w: &QuantMatrix, r: usize, c: usize, acc: i32, out: &mut Out<'_>) {
    let exact = acc.wrapping_sub(a.zero_points[r].wrapping_mul(w.sums[c]));
    match out {
        Out::Int(o) => o[r * w.n + c] = exact,
        Out::Float(o) => {
            o[r * w.n + c] = (exact as f32).mul_add(a.scales[r] * w.scales[c], w.bias[c]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
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
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
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
    fn block<const M: usize>(
        a: &QuantRows,
        w: &QuantMatrix,
        p: usize,
        r: usize,
        out: &mut Out<'_>,
    ) {
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
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod amx {
    //! The AMX-INT8 product: `TDPBUSD` tiles hold the raw `u8 x i8` sums,
    //! and the AVX-512 epilogue of [`super::avx512`] turns them into
    //! outputs. Callers must have checked [`available`].
    //!
    //! Every tile is 16 rows of 64 bytes. An A tile is 16 activation rows
    //! by 64 `k` bytes (a plain strided load of [`QuantRows`]); a B tile is
    //! 16 groups of four `k` values by 16 columns, which is exactly half of
    //! a packed panel's 16 groups (`[16][32][4]`) read with a 128-byte
    //! stride; an accumulator tile is 16 rows by 16 `i32` columns.

    use core::arch::asm;
    use core::arch::x86_64::*;
    use core::marker::PhantomData;
    use std::sync::OnceLock;

    use super::avx512::{self, Epilogue};
    use super::{GROUP, Out, PANEL, PANEL_GROUP, QuantMatrix, QuantRows};

    /// Rows of every tile.
    const TM: usize = 16;
    /// Bytes of every tile row.
    const TB: usize = 64;
    /// Groups of four `k` values one A tile row (and one B tile) covers.
    const STEP: usize = TB / GROUP;

    /// Whether the CPU has AMX-TILE and AMX-INT8 (and AVX-512 VNNI for the
    /// rest), the OS enabled the tile state, and this process was granted
    /// its use. Asked once per process.
    pub(super) fn available() -> bool {
        static AVAILABLE: OnceLock<bool> = OnceLock::new();
        *AVAILABLE.get_or_init(|| {
            avx512::available() && cpu_has_amx_int8() && os_enables_tiles() && request_tiles()
        })
    }

    /// CPUID leaf 7, subleaf 0: EDX bit 24 is AMX-TILE, bit 25 AMX-INT8.
    fn cpu_has_amx_int8() -> bool {
        if __cpuid(0).eax < 7 {
            return false;
        }
        let edx = __cpuid_count(7, 0).edx;
        edx & (1 << 24) != 0 && edx & (1 << 25) != 0
    }

    /// XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA): the OS saves and
    /// restores the tile state.
    fn os_enables_tiles() -> bool {
        // CPUID leaf 1, ECX bit 27 (OSXSAVE): the OS enabled XGETBV.
        if __cpuid(1).ecx & (1 << 27) == 0 {
            return false;
        }
        let (lo, hi): (u32, u32);
        // SAFETY: OSXSAVE is set, so XGETBV with ECX = 0 is defined; it
        // only reads XCR0 into EDX:EAX.
        unsafe {
            asm!(
                "xgetbv",
                in("ecx") 0u32,
                out("eax") lo,
                out("edx") hi,
                options(nomem, nostack, preserves_flags),
            );
        }
        let xcr0 = (u64::from(hi) << 32) | u64::from(lo);
        xcr0 & (0b11 << 17) == 0b11 << 17
    }

    /// Linux keeps the tile data off until a process asks:
    /// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, for the whole
    /// process. True when granted.
    fn request_tiles() -> bool {
        const SYS_ARCH_PRCTL: usize = 158;
        const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
        const XFEATURE_XTILEDATA: usize = 18;
        let ret: isize;
        // SAFETY: this system call reads and writes no user memory; it only
        // changes which register state the kernel lets this process use.
        // `syscall` overwrites RCX and R11, declared as clobbered.
        unsafe {
            asm!(
                "syscall",
                inlateout("rax") SYS_ARCH_PRCTL as isize => ret,
                in("rdi") ARCH_REQ_XCOMP_PERM,
                in("rsi") XFEATURE_XTILEDATA,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret == 0
    }

    /// The operand of `LDTILECFG`.
    #[repr(C, align(64))]
    struct Config {
        palette: u8,
        start_row: u8,
        reserved: [u8; 14],
        /// Bytes per row of each tile.
        colsb: [u16; 16],
        /// Rows of each tile.
        rows: [u8; 16],
    }

    /// Proof that this thread's tiles are configured: `tmm0..=tmm7`, each
    /// 16 rows of 64 bytes. Dropping it releases them (on unwinding too).
    /// Not `Send`: the tile state belongs to the thread.
    struct Tiles(PhantomData<*const ()>);

    impl Tiles {
        /// Configures this thread's tiles.
        ///
        /// # Safety
        ///
        /// [`available`] must have returned true.
        unsafe fn load() -> Tiles {
            let mut config = Config {
                palette: 1,
                start_row: 0,
                reserved: [0; 14],
                colsb: [0; 16],
                rows: [0; 16],
            };
            config.colsb[..8].fill(TB as u16);
            config.rows[..8].fill(TM as u8);
            // SAFETY: the caller checked that the CPU has AMX and the OS
            // granted it; LDTILECFG reads the 64 bytes of `config`, which is
            // 64-byte aligned and a valid palette-1 configuration.
            unsafe {
                asm!(
                    "ldtilecfg [{}]",
                    in(reg) &raw const config,
                    options(nostack, readonly, preserves_flags),
                );
            }
            Tiles(PhantomData)
        }
    }

    impl Drop for Tiles {
        fn drop(&mut self) {
            // SAFETY: a `Tiles` exists only after `Tiles::load`, so AMX is
            // usable; TILERELEASE touches no memory.
            unsafe { asm!("tilerelease", options(nomem, nostack, preserves_flags)) };
        }
    }

    /// The raw sums of up to 32 rows and one panel, as the tiles store
    /// them: `[row][32 columns]`.
    #[repr(C, align(64))]
    struct Sums([[i32; PANEL]; 2 * TM]);

    /// The raw `u8 x i8` sums of `T * 16` rows (`rows`, `[T * 16][stride]`)
    /// and one panel (`[groups][32][4]`) into `sums`, `T` being 1 or 2.
    #[inline]
    fn raw_sums<const T: usize>(
        _tiles: &Tiles,
        rows: &[u8],
        stride: usize,
        groups: usize,
        panel: &[i8],
        sums: &mut Sums,
    ) {
        assert!(T == 1 || T == 2);
        assert!(groups.is_multiple_of(STEP));
        assert!(stride >= groups * GROUP);
        assert!(rows.len() >= T * TM * stride);
        assert!(panel.len() >= groups * PANEL_GROUP);
        let (a, b) = (rows.as_ptr(), panel.as_ptr());
        // SAFETY: `_tiles` proves tmm0..=tmm3 are configured on this
        // thread; TILEZERO touches no memory.
        unsafe {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                options(nomem, nostack, preserves_flags),
            );
        }
        for g in (0..groups).step_by(STEP) {
            if T == 2 {
                // SAFETY: tiles as above. A tile `t` reads 16 rows of 64
                // bytes at `(16t + i) * stride + 4g` for i < 16: the last
                // byte is below `32 * stride` (as g + 16 <= groups and
                // 4 * groups <= stride), inside `rows`. A B tile reads 16
                // rows of 64 bytes at `(g + i) * 128` (+ 64): the last byte
                // is below `(g + 16) * 128 <= groups * 128`, inside `panel`.
                unsafe {
                    asm!(
                        "tileloadd tmm4, [{a0} + {sa}*1]",
                        "tileloadd tmm6, [{b} + {sb}*1]",
                        "tdpbusd tmm0, tmm4, tmm6",
                        "tileloadd tmm7, [{b} + {sb}*1 + 64]",
                        "tdpbusd tmm1, tmm4, tmm7",
                        "tileloadd tmm5, [{a1} + {sa}*1]",
                        "tdpbusd tmm2, tmm5, tmm6",
                        "tdpbusd tmm3, tmm5, tmm7",
                        a0 = in(reg) a.add(g * GROUP),
                        a1 = in(reg) a.add(TM * stride + g * GROUP),
                        sa = in(reg) stride,
                        b = in(reg) b.add(g * PANEL_GROUP),
                        sb = in(reg) PANEL_GROUP,
                        options(nostack, readonly, preserves_flags),
                    );
                }
            } else {
                // SAFETY: as above, with the one A tile.
                unsafe {
                    asm!(
                        "tileloadd tmm4, [{a0} + {sa}*1]",
                        "tileloadd tmm6, [{b} + {sb}*1]",
                        "tdpbusd tmm0, tmm4, tmm6",
                        "tileloadd tmm7, [{b} + {sb}*1 + 64]",
                        "tdpbusd tmm1, tmm4, tmm7",
                        a0 = in(reg) a.add(g * GROUP),
                        sa = in(reg) stride,
                        b = in(reg) b.add(g * PANEL_GROUP),
                        sb = in(reg) PANEL_GROUP,
                        options(nostack, readonly, preserves_flags),
                    );
                }
            }
        }
        let c = sums.0.as_mut_ptr().cast::<u8>();
        // SAFETY: tiles as above. Each store writes 16 rows of 64 bytes,
        // 128 bytes apart, at byte 0 or 64 of row 0 (and, for T = 2, of
        // row 16) of `sums`: at most 32 rows of 128 bytes, all inside it.
        unsafe {
            asm!(
                "tilestored [{c} + {sc}*1], tmm0",
                "tilestored [{c} + {sc}*1 + 64], tmm1",
                c = in(reg) c,
                sc = in(reg) PANEL * 4,
                options(nostack, preserves_flags),
            );
            if T == 2 {
                asm!(
                    "tilestored [{c} + {sc}*1], tmm2",
                    "tilestored [{c} + {sc}*1 + 64], tmm3",
                    c = in(reg) c.add(TM * PANEL * 4),
                    sc = in(reg) PANEL * 4,
                    options(nostack, preserves_flags),
                );
            }
        }
    }

    /// See [`super::product`], which checked every length this relies on.
    /// Falls back to the AVX-512 VNNI kernel when `k` is not whole tiles.
    ///
    /// # Safety
    ///
    /// [`available`] must have returned true.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn product(a: &QuantRows, w: &QuantMatrix, mut out: Out<'_>) {
        let groups = a.groups;
        if !groups.is_multiple_of(STEP) {
            return avx512::product(a, w, out);
        }
        // SAFETY: the caller checked `available`.
        let tiles = unsafe { Tiles::load() };
        let stride = groups * GROUP;
        let panel_len = groups * PANEL_GROUP;
        let panels = w.n.div_ceil(PANEL);
        let whole = a.rows / TM * TM;
        // The last rows, fewer than a tile, zero-padded to a whole tile.
        let mut tail = vec![0u8; if whole < a.rows { TM * stride } else { 0 }];
        tail[..(a.rows - whole) * stride].copy_from_slice(&a.data[whole * stride..]);
        let mut sums = Sums([[0; PANEL]; 2 * TM]);
        let mut r = 0;
        while r < a.rows {
            let (rows, tile_rows, m) = if r + 2 * TM <= whole {
                (&a.data[r * stride..(r + 2 * TM) * stride], 2 * TM, 2 * TM)
            } else if r < whole {
                (&a.data[r * stride..(r + TM) * stride], TM, TM)
            } else {
                (&tail[..], TM, a.rows - r)
            };
            for p in 0..panels {
                let panel = &w.data[p * panel_len..(p + 1) * panel_len];
                if tile_rows == 2 * TM {
                    raw_sums::<2>(&tiles, rows, stride, groups, panel, &mut sums);
                } else {
                    raw_sums::<1>(&tiles, rows, stride, groups, panel, &mut sums);
                }
                let epilogue = Epilogue::new(w, p);
                for (i, row) in sums.0[..m].iter().enumerate() {
                    // SAFETY: `row` holds 32 `i32`s, 64-byte aligned (each
                    // row of the aligned `Sums` is 128 bytes), so both
                    // aligned 16-lane loads stay inside it.
                    let acc = unsafe {
                        [
                            _mm512_load_si512(row.as_ptr().cast()),
                            _mm512_load_si512(row.as_ptr().add(16).cast()),
                        ]
                    };
                    epilogue.row(a, r + i, acc, &mut out);
                }
            }
            r += m;
        }
        drop(tiles);
    }
}

/// Asks the CPU to start loading the cache line that holds `value` into
/// every cache level, so that a load of it soon after waits less. A hint
/// only: it changes no result and never faults. A graph search that is
/// about to score a node's neighbours, which lie anywhere in memory,
/// issues it for all of them first, so their misses overlap instead of
/// following one another. A no-op off x86-64.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints; it reads nothing the program can
    // observe and cannot fault, and `value` is a live reference anyway.
    // SSE, its one target feature, is part of every x86-64 CPU.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            (value as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Inner products of `q` with each of `N` vectors, over the shortest
/// length, each in eight independent partial sums (lane `i` sums the
/// products at positions `i`, `i + 8`, ...), added in a fixed tree, then
/// the tail. The similarity kernel of every vector search (cosine on
/// L2-normalised vectors).
///
/// On x86-64 CPUs with AVX2 the eight sums live in one 256-bit register
/// per vector instead of two 128-bit ones (the baseline's SSE2, where a
/// group of four vectors' sums do not fit the registers and spill); the
/// operations per lane and their order are the same, with no fused
/// multiply-add, so the results are the portable loop's bit for bit on
/// every CPU. One loop serves every `N`: a vector scored in a group has
/// exactly the operations it has alone.
#[inline]
pub fn dots<const N: usize>(q: &[f32], v: [&[f32]; N]) -> [f32; N] {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, the only feature the function enables.
        return unsafe { dots_avx2(q, v) };
    }
    dots_portable(q, v)
}

/// [`dots`] on AVX2: each vector's eight partial sums in one 256-bit
/// register (lane `i` of the register is the portable loop's `acc[i]`,
/// with the same multiply, then add, in the same order), then the
/// portable loop's reduction and tail.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dots_avx2<const N: usize>(q: &[f32], v: [&[f32]; N]) -> [f32; N] {
    use core::arch::x86_64::*;
    let n = v.iter().fold(q.len(), |n, x| n.min(x.len()));
    let whole = n - n % 8;
    let mut acc = [_mm256_setzero_ps(); N];
    let mut at = 0;
    while at < whole {
        // SAFETY: at + 8 <= whole <= n, and n is at most the length of `q`
        // and of every vector: each 8-float unaligned load is in bounds.
        let x = unsafe { _mm256_loadu_ps(q.as_ptr().add(at)) };
        for (acc, y) in acc.iter_mut().zip(&v) {
            // SAFETY: as above.
            let y = unsafe { _mm256_loadu_ps(y.as_ptr().add(at)) };
            *acc = _mm256_add_ps(*acc, _mm256_mul_ps(x, y));
        }
        at += 8;
    }
    core::array::from_fn(|j| {
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds eight floats (an unaligned store).
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc[j]) };
        finish_dot(&lanes, &q[whole..n], &v[j][whole..n])
    })
}

/// The fixed reduction of eight partial sums, plus the products of the
/// tail (fewer than eight), shared by both loops.
#[inline(always)]
fn finish_dot(acc: &[f32; 8], q: &[f32], y: &[f32]) -> f32 {
    let tail: f32 = q.iter().zip(y).map(|(x, y)| x * y).sum();
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// [`dots`] for every CPU.
#[inline(always)]
fn dots_portable<const N: usize>(q: &[f32], v: [&[f32]; N]) -> [f32; N] {
    let n = v.iter().fold(q.len(), |n, x| n.min(x.len()));
    let whole = n - n % 8;
    let mut acc = [[0.0f32; 8]; N];
    let mut rows = v.map(|y| y[..whole].chunks_exact(8));
    for x in q[..whole].chunks_exact(8) {
        for (acc, row) in acc.iter_mut().zip(&mut rows) {
            let Some(y) = row.next() else { break };
            for i in 0..8 {
                acc[i] += x[i] * y[i];
            }
        }
    }
    core::array::from_fn(|j| finish_dot(&acc[j], &q[whole..n], &v[j][whole..n]))
}

/// `x` quantized to one signed byte per element with one scale, `x[i]`
/// close to `codes[i] * scale`: the largest magnitude maps to 127, each
/// element to its nearest step, ties to even (the same bytes on every
/// CPU: one IEEE division and rounding each). Each weight row of a
/// [`QuantMatrix`] is quantized so. Returns the scale, 0 for an all-zero
/// (or not finite) `x`. `codes` takes the first `x.len()` codes.
pub fn quantize_i8(x: &[f32], codes: &mut [i8]) -> f32 {
    let largest = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if largest == 0.0 || !largest.is_finite() {
        codes.iter_mut().for_each(|c| *c = 0);
        return 0.0;
    }
    let scale = largest / 127.0;
    for (c, v) in codes.iter_mut().zip(x) {
        *c = (v / scale).round_ties_even().clamp(-127.0, 127.0) as i8;
    }
    scale
}

/// Exact integer inner products of `q` with each of `N` byte vectors, over
/// the shortest length (at most 131,000 elements, so that no sum of
/// products of at most 128 x 128 overflows): integer sums, so every CPU
/// returns the same values.
pub fn dots_i8<const N: usize>(q: &[i8], v: [&[i8]; N]) -> [i32; N] {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, the only feature the function enables.
        return unsafe { dots_i8_avx2(q, v) };
    }
    dots_i8_portable(q, v)
}

/// [`dots_i8`] on AVX2: sixteen bytes widened to 16-bit lanes, multiplied
/// and added in pairs into eight 32-bit sums per vector.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dots_i8_avx2<const N: usize>(q: &[i8], v: [&[i8]; N]) -> [i32; N] {
    use core::arch::x86_64::*;
    let n = v.iter().fold(q.len(), |n, x| n.min(x.len()));
    let whole = n - n % 16;
    let mut acc = [_mm256_setzero_si256(); N];
    let mut at = 0;
    while at < whole {
        // SAFETY: at + 16 <= whole <= n, and n is at most the length of `q`
        // and of every vector: each 16-byte unaligned load is in bounds.
        let x = unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(q.as_ptr().add(at).cast())) };
        for (acc, y) in acc.iter_mut().zip(&v) {
            // SAFETY: as above.
            let y = unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(y.as_ptr().add(at).cast())) };
            *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(x, y));
        }
        at += 16;
    }
    core::array::from_fn(|j| {
        let mut lanes = [0i32; 8];
        // SAFETY: `lanes` holds eight 32-bit integers (an unaligned store).
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc[j]) };
        lanes.iter().sum::<i32>() + dot_i8_plain(&q[whole..n], &v[j][whole..n])
    })
}

/// [`dots_i8`] for every CPU.
fn dots_i8_portable<const N: usize>(q: &[i8], v: [&[i8]; N]) -> [i32; N] {
    v.map(|y| dot_i8_plain(q, y))
}

/// The plain integer inner product over the shorter length.
fn dot_i8_plain(q: &[i8], y: &[i8]) -> i32 {
    q.iter()
        .zip(y)
        .map(|(&a, &b)| i32::from(a) * i32::from(b))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn float(&mut self) -> f32 {
            (self.next() as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        }
    }

    fn backends() -> Vec<Backend> {
        [
            Backend::Scalar,
            Backend::Avx2,
            Backend::Avx512Vnni,
            Backend::Amx,
        ]
        .into_iter()
        .filter(|b| b.is_available())
        .collect()
    }

    /// Random quantised operands; the extreme values appear often.
    fn operands(rng: &mut Rng, rows: usize, n: usize, k: usize) -> (QuantRows, QuantMatrix) {
        let q: Vec<u8> = (0..rows * k)
            .map(|_| match rng.below(8) {
                0 => 0,
                1 => 255,
                _ => rng.below(256) as u8,
            })
            .collect();
        let scales: Vec<f32> = (0..rows).map(|_| 0.01 + rng.float().abs()).collect();
        let zps: Vec<i32> = (0..rows).map(|_| rng.below(256) as i32).collect();
        let w: Vec<i8> = (0..n * k)
            .map(|_| match rng.below(8) {
                0 => -127,
                1 => 127,
                _ => (rng.below(255) as i32 - 127) as i8,
            })
            .collect();
        let wscales: Vec<f32> = (0..n).map(|_| 0.001 + rng.float().abs() * 0.01).collect();
        let bias: Vec<f32> = (0..n).map(|_| rng.float()).collect();
        (
            QuantRows::from_u8(&q, k, &scales, &zps),
            QuantMatrix::from_i8(&w, &wscales, &bias, k),
        )
    }

    fn reference(a: &QuantRows, w: &QuantMatrix, qa: &[u8], qw: &[i8]) -> Vec<i64> {
        let (rows, n, k) = (a.rows(), w.n(), a.k());
        let mut out = vec![0i64; rows * n];
        for r in 0..rows {
            for c in 0..n {
                out[r * n + c] = (0..k)
                    .map(|i| {
                        (i64::from(qa[r * k + i]) - i64::from(a.zero_points[r]))
                            * i64::from(qw[c * k + i])
                    })
                    .sum();
            }
        }
        out
    }

    #[test]
    fn every_backend_matches_the_exact_integer_product_on_ragged_sizes() {
        let mut rng = Rng(7);
        let mut sizes = vec![
            (1, 1, 1),
            (12, 32, 4),
            (13, 33, 5),
            (25, 64, 384),
            (3, 17, 1536),
        ];
        for _ in 0..40 {
            sizes.push((1 + rng.below(40), 1 + rng.below(100), 1 + rng.below(200)));
        }
        for (rows, n, k) in sizes {
            let (a, w) = operands(&mut rng, rows, n, k);
            let qa: Vec<u8> = {
                let stride = a.groups * GROUP;
                a.data
                    .chunks_exact(stride)
                    .flat_map(|r| r[..k].to_vec())
                    .collect()
            };
            let qw: Vec<i8> = (0..n)
                .flat_map(|c| {
                    let (p, j) = (c / PANEL, c % PANEL);
                    let w = &w;
                    (0..k).map(move |kk| {
                        w.data[(p * w.groups + kk / GROUP) * PANEL_GROUP + j * GROUP + kk % GROUP]
                    })
                })
                .collect();
            let want = reference(&a, &w, &qa, &qw);
            let mut floats = Vec::new();
            for backend in backends() {
                let mut got = vec![i32::MIN; rows * n];
                matmul_i32_with(backend, &a, &w, &mut got);
                for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(i64::from(*g), *e, "{backend:?} {rows}x{n}x{k} at {i}");
                }
                let mut y = vec![f32::NAN; rows * n];
                linear_with(backend, &a, &w, &mut y);
                floats.push(y);
            }
            // The dequantised floats are bit-identical too.
            for y in &floats[1..] {
                let same = y
                    .iter()
                    .zip(&floats[0])
                    .all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same, "{rows}x{n}x{k}: dequantised outputs differ");
            }
        }
    }

    #[test]
    fn amx_matches_scalar_bit_for_bit_on_every_row_count() {
        if !Backend::Amx.is_available() {
            println!("skipped: this CPU or OS offers no AMX-INT8");
            return;
        }
        let mut rng = Rng(13);
        // Every row count up to 70 crosses each tile boundary (16, 32,
        // 48, 64) and each zero-padded tail; 300 and 512 are many blocks.
        // k of 100 and 260 are not whole tiles: the VNNI fallback.
        let rows: Vec<usize> = (1..=70).chain([300, 512]).collect();
        for k in [64, 384, 1536, 100, 260] {
            for n in [32, 96, 40] {
                for &rows in &rows {
                    let (a, w) = operands(&mut rng, rows, n, k);
                    let mut want = vec![0i32; rows * n];
                    let mut got = vec![i32::MIN; rows * n];
                    matmul_i32_with(Backend::Scalar, &a, &w, &mut want);
                    matmul_i32_with(Backend::Amx, &a, &w, &mut got);
                    assert_eq!(got, want, "{rows}x{n}x{k}: integer products differ");
                    let mut want = vec![0.0f32; rows * n];
                    let mut got = vec![f32::NAN; rows * n];
                    linear_with(Backend::Scalar, &a, &w, &mut want);
                    linear_with(Backend::Amx, &a, &w, &mut got);
                    let same = got
                        .iter()
                        .zip(&want)
                        .all(|(p, q)| p.to_bits() == q.to_bits());
                    assert!(same, "{rows}x{n}x{k}: dequantised outputs differ");
                }
            }
        }
    }

    #[test]
    fn quantised_rows_round_trip_and_agree_across_backends() {
        let mut rng = Rng(11);
        for (rows, k) in [(1, 1), (3, 15), (5, 16), (4, 47), (9, 384), (2, 1536)] {
            let mut x: Vec<f32> = (0..rows * k).map(|_| rng.float() * 3.0).collect();
            // A one-signed row, a zero row.
            if rows > 2 {
                x[k..2 * k].iter_mut().for_each(|v| *v = v.abs() + 0.5);
                x[2 * k..3 * k].iter_mut().for_each(|v| *v = 0.0);
            }
            let mut all = Vec::new();
            for backend in backends() {
                let mut q = QuantRows::new();
                q.quantize_with(backend, &x, k);
                let back = q.dequantize();
                for r in 0..rows {
                    let tol = q.scales[r] * 0.5001 + 1e-7;
                    for i in 0..k {
                        let (a, b) = (x[r * k + i], back[r * k + i]);
                        assert!((a - b).abs() <= tol, "{backend:?} row {r}: {a} vs {b}");
                    }
                }
                all.push(q);
            }
            for q in &all[1..] {
                assert_eq!(q.data, all[0].data);
                assert_eq!(q.zero_points, all[0].zero_points);
                assert_eq!(q.scales, all[0].scales);
            }
        }
    }

    /// The lane-by-lane definition [`dots`] documents, written out.
    fn dot_reference(q: &[f32], y: &[f32]) -> f32 {
        let n = q.len().min(y.len());
        let whole = n - n % 8;
        let mut lanes = [0.0f32; 8];
        for (i, (a, b)) in q[..whole].iter().zip(&y[..whole]).enumerate() {
            lanes[i % 8] += a * b;
        }
        let mut tail = 0.0f32;
        for (a, b) in q[whole..n].iter().zip(&y[whole..n]) {
            tail += a * b;
        }
        ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5]))
            + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
            + tail
    }

    #[test]
    fn dots_are_the_reference_sums_bit_for_bit_alone_and_in_groups() {
        let mut rng = Rng(17);
        // Lengths with and without a tail, vectors of unequal lengths (the
        // shortest decides), and MiniLM's 384.
        for (len, other) in [
            (0, 0),
            (3, 3),
            (8, 8),
            (13, 13),
            (384, 384),
            (390, 385),
            (40, 47),
        ] {
            let q: Vec<f32> = (0..len).map(|_| rng.float()).collect();
            let ys: Vec<Vec<f32>> = (0..4)
                .map(|_| (0..other).map(|_| rng.float() * 3.0).collect())
                .collect();
            let want: Vec<u32> = ys.iter().map(|y| dot_reference(&q, y).to_bits()).collect();
            let [alone] = dots(&q, [ys[0].as_slice()]);
            assert_eq!(alone.to_bits(), want[0], "len {len}/{other} alone");
            let group = dots(&q, [&ys[0][..], &ys[1][..], &ys[2][..], &ys[3][..]]);
            let group: Vec<u32> = group.iter().map(|s| s.to_bits()).collect();
            assert_eq!(group, want, "len {len}/{other} in a group of four");
            let portable = dots_portable(&q, [&ys[0][..], &ys[1][..], &ys[2][..], &ys[3][..]]);
            let portable: Vec<u32> = portable.iter().map(|s| s.to_bits()).collect();
            assert_eq!(portable, want, "len {len}/{other} portable");
        }
    }

    /// Many random 384-dimensional products, where a fused multiply-add
    /// or another summation order would round differently somewhere.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_dots_round_exactly_like_the_portable_loop() {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = Rng(29);
        let mut differ = 0;
        for _ in 0..2000 {
            let q: Vec<f32> = (0..384).map(|_| rng.float()).collect();
            let y: Vec<f32> = (0..384).map(|_| rng.float()).collect();
            // SAFETY: AVX2 is available (checked above).
            let [fast] = unsafe { dots_avx2(&q, [y.as_slice()]) };
            let [slow] = dots_portable(&q, [y.as_slice()]);
            if fast.to_bits() != slow.to_bits() {
                differ += 1;
            }
        }
        assert_eq!(differ, 0);
    }

    #[test]
    fn quantised_weights_round_trip_within_half_a_step() {
        let mut rng = Rng(3);
        let (n, k) = (40, 70);
        let w: Vec<f32> = (0..n * k).map(|_| rng.float() * 0.2).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.float()).collect();
        let q = QuantMatrix::quantize(&[(&w[..20 * k], &b[..20]), (&w[20 * k..], &b[20..])], k);
        assert_eq!((q.n(), q.k()), (n, k));
        let back = q.dequantize();
        for c in 0..n {
            let amax = w[c * k..(c + 1) * k]
                .iter()
                .fold(0.0f32, |m, v| m.max(v.abs()));
            for i in 0..k {
                let (a, b) = (w[c * k + i], back[c * k + i]);
                assert!((a - b).abs() <= amax / 127.0 * 0.5001, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn linear_approximates_the_float_layer() {
        let mut rng = Rng(5);
        let (rows, n, k) = (30, 96, 384);
        let x: Vec<f32> = (0..rows * k).map(|_| rng.float()).collect();
        let w: Vec<f32> = (0..n * k).map(|_| rng.float() * 0.1).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.float()).collect();
        let qw = QuantMatrix::quantize(&[(&w, &b)], k);
        let mut qx = QuantRows::new();
        qx.quantize(&x, k);
        let mut y = vec![0.0f32; rows * n];
        linear(&qx, &qw, &mut y);
        let mut worst = 0.0f32;
        for r in 0..rows {
            for c in 0..n {
                let want: f32 = (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum::<f32>() + b[c];
                worst = worst.max((want - y[r * n + c]).abs());
            }
        }
        // Outputs are about 1 in size; int8 keeps them to about 1%.
        assert!(worst < 0.02, "worst abs error {worst}");
    }

    #[test]
    #[should_panic(expected = "differ in k")]
    fn mismatched_shapes_panic_before_any_kernel() {
        let a = QuantRows::from_u8(&[1, 2, 3], 3, &[1.0], &[0]);
        let w = QuantMatrix::from_i8(&[1, 2, 3, 4], &[1.0], &[0.0], 4);
        matmul_i32(&a, &w, &mut [0]);
    }

    #[test]
    #[should_panic(expected = "out is not")]
    fn short_output_panics_before_any_kernel() {
        let a = QuantRows::from_u8(&[1, 2, 3, 4], 4, &[1.0], &[0]);
        let w = QuantMatrix::from_i8(&[1; 8], &[1.0, 1.0], &[0.0, 0.0], 4);
        linear(&a, &w, &mut [0.0]);
    }

    #[test]
    fn byte_vectors_have_the_same_products_on_every_path() {
        let mut rng = Rng(11);
        let mut byte = || ((rng.next() % 255) as i32 - 127) as i8;
        for len in [0usize, 1, 15, 16, 17, 31, 48, 384, 385] {
            let vs: Vec<Vec<i8>> = (0..5).map(|_| (0..len).map(|_| byte()).collect()).collect();
            let plain: Vec<i32> = vs[1..].iter().map(|y| dot_i8_plain(&vs[0], y)).collect();
            let grouped = dots_i8(&vs[0], [&vs[1], &vs[2], &vs[3], &vs[4]]);
            assert_eq!(grouped.to_vec(), plain, "length {len}");
            assert_eq!(dots_i8_portable(&vs[0], [&vs[1]]), [plain[0]]);
        }
        // The extremes: 384 products of 127 by -127, exactly.
        let high = vec![127i8; 384];
        let low = vec![-127i8; 384];
        assert_eq!(dots_i8(&high, [&low]), [-127 * 127 * 384]);
    }

    #[test]
    fn quantized_bytes_step_within_half_a_scale() {
        let mut rng = Rng(5);
        let x: Vec<f32> = (0..384)
            .map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let mut codes = vec![0i8; 384];
        let scale = quantize_i8(&x, &mut codes);
        let largest = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        assert_eq!(scale, largest / 127.0);
        assert!(codes.iter().any(|&c| c.unsigned_abs() == 127));
        for (v, c) in x.iter().zip(&codes) {
            assert!(
                (v - f32::from(*c) * scale).abs() <= scale / 2.0 * 1.0001,
                "{v} {c}"
            );
        }
        let mut zero = vec![9i8; 4];
        assert_eq!(quantize_i8(&[0.0; 4], &mut zero), 0.0);
        assert_eq!(zero, vec![0; 4]);
    }
}
