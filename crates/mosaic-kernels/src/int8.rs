//! Int8 matrix products for the dense layers of the local embedder: the
//! quantised operands ([`QuantMatrix`], [`QuantRows`]), the backends
//! ([`Backend`]), the products ([`matmul_i32`], [`linear`]) and their
//! portable scalar twin here; the SIMD kernels in `avx2`, `avx512` and
//! `amx`.

use crate::vector_search::quantize_i8;

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

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(test)]
mod tests;
