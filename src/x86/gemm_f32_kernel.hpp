// The x86 f32 GEMM kernel: generated microkernels plus the driver that runs them (batches, thread chunks,
// cache blocks, B packing, tails, K-block phases).
#pragma once

#include "core/artifact.hpp"
#include "core/kernel.hpp"
#include "core/parallel.hpp"
#include "core/problem.hpp"
#include "plan/x86_gemm_plan.hpp"
#include "x86/exec_memory.hpp"
#include "x86/gemm_f32_generator.hpp"

#include <memory>

namespace jitmm::x86 {

// Generates the microkernels the problem needs: code bytes plus, in ints, one entry offset per
// (row tail, column tail, K phase) slot, -1 where the shape never reaches that slot, and last the
// single-call function's offset (-1 unless the plan is single_call).
Artifact compile_gemm_f32(const Problem& p, const plan::X86GemmPlan& plan);

class GemmF32Kernel final : public Kernel {
public:
    // Loads an artifact made by compile_gemm_f32 for the same problem and plan; throws jitmm::Error.
    GemmF32Kernel(KernelMeta meta, const Problem& p, const plan::X86GemmPlan& plan,
                  std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact);
    void run(const RunArgs& args) const override;

    enum Phase { kSingle = 0, kFirst, kMiddle, kLast, kPhaseCount };
    static constexpr int kSlotCount = 2 * 2 * kPhaseCount;

private:
    void run_chunk(const float* a, const float* b, float* c, const float* bias, int64_t m0, int64_t m1,
                   int64_t n0, int64_t n1) const;
    UkernelFn ukernel(bool row_tail, bool col_tail, Phase phase) const {
        return fns_[row_tail][col_tail][phase];
    }

    Problem p_;
    plan::X86GemmPlan plan_;
    std::shared_ptr<const ParallelRunner> runner_;
    std::unique_ptr<ExecMemory> code_;
    UkernelFn fns_[2][2][kPhaseCount] = {};
    UkernelFn whole_ = nullptr;  // the single-call function of a small problem, when the plan asked for one
    int64_t k_blocks_ = 1;
};

}  // namespace jitmm::x86
