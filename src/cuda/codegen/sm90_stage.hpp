// The Hopper kernel's staging copies, as CUDA C++ source for the same module: an operand wgmma or TMA cannot
// read in place (tf32/s8/fp8 stored M/N-major, rows or batch strides off 16 bytes, a broadcast batch) is
// copied K-major and packed into the workspace first, and the GEMM reads the copy. The emitted kernel expects
// the GEMM source's prelude (u16, u32, i64).
#pragma once

#include "core/problem.hpp"
#include "plan/cuda_sm90_plan.hpp"

#include <sstream>

namespace jitmm::cuda {

// Appends "jitmm_sm90_stage_a" (a) or "jitmm_sm90_stage_b": parameters (const T* src, T* dst), one 32 x 32
// block of (rows, K) per CTA of 256 threads, grid (ceil(rows / 32), ceil(K / 32), min(batches, 65535)) where a
// shared operand (batch stride 0) has one batch.
void emit_sm90_stage_kernel(std::ostringstream& os, const Problem& p, const plan::Sm90GemmPlan& plan, bool a);

}  // namespace jitmm::cuda
