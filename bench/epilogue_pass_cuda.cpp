#include "epilogue_pass_cuda.hpp"

#include "reference.hpp"

namespace jitmm::bench {
namespace {

bool pass_type(jitmm_dtype t) { return t == JITMM_DTYPE_F32 || t == JITMM_DTYPE_F16 || t == JITMM_DTYPE_BF16; }

int type_code(jitmm_dtype t) { return t == JITMM_DTYPE_F32 ? 0 : t == JITMM_DTYPE_F16 ? 1 : 2; }

int activation_code(jitmm_epilogue e) {
    switch (e) {
        case JITMM_EPILOGUE_RELU:
        case JITMM_EPILOGUE_BIAS_RELU: return 1;
        case JITMM_EPILOGUE_GELU_TANH:
        case JITMM_EPILOGUE_BIAS_GELU_TANH: return 2;
        case JITMM_EPILOGUE_GELU_ERF:
        case JITMM_EPILOGUE_BIAS_GELU_ERF: return 3;
        case JITMM_EPILOGUE_SILU:
        case JITMM_EPILOGUE_BIAS_SILU: return 4;
        case JITMM_EPILOGUE_NONE:
        case JITMM_EPILOGUE_BIAS: return 0;
    }
    return 0;
}

// The variant-independent body; the #defines in front of it choose types, activation and bias.
const char* kBody = R"(
typedef unsigned short u16;

__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float bf16_to_f32(u16 h) { return __uint_as_float(static_cast<unsigned>(h) << 16); }
__device__ __forceinline__ u16 f32_to_bf16(float f) {
    u16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

#if CT == 0
typedef float c_t;
__device__ __forceinline__ float c_load(c_t v) { return v; }
__device__ __forceinline__ c_t c_store(float f) { return f; }
#elif CT == 1
typedef u16 c_t;
__device__ __forceinline__ float c_load(c_t v) { return f16_to_f32(v); }
__device__ __forceinline__ c_t c_store(float f) { return f32_to_f16(f); }
#else
typedef u16 c_t;
__device__ __forceinline__ float c_load(c_t v) { return bf16_to_f32(v); }
__device__ __forceinline__ c_t c_store(float f) { return f32_to_bf16(f); }
#endif

#if BT == 0
typedef float bias_t;
__device__ __forceinline__ float bias_load(bias_t v) { return v; }
#elif BT == 1
typedef u16 bias_t;
__device__ __forceinline__ float bias_load(bias_t v) { return f16_to_f32(v); }
#else
typedef u16 bias_t;
__device__ __forceinline__ float bias_load(bias_t v) { return bf16_to_f32(v); }
#endif

__device__ __forceinline__ float activate(float x) {
#if ACT == 1
    return fmaxf(x, 0.0f);
#elif ACT == 2
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
#elif ACT == 3
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
#elif ACT == 4
    return x / (1.0f + expf(-x));
#else
    return x;
#endif
}

extern "C" __global__ void __launch_bounds__(256)
jitmm_bench_epilogue(c_t* __restrict__ c, const bias_t* __restrict__ bias, int rows, int m, int n,
                     long long ldc, long long stride_c) {
    const int col = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (col >= n) return;
    const bool full = col + VEC <= n;
#if HAS_BIAS && !BIAS_PER_ROW
    float column_bias[VEC];  // the same for every row this thread visits
#pragma unroll
    for (int e = 0; e < VEC; ++e) column_bias[e] = col + e < n ? bias_load(bias[col + e]) : 0.0f;
#endif
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const int batch = r / m, i = r - batch * m;
        c_t* row = c + batch * stride_c + static_cast<long long>(i) * ldc + col;
#if HAS_BIAS && BIAS_PER_ROW
        const float row_bias = bias_load(bias[i]);
#endif
        if (full) {
            alignas(16) c_t v[VEC];
#if VEC > 1
            *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(row);
#else
            v[0] = row[0];
#endif
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                float x = c_load(v[e]);
#if HAS_BIAS && BIAS_PER_ROW
                x += row_bias;
#elif HAS_BIAS
                x += column_bias[e];
#endif
                v[e] = c_store(activate(x));
            }
#if VEC > 1
            *reinterpret_cast<uint4*>(row) = *reinterpret_cast<const uint4*>(v);
#else
            row[0] = v[0];
#endif
        } else {
            for (int e = 0; col + e < n; ++e) {
                float x = c_load(row[e]);
#if HAS_BIAS && BIAS_PER_ROW
                x += row_bias;
#elif HAS_BIAS
                x += bias_load(bias[col + e]);  // not column_bias[e]: a dynamic index would put it in local memory
#endif
                row[e] = c_store(activate(x));
            }
        }
    }
}
)";

}  // namespace

std::string EpiloguePassConfig::key() const {
    return "ct" + std::to_string(type_code(c_type)) + "_bt" + std::to_string(type_code(bias_type)) + "_act" +
           std::to_string(activation_code(epilogue)) + "_bias" + std::to_string(epilogue_has_bias(epilogue) ? 1 : 0) +
           (bias_layout == JITMM_BIAS_PER_ROW ? "row" : "col") + "_vec" + std::to_string(vec);
}

std::string epilogue_pass_unsupported(const jitmm_matmul_desc& d) {
    if (!pass_type(d.c_type)) return "the separate epilogue kernel takes an f32/f16/bf16 C";
    if (epilogue_has_bias(d.epilogue) && !pass_type(d.bias_type))
        return "the separate epilogue kernel takes an f32/f16/bf16 bias";
    const int64_t rows = d.batch_count * d.m;
    if (rows > 0x7fffffff || d.n > 0x7fffffff) return "the separate epilogue kernel indexes rows and columns in int";
    return "";
}

EpiloguePassConfig epilogue_pass_config(const jitmm_matmul_desc& d) {
    EpiloguePassConfig c;
    c.c_type = d.c_type;
    c.bias_type = d.bias_type;
    c.epilogue = d.epilogue;
    c.bias_layout = d.bias_layout;
    const Operand oc = operand_c(d);
    const int wide = d.c_type == JITMM_DTYPE_F32 ? 4 : 8;  // 16 bytes
    const bool aligned = oc.ld % wide == 0 && (d.batch_count == 1 || oc.stride % wide == 0);
    c.vec = aligned ? wide : 1;
    return c;
}

std::string epilogue_pass_source(const EpiloguePassConfig& config) {
    const bool has_bias = epilogue_has_bias(config.epilogue);
    std::string s = "// jitmm-bench: bias + activation as a separate pass over C (" + config.key() + ")\n";
    s += "#define CT " + std::to_string(type_code(config.c_type)) + "\n";
    s += "#define BT " + std::to_string(has_bias ? type_code(config.bias_type) : 0) + "\n";
    s += "#define ACT " + std::to_string(activation_code(config.epilogue)) + "\n";
    s += std::string("#define HAS_BIAS ") + (has_bias ? "1" : "0") + "\n";
    s += std::string("#define BIAS_PER_ROW ") + (config.bias_layout == JITMM_BIAS_PER_ROW ? "1" : "0") + "\n";
    s += "#define VEC " + std::to_string(config.vec) + "\n";
    return s + kBody;
}

}  // namespace jitmm::bench
