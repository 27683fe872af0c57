// Low-precision operands widened to f32: every bf16, f16, s8 and u8 value is exactly an f32, so a product of a
// short K computed in f32 from the widened operands equals the low-precision kernel's (f32 accumulation; for
// int8, integer sums far below 2^24). See plan::lowp_widens_to_f32.
#pragma once

#include "jitmm/jitmm.h"

#include <cstdint>

namespace jitmm::x86 {

// dst[r * cols + c] = f32(src[r * ld + c]) for r < rows, c < cols (src's type: bf16, f16, s8 or u8; ld in
// elements). avx512: 16 values per step with masked tails; otherwise 8 (AVX2 and F16C), tails through a copy.
void widen_to_f32(const void* src, jitmm_dtype type, int64_t rows, int64_t cols, int64_t ld, float* dst,
                  bool avx512);

}  // namespace jitmm::x86
