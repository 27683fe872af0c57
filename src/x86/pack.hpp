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

void pack_b_f32(const float* b, int64_t ldb, bool trans_b, int64_t k0, int64_t k_len, int64_t j0, int64_t width,
                int nr, float* panels);

}  // namespace jitmm::x86
