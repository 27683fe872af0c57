#include "x86/pack.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace jitmm::x86 {

namespace {

// dst[c][r] = src[r][c] for an 8 x 8 block (AVX2: every tier jitmm runs on has it). The 128-bit halves of
// rows r and r + 4 are loaded into one register (the insert reads memory: a load, not a shuffle), so that
// each lane then holds a 4 x 4 block and two rounds of in-lane shuffles finish it: 16 shuffles per block
// instead of 24 plus 8 lane-crossing permutes (packing a transposed B was shuffle-bound).
// [p[0..4) | p[4 ld..4 ld + 4)]
__attribute__((target("avx2"))) inline __m256 load_halves(const float* p, int64_t ld) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), _mm_loadu_ps(p + 4 * ld), 1);
}

__attribute__((target("avx2"), always_inline)) inline void transpose_8x8(const float* src, int64_t src_ld, float* dst,
                                                                       int64_t dst_ld) {
    for (int half = 0; half < 2; ++half) {
        const float* in = src + 4 * half;
        const __m256 r0 = load_halves(in, src_ld), r1 = load_halves(in + src_ld, src_ld);
        const __m256 r2 = load_halves(in + 2 * src_ld, src_ld), r3 = load_halves(in + 3 * src_ld, src_ld);
        const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        float* out = dst + 4 * half * dst_ld;
        _mm256_storeu_ps(out, _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)));
        _mm256_storeu_ps(out + dst_ld, _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)));
        _mm256_storeu_ps(out + 2 * dst_ld, _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)));
        _mm256_storeu_ps(out + 3 * dst_ld, _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)));
    }
}

// 8 stored rows (16 with dst_hi) over k in [0, k8), k8 a multiple of 8: panel columns dst_lo[k * nr] (and
// dst_hi), both halves per 8 k so that a 64-byte line of a panel row is written whole while it is in L1.
__attribute__((target("avx2"))) void transpose_rows(const float* src, int64_t ld, float* dst_lo, float* dst_hi,
                                                    int64_t k8, int64_t nr) {
    for (int64_t k = 0; k < k8; k += 8) {
        transpose_8x8(src + k, ld, dst_lo + k * nr, nr);
        if (dst_hi) transpose_8x8(src + 8 * ld + k, ld, dst_hi + k * nr, nr);
    }
}

// GCC 12 flags the undefined upper lanes the 128-bit load hands to the inserts as "may be used uninitialized":
// the inserts overwrite them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// 16 stored rows x 16 k -> 16 panel rows of 16 floats (AVX-512). Each register gathers 128-bit quarters of four rows
// 4 apart (lane l: row 4 l + i, k 4 c .. 4 c + 3; the inserts read memory: loads, not shuffles), so that one round
// of in-lane 4 x 4 transposes finishes it: 32 shuffles and 16 whole-line stores per 256 floats instead of 64 and 32.
__attribute__((target("avx512f"), always_inline)) inline void transpose_16x16(const float* src, int64_t ld,
                                                                             float* dst, int64_t nr) {
    for (int c = 0; c < 4; ++c) {
        __m512 r[4];
        for (int i = 0; i < 4; ++i) {
            const float* p = src + i * ld + 4 * c;
            __m512 v = _mm512_castps128_ps512(_mm_loadu_ps(p));
            v = _mm512_insertf32x4(v, _mm_loadu_ps(p + 4 * ld), 1);
            v = _mm512_insertf32x4(v, _mm_loadu_ps(p + 8 * ld), 2);
            r[i] = _mm512_insertf32x4(v, _mm_loadu_ps(p + 12 * ld), 3);
        }
        const __m512 t0 = _mm512_unpacklo_ps(r[0], r[1]), t1 = _mm512_unpackhi_ps(r[0], r[1]);
        const __m512 t2 = _mm512_unpacklo_ps(r[2], r[3]), t3 = _mm512_unpackhi_ps(r[2], r[3]);
        float* out = dst + 4 * c * nr;
        _mm512_storeu_ps(out, _mm512_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)));
        _mm512_storeu_ps(out + nr, _mm512_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)));
        _mm512_storeu_ps(out + 2 * nr, _mm512_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)));
        _mm512_storeu_ps(out + 3 * nr, _mm512_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)));
    }
}

__attribute__((target("avx512f"))) void transpose_rows_16(const float* src, int64_t ld, float* dst, int64_t k16,
                                                          int64_t nr) {
    for (int64_t k = 0; k < k16; k += 16) transpose_16x16(src + k, ld, dst + k * nr, nr);
}
#pragma GCC diagnostic pop

// GCC 12's unpack intrinsics pass _mm512_undefined_ps() as their merge source and then warn that it is
// uninitialized (the unmasked forms never read it).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Up to 4 values from k0 on of 16 stored rows into 16 panel columns (AVX-512): each row's values by one masked
// load (nothing past them is read), four rows 4 apart per register (lane l: row 4 l + i), then one round of
// in-lane 4 x 4 transposes leaves column k0 + c of all 16 rows, in order, in one register: a whole 64-byte store.
__attribute__((target("avx512f,avx512vl"))) void transpose_16x4(const float* src, int64_t ld, float* dst,
                                                                int64_t k0, int count, int64_t nr) {
    const __mmask8 valid = static_cast<__mmask8>((1u << count) - 1);
    __m512 r[4];
    for (int i = 0; i < 4; ++i) {
        const float* p = src + i * ld + k0;
        __m512 v = _mm512_zextps128_ps512(_mm_maskz_loadu_ps(valid, p));
        v = _mm512_insertf32x4(v, _mm_maskz_loadu_ps(valid, p + 4 * ld), 1);
        v = _mm512_insertf32x4(v, _mm_maskz_loadu_ps(valid, p + 8 * ld), 2);
        r[i] = _mm512_insertf32x4(v, _mm_maskz_loadu_ps(valid, p + 12 * ld), 3);
    }
    const __m512 t0 = _mm512_unpacklo_ps(r[0], r[1]), t1 = _mm512_unpackhi_ps(r[0], r[1]);
    const __m512 t2 = _mm512_unpacklo_ps(r[2], r[3]), t3 = _mm512_unpackhi_ps(r[2], r[3]);
    const __m512 columns[4] = {_mm512_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
                               _mm512_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm512_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2))};
    for (int c = 0; c < count; ++c) _mm512_storeu_ps(dst + (k0 + c) * nr, columns[c]);
}

#pragma GCC diagnostic pop

// The last k_len - k0 values (fewer than 16: K's tail past the 16 x 16 blocks, or all of a short K) of 16 stored
// rows into 16 panel columns, 4 values at a time, and a last one or two by a gather each. The 16 x 4 transposes
// (zmm, a whole panel row per store) also beat the two 8 x 8 ymm blocks that did K's tail's first 8 values
// before (1 thread, median us of 3 alternated rounds: 5x3955x14 NT 12.0 -> 9.9, 14x556x12 NT x7 16.2 -> 13.6,
// 8x1297x12 NT 4.25 -> 3.52, 8x2000x9 NT 5.34 -> 4.13, 8x2000x25 9.39 -> 8.48, 8x2000x40 14.1 -> 13.4), and so
// did leaving out the empty calls for a K under 8 (5x2280x4 TT 3.07 -> 2.66). Element by element the
// tail cost 16 scalar stores per k (2/3 of a short-K NT call, 7x3355x5: 18 us, 0.41x oneDNN); a gather for every
// k was still a quarter of 31x1237x5 NT, but a transpose for the fifth value alone cost more than its gather
// (1 thread, 7x99x5 NT x60 10.1 -> 9.2 us, 2x2998x5 TT 3.9 -> 3.6).
__attribute__((target("avx512f,avx512vl"))) void transpose_tail_16(const float* src, int64_t ld, float* dst,
                                                                   int64_t k0, int64_t k_len, int64_t nr) {
    int64_t k = k0;
    for (; k + 2 < k_len; k += 4)
        transpose_16x4(src, ld, dst, k, static_cast<int>(std::min<int64_t>(4, k_len - k)), nr);
    if (k < k_len && 16 * ld < (int64_t(1) << 31)) {
        // One or two values left: a gather each costs less than a transpose's 16 loads and 12 inserts.
        const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                _mm512_set1_epi32(static_cast<int32_t>(ld)));
        for (; k < k_len; ++k)
            _mm512_storeu_ps(dst + k * nr, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff, rows, src + k, 4));
    } else if (k < k_len) {
        transpose_16x4(src, ld, dst, k, static_cast<int>(k_len - k), nr);
    }
}

// dst[0, n) = src[0, n): 8 floats per move, the rest one by one (rows of a panel are short: a call to
// memcpy per row costs about as much as the copy).
__attribute__((target("avx2"))) void copy_floats(const float* src, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
    for (; i < n; ++i) dst[i] = src[i];
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// dst[c][r] = src[r][c] for r < rows, c < cols (both at most 16): the rows loaded under a column mask (rows past
// `rows` are zeros, never read), a 16 x 16 transpose in registers (4 rounds of 16 shuffles), and `cols` stores
// under a row mask, or whole (`whole_rows`: lanes from `rows` on written as zeros).
__attribute__((target("avx512f"))) void transpose_block_16(const float* src, int64_t src_ld, int rows, int cols,
                                                            float* dst, int64_t dst_ld, bool whole_rows = false) {
    const __mmask16 col_mask = static_cast<__mmask16>((1u << cols) - 1);
    const __mmask16 row_mask = whole_rows ? __mmask16(0xffff) : static_cast<__mmask16>((1u << rows) - 1);
    __m512 r[16], t[16];
    for (int i = 0; i < 16; ++i)
        r[i] = i < rows ? _mm512_maskz_loadu_ps(col_mask, src + i * src_ld) : _mm512_setzero_ps();
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // Lane l of r[4 g + c]: rows 4 g .. 4 g + 3 of column 4 l + c.
    for (int g = 0; g < 4; ++g) {
        r[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
        t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
        t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
        t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    }
    // Column c: t[c % 8] and t[8 + c % 8], the even (c < 8) or odd 128-bit lanes of each.
    for (int c = 0; c < cols; ++c) {
        const __m512 column = c < 8 ? _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88)
                                    : _mm512_shuffle_f32x4(t[c - 8], t[c], 0xDD);
        _mm512_mask_storeu_ps(dst + c * dst_ld, row_mask, column);
    }
}

#pragma GCC diagnostic pop

// The last unit of a transposed B when it has fewer than 16 stored rows (AVX-512, the unit inside one panel):
// 16 x 16 blocks through registers, its rows loaded under a K mask (nothing past them is read) and every panel
// row stored whole, the lanes of the missing rows as zeros (the panel's padding). Element by element, with the
// padding zeroed apart, this was half of small NT calls over few columns (1 thread: 15x10x50 x38, 17x5x114 x4).
__attribute__((target("avx512f"))) void transpose_ragged_rows_16(const float* src, int64_t ld, int rows,
                                                                  float* dst, int64_t k_len, int64_t nr) {
    for (int64_t k = 0; k < k_len; k += 16)
        transpose_block_16(src + k, ld, rows, static_cast<int>(std::min<int64_t>(16, k_len - k)), dst + k * nr, nr,
                           true);
}

// 16 stored rows of one or two values each, stored densely (ldb = K = k_len): 16 k_len contiguous floats, split
// into the k_len panel rows by one permute each (two gathers before).
__attribute__((target("avx512f"))) void transpose_dense_rows_16(const float* src, int64_t k_len, float* dst,
                                                                 int64_t nr) {
    if (k_len == 1) {
        _mm512_storeu_ps(dst, _mm512_loadu_ps(src));
        return;
    }
    const __m512 v0 = _mm512_loadu_ps(src), v1 = _mm512_loadu_ps(src + 16);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    _mm512_storeu_ps(dst, _mm512_permutex2var_ps(v0, even, v1));
    _mm512_storeu_ps(dst + nr, _mm512_permutex2var_ps(v0, odd, v1));
}

}  // namespace

void transpose_f32(const float* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst, int64_t dst_ld,
                   bool avx512) {
    if (!avx512) {
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) dst[c * dst_ld + r] = src[r * src_ld + c];
        return;
    }
    for (int64_t r = 0; r < rows; r += 16)
        for (int64_t c = 0; c < cols; c += 16)
            transpose_block_16(src + r * src_ld + c, src_ld, static_cast<int>(std::min<int64_t>(16, rows - r)),
                               static_cast<int>(std::min<int64_t>(16, cols - c)), dst + c * dst_ld + r, dst_ld);
}

void pack_a_f32(const float* a, int64_t lda, bool trans_a, int64_t i0, int rows, int64_t k0, int64_t k_len,
                int64_t panel_ld, float* panel) {
    const size_t bytes = static_cast<size_t>(trans_a ? rows : k_len) * sizeof(float);
    const int64_t runs = trans_a ? k_len : rows;
    for (int64_t r = 0; r < runs; ++r) {
        const float* src = trans_a ? a + (k0 + r) * lda + i0 : a + (i0 + r) * lda + k0;
        std::memcpy(panel + r * panel_ld, src, bytes);
    }
}

namespace {

// The same with AVX-512, tiles of at most 16 rows: a masked load of the tile's values per stored row (nothing
// past them is read), and a store of a whole vector where it ends inside the tile's panel: its lanes past the
// tile's land in the next k slots, which their own stores write later; nearer the panel's end only the tile's
// lanes are stored. (Element by element, this was a tenth of a 2049x1036x183 TN call on Zen 4.)
__attribute__((target("avx512f"))) void pack_a_f32_transposed_tiles_16(const float* a, int64_t lda, int64_t i0,
                                                                       int64_t i_end, int mr, int64_t k0,
                                                                       int64_t k_len, int64_t panel_floats,
                                                                       float* panels) {
    for (int64_t k = 0; k < k_len; ++k) {
        const float* src = a + (k0 + k) * lda;
        float* dst = panels + k * mr;
        const bool whole_vector = k * mr + 16 <= k_len * mr;
        for (int64_t i = i0; i < i_end; i += mr, dst += panel_floats) {
            const int n = static_cast<int>(std::min<int64_t>(mr, i_end - i));
            const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1);
            const __m512 v = _mm512_maskz_loadu_ps(lanes, src + i);
            if (whole_vector && n == mr) _mm512_storeu_ps(dst, v);
            else _mm512_mask_storeu_ps(dst, lanes, v);
        }
    }
}

}  // namespace

void pack_a_f32_transposed_tiles(const float* a, int64_t lda, int64_t i0, int64_t i_end, int mr, int64_t k0,
                                 int64_t k_len, int64_t panel_floats, float* panels, bool avx512) {
    if (avx512 && mr <= 16) {
        pack_a_f32_transposed_tiles_16(a, lda, i0, i_end, mr, k0, k_len, panel_floats, panels);
        return;
    }
    for (int64_t k = 0; k < k_len; ++k) {
        const float* src = a + (k0 + k) * lda;
        float* dst = panels + k * mr;
        for (int64_t i = i0; i < i_end; i += mr, dst += panel_floats) {
            const int64_t n = std::min<int64_t>(mr, i_end - i);
            for (int64_t j = 0; j < n; ++j) dst[j] = src[i + j];
        }
    }
}

int64_t pack_b_units(bool trans_b, int64_t k_len, int64_t width) {
    return trans_b ? (width + kPackBColumns - 1) / kPackBColumns : k_len;
}

void pack_b_f32(const float* b, int64_t ldb, bool trans_b, int64_t k0, int64_t k_len, int64_t j0, int64_t width,
                int nr, bool avx512, float* panels, int64_t unit_begin, int64_t unit_end) {
    const int64_t panel_count = (width + nr - 1) / nr;
    const int64_t pad_from = width - (panel_count - 1) * nr;  // first padding column of the last panel
    float* last_panel = panels + (panel_count - 1) * k_len * nr;
    if (!trans_b) {
        // Slices of kRowSlice rows, each panel by panel: the panels are written in runs of whole lines, and
        // the slice's B rows (read across every panel before the next slice) stay few enough for the
        // prefetchers to stream them from memory (cold 512x512 block: 169 -> 93 us against whole panels).
        constexpr int64_t kRowSlice = 16;
        for (int64_t k1 = unit_begin; k1 < unit_end; k1 += kRowSlice) {
            const int64_t k2 = std::min(unit_end, k1 + kRowSlice);
            for (int64_t p = 0; p < panel_count; ++p) {
                const int64_t w = std::min<int64_t>(nr, width - p * nr);
                for (int64_t k = k1; k < k2; ++k)
                    copy_floats(b + (k0 + k) * ldb + j0 + p * nr, panels + p * k_len * nr + k * nr, w);
            }
        }
        // (Plain stores: a memset call per row cost more than the row's copy, a narrow tail panel of fused
        // packing copied every block: 104x130x3549.)
        if (pad_from < nr)
            for (int64_t k = unit_begin; k < unit_end; ++k)
                std::fill(last_panel + k * nr + pad_from, last_panel + (k + 1) * nr, 0.0f);
        return;
    }
    // op(B)[k][j] = B[j][k]: 16 stored rows (contiguous in k) at a time, transposed into panel columns in
    // 16 x 16 (AVX-512) or 8 x 8 blocks through registers; ragged edges element by element. The 16 x 16 blocks
    // made whole GEMMs faster (1 thread, two builds alternated in one process: 128x4096x4096 NT bias+GELU
    // +1.4..3.8%, 128x11008x4096 NT +2.5%).
    const int64_t k8 = k_len / 8 * 8;
    // The unit's first column as panel and column in it, stepped unit by unit: a division by nr per unit was a
    // third of a short K's pack (5x2280x2 TT).
    int64_t unit_panel = unit_begin * kPackBColumns / nr, unit_column = unit_begin * kPackBColumns % nr;
    auto place = [&](int64_t panel, int64_t column) {
        while (column >= nr) {
            column -= nr;
            ++panel;
        }
        return panels + panel * k_len * nr + column;
    };
    for (int64_t g = unit_begin; g < unit_end; ++g) {
        const int64_t j = g * kPackBColumns, cols = std::min<int64_t>(kPackBColumns, width - j);
        const float* src = b + (j0 + j) * ldb + k0;
        // Where column c of the unit starts in its panel (a division by nr: for the rare columns done one by one).
        auto dst_of = [&](int64_t c) { return panels + ((j + c) / nr) * k_len * nr + (j + c) % nr; };
        float* const dst0 = place(unit_panel, unit_column);
        float* const dst8 = cols > 8 ? place(unit_panel, unit_column + 8) : nullptr;
        unit_column += kPackBColumns;
        while (unit_column >= nr) {
            unit_column -= nr;
            ++unit_panel;
        }
        const int64_t full = cols / 8 * 8;  // columns done in 8 x 8 blocks (for k < k8)
        int64_t tail_done = 0;  // leading columns whose K tail transpose_tail_16 wrote
        int64_t zeroed_to = 0;  // the panel's columns up to which the unit stored zero padding
        if (avx512 && nr % 16 == 0 && cols < 16) {  // the unit lies in one panel (nr a multiple of 16)
            transpose_ragged_rows_16(src, ldb, static_cast<int>(cols), dst0, k_len, nr);
            tail_done = cols;
            zeroed_to = pad_from - cols + 16;  // (the unit ends the width: its first column is pad_from - cols)
        } else if (avx512 && nr % 16 == 0 && cols == 16 && k_len == ldb && k_len <= 2) {
            transpose_dense_rows_16(src, k_len, dst0, nr);
            tail_done = 16;
        } else if (avx512 && full == 16 && nr % 16 == 0) {  // the unit's 16 columns lie in one panel
            const int64_t k16 = k_len / 16 * 16;
            if (k16 > 0) transpose_rows_16(src, ldb, dst0, k16, nr);
            if (k16 < k_len) transpose_tail_16(src, ldb, dst0, k16, k_len, nr);
            tail_done = 16;
        } else {
            transpose_rows(src, ldb, dst0, full >= 16 ? dst8 : nullptr, full > 0 ? k8 : 0, nr);
        }
        for (int64_t c = tail_done; c < cols; ++c) {
            float* const dst = dst_of(c);
            for (int64_t k = c < full ? k8 : 0; k < k_len; ++k) dst[k * nr] = src[c * ldb + k];
        }
        const int64_t zero_from = std::max(pad_from, zeroed_to);
        if (j + cols == width && zero_from < nr)
            for (int64_t k = 0; k < k_len; ++k)
                std::memset(last_panel + k * nr + zero_from, 0, static_cast<size_t>(nr - zero_from) * sizeof(float));
    }
}

void transpose_f32_padded(const float* src, int64_t src_ld, int64_t src_rows, int64_t src_cols, float* dst,
                          int64_t dst_ld) {
    // A transposed B's packing is exactly this transpose: op(B)'s k is the destination row, its column the source
    // row, and one panel dst_ld wide (whose padding columns are zeroed) holds them all.
    pack_b_f32(src, src_ld, true, 0, src_cols, 0, src_rows, static_cast<int>(dst_ld), false, dst);
}

}  // namespace jitmm::x86
