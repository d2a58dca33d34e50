//! Residual add and layer normalisation, exact and fast.

use pulp::{Arch, Simd, WithSimd};

/// `x = layer_norm(x + residual) * gamma + beta`, row by row (width
/// `gamma.len()`), with `eps` (1e-12 in BERT, 1e-5 in MPNet). `residual`
/// may be empty.
pub(in crate::local_model) fn add_layer_norm(
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
            let mean = (sum_f64(row, |v| v) / width as f64) as f32;
            for v in row.iter_mut() {
                *v -= mean;
            }
            let var = (sum_f64(row, |v| v * v) / width as f64) as f32;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(self.gamma).zip(self.beta) {
                *v = *v * inv * *g + *b;
            }
        }
    }
}

/// Lanes of [`sum_f64`]'s partial sums.
const SUM_LANES: usize = 16;

/// The sum of `f(v)` over `row`, each term widened to f64, in
/// [`SUM_LANES`] partial sums that the compiler keeps in vector
/// registers (one long chain of dependent f64 additions took longer
/// than the rest of the layer norm together). The same f64 terms in
/// another order: on 788 LoCoMo turns embedded in session batches every
/// vector came out bit for bit as with one chain (f64 keeps a few
/// hundred f32 terms' sum exact or within one f64 rounding, which the
/// f32 it is rounded to rarely sees); the unit test
/// `exact_layer_norm_keeps_the_sequential_sums_result` bounds the rest.
#[inline(always)]
fn sum_f64(row: &[f32], f: impl Fn(f32) -> f32) -> f64 {
    let mut acc = [0.0f64; SUM_LANES];
    let mut chunks = row.chunks_exact(SUM_LANES);
    for chunk in &mut chunks {
        for (a, v) in acc.iter_mut().zip(chunk) {
            *a += f64::from(f(*v));
        }
    }
    let mut width = SUM_LANES;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            acc[i] += acc[i + width];
        }
    }
    chunks
        .remainder()
        .iter()
        .fold(acc[0], |s, v| s + f64::from(f(*v)))
}

/// [`add_layer_norm`] with f32 vector sums instead of f64 ones: several
/// times faster, and not bit-identical to it (f32 partial sums round), so
/// only the int8 release uses it; the f32 release keeps its f64 sums.
pub(in crate::local_model) fn add_layer_norm_fast(
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

pub(super) struct AddLayerNormFast<'a> {
    pub(super) x: &'a mut [f32],
    pub(super) residual: &'a [f32],
    pub(super) gamma: &'a [f32],
    pub(super) beta: &'a [f32],
    pub(super) eps: f32,
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
