// jitmm-warmup: fills the on-disk kernel cache ahead of time, so that a process (or a fleet, fed an archive)
// loads its kernels instead of compiling them at start-up.
//
//   jitmm-warmup --shapes FILE [--device cpu|cuda:0|sm_80|sm_90a|sm_100a ...] [--cache-dir DIR] [--jobs N]
//                [--threads N] [--json] [--stats] [--export FILE] [--import FILE]
//
// Order of work: --import, then --shapes (every row for every --device; a row's own device cell wins),
// then --export, then --stats. Exit status: 0 when everything succeeded, 1 when a kernel failed or an
// archive had bad entries, 2 on a usage error or an unusable cache.
//
// The key of a CPU kernel includes the thread count its plan was made for: warm with the --threads (or
// JITMM_NUM_THREADS) and JITMM_MAX_ISA the production processes will use.
#include "api/validate.hpp"
#include "core/cache_archive.hpp"
#include "core/disk_cache.hpp"
#include "core/engine.hpp"
#include "core/error.hpp"
#include "core/shape_csv.hpp"
#include "cuda/backend_cuda.hpp"
#include "x86/backend_x86.hpp"

#include <jitmm/jitmm.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace jitmm::warmup {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
    std::string shapes;
    std::vector<std::string> devices;
    std::string cache_dir;
    bool cache_dir_set = false;
    int jobs = 0;
    int threads = 0;
    bool json = false, stats = false;
    std::string export_path, import_path;
};

[[noreturn]] void usage(const std::string& problem) {
    if (!problem.empty()) std::fprintf(stderr, "jitmm-warmup: %s\n", problem.c_str());
    std::fprintf(stderr,
                 "usage: jitmm-warmup [--shapes FILE] [--device cpu|cuda:N|sm_XX ...] [--cache-dir DIR] [--jobs N]\n"
                 "                    [--threads N] [--json] [--stats] [--export FILE] [--import FILE]\n"
                 "  --shapes FILE    shape CSV (jitmm-bench's format, or a JITMM_RECORD file) to compile into the cache\n"
                 "  --device D       target, repeatable (default cpu); a row's device column overrides it.\n"
                 "                   sm_80, sm_90a, sm_100a: compile for that arch without a GPU\n"
                 "  --cache-dir DIR  cache folder (default JITMM_CACHE_DIR, else ~/.cache/jitmm); ':' lists: first is written\n"
                 "  --jobs N         parallel compilations (default: all cores)\n"
                 "  --threads N      CPU threads the kernels are planned for (default JITMM_NUM_THREADS or physical cores)\n"
                 "  --json           one JSON object on stdout\n"
                 "  --stats          entries, bytes, hits, misses, rejects (this run and the folder's lifetime)\n"
                 "  --export FILE    write the cache (every target) as one archive\n"
                 "  --import FILE    verify and add an archive's entries to the cache\n");
    std::exit(2);
}

int parse_count(const char* flag, const char* text) {
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < 1 || v > 4096) usage(std::string(flag) + " needs an integer in [1, 4096]");
    return static_cast<int>(v);
}

Flags parse_flags(int argc, char** argv) {
    Flags f;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) usage(a + " needs a value");
            return argv[++i];
        };
        if (a == "--shapes") f.shapes = value();
        else if (a == "--device") f.devices.push_back(value());
        else if (a == "--cache-dir") f.cache_dir = value(), f.cache_dir_set = true;
        else if (a == "--jobs") f.jobs = parse_count("--jobs", value());
        else if (a == "--threads") f.threads = parse_count("--threads", value());
        else if (a == "--json") f.json = true;
        else if (a == "--stats") f.stats = true;
        else if (a == "--export") f.export_path = value();
        else if (a == "--import") f.import_path = value();
        else if (a == "--help" || a == "-h") usage("");
        else usage("unknown argument '" + a + "'");
    }
    if (f.shapes.empty() && !f.stats && f.export_path.empty() && f.import_path.empty())
        usage("nothing to do: give --shapes, --stats, --export or --import");
    if (f.devices.empty()) f.devices.push_back("cpu");
    if (f.jobs == 0) f.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return f;
}

bool is_arch_name(const std::string& d) {
    if (d.size() < 5 || d.compare(0, 3, "sm_") != 0) return false;
    const size_t digits_end = d.find_first_not_of("0123456789", 3);
    return digits_end > 3 && (digits_end == std::string::npos || (digits_end == d.size() - 1 && d.back() == 'a'));
}

jitmm_engine_config base_config(const Flags& flags) {
    jitmm_engine_config cfg;
    jitmm_engine_config_init(&cfg);
    cfg.cache_dir = flags.cache_dir_set ? flags.cache_dir.c_str() : nullptr;
    cfg.num_threads = flags.threads;
    return cfg;
}

// The one place that turns a device name into an engine. Throws jitmm::Error with the reason.
std::unique_ptr<Engine> make_target_engine(const std::string& device, const Flags& flags) {
    jitmm_engine_config cfg = base_config(flags);
    cfg.device = "cpu";  // resolves the cache folder and limits without touching a device
    EngineOptions options = resolve_engine_options(&cfg);
    std::unique_ptr<Backend> backend;
    if (is_arch_name(device)) {
        // A CUDA arch named without a GPU: NVRTC compiles the cubins a fleet of that arch will load.
        options.device = device;
        backend = cuda::make_cuda_compile_only_backend(device);
    } else {
        cfg.device = device.c_str();
        options = resolve_engine_options(&cfg);
        backend = options.cuda_ordinal >= 0 ? cuda::make_cuda_backend(options) : x86::make_x86_backend(options);
    }
    options.record_path.clear();  // warming is not a workload to record
    auto engine = std::make_unique<Engine>(options, std::move(backend));
    if (!engine->disk_cache() || !engine->disk_cache()->writable())
        fail(JITMM_STATUS_INVALID_VALUE, "no writable disk cache (" + engine->disk_cache_status() + ")");
    return engine;
}

struct Job {
    ShapeRow row;
    std::string device;
};

enum class Outcome { compiled, cached, failed };

struct JobResult {
    Outcome outcome = Outcome::failed;
    double ms = 0;
    std::string reason;
};

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += c;
        else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else out += c;
    }
    return out;
}

struct TimeSummary {
    double mean = 0, median = 0, max = 0;
};
TimeSummary summarize(std::vector<double> v) {
    TimeSummary t;
    if (v.empty()) return t;
    std::sort(v.begin(), v.end());
    for (double x : v) t.mean += x;
    t.mean /= double(v.size());
    t.median = v[v.size() / 2];
    t.max = v.back();
    return t;
}

// Redraws one line on stderr (a terminal only), at most every 100 ms.
class Progress {
public:
    explicit Progress(size_t total) : total_(total), enabled_(::isatty(STDERR_FILENO) == 1) {}
    void update(size_t done, size_t compiled, size_t cached, size_t failed, bool force = false) {
        if (!enabled_) return;
        std::lock_guard<std::mutex> lock(mutex_);
        const auto now = Clock::now();
        if (!force && now - last_ < std::chrono::milliseconds(100)) return;
        last_ = now;
        constexpr int kWidth = 30;
        const int filled = total_ ? static_cast<int>(kWidth * done / total_) : kWidth;
        std::fprintf(stderr, "\r[%s%s] %zu/%zu  compiled %zu  cached %zu  failed %zu ",
                     std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(), done, total_,
                     compiled, cached, failed);
        if (force) std::fprintf(stderr, "\n");
        std::fflush(stderr);
    }

private:
    size_t total_;
    bool enabled_;
    std::mutex mutex_;
    Clock::time_point last_{};
};

struct WarmupReport {
    size_t rows = 0, duplicates = 0;
    std::vector<Job> jobs;
    std::vector<JobResult> results;
    double wall_s = 0;
};

WarmupReport run_warmup(const Flags& flags, std::map<std::string, std::unique_ptr<Engine>>& engines,
                        std::map<std::string, std::string>& engine_errors) {
    WarmupReport report;
    const std::vector<ShapeRow> rows = read_shape_file(flags.shapes);
    report.rows = rows.size();
    std::set<std::string> seen;
    for (const ShapeRow& row : rows) {
        const std::vector<std::string> targets = row.device.empty() ? flags.devices : std::vector<std::string>{row.device};
        for (const std::string& device : targets) {
            // Identical rows (a recorded file from many processes repeats itself) are done once.
            std::string id;
            try {
                id = shape_csv_row(row.desc, device);
            } catch (const Error&) {
                id = std::to_string(row.line) + "|" + device;
            }
            if (!seen.insert(id).second) {
                ++report.duplicates;
                continue;
            }
            report.jobs.push_back(Job{row, device});
        }
    }
    // Engines first (one per target, shared by the workers): a bad target fails its jobs with one reason.
    for (const Job& job : report.jobs) {
        if (engines.count(job.device) || engine_errors.count(job.device)) continue;
        try {
            engines[job.device] = make_target_engine(job.device, flags);
        } catch (const Error& e) {
            engine_errors[job.device] = std::string(jitmm_status_string(e.status())) + ": " + e.what();
        }
    }

    report.results.resize(report.jobs.size());
    std::atomic<size_t> next{0}, done{0}, compiled{0}, cached{0}, failed{0};
    Progress progress(report.jobs.size());
    const auto started = Clock::now();
    auto worker = [&] {
        for (size_t i; (i = next++) < report.jobs.size();) {
            const Job& job = report.jobs[i];
            JobResult& r = report.results[i];
            const auto t0 = Clock::now();
            try {
                auto engine = engines.find(job.device);
                if (engine == engines.end()) {
                    r.reason = engine_errors.at(job.device);
                    throw std::runtime_error(r.reason);
                }
                const Problem p = api::problem_from_desc(&job.row.desc);
                r.outcome = engine->second->prebuild(p) ? Outcome::cached : Outcome::compiled;
            } catch (const Error& e) {
                r.outcome = Outcome::failed;
                r.reason = std::string(jitmm_status_string(e.status())) + ": " + e.what();
            } catch (const std::exception& e) {
                r.outcome = Outcome::failed;
                if (r.reason.empty()) r.reason = std::string("internal error: ") + e.what();
            }
            r.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
            (r.outcome == Outcome::compiled ? compiled : r.outcome == Outcome::cached ? cached : failed)++;
            progress.update(++done, compiled, cached, failed);
        }
    };
    std::vector<std::thread> threads;
    const int n = std::max(1, std::min<int>(flags.jobs, static_cast<int>(report.jobs.size())));
    for (int t = 1; t < n; ++t) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    progress.update(done, compiled, cached, failed, /*force=*/true);
    report.wall_s = std::chrono::duration<double>(Clock::now() - started).count();
    return report;
}

struct TargetUsage {
    std::string fingerprint;
    int64_t entries = 0, bytes = 0;
};

// Entries per target folder, named by its fingerprint.txt.
std::map<std::string, TargetUsage> usage_by_target(const DiskCache& cache) {
    std::map<std::string, TargetUsage> usage;
    for (const CacheFile& f : cache.list_entries(0)) {
        const std::string dir = f.path.substr(0, f.path.find_last_of('/'));
        TargetUsage& u = usage[dir];
        if (u.fingerprint.empty()) {
            if (FILE* fp = std::fopen((dir + "/fingerprint.txt").c_str(), "rb")) {
                char buf[512];
                const size_t n = std::fread(buf, 1, sizeof buf, fp);
                u.fingerprint.assign(buf, n);
                std::fclose(fp);
            } else {
                u.fingerprint = "?";
            }
        }
        ++u.entries;
        u.bytes += f.size;
    }
    return usage;
}

int main_impl(int argc, char** argv) {
    const Flags flags = parse_flags(argc, argv);
    int status = 0;

    // The folder-level view of the cache (every target): archives and stats.
    jitmm_engine_config cfg = base_config(flags);
    const EngineOptions folder_options = resolve_engine_options(&cfg);
    DiskCache::Options disk_options;
    disk_options.dirs = folder_options.cache_dir;
    disk_options.max_bytes = folder_options.cache_max_bytes;
    std::string why;
    std::unique_ptr<DiskCache> folder = DiskCache::open(disk_options, &why);
    if (!folder) {
        std::fprintf(stderr, "jitmm-warmup: no usable disk cache at '%s': %s\n", folder_options.cache_dir.c_str(),
                     why.c_str());
        return 2;
    }

    std::string json = "{\"cache\": \"" + json_escape(folder->describe()) + "\"";
    auto archive_json = [&](const char* name, const ArchiveResult& r) {
        json += std::string(", \"") + name + "\": {\"entries\": " + std::to_string(r.entries) +
                ", \"written\": " + std::to_string(r.written) + ", \"already_present\": " +
                std::to_string(r.already_present) + ", \"rejected\": " + std::to_string(r.rejected) +
                ", \"write_failed\": " + std::to_string(r.write_failed) + ", \"bytes\": " + std::to_string(r.bytes) +
                ", \"archive_ok\": " + (r.archive_ok ? "true" : "false") + "}";
    };
    auto archive_text = [&](const char* what, const std::string& path, const ArchiveResult& r) {
        if (flags.json) return;
        std::printf("%s %s: %lld entries, %lld bytes", what, path.c_str(), (long long)r.entries, (long long)r.bytes);
        if (std::strcmp(what, "imported") == 0)
            std::printf(" (%lld new, %lld already present, %lld rejected, %lld not written)", (long long)r.written,
                        (long long)r.already_present, (long long)r.rejected, (long long)r.write_failed);
        else if (r.rejected)
            std::printf(" (%lld damaged entries left out)", (long long)r.rejected);
        std::printf("\n");
        for (const std::string& p : r.problems) std::printf("  %s\n", p.c_str());
    };

    if (!flags.import_path.empty()) {
        const ArchiveResult r = import_cache(*folder, flags.import_path);
        archive_json("import", r);
        archive_text("imported", flags.import_path, r);
        if (!r.archive_ok || r.rejected || r.write_failed) status = 1;
    }

    std::map<std::string, std::unique_ptr<Engine>> engines;
    std::map<std::string, std::string> engine_errors;
    if (!flags.shapes.empty()) {
        const WarmupReport report = run_warmup(flags, engines, engine_errors);
        std::vector<double> compile_ms, cached_ms;
        std::map<std::string, std::vector<size_t>> failures;  // reason -> job indices
        for (size_t i = 0; i < report.results.size(); ++i) {
            const JobResult& r = report.results[i];
            if (r.outcome == Outcome::compiled) compile_ms.push_back(r.ms);
            else if (r.outcome == Outcome::cached) cached_ms.push_back(r.ms);
            else failures[r.reason].push_back(i);
        }
        const size_t failed = report.results.size() - compile_ms.size() - cached_ms.size();
        if (failed) status = 1;
        const TimeSummary ct = summarize(compile_ms), ht = summarize(cached_ms);
        if (flags.json) {
            char buf[512];
            std::snprintf(buf, sizeof buf,
                          ", \"shapes\": \"%s\", \"rows\": %zu, \"duplicates\": %zu, \"kernels\": %zu, \"jobs\": %d, "
                          "\"compiled\": %zu, \"cached\": %zu, \"failed\": %zu, \"wall_s\": %.4f, "
                          "\"compile_ms\": {\"mean\": %.3f, \"median\": %.3f, \"max\": %.3f}, "
                          "\"cached_ms\": {\"mean\": %.3f, \"median\": %.3f, \"max\": %.3f}",
                          json_escape(flags.shapes).c_str(), report.rows, report.duplicates, report.jobs.size(),
                          flags.jobs, compile_ms.size(), cached_ms.size(), failed, report.wall_s, ct.mean, ct.median,
                          ct.max, ht.mean, ht.median, ht.max);
            json += buf;
            json += ", \"failures\": [";
            bool first = true;
            for (const auto& [reason, indices] : failures) {
                json += std::string(first ? "" : ", ") + "{\"reason\": \"" + json_escape(reason) + "\", \"count\": " +
                        std::to_string(indices.size()) + ", \"rows\": [";
                for (size_t k = 0; k < indices.size(); ++k) {
                    const Job& job = report.jobs[indices[k]];
                    json += (k ? ", " : "") + std::string("{\"line\": ") + std::to_string(job.row.line) +
                            ", \"device\": \"" + json_escape(job.device) + "\"}";
                }
                json += "]}";
                first = false;
            }
            json += "]";
        } else {
            std::printf("jitmm-warmup: %zu kernels from %s (%zu rows, %zu duplicates skipped), %d jobs, cache %s\n",
                        report.jobs.size(), flags.shapes.c_str(), report.rows, report.duplicates, flags.jobs,
                        folder->describe().c_str());
            std::printf("  compiled        %6zu   per kernel: mean %.2f ms, median %.2f ms, max %.2f ms\n",
                        compile_ms.size(), ct.mean, ct.median, ct.max);
            std::printf("  already cached  %6zu   per kernel: mean %.2f ms, median %.2f ms, max %.2f ms\n",
                        cached_ms.size(), ht.mean, ht.median, ht.max);
            std::printf("  failed          %6zu\n", failed);
            std::printf("  total           %.3f s wall\n", report.wall_s);
            for (const auto& [reason, indices] : failures) {
                std::printf("  failed x%zu: %s\n    rows:", indices.size(), reason.c_str());
                for (size_t k = 0; k < indices.size() && k < 10; ++k)
                    std::printf(" %d(%s)", report.jobs[indices[k]].row.line, report.jobs[indices[k]].device.c_str());
                std::printf("%s\n", indices.size() > 10 ? " ..." : "");
            }
        }
    }

    if (!flags.export_path.empty()) {
        const ArchiveResult r = export_cache(*folder, flags.export_path);
        archive_json("export", r);
        archive_text("exported", flags.export_path, r);
        if (r.rejected) status = 1;
    }

    if (flags.stats) {
        DiskCacheCounters run = folder->stats().process;
        for (const auto& [device, engine] : engines) {
            const DiskCacheCounters c = engine->disk_cache()->stats().process;
            run.hits += c.hits, run.misses += c.misses, run.rejects += c.rejects, run.writes += c.writes;
            run.evictions += c.evictions, run.write_errors += c.write_errors;
        }
        const DiskCacheStats s = folder->stats();
        const DiskCacheCounters life = folder->lifetime_counters();
        const auto usage = usage_by_target(*folder);
        auto counters_json = [](const DiskCacheCounters& c) {
            return "{\"hits\": " + std::to_string(c.hits) + ", \"misses\": " + std::to_string(c.misses) +
                   ", \"rejects\": " + std::to_string(c.rejects) + ", \"writes\": " + std::to_string(c.writes) +
                   ", \"evictions\": " + std::to_string(c.evictions) +
                   ", \"write_errors\": " + std::to_string(c.write_errors) + "}";
        };
        if (flags.json) {
            json += ", \"stats\": {\"entries\": " + std::to_string(s.entries) + ", \"bytes\": " +
                    std::to_string(s.bytes) + ", \"max_bytes\": " + std::to_string(folder->max_bytes()) +
                    ", \"this_run\": " + counters_json(run) + ", \"lifetime\": " + counters_json(life) +
                    ", \"targets\": [";
            bool first = true;
            for (const auto& [dir, u] : usage) {
                json += std::string(first ? "" : ", ") + "{\"fingerprint\": \"" + json_escape(u.fingerprint) +
                        "\", \"entries\": " + std::to_string(u.entries) + ", \"bytes\": " + std::to_string(u.bytes) + "}";
                first = false;
            }
            json += "]}";
        } else {
            std::printf("cache %s\n", folder->describe().c_str());
            std::printf("  entries %lld, bytes %lld (%.2f MiB of %.1f MiB)\n", (long long)s.entries,
                        (long long)s.bytes, double(s.bytes) / 1048576.0, double(folder->max_bytes()) / 1048576.0);
            for (const auto& [dir, u] : usage)
                std::printf("  target \"%s\": %lld entries, %lld bytes\n", u.fingerprint.c_str(), (long long)u.entries,
                            (long long)u.bytes);
            auto print_counters = [](const char* what, const DiskCacheCounters& c) {
                std::printf("  %-9s hits %lld, misses %lld, rejects %lld, writes %lld, evictions %lld, write errors %lld\n",
                            what, (long long)c.hits, (long long)c.misses, (long long)c.rejects, (long long)c.writes,
                            (long long)c.evictions, (long long)c.write_errors);
            };
            print_counters("this run", run);
            print_counters("lifetime", life);
        }
    }
    if (flags.json) std::printf("%s}\n", json.c_str());
    return status;
}

}  // namespace
}  // namespace jitmm::warmup

int main(int argc, char** argv) {
    try {
        return jitmm::warmup::main_impl(argc, argv);
    } catch (const jitmm::Error& e) {
        std::fprintf(stderr, "jitmm-warmup: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "jitmm-warmup: internal error: %s\n", e.what());
        return 2;
    }
}
