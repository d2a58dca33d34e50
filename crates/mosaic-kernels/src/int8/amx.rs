//! The AMX-INT8 product: `TDPBUSD` tiles hold the raw `u8 x i8` sums,
//! and the AVX-512 epilogue of [`super::avx512`] turns them into
//! outputs. Callers must have checked [`available`].
//!
//! Every tile is 16 rows of 64 bytes. An A tile is 16 activation rows
//! by 64 `k` bytes (a plain strided load of [`QuantRows`]); a B tile is
//! 16 groups of four `k` values by 16 columns, which is exactly half of
//! a packed panel's 16 groups (`[16][32][4]`) read with a 128-byte
//! stride; an accumulator tile is 16 rows by 16 `i32` columns.

use core::arch::asm;
use core::arch::x86_64::*;
use core::marker::PhantomData;
use std::sync::OnceLock;

use super::avx512::{self, Epilogue};
use super::{GROUP, Out, PANEL, PANEL_GROUP, QuantMatrix, QuantRows};

/// Rows of every tile.
const TM: usize = 16;
/// Bytes of every tile row.
const TB: usize = 64;
/// Groups of four `k` values one A tile row (and one B tile) covers.
const STEP: usize = TB / GROUP;

/// Whether the CPU has AMX-TILE and AMX-INT8 (and AVX-512 VNNI for the
/// rest), the OS enabled the tile state, and this process was granted
/// its use. Asked once per process.
pub(super) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        avx512::available() && cpu_has_amx_int8() && os_enables_tiles() && request_tiles()
    })
}

/// CPUID leaf 7, subleaf 0: EDX bit 24 is AMX-TILE, bit 25 AMX-INT8.
fn cpu_has_amx_int8() -> bool {
    if __cpuid(0).eax < 7 {
        return false;
    }
    let edx = __cpuid_count(7, 0).edx;
    edx & (1 << 24) != 0 && edx & (1 << 25) != 0
}

/// XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA): the OS saves and
/// restores the tile state.
fn os_enables_tiles() -> bool {
    // CPUID leaf 1, ECX bit 27 (OSXSAVE): the OS enabled XGETBV.
    if __cpuid(1).ecx & (1 << 27) == 0 {
        return false;
    }
    let (lo, hi): (u32, u32);
    // SAFETY: OSXSAVE is set, so XGETBV with ECX = 0 is defined; it
    // only reads XCR0 into EDX:EAX.
    unsafe {
        asm!(
            "xgetbv",
            in("ecx") 0u32,
            out("eax") lo,
            out("edx") hi,
            options(nomem, nostack, preserves_flags),
        );
    }
    let xcr0 = (u64::from(hi) << 32) | u64::from(lo);
    xcr0 & (0b11 << 17) == 0b11 << 17
}

/// Linux keeps the tile data off until a process asks:
/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, for the whole
/// process. True when granted.
fn request_tiles() -> bool {
    const SYS_ARCH_PRCTL: usize = 158;
    const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
    const XFEATURE_XTILEDATA: usize = 18;
    let ret: isize;
    // SAFETY: this system call reads and writes no user memory; it only
    // changes which register state the kernel lets this process use.
    // `syscall` overwrites RCX and R11, declared as clobbered.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL as isize => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret == 0
}

/// The operand of `LDTILECFG`.
#[repr(C, align(64))]
struct Config {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    /// Bytes per row of each tile.
    colsb: [u16; 16],
    /// Rows of each tile.
    rows: [u8; 16],
}

/// Proof that this thread's tiles are configured: `tmm0..=tmm7`, each
/// 16 rows of 64 bytes. Dropping it releases them (on unwinding too).
/// Not `Send`: the tile state belongs to the thread.
struct Tiles(PhantomData<*const ()>);

impl Tiles {
    /// Configures this thread's tiles.
    ///
    /// # Safety
    ///
    /// [`available`] must have returned true.
    unsafe fn load() -> Tiles {
        let mut config = Config {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        config.colsb[..8].fill(TB as u16);
        config.rows[..8].fill(TM as u8);
        // SAFETY: the caller checked that the CPU has AMX and the OS
        // granted it; LDTILECFG reads the 64 bytes of `config`, which is
        // 64-byte aligned and a valid palette-1 configuration.
        unsafe {
            asm!(
                "ldtilecfg [{}]",
                in(reg) &raw const config,
                options(nostack, readonly, preserves_flags),
            );
        }
        Tiles(PhantomData)
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: a `Tiles` exists only after `Tiles::load`, so AMX is
        // usable; TILERELEASE touches no memory.
        unsafe { asm!("tilerelease", options(nomem, nostack, preserves_flags)) };
    }
}

/// The raw sums of up to 32 rows and one panel, as the tiles store
/// them: `[row][32 columns]`.
#[repr(C, align(64))]
struct Sums([[i32; PANEL]; 2 * TM]);

/// The raw `u8 x i8` sums of `T * 16` rows (`rows`, `[T * 16][stride]`)
/// and one panel (`[groups][32][4]`) into `sums`, `T` being 1 or 2.
#[inline]
fn raw_sums<const T: usize>(
    _tiles: &Tiles,
    rows: &[u8],
    stride: usize,
    groups: usize,
    panel: &[i8],
    sums: &mut Sums,
) {
    assert!(T == 1 || T == 2);
    assert!(groups.is_multiple_of(STEP));
    assert!(stride >= groups * GROUP);
    assert!(rows.len() >= T * TM * stride);
    assert!(panel.len() >= groups * PANEL_GROUP);
    let (a, b) = (rows.as_ptr(), panel.as_ptr());
    // SAFETY: `_tiles` proves tmm0..=tmm3 are configured on this
    // thread; TILEZERO touches no memory.
    unsafe {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nomem, nostack, preserves_flags),
        );
    }
    for g in (0..groups).step_by(STEP) {
        if T == 2 {
            // SAFETY: tiles as above. A tile `t` reads 16 rows of 64
            // bytes at `(16t + i) * stride + 4g` for i < 16: the last
            // byte is below `32 * stride` (as g + 16 <= groups and
            // 4 * groups <= stride), inside `rows`. A B tile reads 16
            // rows of 64 bytes at `(g + i) * 128` (+ 64): the last byte
            // is below `(g + 16) * 128 <= groups * 128`, inside `panel`.
            unsafe {
                asm!(
                    "tileloadd tmm4, [{a0} + {sa}*1]",
                    "tileloadd tmm6, [{b} + {sb}*1]",
                    "tdpbusd tmm0, tmm4, tmm6",
                    "tileloadd tmm7, [{b} + {sb}*1 + 64]",
                    "tdpbusd tmm1, tmm4, tmm7",
                    "tileloadd tmm5, [{a1} + {sa}*1]",
                    "tdpbusd tmm2, tmm5, tmm6",
                    "tdpbusd tmm3, tmm5, tmm7",
                    a0 = in(reg) a.add(g * GROUP),
                    a1 = in(reg) a.add(TM * stride + g * GROUP),
                    sa = in(reg) stride,
                    b = in(reg) b.add(g * PANEL_GROUP),
                    sb = in(reg) PANEL_GROUP,
                    options(nostack, readonly, preserves_flags),
                );
            }
        } else {
            // SAFETY: as above, with the one A tile.
            unsafe {
                asm!(
                    "tileloadd tmm4, [{a0} + {sa}*1]",
                    "tileloadd tmm6, [{b} + {sb}*1]",
                    "tdpbusd tmm0, tmm4, tmm6",
                    "tileloadd tmm7, [{b} + {sb}*1 + 64]",
                    "tdpbusd tmm1, tmm4, tmm7",
                    a0 = in(reg) a.add(g * GROUP),
                    sa = in(reg) stride,
                    b = in(reg) b.add(g * PANEL_GROUP),
                    sb = in(reg) PANEL_GROUP,
                    options(nostack, readonly, preserves_flags),
                );
            }
        }
    }
    let c = sums.0.as_mut_ptr().cast::<u8>();
    // SAFETY: tiles as above. Each store writes 16 rows of 64 bytes,
    // 128 bytes apart, at byte 0 or 64 of row 0 (and, for T = 2, of
    // row 16) of `sums`: at most 32 rows of 128 bytes, all inside it.
    unsafe {
        asm!(
            "tilestored [{c} + {sc}*1], tmm0",
            "tilestored [{c} + {sc}*1 + 64], tmm1",
            c = in(reg) c,
            sc = in(reg) PANEL * 4,
            options(nostack, preserves_flags),
        );
        if T == 2 {
            asm!(
                "tilestored [{c} + {sc}*1], tmm2",
                "tilestored [{c} + {sc}*1 + 64], tmm3",
                c = in(reg) c.add(TM * PANEL * 4),
                sc = in(reg) PANEL * 4,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// See [`super::product`], which checked every length this relies on.
/// Falls back to the AVX-512 VNNI kernel when `k` is not whole tiles.
///
/// # Safety
///
/// [`available`] must have returned true.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn product(a: &QuantRows, w: &QuantMatrix, mut out: Out<'_>) {
    let groups = a.groups;
    if !groups.is_multiple_of(STEP) {
        return avx512::product(a, w, out);
    }
    // SAFETY: the caller checked `available`.
    let tiles = unsafe { Tiles::load() };
    let stride = groups * GROUP;
    let panel_len = groups * PANEL_GROUP;
    let panels = w.n.div_ceil(PANEL);
    let whole = a.rows / TM * TM;
    // The last rows, fewer than a tile, zero-padded to a whole tile.
    let mut tail = vec![0u8; if whole < a.rows { TM * stride } else { 0 }];
    tail[..(a.rows - whole) * stride].copy_from_slice(&a.data[whole * stride..]);
    let mut sums = Sums([[0; PANEL]; 2 * TM]);
    let mut r = 0;
    while r < a.rows {
        let (rows, tile_rows, m) = if r + 2 * TM <= whole {
            (&a.data[r * stride..(r + 2 * TM) * stride], 2 * TM, 2 * TM)
        } else if r < whole {
            (&a.data[r * stride..(r + TM) * stride], TM, TM)
        } else {
            (&tail[..], TM, a.rows - r)
        };
        for p in 0..panels {
            let panel = &w.data[p * panel_len..(p + 1) * panel_len];
            if tile_rows == 2 * TM {
                raw_sums::<2>(&tiles, rows, stride, groups, panel, &mut sums);
            } else {
                raw_sums::<1>(&tiles, rows, stride, groups, panel, &mut sums);
            }
            let epilogue = Epilogue::new(w, p);
            for (i, row) in sums.0[..m].iter().enumerate() {
                // SAFETY: `row` holds 32 `i32`s, 64-byte aligned (each
                // row of the aligned `Sums` is 128 bytes), so both
                // aligned 16-lane loads stay inside it.
                let acc = unsafe {
                    [
                        _mm512_load_si512(row.as_ptr().cast()),
                        _mm512_load_si512(row.as_ptr().add(16).cast()),
                    ]
                };
                epilogue.row(a, r + i, acc, &mut out);
            }
        }
        r += m;
    }
    drop(tiles);
}
