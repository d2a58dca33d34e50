//! The proven bound of an exact scan's byte pass: how far the exact f32
//! inner product of a query and a vector can lie from the scaled integer
//! product of their bytes ([`quantize_i8`](crate::quantize_i8) copies), so
//! that a scan can score every vector's bytes first and score in f32 only
//! the vectors that can still be among the best `k`. Every exact scan over
//! byte copies (the in-memory index's, the PostgreSQL ranked read's) uses
//! these functions, so both keep the same vectors for the same query.
//!
//! The bound, for a query `q` of bytes `q'` and a vector `x` of bytes
//! `x'`: `|q.x - q'.x'| <= ||q|| ||x - x'|| + ||q - q'|| ||x'||`
//! ([`byte_bound`]), plus the rounding of both products
//! ([`byte_score`]). With `t` the `k`-th largest lower end `a - e`
//! ([`byte_threshold`]) at least `k` vectors score `t` or more exactly, so
//! a vector whose upper end `a + e` lies below `t` is not among the best
//! `k` ([`may_reach`]).

/// `(||x - x'||, ||x'||)` for a vector `x` and its bytes `codes` at
/// `scale` (`x' = scale * codes`), computed in f64 and rounded up to the
/// next f32; infinite when `x` is not finite.
pub fn byte_error(x: &[f32], codes: &[i8], scale: f32) -> (f32, f32) {
    let (mut off, mut len) = (0.0f64, 0.0f64);
    for (&v, &c) in x.iter().zip(codes) {
        let scaled = f64::from(scale) * f64::from(c);
        off += (f64::from(v) - scaled).powi(2);
        len += scaled * scaled;
    }
    let up = |v: f64| {
        let r = (v.sqrt() * (1.0 + 1e-9)) as f32;
        if r.is_finite() {
            r.next_up()
        } else {
            f32::INFINITY
        }
    };
    if x.iter().all(|v| v.is_finite()) {
        (up(off), up(len))
    } else {
        (f32::INFINITY, f32::INFINITY)
    }
}

/// How far `q.x` can lie from the byte score `q'.x'` in exact arithmetic,
/// given [`byte_error`] of each:
/// `||q|| ||x - x'|| + ||q - q'|| ||x'||`, with `||q||` at most
/// `||q'|| + ||q - q'||`.
pub fn byte_bound((q_off, q_bytes): (f32, f32), (x_off, x_bytes): (f32, f32)) -> f32 {
    (q_bytes + q_off) * x_off + q_off * x_bytes
}

/// The byte score `a` of a query and a `dim`-dimensional vector and the
/// bound `e` on how far their exact f32 score (a sum of `dim` products in
/// any order) lies from it: `product` is their bytes' integer product,
/// `scale` the product of their scales, `q` and `x` their
/// [`byte_error`]s. `e` holds [`byte_bound`], the exact score's rounding
/// (`dim` units of its last place, twice the rounding, of `||q|| ||x||`,
/// with `||x||` at most `||x'|| + ||x - x'||`), that of `a` and of the
/// sums `a - e` and `a + e`, and is never zero.
#[inline]
pub fn byte_score(
    product: i32,
    scale: f32,
    q: (f32, f32),
    x: (f32, f32),
    dim: usize,
) -> (f32, f32) {
    let (q_off, q_bytes) = q;
    let (x_off, x_len) = x;
    let a = product as f32 * scale;
    let e = byte_bound(q, x);
    // ||q|| is at most ||q'|| + ||q - q'||.
    let q_len = q_bytes + q_off;
    let rounding = (dim as f32 + 2.0) * f32::EPSILON;
    let slack = rounding * q_len * (x_len + x_off) + 1e-6 * (a.abs() + e);
    (a, e + slack + f32::MIN_POSITIVE)
}

/// The `k`-th largest lower end `a - e` of `bounds` ([`byte_score`]s);
/// `None` when `bounds` holds at most `k` (every vector is to be scored)
/// or `k` is 0.
pub fn byte_threshold(bounds: &[(f32, f32)], k: usize) -> Option<f32> {
    if k == 0 || bounds.len() <= k {
        return None;
    }
    let mut lows: Vec<f32> = bounds.iter().map(|(a, e)| a - e).collect();
    let (_, &mut t, _) = lows.select_nth_unstable_by(k - 1, |x, y| y.total_cmp(x));
    Some(t)
}

/// Whether a vector of byte score `a` and bound `e` may score `t`
/// ([`byte_threshold`]) or more exactly: it must then be scored in f32.
#[inline]
pub fn may_reach((a, e): (f32, f32), t: f32) -> bool {
    let high = a + e;
    !high.is_finite() || high.total_cmp(&t).is_ge()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;
    use crate::{dots, dots_i8, quantize_i8};

    /// Every exact score lies within its bound of its byte score, and the
    /// vectors [`may_reach`] keeps hold the best `k` by exact score.
    #[test]
    fn exact_scores_lie_within_the_bound_and_the_best_are_kept() {
        let mut rng = Rng(7);
        for dim in [1usize, 3, 8, 33, 256] {
            let mut vectors: Vec<Vec<f32>> = (0..200)
                .map(|_| (0..dim).map(|_| rng.float()).collect())
                .collect();
            vectors.push(vec![0.0; dim]);
            let query: Vec<f32> = (0..dim).map(|_| rng.float()).collect();
            let mut q_codes = vec![0i8; dim];
            let q_scale = quantize_i8(&query, &mut q_codes);
            let q_err = byte_error(&query, &q_codes, q_scale);
            let mut bounds = Vec::new();
            let mut exact = Vec::new();
            for v in &vectors {
                let mut codes = vec![0i8; dim];
                let scale = quantize_i8(v, &mut codes);
                let [p] = dots_i8(&q_codes, [&codes]);
                let (a, e) =
                    byte_score(p, q_scale * scale, q_err, byte_error(v, &codes, scale), dim);
                let [s] = dots(&query, [v.as_slice()]);
                assert!(
                    (s - a).abs() <= e,
                    "dim {dim}: exact {s} bytes {a} bound {e}"
                );
                bounds.push((a, e));
                exact.push(s);
            }
            for k in [1, 5, 50] {
                let t = byte_threshold(&bounds, k).unwrap();
                let mut sorted = exact.clone();
                sorted.sort_by(|x, y| y.total_cmp(x));
                for (s, b) in exact.iter().zip(&bounds) {
                    if s.total_cmp(&sorted[k - 1]).is_ge() {
                        assert!(may_reach(*b, t), "dim {dim} k {k}: {s} dropped");
                    }
                }
            }
            assert_eq!(byte_threshold(&bounds, bounds.len()), None);
            assert_eq!(byte_threshold(&bounds, 0), None);
        }
    }

    #[test]
    fn a_vector_not_finite_has_an_infinite_error_and_is_always_kept() {
        let x = [1.0, f32::NAN, 0.5];
        let mut codes = [0i8; 3];
        let scale = quantize_i8(&x, &mut codes);
        let err = byte_error(&x, &codes, scale);
        assert_eq!(err, (f32::INFINITY, f32::INFINITY));
        let (a, e) = byte_score(0, scale, (0.1, 1.0), err, 3);
        assert!(may_reach((a, e), 1e30));
    }
}
