// Packing for the f32 microkernels. B: a block of op(B) (k_len x width, from column j0 and row k0) copied
// into nr-wide panels, panel p holding columns [p*nr, p*nr + nr) as [k][nr], zero padded past the width so
// that the kernel's loads never need a mask.
#pragma once

#include <cstdint>

namespace jitmm::x86 {

// Packing A: rows [i0, i0 + rows) of op(A), K range [k0, k0 + k_len), copied keeping A's orientation:
// [rows][panel_ld] for A as stored, [k_len][panel_ld] (panel_ld = mr) for a transposed A. Rows past `rows`
// are left unwritten: the row-tail kernel never reads them.
void pack_a_f32(const float* a, int64_t lda, bool trans_a, int64_t i0, int rows, int64_t k0, int64_t k_len,
                int64_t panel_ld, float* panel);

// Row tiles of mr rows from i0 up to i_end (the last one cut there) of a transposed A (stored K x M), K range
// [k0, k0 + k_len), each into its own [k_len][mr] panel, panel_floats apart: stored row by stored row across all
// the tiles, so that each stored row is read front to back (a tile at a time, a tile's mr values per stored row
// are read down K, a walk the prefetchers do not follow). avx512: a vector per tile and stored row (tiles of up to
// 16 rows; a vector store may write the lanes past the tile into the next k's slot before that k's own store).
void pack_a_f32_transposed_tiles(const float* a, int64_t lda, int64_t i0, int64_t i_end, int mr, int64_t k0,
                                 int64_t k_len, int64_t panel_floats, float* panels, bool avx512);

// dst[c * dst_ld + r] = src[r * src_ld + c] for r < src_rows, c < src_cols, and zeros for r in [src_rows, dst_ld):
// a block transposed through registers in 8 x 8 blocks (AVX2), each destination row zero padded.
void transpose_f32_padded(const float* src, int64_t src_ld, int64_t src_rows, int64_t src_cols, float* dst,
                          int64_t dst_ld);

// dst[c * dst_ld + r] = src[r * src_ld + c] for r < rows, c < cols: nothing else is read or written (C of a
// problem computed transposed, see x86_gemm_plan's serves_with_c_transposed). avx512: 16 x 16 blocks through
// registers with masked edges; otherwise element by element.
void transpose_f32(const float* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst, int64_t dst_ld,
                   bool avx512);

// A B block packs in units, so that it can be packed a slice at a time between microkernel calls: rows k of
// the block (B as stored: op(B) rows are B rows) or groups of kPackBColumns columns (trans_b: as many stored
// rows, transposed into the panels in 8 x 8 blocks). The whole block is units [0, pack_b_units).
constexpr int64_t kPackBColumns = 16;
int64_t pack_b_units(bool trans_b, int64_t k_len, int64_t width);

// Packs units [unit_begin, unit_end) of the block (k_len x width of op(B), from row k0 and column j0); the
// unit holding the last column also zeroes the padding columns of the last panel. avx512: the kernel's tier
// has AVX-512, which the transposing copy may then use too (a tier capped below it never runs it).
void pack_b_f32(const float* b, int64_t ldb, bool trans_b, int64_t k0, int64_t k_len, int64_t j0, int64_t width,
                int nr, bool avx512, float* panels, int64_t unit_begin, int64_t unit_end);

// The whole block.
inline void pack_b_f32(const float* b, int64_t ldb, bool trans_b, int64_t k0, int64_t k_len, int64_t j0,
                       int64_t width, int nr, bool avx512, float* panels) {
    pack_b_f32(b, ldb, trans_b, k0, k_len, j0, width, nr, avx512, panels, 0, pack_b_units(trans_b, k_len, width));
}

}  // namespace jitmm::x86
