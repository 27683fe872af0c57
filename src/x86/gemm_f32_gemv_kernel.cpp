#include "x86/gemm_f32_gemv_kernel.hpp"

#include "core/error.hpp"
#include "x86/thread_scratch.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace jitmm::x86 {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The calling thread's partial sums (whole vectors): a row of N values that stays in L1 while B streams past it.
float* partial_sums_scratch(size_t floats) { return thread_scratch<GemmF32GemvKernel>(floats); }

}  // namespace

Artifact compile_gemm_f32_gemv(const Problem& p, const plan::X86GemvPlan& plan) {
    (void)p;
    GeneratedGemvCode code = generate_gemm_f32_gemv(plan.layout);
    Artifact artifact;
    artifact.kind = "x86.bin";
    artifact.payload = std::move(code.bytes);
    artifact.ints = {static_cast<int64_t>(code.whole_entry), static_cast<int64_t>(code.tail_entry)};
    return artifact;
}

GemmF32GemvKernel::GemmF32GemvKernel(KernelMeta meta, const Problem& p, const plan::X86GemvPlan& plan,
                                     std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact)
    : Kernel(std::move(meta)), p_(p), plan_(plan), runner_(std::move(runner)) {
    if (artifact.ints.size() != 2)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 one-row kernel: artifact has " +
                                              std::to_string(artifact.ints.size()) + " entry slots, expected 2");
    for (int64_t offset : artifact.ints)
        if (offset < 0 || offset >= static_cast<int64_t>(artifact.payload.size()))
            fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 one-row kernel: entry offset outside the code");
    code_ = std::make_unique<ExecMemory>(artifact.payload.data(), artifact.payload.size());
    whole_ = reinterpret_cast<GemvFn>(const_cast<uint8_t*>(code_->entry(static_cast<size_t>(artifact.ints[0]))));
    tail_ = reinterpret_cast<GemvFn>(const_cast<uint8_t*>(code_->entry(static_cast<size_t>(artifact.ints[1]))));
}

void GemmF32GemvKernel::run(const RunArgs& args) const {
    const auto* a = static_cast<const float*>(args.a);
    const auto* b = static_cast<const float*>(args.b);
    auto* c = static_cast<float*>(args.c);
    const auto* bias = static_cast<const float*>(args.bias);
    const int64_t whole = p_.n / 16, vectors = ceil_div(p_.n, 16), chunks = plan_.n_chunks;
    auto task = [&](int64_t t) {
        const int64_t batch = t / chunks, part = t % chunks;
        const int64_t v0 = vectors * part / chunks, v1 = vectors * (part + 1) / chunks;
        if (v0 >= v1) return;
        const bool has_tail = v1 > whole;  // (only the last chunk reaches the N % 16 columns)
        float* acc = partial_sums_scratch(static_cast<size_t>((v1 - v0) * 16));
        const float* bias_part = p_.bias == BiasKind::per_column ? bias + v0 * 16 : bias;
        (has_tail ? tail_ : whole_)(a + batch * p_.stride_a, b + batch * p_.stride_b + v0 * 16,
                                    c + batch * p_.stride_c + v0 * 16, bias_part, acc,
                                    (has_tail ? whole : v1) - v0);
    };
    const int64_t tasks = p_.batch * chunks;
    if (plan_.threads <= 1) {
        for (int64_t t = 0; t < tasks; ++t) task(t);
    } else {
        runner_->parallel_for(tasks, task);
    }
}

}  // namespace jitmm::x86
