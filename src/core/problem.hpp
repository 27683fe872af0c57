// Problem: the validated, canonical C++ form of a jitmm_matmul_desc. Everything below src/api works on
// this value, never on the C struct: leading dimensions are resolved, the epilogue split into its parts.
#pragma once

#include <jitmm/jitmm.h>

#include <cstdint>
#include <string>

namespace jitmm {

enum class Activation : int32_t { none = 0, relu, gelu_tanh, gelu_erf, silu };
// The activations built on an exponential (GELU, SiLU): far costlier per element than ReLU, which is why
// generators share or schedule their code apart.
inline bool activation_uses_exp(Activation a) {
    return a == Activation::gelu_tanh || a == Activation::gelu_erf || a == Activation::silu;
}
enum class BiasKind : int32_t { none = 0, per_column, per_row };
// Quantization scales: A allows per_tensor and per_row, B per_tensor and per_column; per_block (fp8, 1x128 on
// A and 128x128 on B, see jitmm.h) on both or neither (validated). Values equal jitmm_scale_mode's.
enum class ScaleMode : int32_t { none = 0, per_tensor, per_row, per_column, per_block };

struct Problem {
    int64_t m = 0, n = 0, k = 0, batch = 1;
    bool trans_a = false, trans_b = false;
    int64_t lda = 0, ldb = 0, ldc = 0;                  // elements, never 0 here
    int64_t stride_a = 0, stride_b = 0, stride_c = 0;   // elements; only meaningful when batch > 1
    jitmm_dtype a_type = JITMM_DTYPE_F32, b_type = JITMM_DTYPE_F32, c_type = JITMM_DTYPE_F32;
    jitmm_dtype bias_type = JITMM_DTYPE_F32;            // meaningful only when bias != none
    float alpha = 1.0f, beta = 0.0f;
    BiasKind bias = BiasKind::none;
    Activation activation = Activation::none;
    ScaleMode a_scale = ScaleMode::none, b_scale = ScaleMode::none;  // int8 inputs, float c_type only
    int32_t a_zero_point = 0;                                         // int8 A only

    bool quantized() const { return a_scale != ScaleMode::none || b_scale != ScaleMode::none || a_zero_point != 0; }
    int64_t a_rows() const { return trans_a ? k : m; }   // as stored
    int64_t a_cols() const { return trans_a ? m : k; }
    int64_t b_rows() const { return trans_b ? n : k; }
    int64_t b_cols() const { return trans_b ? k : n; }
    double flops() const { return 2.0 * double(m) * double(n) * double(k) * double(batch); }
    // The bytes of B a call reads: every batch's own B, or the one all batches share (stride_b 0).
    double b_bytes_read() const;
};

const char* activation_name(Activation a);
// "64x64x64 f32*f32->f32 nn lda=64 ... bias_relu": for logs and error messages.
std::string describe(const Problem& p);

}  // namespace jitmm
