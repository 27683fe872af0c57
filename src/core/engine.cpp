#include "core/engine.hpp"

#include "core/dump.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace jitmm {

namespace {

const char* env(const char* name) { return std::getenv(name); }

int parse_thread_count(const char* text, const char* what) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < 1 || v > 4096)
        fail(JITMM_STATUS_INVALID_VALUE, std::string(what) + " must be an integer in [1, 4096], got \"" + text + "\"");
    return static_cast<int>(v);
}

std::string default_cache_dir() {
    if (const char* xdg = env("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/jitmm";
    if (const char* home = env("HOME"); home && *home) return std::string(home) + "/.cache/jitmm";
    return "";
}

}  // namespace

EngineOptions resolve_engine_options(const jitmm_engine_config* config) {
    EngineOptions o;
    const char* device = config && config->device ? config->device : "cpu";
    o.device = device;
    if (o.device == "cpu") {
        o.cuda_ordinal = -1;
    } else if (o.device == "cuda") {
        o.device = "cuda:0";
        o.cuda_ordinal = 0;
    } else if (o.device.rfind("cuda:", 0) == 0 && o.device.size() > 5 && o.device.size() < 10 &&
               o.device.find_first_not_of("0123456789", 5) == std::string::npos) {
        o.cuda_ordinal = std::atoi(o.device.c_str() + 5);
    } else {
        fail(JITMM_STATUS_INVALID_VALUE,
             "config.device: unknown device \"" + o.device + "\" (expected \"cpu\", \"cuda\" or \"cuda:N\")");
    }

    if (config && config->cache_dir) o.cache_dir = config->cache_dir;
    else if (const char* dir = env("JITMM_CACHE_DIR")) o.cache_dir = dir;
    else o.cache_dir = default_cache_dir();
    o.cache_max_bytes = cache_max_bytes_from_env();
    if (const char* record = env("JITMM_RECORD")) o.record_path = record;

    if (config && config->max_isa) {
        if (!hw::isa_from_name(config->max_isa, &o.max_isa))
            fail(JITMM_STATUS_INVALID_VALUE, std::string("config.max_isa: unknown ISA \"") + config->max_isa +
                                                 "\" (avx2, avx512, avx512_vnni, avx512_bf16, avx512_fp16, amx)");
    } else if (const char* cap = env("JITMM_MAX_ISA"); cap && *cap) {
        if (!hw::isa_from_name(cap, &o.max_isa))
            fail(JITMM_STATUS_INVALID_VALUE, std::string("JITMM_MAX_ISA: unknown ISA \"") + cap +
                                                 "\" (avx2, avx512, avx512_vnni, avx512_bf16, avx512_fp16, amx)");
    }

    if (config && config->num_threads < 0)
        fail(JITMM_STATUS_INVALID_VALUE, "config.num_threads must be >= 0 (0 = default), got " +
                                             std::to_string(config->num_threads));
    if (config && config->num_threads > 0) o.num_threads = config->num_threads;
    else if (const char* n = env("JITMM_NUM_THREADS"); n && *n) o.num_threads = parse_thread_count(n, "JITMM_NUM_THREADS");
    else o.num_threads = std::max(1, hw::cpu_info().physical_cores);

    if (config && config->kernel_cache_capacity < 0)
        fail(JITMM_STATUS_INVALID_VALUE, "config.kernel_cache_capacity must be >= 0 (0 = default), got " +
                                             std::to_string(config->kernel_cache_capacity));
    if (config && config->kernel_cache_capacity > 0) o.kernel_cache_capacity = config->kernel_cache_capacity;

    if (config) {
        o.parallel_for = config->parallel_for;
        o.parallel_for_ctx = config->parallel_for_ctx;
    }
    return o;
}

// Memory missed: read the artifact from the disk cache, or compile it (and write it through), then load.
KernelPtr Engine::generate(const Problem& p, const Plan& plan, const KernelKey& key) const {
    const auto started = std::chrono::steady_clock::now();
    bool from_disk = false;
    Artifact artifact = disk_ ? disk_->fetch_or_build(key, [&] { return plan.compile(); }, &from_disk) : plan.compile();
    KernelMeta meta;
    meta.generator = plan.generator();
    meta.recipe = plan.describe();
    meta.key = key;
    meta.code_size = artifact.payload.size();
    meta.from_disk = from_disk;
    if (dump_enabled()) dump_artifact(key, artifact.kind, artifact.payload.data(), artifact.payload.size());
    std::shared_ptr<Kernel> kernel;
    try {
        kernel = plan.load(artifact, meta);
    } catch (const Error& e) {
        if (!from_disk) throw;
        // A verified entry the loader still refuses (a generator bug the version did not capture): rebuild it.
        disk_->reject_loaded(key, e.what());
        artifact = plan.compile();
        disk_->store(key, artifact);
        meta.code_size = artifact.payload.size();
        meta.from_disk = false;
        kernel = plan.load(artifact, meta);
    }
    // Generation time covers compile (or disk read) and load: what a caller waits for on a memory miss.
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count();
    kernel->set_generation_stats(us);
    if (recorder_) recorder_->record(key, p, backend_->device());
    return kernel;
}

Engine::Engine(const EngineOptions& options, std::unique_ptr<Backend> backend)
    : options_(options), backend_(std::move(backend)), cache_(options.kernel_cache_capacity) {
    DiskCache::Options disk;
    disk.dirs = options_.cache_dir;
    disk.fingerprint = backend_->fingerprint();
    disk.max_bytes = options_.cache_max_bytes;
    disk_ = DiskCache::open(disk, &disk_status_);  // refusals are warned about inside, never an error
    if (disk_ && disk_status_.empty()) disk_status_ = disk_->describe();
    recorder_ = Recorder::for_path(options_.record_path);
    const bool has_folder = disk_ && !disk_->folders().empty();
    tune_ = std::make_unique<TuneStore>(has_folder ? tune_store_path(disk_->folders().front(), backend_->fingerprint())
                                                   : std::string());
}

std::unique_ptr<Plan> Engine::plan_for(const Problem& p) const {
    if (tune_->size() == 0) return backend_->plan(p);
    const std::string choice = tune_->lookup(p);
    return choice.empty() ? backend_->plan(p) : backend_->plan_with_choice(p, choice);
}

KernelPtr Engine::kernel_for(const Problem& p, const Plan& plan, bool* hit) {
    const KernelKey key = make_key(plan, p);
    return cache_.get_or_create(key, [&] { return generate(p, plan, key); }, hit);
}

std::string Engine::tune(const Problem& p, const RunArgs& args, std::string* log) {
    const std::vector<std::string> candidates = backend_->tune_candidates(p);
    if (candidates.empty()) {
        if (log) *log = "nothing to tune for " + describe(p) + " on " + backend_->device() + "\n";
        return "";
    }
    std::string best;
    double best_us = 0;
    for (const std::string& choice : candidates) {
        const std::unique_ptr<Plan> plan = backend_->plan_with_choice(p, choice);
        bool hit = false;
        const KernelPtr kernel = kernel_for(p, *plan, &hit);
        const double us = backend_->time_runs(*kernel, args, 10);
        if (log) {
            char line[96];
            std::snprintf(line, sizeof line, "%-24s %10.2f us  ", choice.c_str(), us);
            *log += line + plan->describe() + "\n";
        }
        if (best.empty() || us < best_us) best = choice, best_us = us;
    }
    tune_->record(p, best, best_us);
    memo_.clear();
    if (verbose_enabled())
        verbose_log("tuned " + describe(p) + ": " + best + " (" + std::to_string(best_us) + " us)");
    return best;
}

KernelKey Engine::make_key(const Plan& plan, const Problem& p) const {
    KeyWriter w;
    w.str('D', backend_->fingerprint());
    w.str('G', plan.generator()).i64('V', plan.generator_version());
    append_problem(w, p);
    plan.append_key(w);
    return w.finish();
}

bool Engine::prebuild(const Problem& p) {
    if (!disk_ || !disk_->writable())
        fail(JITMM_STATUS_INVALID_VALUE, "no writable disk cache (" + disk_status_ + ")");
    const std::unique_ptr<Plan> plan = plan_for(p);
    const KernelKey key = make_key(*plan, p);
    bool from_disk = false;
    disk_->fetch_or_build(key, [&] { return plan->compile(); }, &from_disk);
    return from_disk;
}

KernelPtr Engine::get_kernel(const Problem& p, bool log_hits) {
    using Clock = std::chrono::steady_clock;
    // The fast path: the same problem asked for again skips planning, key building and hashing.
    const ProblemWords words = problem_words(p);
    if (KernelPtr known = memo_.find(words)) {
        if (verbose_enabled() && log_hits)
            verbose_log("memory hit key=" + known->meta().key.hash.hex() + " generator=" + known->meta().generator +
                        " (problem memo) problem={" + describe(p) + "}");
        return known;
    }
    const std::unique_ptr<Plan> plan = plan_for(p);
    const KernelKey key = make_key(*plan, p);

    bool hit = false;
    const auto started = Clock::now();
    KernelPtr kernel = cache_.get_or_create(key, [&] { return generate(p, *plan, key); }, &hit);
    if (verbose_enabled() && (log_hits || !hit)) {
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - started).count();
        const char* source = hit ? "memory hit" : kernel->meta().from_disk ? "disk hit" : "miss";
        char line[192];
        std::snprintf(line, sizeof line, "%s key=%s generator=%s %s=%.1fus", source, key.hash.hex().c_str(),
                      plan->generator(), hit ? "lookup" : kernel->meta().from_disk ? "load" : "jit", us);
        verbose_log(std::string(line) + " recipe={" + plan->describe() + "} problem={" + describe(p) + "}");
    }
    memo_.remember(words, kernel);
    return kernel;
}

}  // namespace jitmm
