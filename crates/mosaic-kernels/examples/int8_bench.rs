//! Times the int8 product and the row quantisation on one thread:
//! `cargo run --release -p mosaic-kernels --example int8_bench`.

use std::time::Instant;

use mosaic_kernels::{Backend, QuantMatrix, QuantRows, linear_with};

fn main() {
    let backend = Backend::best();
    println!("backend {backend:?}");
    for (rows, k, n) in [(512, 384, 1152), (512, 384, 1536), (512, 1536, 384)] {
        let x: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 104729) % 1000) as f32 / 5000.0 - 0.1)
            .collect();
        let b = vec![0.0f32; n];
        let qw = QuantMatrix::quantize(&[(&w, &b)], k);
        let mut qx = QuantRows::new();
        let mut out = vec![0.0f32; rows * n];
        let reps = 40;
        let start = Instant::now();
        for _ in 0..reps {
            qx.quantize_with(backend, &x, k);
        }
        let quant = start.elapsed().as_secs_f64() / reps as f64;
        let start = Instant::now();
        for _ in 0..reps {
            linear_with(backend, &qx, &qw, &mut out);
        }
        let mm = start.elapsed().as_secs_f64() / reps as f64;
        let macs = (rows * k * n) as f64;
        println!(
            "{rows}x{k}x{n}: product {:.3} ms = {:.0} GMAC/s ({:.0} GOP/s), quantise {:.3} ms",
            mm * 1e3,
            macs / mm / 1e9,
            2.0 * macs / mm / 1e9,
            quant * 1e3
        );
    }
}
