// The f32 dot-product microkernel generator (AVX-512 and AVX2), for C = A * B^T with B stored N x K (the
// layout of a Linear layer's weights) and few rows of A: every output is a dot product of two contiguous
// K-runs, so the kernel streams B's rows once, at memory speed, without packing or transposing them.
//
//   void ukernel(const float* a, const float* bt, float* c, const float* bias);
//
//   acc[i][j] (a vector) += A[i][k..k+v) * Bt[j][k..k+v)     for k over all of K (tail lanes masked)
//   c[i][j] = act(alpha * hsum(acc[i][j]) + beta * C[i][j] + bias)
#pragma once

#include "core/problem.hpp"
#include "hw/cpu.hpp"
#include "x86/gemm_f32_split_finish.hpp"

#include <cstdint>
#include <vector>

namespace jitmm::x86 {

struct GemmF32DotLayout {
    hw::X86Isa isa = hw::X86Isa::avx512;  // avx2 or avx512
    int mr = 1;                           // rows of A per tile
    int nj = 16;                          // rows of Bt (columns of C) per tile
    int64_t k = 0;                        // the whole K: no K blocking, accumulators hold complete sums
    int64_t lda = 0, ldb = 0, ldc = 0;
    float alpha = 1, beta = 0;
    BiasKind bias = BiasKind::none;
    Activation activation = Activation::none;
    int k_unroll = 2;                     // vectors of K per loop iteration
    int64_t b_prefetch_bytes = 0;         // > 0: each iteration prefetches every Bt row's lines this far ahead
    int64_t a_prefetch_bytes = 0;         // > 0: each iteration prefetches every A row's lines this far ahead
    bool a_prefetch_to_l2 = false;        // those prefetches into L2 (prefetcht1), not L1
};

// A K-split part (partial) takes a fifth argument, the count of k_unroll-vector iterations it runs from
// where the pointers start, and stores alpha * its sums with no beta, bias or activation (the finish pass
// in gemm_f32_split_finish.hpp applies them). The last part (k_rest) also runs the rest of K: the full
// vectors past the whole iterations and the masked tail.
//
//   void part(const float* a, const float* bt, float* c, const float* bias, int64_t iterations);
struct DotVariant {
    int rows = 0;  // 1..mr
    int cols = 0;  // 1..nj
    bool partial = false;
    bool k_rest = true;  // with partial: also the K past the whole iterations
};

struct GeneratedDotCode {
    std::vector<uint8_t> bytes;
    std::vector<size_t> entries;  // one per variant, then the finish function's when asked for
};

// Registers: rows*cols accumulators + rows A vectors + 1 B vector (AVX2 also a K-tail mask).
bool dot_tile_fits(hw::X86Isa isa, int mr, int nj);

GeneratedDotCode generate_gemm_f32_dot(const GemmF32DotLayout& layout, const std::vector<DotVariant>& variants,
                                       const SplitFinishLayout* finish = nullptr);

}  // namespace jitmm::x86
