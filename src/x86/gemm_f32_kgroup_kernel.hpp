// The x86 f32 k-group kernel: the generated k-group microkernels (gemm_f32_kgroup_generator.hpp) and the driver
// that packs B into its group vectors (once per call, per batch that has its own B) and walks the row tiles over
// batches and thread chunks of rows.
#pragma once

#include "core/artifact.hpp"
#include "core/kernel.hpp"
#include "core/parallel.hpp"
#include "core/problem.hpp"
#include "plan/x86_kgroup_plan.hpp"
#include "x86/exec_memory.hpp"

#include <memory>

namespace jitmm::x86 {

// bp[j * 16 + g c + q] = op(B)[j g + q][c] for column slots c < n and K values j g + q < k, else 0: the group
// vectors the k-group kernels multiply the broadcast A values by.
void pack_kgroup_b(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, int g, float* bp);

// Code bytes plus, in ints, the entry offsets of the whole-tile and the row-tail functions (-1 where unused).
Artifact compile_gemm_f32_kgroup(const Problem& p, const plan::X86KGroupPlan& plan);

class GemmF32KGroupKernel final : public Kernel {
public:
    GemmF32KGroupKernel(KernelMeta meta, const Problem& p, const plan::X86KGroupPlan& plan,
                        std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact);
    void run(const RunArgs& args) const override;

private:
    using KGroupFn = void (*)(const float* a, const float* bp, float* c, const float* bias);
    Problem p_;
    plan::X86KGroupPlan plan_;
    std::shared_ptr<const ParallelRunner> runner_;
    std::unique_ptr<ExecMemory> code_;
    KGroupFn fns_[2] = {};  // [row tail]
};

}  // namespace jitmm::x86
