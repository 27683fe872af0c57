// The Hopper GEMM generator (sm_90a): a persistent, warp-specialized kernel. One producer warpgroup drives
// the tensor-memory accelerator (cp.async.bulk.tensor into 128-byte-swizzled shared stages, completion on
// mbarriers); one or two consumer warpgroups issue wgmma.mma_async from those stages and keep the
// accumulators in registers; the epilogue (scales, alpha, beta*C, bias, activation, conversion) is applied
// in registers before the single store. No #include: its own PTX wrappers, like the SM80 generator.
// Split K reduces inside the kernel (the last K range of a tile adds the others' partial sums); per-block fp8
// scales are applied per k-block; staged operands get their copy kernels in the same module (sm90_stage.hpp).
#pragma once

#include "core/problem.hpp"
#include "cuda/codegen/generated_kernel.hpp"
#include "plan/cuda_sm90_plan.hpp"

namespace jitmm::cuda {

// Bumped whenever the generated source changes for the same problem and plan (invalidates cached cubins).
constexpr int kSm90GeneratorVersion = 12;

// The kernel's parameters are (const __grid_constant__ CUtensorMap tma_a, ... tma_b, ... tma_c, ... tma_a_tail,
// ... tma_b_tail, void* c, const void* bias, const float* a_scales, const float* b_scales, void* ws), the tail
// maps boxing only plan.a_tail_rows(p) / b_tail_rows(p) rows (unused, any value, when those are 0); ws (split K only) holds
// plan.workspace_bytes(p), its first workspace_counter_bytes(p) zeroed before each launch; the tensor maps are built per call
// (sm90_tensor_maps in the backend) with the boxes this plan names:
//   K-major operand:  dims {K, rows, batch}, box {bk, tile rows}
//   M/N-major operand: dims {rows, K, batch}, box {64, bk} (tile / 64 boxes per stage)
GeneratedKernel generate_sm90_gemm(const Problem& p, const plan::Sm90GemmPlan& plan);

}  // namespace jitmm::cuda
