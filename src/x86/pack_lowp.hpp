// Packing for the low-precision microkernels (plan/x86_lowp_plan.hpp names the steps). Both operands are
// copied into the element type the step multiplies, converting on the way:
//   int8 for AMX and VNNI (an s8 A for VNNI shifted by +128 into u8), int8 widened to s16 for vpmaddwd,
//   bf16 as is, bf16 and f16 widened to f32 for the FMA step.
//
// B: a block of op(B) (k_len x width, from row k0 and column j0) becomes nr-wide panels, panel p holding
//    columns [p*nr, p*nr + nr) as [k group][nr][group]: one dword per column and k group (the VNNI layout
//    AMX tiles and vpdpbusd/vpmaddwd/vdpbf16ps read). Zero padded past the width and past k_len up to
//    `groups` k groups, so that kernels never mask a load.
// A: rows [i0, i0 + rows) of op(A), K range [k0, k0 + k_len), as [rows][panel_ld] in the packed type, zero
//    padded from k_len to k_padded: a dword broadcast (or an AMX tile row) then reads whole k groups.
#pragma once

#include "plan/x86_lowp_plan.hpp"

#include <jitmm/jitmm.h>

#include <cstdint>

namespace jitmm::x86 {

// Whether B may be packed by the AVX512-VBMI byte permutes: the chip has them and JITMM_X86_PACK_VBMI is not
// "0" (the AVX2 / vpermt2w packers otherwise; tests cover both on one chip). Read when a kernel is made, not
// per call: getenv costs as much as packing a tiny B.
bool pack_vbmi_allowed();

// colsum (may be null; int8 only): colsum[j] += sum over the block of op(B)[k][j0 + j], for j < width.
// vbmi: pack_vbmi_allowed(), as the kernel found it.
void pack_b_lowp(plan::LowpStep step, jitmm_dtype b_type, const void* b, int64_t ldb, bool trans_b, int64_t k0,
                 int64_t k_len, int64_t j0, int64_t width, int nr, int64_t groups, void* panels, int32_t* colsum,
                 bool vbmi);

void pack_a_lowp(plan::LowpStep step, jitmm_dtype a_type, const void* a, int64_t lda, bool trans_a, int64_t i0,
                 int rows, int64_t k0, int64_t k_len, int64_t k_padded, int64_t panel_ld, void* panel);

// LowpLayout::f16_k_pairs: rows [k0, k0 + k_len) of op(B) (f16, B stored K x N, or N x K where trans_b), columns
// [j0, j0 + width) (width <= 8), widened into one 16-float vector per two k values, lane 2c + e holding column c
// at k + e; zero past width and, for an odd k_len, in the last vector's k + 1 lanes. Reads nothing of B past the
// block.
void pack_b_f16_k_pairs(const void* b, int64_t ldb, bool trans_b, int64_t k0, int64_t k_len, int64_t j0,
                        int64_t width, void* out);

// AMX: `bytes` (under 64) of each of `rows` rows (`ld_bytes` apart) into rows of 64 bytes, zero past `bytes`,
// for the tile rows of a K block's last, partial step. Reads nothing past each row's `bytes` (masked loads).
void pack_amx_last_step(const void* src, int64_t ld_bytes, int rows, int bytes, void* dst);

// sums[j] *= factor for j < n (the column sums times the +128 shift and the zero point), eight at a time: the
// compiler's SSE2 multiply loop was a tenth of 9x3666x1 NT s8 on VNNI.
void scale_column_sums(int32_t* sums, int64_t n, int32_t factor);

// sums[r] = the sum of the s8 values of row r (rows `ld` bytes apart, r < count) over its first `bytes` bytes, a
// multiple of 32 (the dot path's packed A rows, zero padded).
void s8_row_sums(const void* rows, int64_t ld, int64_t count, int64_t bytes, int32_t* sums);

// Scalar conversions, shared with the tests' references.
float bf16_to_f32(uint16_t h);
float f16_to_f32(uint16_t h);

}  // namespace jitmm::x86
