// Packing a transposed low-precision A (stored K x M) into the row panels the AMX, vdpbf16ps and VNNI kernels
// read: [rows][panel_ld], each row holding its K run, zero padded to k_padded (the layout pack_lowp.hpp's A
// panels have). Elements are copied unchanged (one or two bytes), an int8 A optionally shifted by XOR 0x80.
#pragma once

#include <cstdint>

namespace jitmm::x86 {

// Whether this chip can run pack_a_transposed (AVX-512 BW and VL: masked byte loads and stores).
bool pack_a_transposed_available();

// Rows [i0, i0 + rows) of op(A) = A^T over K [k0, k0 + k_len), from A stored K x M with `lda` elements per
// stored row; elem_bytes 1 or 2; flip XORed into every element byte read (0: a plain copy); padding stays 0.
// Rows past `rows` are left unwritten.
void pack_a_transposed(const void* a, int64_t lda, int elem_bytes, int64_t i0, int rows, int64_t k0, int64_t k_len,
                       int64_t k_padded, int64_t panel_ld, uint8_t flip, void* panel);

}  // namespace jitmm::x86
