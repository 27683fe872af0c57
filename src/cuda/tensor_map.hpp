// Tensor maps for the Hopper kernels' operands: the description of a (batched) matrix in global memory that
// the tensor-memory accelerator copies boxes of. Built on the host for each call's pointers (encoding is a
// few hundred nanoseconds of bit packing, no device call) and passed to the kernel by value.
#pragma once

#include "cuda/driver.hpp"

#include <jitmm/jitmm.h>

#include <cstdint>

namespace jitmm::cuda {

// One operand as stored: `rows` lines of `k` elements when k_major (K contiguous), else `k` lines of `rows`
// elements; `ld` elements between lines, `stride` elements between batch items.
struct TmaOperand {
    jitmm_dtype type = JITMM_DTYPE_BF16;
    bool k_major = true;
    int64_t rows = 0, k = 0, ld = 0, batch = 1, stride = 0;
    int box_k = 64;      // K elements per box row when k_major (128 bytes), K lines per box otherwise
    int box_rows = 128;  // lines per box when k_major; elements per line (64, 128 bytes) otherwise
};

// 128-byte swizzle, zero fill out of bounds. Throws jitmm::Error (INVALID_VALUE for pointers or strides the
// copy engine cannot address, DEVICE_ERROR with the driver's message otherwise).
CUtensorMap encode_tensor_map(const DriverApi& drv, const void* base, const TmaOperand& op);

// C (m x n, ldc and stride_c in elements) for the asynchronous store: boxes of 128 bytes x box_rows rows,
// 128-byte swizzle.
CUtensorMap encode_c_tensor_map(const DriverApi& drv, void* base, jitmm_dtype type, int64_t m, int64_t n, int64_t ldc,
                                int64_t batch, int64_t stride_c, int box_rows);

}  // namespace jitmm::cuda
