#include "x86/gemm_f32_dot_kernel.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <string>

namespace jitmm::x86 {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

Artifact compile_gemm_f32_dot(const Problem& p, const plan::X86DotPlan& plan) {
    const int mr = plan.layout.mr, nj = plan.layout.nj;
    const int row_kinds[2] = {mr, static_cast<int>(p.m % mr)};
    const int col_kinds[2] = {nj, static_cast<int>(p.n % nj)};
    std::vector<DotVariant> variants;
    std::vector<int> slots;
    for (int rt = 0; rt < 2; ++rt) {
        if (row_kinds[rt] == 0 || (rt == 0 && p.m < mr)) continue;
        for (int ct = 0; ct < 2; ++ct) {
            if (col_kinds[ct] == 0 || (ct == 0 && p.n < nj)) continue;
            variants.push_back(DotVariant{row_kinds[rt], col_kinds[ct]});
            slots.push_back(rt * 2 + ct);
        }
    }
    GeneratedDotCode code = generate_gemm_f32_dot(plan.layout, variants);
    Artifact artifact;
    artifact.kind = "x86.bin";
    artifact.payload = std::move(code.bytes);
    artifact.ints.assign(4, -1);
    for (size_t i = 0; i < slots.size(); ++i) artifact.ints[slots[i]] = static_cast<int64_t>(code.entries[i]);
    return artifact;
}

GemmF32DotKernel::GemmF32DotKernel(KernelMeta meta, const Problem& p, const plan::X86DotPlan& plan,
                                   std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact)
    : Kernel(std::move(meta)), p_(p), plan_(plan), runner_(std::move(runner)) {
    if (artifact.ints.size() != 4)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 dot kernel: artifact has " +
                                              std::to_string(artifact.ints.size()) + " entry slots, expected 4");
    code_ = std::make_unique<ExecMemory>(artifact.payload.data(), artifact.payload.size());
    for (int slot = 0; slot < 4; ++slot) {
        const int64_t offset = artifact.ints[slot];
        if (offset < 0) continue;
        if (offset >= static_cast<int64_t>(artifact.payload.size()))
            fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 dot kernel: entry offset outside the code");
        fns_[slot / 2][slot % 2] = reinterpret_cast<DotFn>(const_cast<uint8_t*>(code_->entry(static_cast<size_t>(offset))));
    }
}

void GemmF32DotKernel::run(const RunArgs& args) const {
    const auto* a = static_cast<const float*>(args.a);
    const auto* bt = static_cast<const float*>(args.b);
    auto* c = static_cast<float*>(args.c);
    const auto* bias = static_cast<const float*>(args.bias);
    const int64_t nj = plan_.layout.nj;
    const int64_t tasks = p_.batch * plan_.n_chunks;
    auto task = [&](int64_t t) {
        const int64_t batch = t / plan_.n_chunks, part = t % plan_.n_chunks;
        const int64_t tiles = ceil_div(p_.n, nj);
        const int64_t n0 = std::min(p_.n, tiles * part / plan_.n_chunks * nj);
        const int64_t n1 = std::min(p_.n, tiles * (part + 1) / plan_.n_chunks * nj);
        if (n0 < n1) run_chunk(a + batch * p_.stride_a, bt + batch * p_.stride_b, c + batch * p_.stride_c, bias, n0, n1);
    };
    if (plan_.threads <= 1) {
        for (int64_t t = 0; t < tasks; ++t) task(t);
    } else {
        runner_->parallel_for(tasks, task);
    }
}

// Column tiles outermost: a tile's nj rows of B stream once while the few rows of A stay in cache.
void GemmF32DotKernel::run_chunk(const float* a, const float* bt, float* c, const float* bias, int64_t n0,
                                 int64_t n1) const {
    const int64_t mr = plan_.layout.mr, nj = plan_.layout.nj;
    for (int64_t j = n0; j < n1; j += nj) {
        const bool col_tail = j + nj > p_.n;
        for (int64_t i = 0; i < p_.m; i += mr) {
            const float* bias_tile =
                p_.bias == BiasKind::per_column ? bias + j : p_.bias == BiasKind::per_row ? bias + i : nullptr;
            fns_[i + mr > p_.m][col_tail](a + i * p_.lda, bt + j * p_.ldb, c + i * p_.ldc + j, bias_tile);
        }
    }
}

}  // namespace jitmm::x86
