#include "x86/transpose_a_rows.hpp"

#include "x86/pack.hpp"

namespace jitmm::x86 {

int64_t transposed_a_row_stride(int64_t k) {
    constexpr int64_t kLineFloats = 16;
    int64_t ld = (k + kLineFloats - 1) / kLineFloats * kLineFloats;
    if (ld % 256 == 0) ld += kLineFloats;
    return ld;
}

void transpose_a_to_rows(const float* a, int64_t lda, int64_t m, int64_t k, float* rows, int64_t rows_ld,
                         bool avx512) {
    // A stored K x M is a transposed B whose stored rows are A's (K of them, m values each): its one panel
    // rows_ld wide holds op(A)'s m rows.
    pack_b_f32(a, lda, true, 0, m, 0, k, static_cast<int>(rows_ld), avx512, rows, 0, pack_b_units(true, m, k));
}

}  // namespace jitmm::x86
