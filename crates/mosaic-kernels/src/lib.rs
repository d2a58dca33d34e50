//! # mosaic-kernels
//!
//! The unsafe SIMD code of Mosaic Memory, kept small and behind a safe API
//! so every other crate can keep `#![forbid(unsafe_code)]`.
//!
//! What is here: [`dots`], the inner products every vector search scores
//! with (AVX2 when the CPU has it, the same bits as the portable loop);
//! [`prefetch`], a cache hint the vector graph's search issues for the
//! neighbours it is about to score; and int8 matrix
//! products for the dense layers of the local embedder. A weight matrix
//! is quantised once, per output channel and symmetrically, to `i8`
//! ([`QuantMatrix`]); activations are quantised per
//! row to `u8` with a per-row scale and zero point ([`QuantRows`]); the
//! product accumulates `u8 x i8` in `i32`, subtracts the zero point times
//! the weight column sums, and [`linear`] dequantises with both scales and
//! adds the bias.
//!
//! The backends ([`Backend`]):
//!
//! - `Scalar`: portable Rust, every CPU.
//! - `Avx2`: `VPMADDWD` on AVX2 registers (x86-64 without AVX-512 VNNI):
//!   the `u8` and `i8` operands widened to `i16` and multiplied in pairs,
//!   exactly (`VPMADDUBSW` would saturate), with the scalar quantisation
//!   and epilogue.
//! - `Avx512Vnni`: `VPDPBUSD` on AVX-512 registers (x86-64).
//! - `Amx`: Intel AMX-INT8 `TDPBUSD` on tile registers (x86-64 Linux), for
//!   the products whose `k` is a multiple of 64 (others run on the VNNI
//!   kernel); quantisation and the epilogue stay on AVX-512 VNNI, which
//!   it therefore also requires. Linux enables the tile state per process
//!   on request: the first [`Backend::is_available`] check of `Amx` checks
//!   CPUID (AMX-TILE, AMX-INT8) and XCR0 (tile state saved by the OS), and
//!   asks for it once with `arch_prctl(ARCH_REQ_XCOMP_PERM,
//!   XFEATURE_XTILEDATA)`; the answer is cached for the process. Each
//!   product call configures the calling thread's tiles and releases them
//!   before it returns.
//!
//! Every kernel has a portable scalar twin with bit-identical results (the
//! integer products exactly; the dequantised floats too, since all
//! backends use the same fused multiply-add and round-to-nearest-even
//! conversions). [`Backend::best`] picks one at run time (AMX, then AVX-512
//! VNNI, then AVX2, then scalar); the `_with` functions force one, for
//! tests.
//!
//! Safety: slices in, slices out. The lengths of all inputs are checked
//! before any unsafe block (the panicking checks are the only failure
//! mode); each unsafe block says why it stays in bounds.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(missing_docs)]

// Where things live: `int8` holds the quantised operands, the backends and
// the matrix products with their scalar twin, its children `avx2`, `avx512`
// and `amx` the SIMD kernels; `vector_search` holds the prefetch hint and
// the float and byte inner products.
mod int8;
#[cfg(test)]
mod test_rng;
mod vector_search;

pub use int8::{Backend, QuantMatrix, QuantRows, linear, linear_with, matmul_i32, matmul_i32_with};
pub use vector_search::{dots, dots_i8, prefetch, quantize_i8};
