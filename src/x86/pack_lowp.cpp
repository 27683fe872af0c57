#include "x86/pack_lowp.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "hw/cpu.hpp"
#include "x86/pack.hpp"
#include "x86/pack_a_transposed.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace jitmm::x86 {

using plan::LowpStep;

float bf16_to_f32(uint16_t h) {
    const uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN (payload kept)
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {
        // Subnormal: shift the leading one into the implicit position.
        int e = -1;
        do {
            ++e;
            mantissa <<= 1;
        } while ((mantissa & 0x400u) == 0);
        bits = sign | (uint32_t(112 - e) << 23) | ((mantissa & 0x3ffu) << 13);
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One element conversion from the stored type to the packed type; kIdentity: a plain copy (memcpy rows).
struct Raw8 {
    static constexpr bool kIdentity = true;
    using Src = uint8_t;
    using Dst = uint8_t;
    static Dst convert(Src v) { return v; }
};
struct S8ToU8 {  // +128: s8 in [-128, 127] to u8 in [0, 255]
    static constexpr bool kIdentity = false;
    using Src = uint8_t;
    using Dst = uint8_t;
    static Dst convert(Src v) { return static_cast<uint8_t>(v ^ 0x80u); }
};
struct S8ToS16 {
    static constexpr bool kIdentity = false;
    using Src = int8_t;
    using Dst = int16_t;
    static Dst convert(Src v) { return v; }
};
struct U8ToS16 {
    static constexpr bool kIdentity = false;
    using Src = uint8_t;
    using Dst = int16_t;
    static Dst convert(Src v) { return v; }
};
struct Raw16 {
    static constexpr bool kIdentity = true;
    using Src = uint16_t;
    using Dst = uint16_t;
    static Dst convert(Src v) { return v; }
};
struct Bf16ToF32 {
    static constexpr bool kIdentity = false;
    using Src = uint16_t;
    using Dst = float;
    static Dst convert(Src v) { return bf16_to_f32(v); }
};
struct F16ToF32 {
    static constexpr bool kIdentity = false;
    using Src = uint16_t;
    using Dst = float;
    static Dst convert(Src v) { return f16_to_f32(v); }
};

// The integer value of a stored int8 element, for the column sums.
inline int32_t int8_value(const void* base, int64_t index, bool is_signed) {
    const auto byte = static_cast<const uint8_t*>(base)[index];
    return is_signed ? int32_t(static_cast<int8_t>(byte)) : int32_t(byte);
}

template <typename Conv>
void pack_b_as(const void* b_any, int64_t ldb, bool trans_b, int64_t k0, int64_t k_len, int64_t j0, int64_t width,
               int nr, int g, int64_t groups, void* out_any, int32_t* colsum, bool b_signed) {
    using Src = typename Conv::Src;
    using Dst = typename Conv::Dst;
    const auto* b = static_cast<const Src*>(b_any);
    auto* out = static_cast<Dst*>(out_any);
    const int64_t panel_elems = groups * nr * g;
    for (int64_t p = 0; p < ceil_div(width, nr); ++p) {
        Dst* panel = out + p * panel_elems;
        const int64_t jp = j0 + p * nr;
        const int cols = static_cast<int>(std::min<int64_t>(nr, width - p * nr));
        if (!trans_b) {
            // Rows of B are contiguous in N: for each k, spread one row segment across the panel's dwords.
            for (int64_t kg = 0; kg < groups; ++kg) {
                Dst* row = panel + kg * nr * g;
                for (int e = 0; e < g; ++e) {
                    const int64_t k = kg * g + e;
                    if (k >= k_len) {
                        for (int c = 0; c < nr; ++c) row[c * g + e] = Dst(0);
                        continue;
                    }
                    const Src* src = b + (k0 + k) * ldb + jp;
                    for (int c = 0; c < cols; ++c) row[c * g + e] = Conv::convert(src[c]);
                    for (int c = cols; c < nr; ++c) row[c * g + e] = Dst(0);
                    if (colsum)
                        for (int c = 0; c < cols; ++c) colsum[p * nr + c] += int8_value(src, c, b_signed);
                }
            }
        } else {
            // B stored N x K: each column of op(B) is a contiguous run of K.
            std::memset(static_cast<void*>(panel), 0, sizeof(Dst) * panel_elems);
            for (int c = 0; c < cols; ++c) {
                const Src* src = b + (jp + c) * ldb + k0;
                for (int64_t k = 0; k < k_len; ++k) panel[((k / g) * nr + c) * g + k % g] = Conv::convert(src[k]);
                if (colsum) {
                    int32_t sum = 0;
                    for (int64_t k = 0; k < k_len; ++k) sum += int8_value(src, k, b_signed);
                    colsum[p * nr + c] += sum;
                }
            }
        }
    }
}

template <typename Conv>
void pack_a_as(const void* a_any, int64_t lda, bool trans_a, int64_t i0, int rows, int64_t k0, int64_t k_len,
               int64_t k_padded, int64_t panel_ld, void* panel_any) {
    using Src = typename Conv::Src;
    using Dst = typename Conv::Dst;
    const auto* a = static_cast<const Src*>(a_any);
    auto* panel = static_cast<Dst*>(panel_any);
    if (!trans_a) {
        for (int r = 0; r < rows; ++r) {
            const Src* src = a + (i0 + r) * lda + k0;
            Dst* dst = panel + r * panel_ld;
            if (Conv::kIdentity) std::memcpy(static_cast<void*>(dst), src, sizeof(Dst) * static_cast<size_t>(k_len));
            else for (int64_t k = 0; k < k_len; ++k) dst[k] = Conv::convert(src[k]);
            for (int64_t k = k_len; k < k_padded; ++k) dst[k] = Dst(0);
        }
        return;
    }
    // A stored K x M: walk K outermost so that each read is a contiguous run of the tile's rows.
    for (int64_t k = 0; k < k_len; ++k) {
        const Src* src = a + (k0 + k) * lda + i0;
        for (int r = 0; r < rows; ++r) panel[r * panel_ld + k] = Conv::convert(src[r]);
    }
    for (int r = 0; r < rows; ++r)
        for (int64_t k = k_len; k < k_padded; ++k) panel[r * panel_ld + k] = Dst(0);
}

// ---- vectorized B packing for the layouts the fast paths read (AVX2; every lowp tier has it) --------------

// Rows of a wide row-major B are fetched a slice (16 rows) ahead: each row crosses pages every 4 KB, where the
// hardware prefetchers stop, and a slice reads 16 rows at once (measured 3.5 GB/s from DRAM without, for a
// 4096 x 11008 int8 B).
constexpr int64_t kPrefetchRows = 16;
// A slice of row-major B packed for every panel before the next (pack_b_fast): at least kPrefetchRows rows, and
// for short rows as many as fill this many bytes, which stay in L1 while each panel takes its columns.
constexpr int64_t kSliceBytes = 8 * 1024;

// Sums of each dword's four int8 values, for the column sums: u8 x 1 (unsigned first) or 1 x s8.
__attribute__((target("avx2"))) inline __m256i quad_sums(__m256i x, bool is_signed) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    const __m256i pairs = is_signed ? _mm256_maddubs_epi16(ones8, x) : _mm256_maddubs_epi16(x, ones8);
    return _mm256_madd_epi16(pairs, ones16);
}

// sums[c] += the sum of column c's int8 values over a packed panel's first `groups` k groups (nr columns a group).
// 64 columns at a time down the groups, in eight accumulators: each group row's 256 bytes are whole lines. (Eight
// columns at a time read 32 bytes of every line of a panel past L1, once per 8 columns: s8 1x914x832 on VNNI,
// 1 thread, spent 26 of its 59 us here.)
constexpr int kColumnSumVectors = 8;
__attribute__((target("avx2"))) void panel_column_sums(const uint32_t* panel, int64_t groups, int cols, int64_t nr,
                                                       int32_t* sums, bool is_signed) {
    int c = 0;
    for (; c + 8 <= cols; c += 8 * kColumnSumVectors) {
        const int vectors = std::min(kColumnSumVectors, (cols - c) / 8);
        __m256i acc[kColumnSumVectors];
        for (int v = 0; v < kColumnSumVectors; ++v) acc[v] = _mm256_setzero_si256();
        for (int64_t q = 0; q < groups; ++q) {
            const uint32_t* row = panel + q * nr + c;
            if (vectors == kColumnSumVectors) {
#pragma GCC unroll 8
                for (int v = 0; v < kColumnSumVectors; ++v)
                    acc[v] = _mm256_add_epi32(acc[v], quad_sums(_mm256_loadu_si256(
                                                          reinterpret_cast<const __m256i*>(row + 8 * v)), is_signed));
            } else {
                for (int v = 0; v < vectors; ++v)
                    acc[v] = _mm256_add_epi32(acc[v], quad_sums(_mm256_loadu_si256(
                                                          reinterpret_cast<const __m256i*>(row + 8 * v)), is_signed));
            }
        }
        for (int v = 0; v < vectors; ++v) {
            auto* at = reinterpret_cast<__m256i*>(sums + c + 8 * v);
            _mm256_storeu_si256(at, _mm256_add_epi32(acc[v], _mm256_loadu_si256(at)));
        }
        if (vectors < kColumnSumVectors) {
            c += 8 * vectors;
            break;
        }
    }
    for (; c < cols; ++c) {
        int32_t sum = 0;
        for (int64_t q = 0; q < groups; ++q) {
            const uint32_t v = panel[q * nr + c];
            for (int e = 0; e < 4; ++e) {
                const uint8_t byte = static_cast<uint8_t>(v >> (8 * e));
                sum += is_signed ? int32_t(static_cast<int8_t>(byte)) : int32_t(byte);
            }
        }
        sums[c] += sum;
    }
}

}  // namespace

__attribute__((target("avx2"))) void scale_column_sums(int32_t* sums, int64_t n, int32_t factor) {
    const __m256i f = _mm256_set1_epi32(factor);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        auto* at = reinterpret_cast<__m256i*>(sums + j);
        _mm256_storeu_si256(at, _mm256_mullo_epi32(_mm256_loadu_si256(at), f));
    }
    for (; j < n; ++j) sums[j] *= factor;
}

// Each s8 byte XOR 0x80 is its value + 128 as u8, which vpsadbw sums eight at a time: one XOR, one sum and one add
// per 32 bytes (the compiler's widening loop took as long as the dot products of 11x39x3035 NT s8).
__attribute__((target("avx2"))) void s8_row_sums(const void* rows, int64_t ld, int64_t count, int64_t bytes,
                                                 int32_t* sums) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), zero = _mm256_setzero_si256();
    for (int64_t r = 0; r < count; ++r) {
        const auto* row = static_cast<const uint8_t*>(rows) + r * ld;
        __m256i acc = _mm256_setzero_si256();
        for (int64_t i = 0; i < bytes; i += 32) {
            const __m256i x = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i)), flip);
            acc = _mm256_add_epi64(acc, _mm256_sad_epu8(x, zero));
        }
        const __m128i half = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
        const int64_t biased = _mm_cvtsi128_si64(half) + _mm_extract_epi64(half, 1);
        sums[r] = static_cast<int32_t>(biased - 128 * bytes);
    }
}

namespace {

// Row-major int8 B, k groups of 4: 32 columns at a time, four rows interleaved bytewise into column quads.
// Columns past `cols` (the last panel's tail) read as zero through a zero-padded copy of the rows.
// A row segment of `bytes` (< 32) bytes, zero padded: one masked load where AVX-512 (BW+VL) is there (kept out
// of line, so that the AVX2 code around it never carries EVEX instructions), else through a zeroed copy.
__attribute__((target("avx2,avx512bw,avx512vl"), noinline)) __m256i masked_load(const void* src, int bytes) {
    return _mm256_maskz_loadu_epi8(static_cast<__mmask32>((uint64_t(1) << bytes) - 1), src);
}

__attribute__((target("avx2"))) inline __m256i load_partial(const void* src, int bytes, uint8_t* copy, bool masked) {
    if (masked) return masked_load(src, bytes);
    std::memset(copy, 0, 32);
    std::memcpy(copy, src, static_cast<size_t>(bytes));
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(copy));
}

__attribute__((target("avx2"))) void pack_b_rows_x4(const uint8_t* b, int64_t ldb, int64_t k_len, int cols, int nr,
                                                    int64_t groups, uint8_t* panel, int32_t* colsum, bool b_signed,
                                                    bool masked, bool prefetch) {
    alignas(32) uint8_t row_copy[4][32];
    // Groups wholly past k_len are zero: written at once.
    const int64_t live = std::min(groups, ceil_div(std::max<int64_t>(k_len, 0), 4));
    if (groups > live) std::memset(panel + live * nr * 4, 0, static_cast<size_t>((groups - live) * nr * 4));
    groups = live;
    for (int c0 = 0; c0 < nr; c0 += 32) {
        const int width = std::max(0, std::min(32, cols - c0));
        const int chunk = std::min(32, nr - c0);  // 16 or 32 columns of the panel
        __m256i sums[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256()};
        for (int64_t kg = 0; kg < groups; ++kg) {
            __m256i r[4];
            for (int e = 0; e < 4; ++e) {
                const int64_t k = kg * 4 + e;
                if (k >= k_len || width == 0) {
                    r[e] = _mm256_setzero_si256();
                } else if (width == 32) {
                    r[e] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + k * ldb + c0));
                    if (prefetch)
                        _mm_prefetch(reinterpret_cast<const char*>(b + (k + kPrefetchRows) * ldb + c0), _MM_HINT_T0);
                } else {
                    r[e] = load_partial(b + k * ldb + c0, width, row_copy[e], masked);
                }
            }
            const __m256i p01l = _mm256_unpacklo_epi8(r[0], r[1]), p01h = _mm256_unpackhi_epi8(r[0], r[1]);
            const __m256i p23l = _mm256_unpacklo_epi8(r[2], r[3]), p23h = _mm256_unpackhi_epi8(r[2], r[3]);
            // Per 128-bit lane (columns 0-15 | 16-31): quads of columns 0-3, 4-7, 8-11, 12-15.
            const __m256i q0 = _mm256_unpacklo_epi16(p01l, p23l), q1 = _mm256_unpackhi_epi16(p01l, p23l);
            const __m256i q2 = _mm256_unpacklo_epi16(p01h, p23h), q3 = _mm256_unpackhi_epi16(p01h, p23h);
            const __m256i o[4] = {_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q2, q3, 0x20),
                                  _mm256_permute2x128_si256(q0, q1, 0x31), _mm256_permute2x128_si256(q2, q3, 0x31)};
            auto* dst = reinterpret_cast<__m256i*>(panel + (kg * nr + c0) * 4);
            for (int v = 0; v < chunk / 8; ++v) _mm256_storeu_si256(dst + v, o[v]);
            if (colsum)
                for (int v = 0; v < 4; ++v) sums[v] = _mm256_add_epi32(sums[v], quad_sums(o[v], b_signed));
        }
        if (colsum)
            for (int v = 0; v < chunk / 8; ++v) {
                alignas(32) int32_t lanes[8];
                _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sums[v]);
                for (int i = 0; i < 8; ++i) colsum[c0 + v * 8 + i] += lanes[i];
            }
    }
}

// Row-major 16-bit B, k groups of 2: 16 columns at a time, two rows interleaved into column pairs.
__attribute__((target("avx2"))) void pack_b_rows_x2(const uint16_t* b, int64_t ldb, int64_t k_len, int cols, int nr,
                                                    int64_t groups, uint16_t* panel, bool masked, bool prefetch) {
    alignas(32) uint8_t row_copy[2][32];
    const int64_t live = std::min(groups, ceil_div(std::max<int64_t>(k_len, 0), 2));
    if (groups > live) std::memset(panel + live * nr * 2, 0, static_cast<size_t>((groups - live) * nr * 4));
    groups = live;
    for (int c0 = 0; c0 < nr; c0 += 16) {
        const int width = std::max(0, std::min(16, cols - c0));
        for (int64_t kg = 0; kg < groups; ++kg) {
            __m256i r[2];
            for (int e = 0; e < 2; ++e) {
                const int64_t k = kg * 2 + e;
                if (k >= k_len || width == 0) {
                    r[e] = _mm256_setzero_si256();
                } else if (width == 16) {
                    r[e] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + k * ldb + c0));
                    if (prefetch)
                        _mm_prefetch(reinterpret_cast<const char*>(b + (k + kPrefetchRows) * ldb + c0), _MM_HINT_T0);
                } else {
                    r[e] = load_partial(b + k * ldb + c0, 2 * width, row_copy[e], masked);
                }
            }
            // Per lane (columns 0-7 | 8-15): pairs of columns 0-3 (lo) and 4-7 (hi).
            const __m256i lo = _mm256_unpacklo_epi16(r[0], r[1]), hi = _mm256_unpackhi_epi16(r[0], r[1]);
            auto* dst = reinterpret_cast<__m256i*>(panel + (kg * nr + c0) * 2);
            _mm256_storeu_si256(dst, _mm256_permute2x128_si256(lo, hi, 0x20));
            _mm256_storeu_si256(dst + 1, _mm256_permute2x128_si256(lo, hi, 0x31));
        }
    }
}

// The same with AVX-512 (BW): 32 columns per step, two word permutes instead of unpacks and lane fixes.
__attribute__((target("avx512f,avx512bw"))) void pack_b_rows_x2_zmm(const uint16_t* b, int64_t ldb, int64_t k_len,
                                                                  int cols, int nr, int64_t groups,
                                                                  uint16_t* panel, bool prefetch) {
    const int64_t live = std::min(groups, ceil_div(std::max<int64_t>(k_len, 0), 2));
    if (groups > live) std::memset(panel + live * nr * 2, 0, static_cast<size_t>((groups - live) * nr * 4));
    // Output word 2c + e takes column c of row e: indices 0-31 pick from the first row, 32-63 the second.
    alignas(64) uint16_t lo_idx[32], hi_idx[32];
    for (int c = 0; c < 16; ++c) {
        lo_idx[2 * c] = static_cast<uint16_t>(c);
        lo_idx[2 * c + 1] = static_cast<uint16_t>(32 + c);
        hi_idx[2 * c] = static_cast<uint16_t>(16 + c);
        hi_idx[2 * c + 1] = static_cast<uint16_t>(48 + c);
    }
    const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
    for (int c0 = 0; c0 < nr; c0 += 32) {
        const int width = std::max(0, std::min(32, cols - c0));
        const __mmask32 mask = static_cast<__mmask32>((uint64_t(1) << width) - 1);
        for (int64_t kg = 0; kg < live; ++kg) {
            const uint16_t* row = b + 2 * kg * ldb + c0;
            const __m512i r0 = _mm512_maskz_loadu_epi16(mask, row);
            if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(row + kPrefetchRows * ldb), _MM_HINT_T0);
            if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(row + (kPrefetchRows + 1) * ldb), _MM_HINT_T0);
            const __m512i r1 = 2 * kg + 1 < k_len ? _mm512_maskz_loadu_epi16(mask, row + ldb) : _mm512_setzero_si512();
            auto* dst = panel + (kg * nr + c0) * 2;
            _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(r0, lo, r1));
            _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi16(r0, hi, r1));
        }
    }
}

// vpermt2b index pairs that interleave rows into k groups (lo: columns 0-15 of a 32-column block, hi: 16-31).
struct InterleaveIndices {
    __m512i lo, hi;
};

// The permute tables, built once at compile time (built per call, they cost more than packing a 16-row slice
// of one panel, which is what a call packs).
struct ByteTable {
    alignas(64) uint8_t bytes[64];
};

// Four byte rows (int8, k groups of 4): output byte 4c + e is column c of row e (c + 16 in the high table).
constexpr ByteTable rows_x4_table(int first_column) {
    ByteTable t{};
    for (int c = 0; c < 16; ++c)
        for (int e = 0; e < 4; ++e) t.bytes[4 * c + e] = static_cast<uint8_t>(32 * e + first_column + c);
    return t;
}

// Two 16-bit rows (bf16, k groups of 2): output word 2c + e is column c of row e (c + 16 in the high table).
constexpr ByteTable rows_x2_table(int first_column) {
    ByteTable t{};
    for (int c = 0; c < 16; ++c)
        for (int e = 0; e < 2; ++e)
            for (int byte = 0; byte < 2; ++byte)
                t.bytes[4 * c + 2 * e + byte] = static_cast<uint8_t>(64 * e + 2 * (first_column + c) + byte);
    return t;
}

constexpr ByteTable kRowsX4Lo = rows_x4_table(0), kRowsX4Hi = rows_x4_table(16);

// Four byte rows of 64 columns in two stages (pack_b_rows_x4_vbmi's whole-line groups): the pairs of rows 0|1 and
// 2|3 first (output byte 2c + e is column c of row e, c from first_column), then the pairs' words into quads
// (output byte 4c + e of column c: e < 2 from the first pair, else the second).
constexpr ByteTable row_pairs_table(int first_column) {
    ByteTable t{};
    for (int c = 0; c < 32; ++c)
        for (int e = 0; e < 2; ++e) t.bytes[2 * c + e] = static_cast<uint8_t>(64 * e + first_column + c);
    return t;
}
constexpr ByteTable pair_quads_table(int first_column) {
    ByteTable t{};
    for (int c = 0; c < 16; ++c)
        for (int e = 0; e < 4; ++e)
            t.bytes[4 * c + e] = static_cast<uint8_t>((e < 2 ? 0 : 64) + 2 * (first_column + c) + (e & 1));
    return t;
}
constexpr ByteTable kRowPairsLo = row_pairs_table(0), kRowPairsHi = row_pairs_table(32);
constexpr ByteTable kPairQuadsLo = pair_quads_table(0), kPairQuadsHi = pair_quads_table(16);
constexpr ByteTable kRowsX2Lo = rows_x2_table(0), kRowsX2Hi = rows_x2_table(16);

__attribute__((target("avx512f"))) inline InterleaveIndices interleave_rows_x4_indices() {
    return {_mm512_load_si512(kRowsX4Lo.bytes), _mm512_load_si512(kRowsX4Hi.bytes)};
}

__attribute__((target("avx512f"))) inline InterleaveIndices interleave_rows_x2_indices() {
    return {_mm512_load_si512(kRowsX2Lo.bytes), _mm512_load_si512(kRowsX2Hi.bytes)};
}

// pack_b_rows_x4 with one byte permute per 64 output bytes (AVX512-VBMI vpermt2b, one uop on the chips that have
// it): 4 rows of 32 columns are the 128-byte table of two zmm (rows 0|1 and 2|3), and each 64-byte half of
// the output picks its column quads from it. About half the instructions of the AVX2 unpacks (B packing was
// 16-18% of a 256^3 AMX int8 call).
// GCC 12 flags the undefined upper half _mm512_inserti64x4 passes through as "may be used uninitialized":
// the insert overwrites it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// One k group of four rows (row e at row + e * ldb, the rows from `present` on read as zero) of 32 columns (those
// past `mask` zero): the two 64-byte halves of its panel row, and their column sums into sum_lo / sum_hi.
template <bool kSums>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"), always_inline)) inline void rows_x4_group(
    const uint8_t* row, int64_t ldb, int present, __mmask32 mask, __m512i lo, __m512i hi, bool b_signed,
    uint8_t* dst, bool both_halves, __m512i& sum_lo, __m512i& sum_hi) {
    __m256i r[4];
    for (int e = 0; e < 4; ++e)  // (no lambda: it would not carry the target attribute)
        r[e] = e < present ? _mm256_maskz_loadu_epi8(mask, row + e * ldb) : _mm256_setzero_si256();
    const __m512i t01 = _mm512_inserti64x4(_mm512_castsi256_si512(r[0]), r[1], 1);
    const __m512i t23 = _mm512_inserti64x4(_mm512_castsi256_si512(r[2]), r[3], 1);
    const __m512i o0 = _mm512_permutex2var_epi8(t01, lo, t23), o1 = _mm512_permutex2var_epi8(t01, hi, t23);
    _mm512_storeu_si512(dst, o0);
    if (both_halves) _mm512_storeu_si512(dst + 64, o1);
    if (kSums) {
        const __m512i ones8 = _mm512_set1_epi8(1), ones16 = _mm512_set1_epi16(1);
        const __m512i p0 = b_signed ? _mm512_maddubs_epi16(ones8, o0) : _mm512_maddubs_epi16(o0, ones8);
        const __m512i p1 = b_signed ? _mm512_maddubs_epi16(ones8, o1) : _mm512_maddubs_epi16(o1, ones8);
        sum_lo = _mm512_add_epi32(sum_lo, _mm512_madd_epi16(p0, ones16));
        sum_hi = _mm512_add_epi32(sum_hi, _mm512_madd_epi16(p1, ones16));
    }
}

// The whole groups of one 32-column chunk, the choices made outside the loop: the column sums (an s8 A's shift
// needs them) and the prefetches. (One loop with the choices inside kept the sums on the stack and tested each
// choice every group: s8 1x914x832 on VNNI, 1 thread, spent 58% of its 59 us in this packer.)
template <bool kSums, bool kPrefetch>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void rows_x4_whole_groups(
    const uint8_t* b, int64_t ldb, int64_t full, int nr, __mmask32 mask, __m512i lo, __m512i hi, bool b_signed,
    uint8_t* dst, bool both_halves, __m512i& sum_lo, __m512i& sum_hi) {
    __m512i s_lo = sum_lo, s_hi = sum_hi;
    for (int64_t kg = 0; kg < full; ++kg, b += 4 * ldb, dst += int64_t(nr) * 4) {
        if (kPrefetch)
            for (int e = 0; e < 4; ++e)
                _mm_prefetch(reinterpret_cast<const char*>(b + (kPrefetchRows + e) * ldb), _MM_HINT_T0);
        rows_x4_group<kSums>(b, ldb, 4, mask, lo, hi, b_signed, dst, both_halves, s_lo, s_hi);
    }
    sum_lo = s_lo;
    sum_hi = s_hi;
}

// One k group of four rows of 64 columns (those past `mask` zero, rows from `present` on zero): whole 64-byte row
// loads, the rows paired by two permutes and the pairs' words quadded by four, 256 bytes out. Where the panels
// are 64 columns wide or more: a B from memory arrives at about twice the rate for 64-byte loads as for the
// 32-byte pieces of rows_x4_group (Zen 4: 18 against 9 GB/s of plain reads).
template <bool kSums>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"), always_inline)) inline void rows_x4_group64(
    const uint8_t* row, int64_t ldb, int present, __mmask64 mask, bool b_signed, uint8_t* dst, __m512i* sums) {
    __m512i r[4];
    for (int e = 0; e < 4; ++e)
        r[e] = e < present ? (mask == ~__mmask64(0) ? _mm512_loadu_si512(row + e * ldb)
                                                    : _mm512_maskz_loadu_epi8(mask, row + e * ldb))
                           : _mm512_setzero_si512();
    const __m512i pairs_lo = _mm512_load_si512(kRowPairsLo.bytes), pairs_hi = _mm512_load_si512(kRowPairsHi.bytes);
    const __m512i quads_lo = _mm512_load_si512(kPairQuadsLo.bytes), quads_hi = _mm512_load_si512(kPairQuadsHi.bytes);
    // Rows 0|1 and 2|3 paired (columns 0-31 in the low pairs, 32-63 in the high), then the pairs' words quadded.
    const __m512i a_lo = _mm512_permutex2var_epi8(r[0], pairs_lo, r[1]);
    const __m512i a_hi = _mm512_permutex2var_epi8(r[0], pairs_hi, r[1]);
    const __m512i b_lo = _mm512_permutex2var_epi8(r[2], pairs_lo, r[3]);
    const __m512i b_hi = _mm512_permutex2var_epi8(r[2], pairs_hi, r[3]);
    const __m512i out[4] = {
        _mm512_permutex2var_epi8(a_lo, quads_lo, b_lo), _mm512_permutex2var_epi8(a_lo, quads_hi, b_lo),
        _mm512_permutex2var_epi8(a_hi, quads_lo, b_hi), _mm512_permutex2var_epi8(a_hi, quads_hi, b_hi)};
    for (int q = 0; q < 4; ++q) _mm512_storeu_si512(dst + 64 * q, out[q]);
    if (kSums) {
        const __m512i ones8 = _mm512_set1_epi8(1), ones16 = _mm512_set1_epi16(1);
        for (int q = 0; q < 4; ++q) {
            const __m512i pairs = b_signed ? _mm512_maddubs_epi16(ones8, out[q]) : _mm512_maddubs_epi16(out[q], ones8);
            sums[q] = _mm512_add_epi32(sums[q], _mm512_madd_epi16(pairs, ones16));
        }
    }
}

// The 64-column chunks of pack_b_rows_x4_vbmi (nr a multiple of 64), its choices made outside the loop as in
// rows_x4_whole_groups.
template <bool kSums, bool kPrefetch>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void rows_x4_chunk64(
    const uint8_t* b, int64_t ldb, int64_t k_len, int64_t full, int64_t live, int nr, __mmask64 mask, bool b_signed,
    uint8_t* dst, int32_t* colsum) {
    __m512i sums[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    for (int64_t kg = 0; kg < full; ++kg, b += 4 * ldb, dst += int64_t(nr) * 4) {
        if (kPrefetch)
            for (int e = 0; e < 4; ++e)
                _mm_prefetch(reinterpret_cast<const char*>(b + (kPrefetchRows + e) * ldb), _MM_HINT_T0);
        rows_x4_group64<kSums>(b, ldb, 4, mask, b_signed, dst, sums);
    }
    if (live > full) rows_x4_group64<kSums>(b, ldb, static_cast<int>(k_len - 4 * full), mask, b_signed, dst, sums);
    if (kSums)  // lane c of sums[q] is column 16 q + c of the chunk
        for (int q = 0; q < 4; ++q)
            _mm512_storeu_si512(colsum + 16 * q, _mm512_add_epi32(_mm512_loadu_si512(colsum + 16 * q), sums[q]));
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void pack_b_rows_x4_vbmi(
    const uint8_t* b, int64_t ldb, int64_t k_len, int cols, int nr, int64_t groups, uint8_t* panel, int32_t* colsum,
    bool b_signed, bool prefetch) {
    const int64_t live = std::min(groups, ceil_div(std::max<int64_t>(k_len, 0), 4));
    const int64_t full = std::min(live, std::max<int64_t>(k_len, 0) / 4);
    if (groups > live) std::memset(panel + live * nr * 4, 0, static_cast<size_t>((groups - live) * nr * 4));
    // Output byte 4c + e (c < 16 in the low half, 16 + c in the high half) is column c of row e.
    const InterleaveIndices idx = interleave_rows_x4_indices();
    const __m512i lo = idx.lo, hi = idx.hi;
    for (int c0 = 0; c0 < nr; c0 += 32) {
        if (nr - c0 >= 64) {  // whole 64-column chunks by whole-line loads (rows_x4_group64)
            const int width = std::max(0, std::min(64, cols - c0));
            const __mmask64 mask = width >= 64 ? ~__mmask64(0) : (__mmask64(1) << width) - 1;
            uint8_t* dst = panel + int64_t(c0) * 4;
            int32_t* sums = colsum ? colsum + c0 : nullptr;
            const uint8_t* src = b + c0;
            if (colsum && prefetch)
                rows_x4_chunk64<true, true>(src, ldb, k_len, full, live, nr, mask, b_signed, dst, sums);
            else if (colsum)
                rows_x4_chunk64<true, false>(src, ldb, k_len, full, live, nr, mask, b_signed, dst, sums);
            else if (prefetch)
                rows_x4_chunk64<false, true>(src, ldb, k_len, full, live, nr, mask, b_signed, dst, sums);
            else
                rows_x4_chunk64<false, false>(src, ldb, k_len, full, live, nr, mask, b_signed, dst, sums);
            c0 += 32;  // (and 32 more by the loop)
            continue;
        }
        const int width = std::max(0, std::min(32, cols - c0));
        const int chunk = std::min(32, nr - c0);  // 16 or 32 columns of the panel
        const __mmask32 mask = static_cast<__mmask32>((uint64_t(1) << width) - 1);
        __m512i sum_lo = _mm512_setzero_si512(), sum_hi = _mm512_setzero_si512();
        uint8_t* dst = panel + int64_t(c0) * 4;
        const bool both = chunk == 32;
        if (colsum && prefetch) rows_x4_whole_groups<true, true>(b + c0, ldb, full, nr, mask, lo, hi, b_signed, dst, both, sum_lo, sum_hi);
        else if (colsum) rows_x4_whole_groups<true, false>(b + c0, ldb, full, nr, mask, lo, hi, b_signed, dst, both, sum_lo, sum_hi);
        else if (prefetch) rows_x4_whole_groups<false, true>(b + c0, ldb, full, nr, mask, lo, hi, b_signed, dst, both, sum_lo, sum_hi);
        else rows_x4_whole_groups<false, false>(b + c0, ldb, full, nr, mask, lo, hi, b_signed, dst, both, sum_lo, sum_hi);
        if (live > full) {  // the partial group: the rows past K read as zero
            const int present = static_cast<int>(k_len - 4 * full);
            rows_x4_group<true>(b + 4 * full * ldb + c0, ldb, present, mask, lo, hi, b_signed,
                                dst + full * nr * 4, both, sum_lo, sum_hi);
        }
        if (colsum) {  // lane c of sum_lo is column c0 + c, of sum_hi column c0 + 16 + c
            _mm512_storeu_si512(colsum + c0, _mm512_add_epi32(_mm512_loadu_si512(colsum + c0), sum_lo));
            if (both)
                _mm512_storeu_si512(colsum + c0 + 16, _mm512_add_epi32(_mm512_loadu_si512(colsum + c0 + 16), sum_hi));
        }
    }
}
#pragma GCC diagnostic pop

// 16-bit rows, k groups of 2, by byte permutes too (vpermt2w is 3 uops where vpermt2b is one): output word
// 2c + e is column c of row e.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void pack_b_rows_x2_vbmi(const uint16_t* b, int64_t ldb,
                                                                             int64_t k_len, int cols, int nr,
                                                                             int64_t groups, uint16_t* panel,
                                                                             bool prefetch) {
    const int64_t live = std::min(groups, ceil_div(std::max<int64_t>(k_len, 0), 2));
    if (groups > live) std::memset(panel + live * nr * 2, 0, static_cast<size_t>((groups - live) * nr * 4));
    const InterleaveIndices idx = interleave_rows_x2_indices();
    const __m512i lo = idx.lo, hi = idx.hi;
    for (int c0 = 0; c0 < nr; c0 += 32) {
        const int width = std::max(0, std::min(32, cols - c0));
        const __mmask32 mask = static_cast<__mmask32>((uint64_t(1) << width) - 1);
        for (int64_t kg = 0; kg < live; ++kg) {
            const uint16_t* row = b + 2 * kg * ldb + c0;
            const __m512i r0 = _mm512_maskz_loadu_epi16(mask, row);
            if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(row + kPrefetchRows * ldb), _MM_HINT_T0);
            if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(row + (kPrefetchRows + 1) * ldb), _MM_HINT_T0);
            const __m512i r1 = 2 * kg + 1 < k_len ? _mm512_maskz_loadu_epi16(mask, row + ldb) : _mm512_setzero_si512();
            auto* dst = panel + (kg * nr + c0) * 2;
            _mm512_storeu_si512(dst, _mm512_permutex2var_epi8(r0, lo, r1));
            _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi8(r0, hi, r1));
        }
    }
}

// A short K of row-major B (at most kShortRowsK rows) for every 32-column panel in one call, panel by panel over
// all of K: the panel's rows are a few lines each, and the next panel reads the other halves of the same lines
// from L1. The slice-by-slice walk above (16 rows over every panel, a call per panel and slice) spent more on its
// calls, index tables, per-row branches and prefetches than on the permutes (6x2479x42 s8 on AMX, 1 thread: the
// packing was two thirds of the call). Whole groups load their four (two) rows unmasked by K; the last partial
// group masks the rows past K to zero. Groups past K up to `groups` are zero.
constexpr int64_t kShortRowsK = 64;                // rows: at most one 64-byte AMX step of int8, two of bf16
constexpr int64_t kShortRowsMaxBytes = 1 << 20;    // and B's rows within this (beyond, the slices prefetch)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Four rows of 32 int8 columns interleaved into a k group's 128 bytes (and their sums into sums[2], if asked).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"), always_inline)) inline void short_rows_quad(
    uint8_t* dst, __m512i lo, __m512i hi, bool sum, bool b_signed, __m512i* sums, __m256i r0, __m256i r1, __m256i r2,
    __m256i r3) {
    const __m512i t01 = _mm512_inserti64x4(_mm512_castsi256_si512(r0), r1, 1);
    const __m512i t23 = _mm512_inserti64x4(_mm512_castsi256_si512(r2), r3, 1);
    const __m512i o0 = _mm512_permutex2var_epi8(t01, lo, t23), o1 = _mm512_permutex2var_epi8(t01, hi, t23);
    _mm512_storeu_si512(dst, o0);
    _mm512_storeu_si512(dst + 64, o1);
    if (sum) {
        const __m512i ones8 = _mm512_set1_epi8(1), ones16 = _mm512_set1_epi16(1);
        const __m512i p0 = b_signed ? _mm512_maddubs_epi16(ones8, o0) : _mm512_maddubs_epi16(o0, ones8);
        const __m512i p1 = b_signed ? _mm512_maddubs_epi16(ones8, o1) : _mm512_maddubs_epi16(o1, ones8);
        sums[0] = _mm512_add_epi32(sums[0], _mm512_madd_epi16(p0, ones16));
        sums[1] = _mm512_add_epi32(sums[1], _mm512_madd_epi16(p1, ones16));
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void pack_b_short_rows_x4_vbmi(
    const uint8_t* b, int64_t ldb, int64_t k_len, int64_t width, int64_t groups, uint8_t* out, int32_t* colsum,
    bool b_signed) {
    constexpr int nr = 32;
    const InterleaveIndices idx = interleave_rows_x4_indices();
    const __m512i lo = idx.lo, hi = idx.hi;
    const int64_t full = k_len / 4, live = ceil_div(k_len, 4), rest = k_len - 4 * full;
    const int64_t panel_bytes = groups * nr * 4;
    for (int64_t j = 0; j < width; j += nr) {
        uint8_t* panel = out + (j / nr) * panel_bytes;
        const int64_t cols = std::min<int64_t>(nr, width - j);
        const __mmask32 mask = static_cast<__mmask32>((uint64_t(1) << cols) - 1);
        const uint8_t* row = b + j;
        __m512i sums[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        int64_t kg = 0;
        for (; kg < full; ++kg, row += 4 * ldb)
            short_rows_quad(panel + kg * nr * 4, lo, hi, colsum != nullptr, b_signed, sums,
                            _mm256_maskz_loadu_epi8(mask, row), _mm256_maskz_loadu_epi8(mask, row + ldb),
                            _mm256_maskz_loadu_epi8(mask, row + 2 * ldb), _mm256_maskz_loadu_epi8(mask, row + 3 * ldb));
        if (rest > 0) {
            const __m256i z = _mm256_setzero_si256();
            short_rows_quad(panel + kg * nr * 4, lo, hi, colsum != nullptr, b_signed, sums,
                            _mm256_maskz_loadu_epi8(mask, row), rest > 1 ? _mm256_maskz_loadu_epi8(mask, row + ldb) : z,
                            rest > 2 ? _mm256_maskz_loadu_epi8(mask, row + 2 * ldb) : z, z);
        }
        if (groups > live) std::memset(panel + live * nr * 4, 0, static_cast<size_t>((groups - live) * nr * 4));
        if (colsum) {
            alignas(64) int32_t lanes[32];
            _mm512_store_si512(lanes, sums[0]);
            _mm512_store_si512(lanes + 16, sums[1]);
            for (int64_t i = 0; i < cols; ++i) colsum[j + i] += lanes[i];
        }
    }
}

// The same for 16-bit rows (bf16), k groups of 2: output word 2c + e is column c of row e.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void pack_b_short_rows_x2_vbmi(
    const uint16_t* b, int64_t ldb, int64_t k_len, int64_t width, int64_t groups, uint16_t* out) {
    constexpr int nr = 32;
    const InterleaveIndices idx = interleave_rows_x2_indices();
    const __m512i lo = idx.lo, hi = idx.hi;
    const int64_t full = k_len / 2, live = ceil_div(k_len, 2);
    const int64_t panel_halves = groups * nr * 2;
    for (int64_t j = 0; j < width; j += nr) {
        uint16_t* panel = out + (j / nr) * panel_halves;
        const int64_t cols = std::min<int64_t>(nr, width - j);
        const __mmask32 mask = static_cast<__mmask32>((uint64_t(1) << cols) - 1);
        const uint16_t* row = b + j;
        int64_t kg = 0;
        for (; kg < full; ++kg, row += 2 * ldb) {
            const __m512i r0 = _mm512_maskz_loadu_epi16(mask, row), r1 = _mm512_maskz_loadu_epi16(mask, row + ldb);
            _mm512_storeu_si512(panel + kg * nr * 2, _mm512_permutex2var_epi8(r0, lo, r1));
            _mm512_storeu_si512(panel + kg * nr * 2 + 32, _mm512_permutex2var_epi8(r0, hi, r1));
        }
        if (live > full) {
            const __m512i r0 = _mm512_maskz_loadu_epi16(mask, row), r1 = _mm512_setzero_si512();
            _mm512_storeu_si512(panel + kg * nr * 2, _mm512_permutex2var_epi8(r0, lo, r1));
            _mm512_storeu_si512(panel + kg * nr * 2 + 32, _mm512_permutex2var_epi8(r0, hi, r1));
        }
        if (groups > live) std::memset(panel + live * nr * 2, 0, static_cast<size_t>((groups - live) * nr * 4));
    }
}
#pragma GCC diagnostic pop

// B stored N x K whose k groups are whole dwords (int8 x 4, 16-bit x 2): the panel is a dword transpose,
// [column][group] -> [group][column], done 8 x 8 at a time; the edges go one dword at a time.
__attribute__((target("avx2"), noinline)) void pack_b_cols_dwords(const uint8_t* b, int64_t ldb_bytes, int64_t full_groups,
                                                        int cols, int nr, uint32_t* panel) {
    int64_t kg = 0;
    for (; kg + 8 <= full_groups; kg += 8) {
        int c = 0;
        for (; c + 8 <= cols; c += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; ++i)
                r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(b + (c + i) * ldb_bytes + kg * 4));
            const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
            const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
            const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
            const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
            const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
            const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
            const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
            const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
            const __m256 o[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                                 _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                                 _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                                 _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
            for (int i = 0; i < 8; ++i) _mm256_storeu_ps(reinterpret_cast<float*>(panel + (kg + i) * nr + c), o[i]);
        }
        for (; c < cols; ++c)
            for (int i = 0; i < 8; ++i) std::memcpy(panel + (kg + i) * nr + c, b + c * ldb_bytes + (kg + i) * 4, 4);
    }
    for (; kg < full_groups; ++kg)
        for (int c = 0; c < cols; ++c) std::memcpy(panel + kg * nr + c, b + c * ldb_bytes + kg * 4, 4);
}

// GCC 12 flags the undefined upper lanes the 128-bit load hands to the inserts as "may be used uninitialized":
// the inserts overwrite them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The same transpose 16 columns x 4 groups at a time with AVX-512, as 4 x 4 blocks of 4 x 4 dwords: each zmm
// takes the group quad's 4-dword pieces of four rows (rows r, r + 4, r + 8, r + 12: a 128-bit load and three
// inserts from memory, which issue on either vector port), then two in-lane unpack stages transpose the 4 x 4
// blocks: 80 shuffles per 16 x 16 block on two ports where four 8 x 8 AVX2 blocks take 96 on one (64^3 NT s8
// on AMX: the AVX2 transpose was 30% of the call). transpose_group_quad does one group quad (the dwords at
// byte `offset` of 16 rows, row i at rows[i]) into 4 vectors of 16 columns: groups[q] lane i = row i's dword q.
// z[r] lane t: the quad of row 4t + r -> groups[q] lane i: row i's dword q.
__attribute__((target("avx512f"), always_inline)) inline void interleave_group_quad(const __m512i z[4],
                                                                                   __m512i groups[4]) {
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    groups[0] = _mm512_unpacklo_epi64(t0, t2);
    groups[1] = _mm512_unpackhi_epi64(t0, t2);
    groups[2] = _mm512_unpacklo_epi64(t1, t3);
    groups[3] = _mm512_unpackhi_epi64(t1, t3);
}

__attribute__((target("avx512f"), always_inline)) inline void transpose_group_quad(const uint8_t* const rows[16],
                                                                                  int64_t offset, __m512i groups[4]) {
    __m512i z[4];  // z[r] lane t: row 4t + r
    for (int r = 0; r < 4; ++r) {
        auto piece = [&](int t) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * t + r] + offset)); };
        z[r] = _mm512_castsi128_si512(piece(0));
        for (int t = 1; t < 4; ++t) z[r] = _mm512_inserti32x4(z[r], piece(t), t);
    }
    interleave_group_quad(z, groups);
}

// The last 1-3 groups of 16 rows (the dwords at byte `offset`), of which only `live` exist: masked loads
// (nothing past the rows' last groups is read), the other lanes zero.
__attribute__((target("avx512f,avx512vl"), always_inline)) inline void transpose_group_quad_masked(
    const uint8_t* const rows[16], int64_t offset, __m512i groups[4], int live) {
    const __mmask8 dwords = static_cast<__mmask8>((1u << live) - 1);
    __m512i z[4];
    for (int r = 0; r < 4; ++r) {
        z[r] = _mm512_castsi128_si512(_mm_maskz_loadu_epi32(dwords, rows[r] + offset));
        for (int t = 1; t < 4; ++t)
            z[r] = _mm512_inserti32x4(z[r], _mm_maskz_loadu_epi32(dwords, rows[4 * t + r] + offset), t);
    }
    interleave_group_quad(z, groups);
}

// Three groups past the whole quads (K = 6 bf16, 12 int8) by one more transpose of masked loads: dword by dword
// they were most of packing such a short K (1 thread, 5x1327x6 NT bf16 on AMX: 2.5 of 4 us). One or two groups
// cost less as dword copies (1x2449x4 x5 TT u8: 7.0 us copied, 15.8 transposed; 20x53x85 x55 TT bf16 43 / 55).
// (Its own function: the AVX512-VL target on the whole pack let the compiler vectorize the rows' pointers with
// 64-bit multiplies, 1x110x32 x58 TT u8 7.4 -> 11.9 us.)
__attribute__((target("avx512f,avx512vl"), noinline)) void pack_b_cols_three_groups_zmm(const uint8_t* b,
                                                                                         int64_t ldb_bytes, int cols,
                                                                                         int nr, uint32_t* panel) {
    const uint8_t* rows[16];
    __m512i groups[4];
    for (int c = 0; c < cols; c += 16) {
        const int live = std::min(16, cols - c);
        const __mmask16 mask = static_cast<__mmask16>((1u << live) - 1);
        for (int i = 0; i < 16; ++i) rows[i] = b + (c + std::min(i, live - 1)) * ldb_bytes;
        transpose_group_quad_masked(rows, 0, groups, 3);
        for (int q = 0; q < 3; ++q) _mm512_mask_storeu_epi32(panel + q * nr + c, mask, groups[q]);
    }
}

__attribute__((target("avx512f"))) void pack_b_cols_dwords_zmm(const uint8_t* b, int64_t ldb_bytes,
                                                               int64_t full_groups, int cols, int nr,
                                                               uint32_t* panel) {
    const int64_t block_groups = full_groups / 4 * 4;  // whole group quads (K = 48 int8: three)
    const int block_cols = cols / 16 * 16;
    const uint8_t* rows[16];
    __m512i groups[4];
    for (int c = 0; c < block_cols; c += 16) {
        for (int i = 0; i < 16; ++i) rows[i] = b + (c + i) * ldb_bytes;
        for (int64_t kg = 0; kg < block_groups; kg += 4) {  // one group quad
            transpose_group_quad(rows, kg * 4, groups);
            for (int q = 0; q < 4; ++q) _mm512_storeu_si512(panel + (kg + q) * nr + c, groups[q]);
        }
    }
    // Columns past the 16-column blocks: the same transpose with masked stores, the missing rows read from the
    // last column's row (dword by dword, a narrow B, 36x7x1886 NT s8, spent 12% of its call there). Then the
    // groups past the whole quads.
    if (block_cols < cols) {
        const int live = cols - block_cols;
        const __mmask16 mask = static_cast<__mmask16>((1u << live) - 1);
        for (int i = 0; i < 16; ++i) rows[i] = b + (block_cols + std::min(i, live - 1)) * ldb_bytes;
        for (int64_t kg = 0; kg < block_groups; kg += 4) {
            transpose_group_quad(rows, kg * 4, groups);
            for (int q = 0; q < 4; ++q) _mm512_mask_storeu_epi32(panel + (kg + q) * nr + block_cols, mask, groups[q]);
        }
    }
    if (full_groups - block_groups == 3)
        pack_b_cols_three_groups_zmm(b + block_groups * 4, ldb_bytes, cols, nr, panel + block_groups * nr);
    else if (block_groups < full_groups)
        pack_b_cols_dwords(b + block_groups * 4, ldb_bytes, full_groups - block_groups, cols, nr,
                           panel + block_groups * nr);
}
#pragma GCC diagnostic pop

// The partial k group of a transposed B (`bytes` < 4 bytes of each of `cols` columns, ld_bytes apart, from
// `tail`): a dword per column, its bytes past K zero. Eight columns a dword gather, masked to the group's bytes;
// a gathered dword reads past its column's bytes, so the columns whose dword would pass the panel's last byte
// go one at a time (nothing past B is read). A byte at a time for every column was most of packing K = 1 (9x3666x1
// NT s8 on VNNI).
__attribute__((target("avx2"))) void pack_b_partial_group(const uint8_t* tail, int64_t ld_bytes, int64_t bytes,
                                                          int cols, uint32_t* dwords) {
    int c = 0;
    const int64_t last_byte = (cols - 1) * ld_bytes + bytes;  // one past the panel's last byte
    if (ld_bytes * cols < (int64_t(1) << 31)) {
        const __m256i keep = _mm256_set1_epi32(static_cast<int>((1u << (8 * bytes)) - 1));
        const __m256i index = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                 _mm256_set1_epi32(static_cast<int>(ld_bytes)));
        for (; c + 8 <= cols && (c + 7) * ld_bytes + 4 <= last_byte; c += 8) {
            const __m256i v = _mm256_i32gather_epi32(reinterpret_cast<const int*>(tail + c * ld_bytes), index, 1);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dwords + c), _mm256_and_si256(v, keep));
        }
    }
    for (const uint8_t* at = tail + c * ld_bytes; c < cols; ++c, at += ld_bytes) {
        uint32_t v = at[0];
        if (bytes > 1) v |= uint32_t(at[1]) << 8;
        if (bytes > 2) v |= uint32_t(at[2]) << 16;
        std::memcpy(dwords + c, &v, 4);
    }
}

// The same partial group from a row-major B (`k_len` < 4 rows of `cols` int8 columns, ldb apart): row e's bytes
// widened to dwords and shifted into byte e, eight columns at a time.
__attribute__((target("avx2"))) void pack_b_rows_partial_group(const uint8_t* rows, int64_t ldb, int64_t k_len,
                                                               int64_t cols, uint32_t* dwords) {
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {
        __m256i v = _mm256_setzero_si256();
        for (int64_t e = 0; e < k_len; ++e) {
            const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows + e * ldb + c));
            v = _mm256_or_si256(v, _mm256_slli_epi32(_mm256_cvtepu8_epi32(bytes), static_cast<int>(8 * e)));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dwords + c), v);
    }
    for (; c < cols; ++c) {
        uint32_t v = 0;
        for (int64_t e = 0; e < k_len; ++e) v |= uint32_t(rows[e * ldb + c]) << (8 * e);
        dwords[c] = v;
    }
}

// The fast paths: the packed element is the stored one (no conversion) and the panel width is whole 16-column
// vectors. Returns false when the generic path has to do it.
bool pack_b_fast(LowpStep step, jitmm_dtype b_type, const void* b, int64_t ldb, bool trans_b, int64_t k0,
                 int64_t k_len, int64_t j0, int64_t width, int nr, int64_t groups, void* out, int32_t* colsum,
                 bool vbmi_allowed) {
    const bool bytes = step == LowpStep::amx_int8 || step == LowpStep::vnni_u8s8;
    const bool halves = step == LowpStep::amx_bf16 || step == LowpStep::dot_bf16;
    if ((!bytes && !halves) || nr % 16 != 0) return false;
    const int g = bytes ? 4 : 2;
    const int64_t esz = bytes ? 1 : 2;
    static const bool masked = hw::cpu_info().avx512bw && hw::cpu_info().avx512vl;
    // The byte permutes: AVX512-VBMI (Ice Lake, Sapphire Rapids and later), on a chip whose OS keeps zmm state.
    const bool vbmi = masked && vbmi_allowed;
    const bool b_signed = b_type == JITMM_DTYPE_S8;
    const int64_t panel_bytes = groups * nr * 4;
    if (bytes && groups == 1 && k_len < g) {
        // A K of one partial group in panels of one group: the panels are one run of dwords, a column each, packed
        // and summed in one pass each (panel by panel, the calls cost more than the packing: 9x3666x1 s8, NT and
        // NN).
        auto* dwords = static_cast<uint32_t*>(out);
        if (trans_b && width * ldb >= (int64_t(1) << 31)) return false;
        if (trans_b)
            pack_b_partial_group(static_cast<const uint8_t*>(b) + j0 * ldb + k0, ldb, k_len, static_cast<int>(width),
                                 dwords);
        else pack_b_rows_partial_group(static_cast<const uint8_t*>(b) + k0 * ldb + j0, ldb, k_len, width, dwords);
        const int64_t padded = ceil_div(width, nr) * nr;
        std::memset(dwords + width, 0, static_cast<size_t>((padded - width) * 4));
        if (colsum) panel_column_sums(dwords, 1, static_cast<int>(width), padded, colsum, b_signed);
        return true;
    }
    if (!trans_b && vbmi && nr == 32 && k_len > 0 && k_len <= kShortRowsK && k_len <= groups * g &&
        k_len * ldb * esz <= kShortRowsMaxBytes && (bytes || b_type == JITMM_DTYPE_BF16)) {
        const auto* src = static_cast<const uint8_t*>(b) + (k0 * ldb + j0) * esz;
        if (bytes)
            pack_b_short_rows_x4_vbmi(src, ldb, k_len, width, groups, static_cast<uint8_t*>(out), colsum, b_signed);
        else
            pack_b_short_rows_x2_vbmi(reinterpret_cast<const uint16_t*>(src), ldb, k_len, width, groups,
                                      static_cast<uint16_t*>(out));
        return true;
    }
    if (!trans_b) {
        // Row-major B: K in slices of 16 rows, every panel per slice, so that B's rows are read along their
        // length by few enough streams for the prefetchers (a panel at a time over all of K touches a new
        // page on every row; 64-row slices measured 2x slower than 16-row ones on wide B).
        // A B that fits in L1 (the tiny calls) goes panel by panel over all of K: one packer call per panel
        // instead of one per slice (64^3 int8: 2 calls, not 8), and without the prefetches of rows a slice
        // ahead (1 thread, TSC per C API call: 64^3 s8 805-860 -> 751-808, bf16 1264-1297 -> 1147-1168).
        // Short rows (a narrow B) take slices of kSliceBytes instead: at 16 rows a slice is a few lines, and
        // the packer calls cost more than the packing (64x64x4096 s8: 512 calls of 4 groups, ~45% of the call).
        const bool tiny = k_len * width * esz <= 32 * 1024;
        const int64_t slice_rows = std::max<int64_t>(16, kSliceBytes / (ldb * esz));
        const int64_t kSlice = tiny ? groups : std::max<int64_t>(1, slice_rows / g);
        for (int64_t s0 = 0; s0 < groups; s0 += kSlice) {
            const int64_t slice = std::min(kSlice, groups - s0);
            for (int64_t p = 0; p < ceil_div(width, nr); ++p) {
                auto* panel = static_cast<uint8_t*>(out) + p * panel_bytes + s0 * nr * 4;
                const int cols = static_cast<int>(std::min<int64_t>(nr, width - p * nr));
                int32_t* sums = colsum ? colsum + p * nr : nullptr;
                const int64_t k_rest = k_len - s0 * g;
                const int64_t row0 = k0 + std::min(s0 * g, k_len);
                const auto* src = static_cast<const uint8_t*>(b) + (row0 * ldb + j0 + p * nr) * esz;
                auto* halves_out = reinterpret_cast<uint16_t*>(panel);
                const auto* halves_in = reinterpret_cast<const uint16_t*>(src);
                if (bytes && vbmi) pack_b_rows_x4_vbmi(src, ldb, k_rest, cols, nr, slice, panel, sums, b_signed, !tiny);
                else if (bytes) pack_b_rows_x4(src, ldb, k_rest, cols, nr, slice, panel, sums, b_signed, masked, !tiny);
                else if (vbmi && nr % 32 == 0)
                    pack_b_rows_x2_vbmi(halves_in, ldb, k_rest, cols, nr, slice, halves_out, !tiny);
                else if (masked && nr % 32 == 0)
                    pack_b_rows_x2_zmm(halves_in, ldb, k_rest, cols, nr, slice, halves_out, !tiny);
                else pack_b_rows_x2(halves_in, ldb, k_rest, cols, nr, slice, halves_out, masked, !tiny);
            }
        }
        return true;
    }
    for (int64_t p = 0; p < ceil_div(width, nr); ++p) {
        auto* panel = static_cast<uint8_t*>(out) + p * panel_bytes;
        const int cols = static_cast<int>(std::min<int64_t>(nr, width - p * nr));
        int32_t* sums = colsum ? colsum + p * nr : nullptr;
        // Transposed: whole groups by the dword transpose, then the partial group and the zero padding (the
        // panel is zeroed first only when the transpose leaves some of it unwritten: a column or K tail).
        if (cols != nr || k_len != groups * g) std::memset(panel, 0, static_cast<size_t>(panel_bytes));
        const auto* src = static_cast<const uint8_t*>(b) + ((j0 + p * nr) * ldb + k0) * esz;
        const int64_t full = k_len / g;
        static const bool zmm = hw::cpu_info().avx512f && hw::cpu_info().avx512vl;
        if (zmm) pack_b_cols_dwords_zmm(src, ldb * esz, full, cols, nr, reinterpret_cast<uint32_t*>(panel));
        else pack_b_cols_dwords(src, ldb * esz, full, cols, nr, reinterpret_cast<uint32_t*>(panel));
        // The partial group: a dword per column, its bytes past K zero (a byte at a time per k and column was
        // most of packing a short K: 19x684x6 NT s8 on AMX).
        const int64_t tail_bytes = (k_len - full * g) * esz;
        if (tail_bytes > 0)
            pack_b_partial_group(src + full * g * esz, ldb * esz, tail_bytes, cols,
                                 reinterpret_cast<uint32_t*>(panel) + full * nr);
        // The column sums from the packed dwords (zero past K and past the columns), 8 columns a vector: the
        // scalar walk along each stored row was most of packing a short K (19x684x6 NT s8 on VNNI).
        if (sums) panel_column_sums(reinterpret_cast<const uint32_t*>(panel), ceil_div(k_len, g), cols, nr, sums,
                                    b_signed);
    }
    return true;
}

// Read once; asked only on the paths that use it (a function-local static's guard costs a little on every call of
// the packers, which calls of a few rows make thousands of times).
bool avx512_bw_vl() {
    static const bool has = hw::cpu_info().avx512bw && hw::cpu_info().avx512vl;
    return has;
}
bool avx512_gathers() {
    static const bool has = hw::cpu_info().avx512f;
    return has;
}

// f16 on AVX-512: sixteen at a time, the tail by one masked load and store. The eight-wide loop below left up to
// seven values a run to the scalar tail: all of a transposed A of 4 rows (stored rows of 4 values) went through
// it (4x15x3473 TN x40 f16, 1 thread: packing A was most of the call).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void widen_f16_run_avx512(const uint16_t* src, float* dst,
                                                                                int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
        _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(0xffff, h));
    }
    if (i < n) {
        const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1);
        const __m256i h = _mm256_maskz_loadu_epi16(mask, src + i);
        _mm512_mask_storeu_ps(dst + i, mask, _mm512_maskz_cvtph_ps(0xffff, h));
    }
}

// A contiguous run of bf16 or f16 widened to f32: eight at a time (a shift, or F16C's vcvtph2ps), then the
// tail one by one (f16 by F16C too). Only reached for fma_f32, whose planner requires F16C for f16.
__attribute__((target("avx2,f16c"))) void widen_run(const uint16_t* src, float* dst, int64_t n, bool f16) {
    if (f16 && avx512_bw_vl()) {
        widen_f16_run_avx512(src, dst, n);
        return;
    }
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        const __m256 f = f16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        _mm256_storeu_ps(dst + i, f);
    }
    for (; i < n; ++i) dst[i] = f16 ? _cvtsh_ss(src[i]) : bf16_to_f32(src[i]);
}

// Rows of bf16 or f16 widened to f32 and zero padded to k_padded, sixteen at a time: the row's last part by one
// masked load (nothing past the row is read), the padding by plain stores. Rows of a few values (K <= 8 runs
// bf16 on these FMAs) cost a call, a scalar tail and a memset each through widen_run: 3072x12x5 bf16, 1 thread,
// spent 60% of its time packing A that way. The whole vectors of a row go unmasked, the masks of its last part
// made once per call: a mask per vector took most of the loop (13x16x1169 f16, 1 thread: packing A half as
// long as the products).
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 widen16(__m256i h, bool f16) {
    // (The maskz forms: GCC 12's plain ones start from an "undefined" vector it then warns about.)
    return f16 ? _mm512_maskz_cvtph_ps(0xffff, h)
               : _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, h), 16));
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void widen_rows_padded(const uint16_t* src, int64_t src_stride,
                                                                             float* dst, int64_t dst_stride, int rows,
                                                                             int64_t k_len, int64_t k_padded,
                                                                             bool f16) {
    const int64_t whole = k_len / 16 * 16;
    const int64_t tail_in = k_len - whole, tail_out = std::min<int64_t>(k_padded - whole, 16);
    const auto in_mask = static_cast<__mmask16>((1u << tail_in) - 1);
    const auto out_mask = static_cast<__mmask16>((1u << std::max<int64_t>(tail_out, 0)) - 1);
    for (int r = 0; r < rows; ++r) {
        const uint16_t* s = src + r * src_stride;
        float* d = dst + r * dst_stride;
        int64_t x = 0;
        for (; x < whole; x += 16)
            _mm512_storeu_ps(d + x, widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + x)), f16));
        if (x < k_padded) {
            _mm512_mask_storeu_ps(d + x, out_mask, widen16(_mm256_maskz_loadu_epi16(in_mask, s + x), f16));
            x += 16;
        }
        for (; x < k_padded; x += 16)
            _mm512_mask_storeu_ps(d + x, static_cast<__mmask16>((1u << std::min<int64_t>(k_padded - x, 16)) - 1),
                                  _mm512_setzero_ps());
    }
}

// A 16-bit A stored K x M, a few k values a row, widened into dense f32 panel rows (panel_ld == k_padded, at most
// kDenseTransposeMaxK): 16 rows at a time, each stored row's 16 values widened into one vector, then the vectors
// interleaved into the panel's 16 x k_padded contiguous floats, each output vector by one masked permute per k
// (lane e of output vector o is row (16o + e) / k_padded's value k = (16o + e) % k_padded). Widening the block and
// transposing it as f32 took the f32 packer's scalar transpose (no 8 x 8 blocks below K = 8): 1686x4x3 TT x3
// bf16, 1 thread, spent 45% of its time there.
constexpr int64_t kDenseTransposeMaxK = 8;

__attribute__((target("avx512f,avx512bw,avx512vl"))) void widen_transposed_dense(const uint16_t* a, int64_t lda,
                                                                                  int rows, int64_t k_len,
                                                                                  int64_t k_padded, bool f16,
                                                                                  float* panel) {
    // The permutes' lanes and masks for every k_padded, made once (a call packs one row tile: 28 rows).
    struct Interleave {
        alignas(64) int32_t lanes[kDenseTransposeMaxK + 1][kDenseTransposeMaxK][16];
        uint16_t take[kDenseTransposeMaxK + 1][kDenseTransposeMaxK][kDenseTransposeMaxK];
    };
    static const Interleave* const tables = [] {
        static Interleave t = {};
        for (int kp = 1; kp <= kDenseTransposeMaxK; ++kp)
            for (int o = 0; o < kp; ++o)
                for (int e = 0; e < 16; ++e) {
                    t.lanes[kp][o][e] = (16 * o + e) / kp;
                    t.take[kp][o][(16 * o + e) % kp] |= static_cast<uint16_t>(1u << e);
                }
        return &t;
    }();
    const int kp = static_cast<int>(k_padded);
    const auto& take = tables->take[kp];
    __m512 v[kDenseTransposeMaxK];
    for (int r0 = 0; r0 < rows; r0 += 16) {
        const int n = std::min(16, rows - r0);
        const auto in = static_cast<__mmask16>((1u << n) - 1);
        for (int k = 0; k < kp; ++k)
            v[k] = k < k_len ? widen16(_mm256_maskz_loadu_epi16(in, a + k * lda + r0), f16) : _mm512_setzero_ps();
        float* out = panel + int64_t(r0) * kp;
        const int total = n * kp;
        for (int o = 0; o * 16 < total; ++o) {
            __m512 x = _mm512_setzero_ps();
            const __m512i index = _mm512_load_si512(tables->lanes[kp][o]);
            for (int k = 0; k < kp; ++k) x = _mm512_mask_permutexvar_ps(x, take[o][k], index, v[k]);
            const int left = total - 16 * o;
            if (left >= 16) _mm512_storeu_ps(out + 16 * o, x);
            else _mm512_mask_storeu_ps(out + 16 * o, static_cast<__mmask16>((1u << left) - 1), x);
        }
    }
}

// A block of stored 16-bit rows widened to f32 (rows of `cols` values, `cols` apart) in this thread's scratch,
// for the transposing packers: the vector conversions run along the stored rows, the transposes through registers
// (element by element, converting f16 in software, 1452x1x16 f16 spent 71% of its 63 us packing).
float* widen_block(const uint16_t* src, int64_t ld, int64_t rows, int64_t cols, bool f16) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < static_cast<size_t>(rows * cols)) scratch.resize(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) widen_run(src + r * ld, scratch.data() + r * cols, cols, f16);
    return scratch.data();
}

// A transposed 16-bit B (stored N x K) of a few k values widened into f32 panels by dword gathers, 16 columns a
// k at a time: the dword that ends with element k (or, at k = 0, starts with it) holds it in its high (low)
// half, so nothing is read before a row or past the next element. Short rows left widen_block a scalar tail per
// row and pack_b_f32 a scalar transpose (no 8 x 8 blocks below K = 8): 6x464x3 NT bf16, 1 thread, spent 80%
// of its 2.6 us there. f16 at any K: widening the rows first and transposing the f32 block took a pass more than
// the gathers with F16C's conversion (1 thread, median us, widened -> gathered: NT 10x365x9 2.87 -> 0.91,
// 8x523x25 5.4 -> 2.9, 100x500x100 57 -> 52, 300x300x256 227 -> 216, 64x1000x200 160 -> 136; TT 9x3309x8 26.7
// -> 8.3). bf16 likewise at any K (it gathered only below K = 8, where widen_block's scalar tails hurt most;
// widened -> gathered: NT 100x300x8 4.60 -> 3.31, 5x128x8 x10 7.33 -> 2.07, 300x300x16 17.0 -> 15.8, 100x300x64
// 22.6 -> 20.9, 100x300x256 84 -> 79).

__attribute__((target("avx512f"))) void pack_b_gathered(const uint16_t* src, int64_t ldb, int64_t k_len, int64_t width,
                                                        int nr, bool f16, float* out) {
    const __m512i lanes = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                             _mm512_set1_epi32(static_cast<int>(ldb * 2)));
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u)), low = _mm512_set1_epi32(0xffff);
    const int64_t chunks = ceil_div(width, nr) * (nr / 16);
    for (int64_t q = 0; q < chunks; ++q) {
        const int64_t j = q * 16;  // the chunk's first column (panel q / (nr / 16), columns (q % (nr / 16)) * 16)
        const int64_t cols = std::clamp<int64_t>(width - j, 0, 16);
        float* dst = out + (q / (nr / 16)) * k_len * nr + (q % (nr / 16)) * 16;
        __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1);
        // K = 1: the dword at k = 0 runs into the next row's first element, which the last column lacks.
        const bool last_alone = k_len == 1 && cols > 0 && j + cols == width;
        if (last_alone) mask = static_cast<__mmask16>(mask & ~(1u << (cols - 1)));
        for (int64_t k = 0; k < k_len; ++k) {
            const uint16_t* base = src + j * ldb + (k == 0 ? 0 : k - 1);
            __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, lanes, base, 1);
            // (The maskz forms: GCC 12's plain ones start from an "undefined" vector it then warns about.)
            if (k == 0) v = f16 ? _mm512_maskz_and_epi32(0xffff, v, low) : _mm512_maskz_slli_epi32(0xffff, v, 16);
            else v = f16 ? _mm512_maskz_srli_epi32(0xffff, v, 16) : _mm512_maskz_and_epi32(0xffff, v, high);
            __m512 f = _mm512_castsi512_ps(v);
            if (f16) f = _mm512_maskz_cvtph_ps(0xffff, _mm512_maskz_cvtepi32_epi16(0xffff, v));
            _mm512_storeu_ps(dst + k * nr, f);
        }
        if (last_alone) {
            const uint16_t h = src[(j + cols - 1) * ldb];
            dst[cols - 1] = f16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
    }
}

// fma_f32: B row-major rows widened in runs; a transposed B (stored N x K) widened whole, then transposed into
// the panels as f32 (for fma_f32 a panel's groups are its k values).
bool pack_b_widened(LowpStep step, jitmm_dtype b_type, const void* b, int64_t ldb, bool trans_b, int64_t k0,
                    int64_t k_len, int64_t j0, int64_t width, int nr, int64_t groups, void* out) {
    if (step != LowpStep::fma_f32) return false;
    const bool f16 = b_type == JITMM_DTYPE_F16;
    const auto* src = static_cast<const uint16_t*>(b);
    if (trans_b) {
        if (groups != k_len) return false;
        static const bool avx512 = hw::cpu_info().avx512f;
        if (avx512 && nr % 16 == 0 && 15 * ldb * 2 < (int64_t(1) << 31)) {
            pack_b_gathered(src + j0 * ldb + k0, ldb, k_len, width, nr, f16, static_cast<float*>(out));
            return true;
        }
        const float* rows = widen_block(src + j0 * ldb + k0, ldb, width, k_len, f16);
        pack_b_f32(rows, k_len, true, 0, k_len, 0, width, nr, false, static_cast<float*>(out));
        return true;
    }
    for (int64_t p = 0; p < ceil_div(width, nr); ++p) {
        float* panel = static_cast<float*>(out) + p * groups * nr;
        const int cols = static_cast<int>(std::min<int64_t>(nr, width - p * nr));
        for (int64_t k = 0; k < groups; ++k) {
            float* row = panel + k * nr;
            if (k < k_len) widen_run(src + (k0 + k) * ldb + j0 + p * nr, row, cols, f16);
            else std::memset(row, 0, sizeof(float) * static_cast<size_t>(cols));
            std::memset(row + cols, 0, sizeof(float) * static_cast<size_t>(nr - cols));
        }
    }
    return true;
}

// Padded rows at most this long pack several to a vector (copy_short_rows_vbmi).
constexpr int64_t kShortRowBytes = 32;

// Rows copied (bytes xor `flip`: 0 as they are, 0x80 an s8 A shifted to u8 for vpdpbusd) and zero padded to
// padded_bytes, 64 bytes per instruction: the row's last part by one masked load (the bytes past the row are
// neither read nor faulted on, and stay zero), the padding by plain stores. memcpy + memset per row cost ~10
// cycles a row on 48-byte rows (most of an AMX 48^3 call's A packing); the scalar +128 loop was a fifth of a
// 32^3 s8 call.
__attribute__((target("avx512f,avx512bw"))) void copy_rows_padded(const uint8_t* src, int64_t src_stride,
                                                                  uint8_t* dst, int64_t dst_stride, int rows,
                                                                  int64_t bytes, int64_t padded_bytes, uint8_t flip) {
    const int64_t whole = bytes / 64 * 64;
    const int64_t rest = bytes - whole;
    const __mmask64 rest_mask = rest == 0 ? 0 : (~uint64_t(0) >> (64 - rest));
    const __m512i flips = _mm512_set1_epi8(static_cast<char>(flip));
    const __m512i rest_flips = _mm512_maskz_mov_epi8(rest_mask, flips);
    for (int r = 0; r < rows; ++r) {
        const uint8_t* s = src + r * src_stride;
        uint8_t* d = dst + r * dst_stride;
        int64_t x = 0;
        for (; x < whole; x += 64) _mm512_storeu_si512(d + x, _mm512_xor_si512(_mm512_loadu_si512(s + x), flips));
        if (x < padded_bytes) {
            const __m512i v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(rest_mask, s + x), rest_flips);
            if (padded_bytes - x >= 64) _mm512_storeu_si512(d + x, v);
            else _mm512_mask_storeu_epi8(d + x, ~uint64_t(0) >> (64 - (padded_bytes - x)), v);
            x += 64;
        }
        for (; x + 64 <= padded_bytes; x += 64) _mm512_storeu_si512(d + x, _mm512_setzero_si512());
        if (x < padded_bytes)
            _mm512_mask_storeu_epi8(d + x, ~uint64_t(0) >> (64 - (padded_bytes - x)), _mm512_setzero_si512());
    }
}

// Short rows packed densely (dst_stride == padded_bytes <= 32), several to a vector: one load of as many source
// rows as fit 64 bytes and one byte permute placing each at its padded slot (zeros past its bytes), then one
// store, the last rows as one shorter group. Row by row, the masked load and store of each cost ~7 cycles a row
// (1 thread: a fifth of a 269x61x7 bf16 call). Returns how many rows are left to copy row by row: none, or all
// of them where fewer than two source rows fit in 64 bytes.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) int copy_short_rows_vbmi(const uint8_t* src,
                                                                               int64_t src_stride, uint8_t* dst,
                                                                               int rows, int64_t bytes,
                                                                               int64_t padded_bytes, uint8_t flip) {
    const int64_t per_vector_dst = 64 / padded_bytes;
    const int64_t per_vector_src = src_stride > 0 ? (64 - bytes) / src_stride + 1 : per_vector_dst;
    const int group = static_cast<int>(std::min(per_vector_dst, per_vector_src));
    if (group < 2 || rows < group) return rows;
    // The permute for this geometry, kept per thread (a call packs block after block of the same geometry).
    struct Permute {
        int64_t src_stride = -1, bytes = 0, padded_bytes = 0;
        alignas(64) uint8_t index[64];
        uint64_t valid = 0;
    };
    thread_local Permute cached;
    if (cached.src_stride != src_stride || cached.bytes != bytes || cached.padded_bytes != padded_bytes) {
        std::memset(cached.index, 0, sizeof cached.index);
        cached.valid = 0;
        for (int r = 0; r < group; ++r) {
            for (int64_t x = 0; x < bytes; ++x) {
                const int64_t slot = r * padded_bytes + x;
                cached.index[slot] = static_cast<uint8_t>(r * src_stride + x);
                cached.valid |= uint64_t(1) << slot;
            }
        }
        cached.src_stride = src_stride;
        cached.bytes = bytes;
        cached.padded_bytes = padded_bytes;
    }
    const uint64_t valid = cached.valid;
    const __m512i idx = _mm512_load_si512(cached.index);
    const __m512i flips = _mm512_maskz_mov_epi8(valid, _mm512_set1_epi8(static_cast<char>(flip)));
    const int64_t span = (group - 1) * src_stride + bytes;  // source bytes of a group
    const __mmask64 load_mask = ~uint64_t(0) >> (64 - span);
    const int64_t group_bytes = group * padded_bytes;
    const __mmask64 store_mask = ~uint64_t(0) >> (64 - group_bytes);
    int r = 0;
    for (; r + group <= rows; r += group) {
        const __m512i v = _mm512_maskz_loadu_epi8(load_mask, src + r * src_stride);
        const __m512i packed = _mm512_xor_si512(_mm512_maskz_permutexvar_epi8(valid, idx, v), flips);
        _mm512_mask_storeu_epi8(dst + r * padded_bytes, store_mask, packed);
    }
    if (r < rows) {
        // The last rows as one shorter group: the permute's slots past them read lanes the load left zero, and the
        // store leaves them out (a masked load and store per row cost Zen 4 ~350 cycles each here: 3281x16x3 s8
        // NT x41 spent 45% of its time in the row-by-row copy of 12 rows a block).
        const int64_t left = rows - r;
        const int64_t left_span = (left - 1) * src_stride + bytes;
        const __m512i v = _mm512_maskz_loadu_epi8(~uint64_t(0) >> (64 - left_span), src + r * src_stride);
        const __m512i packed = _mm512_xor_si512(_mm512_maskz_permutexvar_epi8(valid, idx, v), flips);
        _mm512_mask_storeu_epi8(dst + r * padded_bytes, ~uint64_t(0) >> (64 - left * padded_bytes), packed);
        r = rows;
    }
    return rows - r;
}

}  // namespace

bool pack_vbmi_allowed() {
    static const bool has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512vbmi") != 0;
    }();
    const char* env = std::getenv("JITMM_X86_PACK_VBMI");
    return has && (env == nullptr || env[0] != '0');
}

void pack_b_lowp(LowpStep step, jitmm_dtype b_type, const void* b, int64_t ldb, bool trans_b, int64_t k0,
                 int64_t k_len, int64_t j0, int64_t width, int nr, int64_t groups, void* panels, int32_t* colsum,
                 bool vbmi) {
    if (pack_b_fast(step, b_type, b, ldb, trans_b, k0, k_len, j0, width, nr, groups, panels, colsum, vbmi)) return;
    if (pack_b_widened(step, b_type, b, ldb, trans_b, k0, k_len, j0, width, nr, groups, panels)) return;
    const int g = plan::step_group(step);
    const bool s8 = b_type == JITMM_DTYPE_S8;
    auto run = [&](auto conv) {
        pack_b_as<decltype(conv)>(b, ldb, trans_b, k0, k_len, j0, width, nr, g, groups, panels, colsum, s8);
    };
    switch (step) {
        case LowpStep::amx_int8: case LowpStep::vnni_u8s8: return run(Raw8{});
        case LowpStep::madd_s16: return s8 ? run(S8ToS16{}) : run(U8ToS16{});
        case LowpStep::amx_bf16: case LowpStep::dot_bf16: return run(Raw16{});
        case LowpStep::fma_f32: return b_type == JITMM_DTYPE_F16 ? run(F16ToF32{}) : run(Bf16ToF32{});
    }
    fail(JITMM_STATUS_INTERNAL_ERROR, "pack_b_lowp: unknown step");
}

// (AMX machines have AVX-512BW.) Two instructions a row: a memcpy and memset per row cost 0.9 us of a 2 us call
// (1 thread, 8x300x100 NT bf16, 10 tiles of 32 rows).
// B stored N x K: each column's pair is one dword of its stored row, the 8 columns' dwords one gather (the last
// pair of an odd K one value a column: a dword would read past the row's K).
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void pack_b_f16_k_pairs_transposed(
    const uint16_t* b, int64_t ldb, int64_t k_len, int64_t width, float* out) {
    const auto cols = static_cast<__mmask8>((1u << width) - 1);
    const __m256i rows = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                            _mm256_set1_epi32(static_cast<int>(ldb * 2)));
    int64_t p = 0;
    for (; 2 * p + 1 < k_len; ++p) {
        const __m256i pairs = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), cols, rows, b + 2 * p, 1);
        _mm512_storeu_ps(out + 16 * p, _mm512_maskz_cvtph_ps(0xffff, pairs));
    }
    if (2 * p < k_len) {
        alignas(32) uint32_t last[8] = {};
        for (int64_t c = 0; c < width; ++c) last[c] = b[c * ldb + 2 * p];
        _mm512_storeu_ps(out + 16 * p,
                         _mm512_maskz_cvtph_ps(0xffff, _mm256_load_si256(reinterpret_cast<const __m256i*>(last))));
    }
}

// Two rows of 8 f16 columns interleaved by word unpacks (columns 0-3, then 4-7), widened by one conversion.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void pack_b_f16_k_pairs(const void* b_any, int64_t ldb,
                                                                                    bool trans_b, int64_t k0,
                                                                                    int64_t k_len, int64_t j0,
                                                                                    int64_t width, void* out_any) {
    auto* out = static_cast<float*>(out_any);
    if (trans_b) {
        pack_b_f16_k_pairs_transposed(static_cast<const uint16_t*>(b_any) + j0 * ldb + k0, ldb, k_len, width, out);
        return;
    }
    const auto* b = static_cast<const uint16_t*>(b_any) + k0 * ldb + j0;
    const auto cols = static_cast<__mmask8>((1u << width) - 1);
    for (int64_t p = 0; 2 * p < k_len; ++p) {
        const __m128i r0 = _mm_maskz_loadu_epi16(cols, b + 2 * p * ldb);
        const __m128i r1 = 2 * p + 1 < k_len ? _mm_maskz_loadu_epi16(cols, b + (2 * p + 1) * ldb) : _mm_setzero_si128();
        const __m256i pairs = _mm256_set_m128i(_mm_unpackhi_epi16(r0, r1), _mm_unpacklo_epi16(r0, r1));
        _mm512_storeu_ps(out + 16 * p, _mm512_maskz_cvtph_ps(0xffff, pairs));
    }
}

__attribute__((target("avx512f,avx512bw"))) void pack_amx_last_step(const void* src, int64_t ld_bytes, int rows,
                                                                      int bytes, void* dst) {
    const __mmask64 mask = bytes >= 64 ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1;
    const auto* from = static_cast<const uint8_t*>(src);
    auto* to = static_cast<uint8_t*>(dst);
    for (int r = 0; r < rows; ++r)
        _mm512_storeu_si512(to + r * 64, _mm512_maskz_loadu_epi8(mask, from + r * ld_bytes));
}

void pack_a_lowp(LowpStep step, jitmm_dtype a_type, const void* a, int64_t lda, bool trans_a, int64_t i0, int rows,
                 int64_t k0, int64_t k_len, int64_t k_padded, int64_t panel_ld, void* panel) {
    static const bool bw = hw::cpu_info().avx512bw;
    // Rows stored back to back and packed back to back (short K, plan: dense panels): one run of rows x K.
    if (!trans_a && lda == k_len && panel_ld == k_len && k_padded == k_len && rows > 1) {
        k0 += i0 * lda;
        i0 = 0;
        k_len *= rows;
        lda = panel_ld = k_padded = k_len;
        rows = 1;
    }
    if (step == LowpStep::fma_f32 && !trans_a && bw) {
        widen_rows_padded(static_cast<const uint16_t*>(a) + i0 * lda + k0, lda, static_cast<float*>(panel), panel_ld,
                          rows, k_len, k_padded, a_type == JITMM_DTYPE_F16);
        return;
    }
    if (step == LowpStep::fma_f32 && trans_a) {
        if (bw && panel_ld == k_padded && k_padded <= kDenseTransposeMaxK) {
            widen_transposed_dense(static_cast<const uint16_t*>(a) + k0 * lda + i0, lda, rows, k_len, k_padded,
                                   a_type == JITMM_DTYPE_F16, static_cast<float*>(panel));
            return;
        }
        if (a_type == JITMM_DTYPE_F16 && panel_ld % 16 == 0 && 15 * lda * 2 < (int64_t(1) << 31) &&
            avx512_gathers()) {
            // An f16 A stored K x M is a transposed B to the gathers (panel rows are its columns, K its width):
            // each panel row's 16 k values by one gather down the stored rows, widened; the padding to panel_ld
            // zeroed. 1 thread, median us, widened and transposed -> gathered: TN 4x15x3473 x40 1448 -> 660,
            // 1404x20x13 x3 49 -> 37, 123x8x12 0.94 -> 0.85; TT 35x26x901 x49 1690 -> 1270, 21x3483x115 179 -> 134.
            pack_b_gathered(static_cast<const uint16_t*>(a) + k0 * lda + i0, lda, rows, k_len,
                            static_cast<int>(panel_ld), true, static_cast<float*>(panel));
            return;
        }
        // A stored K x M: the tile's values of each stored row widened, then transposed into the panel's rows.
        const float* block = widen_block(static_cast<const uint16_t*>(a) + k0 * lda + i0, lda, k_len, rows,
                                         a_type == JITMM_DTYPE_F16);
        transpose_f32_padded(block, rows, k_len, rows, static_cast<float*>(panel), panel_ld);
        return;
    }
    if (step == LowpStep::fma_f32 && !trans_a) {
        for (int r = 0; r < rows; ++r) {
            float* dst = static_cast<float*>(panel) + r * panel_ld;
            widen_run(static_cast<const uint16_t*>(a) + (i0 + r) * lda + k0, dst, k_len, a_type == JITMM_DTYPE_F16);
            std::memset(dst + k_len, 0, sizeof(float) * static_cast<size_t>(k_padded - k_len));
        }
        return;
    }
    const bool s8 = a_type == JITMM_DTYPE_S8;
    // A as stored, for the AVX-512 steps (AMX, vdpbf16ps, VNNI), or an s8 A flipped to u8 for VNNI: whole
    // 64-byte rows and a masked tail.
    const bool as_stored = step == LowpStep::amx_int8 || step == LowpStep::amx_bf16 || step == LowpStep::dot_bf16 ||
                           step == LowpStep::vnni_u8s8;
    if (as_stored && !trans_a && bw) {
        const int64_t esz = dtype_size(a_type);
        const uint8_t flip = step == LowpStep::vnni_u8s8 && s8 ? 0x80 : 0;
        const auto* src = static_cast<const uint8_t*>(a) + (i0 * lda + k0) * esz;
        auto* dst = static_cast<uint8_t*>(panel);
        int left = rows;
        // (The CPU's VBMI once per process: pack_vbmi_allowed reads its knob's environment variable each call,
        // and this runs per row tile where A is not packed by blocks.)
        static const bool vbmi = [] {
            __builtin_cpu_init();
            return __builtin_cpu_supports("avx512vbmi") != 0;
        }();
        if (panel_ld == k_padded && k_padded * esz <= kShortRowBytes && vbmi)
            left = copy_short_rows_vbmi(src, lda * esz, dst, rows, k_len * esz, k_padded * esz, flip);
        const int done = rows - left;
        copy_rows_padded(src + done * lda * esz, lda * esz, dst + done * panel_ld * esz, panel_ld * esz, left,
                         k_len * esz, k_padded * esz, flip);
        return;
    }
    // A stored K x M for the same steps: transposed by vectors (pack_a_transposed.hpp), else by the scalar loop.
    if (as_stored && trans_a && pack_a_transposed_available()) {
        const uint8_t flip = step == LowpStep::vnni_u8s8 && s8 ? 0x80 : 0;
        pack_a_transposed(a, lda, static_cast<int>(dtype_size(a_type)), i0, rows, k0, k_len, k_padded, panel_ld,
                          flip, panel);
        return;
    }
    auto run = [&](auto conv) {
        pack_a_as<decltype(conv)>(a, lda, trans_a, i0, rows, k0, k_len, k_padded, panel_ld, panel);
    };
    switch (step) {
        case LowpStep::amx_int8: return run(Raw8{});
        case LowpStep::vnni_u8s8: return s8 ? run(S8ToU8{}) : run(Raw8{});
        case LowpStep::madd_s16: return s8 ? run(S8ToS16{}) : run(U8ToS16{});
        case LowpStep::amx_bf16: case LowpStep::dot_bf16: return run(Raw16{});
        case LowpStep::fma_f32: return a_type == JITMM_DTYPE_F16 ? run(F16ToF32{}) : run(Bf16ToF32{});
    }
    fail(JITMM_STATUS_INTERNAL_ERROR, "pack_a_lowp: unknown step");
}

}  // namespace jitmm::x86
