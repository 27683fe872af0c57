// The x86 low-precision GEMM kernel: the generated microkernels (AMX or AVX-512/AVX2, per the plan's step)
// plus the driver that runs them: batches, thread chunks, N and K blocks, B packed once per block (with its
// column sums for the int8 compensation), A packed per row tile when the kernel cannot read it in place,
// the K-block accumulator strip, and the AMX tile configuration per task.
#pragma once

#include "core/artifact.hpp"
#include "core/kernel.hpp"
#include "core/parallel.hpp"
#include "core/problem.hpp"
#include "plan/x86_lowp_plan.hpp"
#include "x86/exec_memory.hpp"
#include "x86/gemm_amx_whole_generator.hpp"
#include "x86/gemm_lowp_epilogue.hpp"

#include <memory>

namespace jitmm::x86 {

// Generates the microkernels the problem needs: code bytes plus, in ints, the entry offsets per (row tail,
// column tail, K phase) slot (-1 where the shape never reaches it), then the AMX configuration stubs per
// slot and the tilerelease stub (-1 for the vector steps), then the whole-call function's entry (-1 unless the
// shape is one: then it is the only code).
Artifact compile_gemm_lowp(const Problem& p, const plan::X86LowpPlan& plan);

class GemmLowpKernel final : public Kernel {
public:
    // Loads an artifact made by compile_gemm_lowp for the same problem and plan; throws jitmm::Error.
    GemmLowpKernel(KernelMeta meta, const Problem& p, const plan::X86LowpPlan& plan,
                   std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact);
    void run(const RunArgs& args) const override;

    enum Phase { kSingle = 0, kFirst, kMiddle, kLast, kPhaseCount };
    static constexpr int kSlotCount = 2 * 2 * kPhaseCount;
    // Artifact ints: kernel entries per slot, configuration stubs per slot, the tilerelease stub, then the
    // whole-call function (gemm_amx_whole_generator.hpp; -1 where the kernel has microkernels instead).
    static constexpr int kWholeEntry = 2 * kSlotCount + 1;
    // The whole-call function's configuration stub: the configuration slot of full tiles in one K block.
    static constexpr int kWholeConfigSlot = 0;
    static constexpr size_t kArtifactInts = 2 * kSlotCount + 2;

private:
    struct Chunk {
        const uint8_t* a;
        const uint8_t* b;
        uint8_t* c;
        int64_t m0, m1, n0, n1;
        // The B the same thread reads next for the same columns (the next batch's, where each batch is one chunk),
        // whose first block the chunk's last block prefetches (LowpLayout::b_src_*); null: none.
        const uint8_t* next_b = nullptr;
    };
    // A's panels packed once per call for all tasks, as [row tile][K block]; null where each task packs its own.
    const uint8_t* pack_shared_a_panels(const RunArgs& args) const;
    const uint8_t* copy_last_rows(const uint8_t* tile, int64_t rows, int64_t k0, int64_t ld) const;
    const uint8_t* copy_a_last_step(const uint8_t* a_tile, int64_t stride, int64_t rows, int64_t k_len,
                                    uint8_t* buffer) const;
    bool tile_copied(int64_t first, int64_t rows, int64_t total, int64_t ld, int64_t k0, int64_t k_len) const;
    // A call with one block of each (thread, M, N, K block) per batch: the tiny shapes, whose time per call is
    // the driver's more than the products'. The same packing and microkernel calls as run_chunk, none of its
    // blocking decisions (made once here, in the constructor: small_). Batches [batch_begin, batch_end).
    void run_small(const RunArgs& args, float scale, int64_t batch_begin, int64_t batch_end) const;
    // A call that one generated function runs whole (amx_whole_call_fits), batch by batch over [batch_begin,
    // batch_end): B packed (unless the function packs it), then the function.
    void run_whole(const RunArgs& args, int64_t batch_begin, int64_t batch_end) const;
    void run_chunk(const Chunk& chunk, const RunArgs& args, float scale, const uint8_t* shared_a_panels) const;
    // Whether the calls over this A (its first row) pack it: the plan says so, or AMX tile rows of it in place
    // would not start cache lines.
    bool packs_a(const uint8_t* a) const;
    // AMX: the column tail panels load another tile configuration than the full panels.
    bool tail_config_differs() const;
    // LowpLayout::swap_ab: tiles over N (rows) x M (columns) with B's rows in the A tiles; chunk.n0/n1 only.
    // shared_a: op(A)^T already packed for every K block (by pack_swapped_a_shared), else the chunk packs it.
    void run_swapped_chunk(const Chunk& chunk, const RunArgs& args, float scale, const uint8_t* shared_a) const;
    // op(A)^T of batch 0 packed for all K blocks once per call, in pieces spread over the threads, into the
    // calling thread's scratch; null where each task had better pack its own.
    const uint8_t* pack_swapped_a_shared(const RunArgs& args) const;
    // LowpLayout::dot_nt: B rows read in place, A packed (K padded to 64 bytes) with its row sums; chunk.n0/n1.
    void run_dot_chunk(const Chunk& chunk, const RunArgs& args, float scale) const;
    // Its column tiles over A packed as rows `ld` bytes apart (call.comp: the row sums, or null).
    void run_dot_tiles(const Chunk& chunk, const RunArgs& args, LowpCallArgs& call, const uint8_t* a_packed,
                       int64_t ld) const;
    static int slot(bool row_tail, bool col_tail, Phase phase) {
        return ((row_tail ? 2 : 0) + (col_tail ? 1 : 0)) * kPhaseCount + phase;
    }

    Problem p_;
    plan::X86LowpPlan plan_;
    std::shared_ptr<const ParallelRunner> runner_;
    std::unique_ptr<ExecMemory> code_;
    LowpUkernel fns_[kSlotCount] = {};
    LowpStub configs_[kSlotCount] = {};  // AMX only
    LowpStub release_ = nullptr;         // AMX only
    AmxWholeFn whole_ = nullptr;         // the whole-call function, where the shape has one
    bool whole_packs_b_ = false;         // and it packs B itself (amx_whole_packs_b)
    int64_t k_blocks_ = 1;
    bool small_ = false;                 // run() takes run_small
    bool pack_vbmi_ = false;             // pack_vbmi_allowed() when the kernel was made
    int64_t overrun_bytes_ = 0;          // bytes the last K block's in-place rows read past K (AMX int8, VNNI)
    int32_t comp_factor_ = 0;            // int8: comp[j] = comp_factor * column sum of B
};

}  // namespace jitmm::x86
