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

// A batch of `lines` lines of `line_elems` elements, ld elements apart; boxes of box_inner x box_lines.
CUtensorMap encode_lines(const DriverApi& drv, const void* base, jitmm_dtype type, int64_t line_elems, int64_t lines,
                         int64_t ld, int64_t batch, int64_t stride, int box_inner, int box_lines) {
    const int64_t e = dtype_size(type);
    if (reinterpret_cast<uintptr_t>(base) % 16 != 0)
        fail(JITMM_STATUS_INVALID_VALUE, "cuda sm90: a, b and c must be 16-byte aligned for the copy engine");
    // A single item gets a batch stride that is simply one past its last line (any multiple of 16 does).
    const int64_t batch_stride = batch > 1 ? stride * e : ld * e * lines;
    cuuint64_t dims[3] = {static_cast<cuuint64_t>(line_elems), static_cast<cuuint64_t>(lines),
                          static_cast<cuuint64_t>(batch)};
    cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld * e), static_cast<cuuint64_t>(batch_stride)};
    cuuint32_t box[3] = {static_cast<cuuint32_t>(box_inner), static_cast<cuuint32_t>(box_lines), 1u};
    cuuint32_t element_strides[3] = {1u, 1u, 1u};
    CUtensorMap map;
    check(entry(drv.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled")(
              &map, map_type(type), 3, const_cast<void*>(base), dims, strides, box, element_strides,
              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
          ("cuTensorMapEncodeTiled(" + std::to_string(line_elems) + " x " + std::to_string(lines) + " x " +
           std::to_string(batch) + ", ld " + std::to_string(ld) + ")")
              .c_str());
    return map;
}

}  // namespace

CUtensorMap encode_tensor_map(const DriverApi& drv, const void* base, const TmaOperand& op) {
    const int64_t line_elems = op.k_major ? op.k : op.rows, lines = op.k_major ? op.rows : op.k;
    return encode_lines(drv, base, op.type, line_elems, lines, op.ld, op.batch, op.stride,
                        op.k_major ? op.box_k : op.box_rows, op.k_major ? op.box_rows : op.box_k);
}

CUtensorMap encode_c_tensor_map(const DriverApi& drv, void* base, jitmm_dtype type, int64_t m, int64_t n, int64_t ldc,
                                int64_t batch, int64_t stride_c, int box_rows) {
    return encode_lines(drv, base, type, n, m, ldc, batch, stride_c, static_cast<int>(128 / dtype_size(type)),
                        box_rows);
}

}  // namespace jitmm::cuda
