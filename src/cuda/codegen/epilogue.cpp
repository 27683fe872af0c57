#include "cuda/codegen/epilogue.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <cstdint>
#include <cstdio>

namespace jitmm::cuda {

namespace {

std::string to_float_expr(jitmm_dtype t, const std::string& ptr) {
    switch (t) {
        case JITMM_DTYPE_F32: return "*(const float*)(" + ptr + ")";
        case JITMM_DTYPE_F16: return "f16_to_f32(*(const u16*)(" + ptr + "))";
        case JITMM_DTYPE_BF16: return "__uint_as_float((u32)(*(const u16*)(" + ptr + ")) << 16)";
        case JITMM_DTYPE_S32: return "(float)(*(const int*)(" + ptr + "))";
        default: fail(JITMM_STATUS_INTERNAL_ERROR, "cuda generator: no conversion for this type");
    }
}

}  // namespace

// Exact float literal (hex float), so that alpha and beta in the kernel are the caller's bits.
std::string float_literal(float v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%af", static_cast<double>(v));
    return buf;
}

bool exact_int_epilogue(const Problem& p) {
    return p.c_type == JITMM_DTYPE_S32 && p.alpha == 1.0f && (p.beta == 0.0f || p.beta == 1.0f) &&
           (p.bias == BiasKind::none || p.bias_type == JITMM_DTYPE_S32) &&
           (p.activation == Activation::none || p.activation == Activation::relu);
}

void emit_epilogue_helpers(std::ostringstream& os, const Problem& p) {
    const bool exact = exact_int_epilogue(p);
    const int64_t ec = dtype_size(p.c_type);
    os << "\n// ---- epilogue: C = act(alpha * acc + beta * C + bias), one conversion at the store\n";
    os << "constexpr float ALPHA = " << float_literal(p.alpha) << ", BETA = " << float_literal(p.beta) << ";\n";
    os << "constexpr int EC = " << ec << ";  // C element bytes\n";
    os << "typedef " << (exact ? "int" : "float") << " Val;\n";
    os << R"(__device__ __forceinline__ float f16_to_f32(u16 h) { float f; asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h)); return f; }
// x * sigmoid(z) = x / (1 + e^-z): one ex2 and one rcp on the special-function unit, a few ulp everywhere (no
// cancellation in the negative tail, unlike 0.5x(1 + tanh)); for e^-z past 2^126 __fdividef gives the
// underflowed 0. The epilogue runs while the tensor cores wait: an IEEE division here cost the Hopper kernel
// 85 us at 4096^3 bias+GELU.
__device__ __forceinline__ float x_sigmoid(float x, float z) { return __fdividef(x, 1.0f + __expf(-z)); }
)";

    // The activation.
    os << "__device__ __forceinline__ Val act(Val x) {\n";
    switch (p.activation) {
        case Activation::none: os << "  return x;\n"; break;
        case Activation::relu: os << "  return x > (Val)0 ? x : (Val)0;\n"; break;
        case Activation::gelu_tanh:
            // 0.5x(1 + tanh(y)) = x * sigmoid(2y), y = sqrt(2/pi)(x + 0.044715x^3)
            os << "  return x_sigmoid(x, 1.5957691216057308f * (x + 0.044715f * x * x * x));\n";
            break;
        case Activation::gelu_erf:
            // 1 + erf(z) as erfc(-z): no cancellation in the negative tail, where it is the result (1 + erff lost
            // every digit there from x = -5.5 on).
            os << "  return 0.5f * x * erfcf(-0.7071067811865476f * x);\n";
            break;
        case Activation::silu: os << "  return x_sigmoid(x, x);\n"; break;
        default: fail(JITMM_STATUS_INTERNAL_ERROR, "cuda generator: unknown activation");
    }
    os << "}\n";

    // Stores of one and two adjacent elements.
    switch (p.c_type) {
        case JITMM_DTYPE_F32:
            os << "__device__ __forceinline__ void c_store(char* p, float v) { *(float*)p = v; }\n"
               << "__device__ __forceinline__ void c_store2(char* p, float v0, float v1) { float2 v; v.x = v0; v.y = v1; *(float2*)p = v; }\n";
            break;
        case JITMM_DTYPE_F16:
        case JITMM_DTYPE_BF16: {
            const char* t = p.c_type == JITMM_DTYPE_F16 ? "f16" : "bf16";
            os << "__device__ __forceinline__ void c_store(char* p, float v) {\n"
               << "  u16 h; asm(\"cvt.rn." << t << ".f32 %0, %1;\\n\" : \"=h\"(h) : \"f\"(v)); *(u16*)p = h;\n}\n"
               << "__device__ __forceinline__ void c_store2(char* p, float v0, float v1) {\n"
               << "  u32 h; asm(\"cvt.rn." << t << "x2.f32 %0, %1, %2;\\n\" : \"=r\"(h) : \"f\"(v1), \"f\"(v0)); *(u32*)p = h;\n}\n";
            break;
        }
        case JITMM_DTYPE_S32:
            if (exact) {
                os << "__device__ __forceinline__ void c_store(char* p, int v) { *(int*)p = v; }\n"
                   << "__device__ __forceinline__ void c_store2(char* p, int v0, int v1) { int2 v; v.x = v0; v.y = v1; *(int2*)p = v; }\n";
            } else {
                // Rounded to nearest, saturated (cvt.rni.s32.f32 clamps; NaN becomes 0).
                os << "__device__ __forceinline__ void c_store(char* p, float v) { *(int*)p = __float2int_rn(v); }\n"
                   << "__device__ __forceinline__ void c_store2(char* p, float v0, float v1) { int2 v; v.x = __float2int_rn(v0); v.y = __float2int_rn(v1); *(int2*)p = v; }\n";
            }
            break;
        default: fail(JITMM_STATUS_INTERNAL_ERROR, "cuda generator: no store for this output type");
    }

    // finish(): alpha, beta, bias, activation. c points at the element (read only when beta != 0).
    os << "__device__ __forceinline__ Val finish(Acc acc, const char* c, int row, int col, const char* bias) {\n";
    if (exact) {
        os << "  Val v = acc;\n";
        if (p.beta == 1.0f) os << "  v += *(const int*)c;\n";
    } else {
        os << "  Val v = " << (p.alpha == 1.0f ? "(float)acc" : "ALPHA * (float)acc") << ";\n";
        if (p.beta != 0.0f)
            os << "  v += " << (p.beta == 1.0f ? "" : "BETA * ") << to_float_expr(p.c_type, "c") << ";\n";
    }
    if (p.bias != BiasKind::none) {
        const char* index = p.bias == BiasKind::per_row ? "row" : "col";
        const std::string at = std::string("bias + (i64)") + index + " * " + std::to_string(dtype_size(p.bias_type));
        if (exact) os << "  v += *(const int*)(" << at << ");\n";
        else os << "  v += " << to_float_expr(p.bias_type, at) << ";\n";
    }
    os << "  (void)c; (void)row; (void)col; (void)bias;\n  return act(v);\n}\n";
}

}  // namespace jitmm::cuda
