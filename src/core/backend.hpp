// Backend: what the engine needs from a device family (x86 CPU, CUDA GPU). Everything above generate() is
// backend-neutral: the engine validates, plans through the backend, builds the key, asks the cache.
#pragma once

#include "core/artifact.hpp"
#include "core/cache.hpp"
#include "core/key.hpp"
#include "core/problem.hpp"

#include <jitmm/jitmm.h>

#include <memory>
#include <string>
#include <vector>

namespace jitmm {

// A decided recipe for one problem: it names itself into the key, generates its artifact (compile) and turns
// an artifact, fresh or from the disk cache, into a runnable kernel (load).
class Plan {
public:
    virtual ~Plan() = default;
    virtual const char* generator() const = 0;   // "x86_f32_avx512"
    virtual int generator_version() const = 0;   // bumped whenever the generator's output changes
    virtual std::string describe() const = 0;
    virtual void append_key(KeyWriter& w) const = 0;
    virtual Artifact compile() const = 0;                             // throws jitmm::Error
    virtual std::shared_ptr<Kernel> load(const Artifact& artifact, KernelMeta meta) const = 0;  // throws jitmm::Error
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual const std::string& device() const = 0;       // "cpu", "cuda:0"
    // Names everything about the target that changes generated code (ISA tier, cache sizes, arch, ...).
    virtual const std::string& fingerprint() const = 0;
    // Throws jitmm::Error(JITMM_STATUS_UNSUPPORTED, ...) for valid problems it has no kernel for.
    virtual std::unique_ptr<Plan> plan(const Problem& p) const = 0;
    virtual std::string describe(jitmm_report_format format) const = 0;

    // Tuning (jitmm_tune). The recipe choices worth timing for p (none: nothing to tune), a plan that follows
    // one of them ("" or a choice that no longer applies: the planner's own), and the median time of
    // kernel.run(args) over `runs` runs in microseconds, measured the way the device runs kernels.
    virtual std::vector<std::string> tune_candidates(const Problem&) const { return {}; }
    virtual std::unique_ptr<Plan> plan_with_choice(const Problem& p, const std::string&) const { return plan(p); }
    virtual double time_runs(const Kernel& kernel, const RunArgs& args, int runs) const;
};

}  // namespace jitmm
