#include "x86/gemm_f32_kgroup_kernel.hpp"

#include "core/error.hpp"
#include "x86/thread_scratch.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace jitmm::x86 {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The calling thread's group vectors (each one line).
float* group_vectors_scratch(size_t floats) { return thread_scratch<GemmF32KGroupKernel>(floats); }

}  // namespace

void pack_kgroup_b(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, int g, float* bp) {
    const int64_t vectors = kgroup_b_vectors(k, g);
    std::fill(bp, bp + vectors * 16, 0.0f);
    for (int64_t c = 0; c < n; ++c) {
        // Column c of op(B): a stored row of a transposed B, else every ldb-th value.
        const float* column = trans_b ? b + c * ldb : b + c;
        const int64_t step = trans_b ? 1 : ldb;
        for (int64_t j = 0, kk = 0; kk < k; ++j)
            for (int q = 0; q < g && kk < k; ++q, ++kk) bp[j * 16 + c * g + q] = column[kk * step];
    }
}

Artifact compile_gemm_f32_kgroup(const Problem& p, const plan::X86KGroupPlan& plan) {
    const int mr = plan.layout.mr;
    const int tail = static_cast<int>(p.m % mr);
    std::vector<int> rows;
    if (p.m >= mr) rows.push_back(mr);
    if (tail != 0) rows.push_back(tail);
    GeneratedKGroupCode code = generate_gemm_f32_kgroup(plan.layout, rows);
    Artifact artifact;
    artifact.kind = "x86.bin";
    artifact.payload = std::move(code.bytes);
    artifact.ints.assign(2, -1);
    size_t e = 0;
    if (p.m >= mr) artifact.ints[0] = static_cast<int64_t>(code.entries[e++]);
    if (tail != 0) artifact.ints[1] = static_cast<int64_t>(code.entries[e++]);
    return artifact;
}

GemmF32KGroupKernel::GemmF32KGroupKernel(KernelMeta meta, const Problem& p, const plan::X86KGroupPlan& plan,
                                         std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact)
    : Kernel(std::move(meta)), p_(p), plan_(plan), runner_(std::move(runner)) {
    if (artifact.ints.size() != 2)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 k-group kernel: artifact has " +
                                              std::to_string(artifact.ints.size()) + " entry slots, expected 2");
    code_ = std::make_unique<ExecMemory>(artifact.payload.data(), artifact.payload.size());
    for (int slot = 0; slot < 2; ++slot) {
        const int64_t offset = artifact.ints[slot];
        if (offset < 0) continue;
        if (offset >= static_cast<int64_t>(artifact.payload.size()))
            fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 k-group kernel: entry offset outside the code");
        fns_[slot] = reinterpret_cast<KGroupFn>(const_cast<uint8_t*>(code_->entry(static_cast<size_t>(offset))));
    }
}

void GemmF32KGroupKernel::run(const RunArgs& args) const {
    const auto* a = static_cast<const float*>(args.a);
    const auto* b = static_cast<const float*>(args.b);
    auto* c = static_cast<float*>(args.c);
    const auto* bias = static_cast<const float*>(args.bias);
    const auto& L = plan_.layout;
    // B's group vectors, packed by the calling thread before any task reads them (a shared B once).
    const int64_t vector_floats = kgroup_b_vectors(p_.k, L.g) * 16;
    const int64_t copies = p_.stride_b == 0 ? 1 : p_.batch;
    float* bp = group_vectors_scratch(static_cast<size_t>(copies * vector_floats));
    for (int64_t batch = 0; batch < copies; ++batch)
        pack_kgroup_b(b + batch * p_.stride_b, p_.ldb, p_.trans_b, p_.k, p_.n, L.g, bp + batch * vector_floats);
    const int64_t bp_stride = copies == 1 ? 0 : vector_floats;
    const int64_t mr = L.mr, row_tiles = ceil_div(p_.m, mr), chunks = plan_.m_chunks;
    auto task = [&](int64_t t) {
        const int64_t batch = t / chunks, part = t % chunks;
        const int64_t m0 = std::min(p_.m, row_tiles * part / chunks * mr);
        const int64_t m1 = std::min(p_.m, row_tiles * (part + 1) / chunks * mr);
        const float* ab = a + batch * p_.stride_a;
        float* cb = c + batch * p_.stride_c;
        const float* bpb = bp + batch * bp_stride;
        for (int64_t i = m0; i < m1; i += mr) {
            const float* bias_tile = p_.bias == BiasKind::per_row ? bias + i : bias;
            float* c_tile = L.c_transposed ? cb + i : cb + i * p_.ldc;  // (C^T: the tile's rows are C's columns)
            fns_[i + mr > p_.m ? 1 : 0](ab + i * p_.lda, bpb, c_tile, bias_tile);
        }
    };
    const int64_t tasks = p_.batch * chunks;
    if (plan_.threads <= 1) {
        for (int64_t t = 0; t < tasks; ++t) task(t);
    } else {
        runner_->parallel_for(tasks, task);
    }
}

}  // namespace jitmm::x86
