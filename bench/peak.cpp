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

// The sum of every lane of every chain: keeps the chains' results alive.
__attribute__((target("avx512f"))) float sum_chains(const __m512 (&acc)[kChains512]) {
    __m512 sum = acc[0];
    for (int j = 1; j < kChains512; ++j) sum = _mm512_add_ps(sum, acc[j]);
    // Summed through memory: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized inside its own header.
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, sum);
    float total = 0.0f;
    for (float v : lanes) total += v;
    return total;
}
__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations) {
    __m512 acc[kChains512];
    for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j) * 1e-3f);
    const __m512 mul = _mm512_set1_ps(kMul), add = _mm512_set1_ps(kAdd);
    for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 24
        for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_fmadd_ps(acc[j], mul, add);
    }
    return sum_chains(acc);
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

// vpdpbusd: 16 lanes x 4 u8*s8 products, each a multiply and an add. The sums wrap harmlessly. 16 chains: with
// 24, GCC 12 kept the array on the stack and moved each chain through a scratch register and a store per step,
// which halved the rate on Zen 4 (225 GOP/s measured against 440 reached by the VNNI GEMM).
constexpr int kChainsVnni = 16;
__attribute__((target("avx512f,avx512vnni"))) float dot_chains_vnni(int64_t iterations) {
    __m512i acc[kChainsVnni];
    for (int j = 0; j < kChainsVnni; ++j) acc[j] = _mm512_set1_epi32(j);
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
        for (int j = 0; j < kChainsVnni; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
    }
    __m512i sum = acc[0];
    for (int j = 1; j < kChainsVnni; ++j) sum = _mm512_add_epi32(sum, acc[j]);
    alignas(64) int32_t lanes[16];
    _mm512_store_si512(lanes, sum);
    float total = 0.0f;
    for (int32_t v : lanes) total += static_cast<float>(v);
    return total;
}

// vdpbf16ps: 16 lanes x 2 bf16 products into f32. acc grows by 2 * 1e-7 per step: no overflow in a run.
__attribute__((target("avx512f,avx512bf16"))) float dot_chains_bf16(int64_t iterations) {
    __m512 acc[kChains512];
    for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j) * 1e-3f);
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-7f), _mm512_set1_ps(1e-7f));
    for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 24
        for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
    }
    return sum_chains(acc);
}

// vfmadd231ph: 32 f16 lanes; acc * (1 - 2^-11) + 2^-11 converges to 1 like the f32 chains.
__attribute__((target("avx512f,avx512fp16,avx512vl,avx512bw"))) float fma_chains_f16(int64_t iterations) {
    __m512h acc[kChains512];
    for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_set1_ph(static_cast<_Float16>(0.5f));
    const __m512h mul = _mm512_set1_ph(static_cast<_Float16>(0.99951171875f));
    const __m512h add = _mm512_set1_ph(static_cast<_Float16>(0.00048828125f));
    for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 24
        for (int j = 0; j < kChains512; ++j) acc[j] = _mm512_fmadd_ph(acc[j], mul, add);
    }
    __m512h sum = acc[0];
    for (int j = 1; j < kChains512; ++j) sum = _mm512_add_ph(sum, acc[j]);
    alignas(64) _Float16 lanes[32];
    _mm512_store_ph(lanes, sum);
    float total = 0.0f;
    for (_Float16 v : lanes) total += static_cast<float>(v);
    return total;
}

// AMX: palette 1, eight tiles of 16 rows x 64 bytes. Tiles 4-7 hold inputs loaded once (small values, so that
// the data is not all zeros), tiles 0-3 accumulate: each step is four independent tile products.
struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t bytes_per_row[16] = {};
    uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-bf16,amx-int8"))) float amx_chains(bool int8, int64_t iterations) {
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) cfg.bytes_per_row[t] = 64, cfg.rows[t] = 16;
    alignas(64) uint16_t input[16 * 32];
    for (int i = 0; i < 16 * 32; ++i) input[i] = static_cast<uint16_t>(int8 ? 0x0103 + (i & 7) : 0x3c00 + (i & 15));
    alignas(64) float out[16 * 16];
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, input, 64);
    _tile_loadd(5, input, 64);
    _tile_loadd(6, input, 64);
    _tile_loadd(7, input, 64);
    if (int8) {
        for (int64_t i = 0; i < iterations; ++i) {
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
            _tile_dpbusd(2, 5, 6);
            _tile_dpbusd(3, 5, 7);
        }
    } else {
        for (int64_t i = 0; i < iterations; ++i) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}

double flops_per_iteration(PeakKind kind) {
    switch (kind) {
        case PeakKind::f32_avx2: return 2.0 * 8 * kChains256;
        case PeakKind::f32_avx512: return 2.0 * 16 * kChains512;
        case PeakKind::int8_vnni_avx512: return 2.0 * 64 * kChainsVnni;
        case PeakKind::bf16_avx512: return 2.0 * 32 * kChains512;
        case PeakKind::f16_avx512: return 2.0 * 32 * kChains512;
        case PeakKind::amx_bf16: return 4 * 2.0 * 16 * 16 * 32;
        case PeakKind::amx_int8: return 4 * 2.0 * 16 * 16 * 64;
    }
    return 0.0;
}

float run_chains(PeakKind kind, int64_t iterations) {
    switch (kind) {
        case PeakKind::f32_avx2: return fma_chains_avx2(iterations);
        case PeakKind::f32_avx512: return fma_chains_avx512(iterations);
        case PeakKind::int8_vnni_avx512: return dot_chains_vnni(iterations);
        case PeakKind::bf16_avx512: return dot_chains_bf16(iterations);
        case PeakKind::f16_avx512: return fma_chains_f16(iterations);
        case PeakKind::amx_bf16: return amx_chains(false, iterations);
        case PeakKind::amx_int8: return amx_chains(true, iterations);
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
        case PeakKind::int8_vnni_avx512: return "int8_vnni_avx512";
        case PeakKind::bf16_avx512: return "bf16_avx512";
        case PeakKind::f16_avx512: return "f16_avx512";
        case PeakKind::amx_bf16: return "amx_bf16";
        case PeakKind::amx_int8: return "amx_int8";
    }
    return "?";
}

std::vector<PeakKind> supported_peak_kinds() {
    const hw::CpuInfo& cpu = hw::cpu_info();
    std::vector<PeakKind> kinds;
    if (cpu.best_isa >= hw::X86Isa::avx2) kinds.push_back(PeakKind::f32_avx2);
    if (cpu.best_isa >= hw::X86Isa::avx512) kinds.push_back(PeakKind::f32_avx512);
    // The tiers the probe found.
    if (cpu.best_isa >= hw::X86Isa::avx512_vnni) kinds.push_back(PeakKind::int8_vnni_avx512);
    if (cpu.best_isa >= hw::X86Isa::avx512_bf16 && cpu.avx512_bf16) kinds.push_back(PeakKind::bf16_avx512);
    if (cpu.best_isa >= hw::X86Isa::avx512_fp16 && cpu.avx512_fp16) kinds.push_back(PeakKind::f16_avx512);
    if (cpu.best_isa >= hw::X86Isa::amx) {
        if (cpu.amx_bf16) kinds.push_back(PeakKind::amx_bf16);
        if (cpu.amx_int8) kinds.push_back(PeakKind::amx_int8);
    }
    return kinds;
}

bool peak_kind_for_generator(const std::string& generator, PeakKind* kind) {
    // The low-precision generators: the instruction their inner loop is made of.
    if (generator == "x86_bf16_amx") return *kind = PeakKind::amx_bf16, true;
    if (generator == "x86_int8_amx") return *kind = PeakKind::amx_int8, true;
    if (generator == "x86_int8_vnni_avx512") return *kind = PeakKind::int8_vnni_avx512, true;
    if (generator == "x86_bf16_dot_avx512") return *kind = PeakKind::bf16_avx512, true;
    // f32 FMA: the f32 generators and the bf16/f16 ones that convert to f32 first.
    const bool f32_math = generator.rfind("x86_f32_", 0) == 0 || generator.rfind("x86_bf16_f32_", 0) == 0 ||
                          generator.rfind("x86_f16_f32_", 0) == 0;
    if (!f32_math) return false;
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
