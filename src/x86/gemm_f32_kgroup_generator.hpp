// The f32 k-group microkernel generator (AVX-512), for many rows of A (stored M x K) over few columns (2 to 8)
// and a short K. The broadcast tiles spend one FMA per A value on a vector of mostly padding lanes, the dot
// kernel a reduction of a whole vector per output; here one FMA takes g consecutive A values of a row, broadcast
// by one load into each of the 16 / g column slots of a vector, times a packed B vector whose slot c holds column
// c's g values. A row's accumulator then holds g partial sums per column, which the epilogue adds up for g rows
// at once (the last levels of a reduction tree and one permute) into a vector of g rows x 16 / g columns.
//
//   void ukernel(const float* a, const float* bp, float* c, const float* bias);
//
//   acc[i] += bcast_g(A[i][k .. k+g)) * bp[k / g]        for k = 0, g, 2g, ... (the last group masked)
//   C[i][j] = act(alpha * sum_q acc[i][g j + q] + beta * C[i][j] + bias)
#pragma once

#include "core/problem.hpp"

#include <cstdint>
#include <vector>

namespace jitmm::x86 {

struct GemmF32KGroupLayout {
    int g = 4;        // K values per FMA: 2, 4 or 8 (a vector of 16 / g column slots)
    int n = 0;        // columns of C, at most 16 / g
    int mr = 24;      // rows per tile (a row tail variant has fewer)
    int64_t k = 0, lda = 0, ldc = 0;
    float alpha = 1, beta = 0;
    BiasKind bias = BiasKind::none;
    Activation activation = Activation::none;
    int64_t a_prefetch_bytes = 0;  // > 0: each call first prefetches (into L2) the lines this far past its A rows
    bool c_transposed = false;     // C^T: the tile's row i, column j at c[j * ldc + i] (a swapped problem's C)
};

// The most rows a tile holds (one accumulator each, beside the epilogue's scratch).
constexpr int kKGroupMaxRows = 24;

inline int kgroup_slots(int g) { return 16 / g; }
// Packed B vectors: one per group of g K values, K rounded up.
inline int64_t kgroup_b_vectors(int64_t k, int g) { return (k + g - 1) / g; }

struct GeneratedKGroupCode {
    std::vector<uint8_t> bytes;
    std::vector<size_t> entries;  // one per entry of `rows`
};

// One function per row count in `rows` (each 1 .. layout.mr).
GeneratedKGroupCode generate_gemm_f32_kgroup(const GemmF32KGroupLayout& layout, const std::vector<int>& rows);

}  // namespace jitmm::x86
