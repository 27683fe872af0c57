// K-split support shared by the f32 families (broadcast tiles and dot products). When M and N give fewer
// tiles than threads, K is cut into parts; each part's tiles write alpha * (their partial sum) into a scratch
// copy of C (same leading dimension, no beta, bias or activation). The finish pass then adds the parts in
// part order (a fixed reduction order: bit-identical results for a given thread count) and applies the
// epilogue once per output:
//
//   void finish_row(const float* partial_row, const float* unused, float* c_row, const float* bias);
//
//   C[j] = act(P[j] + beta * C[j] + bias)          j < n (tail lanes masked; C read only when beta != 0)
//
// bias points at the row's bias for a per-row bias, at bias[0] for a per-column one.
#pragma once

#include "core/parallel.hpp"
#include "core/problem.hpp"
#include "hw/cpu.hpp"
#include "x86/vector_math.hpp"

#include <xbyak/xbyak.h>

#include <cstdint>
#include <functional>

namespace jitmm::x86 {

struct SplitFinishLayout {
    hw::X86Isa isa = hw::X86Isa::avx512;
    int64_t n = 0;  // row width
    float beta = 0;
    BiasKind bias = BiasKind::none;
    Activation activation = Activation::none;
};

// Rows no wider than this get a finish function (straight-line code, one block per vector).
constexpr int64_t kSplitFinishMaxWidth = 2048;

// Emits finish_row into g (constants go to pool, which the caller emits at the end); returns its offset.
// Uses vector registers 0..4 and, for AVX2 column tails, an inline mask table after the function.
size_t emit_split_finish(Xbyak::CodeGenerator& g, ConstantPool& pool, VectorMath& math, const SplitFinishLayout& f);

// p0[j] += p_s[j] for s = 1..parts-1 in that order, j < n, where p_s = p0 + s * part_stride.
void sum_partials(float* p0, int64_t part_stride, int parts, int64_t n);

using SplitFinishFn = void (*)(const float* partial_row, const float* unused, float* c_row, const float* bias);

// One K-split run, shared by the f32 families: batch x parts x n_chunks tasks, each computing one K part of
// one batch over one column chunk (all of its rows, so that a packed operand is reused across the row tiles)
// into its part's scratch slab through `part` (batch, part, chunk, slab; slabs are m x ldc, the chunks of a
// part write disjoint columns of it). The reduction: when parts x m x n is small
// (<= kSplitFusedFinishMax floats), the task that completes a batch's last part adds that batch's parts and
// finishes it (one fan-out per run, no second join); larger ones run after all parts as a second parallel
// pass over row groups. Either way the parts are added in part order: bit-identical for a thread count.
constexpr int64_t kSplitFusedFinishMax = 16384;

// Overrides that limit for the runs that follow (tests: 0 forces the separate pass); returns the old value.
int64_t set_split_fused_finish_max(int64_t floats);

struct SplitRun {
    int64_t batch = 1, m = 0, n = 0, ldc = 0, stride_c = 0;
    int parts = 2;
    int n_chunks = 1;         // column chunks of each part (tasks of their own)
    int threads = 1;          // row groups of the separate finish pass
    BiasKind bias_kind = BiasKind::none;
    const float* bias = nullptr;
    float* c = nullptr;
    float* scratch = nullptr;  // batch * parts * m * ldc floats
    SplitFinishFn finish = nullptr;
};

void run_k_split(const ParallelRunner& runner, const SplitRun& r,
                 const std::function<void(int64_t batch, int part, int chunk, float* slab)>& part);

}  // namespace jitmm::x86
