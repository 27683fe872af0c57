#include "cuda/tensor_map.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <cstdint>
#include <string>

namespace jitmm::cuda {

namespace {

CUtensorMapDataType map_type(jitmm_dtype t) {
    switch (dtype_size(t)) {
        case 1: return CU_TENSOR_MAP_DATA_TYPE_UINT8;   // fp8 and int8 move as bytes
        case 2: return t == JITMM_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
        default: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    }
}

}  // namespace

CUtensorMap encode_tensor_map(const DriverApi& drv, const void* base, const TmaOperand& op) {
    const int64_t e = dtype_size(op.type);
    if (reinterpret_cast<uintptr_t>(base) % 16 != 0)
        fail(JITMM_STATUS_INVALID_VALUE, "cuda sm90: operand pointer is not 16-byte aligned");
    const int64_t line_elems = op.k_major ? op.k : op.rows, lines = op.k_major ? op.rows : op.k;
    // A single item gets a batch stride that is simply one past its last line (any multiple of 16 does).
    const int64_t batch_stride = op.batch > 1 ? op.stride * e : op.ld * e * lines;
    cuuint64_t dims[3] = {static_cast<cuuint64_t>(line_elems), static_cast<cuuint64_t>(lines),
                          static_cast<cuuint64_t>(op.batch)};
    cuuint64_t strides[2] = {static_cast<cuuint64_t>(op.ld * e), static_cast<cuuint64_t>(batch_stride)};
    cuuint32_t box[3] = {static_cast<cuuint32_t>(op.k_major ? op.box_k : op.box_rows),
                         static_cast<cuuint32_t>(op.k_major ? op.box_rows : op.box_k), 1u};
    cuuint32_t element_strides[3] = {1u, 1u, 1u};
    CUtensorMap map;
    check(entry(drv.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled")(
              &map, map_type(op.type), 3, const_cast<void*>(base), dims, strides, box, element_strides,
              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
          ("cuTensorMapEncodeTiled(" + std::to_string(line_elems) + " x " + std::to_string(lines) + " x " +
           std::to_string(op.batch) + ", ld " + std::to_string(op.ld) + ")")
              .c_str());
    return map;
}

}  // namespace jitmm::cuda
