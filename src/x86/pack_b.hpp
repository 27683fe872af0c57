// Packing B for the f32 microkernels: a block of op(B) (k_len x width, from column j0 and row k0) copied
// into nr-wide panels, panel p holding columns [p*nr, p*nr + nr) as [k][nr], zero padded past the width so
// that the kernel's loads never need a mask.
#pragma once

#include <cstdint>

namespace jitmm::x86 {

void pack_b_f32(const float* b, int64_t ldb, bool trans_b, int64_t k0, int64_t k_len, int64_t j0, int64_t width,
                int nr, float* panels);

}  // namespace jitmm::x86
