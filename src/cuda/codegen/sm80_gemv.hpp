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

// Parts the decode kernels share (the gemv kernels, and the launch shape with the skinny kernel):
// The kernel's signature and its first lines: lane, warp, the batch's A, B, C and bias pointers, tile and n0
// (the CTA's column tile and its first column of C, `columns` a name of the generated source), kw (this warp's
// K range among the KW * CTAS_K warps of the tile) and this warp's ring.
void emit_gemv_kernel_head(std::ostringstream& os, const Problem& p, const plan::CudaGemmPlan& plan,
                           const std::string& name, const char* columns);
// After the main loop: each warp's accumulators acc[group][A tile][4] (16 columns a group) go to shared memory,
// red[warp][row of A][RED_STRIDE], for emit_gemv_column_sums; groups: their count, a name of the source.
void emit_gemv_warp_partials(std::ostringstream& os, const char* groups);
// The kernel's end: each thread sums the warps' partial sums of one element of C (in shared memory, red[warp]
// [row of A][RED_STRIDE]) in warp order and stores it through the epilogue, consecutive threads on consecutive
// columns. With K split over CTAs (plan.gemv_ctas_k), the CTAs' sums meet in the workspace first.
void emit_gemv_column_sums(std::ostringstream& os, const plan::CudaGemmPlan& plan, const char* columns, bool tail_n);
// The launch shape: ctas_k CTAs per `columns` columns of C and per batch (y and z past 65535 batches).
void set_decode_launch(GeneratedKernel& out, const Problem& p, int64_t columns, int threads, int ctas_k);

// The same for a 16-bit B stored K x N (plan.gemv_n_major, sm80_gemv_nn.cpp): each CTA streams the k-rows of
// 64 columns of B, ldmatrix.trans turns them into the mma's fragments.
void emit_sm80_gemv_n_major(std::ostringstream& os, const Problem& p, const plan::CudaGemmPlan& plan,
                            const std::string& name, GeneratedKernel& out);

}  // namespace jitmm::cuda
