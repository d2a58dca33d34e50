//! The numeric kernels of the MiniLM encoder, in safe Rust.
//!
//! SIMD comes from `pulp`: each kernel is a [`WithSimd`] operation that
//! `pulp::Arch` dispatches at run time to the widest instruction set the CPU
//! has (AVX-512 with the `x86-v4` feature, AVX2+FMA, SSE, NEON or scalar).
//! Everything a kernel calls is `#[inline(always)]`, so plain loops inside
//! it are vectorised for the selected instruction set too.
//!
//! By job: [`linear`] the packed dense layers, [`activation`] GELU,
//! [`norm`] layer normalisation, [`attention`] self-attention.

mod activation;
mod attention;
mod linear;
mod norm;

pub(super) use activation::gelu;
pub(super) use attention::{RelativeBias, attention};
pub(super) use linear::{PANEL, Packed, linear, linear_panels};
pub(super) use norm::{add_layer_norm, add_layer_norm_fast};

#[cfg(test)]
mod tests;
