// The rows of op(A) = A^T for the f32 dot family: A stored K x M (trans_a, few columns) copied into M
// contiguous rows of K values, the layout the dot kernels read A in (each C value is then a dot product of two
// contiguous K runs).
#pragma once

#include <cstdint>

namespace jitmm::x86 {

// The leading dimension of the rows: K rounded up to whole cache lines, one line more where that would put the
// rows a multiple of 1 KiB apart (rows a multiple of 4 KiB apart fall into the same L1 sets, 16 rows more than
// its ways; 1 thread, TT, median of 3 alternated rounds, stride K -> K + 16: 16x4096x4096 8013 -> 7729 us,
// 16x1024x1024 514 -> 485, 7x2048x2048 even).
int64_t transposed_a_row_stride(int64_t k);

// rows[i * rows_ld + p] = a[p * lda + i] for i < m, p < k, and zeros in the padding past k: A's stored rows
// transposed through registers 16 (AVX-512) or 8 at a time, as a transposed B is packed into one panel
// rows_ld wide (element by element, 10x31x3448 TT x30 spent 500 of its 1950 us here).
void transpose_a_to_rows(const float* a, int64_t lda, int64_t m, int64_t k, float* rows, int64_t rows_ld,
                         bool avx512);

}  // namespace jitmm::x86
