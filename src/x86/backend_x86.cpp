#include "x86/backend_x86.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "hw/cpu.hpp"
#include "plan/x86_gemm_plan.hpp"
#include "x86/gemm_f32_kernel.hpp"

#include <string>

namespace jitmm::x86 {

namespace {

// Bump when the f32 generator's output changes for the same recipe (invalidates cached binaries).
constexpr int kGemmF32GeneratorVersion = 1;

class GemmF32Plan final : public Plan {
public:
    GemmF32Plan(const Problem& p, plan::X86GemmPlan recipe, std::shared_ptr<const ParallelRunner> runner)
        : p_(p), recipe_(std::move(recipe)), runner_(std::move(runner)) {}

    const char* generator() const override {
        return recipe_.layout.isa >= hw::X86Isa::avx512 ? "x86_f32_avx512" : "x86_f32_avx2";
    }
    int generator_version() const override { return kGemmF32GeneratorVersion; }
    std::string describe() const override { return recipe_.describe(); }
    void append_key(KeyWriter& w) const override { recipe_.append_key(w); }

    Artifact compile() const override { return compile_gemm_f32(p_, recipe_); }
    std::shared_ptr<Kernel> load(const Artifact& artifact, KernelMeta meta) const override {
        return std::make_shared<GemmF32Kernel>(std::move(meta), p_, recipe_, runner_, artifact);
    }

private:
    Problem p_;
    plan::X86GemmPlan recipe_;
    std::shared_ptr<const ParallelRunner> runner_;
};

class X86Backend final : public Backend {
public:
    explicit X86Backend(const EngineOptions& o)
        : device_("cpu"),
          runner_(std::make_shared<ParallelRunner>(o.num_threads, o.parallel_for, o.parallel_for_ctx)) {
        const hw::CpuInfo& cpu = hw::cpu_info();
        isa_ = std::min(cpu.best_isa, o.max_isa);
        // The fingerprint names what changes generated code: the tier and the cache sizes the blocking uses.
        fingerprint_ = std::string("x86 isa=") + hw::isa_name(isa_) + " l1=" + std::to_string(cpu.l1d_bytes) +
                       " l2=" + std::to_string(cpu.l2_bytes) + " l3=" + std::to_string(cpu.l3_bytes);
    }

    const std::string& device() const override { return device_; }
    const std::string& fingerprint() const override { return fingerprint_; }

    std::unique_ptr<Plan> plan(const Problem& p) const override {
        const bool all_f32 = p.a_type == JITMM_DTYPE_F32 && p.b_type == JITMM_DTYPE_F32 &&
                             p.c_type == JITMM_DTYPE_F32 && (p.bias == BiasKind::none || p.bias_type == JITMM_DTYPE_F32);
        if (!all_f32)
            fail(JITMM_STATUS_UNSUPPORTED, std::string("cpu: no kernel for a_type=") + dtype_name_or_null(p.a_type) +
                                               " b_type=" + dtype_name_or_null(p.b_type) + " c_type=" +
                                               dtype_name_or_null(p.c_type) +
                                               (p.bias != BiasKind::none
                                                    ? std::string(" bias_type=") + dtype_name_or_null(p.bias_type)
                                                    : std::string()) +
                                               " (this build's x86 generators handle f32 only)");
        if (isa_ < hw::X86Isa::avx2)
            fail(JITMM_STATUS_UNSUPPORTED, "cpu: this CPU has no AVX2+FMA (or the cap is below avx2); jitmm needs at "
                                           "least the avx2 tier");
        return std::make_unique<GemmF32Plan>(
            p, plan::plan_x86_gemm_f32(p, hw::cpu_info(), isa_, runner_->num_threads()), runner_);
    }

    std::string describe(jitmm_report_format format) const override {
        const hw::CpuInfo& cpu = hw::cpu_info();
        if (format == JITMM_REPORT_JSON)
            return std::string("{\"device\": \"cpu\", \"isa\": \"") + hw::isa_name(isa_) + "\", \"threads\": " +
                   std::to_string(runner_->num_threads()) + ", \"probe\": " + hw::cpu_report_json(cpu) + "}";
        return std::string("device: cpu\nisa (after cap): ") + hw::isa_name(isa_) +
               "\nthreads: " + std::to_string(runner_->num_threads()) + "\n" + hw::cpu_report_text(cpu);
    }

private:
    std::string device_;
    std::string fingerprint_;
    hw::X86Isa isa_ = hw::X86Isa::none;
    std::shared_ptr<ParallelRunner> runner_;
};

}  // namespace

std::unique_ptr<Backend> make_x86_backend(const EngineOptions& options) {
    return std::make_unique<X86Backend>(options);
}

}  // namespace jitmm::x86
