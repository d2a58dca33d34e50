//! Times the int8 product on every backend this CPU has, and the row
//! quantisation, on one thread, on the shapes of MiniLM's dense layers
//! (a 512-token chunk, and a 14-token query):
//! `cargo run --release -p mosaic-kernels --example int8_bench`.

use std::time::{Duration, Instant};

use mosaic_kernels::{Backend, QuantMatrix, QuantRows, linear_with};

/// Mean seconds per call of `f`, run for at least a quarter second.
fn time(mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut reps = 0u32;
    while start.elapsed() < Duration::from_millis(250) {
        f();
        reps += 1;
    }
    start.elapsed().as_secs_f64() / f64::from(reps)
}

fn main() {
    let backends: Vec<Backend> = [Backend::Scalar, Backend::Avx512Vnni, Backend::Amx]
        .into_iter()
        .filter(|b| b.is_available())
        .collect();
    println!("best backend {:?}", Backend::best());
    for rows in [512, 14] {
        for (k, n) in [(384, 1152), (384, 384), (384, 1536), (1536, 384)] {
            let x: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
                .collect();
            let w: Vec<f32> = (0..n * k)
                .map(|i| ((i * 104729) % 1000) as f32 / 5000.0 - 0.1)
                .collect();
            let b = vec![0.0f32; n];
            let qw = QuantMatrix::quantize(&[(&w, &b)], k);
            let mut qx = QuantRows::new();
            qx.quantize(&x, k);
            let quant = time(|| qx.quantize(&x, k));
            let mut out = vec![0.0f32; rows * n];
            let macs = (rows * k * n) as f64;
            let mut line = format!("rows {rows:>3} k {k:>4} n {n:>4}:");
            for &backend in &backends {
                let t = time(|| linear_with(backend, &qx, &qw, &mut out));
                line += &format!(
                    "  {backend:?} {:.1} us ({:.0} GMAC/s)",
                    t * 1e6,
                    macs / t / 1e9
                );
            }
            println!("{line}  | quantise {:.1} us", quant * 1e6);
        }
    }
}
