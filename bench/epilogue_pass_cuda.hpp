// The separate epilogue pass a library without jitmm's fused epilogues pays on the GPU: bias (per column or
// per row) plus activation (relu, gelu_tanh, gelu_erf, silu) as one elementwise kernel over C, launched on
// the library's stream right after its matmul. CUDA C++ source compiled by jitmm's NVRTC wrapper; one
// variant per (C type, bias type, epilogue, bias layout, vector width), chosen by #defines.
//
// The kernel reads and writes each element of C once (16-byte vectors where the rows allow it), reads the
// bias from L1/L2; grid: x covers a row's columns (VEC per thread), y strides over the rows of every batch.
// Its signature:
//   extern "C" __global__ void jitmm_bench_epilogue(c_t* c, const bias_t* bias, int rows, int m, int n,
//                                                   long long ldc, long long stride_c)
// rows = batch_count * m; row r is batch r / m, row r % m of that batch (the per-row bias index).
#pragma once

#include <jitmm/jitmm.h>

#include <cstdint>
#include <string>

namespace jitmm::bench {

constexpr const char* kEpiloguePassKernel = "jitmm_bench_epilogue";
constexpr int kEpiloguePassBlock = 256;  // threads per block (x)

struct EpiloguePassConfig {
    jitmm_dtype c_type = JITMM_DTYPE_F32;     // f32, f16, bf16
    jitmm_dtype bias_type = JITMM_DTYPE_F32;  // f32, f16, bf16 (ignored without a bias)
    jitmm_epilogue epilogue = JITMM_EPILOGUE_NONE;
    jitmm_bias_layout bias_layout = JITMM_BIAS_PER_COLUMN;
    int vec = 1;  // elements per thread and row: 16 bytes' worth, or 1

    std::string key() const;  // names the variant (cache key, module name)
};

// Whether the pass covers desc's C and bias types ("" when it does), else why not.
std::string epilogue_pass_unsupported(const jitmm_matmul_desc& d);
// The variant for desc: vec = 16 / sizeof(C element) when ldc and the batch stride keep every row 16-byte
// aligned (C's base is: cuMemAlloc), else 1.
EpiloguePassConfig epilogue_pass_config(const jitmm_matmul_desc& d);
// The CUDA C++ source of one variant (no #include: it compiles with or without the toolkit headers).
std::string epilogue_pass_source(const EpiloguePassConfig& config);

}  // namespace jitmm::bench
