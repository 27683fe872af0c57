#include "x86/widen.hpp"

#include "core/dtype.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace jitmm::x86 {

namespace {

// n values (n <= 16) from src at 16 lanes; lanes past n are zero.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 widen_16(const void* src, jitmm_dtype type,
                                                                            int n) {
    const __mmask16 m = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
    switch (type) {
        case JITMM_DTYPE_BF16:
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src)), 16));
        case JITMM_DTYPE_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src));
        case JITMM_DTYPE_S8: return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, src)));
        default: return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, src)));
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void widen_run_16(const uint8_t* src, jitmm_dtype type,
                                                                       int64_t n, float* dst) {
    const int64_t esz = dtype_size(type);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, widen_16(src + i * esz, type, 16));
    if (i < n) {
        const int rest = static_cast<int>(n - i);
        _mm512_mask_storeu_ps(dst + i, __mmask16((1u << rest) - 1), widen_16(src + i * esz, type, rest));
    }
}

// 8 values from src (all of them readable).
__attribute__((target("avx2,f16c"))) inline __m256 widen_8(const void* src, jitmm_dtype type) {
    const __m128i v = _mm_loadu_si128(static_cast<const __m128i*>(src));
    switch (type) {
        case JITMM_DTYPE_BF16: return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
        case JITMM_DTYPE_F16: return _mm256_cvtph_ps(v);
        case JITMM_DTYPE_S8: return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
        default: return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
    }
}

__attribute__((target("avx2,f16c"))) void widen_run_8(const uint8_t* src, jitmm_dtype type, int64_t n, float* dst) {
    const int64_t esz = dtype_size(type);
    int64_t i = 0;
    // (An 8-value step of int8 loads 16 bytes: whole steps while those stay inside the run.)
    const int64_t load_values = 16 / esz;
    for (; i + load_values <= n; i += 8) _mm256_storeu_ps(dst + i, widen_8(src + i * esz, type));
    if (i < n) {
        alignas(16) uint8_t staged[16] = {};
        float out[8];
        for (; i < n; i += 8) {
            const int64_t count = std::min<int64_t>(8, n - i);
            std::memset(staged, 0, sizeof staged);
            std::memcpy(staged, src + i * esz, static_cast<size_t>(count * esz));
            _mm256_storeu_ps(out, widen_8(staged, type));
            std::memcpy(dst + i, out, static_cast<size_t>(count) * sizeof(float));
        }
    }
}

}  // namespace

void widen_to_f32(const void* src, jitmm_dtype type, int64_t rows, int64_t cols, int64_t ld, float* dst,
                  bool avx512) {
    const auto* bytes = static_cast<const uint8_t*>(src);
    const int64_t esz = dtype_size(type);
    // Rows stored back to back are one run (a K of 1 or 2 would otherwise be a masked step per row).
    if (ld == cols) {
        cols *= rows;
        rows = 1;
    }
    for (int64_t r = 0; r < rows; ++r) {
        if (avx512) widen_run_16(bytes + r * ld * esz, type, cols, dst + r * cols);
        else widen_run_8(bytes + r * ld * esz, type, cols, dst + r * cols);
    }
}

}  // namespace jitmm::x86
