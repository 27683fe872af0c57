// The AMX whole-call generator: a small product whose K is one or two equal tile steps (plan::amx_k_step_bytes:
// at most 64 bytes each) over a C of whole 16 x 16 tiles, stored straight into C, becomes one generated function
// that runs the entire call: the tile configuration, every product, every store, and the tilerelease.
//
//   void whole(const void* a, const void* b, void* c, void* b_panels);
//
//   pack B's first panel (where the function packs B); ldtilecfg (it runs while the packing stores drain)
//   for each 32-column panel of packed B ([k group][32 columns][4 bytes], k_bytes / 4 groups, at b_panels):
//       load the panel's B tiles (per column tile and K step)
//       for each 16-row tile of A (read in place), each of the panel's column tiles:
//           C tile = 0; C tile += A x B (one product per K step)
//           (after the panel's first row tile) pack the next panel of B, ahead of any C store
//           store the C tile multiplied two (two K steps: one) column tiles ago
//   store the rest; tilerelease
//
// Where the function packs B (amx_whole_packs_b: B stored K x N, AVX512-VBMI), b is the caller's B and
// b_panels the driver's buffer; otherwise the driver packs B into b_panels first (b unused). The microkernel
// path it replaces spent a 64^3 s8 call (758 TSC per C API call) as much in the driver, ldtilecfg (a sixth)
// and B packing (a quarter) as in the products, and drained every 32 x 32 block (products, then stores,
// then the next block's loads).
#pragma once

#include "core/problem.hpp"
#include "plan/x86_lowp_plan.hpp"
#include "x86/gemm_lowp_epilogue.hpp"

namespace jitmm::x86 {

// Whether the whole call of p under plan is one such function: the driver's small path (one block of each, one
// thread), an AMX step whose last K block stores C directly, A read in place, M and N whole 16-row and 16-column
// tiles (at most kAmxWholeMaxTiles C tiles: the units are unrolled), all of K in at most kAmxWholeMaxSteps equal
// steps of whole dwords, and at most kAmxWholeMaxBBytes of packed B (the driver keeps them on its stack).
bool amx_whole_call_fits(const Problem& p, const plan::X86LowpPlan& plan);
constexpr int64_t kAmxWholeMaxTiles = 64;
constexpr int64_t kAmxWholeMaxSteps = 2;
constexpr int64_t kAmxWholeMaxBBytes = 16 * 1024;

using AmxWholeFn = void (*)(const void* a, const void* b, void* c, void* b_panels);

// Whether the function packs B itself (see above).
bool amx_whole_packs_b(const Problem& p, const plan::X86LowpPlan& plan);

// The k groups of one packed B panel the function reads (the driver packs exactly these), and the bytes of all
// the panels.
int64_t amx_whole_k_groups(const Problem& p, const plan::X86LowpPlan& plan);
int64_t amx_whole_b_bytes(const Problem& p, const plan::X86LowpPlan& plan);

// Requires amx_whole_call_fits(p, plan). LowpCode::entries holds the one entry; no stubs (the function loads and
// releases the tiles itself). Throws jitmm::Error(JIT_FAILED) if Xbyak rejects something.
LowpCode generate_amx_whole(const Problem& p, const plan::X86LowpPlan& plan);

}  // namespace jitmm::x86
