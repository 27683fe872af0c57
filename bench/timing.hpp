// Timing: one method for jitmm and every peer, so that a ratio compares like with like.
//   - A warm-up: one run, then more until 10% of min_time_s has passed (code paths, caches, thread pools
//     and page mappings settle).
//   - Then at least `repeats` runs and at least min_time_s of run time; each run is timed on its own and the
//     median is reported (robust against the outliers a shared machine produces).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace jitmm::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Median of values (mean of the two middle ones for an even count); 0 for none.
double median(std::vector<double> values);

struct TimingPolicy {
    int repeats = 5;
    double min_time_s = 0.2;
    // Device runs only: time batches of calls launched back to back between one event pair (a sample is the
    // batch's time per call: the throughput a sequence of layers sees) instead of each call between its own
    // pair (its latency, launch included).
    bool back_to_back = false;
};

struct Timing {
    double median_s = 0.0;
    int64_t runs = 0;
    bool ok = false;  // false: run_once asked to stop (an error it recorded itself)
};

// Times run_once (returns false to stop) under policy. A template rather than std::function so that the
// few nanoseconds of an 8x8x8 call are not dominated by an indirect call the peers do not pay either.
template <class RunOnce>
Timing time_runs(const TimingPolicy& policy, RunOnce&& run_once) {
    Timing t;
    const Clock::time_point warm_start = Clock::now();
    do {
        if (!run_once()) return t;
    } while (seconds_since(warm_start) < 0.1 * policy.min_time_s);

    constexpr size_t kMaxSamples = 1000000;
    std::vector<double> samples;
    double total = 0.0;
    while ((static_cast<int64_t>(samples.size()) < policy.repeats || total < policy.min_time_s) &&
           samples.size() < kMaxSamples) {
        const Clock::time_point start = Clock::now();
        if (!run_once()) return t;
        const double s = seconds_since(start);
        samples.push_back(s);
        total += s;
    }
    t.runs = static_cast<int64_t>(samples.size());
    t.median_s = median(std::move(samples));
    t.ok = true;
    return t;
}

}  // namespace jitmm::bench
