// Measuring one shape: jitmm (JIT time, cache-hit time, --check, median run time), then each requested peer
// on the same buffers with the same timing method.
//
//   - One engine per device string for the whole run; the first kernel_create of a shape is timed with
//     steady_clock (jit_us; gen_us is what the kernel itself reports as generation time, 0 on a disk hit).
//   - Cache hit: 100 groups of 10 kernel_create + kernel_release calls; hit_ns is the median group / 10.
//   - Runs: see timing.hpp. Inputs: see problem.hpp.
//   - --check runs once on fresh inputs with C poisoned (NaN, or a garbage pattern for integer C) when
//     beta == 0 (else C restored to its initial values), and compares batch 0 (and the last batch) with a
//     float64 reference; every path of every peer gets the same check, which catches a mis-mapped peer call.
#pragma once

#include "options.hpp"
#include "peer.hpp"
#include "reference.hpp"

#include <jitmm/jitmm.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace jitmm::bench {

// Status text plus the thread's last-error detail (read at once: the next jitmm call replaces it).
std::string status_message(jitmm_status status);

// Engines: one per device string for the whole run.
class EnginePool {
public:
    explicit EnginePool(int32_t threads) : threads_(threads) {}
    ~EnginePool();
    EnginePool(const EnginePool&) = delete;
    EnginePool& operator=(const EnginePool&) = delete;
    // The engine for device, or nullptr with *error set (the creation error is remembered).
    jitmm_engine* get(const std::string& device, std::string* error);

private:
    struct Entry {
        jitmm_engine* engine = nullptr;
        std::string error;
    };
    int32_t threads_;
    std::map<std::string, Entry> engines_;
};

// One instance of each requested peer that is built in, for the whole run (engines, streams, handles).
class PeerSet {
public:
    Peer* get(const PeerInfo& info);  // nullptr when the peer is not built

private:
    std::map<std::string, std::unique_ptr<Peer>> peers_;
};

struct PeerPathResult {
    std::string path;
    double median_us = NAN, gflops = NAN;
    int64_t runs = 0;
    bool checked = false;
    CheckResult check;
    std::string remark;  // Peer::remark() for this path
    std::string error;   // set up or run failed
};

struct PeerResult {
    std::string name;
    std::vector<PeerPathResult> paths;  // every path tried
    int best = -1;                      // index into paths of the fastest usable one; -1: none
    double ratio = NAN;                 // best peer seconds / jitmm seconds (> 1: jitmm is faster)
    std::string note;                   // why there is no result at all (not built, n/a for this shape)
    const PeerPathResult* best_path() const { return best >= 0 ? &paths[static_cast<size_t>(best)] : nullptr; }
};

struct ShapeResult {
    jitmm_matmul_desc desc;
    std::string device;
    std::string generator, recipe;
    double jit_us = NAN, gen_us = NAN, hit_ns = NAN, median_us = NAN, gflops = NAN;
    int64_t runs = 0, copies = 0;
    bool checked = false;
    CheckResult check;
    std::string peak_kind;  // e.g. "f32_avx512"; "" when the generator has no measured peak
    double peak_gflops = NAN, peak_pct = NAN;
    std::vector<PeerResult> peers;
    double other_cpus = NAN;  // CPUs busy with other processes while this shape was measured (load.hpp)
    std::string error;        // empty: the shape ran
    std::string tuned;        // --tune: the winning recipe ("" when the device had nothing to tune)
    std::string tune_log;     // --tune: one line per candidate
};

// Measures r->desc on r->device: jitmm, then options.peers. threads: the engine's resolved thread count, which
// CPU peers use too. Errors land in r->error (jitmm) or the peer's result.
void run_shape(jitmm_engine* engine, const Options& options, int threads, PeerSet* peers, ShapeResult* r);

}  // namespace jitmm::bench
