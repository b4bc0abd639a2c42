// Internal: Intel AMX (Advanced Matrix Extensions) tiles for the BF16 prefill attention kernel.
//
// AMX-BF16's TDPBF16PS multiplies a 16 x 32 bf16 tile A by a 32 x 16 bf16 tile B (stored as 16 rows
// of 16 bf16 pairs, "VNNI layout": B row k2 holds (b[2 k2][n], b[2 k2 + 1][n]) for n < 16) into a
// 16 x 16 f32 tile C, C[m][n] += sum_k2 a[m][2 k2] b[2 k2][n] + a[m][2 k2 + 1] b[2 k2 + 1][n]
// (Intel Architecture Instruction Set Extensions Programming Reference, ch. 3, "TDPBF16PS").
// Linux hands the 8 KiB tile data state to a process only on request (arch_prctl
// ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA; kernel Documentation/arch/x86/xstate.rst).
#pragma once

#include "attention/prefill_bf16.h"

#if SNAPKV_ATTN_BF16 && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define SNAPKV_ATTN_AMX 1
#endif

namespace snapkv::attn {

/// Whether the BF16 prefill kernel uses AMX tiles in this process: built with AMX-BF16 on Linux,
/// the CPU has it, Linux granted the tile state (requested once, thread-safe), and not turned off by
/// set_amx_disabled() or the environment variable SNAPKV_AMX=0. False otherwise; never throws.
bool amx_usable();

/// Turns AMX off (true) or back on (false) for this process: for tests and benchmarks that compare
/// the AMX tiles with the AVX512-BF16 ones. Not thread-safe against running kernels.
void set_amx_disabled(bool disabled);

}  // namespace snapkv::attn
