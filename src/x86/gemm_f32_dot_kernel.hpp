// The x86 f32 dot-product kernel: generated dot microkernels plus the driver that walks the tiles
// (batches, thread chunks over N, row and column tails). No packing: B^T rows are read in place, and so are A's
// rows unless A is stored K x M (then op(A) is first copied into rows, per batch task or once per call).
#pragma once

#include "core/artifact.hpp"
#include "core/kernel.hpp"
#include "core/parallel.hpp"
#include "core/problem.hpp"
#include "plan/x86_dot_plan.hpp"
#include "x86/exec_memory.hpp"

#include <memory>

namespace jitmm::x86 {

// Code bytes plus, in ints, the entry offset per (row tail, column tail) slot, then per (row tail, column
// tail, last part) K-split part slot, then the split finish; -1 where unused.
Artifact compile_gemm_f32_dot(const Problem& p, const plan::X86DotPlan& plan);

class GemmF32DotKernel final : public Kernel {
public:
    GemmF32DotKernel(KernelMeta meta, const Problem& p, const plan::X86DotPlan& plan,
                     std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact);
    void run(const RunArgs& args) const override;

private:
    using DotFn = void (*)(const float* a, const float* bt, float* c, const float* bias);
    using DotPartFn = void (*)(const float* a, const float* bt, float* c, const float* bias, int64_t iterations);
    // A's rows as the kernels read them: a as given, or the rows copied from an A stored K x M.
    struct ARows {
        const float* a;
        int64_t stride;  // between batches
    };
    // B's rows (Bt) as the kernels read them: b as given (stored N x K), or copied from a B stored K x N.
    struct BRows {
        const float* b;
        int64_t stride;  // between batches
    };
    bool copies_a_per_task() const;  // else once per call, in a_rows
    bool avx512() const { return plan_.layout.isa >= hw::X86Isa::avx512; }
    ARows a_rows(const float* a) const;
    BRows b_rows(const float* b) const;
    void run_chunk(const float* a, const float* bt, float* c, const float* bias, int64_t m0, int64_t m1, int64_t n0,
                   int64_t n1) const;
    void run_split(const ARows& a, const BRows& b, float* c, const float* bias) const;

    Problem p_;
    plan::X86DotPlan plan_;
    std::shared_ptr<const ParallelRunner> runner_;
    std::unique_ptr<ExecMemory> code_;
    DotFn fns_[2][2] = {};
    DotPartFn parts_[2][2][2] = {};  // [row tail][column tail][last part]
    DotFn finish_ = nullptr;
};

}  // namespace jitmm::x86
