// The x86 GEMM planner: from a Problem and the probed CPU, the tile shape, the cache blocking (derived from
// the probed L1/L2 sizes) and the thread partition. Everything here goes into the kernel key.
#pragma once

#include "core/key.hpp"
#include "core/problem.hpp"
#include "hw/cpu.hpp"
#include "x86/gemm_f32_generator.hpp"

#include <string>

namespace jitmm::plan {

struct X86GemmPlan {
    x86::GemmF32Layout layout;  // what the microkernels bake in
    int64_t kc = 0;             // K block (the last block may be shorter)
    int64_t mc = 0, nc = 0;     // M and N blocks: multiples of mr and nr
    bool pack_b = false;        // B copied into zero-padded [kc][nr] panels
    bool pack_b_fused = false;  // pack_b of a B as stored: each block's first row tile packs it as its FMAs
                                // read it (packs_b variants) instead of a copy pass between the blocks
    bool pack_a = false;        // each A row tile copied into a panel just before its use
    int64_t a_panel_ld = 0;     // packed A row stride: [mr][a_panel_ld] (A as stored) or [k][mr] (trans_a)
    bool single_call = false;   // small problem: every tile emitted into one function, one call per batch
    bool row_sweep = false;     // short K, one K and one N block: one generated call per batch runs its row
                                // tiles (x86::RowSweep); B, if packed, packed whole just before it
    bool k_split_ready = false; // few tiles, several K blocks: the K-split variants and finish are generated
    int threads = 1;            // threads the run fans out to
    int m_chunks = 1, n_chunks = 1;  // each batch's C split into m_chunks x n_chunks tile-aligned parts
    int k_splits = 1;           // > 1: K cut into this many parts of whole K blocks, summed by the finish pass
    bool share_a = false;       // pack_a: each A row tile packed once per call by the first task that needs it
                                // and read by the others (instead of by each task, once per N block); driver only

    int nr() const { return layout.nv * x86::vector_length(layout.isa); }
    std::string describe() const;
    void append_key(KeyWriter& w) const;
};

// Tile-parallel units (batch x tiles) at most this many make a shape a K-split candidate.
constexpr int64_t kSplitMaxUnits = 16;
// Or row tiles at most this many: K parts x N chunks (the partition's model decides).
constexpr int64_t kSplitMaxRowTiles = 16;

// How many K parts feed `threads` when the shape has only `units` independent tiles (over `batch` batches):
// 1 when the tiles already balance, else one task per (batch, part), each over all the batch's tiles, as
// many as the threads take at once (at most max_parts), when that cuts the makespan by 10% or more.
// Depends only on its arguments, so a thread count always gives the same partition.
int choose_k_splits(int64_t units, int64_t batch, int threads, int64_t max_parts);

// Whether an f32 problem runs as C^T = op(B)^T op(A)^T into a scratch C^T (rows of M values) that is then
// transposed into C: an A stored K x M over few columns (or up to 256 where A is past L2), whose stored rows
// become the swapped problem's B rows, read front to back with the vectors along M (see the definition). JITMM_X86_CT=0/1 forces it (tuning knob).
bool serves_with_c_transposed(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads);

// The problem C^T = op(B)^T op(A)^T: M and N, the operands and their strides, and the bias's direction exchanged;
// C's leading dimension kept (callers computing into a scratch set theirs).
Problem transposed_product_problem(const Problem& p);

// isa: the tier the kernel is generated for (avx2 or avx512; higher tiers map to avx512 for f32).
X86GemmPlan plan_x86_gemm_f32(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads);

}  // namespace jitmm::plan
