use super::*;
use crate::test_rng::Rng;

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
