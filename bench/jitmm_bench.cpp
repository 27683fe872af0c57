// jitmm-bench: the microbenchmark. For each shape (from flags or a shape file): JIT time of the first
// kernel_create, cache-hit lookup time, median run time, GFLOP/s and % of the measured FMA peak, with --check
// the error against a float64 reference, and with --peer the same for other libraries on the same inputs.
// Text table or one JSON array on stdout. `--peak` measures the FMA peak alone.
//
// The parts, one file each: options (command line), problem (buffers, rotation copies), reference (float64
// check, reusable by tests), timing (the median method), peak (FMA throughput), peer + peer_<name> (other
// libraries), measure (one shape), report (table and JSON). This file runs them in order.
#include "core/engine.hpp"
#include "core/error.hpp"
#include "load.hpp"
#include "measure.hpp"
#include "options.hpp"
#include "peak.hpp"
#include "report.hpp"

#include <jitmm/jitmm.h>

#include <algorithm>
#include <cstdio>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace jitmm::bench {
namespace {

// The thread count jitmm's engine will use (--threads, else JITMM_NUM_THREADS, else physical cores): CPU
// peers and the peak use the same.
int resolved_threads(int32_t requested) {
    jitmm_engine_config config;
    jitmm_engine_config_init(&config);
    config.num_threads = requested;
    try {
        return resolve_engine_options(&config).num_threads;
    } catch (const Error&) {
        return std::max(1, requested);  // the engine will report the bad setting itself
    }
}

int peak_main(const Options& options, int threads) {
    std::vector<std::pair<std::string, Peak>> peaks;
    std::vector<int> counts = {1};
    if (threads > 1) counts.push_back(threads);
    for (PeakKind kind : supported_peak_kinds()) {
        for (int n : counts) peaks.emplace_back(peak_kind_name(kind), measure_peak(kind, n));
    }
    print_peaks(peaks, options.json);
    return 0;
}

bool peers_failed(const ShapeResult& r) {
    for (const PeerResult& p : r.peers) {
        for (const PeerPathResult& pp : p.paths) {
            if (!pp.error.empty() || (pp.checked && !pp.check.ok)) return true;
        }
    }
    return false;
}

int bench_main(int argc, char** argv) {
    Options options;
    try {
        options = parse_args(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "jitmm-bench: %s\n", e.what());
        return 2;
    }
    const int threads = resolved_threads(options.threads);
    if (options.peak) return peak_main(options, threads);

    bool show_device = false;
    for (const ShapeRow& row : options.shapes)
        show_device = show_device || (!row.device.empty() && row.device != options.device);

    EnginePool engines(options.threads);
    PeerSet peers;
    PeakCache peak_cache;
    std::vector<std::pair<std::string, Peak>> peaks_used;  // for the notes, in first-use order
    // The peaks come first, while nothing else of ours runs: peer libraries leave thread pools spinning for a
    // while after their calls (OpenBLAS up to ~0.1 s, OpenMP briefly), which would lower a peak measured later.
    const bool any_cpu = std::any_of(options.shapes.begin(), options.shapes.end(), [&](const ShapeRow& row) {
        return (row.device.empty() ? options.device : row.device) == "cpu";
    });
    LoadMeter meter;
    if (any_cpu) {
        for (PeakKind kind : supported_peak_kinds()) peak_cache.get(kind, threads);
    }
    const double peak_other_cpus = meter.other_cpus();
    TextTable table(options, show_device);
    if (options.json) {
        std::printf("[\n");
    } else {
        std::printf("jitmm %s, jitmm-bench: %zu shape(s), device %s, %d thread(s), min %d runs and %.0f ms per shape%s\n",
                    jitmm_version_string(), options.shapes.size(), options.device.c_str(), threads,
                    options.timing.repeats, options.timing.min_time_s * 1e3,
                    options.timing.back_to_back ? ", device calls timed back to back in batches of 20" : "");
        table.header();
    }
    std::fflush(stdout);

    int failures = 0;
    for (size_t i = 0; i < options.shapes.size(); ++i) {
        const ShapeRow& row = options.shapes[i];
        ShapeResult r;
        r.desc = row.desc;
        r.device = row.device.empty() ? options.device : row.device;
        std::string engine_error;
        jitmm_engine* engine = engines.get(r.device, &engine_error);
        if (engine == nullptr) {
            r.error = engine_error;
        } else {
            try {
                run_shape(engine, options, threads, &peers, &r);
            } catch (const Error& e) {
                r.error = e.what();
            } catch (const std::bad_alloc&) {
                r.error = "out of host memory";
            }
            r.other_cpus = meter.other_cpus();
        }
        PeakKind kind;
        if (r.runs > 0 && r.device == "cpu" && peak_kind_for_generator(r.generator, &kind)) {
            const Peak& peak = peak_cache.get(kind, threads);
            r.peak_kind = peak_kind_name(kind);
            r.peak_gflops = peak.total_gflops;
            r.peak_pct = 100.0 * r.gflops / peak.total_gflops;
            const bool listed = std::any_of(peaks_used.begin(), peaks_used.end(),
                                            [&](const auto& p) { return p.first == r.peak_kind; });
            if (!listed) peaks_used.emplace_back(r.peak_kind, peak);
        }
        if (!r.error.empty() || (r.checked && !r.check.ok) || peers_failed(r)) ++failures;
        if (options.json) {
            std::printf("%s%s\n", json_object(r).c_str(), i + 1 < options.shapes.size() ? "," : "");
            std::fflush(stdout);
        } else {
            table.row(r);
        }
    }
    if (options.json) {
        std::printf("]\n");
    } else {
        table.notes(peaks_used, peak_other_cpus);
        if (failures > 0) std::printf("%d of %zu shape(s) failed\n", failures, options.shapes.size());
    }
    return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace jitmm::bench

int main(int argc, char** argv) { return jitmm::bench::bench_main(argc, argv); }
