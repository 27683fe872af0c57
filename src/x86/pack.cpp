#include "x86/pack.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace jitmm::x86 {

namespace {

// dst[c][r] = src[r][c] for an 8 x 8 block (AVX2: every tier jitmm runs on has it).
__attribute__((target("avx2"))) void transpose_8x8(const float* src, int64_t src_ld, float* dst, int64_t dst_ld) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_ld);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + i * dst_ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * dst_ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

}  // namespace

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
            // 8 x 8 blocks through registers, then the ragged edges element by element.
            const int64_t w8 = w / 8 * 8, k8 = k_len / 8 * 8;
            for (int64_t j = 0; j < w8; j += 8)
                for (int64_t k = 0; k < k8; k += 8)
                    transpose_8x8(b + (j0 + p0 + j) * ldb + k0 + k, ldb, panel + k * nr + j, nr);
            for (int64_t j = 0; j < w; ++j) {
                const float* src = b + (j0 + p0 + j) * ldb + k0;
                for (int64_t k = (j < w8 ? k8 : 0); k < k_len; ++k) panel[k * nr + j] = src[k];
            }
        }
    }
}

}  // namespace jitmm::x86
