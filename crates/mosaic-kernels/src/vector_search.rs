//! The kernels of vector search: the cache [`prefetch`] hint, the float
//! inner products [`dots`], and the byte vectors' [`quantize_i8`] and
//! [`dots_i8`].

#[cfg(doc)]
use crate::QuantMatrix;

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
mod tests;
