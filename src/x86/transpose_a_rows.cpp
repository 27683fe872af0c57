#include "x86/transpose_a_rows.hpp"

namespace jitmm::x86 {

int64_t transposed_a_row_stride(int64_t k) {
    constexpr int64_t kLineFloats = 16;
    int64_t ld = (k + kLineFloats - 1) / kLineFloats * kLineFloats;
    if (ld % 256 == 0) ld += kLineFloats;
    return ld;
}

void transpose_a_to_rows(const float* a, int64_t lda, int64_t m, int64_t k, float* rows, int64_t rows_ld) {
    // Blocks of K: the block's stored rows of A (m contiguous values each) stay in L1 while each output row
    // takes its run of the block.
    constexpr int64_t kBlock = 64;
    for (int64_t p0 = 0; p0 < k; p0 += kBlock) {
        const int64_t p1 = p0 + kBlock < k ? p0 + kBlock : k;
        for (int64_t i = 0; i < m; ++i) {
            float* out = rows + i * rows_ld;
            const float* in = a + i;
            for (int64_t p = p0; p < p1; ++p) out[p] = in[p * lda];
        }
    }
}

}  // namespace jitmm::x86
