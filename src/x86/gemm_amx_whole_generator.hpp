// The AMX whole-call generator: a small product whose K is one to four equal tile steps (plan::amx_k_step_bytes:
// at most 64 bytes each), stored straight into C, becomes one generated function that runs the entire call (of
// one batch): every product and every store; two stubs load its one tile configuration and release the tiles.
//
//   void whole(const void* a, const void* b, void* c, void* b_panels, void* a_rows, int64_t single_call);
//
//   pack B's first panel (where the function packs B); copy the last K step of the A rows that it would read
//   past K (a_rows); a single call: ldtilecfg (it runs while the packing stores drain); a run of batches: the
//   driver has loaded the configuration once with a stub (LowpCode::config_entries[0]) and releases the tiles
//   after them (LowpCode::release_entry)
//   for each panel of packed B ([k group][32 columns][4 bytes], the steps' k groups, at b_panels):
//       load the panel's B tiles (per column tile and K step; from three steps, each product loads its own)
//       for each 16-row tile of A (read in place, its last step from a_rows where copied), each column tile:
//           C tile = 0; C tile += A x B (one product per K step)
//           (after the panel's first row tile) pack the next panel of B, ahead of any C store
//           store the C tile multiplied two (two K steps: one) column tiles ago
//   store the rest; a single call: tilerelease
//
// Tails take no tile shape of their own (amx_whole_tiles): a dimension past 16 ends in one more whole tile that
// ends at its last row or column and overlaps the tile before; the overlapped values are computed twice from the
// same operands, bit for bit the same, and stored twice (the direct store reads nothing of C). A dimension under
// 16 is one short tile. The one tile configuration of the call then holds for every tile.
//
// Where the function packs B (amx_whole_packs_b: B stored K x N, AVX512-VBMI), b is the caller's B and
// b_panels the driver's buffer; otherwise the driver packs B into b_panels first (b unused), panel by panel as
// amx_whole_panels places them. The microkernel path it replaces spent a 64^3 s8 call (758 TSC per C API call)
// as much in the driver, ldtilecfg (a sixth) and B packing (a quarter) as in the products, and drained every
// 32 x 32 block (products, then stores, then the next block's loads); its tails took a tile configuration each
// (ldtilecfg ~45 ns here: 33^3 s8 cost 0.49 us against 0.13 for 32^3).
#pragma once

#include "core/problem.hpp"
#include "plan/x86_lowp_plan.hpp"
#include "x86/gemm_lowp_epilogue.hpp"

#include <vector>

namespace jitmm::x86 {

// Whether the whole call of p under plan is one such function (a call per batch): the driver's small path (one
// block of each, one thread per batch), an AMX step whose last K block stores C directly, A stored M x K, at most kAmxWholeMaxTiles C tiles
// (the units are unrolled), all of K in at most kAmxWholeMaxSteps equal steps (amx_k_step_bytes), at most
// kAmxWholeMaxBBytes of packed B and kAmxWholeMaxACopyBytes of copied A rows (the driver keeps both on its stack).
bool amx_whole_call_fits(const Problem& p, const plan::X86LowpPlan& plan);
// (128: past 64 tiles the row tile order won, 1 thread, median us, microkernels -> function: s8 150x150x64 NT 3.29
// -> 2.38, 192x128x128 2.86 -> 2.29, 256x128x64 2.73 -> 2.60, bf16 160x160x64 3.01 -> 2.51, 128x256x64 4.60 ->
// 4.09; the unrolled function took 80-120 us to generate against 20-30 for the microkernels.)
constexpr int64_t kAmxWholeMaxTiles = 128;
constexpr int64_t kAmxWholeMaxSteps = 4;
constexpr int64_t kAmxWholeMaxBBytes = 32 * 1024;
constexpr int64_t kAmxWholeMaxACopyBytes = 16 * 1024;

// single_call non-zero: the function loads the tile configuration itself and releases the tiles (one batch);
// zero: the driver has loaded it with the configuration stub (a run of batches).
using AmxWholeFn = void (*)(const void* a, const void* b, void* c, void* b_panels, void* a_rows, int64_t single_call);

// The first rows (or columns) of one dimension's tiles: 0, 16, 32, ..., and where the extent ends inside a tile,
// extent - 16 (the overlapping last tile); {0} for an extent under 16 (one tile of extent rows).
std::vector<int64_t> amx_whole_tiles(int64_t extent);

// The packed B panels: 32 columns from `first` (two column tiles) or 16 (one), placed like amx_whole_tiles; an N
// under 16 is one panel of N columns.
struct AmxWholePanel {
    int64_t first = 0;
    int tiles = 1;
};
std::vector<AmxWholePanel> amx_whole_panels(int64_t n);

// Whether the function packs B itself (see above).
bool amx_whole_packs_b(const Problem& p, const plan::X86LowpPlan& plan);

// The k groups of one packed B panel the function reads (the steps' bytes / 4: zero past K), and the bytes of
// all the panels, one after another.
int64_t amx_whole_k_groups(const Problem& p, const plan::X86LowpPlan& plan);
int64_t amx_whole_b_bytes(const Problem& p, const plan::X86LowpPlan& plan);

// Requires amx_whole_call_fits(p, plan). LowpCode::entries holds the one entry, config_entries the configuration
// stub, release_entry the tilerelease stub. Throws jitmm::Error(JIT_FAILED) if Xbyak rejects something.
LowpCode generate_amx_whole(const Problem& p, const plan::X86LowpPlan& plan);

}  // namespace jitmm::x86
