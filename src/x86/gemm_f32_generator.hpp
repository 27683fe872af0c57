// The f32 GEMM microkernel generator (AVX-512 and AVX2): emits, into one code buffer, the register-blocked
// microkernels a shape needs. Each computes one C tile (rows x cols) over one K block:
//
//   void ukernel(const float* a, const float* b, float* c, const float* bias, const float* a_prefetch,
//                const float* b_prefetch, const float* c_next, float* b_pack);
//
//   acc[rows][cols] = sum_k op(A)[i][k] * B[k][j]      (broadcast-FMA, accumulators stay in registers)
//   first K block:  acc = alpha*acc + beta*C           (C not read when beta == 0)
//   later blocks:   acc = alpha*acc + C
//   last K block:   acc += bias; acc = activation(acc)
//   C[rows][cols] = acc                                 (tail columns masked)
//
// Everything about the layout (leading dimensions, transposes, alpha/beta, epilogue, K length) is baked in.
#pragma once

#include "core/problem.hpp"
#include "hw/cpu.hpp"
#include "x86/gemm_f32_split_finish.hpp"

#include <cstdint>
#include <vector>

namespace jitmm::x86 {

struct GemmF32Layout {
    hw::X86Isa isa = hw::X86Isa::avx512;  // avx2 or avx512 (higher tiers run the avx512 code for f32)
    int mr = 6;                           // rows of a full tile
    int nv = 4;                           // vectors across a full tile: nr = nv * vector_length(isa)
    bool trans_a = false;
    int64_t lda = 0;
    bool b_packed = false;                // B read from a packed panel [k][nr] (zero padded) instead of B
    int64_t ldb = 0;                      // row stride of what the kernel reads as B (nr when packed)
    int64_t ldc = 0;
    float alpha = 1, beta = 0;
    BiasKind bias = BiasKind::none;
    Activation activation = Activation::none;
    // C is s32 (a widened int8 problem, plan::lowp_widens_to_f32): each value converted to an integer before its
    // store (exact: the sums are integers below 2^24). Only where C is written once and never read (one K
    // block, beta 0).
    bool store_s32 = false;
    int k_unroll = 4;
    bool b_from_memory = false;           // AVX-512, mr <= 2: FMAs read B from memory (no B registers)
    int b_prefetch_k = 0;                 // > 0: prefetcht0 the B row this many k steps ahead (its lines
                                          // spread over the broadcasts); a packed panel runs on into the next
    int a_prefetch_k = 0;                 // > 0, A stored K x M read in place: prefetcht0 the tile's values of
                                          // the stored row this many k steps ahead
    bool c_prefetch = false;              // prefetch the C tile's lines into L1 at the start of the kernel
    bool a_prefetch = false;              // A as stored (not transposed): the fifth argument points at a row
                                          // the driver packs next; each K-loop iteration prefetches (into L2)
                                          // its part of that row, in step with k
    // A read in place (not transposed, not packed): each K-loop iteration prefetches (into L1) the next row
    // tile's rows, mr rows on, at the same K offset, for a driver whose next call is the next row tile.
    bool a_next_tile_prefetch = false;
    // The sixth argument points at memory the driver packs after this call (the next B block's source):
    // b_prefetch_runs runs, b_prefetch_ld bytes apart; each K-loop iteration prefetches (into L2) the next
    // b_prefetch_step bytes of each. 0 runs: none.
    int b_prefetch_runs = 0;
    int b_prefetch_step = 0;
    int64_t b_prefetch_ld = 0;
    // The seventh argument points at the C tile of the driver's next call: the first mr K-loop iterations
    // each prefetch (into L2) one of its rows, so that its epilogue finds C in cache, not in memory.
    bool c_next_prefetch = false;
    // Variants that pack B as they go (UkernelVariant::packs_b) read B as stored, rows b_source_ldb floats
    // apart, prefetching each row's lines b_pack_prefetch_k steps ahead (0: none).
    int64_t b_source_ldb = 0;
    int b_pack_prefetch_k = 0;
};

struct UkernelVariant {
    int rows = 0;        // 1..mr
    int cols = 0;        // 1..nr
    int64_t k_len = 0;   // K steps of this block
    bool first = true;   // applies beta*C (else accumulates onto C)
    bool last = true;    // applies bias and activation
    bool partial = false;  // a K-split part: first never reads C (no beta), last applies no bias/activation
    // Reads B as stored (layout.b_source_ldb; b_packed layouts only) and stores every B vector it loads into
    // the packed panel at the eighth argument ([k][nr], the full tile's width: a column tail's masked lanes
    // are stored as zeros), so that the first row tile of a block packs B for the others while its FMAs
    // run, instead of a separate copy pass with the FMA units idle.
    bool packs_b = false;
};

// One tile of a whole small problem emitted as a single function: the variant plus the tile's byte offsets
// from the base pointers the function receives.
struct PlacedTile {
    UkernelVariant variant;
    int64_t a_offset = 0, b_offset = 0, c_offset = 0, bias_offset = 0;
};

// A problem of short K swept down M by one generated function: the row of tiles of a full row tile (one per
// column panel) repeated `row_tiles` times, the base pointers stepped by a row tile each time, then the row
// tail's tiles. Each tile's work is too small for the driver's loops and calls between the tiles (809x32x4: a
// few hundred cycles a tile), which a problem too large for the single call would otherwise pay per tile.
struct RowSweep {
    std::vector<PlacedTile> full_row, tail_row;  // offsets from the base pointers of the row tile
    int64_t a_step = 0, c_step = 0, bias_step = 0;  // bytes from one row tile to the next
};

// Runs `row_tiles` full row tiles from the base pointers, then the row tail's tiles if with_tail is nonzero.
using RowSweepFn = void (*)(const float* a, const float* b, float* c, const float* bias, int64_t row_tiles,
                            int64_t with_tail);

struct GeneratedCode {
    std::vector<uint8_t> bytes;   // position-independent: constants are addressed RIP-relative
    std::vector<size_t> entries;  // offset of each requested variant, in order; then the whole-problem entry,
                                  // the row sweep's and the K-split finish entry (each only when asked for)
};

// a_prefetch: the row of A to prefetch over this call's K range; b_prefetch: the run of the next B block's
// source to prefetch; c_next: the next call's C tile (any readable address where there is none); b_pack:
// the packed panel a packs_b variant writes (ignored by the others).
using UkernelFn = void (*)(const float* a, const float* b, float* c, const float* bias, const float* a_prefetch,
                           const float* b_prefetch, const float* c_next, float* b_pack);

// Scratch registers the epilogue needs beyond the accumulators (activations use up to three).
constexpr int kEpilogueTemps = 3;

inline int vector_length(hw::X86Isa isa) { return isa >= hw::X86Isa::avx512 ? 16 : 8; }
inline int vector_register_count(hw::X86Isa isa) { return isa >= hw::X86Isa::avx512 ? 32 : 16; }

// Throws jitmm::Error(JIT_FAILED) if Xbyak rejects something. With `whole` non-empty, one more function
// runs those tiles back to back (same signature, base pointers): small problems then cost one call. With
// `sweep`, the row sweep function (RowSweepFn). With `finish`, the K-split finish function
// (gemm_f32_split_finish.hpp) comes last.
GeneratedCode generate_gemm_f32(const GemmF32Layout& layout, const std::vector<UkernelVariant>& variants,
                                const std::vector<PlacedTile>& whole = {},
                                const SplitFinishLayout* finish = nullptr, const RowSweep* sweep = nullptr);

}  // namespace jitmm::x86
