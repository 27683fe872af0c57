#include "plan/x86_kgroup_plan.hpp"

#include "plan/x86_dot_plan.hpp"
#include "plan/x86_gemm_partition.hpp"
#include "plan/x86_gemm_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace jitmm::plan {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// K values per FMA for n columns: the most that leave a slot of 16 / g lanes for each column.
int group_for(int64_t n) { return n <= 2 ? 8 : n <= 4 ? 4 : 2; }

// An A past L2 streams from memory: each call first prefetches into L2 the lines this far past its rows (1 thread,
// median us, none -> 32 KiB: 20000x3x32 265 -> 221, 20000x4x64 728 -> 429, 2477x3x12 x100 1225 -> 1072; 8 KiB
// gained less, 64 KiB as much).
constexpr int64_t kKGroupPrefetchABytes = 32 * 1024;

}  // namespace

// Where the k-group kernel serves (AVX-512; 1 thread, median GFLOP/s, the family before -> k-group, M = 300 /
// 3000): up to 4 columns (g = 4 or 8) over a K of 8 to 64, NN: 2x8 18.3 -> 30.6 / 15.4 -> 39.9, 3x12 29.5 -> 47.1
// / 25.8 -> 59.7, 4x24 43.3 -> 85.4 / 41.4 -> 115.5, 2x64 64.6 -> 71.4 / 70.2 -> 90.6, 3x64 66.0 -> 69.4 / 70.9 ->
// 90.1 (a K of 128: 2x128 91.0 -> 77.5, 3x128 102.4 -> 73.5 not kept); 5 to 8 columns (g = 2) over a K of 8 to 32:
// 5x12 48.8 -> 54.2 / 43.9 -> 74.6, 7x16 68.7 -> 80.1 / 62.5 -> 107.5, 8x32 81.9 -> 99.7 / 78.9 -> 135.1, 5x48
// 79.1 -> 63.9 (not kept; 3000 rows 83.8 -> 93.6). An NN K of 4 from 1000 rows only (300x2x4 16.4 -> 11.5, 300x7x4
// 53.5 -> 48.4 not kept; 3000x2x4 12.4 -> 14.1, 3000x4x4 21.3 -> 42.3). A transposed B (NT, whose broadcast tiles
// pack B) over a K of 4 to 32: 196x2x4 9.4 -> 10.2, 196x5x4 25.5 -> 28.1, 196x2x8 14.3 -> 26.6, 196x8x32 79.4 ->
// 84.9, 3000x8x14 75.2 -> 132.9, 3000x2x32 20.2 -> 77.6, 196x5x14 x14 7.9 -> 5.0-5.4 us; a K of 64 stays with the
// dot kernel (196x5x64 89.5 -> 53.6). Where the dot kernel takes a B stored K x N (x86_dot_plan) and A streams from
// memory, the dot kernel's whole vectors of a row stream better (20000x4x64 402 us against 429, 20000x3x32 205
// against 221).
// Few rows leave the per-call work (B's group vectors, the epilogue's reductions per group of g rows) little to
// spread over: from 17 rows for g = 8, 48 for g = 4, 96 for g = 2 (1 thread, GFLOP/s, before -> k-group: 17x2x30
// 13.2 -> 16.5; 32x3x12 20.8 -> 19.9, 48x3x12 25.4 -> 26.8, 21x3x12 18.0 -> 12.0; 64x5x14 45.2 -> 44.8, 64x8x24
// 74.8 -> 74.4, 100x5x14 44.0 -> 50.9, 48x8x24 80.4 -> 62.1).
int64_t min_rows(int g) { return g == 8 ? 17 : g == 4 ? 48 : 96; }

constexpr int64_t kKGroupMinK = 4;
constexpr int64_t kKGroupMinKFewRows = 8;
constexpr int64_t kKGroupManyRows = 1000;
constexpr int64_t kKGroupMaxKWideSlots = 64;  // g = 4 or 8: up to 4 columns
constexpr int64_t kKGroupMaxK = 32;           // g = 2, or a transposed B

bool kgroup_serves(const Problem& p, hw::X86Isa isa) {
    if (isa < hw::X86Isa::avx512 || p.trans_a || p.m <= 16 || p.n < 2 || p.n > 8 || p.k < kKGroupMinK) return false;
    if (int64_t(x86::kKGroupMaxRows) * std::max(p.lda, p.ldc) * 4 + kKGroupPrefetchABytes + 64 >= (int64_t(1) << 31))
        return false;
    const char* env = std::getenv("JITMM_X86_KGROUP");  // 0: never, 1: wherever it fits (measurements)
    if (env != nullptr) return env[0] == '1';
    if (p.k < kKGroupMinKFewRows && p.m < kKGroupManyRows && !p.trans_b) return false;
    if (p.m < min_rows(group_for(p.n))) return false;
    const int64_t max_k = !p.trans_b && p.n <= 4 ? kKGroupMaxKWideSlots : kKGroupMaxK;
    if (p.k > max_k) return false;
    const double a_all_bytes = 4.0 * double(p.m) * double(p.k) * (p.stride_a != 0 ? double(p.batch) : 1.0);
    const bool a_from_memory = a_all_bytes > double(hw::cpu_info().l2_bytes > 0 ? hw::cpu_info().l2_bytes : 1 << 20);
    return !(a_from_memory && !p.trans_b && dot_family_serves(p, isa));
}

// Where the swapped k-group kernel serves a few rows (1 thread, median GFLOP/s of 3 alternated rounds, the
// family before -> swapped k-group, NT; TT the same): 2 rows (g = 8) from 64 columns and a K of 8 (2x64x8 11.8
// -> 18.1, 2x4000x8 22.1 -> 53.8, 2x1000x32 1.28x; 2x1000x4 0.85x, 2x17x32 0.81x not kept); 3 or 4 rows (g = 4)
// from 200 columns (3x200x4 1.04-1.20x, 3x4000x16 41.0 -> 84.7, 4x4096x16 0.86 -> 1.78 of oneDNN; 3x64x8 0.85x
// not kept); 5 to 8 rows (g = 2, each group's columns stored apart) from 200 columns over a K of 24 (5x1000x32
// 1.23x, 8x4000x32 1.18x, 8x200x32 1.20x), or up to 6 rows from 1000 columns over a K of 14 (5x1000x16 1.01-1.03x,
// 5x3955x14 1.04x, 5x2069x14 1.05x; 5x2069x13 0.93x, 6x2000x12 0.94x not kept); shorter K lose to the epilogue's
// stores (8x4000x4 0.46x, 5x200x16 0.70x, 8x1000x16 0.91x). An A stored K x M (TT, whose swapped B is stored
// K x N) up to a K of 48 (2x1000x48 1.19x, 4x2000x40 1.87x; 3x1000x64 0.95x, 2x702x64 x16 1.00x not kept).
constexpr int64_t kKGroupSwappedMaxK = 48;
bool kgroup_serves_swapped(const Problem& p, hw::X86Isa isa) {
    if (!p.trans_b || p.m < 2 || p.m > 8) return false;
    const char* env = std::getenv("JITMM_X86_KGROUP_SWAPPED");  // 0: never (measurements)
    if (env != nullptr && env[0] == '0') return false;
    const int g = group_for(p.m);
    if (p.k > kKGroupSwappedMaxK) return false;
    const bool pays = g == 8   ? p.n >= 64 && p.k >= 8
                      : g == 4 ? p.n >= 200
                               : (p.n >= 200 && p.k >= 24) || (p.n >= 1000 && p.k >= 14 && p.m <= 6);
    return pays && kgroup_serves(transposed_product_problem(p), isa);
}

X86KGroupPlan plan_x86_gemm_f32_kgroup(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads) {
    (void)isa;
    X86KGroupPlan plan;
    auto& L = plan.layout;
    L.g = group_for(p.n);
    L.n = static_cast<int>(p.n);
    L.mr = static_cast<int>(std::min<int64_t>(x86::kKGroupMaxRows, ceil_div(p.m, L.g) * L.g));
    L.k = p.k;
    L.lda = p.lda;
    L.ldc = p.ldc;
    L.alpha = p.alpha;
    L.beta = p.beta;
    L.bias = p.bias;
    L.activation = p.activation;
    const int64_t l2 = cpu.l2_bytes > 0 ? cpu.l2_bytes : 1024 * 1024;
    const double a_all_bytes = 4.0 * double(p.m) * double(p.k) * (p.stride_a != 0 ? double(p.batch) : 1.0);
    if (a_all_bytes > double(l2)) L.a_prefetch_bytes = kKGroupPrefetchABytes;
    // Threads as the other f32 families count them: about 0.5 MFLOP or 256 KiB of A per thread at least.
    const double a_bytes = 4.0 * double(p.batch) * double(p.m) * double(p.k);
    const double work = std::max(p.flops() / 0.5e6, a_bytes / (256.0 * 1024));
    plan.threads = static_cast<int>(std::min<double>(std::max(1, num_threads), std::max(1.0, work)));
    plan.m_chunks = static_cast<int>(std::min<int64_t>(ceil_div(p.m, L.mr),
                                                        balanced_chunks_per_batch(p.batch, plan.threads)));
    return plan;
}

std::string X86KGroupPlan::describe() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "avx512 k-group g=%d (%d column slots) rows=%d%s%s threads=%d split=%dx1", layout.g,
                  x86::kgroup_slots(layout.g), layout.mr, layout.a_prefetch_bytes > 0 ? " prefetchA(L2)" : "",
                  layout.c_transposed ? " C^T stored" : "", threads, m_chunks);
    return buf;
}

void X86KGroupPlan::append_key(KeyWriter& w) const {
    w.i64('g', layout.g).i64('n', layout.n).i64('r', layout.mr).i64('K', layout.k);
    w.i64('l', layout.lda).i64('c', layout.ldc).i64('p', layout.a_prefetch_bytes).i64('t', layout.c_transposed);
}

}  // namespace jitmm::plan
