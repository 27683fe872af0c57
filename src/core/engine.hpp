// Engine: one device's backend, its kernel cache and its parallel runner.
#pragma once

#include "core/backend.hpp"
#include "core/cache.hpp"
#include "core/disk_cache.hpp"
#include "core/parallel.hpp"
#include "core/problem_memo.hpp"
#include "core/recorder.hpp"
#include "core/tune_store.hpp"
#include "hw/cpu.hpp"

#include <jitmm/jitmm.h>

#include <memory>
#include <string>

namespace jitmm {

struct EngineOptions {
    std::string device = "cpu";   // "cpu" or "cuda:N"
    int cuda_ordinal = -1;        // N for "cuda:N"
    std::string cache_dir;        // "" = no disk cache; may list several folders separated by ':'
    uint64_t cache_max_bytes = kDefaultCacheMaxBytes;  // JITMM_CACHE_MAX_MB (disk cache)
    std::string record_path;      // JITMM_RECORD: "" = do not record generated kernels
    hw::X86Isa max_isa = hw::X86Isa::amx;  // cap (the probe's best tier wins when lower)
    int num_threads = 1;
    size_t kernel_cache_capacity = 4096;
    jitmm_parallel_for_fn parallel_for = nullptr;
    void* parallel_for_ctx = nullptr;
};

// Resolves a config (NULL allowed) plus the environment into options; throws jitmm::Error naming the
// offending field or variable.
EngineOptions resolve_engine_options(const jitmm_engine_config* config);

class Engine {
public:
    Engine(const EngineOptions& options, std::unique_ptr<Backend> backend);

    // Lookup-or-generate. log_hits: also print cache hits under JITMM_VERBOSE (kernel_create does;
    // jitmm_matmul, called per step, logs only what it generates).
    KernelPtr get_kernel(const Problem& p, bool log_hits);
    const Backend& backend() const { return *backend_; }
    const EngineOptions& options() const { return options_; }
    const KernelCache& cache() const { return cache_; }
    // Disk cache (null when disabled, refused or unusable; disk_cache_status() says why).
    DiskCache* disk_cache() const { return disk_.get(); }
    const std::string& disk_cache_status() const { return disk_status_; }
    // jitmm-warmup: makes sure p's kernel is in the disk cache without loading it; true when it already was.
    // Throws jitmm::Error (also when there is no writable disk cache).
    bool prebuild(const Problem& p);

    // jitmm_tune: times the backend's candidate recipes for p on args (C is overwritten), records the fastest
    // in the tuning store (beside the disk cache, else in memory) and makes later requests for p use it.
    // Returns the winning choice ("" when the backend has nothing to tune); *log gets one line per candidate.
    std::string tune(const Problem& p, const RunArgs& args, std::string* log);
    const TuneStore& tune_store() const { return *tune_; }

private:
    KernelKey make_key(const Plan& plan, const Problem& p) const;
    KernelPtr generate(const Problem& p, const Plan& plan, const KernelKey& key) const;
    std::unique_ptr<Plan> plan_for(const Problem& p) const;  // the tuned choice when there is one
    KernelPtr kernel_for(const Problem& p, const Plan& plan, bool* hit);

    EngineOptions options_;
    std::unique_ptr<Backend> backend_;
    KernelCache cache_;
    std::unique_ptr<DiskCache> disk_;    // memory -> disk -> generate (disk_cache.hpp)
    std::string disk_status_;
    std::shared_ptr<Recorder> recorder_; // JITMM_RECORD
    ProblemMemo memo_;                   // problem -> kernel, in front of plan + key + cache
    std::unique_ptr<TuneStore> tune_;    // jitmm_tune's winners for this backend's target
};

}  // namespace jitmm
