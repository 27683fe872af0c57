// The f32 one-row generator (AVX-512) for C[1, N] = a[1, K] B[K, N] with B stored K x N (NN, a decode-like
// GEMV): B is read in place, row by row, each row front to back in whole vectors, never packed. The tiles of
// the broadcast family cut K into short blocks and each block's rows into column panels, so B arrives as short
// row pieces; here `streams` rows from as many far-apart segments of K are in flight at once (each a sequential
// stream the L2 prefetcher follows within its 4 KiB pages), their products summed into one row of partial sums
// that stays in L1 (the call's `acc` scratch), so B is read exactly once, in the order it is stored. The last row
// group's pass applies the epilogue and stores C.
//
//   void gemv(const float* a, const float* b, float* c, const float* bias, float* acc, int64_t vectors);
//
//   b, c and a per-column bias start at the call's first column; `vectors` whole 16-column vectors, then (in the
//   tail variant) the row's last N % 16 columns. acc holds as many vectors (tail included), 64-byte aligned.
//   sum[j] = sum_s sum_i a[s L + i] B[s L + i][j]         (L = K / streams rows per segment, then K % streams)
//   C[j]   = act(alpha sum[j] + beta C[j] + bias)
#pragma once

#include "core/problem.hpp"

#include <cstdint>
#include <vector>

namespace jitmm::x86 {

struct GemmF32GemvLayout {
    int64_t n = 0, k = 0;   // N (its last N % 16 columns are the tail variant's) and K
    int64_t a_step = 4;     // bytes between consecutive K values of a (4, or lda * 4 for an A stored K x 1)
    int64_t ldb = 0;        // B's row stride, elements
    int streams = 4;        // rows of far-apart K segments read at once (1 .. kGemvMaxStreams)
    int64_t prefetch_bytes = 0;  // > 0: every 4 vectors, each stream's line this far ahead is prefetched into L2
    float alpha = 1, beta = 0;
    BiasKind bias = BiasKind::none;
    Activation activation = Activation::none;
};

constexpr int kGemvMaxStreams = 16;

struct GeneratedGemvCode {
    std::vector<uint8_t> bytes;
    size_t whole_entry = 0;  // whole vectors only
    size_t tail_entry = 0;   // whole vectors, then the N % 16 tail (equal to whole_entry where N % 16 == 0)
};

GeneratedGemvCode generate_gemm_f32_gemv(const GemmF32GemvLayout& layout);

}  // namespace jitmm::x86
