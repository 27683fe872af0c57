#include "plan/x86_gemm_partition.hpp"

#include "x86/gemm_f32_split_finish.hpp"

#include <algorithm>

namespace jitmm::plan {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Cycles per value a thread copies into a panel, fitted on this VM by running the tasks of 1-D and 2-D
// partitions one after another on one thread (so that only the extra packing differs; 2026-11-23): A rows
// from L3 ~1 (1024^3: 1x16 chunks 17.4 ms, 2x8 14.7, 4x4 14.2, unsplit 12.3-13.3), B as stored ~1.6 and B
// transposed ~1.3 (128x4096x4096 NN: 1x16 33 ms, 2x8 41, 4x4 60; NT: 1x16 28.6, 2x8 33.7). What matters is
// that they weigh the packing a task does alone against its FMAs.
constexpr double kPackACycles = 1.0;
constexpr double kPackBCycles = 1.6;
constexpr double kPackBTransposedCycles = 1.3;

// Cycles per B value a thread streams from memory when B is read in place (about 12 GB/s per thread when
// all of them stream at once): the FMAs of few rows hide under it.
constexpr double kStreamBCycles = 1.0;

// Cycles per value of a row tile another task packed (shared A), read from L3 instead of packed from L2:
// fitted, as the packing costs above, by running the tasks one after another on one thread, where that copy
// is this core's own.
constexpr double kReadSharedACycles = 0.2;
// The same read where another thread packed the tile at the same time: its lines come from that core's L2.
// Fitted at 16 threads on the GPU machine's host, 512^3 NN (1x16 chunks, three alternated rounds): each task
// packing all of A 253-261 us, the tiles shared 297-333 us: reading a shared value costs more than packing
// one's own. On the 2-core VM at 2 threads sharing measured neutral (1024^3, 512^3, 128x4096x4096, 384x768x768
// NT, shared against own, three alternated rounds) or better (196x256x2304: 809-812 against 840-881 us), so the
// remote price is taken from kRemoteShareMinThreads threads on (3 to 8 threads not measured).
constexpr double kReadRemoteSharedACycles = 1.4;
constexpr int kRemoteShareMinThreads = 3;

// Cycles per shared row tile a task takes: its flag's cache line (written by whoever claimed it) and, when
// tasks reach the tile together, the wait for its copy. Short K blocks (decode rows, kc 32) take many.
constexpr double kSharedTileCycles = 200;

// Cycles per line of C that two tasks write (N chunks meeting inside a line when C's rows are not whole
// lines), per row and K block: the line goes from one core to the other each time. 100^3 on 2 threads
// (ldc 400 bytes), alternated: N chunks 8.9-10.4 us, M chunks 7.4-7.7.
constexpr double kSharedCLineCycles = 150;

// Cycles per A value a task reads in place (A not packed, and too large to stay in L2) the first time, from memory or another core's
// cache: a tile's rows are that many concurrent streams of broadcasts, which run at memory latency rather than
// under the FMAs, and N chunks read the same rows once per task. Fitted at 16 threads on the GPU machine's host,
// 784x128x1152 (14x32 tiles, A 3.6 MB in place, B packed; three rounds): 4x4 chunks 237-410 us, 8x2 191-215,
// 16x1 202-251, which the FMAs and B packing alone ranked 4x4 first.
constexpr double kReadInPlaceACycles = 1.5;

// Cycles per partial value the K split's finish reads (parts of C added in order, then the epilogue).
constexpr double kFinishCyclesPerValue = 0.5;

}  // namespace

int64_t balanced_chunks_per_batch(int64_t batch, int threads) {
    const int64_t t = std::max(1, threads);
    batch = std::max<int64_t>(1, batch);
    int64_t best = std::max<int64_t>(1, ceil_div(t, batch));
    double best_busy = 0;
    for (int64_t chunks = best; chunks <= t; ++chunks) {
        const int64_t tasks = batch * chunks;
        const double busy = double(tasks) / double(t * ceil_div(tasks, t));
        if (busy >= 0.85) return chunks;
        if (busy > best_busy + 1e-9) {
            best_busy = busy;
            best = chunks;
        }
    }
    return best;
}

double partition_cycles(const PartitionInput& in, int m_chunks, int n_chunks, bool share_a) {
    const int64_t rows = ceil_div(in.m_tiles, m_chunks);  // row tiles of the largest task
    const int64_t cols = ceil_div(in.n_tiles, n_chunks);  // column panels of the largest task
    const double k = double(in.k);
    // Per tile and k step: the FMA issue (2 a cycle), the loads (~1.5 a cycle) or the FMA latency chain.
    const double step = std::max({in.mr * in.nv / 2.0, (in.mr + in.nv) / 1.5, 4.0});
    const double fma = double(rows) * double(cols) * k * step;
    double pack = 0;
    // A row tile is packed once per N block and K block of the task: a task with few columns repacks its
    // rows for as few FMAs (the 1-D split over N packs all of A in every task).
    const double n_blocks = double(ceil_div(cols * in.nr, in.nc));  // the task's N blocks
    const double a_uses = double(rows * in.mr) * k * n_blocks;        // A values a task reads
    // Shared, a task packs its share of the row tiles of the tasks with its rows and reads the rest packed.
    if (in.pack_a && !share_a) pack += a_uses * kPackACycles;
    if (in.pack_a && share_a) {
        // The tiles a task did not pack itself come from the cores that did, when the tasks run at once.
        const double remote = in.threads >= kRemoteShareMinThreads ? double(n_chunks - 1) / double(n_chunks) : 0.0;
        const double read = (1.0 - remote) * kReadSharedACycles + remote * kReadRemoteSharedACycles;
        pack += double(rows * in.mr) * k * kPackACycles / n_chunks + a_uses * read +
                double(rows) * double(ceil_div(in.k, in.kc)) * n_blocks * kSharedTileCycles;
    }
    if (in.a_in_place_large) pack += double(rows * in.mr) * k * kReadInPlaceACycles;
    if (in.pack_b) pack += double(cols * in.nr) * k * (in.trans_b ? kPackBTransposedCycles : kPackBCycles);
    const double stream = in.b_from_memory ? double(cols * in.nr) * k * kStreamBCycles : 0.0;
    // The rows a task writes, each meeting its neighbours' columns in a line at both ends of its chunk. Where
    // writing C is the work, rows of whole lines cost as much: the cores' stores meet along every row of C
    // (2 threads, median us, N chunks -> M chunks: 2048x4096x16 NT 1192 -> 866-925, 784x192x32 33.5 -> 28.8,
    // 256x256x32 16.2 -> 13.6; at K = 64 the N chunks won: 256x1024x64 NT 98 against 106).
    const double shared_c_lines = (in.c_rows_share_lines || in.c_is_the_work) && n_chunks > 1
                                      ? double(rows * in.mr) * double(ceil_div(in.k, in.kc)) * std::min(2, n_chunks - 1)
                                      : 0.0;
    pack += shared_c_lines * kSharedCLineCycles;
    const int64_t tasks = in.batch * int64_t(m_chunks) * n_chunks;
    const double rounds = double(ceil_div(tasks, std::max(1, in.threads)));
    return rounds * (std::max(fma, stream) + pack);
}

double k_split_partition_cycles(const PartitionInput& in, int k_parts, int n_chunks) {
    // Each part is a batch of its own over a K of its own (tasks in rounds over batch x parts x chunks). Parts
    // are whole K blocks: the longest has ceil(blocks / parts) of them (5 blocks in 4 parts: 2, not 1.25).
    PartitionInput part = in;
    part.batch = in.batch * k_parts;
    part.k = std::min(in.k, ceil_div(ceil_div(in.k, in.kc), k_parts) * in.kc);
    const double finish_values = double(in.m) * double(in.n) * double(k_parts);
    // Small finishes run in the task that completes a batch, larger ones over the threads (run_k_split).
    const double finish_threads = finish_values <= double(x86::kSplitFusedFinishMax) ? 1.0 : double(std::min<int64_t>(in.m, std::max(1, in.threads)));
    return partition_cycles(part, 1, n_chunks, false) + finish_values * kFinishCyclesPerValue * double(in.batch) / finish_threads;
}

Partition choose_partition(const PartitionInput& in) {
    Partition best;
    best.cycles = partition_cycles(in, 1, 1);
    const int64_t per_batch = std::max<int64_t>(1, ceil_div(in.threads, in.batch));
    // Batches that do not share out evenly (3 over 2 threads: one thread runs two) may be cut as well, where the
    // rounds make it a clear win, 7% by the estimate (2 threads, median us, whole batches -> halves: 3290x333x37
    // x3 1704 -> 1231, 1055x29x38 NT x5 72 -> 60, 4x372x777 NT x5 211 -> 178, 514x502x96 NT x5 1637 -> 1368,
    // 49x3791x71 NT x9 2216 -> 2047; 551x14x357 x13 717 -> 738; but 361x32x653 TN x25, priced 4% faster, 2672 ->
    // 3575: two threads reading halves of A's rows of one batch cost more than priced).
    const bool even = (in.batch * per_batch) % std::max(1, in.threads) == 0;
    const int64_t chunks_max = even ? per_batch : std::max<int64_t>(per_batch, in.threads);
    for (int64_t mc = 1; mc <= std::min(in.m_tiles, chunks_max); ++mc) {
        for (int64_t nc = std::min(in.n_tiles, chunks_max / mc); nc >= 1; --nc) {
            for (bool share_a : {false, true}) {
                if (share_a && !in.a_shareable) continue;
                const double cycles = partition_cycles(in, int(mc), int(nc), share_a);
                // 1% better to count (7% for cutting batches that the threads could run whole): among near-equal
                // ones the first found wins (fewer M chunks, then more tasks: every thread streams), so rounding
                // cannot flip the choice between near-identical ones.
                const double margin = mc * nc > per_batch ? 0.93 : 0.99;
                if (cycles < best.cycles * margin) {
                    best.m_chunks = int(mc);
                    best.n_chunks = int(nc);
                    best.share_a = share_a;
                    best.cycles = cycles;
                }
            }
        }
    }
    for (int64_t parts = 2; parts <= std::min<int64_t>(in.k_parts_max, per_batch); ++parts) {
        for (int64_t nc = std::min(in.n_tiles, per_batch / parts); nc >= 1; --nc) {
            const double cycles = k_split_partition_cycles(in, int(parts), int(nc));
            if (cycles < best.cycles * 0.95) {  // a clear win only: the split adds a pass and scratch
                best.m_chunks = 1;
                best.n_chunks = int(nc);
                best.share_a = false;
                best.k_splits = int(parts);
                best.cycles = cycles;
            }
        }
    }
    return best;
}

}  // namespace jitmm::plan
