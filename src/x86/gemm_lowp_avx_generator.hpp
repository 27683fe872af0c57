// The AVX-512 / AVX2 low-precision microkernel generator: register tiles of rows x vectors, one dword of A
// broadcast per row and k group, multiplied into every B vector of the row:
//
//   void ukernel(const void* a, const void* b, void* c, const LowpCallArgs* args);
//
//   for each k group:  b[j] = B panel row (nr dwords: nr columns x one k group), or with LowpLayout::b_in_place
//                             B's own f16 row widened by vcvtph2ps
//                      for each row i: x = broadcast A[i][group]; acc[i][j] = step(acc[i][j], x, b[j])
//   steps: vpdpbusd (u8 x s8, 4 per dword; ymm: the VEX form, AVX-VNNI), vpmaddwd + vpaddd (s16 pairs), vdpbf16ps (bf16 pairs),
//          vfmadd231ps (f32)
//   then the strip (K blocks before the last) or the fused epilogue (gemm_lowp_epilogue.hpp).
#pragma once

#include "plan/x86_lowp_plan.hpp"
#include "x86/gemm_lowp_epilogue.hpp"

#include <vector>

namespace jitmm::x86 {

// Throws jitmm::Error(JIT_FAILED) if Xbyak rejects something.
LowpCode generate_lowp_avx(const plan::LowpLayout& layout, const std::vector<LowpVariant>& variants);

}  // namespace jitmm::x86
