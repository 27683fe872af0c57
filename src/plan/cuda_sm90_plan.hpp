// The Hopper GEMM planner (sm_90a: wgmma + TMA, warp-specialized, persistent): whether a problem takes the
// Hopper path at all, and the CTA tile, pipeline depth and raster it runs with. Everything here goes into
// the kernel key.
#pragma once

#include "core/key.hpp"
#include "core/problem.hpp"
#include "plan/cuda_gemm_plan.hpp"

#include <string>
#include <vector>

namespace jitmm::plan {

struct Sm90GemmPlan {
    int consumers = 2;          // consumer warpgroups; each owns 64 rows of the CTA tile (bm = 64 * consumers)
    int bm = 128, bn = 256;     // CTA tile of C
    // Ping-pong: the two consumers take turns at tiles instead of sharing one, each computing every 64-row
    // slice of its tile (bm / 64 wgmma per k-step, bn <= 128 for the registers), so that one's epilogue runs
    // under the other's main loop. No CTA pairs, K splits or per-block scales with it.
    bool pingpong = false;
    int bk = 64;                // K per stage, in elements: always 128 bytes (one 128-byte swizzle row)
    int stages = 4;             // shared-memory pipeline depth (TMA producer runs this far ahead)
    int group_m = 8;            // tile raster: group_m tile rows walked together (L2 reuse)
    int cluster_m = 1;          // 2: CTA pairs on vertically adjacent tiles share B (each loads half, multicast)
    int split_k = 1;            // > 1: K cut in split_k ranges (more work units than tiles, for shapes that would
                                // leave SMs idle); each range's partial sums go to a workspace and the last range
                                // of a tile to finish adds them all in fixed order and runs the epilogue
    int64_t split_tiles = 0;    // how many tiles (the last in walking order) are split: all of them, or only
                                // the last partial wave's, spread over every SM (the others run whole)
    int ctas = 132;             // persistent grid: CTAs that loop over the tiles (a multiple of cluster_m)
    bool a_k_major = true;      // A as the kernel reads it: K contiguous (stored so, or staged)
    bool b_k_major = false;     // B as the kernel reads it: K contiguous (a Linear layer's weight, or staged)
    // tf32, s8 and fp8 operands stored M/N-major (wgmma reads those types K-major only) are first copied
    // K-major into the workspace by a transpose kernel of the same module; the GEMM reads the copy.
    bool stage_a = false, stage_b = false;
    // One matrix for every batch (batch stride 0, shared weights): every batch reads batch 0 of its tensor map
    // (and a staged copy holds one batch).
    bool a_shared = false, b_shared = false;
    bool c_pairs = true;        // two adjacent C elements per store (ldc and N even)
    bool c_tma = false;         // the epilogue writes a swizzled C tile into shared memory and the copy engine
                                // stores it while the consumers go on with the next tile
    int c_bytes = 2;            // C element size (shared-memory C tile)
    int c_pass_bytes = 512;     // the shared C tile's row: 128..512 bytes (narrower leaves room for a deeper pipeline)
    // The shared C tile holds c_cols() columns (at most c_pass_bytes a row): the epilogue fills and hands it
    // over bn / c_cols() times per tile.
    int c_cols() const;

    int threads() const { return 128 * (1 + consumers); }
    int64_t stage_bytes() const { return int64_t{bm + bn} * 128; }
    // Stages, the C tile, the barriers, a flag per consumer, and 1 KiB to align the stages to the 128-byte
    // swizzle's 1024-byte period.
    int64_t c_tile_bytes() const { return c_tma ? int64_t{64} * consumers * c_cols() * c_bytes : 0; }  // 64 rows a consumer
    int64_t smem_bytes() const { return stages * stage_bytes() + c_tile_bytes() + 1024 + 2 * 8 * stages + 16; }
    // The workspace (the caller's or the engine's scratch), in 256-byte aligned parts:
    //   split K: one arrival counter per tile and consumer, then a slot of partial sums per work unit;
    //   staged A, staged B: the K-major copies (rows x staged_ld() elements per batch).
    int64_t workspace_counter_bytes(const Problem& p) const;
    int64_t workspace_split_bytes(const Problem& p) const;
    int64_t staged_ld(const Problem& p) const;  // K rounded up to 16 bytes, in elements
    int64_t staged_bytes(const Problem& p, bool a) const;
    int64_t staged_offset(const Problem& p, bool a) const;
    int64_t workspace_bytes(const Problem& p) const;
    // Rows of A's last, partial tile row, for a K-major A: read through a second tensor map whose box is exactly
    // that high, so that no box of A reaches past M (the copy engine fills out-of-bounds rows slowly: H100,
    // 128x64 tiles, 4096x4096 weights, M = 129 / 192 / 256: 37.5 / 30.5 / 20.1 us). The stage rows below it keep
    // stale data, which reaches only C rows past M (never stored). 0 when M fills its last tile or A is M-major.
    int64_t a_tail_rows(const Problem& p) const;
    // The same for a K-major B's last, partial tile column (CTA pairs, which split B's tile, keep the full box).
    int64_t b_tail_rows(const Problem& p) const;
    int64_t tiles(const Problem& p) const;  // C tiles over all batches
    int64_t units(const Problem& p) const;  // work units the persistent grid walks
    std::string describe() const;
    void append_key(KeyWriter& w) const;
};

// Whether the Hopper generator takes this problem on this target with 16-byte aligned pointers, and if not,
// why (for logs). It needs sm_90/sm_90a and 16-byte aligned leading dimensions and batch strides (TMA) for
// the operands it reads in place; a tf32/s8/fp8 operand stored M/N-major is staged (wgmma transposes only
// 16-bit types), which for tf32 and s8 needs more than 64 rows or columns on the other side.
bool sm90_applies(const Problem& p, const CudaTarget& target, std::string* why_not = nullptr);

// Throws UNSUPPORTED when sm90_applies is false. choice: a tuned recipe ("sm90:BMxBNxSTAGES[xCLUSTER[xSPLIT[xTAIL]]]",
// or "sm90p:BMxBNxSTAGES" for ping-pong consumers, from the tuning store) that replaces the heuristic's tile; JITMM_CUDA_TILE, when set, wins over both.
// allow_split: let the cost model split K for shapes with too few tiles to fill the SMs (off by default:
// measured slower on the H100, see the .cpp; jitmm_tune times the splits).
Sm90GemmPlan plan_sm90_gemm(const Problem& p, const CudaTarget& target, const std::string& choice = "",
                            bool allow_split = false);

// The recipes jitmm_tune times for p: each tile shape at the deepest pipeline that fits.
std::vector<std::string> sm90_tune_candidates(const Problem& p, const CudaTarget& target);

}  // namespace jitmm::plan
