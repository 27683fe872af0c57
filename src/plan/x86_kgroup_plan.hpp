// The planner for the f32 k-group family (gemm_f32_kgroup_generator.hpp): many rows of an A stored M x K over 2
// to 8 columns and a short K, where one FMA takes g consecutive A values of a row into 16 / g column slots.
// Everything here but the thread split goes into the kernel key.
#pragma once

#include "core/key.hpp"
#include "core/problem.hpp"
#include "hw/cpu.hpp"
#include "x86/gemm_f32_kgroup_generator.hpp"

#include <string>

namespace jitmm::plan {

struct X86KGroupPlan {
    x86::GemmF32KGroupLayout layout;
    int threads = 1;
    int m_chunks = 1;  // each batch's rows split into m_chunks parts of whole tiles (driver only)

    std::string describe() const;
    void append_key(KeyWriter& w) const;
};

// Whether the k-group family serves p (AVX-512, an A stored M x K, many rows, few columns, a short K).
bool kgroup_serves(const Problem& p, hw::X86Isa isa);

X86KGroupPlan plan_x86_gemm_f32_kgroup(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads);

// Few rows of A (2 to 8) over many columns of a transposed B (stored N x K) and a short K: C^T = B A^T is many
// rows (B's, read as stored) over few columns, which the k-group kernel computes with its rows stored as C's
// columns (layout.c_transposed), A and B exchanged: plan::transposed_product_problem (C's own ldc).
bool kgroup_serves_swapped(const Problem& p, hw::X86Isa isa);

}  // namespace jitmm::plan
