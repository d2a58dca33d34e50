use super::*;
use crate::test_rng::Rng;

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
