//! Every SIMD path against a plain f64 reference, not only the one
//! this machine dispatches to.
use pulp::{Simd, WithSimd};

use super::activation::{Gelu, erf, gelu_scalar};
use super::attention::{Attention, RelativeBias, softmax_row};
use super::linear::{Linear, PANEL, Packed, linear, linear_panels};
use super::norm::{AddLayerNormFast, add_layer_norm};

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
    // Three panels: a pair (AVX-512) and one left over.
    let (k, n) = (48, 96);
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
    // order, whichever tile (12, 8, 4, 2 or 1 rows of one panel; 6 to 1
    // rows of two panels) computes it.
    let (k, n) = (40, 96);
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

/// The exact layer norm as it was first written: sequential f64 sums.
fn layer_norm_sequential(x: &mut [f32], residual: &[f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let width = gamma.len();
    for (a, b) in x.iter_mut().zip(residual) {
        *a += *b;
    }
    for row in x.chunks_exact_mut(width) {
        let mean = (row.iter().map(|v| f64::from(*v)).sum::<f64>() / width as f64) as f32;
        for v in row.iter_mut() {
            *v -= mean;
        }
        let var = (row.iter().map(|v| f64::from(*v * *v)).sum::<f64>() / width as f64) as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = *v * inv * *g + *b;
        }
    }
}

#[test]
fn exact_layer_norm_keeps_the_sequential_sums_result() {
    // The f64 sums in vector lanes add in another order than one
    // sequential sum; rounded to f32 the mean and variance must not
    // move (widths with and without a remainder past the lanes, rows
    // far from zero, where a mean's rounding shows most).
    for (width, rows, offset) in [
        (384, 64, 0.0f32),
        (384, 64, 30.0),
        (768, 16, -5.0),
        (37, 9, 2.0),
    ] {
        let mut x = data(width * rows, 60);
        x.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = *v * (1.0 + (i % 7) as f32) + offset);
        let residual = data(width * rows, 61);
        let gamma = data(width, 62);
        let beta = data(width, 63);
        let mut want = x.clone();
        layer_norm_sequential(&mut want, &residual, &gamma, &beta, 1e-12);
        let mut got = x.clone();
        add_layer_norm(&mut got, &residual, &gamma, &beta, 1e-12);
        let diff = want
            .iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(
            diff <= 1e-6,
            "width {width}, offset {offset}: max diff {diff}"
        );
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
