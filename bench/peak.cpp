#include "peak.hpp"

#include "hw/cpu.hpp"
#include "timing.hpp"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>

namespace jitmm::bench {
namespace {

// acc = acc * mul + add converges to add / (1 - mul) = 1: no overflow, no denormals, and the compiler cannot
// fold it away. Each chain's FMAs depend on each other; the chains do not, so the core overlaps them.
constexpr float kMul = 0.99999988f, kAdd = 1.2e-7f;

// 24 zmm chains (+2 constants of 32 registers): FMA latency 4 x 2 ports needs 8; 24 leaves margin for any
// core with longer latency. 2 flops x 16 lanes per FMA.
constexpr int kChains512 = 24;
__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations) {
    __m512 acc[kChains512];
    for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j) * 1e-3f);
    const __m512 mul = _mm512_set1_ps(kMul), add = _mm512_set1_ps(kAdd);
    for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 24
        for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_fmadd_ps(acc[j], mul, add);
    }
    __m512 sum = acc[0];
    for (int j = 1; j < kChains512; ++j) sum = _mm512_add_ps(sum, acc[j]);
    // Summed through memory: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized inside its own header.
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, sum);
    float total = 0.0f;
    for (float v : lanes) total += v;
    return total;
}

// 12 ymm chains (+2 constants of 16 registers).
constexpr int kChains256 = 12;
__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations) {
    __m256 acc[kChains256];
    for (int j = 0; j < kChains256; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j) * 1e-3f);
    const __m256 mul = _mm256_set1_ps(kMul), add = _mm256_set1_ps(kAdd);
    for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < kChains256; ++j) acc[j] = _mm256_fmadd_ps(acc[j], mul, add);
    }
    __m256 sum = acc[0];
    for (int j = 1; j < kChains256; ++j) sum = _mm256_add_ps(sum, acc[j]);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, sum);
    float total = 0.0f;
    for (float v : lanes) total += v;
    return total;
}

double flops_per_iteration(PeakKind kind) {
    switch (kind) {
        case PeakKind::f32_avx2: return 2.0 * 8 * kChains256;
        case PeakKind::f32_avx512: return 2.0 * 16 * kChains512;
    }
    return 0.0;
}

float run_chains(PeakKind kind, int64_t iterations) {
    switch (kind) {
        case PeakKind::f32_avx2: return fma_chains_avx2(iterations);
        case PeakKind::f32_avx512: return fma_chains_avx512(iterations);
    }
    return 0.0f;
}

// The CPUs this process may run on, in order (pinning thread i to the i-th keeps threads apart).
std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; ++c) {
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
        }
    }
    return cpus;
}

void pin_to(std::thread& t, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(t.native_handle(), sizeof(set), &set);  // best effort: unpinned still measures
}

// Wall seconds for `threads` threads each running `iterations`, from the first worker's start to the last
// worker's finish. Each worker stamps its own start once it sees the go signal, so a preempted caller adds
// nothing; waiting threads yield, so a worker that shares a CPU with the caller lets it through.
double timed_run(PeakKind kind, int threads, int64_t iterations) {
    const std::vector<int> cpus = allowed_cpus();
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<Clock::time_point> starts(static_cast<size_t>(threads)), ends(static_cast<size_t>(threads));
    std::vector<float> sinks(static_cast<size_t>(threads));
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            starts[static_cast<size_t>(t)] = Clock::now();
            sinks[static_cast<size_t>(t)] = run_chains(kind, iterations);
            ends[static_cast<size_t>(t)] = Clock::now();
        });
        if (!cpus.empty()) pin_to(workers.back(), cpus[static_cast<size_t>(t) % cpus.size()]);
    }
    while (ready.load() < threads) std::this_thread::yield();
    go.store(true, std::memory_order_release);
    for (std::thread& w : workers) w.join();
    const Clock::time_point start = *std::min_element(starts.begin(), starts.end());
    const Clock::time_point end = *std::max_element(ends.begin(), ends.end());
    volatile float sink = 0.0f;  // keeps the chains' results alive
    for (float s : sinks) sink = sink + s;
    return std::chrono::duration<double>(end - start).count();
}

}  // namespace

const char* peak_kind_name(PeakKind kind) {
    switch (kind) {
        case PeakKind::f32_avx2: return "f32_avx2";
        case PeakKind::f32_avx512: return "f32_avx512";
    }
    return "?";
}

std::vector<PeakKind> supported_peak_kinds() {
    const hw::CpuInfo& cpu = hw::cpu_info();
    std::vector<PeakKind> kinds;
    if (cpu.best_isa >= hw::X86Isa::avx2) kinds.push_back(PeakKind::f32_avx2);
    if (cpu.best_isa >= hw::X86Isa::avx512) kinds.push_back(PeakKind::f32_avx512);
    return kinds;
}

bool peak_kind_for_generator(const std::string& generator, PeakKind* kind) {
    if (generator.rfind("x86_f32_", 0) != 0) return false;
    if (generator.find("avx512") != std::string::npos) {
        *kind = PeakKind::f32_avx512;
        return true;
    }
    if (generator.find("avx2") != std::string::npos) {
        *kind = PeakKind::f32_avx2;
        return true;
    }
    return false;
}

Peak measure_peak(PeakKind kind, int threads) {
    threads = std::max(1, threads);
    // Calibrate by doubling until a run takes ~5 ms (which also settles the cores' wide-vector clock), then
    // size each measurement to ~20 ms. The peak is what the cores can do, and on a shared machine interference
    // only ever makes a run slower: keep the best, and repeat until the best three agree within 2% (at least
    // 5 runs, at most 30: ~0.1 s on a quiet machine, ~0.6 s on a busy one).
    constexpr double kCalibrationS = 0.005, kTargetS = 0.02, kAgree = 1.02;
    constexpr int kMinRuns = 5, kMaxRuns = 30;
    int64_t iterations = 10000;
    double seconds = timed_run(kind, threads, iterations);
    while (seconds < kCalibrationS) {
        iterations *= 2;
        seconds = timed_run(kind, threads, iterations);
    }
    iterations = static_cast<int64_t>(static_cast<double>(iterations) * kTargetS / seconds) + 1;
    std::vector<double> runs;
    while (static_cast<int>(runs.size()) < kMaxRuns) {
        runs.push_back(timed_run(kind, threads, iterations));
        std::sort(runs.begin(), runs.end());
        if (static_cast<int>(runs.size()) >= kMinRuns && runs[2] <= runs[0] * kAgree) break;
    }
    const double best_s = runs.front();
    Peak p;
    p.threads = threads;
    p.total_gflops = flops_per_iteration(kind) * static_cast<double>(iterations) * threads / best_s * 1e-9;
    // Threads beyond the cores share them: per core divides by the cores actually used.
    const int cores = std::max(1, std::min(threads, hw::cpu_info().physical_cores));
    p.per_core_gflops = p.total_gflops / cores;
    return p;
}

const Peak& PeakCache::get(PeakKind kind, int threads) {
    const auto key = std::make_pair(kind, threads);
    auto it = peaks_.find(key);
    if (it == peaks_.end()) it = peaks_.emplace(key, measure_peak(kind, threads)).first;
    return it->second;
}

}  // namespace jitmm::bench
