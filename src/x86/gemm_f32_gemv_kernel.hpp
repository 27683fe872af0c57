// The x86 f32 one-row kernel: the generated GEMV (gemm_f32_gemv_generator.hpp) and the driver that gives each
// task a batch and a run of whole column vectors, with its partial sums in the running thread's scratch.
#pragma once

#include "core/artifact.hpp"
#include "core/kernel.hpp"
#include "core/parallel.hpp"
#include "core/problem.hpp"
#include "plan/x86_gemv_plan.hpp"
#include "x86/exec_memory.hpp"

#include <memory>

namespace jitmm::x86 {

// Code bytes plus, in ints, the entry offsets of the whole-vector and the tail variants.
Artifact compile_gemm_f32_gemv(const Problem& p, const plan::X86GemvPlan& plan);

class GemmF32GemvKernel final : public Kernel {
public:
    GemmF32GemvKernel(KernelMeta meta, const Problem& p, const plan::X86GemvPlan& plan,
                      std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact);
    void run(const RunArgs& args) const override;

private:
    using GemvFn = void (*)(const float* a, const float* b, float* c, const float* bias, float* acc, int64_t vectors);
    Problem p_;
    plan::X86GemvPlan plan_;
    std::shared_ptr<const ParallelRunner> runner_;
    std::unique_ptr<ExecMemory> code_;
    GemvFn whole_ = nullptr, tail_ = nullptr;
};

}  // namespace jitmm::x86
