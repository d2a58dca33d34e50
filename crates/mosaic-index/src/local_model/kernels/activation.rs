//! The exact (erf) GELU activation, and the erf it is built on.

use pulp::{Arch, Simd, WithSimd};

/// `x = gelu(x)` with the exact (erf) GELU BERT uses.
pub(in crate::local_model) fn gelu(x: &mut [f32]) {
    Arch::new().dispatch(Gelu { x });
}

pub(super) struct Gelu<'a> {
    pub(super) x: &'a mut [f32],
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
pub(super) fn gelu_scalar(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * FRAC_1_SQRT_2))
}

/// The same rational approximation as [`gelu_v`], one value.
#[inline(always)]
pub(in crate::local_model) fn erf(x: f32) -> f32 {
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
