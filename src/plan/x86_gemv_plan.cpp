#include "plan/x86_gemv_plan.hpp"

#include "plan/x86_gemm_partition.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace jitmm::plan {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rows read at once, from as many segments of K (1 thread, median us, 1 / 2 / 4 / 8 streams: 1x305x3602 323 / 272
// / 253 / 251, 1x4096x4096 4870 / 4137 / 3972 / 3807, 1x512x512 9.7 / 7.2 / 6.2 / 6.3, 2845x1x153 TN 24.2 / 23.2 /
// 20.6 / 16.8; 8 / 12 / 16 streams, three rounds: 1x305x3602 254 / 254-255 / 263-264, 1x808x890 157-163 / 159-162
// / 166-169, 2845x1x153 TN 16.6-17.8 / 15.9-16.6 / 20.2-22.2, 1x4096x4096 3886-3899 / 3959-4016 / 4068-4135).
// Software prefetches only took load slots: of every line a few rows ahead (4 streams, none / 2 / 4
// / 8 rows: 1x305x3602 253 / 259 / 258 / 261, 1x512x512 6.2 / 6.8 / 9.0 / 11.1, 1x2000x200 11.9 / 24.4 / 22.0 /
// 23.4), and of one line in four a few hundred bytes ahead into L2 (8 streams, none / 256 / 512 / 1024 bytes:
// 1x808x890 162-170 / 160-168 / 161-169 / 168-171, 1x512x512 6.3 / 7.2-7.4 / 7.4 / 7.6-7.8, 2845x1x153 TN 17.3-17.7
// / 18.1-19.1 / 18.2-20.7 / 19.9-20.1). Off by default; JITMM_X86_GEMV_PF=BYTES sets the second.
constexpr int kGemvStreams = 8;
constexpr int64_t kGemvPrefetchBytes = 0;

// Threads as the other f32 families count them: about 0.5 MFLOP or 256 KiB of B per thread at least.
int gemv_threads(const Problem& p, int num_threads) {
    const double b_bytes = 4.0 * double(p.batch) * double(p.k) * double(p.n);
    const double work = std::max(p.flops() / 0.5e6, b_bytes / (256.0 * 1024));
    return static_cast<int>(std::min<double>(std::max(1, num_threads), std::max(1.0, work)));
}

}  // namespace

// Where the one-row kernel serves (1 thread, median us, the broadcast tiles -> one-row kernel, forced everywhere
// to find the edges): from 192 columns over a K of 64 (1x256x64 0.55 -> 0.38, 1x305x3602 302 -> 253, 1x808x890 168
// -> 161, 1x512x128 1.88 -> 1.54, 1x1500x128 8.2 -> 6.1, 1x4096x3602 3700 -> 3435; 1x200x64 0.41 -> 0.39), and
// from 96 columns over a long K (1x100x3602 15.5 -> 13.7, 1x128x3602 19.7 -> 19.3). Not fewer columns (1x64x3602
// 5.35 -> 5.52, 1x128x64 0.13 -> 0.15), nor a short K, where the broadcast tiles hold all of K in registers and
// store C once, where here the partial sums make a round trip through L1 per row group (1x4096x16 1.57 -> 1.81,
// 1x4096x32 3.20 -> 3.63, 1x256x32 0.14 -> 0.15). One thread only: the columns split over threads were not
// measured against the broadcast tiles' K split (JITMM_X86_GEMV=1 forces the kernel there).
// On a chip whose prefetchers take few streams (hw::CpuInfo::few_streams_from_memory) the columns split over a
// few threads beat the broadcast tiles (Zen 4, 2 threads, median us of 2 rounds, broadcast tiles -> one-row
// kernel: 1x4096x4096 2290-2700 -> 1190-1800, 1x11008x4096 7710-8480 -> 5590-5840, 1x4096x11008 7710-8110 ->
// 5780-5830, 1x2048x2048 590-720 -> 430-450, 1x808x890 125-138 -> 98-100; ratio to oneDNN 0.69-0.95 -> 1.00-1.51).
// Up to kGemvFewStreamsMaxThreads (measured at 2; the dot family's few-thread rules stop at 4 too).
constexpr int kGemvFewStreamsMaxThreads = 4;
constexpr int64_t kGemvMinN = 192;
constexpr int64_t kGemvMinK = 64;
constexpr int64_t kGemvMinNLongK = 96;
constexpr int64_t kGemvLongK = 2048;
// Nor rows within 256 bytes of a multiple of 4 KiB apart over a K of 4096 or more: the streams, in step at one
// page offset, then lost to the broadcast tiles' 32 rows in flight (1 thread, median us of 4 alternated rounds,
// broadcast tiles -> one-row kernel: 1x4096x11008 9508 -> 10459, 1x4100x4096 3766 -> 3891, 1x4096x4096 3957 ->
// 3970, 1x2048x8192 3848 -> 3826), where a shorter K gained (1x4096x2048 2022 -> 1964, 1x4096x1024 1037 -> 977)
// and so did other strides (1x4000x4096 4364 -> 3832, 1x4090x4096 4233 -> 3926). Not on a chip whose prefetchers
// take few streams (hw::CpuInfo::few_streams_from_memory): Zen 4, 1 thread, median us, broadcast tiles -> one-row
// kernel: 1x4096x4096 6200 -> 2820, 1x4096x11008 14700 -> 7740 (oneDNN 3090, 9330).
constexpr int64_t kGemvAlignedRowsMaxK = 4096;
constexpr int64_t kGemvNear4KiBRowBytes = 256;
// From kGemvManyThreads threads the columns split over them beat the broadcast tiles on any chip, rows near 4 KiB
// apart included (the GPU machine's host, Emerald Rapids, median us of 3 alternated rounds, broadcast tiles ->
// one-row kernel: 16 threads 1x4096x4096 460 -> 262, 1x11008x4096 1092 -> 1040, 1x4096x14336 1825 -> 1437,
// 1x14336x4096 1621 -> 1399, 1x3000x3000 283 -> 241, 1x8192x2048 475 -> 357, 1x2048x8192 483 -> 363; 8 threads 630
// -> 382, 1146 -> 1035, 3261 -> 1521, 3051 -> 1580, 541 -> 256, 820 -> 420, 543 -> 435; 4 threads, one round,
// 1x4096x4096 1893 -> 738, 1x4096x11008 4014 -> 1591). Two threads there measured both ways (1x4096x4096 1676 ->
// 2260, 1x4096x11008 4979 -> 4067) and keep the tiles.
constexpr int kGemvManyThreads = 4;

bool gemv_serves(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads) {
    if (isa < hw::X86Isa::avx512 || p.m != 1 || p.trans_b || p.quantized() || p.k < 1) return false;
    const int64_t a_step = p.trans_a ? p.lda * 4 : 4;
    if ((p.k + 64) * p.ldb * 4 + 1024 >= (int64_t(1) << 31) || p.k * a_step >= (int64_t(1) << 31)) return false;
    if (const char* v = std::getenv("JITMM_X86_GEMV")) return std::atoi(v) != 0;  // 0: never, 1: always
    const int threads = gemv_threads(p, num_threads);
    const bool many_threads = threads >= kGemvManyThreads;
    if (threads > 1 && !many_threads && !(cpu.few_streams_from_memory && threads <= kGemvFewStreamsMaxThreads))
        return false;
    const int64_t row_off_4k = (p.ldb * 4) % 4096;
    if (std::min(row_off_4k, 4096 - row_off_4k) < kGemvNear4KiBRowBytes && p.k >= kGemvAlignedRowsMaxK &&
        !cpu.few_streams_from_memory && !many_threads)
        return false;
    return (p.n >= kGemvMinN && p.k >= kGemvMinK) || (p.n >= kGemvMinNLongK && p.k >= kGemvLongK);
}

X86GemvPlan plan_x86_gemm_f32_gemv(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads) {
    (void)cpu;
    (void)isa;
    X86GemvPlan plan;
    auto& L = plan.layout;
    L.n = p.n;
    L.k = p.k;
    L.a_step = p.trans_a ? p.lda * 4 : 4;
    L.ldb = p.ldb;
    L.streams = static_cast<int>(std::min<int64_t>(kGemvStreams, p.k));
    L.prefetch_bytes = kGemvPrefetchBytes;
    if (const char* v = std::getenv("JITMM_X86_GEMV_STREAMS"))
        L.streams = static_cast<int>(std::clamp<int64_t>(std::atoi(v), 1, std::min<int64_t>(x86::kGemvMaxStreams, p.k)));
    if (const char* v = std::getenv("JITMM_X86_GEMV_PF")) L.prefetch_bytes = std::clamp<int64_t>(std::atoll(v), 0, 1 << 16);
    L.alpha = p.alpha;
    L.beta = p.beta;
    L.bias = p.bias;
    L.activation = p.activation;
    // Each thread takes whole vectors of columns of each batch.
    plan.threads = gemv_threads(p, num_threads);
    plan.n_chunks = static_cast<int>(
        std::min<int64_t>(ceil_div(p.n, 16), balanced_chunks_per_batch(p.batch, plan.threads)));
    return plan;
}

std::string X86GemvPlan::describe() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "avx512 one-row streams=%d prefetch=%lld bytes threads=%d split=1x%d", layout.streams,
                  static_cast<long long>(layout.prefetch_bytes), threads, n_chunks);
    return buf;
}

void X86GemvPlan::append_key(KeyWriter& w) const {
    w.i64('n', layout.n).i64('K', layout.k).i64('a', layout.a_step).i64('L', layout.ldb);
    w.i64('s', layout.streams).i64('p', layout.prefetch_bytes);
}

}  // namespace jitmm::plan
