#include "x86/pack_a_transposed.hpp"

#include "hw/cpu.hpp"

#include <immintrin.h>

#include <algorithm>

// Two transposes, both on N = 16 / element bytes (16 int8 or 8 bf16: what one 128-bit lane holds) and log2(N)
// stages of in-lane unpacks that transpose every lane's N x N elements at once:
// - transpose_rows, for a row tile or a few: blocks of N panel rows by one 64-byte vector of K. Vector s of the
//   block takes, in its lane t, the N elements of stored row k = 4-lane block start + N t + s: a 128-bit load
//   and three inserts from memory (which issue on the load ports and either vector port, not only the shuffle
//   port); after the stages vector j holds panel row bitreverse(j): its 4N elements of K, one whole store. A bf16
//   block costs 24 shuffles for 512 bytes out where the scalar loop moved one element per load and store
//   (512x512x512 TN bf16 on AMX, 1 thread: the scalar packer was ~38% of the call).
// - transpose_lines, for wide row ranges (an M block packed at once): whole 64-byte stored lines, N stored rows
//   at a time, walked front to back across the rows (N streams the prefetchers follow, with a software prefetch
//   a few lines ahead); vector j's lane t then holds the N K-values of panel row t N + bitreverse(j), stored as
//   a 16-byte piece. transpose_rows over such a range reads 4N stored rows in 16-byte pieces, and each line
//   four times: 3072x2x1024 TN s8 (3 MB of A, 1 thread, median us) ~700-1100 packed tile by tile, 690-740 over
//   1344-row blocks, 460-500 with the line walk over 512-row blocks (NN reads the same A in 205). Stored rows
//   1, 2 or 3 KB apart (M = 1024, 2048, 3072) also share a few L1 sets, where the rereads miss.

namespace jitmm::x86 {

namespace {

// A mask of the low `bytes` bytes (0 to 64) of a vector.
inline __mmask64 low_bytes(int64_t bytes) {
    return bytes >= 64 ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1;
}

constexpr int bit_reverse(int value, int bits) {
    int out = 0;
    for (int b = 0; b < bits; ++b) out |= ((value >> b) & 1) << (bits - 1 - b);
    return out;
}

constexpr int log2_of(int n) { return n <= 1 ? 0 : 1 + log2_of(n / 2); }

// In-lane interleave of `Unit`-byte pieces: the low (Low) or high halves of each 128-bit lane of a and b.
template <int Unit, bool Low>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512i interleave(__m512i a, __m512i b) {
    if constexpr (Unit == 1) return Low ? _mm512_unpacklo_epi8(a, b) : _mm512_unpackhi_epi8(a, b);
    else if constexpr (Unit == 2) return Low ? _mm512_unpacklo_epi16(a, b) : _mm512_unpackhi_epi16(a, b);
    else if constexpr (Unit == 4) return Low ? _mm512_unpacklo_epi32(a, b) : _mm512_unpackhi_epi32(a, b);
    else return Low ? _mm512_unpacklo_epi64(a, b) : _mm512_unpackhi_epi64(a, b);
}

// One stage: pairs (2i, 2i + 1) interleaved into i (low halves) and i + N/2 (high halves). After the stages
// of Unit = element size, twice that, ... 8 bytes, v[j] holds column bitreverse(j) of every lane's block, its
// rows in order.
template <int N, int Unit>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void interleave_stage(__m512i* v) {
    __m512i out[N];
    for (int i = 0; i < N / 2; ++i) {
        out[i] = interleave<Unit, true>(v[2 * i], v[2 * i + 1]);
        out[i + N / 2] = interleave<Unit, false>(v[2 * i], v[2 * i + 1]);
    }
    for (int i = 0; i < N; ++i) v[i] = out[i];
}

template <int E>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void transpose_lanes(__m512i* v) {
    constexpr int N = 16 / E;
    if constexpr (E == 1) interleave_stage<N, 1>(v);
    interleave_stage<N, 2>(v);
    interleave_stage<N, 4>(v);
    interleave_stage<N, 8>(v);
}

// GCC 12 flags the undefined upper lanes a 128-bit load hands to the inserts as "may be used uninitialized":
// the inserts overwrite them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// `a` points at element (k0, i0) of the stored A; lda_bytes and panel_ld_bytes are strides in bytes.
template <int E>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void transpose_rows(const uint8_t* a, int64_t lda_bytes, int rows,
                                                                    int64_t k_len, int64_t k_padded,
                                                                    int64_t panel_ld_bytes, uint8_t flip,
                                                                    uint8_t* panel) {
    constexpr int N = 16 / E;      // panel rows per block (elements per 128-bit lane)
    constexpr int kBlockK = 4 * N;  // K per 64-byte output vector
    const __m512i flip_all = _mm512_set1_epi8(static_cast<char>(flip));
    // K blocks outermost: a block's 4N stored rows are 4N cache lines for up to 64 bytes of panel rows, which
    // the next row blocks of a tile then read from L1.
    for (int64_t kb = 0; kb < k_padded; kb += kBlockK) {
        const int64_t live_k = std::clamp<int64_t>(k_len - kb, 0, kBlockK);
        const __mmask64 store_mask = low_bytes(std::min<int64_t>(kBlockK, k_padded - kb) * E);
        const __m512i flips = _mm512_maskz_mov_epi8(low_bytes(live_k * E), flip_all);  // padding stays zero
        const uint8_t* block = a + kb * lda_bytes;
        for (int m0 = 0; m0 < rows; m0 += N) {
            const int live_m = std::min(N, rows - m0);
            const uint8_t* col = block + m0 * E;
            __m512i v[N];
            if (live_k == kBlockK && live_m == N) {
                // Four row pointers stepped by lda: left to itself the compiler hoists all 4N row addresses
                // out of the loops and spills them (512x512x512 TN bf16, 1 thread: 217-222 -> 208-210 us).
                const uint8_t* lane[4];
                for (int t = 0; t < 4; ++t) lane[t] = col + t * N * lda_bytes;
                for (int s = 0; s < N; ++s) {
                    v[s] = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lane[0])));
                    for (int t = 1; t < 4; ++t)
                        v[s] = _mm512_inserti32x4(v[s], _mm_loadu_si128(reinterpret_cast<const __m128i*>(lane[t])), t);
                    for (int t = 0; t < 4; ++t) {
                        lane[t] += lda_bytes;
                        asm("" : "+r"(lane[t]));  // an opaque step: the next address is not known in advance
                    }
                }
            } else {
                // A K or row tail: the rows past k_len read as zero, the elements past the rows are not read.
                const __mmask16 lane_mask = static_cast<__mmask16>((1u << (live_m * E)) - 1);
                for (int s = 0; s < N; ++s) {
                    v[s] = _mm512_setzero_si512();
                    for (int t = 0; t < 4; ++t)
                        if (t * N + s < live_k)
                            v[s] = _mm512_inserti32x4(
                                v[s], _mm_maskz_loadu_epi8(lane_mask, col + (t * N + s) * lda_bytes), t);
                }
            }
            transpose_lanes<E>(v);
            for (int j = 0; j < N; ++j) {
                const int r = bit_reverse(j, log2_of(N));
                if (r >= live_m) continue;
                uint8_t* dst = panel + (m0 + r) * panel_ld_bytes + kb * E;
                const __m512i out = _mm512_xor_si512(v[j], flips);
                if (store_mask == ~__mmask64(0)) _mm512_storeu_si512(dst, out);
                else _mm512_mask_storeu_epi8(dst, store_mask, out);
            }
        }
    }
}
#pragma GCC diagnostic pop

// Lane T of v stored as 16 bytes (fewer under a mask) at dst.
template <int T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void store_lane(uint8_t* dst, __m512i v, __mmask16 mask,
                                                                         bool full) {
    const __m128i piece = _mm512_extracti32x4_epi32(v, T);
    if (full) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), piece);
    else _mm_mask_storeu_epi8(dst, mask, piece);
}

// How far ahead along a stored row its lines are prefetched (3072x2x1024 TN s8: none 490 us, 256 bytes 420,
// 1 KB 700).
constexpr int64_t kPrefetchBytes = 256;

// GCC 12's headers flag the undefined vector behind _mm512_setzero_si512 and the masked loads as "may be
// used uninitialized" once inlined here: every lane is defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// `a` points at element (k0, i0) of the stored A; lda_bytes and panel_ld_bytes are strides in bytes.
template <int E>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void transpose_lines(const uint8_t* a, int64_t lda_bytes, int rows,
                                                                     int64_t k_len, int64_t k_padded,
                                                                     int64_t panel_ld_bytes, uint8_t flip,
                                                                     uint8_t* panel) {
    constexpr int N = 16 / E;       // stored rows per transpose: one 16-byte piece of each panel row
    constexpr int kGroupM = 4 * N;  // panel rows per stored line
    const __m512i flip_all = _mm512_set1_epi8(static_cast<char>(flip));
    const int64_t lane_step = int64_t(N) * panel_ld_bytes;  // lane t of a vector: panel row t N further
    for (int64_t ks = 0; ks < k_padded; ks += N) {
        // The last piece of a panel row may stop at k_padded (bytes past it are not the panel's).
        const bool full = ks + N <= k_padded;
        const __mmask16 mask = static_cast<__mmask16>(low_bytes(std::min<int64_t>(N, k_padded - ks) * E));
        for (int m0 = 0; m0 < rows; m0 += kGroupM) {
            const int live_m = std::min(kGroupM, rows - m0);
            const uint8_t* line = a + ks * lda_bytes + int64_t(m0) * E;
            __m512i v[N];
            if (live_m == kGroupM && ks + N <= k_len) {
                // (Only lines this pass reads: past its rows, another call's M block uses them, later.)
                if (m0 + kGroupM + kPrefetchBytes / E <= rows)
                    for (int s = 0; s < N; ++s)
                        _mm_prefetch(reinterpret_cast<const char*>(line + s * lda_bytes + kPrefetchBytes), _MM_HINT_T0);
                for (int s = 0; s < N; ++s)
                    v[s] = _mm512_xor_si512(_mm512_loadu_si512(line + s * lda_bytes), flip_all);
            } else {
                // A row or K tail: elements past the rows are not read, stored rows past k_len are zero padding.
                const __mmask64 line_mask = low_bytes(int64_t(live_m) * E);
                for (int s = 0; s < N; ++s)
                    v[s] = ks + s < k_len
                               ? _mm512_xor_si512(_mm512_maskz_loadu_epi8(line_mask, line + s * lda_bytes), flip_all)
                               : _mm512_setzero_si512();
            }
            transpose_lanes<E>(v);
            for (int j = 0; j < N; ++j) {
                const int r = bit_reverse(j, log2_of(N));
                uint8_t* dst = panel + int64_t(m0 + r) * panel_ld_bytes + ks * E;
                if (r < live_m) store_lane<0>(dst, v[j], mask, full);
                if (N + r < live_m) store_lane<1>(dst + lane_step, v[j], mask, full);
                if (2 * N + r < live_m) store_lane<2>(dst + 2 * lane_step, v[j], mask, full);
                if (3 * N + r < live_m) store_lane<3>(dst + 3 * lane_step, v[j], mask, full);
            }
        }
    }
}
#pragma GCC diagnostic pop

}  // namespace

bool pack_a_transposed_available() {
    static const bool available = hw::cpu_info().avx512bw && hw::cpu_info().avx512vl;
    return available;
}

void pack_a_transposed(const void* a, int64_t lda, int elem_bytes, int64_t i0, int rows, int64_t k0, int64_t k_len,
                       int64_t k_padded, int64_t panel_ld, uint8_t flip, void* panel) {
    const auto* origin = static_cast<const uint8_t*>(a) + (k0 * lda + i0) * elem_bytes;
    auto* out = static_cast<uint8_t*>(panel);
    // A row tile or a few (the packers that run tile by tile, short M blocks) takes blocks of whole panel lines:
    // its stored rows are short runs either way. Wide row ranges (an M block packed at once) and a K of whole
    // lines take the line walk, in passes of at most kRowsPerPass rows: the panel lines a pass writes 16 bytes of
    // at a time stay in L2 until the pass completes them (3072x2x1024 TN s8: one 1344-row pass 640 us, 512-row
    // passes 490; 256-row 890, 128-row 1280: the shorter the runs along the stored rows, the slower).
    // A K of one 16-byte piece (8 bf16, 16 int8) takes the line walk at any row count: each panel row is that one
    // piece, and the walk fills all four lanes of a transpose (4N rows) where transpose_rows would fill one (N
    // rows, the other lanes past K) for the same shuffles.
    constexpr int kMinLineWalkRows = 256, kRowsPerPass = 512;
    const bool one_piece = k_padded * elem_bytes <= 16;
    if (!one_piece && (rows < kMinLineWalkRows || k_len * elem_bytes < 64)) {
        if (elem_bytes == 1) transpose_rows<1>(origin, lda, rows, k_len, k_padded, panel_ld, flip, out);
        else transpose_rows<2>(origin, lda * 2, rows, k_len, k_padded, panel_ld * 2, flip, out);
        return;
    }
    for (int r0 = 0; r0 < rows; r0 += kRowsPerPass) {
        const int pass_rows = std::min(kRowsPerPass, rows - r0);
        const int64_t row_bytes = int64_t(r0) * elem_bytes, panel_bytes = int64_t(r0) * panel_ld * elem_bytes;
        if (elem_bytes == 1)
            transpose_lines<1>(origin + row_bytes, lda, pass_rows, k_len, k_padded, panel_ld, flip, out + panel_bytes);
        else
            transpose_lines<2>(origin + row_bytes, lda * 2, pass_rows, k_len, k_padded, panel_ld * 2, flip,
                               out + panel_bytes);
    }
}

}  // namespace jitmm::x86
