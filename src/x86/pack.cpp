#include "x86/pack.hpp"

#include <algorithm>
#include <cstring>

namespace jitmm::x86 {

void pack_a_f32(const float* a, int64_t lda, bool trans_a, int64_t i0, int rows, int64_t k0, int64_t k_len,
                int64_t panel_ld, float* panel) {
    const size_t bytes = static_cast<size_t>(trans_a ? rows : k_len) * sizeof(float);
    const int64_t runs = trans_a ? k_len : rows;
    for (int64_t r = 0; r < runs; ++r) {
        const float* src = trans_a ? a + (k0 + r) * lda + i0 : a + (i0 + r) * lda + k0;
        std::memcpy(panel + r * panel_ld, src, bytes);
    }
}

void pack_b_f32(const float* b, int64_t ldb, bool trans_b, int64_t k0, int64_t k_len, int64_t j0, int64_t width,
                int nr, float* panels) {
    for (int64_t p0 = 0; p0 < width; p0 += nr) {
        const int64_t w = std::min<int64_t>(nr, width - p0);
        float* panel = panels + (p0 / nr) * k_len * nr;
        if (!trans_b) {
            // op(B) rows are B rows: contiguous copies.
            for (int64_t k = 0; k < k_len; ++k) {
                const float* src = b + (k0 + k) * ldb + j0 + p0;
                float* dst = panel + k * nr;
                std::memcpy(dst, src, static_cast<size_t>(w) * sizeof(float));
                if (w < nr) std::memset(dst + w, 0, static_cast<size_t>(nr - w) * sizeof(float));
            }
        } else {
            // op(B)[k][j] = B[j][k]: read each stored row (contiguous in k) and scatter it into a panel column.
            if (w < nr)
                for (int64_t k = 0; k < k_len; ++k)
                    std::memset(panel + k * nr + w, 0, static_cast<size_t>(nr - w) * sizeof(float));
            for (int64_t j = 0; j < w; ++j) {
                const float* src = b + (j0 + p0 + j) * ldb + k0;
                for (int64_t k = 0; k < k_len; ++k) panel[k * nr + j] = src[k];
            }
        }
    }
}

}  // namespace jitmm::x86
