#include "api/validate.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>

namespace jitmm::api {

namespace {


std::string num(int64_t v) { return std::to_string(v); }

void check_struct_size(size_t given, size_t expected, const char* what, size_t legacy = 0) {
    if (given != expected && (legacy == 0 || given != legacy))
        fail(JITMM_STATUS_INVALID_STRUCT_SIZE, std::string(what) + ".struct_size is " + std::to_string(given) +
                                                   ", expected " + std::to_string(expected) + " (sizeof(" + what +
                                                   ") of this jitmm version; call " + what + "_init)");
}

// Structs grow by appending fields. A caller built against the header before the quantization fields passes
// the old sizeof (the offset of the first new field, rounded up to the struct's alignment): its struct is
// read up to that field and the rest takes the _init defaults (all zero).
template <typename T>
constexpr size_t legacy_size(size_t first_new_field) {
    return (first_new_field + alignof(T) - 1) / alignof(T) * alignof(T);
}
constexpr size_t kDescLegacySize = legacy_size<jitmm_matmul_desc>(offsetof(jitmm_matmul_desc, a_scale_mode));
constexpr size_t kArgsLegacySize = legacy_size<jitmm_matmul_args>(offsetof(jitmm_matmul_args, a_scales));

template <typename T>
T upgraded(const T* given, size_t first_new_field) {
    T full{};
    std::memcpy(static_cast<void*>(&full), given, given->struct_size == sizeof(T) ? sizeof(T) : first_new_field);
    return full;
}

bool is_int8(jitmm_dtype t) { return t == JITMM_DTYPE_S8 || t == JITMM_DTYPE_U8; }
bool is_float(jitmm_dtype t) {
    return t == JITMM_DTYPE_F32 || t == JITMM_DTYPE_F16 || t == JITMM_DTYPE_BF16 || t == JITMM_DTYPE_F8_E4M3 ||
           t == JITMM_DTYPE_F8_E5M2;
}

ScaleMode check_scale_mode(int v, const char* field, jitmm_scale_mode allowed) {
    if (v == JITMM_SCALE_NONE) return ScaleMode::none;
    if (v == JITMM_SCALE_PER_TENSOR) return ScaleMode::per_tensor;
    if (v == JITMM_SCALE_PER_BLOCK_128) return ScaleMode::per_block;
    if (v == allowed) return allowed == JITMM_SCALE_PER_ROW ? ScaleMode::per_row : ScaleMode::per_column;
    fail(JITMM_STATUS_INVALID_VALUE, std::string("desc.") + field + " must be JITMM_SCALE_NONE, _PER_TENSOR, " +
                                         (allowed == JITMM_SCALE_PER_ROW ? "_PER_ROW" : "_PER_COLUMN") +
                                         " or _PER_BLOCK_128, got " + std::to_string(v));
}

// Scales and the zero point describe quantized integer inputs: they are refused (INVALID_VALUE, not
// UNSUPPORTED) on anything else, since no backend could give them a meaning there.
void check_quantization(const jitmm_matmul_desc& d, Problem& p) {
    p.a_scale = check_scale_mode(d.a_scale_mode, "a_scale_mode", JITMM_SCALE_PER_ROW);
    p.b_scale = check_scale_mode(d.b_scale_mode, "b_scale_mode", JITMM_SCALE_PER_COLUMN);
    if (p.a_scale != ScaleMode::none || p.b_scale != ScaleMode::none) {
        const char* field = p.a_scale != ScaleMode::none ? "a_scale_mode" : "b_scale_mode";
        const bool fp8 = dtype_is_fp8(p.a_type) && dtype_is_fp8(p.b_type);
        if (!fp8 && (!is_int8(p.a_type) || !is_int8(p.b_type)))
            fail(JITMM_STATUS_INVALID_VALUE, std::string("desc.") + field +
                                                 ": scales dequantize s8/u8 or fp8 inputs, but a_type is " +
                                                 dtype_name_or_null(p.a_type) + " and b_type " +
                                                 dtype_name_or_null(p.b_type));
        if (!is_float(p.c_type))
            fail(JITMM_STATUS_INVALID_VALUE, std::string("desc.") + field +
                                                 ": scales dequantize to a floating-point c_type, got " +
                                                 dtype_name_or_null(p.c_type));
        const bool a_block = p.a_scale == ScaleMode::per_block, b_block = p.b_scale == ScaleMode::per_block;
        if (a_block != b_block)
            fail(JITMM_STATUS_INVALID_VALUE, std::string("desc.") + (a_block ? "b_scale_mode" : "a_scale_mode") +
                                                 ": JITMM_SCALE_PER_BLOCK_128 scales come in pairs (A per row and "
                                                 "128-wide K block, B per 128 x 128 block): set both");
        if (a_block && !fp8)
            fail(JITMM_STATUS_INVALID_VALUE, std::string("desc.a_scale_mode: JITMM_SCALE_PER_BLOCK_128 is for fp8 "
                                                         "inputs, a_type is ") + dtype_name_or_null(p.a_type));
    }
    p.a_zero_point = d.a_zero_point;
    if (d.a_zero_point != 0) {
        const bool u8 = p.a_type == JITMM_DTYPE_U8;
        if (!is_int8(p.a_type))
            fail(JITMM_STATUS_INVALID_VALUE, "desc.a_zero_point (" + std::to_string(d.a_zero_point) +
                                                 ") needs an s8 or u8 a_type, got " + dtype_name_or_null(p.a_type));
        const int lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
        if (d.a_zero_point < lo || d.a_zero_point > hi)
            fail(JITMM_STATUS_INVALID_VALUE, "desc.a_zero_point (" + std::to_string(d.a_zero_point) +
                                                 ") is outside the range of a_type " + dtype_name_or_null(p.a_type) +
                                                 " [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
}

void check_dim(int64_t v, const char* field) {
    if (v <= 0) fail(JITMM_STATUS_INVALID_DIMENSION, std::string("desc.") + field + " must be >= 1, got " + num(v));
}

jitmm_dtype check_dtype(int v, const char* field) {
    if (!dtype_valid(v))
        fail(JITMM_STATUS_INVALID_VALUE, std::string("desc.") + field + " is not a jitmm_dtype (got " +
                                             std::to_string(v) + ")");
    return static_cast<jitmm_dtype>(v);
}

bool check_flag(int32_t v, const char* field) {
    if (v != 0 && v != 1)
        fail(JITMM_STATUS_INVALID_VALUE, std::string("desc.") + field + " must be 0 or 1, got " + std::to_string(v));
    return v == 1;
}

// Resolves 0 to the tight value and checks ld >= the stored row length.
int64_t resolve_ld(int64_t ld, int64_t row_length, const char* field, const char* matrix, bool transposed) {
    if (ld == 0) return row_length;
    if (ld < row_length)
        fail(JITMM_STATUS_INVALID_LEADING_DIM,
             std::string("desc.") + field + " (" + num(ld) + ") is smaller than a stored row of " + matrix + " (" +
                 num(row_length) + " elements" + (transposed ? ", the matrix being stored transposed)" : ")"));
    return ld;
}

// Elements one matrix spans: (rows - 1) * ld + cols, in bytes it must fit in int64 as well.
int64_t span_elements(int64_t rows, int64_t cols, int64_t ld, int64_t elem_size, const char* matrix) {
    int64_t span = 0, bytes = 0;
    if (__builtin_mul_overflow(rows - 1, ld, &span) || __builtin_add_overflow(span, cols, &span) ||
        __builtin_mul_overflow(span, elem_size, &bytes))
        fail(JITMM_STATUS_OVERFLOW, std::string(matrix) + " (" + num(rows) + " x " + num(cols) + ", ld " + num(ld) +
                                        ") spans more than 2^63 bytes");
    return span;
}

void check_batch_extent(int64_t batch, int64_t stride, int64_t span, int64_t elem_size, const char* matrix) {
    int64_t total = 0;
    if (__builtin_mul_overflow(batch - 1, stride, &total) || __builtin_add_overflow(total, span, &total) ||
        __builtin_mul_overflow(total, elem_size, &total))
        fail(JITMM_STATUS_OVERFLOW, std::string(matrix) + " batches (" + num(batch) + " with stride " + num(stride) +
                                        ") span more than 2^63 bytes");
}

}  // namespace

Problem problem_from_desc(const jitmm_matmul_desc* given) {
    if (given == nullptr) fail(JITMM_STATUS_NULL_POINTER, "desc is NULL");
    check_struct_size(given->struct_size, sizeof(jitmm_matmul_desc), "jitmm_matmul_desc", kDescLegacySize);
    const jitmm_matmul_desc full = upgraded(given, offsetof(jitmm_matmul_desc, a_scale_mode));
    const jitmm_matmul_desc* desc = &full;
    Problem p;
    check_dim(desc->m, "m");
    check_dim(desc->n, "n");
    check_dim(desc->k, "k");
    check_dim(desc->batch_count, "batch_count");
    p.m = desc->m;
    p.n = desc->n;
    p.k = desc->k;
    p.batch = desc->batch_count;
    p.a_type = check_dtype(desc->a_type, "a_type");
    p.b_type = check_dtype(desc->b_type, "b_type");
    p.c_type = check_dtype(desc->c_type, "c_type");
    p.trans_a = check_flag(desc->trans_a, "trans_a");
    p.trans_b = check_flag(desc->trans_b, "trans_b");
    if (!std::isfinite(desc->alpha))
        fail(JITMM_STATUS_INVALID_VALUE, "desc.alpha must be finite, got " + std::to_string(desc->alpha));
    if (!std::isfinite(desc->beta))
        fail(JITMM_STATUS_INVALID_VALUE, "desc.beta must be finite, got " + std::to_string(desc->beta));
    p.alpha = desc->alpha;
    p.beta = desc->beta;

    const int e = static_cast<int>(desc->epilogue);
    if (!epilogue_name_or_null(e))
        fail(JITMM_STATUS_INVALID_VALUE, "desc.epilogue is not a jitmm_epilogue (got " + std::to_string(e) + ")");
    static constexpr Activation kActivation[JITMM_EPILOGUE_COUNT] = {
        Activation::none, Activation::none, Activation::relu, Activation::gelu_tanh, Activation::gelu_erf,
        Activation::silu, Activation::relu, Activation::gelu_tanh, Activation::gelu_erf, Activation::silu};
    const bool has_bias = e == JITMM_EPILOGUE_BIAS || e >= JITMM_EPILOGUE_BIAS_RELU;
    p.activation = kActivation[e];
    if (has_bias) {
        if (desc->bias_layout != JITMM_BIAS_PER_COLUMN && desc->bias_layout != JITMM_BIAS_PER_ROW)
            fail(JITMM_STATUS_INVALID_VALUE, "desc.bias_layout is not a jitmm_bias_layout (got " +
                                                 std::to_string(static_cast<int>(desc->bias_layout)) + ")");
        p.bias = desc->bias_layout == JITMM_BIAS_PER_ROW ? BiasKind::per_row : BiasKind::per_column;
        p.bias_type = check_dtype(desc->bias_type, "bias_type");
    }
    check_quantization(*desc, p);

    if (desc->lda < 0 || desc->ldb < 0 || desc->ldc < 0) {
        const char* f = desc->lda < 0 ? "lda" : desc->ldb < 0 ? "ldb" : "ldc";
        const int64_t v = desc->lda < 0 ? desc->lda : desc->ldb < 0 ? desc->ldb : desc->ldc;
        fail(JITMM_STATUS_INVALID_LEADING_DIM, std::string("desc.") + f + " must be >= 0 (0 = tight), got " + num(v));
    }
    p.lda = resolve_ld(desc->lda, p.a_cols(), "lda", "A", p.trans_a);
    p.ldb = resolve_ld(desc->ldb, p.b_cols(), "ldb", "B", p.trans_b);
    p.ldc = resolve_ld(desc->ldc, p.n, "ldc", "C", false);

    const int64_t span_a = span_elements(p.a_rows(), p.a_cols(), p.lda, dtype_size(p.a_type), "A");
    const int64_t span_b = span_elements(p.b_rows(), p.b_cols(), p.ldb, dtype_size(p.b_type), "B");
    const int64_t span_c = span_elements(p.m, p.n, p.ldc, dtype_size(p.c_type), "C");

    if (desc->stride_a < 0 || desc->stride_b < 0 || desc->stride_c < 0) {
        const char* f = desc->stride_a < 0 ? "stride_a" : desc->stride_b < 0 ? "stride_b" : "stride_c";
        fail(JITMM_STATUS_INVALID_STRIDE, std::string("desc.") + f + " must be >= 0");
    }
    if (p.batch > 1) {
        // A and B may be shared by every batch (stride 0); otherwise consecutive matrices must not overlap.
        if (desc->stride_a != 0 && desc->stride_a < span_a)
            fail(JITMM_STATUS_INVALID_STRIDE, "desc.stride_a (" + num(desc->stride_a) +
                                                  ") is smaller than one A matrix (" + num(span_a) +
                                                  " elements): batches would overlap (0 shares one A)");
        if (desc->stride_b != 0 && desc->stride_b < span_b)
            fail(JITMM_STATUS_INVALID_STRIDE, "desc.stride_b (" + num(desc->stride_b) +
                                                  ") is smaller than one B matrix (" + num(span_b) +
                                                  " elements): batches would overlap (0 shares one B)");
        if (desc->stride_c < span_c)
            fail(JITMM_STATUS_INVALID_STRIDE, "desc.stride_c (" + num(desc->stride_c) +
                                                  ") is smaller than one C matrix (" + num(span_c) +
                                                  " elements): batches would write over each other");
        check_batch_extent(p.batch, desc->stride_a, span_a, dtype_size(p.a_type), "A");
        check_batch_extent(p.batch, desc->stride_b, span_b, dtype_size(p.b_type), "B");
        check_batch_extent(p.batch, desc->stride_c, span_c, dtype_size(p.c_type), "C");
        p.stride_a = desc->stride_a;
        p.stride_b = desc->stride_b;
        p.stride_c = desc->stride_c;
    }
    return p;
}

RunArgs check_args(const Problem& p, const jitmm_matmul_args* given) {
    if (given == nullptr) fail(JITMM_STATUS_NULL_POINTER, "args is NULL");
    check_struct_size(given->struct_size, sizeof(jitmm_matmul_args), "jitmm_matmul_args", kArgsLegacySize);
    const jitmm_matmul_args args = upgraded(given, offsetof(jitmm_matmul_args, a_scales));
    if (args.a == nullptr) fail(JITMM_STATUS_NULL_POINTER, "args.a is NULL");
    if (args.b == nullptr) fail(JITMM_STATUS_NULL_POINTER, "args.b is NULL");
    if (args.c == nullptr) fail(JITMM_STATUS_NULL_POINTER, "args.c is NULL");
    if (p.bias != BiasKind::none && args.bias == nullptr)
        fail(JITMM_STATUS_NULL_POINTER, "args.bias is NULL but the epilogue adds a bias");
    if (p.a_scale != ScaleMode::none && args.a_scales == nullptr)
        fail(JITMM_STATUS_NULL_POINTER, "args.a_scales is NULL but desc.a_scale_mode is set");
    if (p.b_scale != ScaleMode::none && args.b_scales == nullptr)
        fail(JITMM_STATUS_NULL_POINTER, "args.b_scales is NULL but desc.b_scale_mode is set");
    RunArgs run{args.a, args.b, args.c, args.bias, args.stream, args.workspace, args.workspace_size};
    run.a_scales = args.a_scales;
    run.b_scales = args.b_scales;
    return run;
}

void check_config(const jitmm_engine_config* config) {
    if (config == nullptr) return;
    check_struct_size(config->struct_size, sizeof(jitmm_engine_config), "jitmm_engine_config");
}

}  // namespace jitmm::api
