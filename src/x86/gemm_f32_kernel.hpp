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
#include "x86/shared_panels.hpp"

#include <memory>

namespace jitmm::x86 {

// Generates the microkernels the problem needs: code bytes plus, in ints, one entry offset per
// (row tail, column tail, K phase) slot, -1 where the shape never reaches that slot, then the
// single-call function's offset (-1 unless the plan is single_call), the K-split finish function's
// (-1 unless the plan is k_split_ready) and the row sweep's (-1 unless the plan is row_sweep).
Artifact compile_gemm_f32(const Problem& p, const plan::X86GemmPlan& plan);

class GemmF32Kernel final : public Kernel {
public:
    // Loads an artifact made by compile_gemm_f32 for the same problem and plan; throws jitmm::Error.
    GemmF32Kernel(KernelMeta meta, const Problem& p, const plan::X86GemmPlan& plan,
                  std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact);
    void run(const RunArgs& args) const override;

    // K phases of a microkernel call. Whole-K runs use the first four; a K-split part runs kPartFirst or
    // kPartFirstTail (its first block: a full kc one, or the short last block of K) and then kMiddle or
    // kPartLast (the short last block of K) blocks, into scratch; the finish pass applies beta and the epilogue.
    enum Phase { kSingle = 0, kFirst, kMiddle, kLast, kPartFirst, kPartFirstTail, kPartLast, kPhaseCount };
    // Row kinds of the entry slots: full rows, the row tail, and full rows packing B as they go
    // (plan layout.b_pack_fused: the block's first row tile).
    enum RowKind { kFullRows = 0, kTailRows, kPackingRows, kRowKindCount };
    static constexpr int kSlotCount = kRowKindCount * 2 * kPhaseCount;
    // The artifact's entries after the slots: the single call, the K-split finish and the row sweep.
    static constexpr int kWholeEntry = kSlotCount, kFinishEntry = kSlotCount + 1, kSweepEntry = kSlotCount + 2;
    static constexpr int kEntryCount = kSlotCount + 3;

private:
    // Where a chunk's packed A row tiles come from: its own panel (panels null), or the call's shared
    // panels (plan_.share_a), panel (first + K block * row tiles + row tile), the chunk's row tiles walked from
    // its `first_tile`-th, wrapping around, so that the tasks sharing the rows start packing different ones.
    struct ChunkA {
        const SharedPanels* panels = nullptr;
        int64_t first = 0;
        int64_t first_tile = 0;
    };
    // Tiles [m0, m1) x [n0, n1) over the K blocks [kb0, kb1) (split: a K part, written to scratch C).
    void run_chunk(const float* a, const ChunkA& shared_a, const float* b, float* c, const float* bias, int64_t m0,
                   int64_t m1, int64_t n0, int64_t n1, int64_t kb0, int64_t kb1, bool split) const;
    // Floats of one packed A row tile: [mr][a_panel_ld] (A as stored) or [kc][mr] (trans_a), whole lines.
    int64_t a_tile_floats() const;
    void run_split(const float* a, const float* b, float* c, const float* bias) const;
    void run_sweep(const float* a, const float* b, float* c, const float* bias) const;
    // A batch's B as the single call and the row sweep read it: all of it packed into this thread's panels (one
    // block of [k][nr] panels) where the plan packs B, else as stored.
    const float* whole_b(const float* b_batch) const;
    UkernelFn ukernel(RowKind rows, bool col_tail, Phase phase) const { return fns_[rows][col_tail][phase]; }

    Problem p_;
    plan::X86GemmPlan plan_;
    std::shared_ptr<const ParallelRunner> runner_;
    std::unique_ptr<ExecMemory> code_;
    UkernelFn fns_[kRowKindCount][2][kPhaseCount] = {};
    UkernelFn whole_ = nullptr;  // the single-call function of a small problem, when the plan asked for one
    SplitFinishFn finish_ = nullptr; // the K-split finish (one row of C), when the plan is k_split_ready
    RowSweepFn sweep_ = nullptr;     // the row sweep of a short K, when the plan is row_sweep
    int64_t k_blocks_ = 1;
};

}  // namespace jitmm::x86
