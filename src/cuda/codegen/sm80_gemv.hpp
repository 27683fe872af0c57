// The SM80 family's decode kernel (M <= 32, B stored N x K with 16-byte aligned rows: a Linear layer's
// weights): C^T = B^T A^T with B^T's rows in the mma's 16-row slot. Each warp streams its own contiguous K
// range of 16 weight rows through a cp.async ring in shared memory, 128-byte lines of one row per request,
// and feeds the tensor cores with ldmatrix; the warps' partial sums meet in shared memory.
#pragma once

#include "core/problem.hpp"
#include "cuda/codegen/generated_kernel.hpp"
#include "plan/cuda_gemm_plan.hpp"

#include <sstream>
#include <string>

namespace jitmm::cuda {

// Appends the kernel `name` to os, after the SM80 prelude (cp.async, ldmatrix, mma, prep, Acc, E) and the
// epilogue helpers (finish, c_store, EC) that generate_sm80_gemm emits first; fills out's launch shape.
void emit_sm80_gemv(std::ostringstream& os, const Problem& p, const plan::CudaGemmPlan& plan, const std::string& name,
                    GeneratedKernel& out);

// The same for a 16-bit B stored K x N (plan.gemv_n_major, sm80_gemv_nn.cpp): each CTA streams the k-rows of
// 64 columns of B, ldmatrix.trans turns them into the mma's fragments.
void emit_sm80_gemv_n_major(std::ostringstream& os, const Problem& p, const plan::CudaGemmPlan& plan,
                            const std::string& name, GeneratedKernel& out);

}  // namespace jitmm::cuda
