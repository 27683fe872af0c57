// The planner for the f32 one-row family (gemm_f32_gemv_generator.hpp): C[1, N] = a B with B stored K x N, read
// in place as far-apart row streams. Everything here but the thread split goes into the kernel key.
#pragma once

#include "core/key.hpp"
#include "core/problem.hpp"
#include "hw/cpu.hpp"
#include "x86/gemm_f32_gemv_generator.hpp"

#include <string>

namespace jitmm::plan {

struct X86GemvPlan {
    x86::GemmF32GemvLayout layout;
    int threads = 1;
    int n_chunks = 1;  // each batch's columns split into n_chunks parts of whole vectors (driver only)

    std::string describe() const;
    void append_key(KeyWriter& w) const;
};

// Whether the one-row family serves p (AVX-512, f32, M = 1, B stored K x N, work for one thread; see the
// definition for the sizes).
bool gemv_serves(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads);

X86GemvPlan plan_x86_gemm_f32_gemv(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads);

}  // namespace jitmm::plan
