// The SM80-family GEMM generator (sm_80 .. sm_90, and anything newer that keeps mma.sync): CUDA C++ source
// for one shape-specialized kernel, with no #include at all (its own PTX wrappers for mma.sync, ldmatrix,
// cp.async and the conversions), so that NVRTC spends its time in ptxas, not in headers.
#pragma once

#include "core/problem.hpp"
#include "cuda/codegen/generated_kernel.hpp"
#include "plan/cuda_gemm_plan.hpp"

#include <cstdint>
#include <string>

namespace jitmm::cuda {

// Bumped whenever the generated source changes for the same problem and plan (invalidates cached cubins).
constexpr int kSm80GeneratorVersion = 11;

// The kernel's parameters are (const void* a, const void* b, void* c, const void* bias), and for the gemv
// kernels a fifth, void* ws (the workspace of plan.workspace_bytes, its counters zeroed, when K is split over
// CTAs; else unused); everything else (shape, leading dimensions, strides, alpha/beta, epilogue) is baked in.
GeneratedKernel generate_sm80_gemm(const Problem& p, const plan::CudaGemmPlan& plan);

}  // namespace jitmm::cuda
