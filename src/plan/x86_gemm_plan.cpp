#include "plan/x86_gemm_plan.hpp"

#include "plan/x86_gemm_partition.hpp"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace jitmm::plan {

namespace {

struct TileShape {
    int mr, nv;
};

// Candidate register tiles (rows x vectors). Each leaves the B vectors, a broadcast register and
// kEpilogueTemps scratch registers free (plus the column mask register on AVX2); the one-row tiles read B from
// memory (b_from_memory), 1 x 14 being the one-row shapes' (choose_tile).
constexpr TileShape kAvx512Tiles[] = {{6, 4}, {8, 3}, {4, 6}, {14, 2}, {28, 1}, {12, 2}, {2, 8}, {1, 28}, {1, 14}};
constexpr TileShape kFewStreamsOneVectorTile = {12, 1};  // in place of 28 x 1 (choose_tile)
constexpr TileShape kAvx2Tiles[] = {{6, 2}, {3, 3}, {2, 4}, {1, 4}, {12, 1}};
constexpr TileShape kOneRowTile = {1, 14};

// AVX2 keeps its column-tail mask in a vector register; AVX-512 uses an opmask register.
int mask_registers(bool avx512) { return avx512 ? 0 : 1; }

// A tile fits when the main loop (accumulators, B vectors, broadcast) and the epilogue (accumulators and
// kEpilogueTemps scratch) both fit in the vector registers.
// One-row tiles read each B vector straight from memory into its FMA (no B registers: a wider tile). Two rows
// would load every B vector twice, two split loads where B's rows are off 64-byte lines (2x3295x76 NN: 17 us
// with 2 x 14 vectors from memory, 12 with 2 x 8 from registers): they load B into registers.
bool b_from_memory(int mr, bool avx512) { return avx512 && mr == 1; }

bool tile_fits(int mr, int nv, bool avx512) {
    const int regs = (avx512 ? 32 : 16) - mask_registers(avx512);
    const int b_regs = b_from_memory(mr, avx512) ? 0 : nv;
    return mr * nv + b_regs + 1 <= regs && mr * nv + x86::kEpilogueTemps <= regs;
}

// Up to this much work a problem runs as one generated call (the single call, below); past it, the driver
// with a small B read in place is faster, on one thread too (1 thread, alternated: 96^3 11.1 -> 9.9 us,
// 100^3 15.1 -> 13.5 us with 1 MFLOP instead of 2; 64^3 stays a single call, 2.9 us against the driver's 3.1).
constexpr double kMinFlopsPerThread = 1.0e6;

// A thread of the pool is woken for at least this much work: the workers spin between back-to-back calls, so
// a fan-out costs about a microsecond (2 threads: 128x128x64 11.9 -> 7.7 us, 100^3 15.2 -> 10.5 us).
constexpr double kMinFlopsPerExtraThread = 0.5e6;

// Or this many bytes of A and B: a memory-bound thread streams them in ~15 microseconds.
constexpr double kMinBytesPerThread = 256.0 * 1024;

// Tiles of a small problem with a transposed B at most this many for the single generated call (see there).
constexpr int64_t kMaxTransposedSingleCallTiles = 4;

// Packed A shared by the tasks of a call (2048x4096 fits, 4096x4096 does not).
constexpr int64_t kMaxSharedABytes = 48ll << 20;
// One thread keeps a larger A packed for all its N blocks: repacked per N block instead, 4096^3 copies A 8 times
// (paired against the FMA peak on one core, shared -> +3.3% and +4.8%; 2048x4096x11008, 93 MB, +1.5%). Measured
// at one thread only, so several threads keep kMaxSharedABytes.
constexpr int64_t kMaxSharedABytesOneThread = 128ll << 20;

// A K-split part covers at least this much of K (its partial tile costs a store and a reload).
constexpr int64_t kMinSplitK = 512;
// Up to this many bytes of an A row (K), writing C is the work (PartitionInput::c_is_the_work).
constexpr int64_t kCIsTheWorkKBytes = 128;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Estimated cycles of the tile grid: per tile and k step, the largest of the FMA issue (2 per cycle) plus,
// when `l2_lines` is set, the B lines the step streams in from L2 (measured about half a cycle each that
// the FMAs do not hide: from a packed panel in L2, 6x4 tiles reach ~85% of the FMA peak, 8x3 ~89%, 14x2
// ~92%), the load issue (broadcasts and B vectors, ~1.5 per cycle alongside the FMAs), the B vectors
// streaming from memory (about one 64-byte line per 2 cycles) and the FMA latency chain (4 cycles per step
// when few accumulators are live).
double tile_cost(const Problem& p, TileShape t, int vlen, bool l2_lines) {
    const double tiles = double(ceil_div(p.m, t.mr)) * double(ceil_div(p.n, int64_t(t.nv) * vlen));
    const double b_loads = b_from_memory(t.mr, vlen == 16) ? t.mr * t.nv : t.nv;
    const double b_lines = l2_lines ? t.nv * vlen / 16.0 : 0.0;
    const double fma = t.mr * t.nv / 2.0 + 0.5 * b_lines, loads = (t.mr + b_loads) / 1.5, stream = t.nv * vlen / 8.0;
    return tiles * std::max({fma, loads, stream, 4.0});
}

// One row of A (M = 1): tile_cost prices every tile's full rows and vectors, where a one-row problem runs one row
// of each and only the vectors N fills: the taller tiles' FMA and load terms shrink to those of their row tail, and
// the one-row tile (1 x 14) streams only N's vectors. Summed per column tile, each its own pass over K.
double one_row_tile_cost(const Problem& p, TileShape t, int vlen, bool l2_lines) {
    const int64_t nr = int64_t(t.nv) * vlen;
    double cost = 0;
    for (int64_t j = 0; j < p.n; j += nr) {
        const double vectors = double(ceil_div(std::min(nr, p.n - j), vlen));
        const double b_lines = l2_lines ? vectors * vlen / 16.0 : 0.0;
        const double fma = vectors / 2.0 + 0.5 * b_lines, loads = (1.0 + vectors) / 1.5, stream = vectors * vlen / 8.0;
        cost += std::max({fma, loads, stream, 4.0});
    }
    return cost;
}

// Whether B streams from L2 to the FMAs, as far as the tile choice and K block go: more of it than fits beside
// A in L1, and either many row tiles per B block or all of B in L2. With few rows and B from memory, the
// packing traffic dominates: wide panels pack faster (128x4096x4096: 8x3 ~10% ahead of 12x2 and 14x2) and
// shorter K blocks do a little better.
bool b_streams_from_l2(const Problem& p, int64_t l1, int64_t l2) {
    const double b_bytes = 4.0 * double(p.k) * double(p.n);
    return b_bytes > double(l1) / 2 && (p.m >= 256 || b_bytes <= double(l2));
}

// A tile reading A in place (not packed: one row tile or one column panel) with rows whose addresses agree
// modulo 4 KiB steps all of them through the same L1 sets: more than kMaxAliasedRows of them evict each
// other's lines between uses (16x16x8192 NN, lda 8192: 28x1 tiles 120 GFLOP/s, 8x1 162).
constexpr int kMaxAliasedRows = 8;

// Rows of an A tile read in place from a small A that may share L1 sets (the rest of L1 holds the B rows).
constexpr int kMaxInPlaceAliasedRows = 4;

// The most lines that the first lines of `rows` rows lda_bytes apart put into one L1 set (rows that share a
// line count once: an A of a few columns, e.g. K = 1, packs its rows into few lines and aliases nothing).
int aliased_rows(int64_t lda_bytes, int rows) {
    int most = 0;
    for (int i = 0; i < rows; ++i) {
        const int64_t line_i = int64_t(i) * lda_bytes / 64;
        int same = 0;
        for (int j = 0; j < rows; ++j) {
            const int64_t line_j = int64_t(j) * lda_bytes / 64;
            const bool new_line = j == 0 || line_j != (int64_t(j) - 1) * lda_bytes / 64;
            same += new_line && line_i % 64 == line_j % 64;
        }
        most = std::max(most, same);
    }
    return most;
}

// Cycles per k step, per row of A, of packing A: a tile narrower than N reuses each A row tile across its
// panels, so a large A is copied into an L1 panel first (from memory, mostly not overlapped with the FMAs),
// while a tile as wide as N reads every A value once, in place, its rows streaming under the FMAs. Fitted to
// 1 thread here: 3136x64x576 14x32 tiles (A packed) take 1.29x the 6x64 tiles' time, 64x64x4096 1.57x.
constexpr double kPackACyclesPerRow = 1.0;
// An A stored K x M packs into [k][mr] panels by copying runs of mr values per stored row, which the tile as wide
// as N (reading mr values per k in place) does not beat the way it beats an NN copy (1 thread, 3072x77x160 TT:
// 4x96 tiles in place 700 us, 28x16 tiles with A packed 570-580, 14x32 580-600).
constexpr double kPackTransposedACyclesPerRow = 0.25;

// A large A is read in place, not packed, by a tile that crosses N in at most this many panels: its rows stream
// from memory once and stay in L1 for the few panels, where packing costs a copy and the next tile's prefetch
// covers only as many of its rows as there are panels (1 thread, 784x128x1152: 14x32 tiles 138 -> 158 GFLOP/s
// in place; 6x64, K in one block, 168; oneDNN 150-155).
constexpr int64_t kMaxInPlaceAPanels = 4;

// Whether a register tile `nr` wide leaves A to be packed (several panels across N, several row tiles,
// and an A too large to stay in cache): the planner's pack_a rule below, before aliasing.
bool tile_packs_a(const Problem& p, int mr, int64_t nr, int64_t l2) {
    const double a_bytes = 4.0 * double(p.m) * double(p.k), b_bytes = 4.0 * double(p.k) * double(p.n);
    const bool a_small = a_bytes <= double(l2) / 4;
    // (Priced for every tile narrower than N: a large A read in place across its few panels, below, is also
    // slower than the tile as wide as N that reads it once: 3136x64x4608 14x32 in place 0.65x of 6x64.)
    // Except where A and B both stay in L2 and N is up to 3 panels: they then read A's rows from L2 again, not
    // from memory (1 thread, medians of 5 alternated: 335x91x563 14x32 tiles with A in place 174 us, the 4x96
    // tile as wide as N 198; 700x70x256 NT 129-161 against 151-160); four panels lose (250x180x600: 8x48 with
    // A in place 270 us, 14x32 packing A 258).
    const bool panels_read_a_from_l2 =
        !p.trans_a && ceil_div(p.n, nr) < kMaxInPlaceAPanels && a_bytes + b_bytes <= double(l2) * 3 / 4;
    // A stored K x M is packed by any tile (see kPackTransposedACyclesPerRow and the pack_a rule).
    return (ceil_div(p.n, nr) > 1 || p.trans_a) && ceil_div(p.m, mr) > 1 && !a_small && !panels_read_a_from_l2;
}

// Cycles per k step, per column of B, of packing a B as stored: the driver reads a B of few row tiles (at
// most kMaxDirectBRowTiles) in place, one K block of rows at a time, and packs it for more. Where a tile
// with more rows keeps B in place (25-56 rows), that copy is saved (1 thread, 49x512x4608: 14x32 tiles with
// B in place 125 GFLOP/s, 6x64 tiles with B packed 101; 49x128x4608 104 against 91). One thread only: split
// over threads, B in place streams short row pieces per task (2 threads, 49x512x4608: 169 against 190 packed).
constexpr double kPackBCyclesPerColumn = 0.5;
// Several threads split N: a thread's rows of B in place are pieces of N / threads columns, which stream well
// from this many bytes (2 threads, 48x2304x577, 4.6 KB pieces: 12x32 tiles with B in place 558-574 us, 6x64
// with B packed 615-621).
constexpr double kMinInPlaceBPieceBytes = 2048;
constexpr int64_t kMaxDirectBRowTiles = 4;
// k steps ahead that a B read in place from L2 with rows off 64-byte lines has its rows prefetched.
constexpr int kSplitBRowPrefetchSteps = 2;
// Tiles of fewer rows than this are considered only over a few row tiles or one column panel (choose_tile).
constexpr int kMinRowsForManyRowTiles = 6;
// How many k steps ahead a transposed A read in place from memory is prefetched (set below).
constexpr int kTransposedAPrefetchSteps = 16;
// Up to this K the tile's few FMAs cannot hide its C stores' misses: the kernel prefetches the C tile first.
constexpr int64_t kMaxKForCTilePrefetch = 12;

// The row sweep: K at most this long, and at most this many column panels (a call per tile in the sweep's
// loop body). 1 thread, 106 random shapes of K <= 64, driver -> sweep, median of 3 alternated rounds: K 1-4
// 1.23x (912x3x2 2.36 -> 1.06 us, 624x41x2 x4 11.5 -> 7.6, 4030x33x3 NT 20.5 -> 14.8), K 5-16 1.05x, K 17-64
// 1.00x: the driver's next-tile prefetches are worth its cost there. Up to 128 panels (N 4096 on 32-column tiles:
// ~6 KB of calls a row kind; JIT time measured unchanged, 150-220 us first calls either way): 1 thread, median
// of 2 alternated runs, driver -> sweep, 300x4000x2 80.3 -> 73.7 us, 100x3000x4 31.1 -> 28.0, 566x2448x2 TN 91.4 ->
// 85.7, 1000x2200x3 NT 181.7 -> 171.5, 446x2256x1 and 200x5000x8 (past 128) even.
constexpr int64_t kRowSweepMaxK = 16;
constexpr int64_t kRowSweepMaxPanels = 128;
// k steps ahead that a B read in place from memory has its rows prefetched (see b_streams_from_memory).
constexpr int kBRowPrefetchSteps = 32;
constexpr int64_t kFewStreamsKBlock = 8;  // (plan_x86_gemm_f32: one row tile over a B from memory, Zen 4)
// k steps ahead that a B read in place over 5/8 of L2 has its rows prefetched (see b_crowds_l2; 7x390x1233 with
// 412-row K blocks: 8 ahead 41.2 us, 16 39.5-42.2, 32 40.8-40.9; 7x390x1000 with 500-row blocks: 16 ahead
// 28.8-30.5, 32 30.7-31.6).
constexpr int kCrowdedL2BRowPrefetchSteps = 16;
// The least K over which one call's own A and C count as evicting its B (see b_streams_from_memory).
constexpr int64_t kMinKForOwnCallStreamedB = 4 * kBRowPrefetchSteps;
// Row tiles at most that read a B in place past 7/8 of L2 that way (see b_crowds_l2).
constexpr int64_t kMaxCrowdedL2RowTilesPastSevenEighths = 2;
// Fused B packing (fused_packing_fits): the most k steps ahead a packing variant prefetches the B rows it
// reads (1 thread, 70x855x3712: 8 ahead 3110 us, 16 3020, 32 2960, 64 3050), and the fewest worth it; its K
// block (70x855x3712, 14x32 tiles: 464-long blocks 2960 us, 256 2560); the most rows of A and the least K.
constexpr int kFusedPackPrefetchSteps = 32;
constexpr int kMinFusedPackPrefetchSteps = 4;
constexpr int64_t kMaxFusedPackKBlock = 256;
constexpr int64_t kMaxFusedPackRows = 256;
constexpr int64_t kMinFusedPackK = 64;
// Column panels per B block up to which each call prefetches the next row tile's A (set below).
constexpr int64_t kMaxPanelsForNextATilePrefetch = 2;
// B rows read in place within this many bytes of a multiple of 4 KiB apart, over a K past kNear4KiBMaxLongK: K
// blocks of kNear4KiBKBlock rows (see the planner).
constexpr int64_t kNear4KiBRowBytes = 256;
constexpr int64_t kNear4KiBMaxLongK = 384;
constexpr int64_t kNear4KiBKBlock = 64;
constexpr int64_t kNear4KiBMinShareBytes = 1024;

bool tile_packs_large_b(const Problem& p, int mr, int64_t nr, int64_t l2) {
    const bool b_small = 4.0 * double(p.k) * double(p.n) <= double(l2) / 4;
    const bool one_dense_panel = ceil_div(p.n, nr) == 1 && p.ldb <= 2 * nr;  // read in place (b_rows_in_place)
    return !p.trans_b && !b_small && !one_dense_panel && ceil_div(p.m, mr) > kMaxDirectBRowTiles;
}

// How many k steps ahead a packing variant (plan.pack_b_fused) prefetches the rows of B it reads as stored:
// they should come from L2 (the block before prefetched them there), and up to 4 lines in flight per L1 set
// (rows whose stride shares 1 KiB with 4 KiB, an L1 way, fall in 4 sets; 2-3 lines a row); 0 where the
// rows alias too much to be packed so.
int fused_pack_prefetch_steps(int64_t ldb_bytes) {
    const int64_t sets_spanned = 4096 / std::gcd(ldb_bytes, int64_t(4096));  // L1 sets the rows' starts visit
    return static_cast<int>(std::min<int64_t>(kFusedPackPrefetchSteps, sets_spanned * 4 / 3));
}

// Whether a B as stored that the driver packs (NN) is packed by each block's first row tile as it goes
// (plan.pack_b_fused). It pays where few rows share each block (packing is a larger part of the work) and K
// is long enough for the next block's prefetch to matter; with many rows or a short K the copy pass costs
// less than the packing tile's reads of B as stored (1 thread, fused / packed between blocks: 70x855x3712
// 0.79, 83x154x1415 TN 0.85, 113x226x3425 0.87; 459x948x314 x5 1.04, 1476x412x298 1.04, 35x1319x2 x18
// 1.10). The next block's source waits in L2 for a whole block: a K block of rows must not land more than 4
// to an L2 set (16 ways assumed), nor its lines crowd a few L1 sets (fused_pack_prefetch_steps; 128x4096x4096:
// 24.7 ms packed between the blocks, 28.0 fused, on an Intel core). A chip whose caches take rows a multiple
// of 4 KiB apart as well as others (hw::CpuInfo::few_streams_from_memory) has neither limit (Zen 4, 1 thread,
// median us, packed between blocks -> fused: 128x4096x4096 43000 -> 38800 (85% -> 94% of peak), 64x4096x4096
// 25800 -> 21500, 100x2048x2048 9400 -> 8330, 128x4096x11008 122400 -> 114800, 256x4096x4096 84600 -> 82300,
// 128x8192x1024 even).
bool fused_packing_fits(const Problem& p, const X86GemmPlan& plan, int64_t l2, bool strides_alias_freely) {
    if (!plan.pack_b || p.trans_b || p.m > kMaxFusedPackRows || p.k < kMinFusedPackK) return false;
    if (strides_alias_freely) return true;
    const int64_t stride = p.ldb * 4;
    const int64_t l2_way = std::max<int64_t>(4096, l2 / 16);
    const int64_t l2_rows_per_set = kMaxFusedPackKBlock * std::gcd(stride, l2_way) / l2_way;
    return fused_pack_prefetch_steps(stride) >= kMinFusedPackPrefetchSteps && l2_rows_per_set <= 4;
}

TileShape choose_tile(const Problem& p, bool avx512, int64_t lda_bytes_per_row, bool l2_lines, int64_t l2,
                      int num_threads, bool few_streams) {
    const int vlen = avx512 ? 16 : 8;
    TileShape best{0, 0};
    double best_cost = 0, best_one_row = 0;
    int64_t best_passes = 0;
    bool aliasing = false;
    const bool long_b_pieces = num_threads == 1 || 4.0 * double(p.n) / num_threads >= kMinInPlaceBPieceBytes;
    auto consider = [&](TileShape t) {
        // Rows of A are addressed by 32-bit displacements: a huge lda limits the rows per tile.
        if (int64_t(t.mr) * lda_bytes_per_row >= (int64_t(1) << 31)) return;
        // One row: the one-row tile of 14 vectors (its FMAs read B from memory, each vector once) or a taller tile
        // whose row tail loads B into registers (4 x 6 for a long GEMV, as before two-row tiles loaded B into
        // registers: 1x4096x4096 3.6 ms, 4.1 on 1 x 14); not 2 x 8 nor 1 x 28 (1x11008x4096 8.8 -> 10.5 ms).
        if (p.m == 1 && t.mr <= 2 && !(t.mr == kOneRowTile.mr && t.nv == kOneRowTile.nv)) return;
        // A tile of few rows streams its B panel again for every few rows, which the cost below does not price
        // where B is larger than L2 (packed blocks, read from L2 by every row tile): only where it covers M in a
        // few row tiles or N in one panel (1 thread, x464x2935 NN, GFLOP/s, 4x96 / 12x32 / 8x48: M 57 99 / 113
        // / 109, 107 120 / 137 / 139, 160 128 / 149 / 157, 233 140 / 154 / 149; it won ties by its row count).
        if (t.mr < kMinRowsForManyRowTiles && ceil_div(p.m, t.mr) > kMaxDirectBRowTiles &&
            ceil_div(p.n, int64_t(t.nv) * vlen) > 1)
            return;
        const bool a_in_place = !p.trans_a && !(ceil_div(p.m, t.mr) > 1 && ceil_div(p.n, int64_t(t.nv) * vlen) > 1);
        if (a_in_place &&
            aliased_rows(lda_bytes_per_row, static_cast<int>(std::min<int64_t>(t.mr, p.m))) > kMaxAliasedRows) {
            aliasing = true;
            return;
        }
        const double c = tile_cost(p, t, vlen, l2_lines) +
                         (tile_packs_a(p, t.mr, int64_t(t.nv) * vlen, l2)
                              ? (p.trans_a ? kPackTransposedACyclesPerRow : kPackACyclesPerRow) * double(p.m)
                              : 0.0) +
                         (long_b_pieces && tile_packs_large_b(p, t.mr, int64_t(t.nv) * vlen, l2)
                              ? kPackBCyclesPerColumn * double(p.n)
                              : 0.0);
        // M = 1 over the N that one pass of the one-row tile covers: the one-row pricing first, then the fewer
        // passes over K (1 thread, 1x107x1711: 1 x 14 in one pass 7.2 us, 6 x 4 in two 8.8; GFLOP/s 1x100x400
        // 41.3 -> 55.4, 1x107x100 45.9 -> 71.6, 1x100x4096 35.5 -> 42.3), then the cost above as before (a tie
        // keeps the tile it chose: 1x64x1711 stays a single call of 6 x 4, 85 GFLOP/s where 1 x 14 ran 62 in two
        // K blocks). A wider N keeps the cost above (1x4096x4096 on 4 x 6, see the one-row rule).
        const bool one_row_pass = p.m == 1 && p.n <= int64_t(kOneRowTile.nv) * vlen;
        const double one_row = one_row_pass ? one_row_tile_cost(p, t, vlen, l2_lines) : 0.0;
        const int64_t passes = one_row_pass ? ceil_div(p.n, int64_t(t.nv) * vlen) : 0;
        const bool one_row_decides =
            best.mr != 0 && one_row_pass &&
            (one_row < best_one_row * 0.999 || one_row > best_one_row * 1.001 || passes != best_passes);
        const bool better = best.mr == 0 ? true
                            : one_row_decides
                                ? one_row < best_one_row * 0.999 ||
                                      (one_row <= best_one_row * 1.001 && passes < best_passes)
                                : c < best_cost * 0.999 || (c <= best_cost * 1.001 && t.mr * t.nv > best.mr * best.nv);
        if (better) {
            best = t;
            best_cost = c;
            best_one_row = one_row;
            best_passes = passes;
        }
    };
    // A chip whose prefetchers take few streams (hw::CpuInfo::few_streams_from_memory) runs the one-vector tile
    // at 12 rows: 28 rows of A read at once outran them (Zen 4, 1 thread, median us, 28 x 1 -> 12 x 1 (8 x 1):
    // 716x14x934 x2 1169 -> 641 (671), 1576x16x171 394 -> 211 (201), 1098x7x2155 NT 1607 -> 983 (1021),
    // 1352x11x1272 NT x17 21700 -> 13360, 156x14x1350 77 -> 80, 34x11x456 NT x57 820 -> 636; oneDNN 480, 190,
    // 870, 11900, 58, 620).
    if (avx512)
        for (auto t : kAvx512Tiles) consider(few_streams && t.mr == 28 && t.nv == 1 ? kFewStreamsOneVectorTile : t);
    else for (auto t : kAvx2Tiles) consider(t);
    if (aliasing) consider(TileShape{kMaxAliasedRows, 1});  // no more rows than the sets hold
    if (best.mr == 0) best = TileShape{1, avx512 ? 8 : 4};  // one row per tile always fits
    return best;
}

// The next B block's source is prefetched by the microkernel calls of the current block (double-buffered B
// blocks, gemm_f32_kernel.cpp): each call walks `runs` of its rows (B rows, or stored rows for trans_b) at
// `step` bytes per K-loop iteration, so that one call covers about a row and the block's calls cover the
// next block's rows with a quarter to spare where 4 runs a call suffice (counted for one thread: the partition
// is not in the key). JITMM_X86_BPF=0 turns it off (tuning knob).
void set_b_block_prefetch(const Problem& p, X86GemmPlan& plan, int64_t m_tiles) {
    auto& L = plan.layout;
    const int64_t blocks = ceil_div(p.n, plan.nc) * ceil_div(p.k, plan.kc);
    bool on = plan.pack_b && blocks > 1;
    if (const char* v = std::getenv("JITMM_X86_BPF")) on = on && std::atoi(v) != 0;
    if (!on) return;
    const int64_t block_n = std::min(plan.nc, p.n);
    const int64_t rows = p.trans_b ? block_n : plan.kc;
    const int64_t row_bytes = 4 * (p.trans_b ? plan.kc : block_n);
    const int64_t iterations = std::max<int64_t>(1, plan.kc / L.k_unroll);
    const int64_t calls = m_tiles * ceil_div(block_n, plan.nr());
    const int step = static_cast<int>(std::clamp<int64_t>(round_up(ceil_div(row_bytes, iterations), 4), 16, 256));
    const int64_t segments_per_row = ceil_div(row_bytes, step * iterations);
    // At most 4 runs a call: each prefetches a line every 4 iterations (redundantly in between), and 8 of them
    // slowed the calls more than the packing they hide (64x1024x1024 NT: 103 -> 93 GFLOP/s).
    int64_t runs = std::clamp<int64_t>(ceil_div(rows * segments_per_row * 5, 4 * calls), 1, 4);
    const int64_t ld_bytes = p.ldb * 4;
    while (runs > 1 && (runs - 1) * ld_bytes >= (int64_t(1) << 31)) --runs;
    L.b_prefetch_runs = static_cast<int>(runs);
    L.b_prefetch_step = step;
    L.b_prefetch_ld = ld_bytes;
}

// Threads the call's work feeds (at most num_threads): enough work for each, in flops or, for the shapes that
// stream more than they compute, bytes of A and B.
// The flops are counted at two zmm FMAs per cycle (the Intel cores measured): a core that issues fewer spends
// longer on the same flops, so a second thread pays from fewer (hw::CpuInfo::zmm_fma_per_cycle; Zen 4, 2
// threads, median us, one thread -> two: 64^3 4.56 -> 2.8-4.0, 128x64x32 4.65 -> 2.7, 72^3 5.0 -> 4.3).
int work_threads(const Problem& p, int num_threads, const hw::CpuInfo& cpu, bool avx512) {
    const double ab_bytes = 4.0 * double(p.batch) * (double(p.m) * double(p.k) + double(p.k) * double(p.n));
    const double fma_rate = avx512 ? std::clamp(cpu.zmm_fma_per_cycle, 1, 2) / 2.0 : 1.0;
    const double work = std::max(p.flops() / (kMinFlopsPerExtraThread * fma_rate), ab_bytes / kMinBytesPerThread);
    return static_cast<int>(std::min<double>(std::max(1, num_threads), std::max(1.0, work)));
}

}  // namespace

Problem transposed_product_problem(const Problem& p) {
    Problem s = p;
    s.m = p.n;
    s.n = p.m;
    s.trans_a = !p.trans_b;
    s.lda = p.ldb;
    s.trans_b = !p.trans_a;
    s.ldb = p.lda;
    s.stride_a = p.stride_b;
    s.stride_b = p.stride_a;
    if (p.bias == BiasKind::per_column) s.bias = BiasKind::per_row;
    else if (p.bias == BiasKind::per_row) s.bias = BiasKind::per_column;
    return s;
}

// The N block over an A streamed from memory (see the planner).
constexpr int64_t kStreamedANBlockColumns = 2048;

X86GemmPlan plan_x86_gemm_f32(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads) {
    X86GemmPlan plan;
    const bool avx512 = isa >= hw::X86Isa::avx512;
    auto& L = plan.layout;
    L.isa = avx512 ? hw::X86Isa::avx512 : hw::X86Isa::avx2;
    const int64_t l1 = cpu.l1d_bytes > 0 ? cpu.l1d_bytes : 32 * 1024;
    const int64_t l2 = cpu.l2_bytes > 0 ? cpu.l2_bytes : 1024 * 1024;
    const bool l2_lines = b_streams_from_l2(p, l1, l2);
    TileShape tile =
        choose_tile(p, avx512, p.trans_a ? 4 : p.lda * 4, l2_lines, l2, num_threads, cpu.few_streams_from_memory);
    // JITMM_X86_TILE=RxV forces the register tile (rows x vectors): a tuning knob, not for production.
    if (const char* forced = std::getenv("JITMM_X86_TILE")) {
        int r = 0, v = 0;
        if (std::sscanf(forced, "%dx%d", &r, &v) == 2 && r > 0 && v > 0 && tile_fits(r, v, avx512))
            tile = TileShape{r, v};
    }
    L.mr = tile.mr;
    L.nv = tile.nv;
    L.trans_a = p.trans_a;
    L.lda = p.lda;
    L.ldc = p.ldc;
    L.alpha = p.alpha;
    L.beta = p.beta;
    L.bias = p.bias;
    L.activation = p.activation;
    L.k_unroll = 4;
    L.b_from_memory = b_from_memory(L.mr, avx512);
    const int64_t nr = plan.nr();
    // Tuning knobs (not for production): JITMM_X86_PF = B prefetch distance in k steps, JITMM_X86_CPF = 0/1.
    if (const char* v = std::getenv("JITMM_X86_PF")) L.b_prefetch_k = std::max(0, std::atoi(v));
    if (const char* v = std::getenv("JITMM_X86_CPF")) L.c_prefetch = std::atoi(v) != 0;

    // Cache blocking from the probed sizes (defaults when the probe could not tell). The microkernel
    // broadcasts A and loads B vectors: the A row tile (mr x kc) is the operand reused across every B
    // panel, so it stays in L1, while the packed B block (kc x nc) streams from L2 (the BLIS arrangement
    // with the roles of A and B swapped).
    const int64_t m_tiles = ceil_div(p.m, L.mr);
    const int64_t n_tiles = ceil_div(p.n, nr);
    // Threads: no more than the work feeds (the partition, below, shares the tiles out among them).
    const int threads = work_threads(p, num_threads, cpu, avx512);
    // Packing pays when the packed operand is reused: A across the B panels, B across the A row tiles. A
    // small A (a quarter of L2), whose tile rows do not crowd the L1 sets (at most kMaxInPlaceAliasedRows of
    // them 4 KiB apart), is read in place: it is in cache after the first panel and a copy would only cost
    // (128^3 1 thread, A and B hot: 165 -> 180 GFLOP/s).
    const bool a_small = 4.0 * double(p.m) * double(p.k) <= double(l2) / 4;
    // (A transposed: a tile's rows are one line per k, and the lines of successive k are lda apart.)
    const bool a_rows_alias = p.trans_a ? aliased_rows(p.lda * 4, 16) > 2 * kMaxInPlaceAliasedRows
                                        : aliased_rows(p.lda * 4, L.mr) > kMaxInPlaceAliasedRows;
    // A large A stored K x M is packed even by a tile as wide as N: read in place, a tile's mr values per stored
    // row go down K, which the prefetchers do not follow, where the packer walks the stored rows front to back
    // across a group of tiles (1 thread, 1000x50x500 TT: 6x64 tiles reading A in place 1390-1410 us, 14x32 with
    // A packed 676-694; TN 962-984 -> 679-713).
    // Except where one column panel reads each A value once and A stays in L2 between calls: there the copy is
    // a whole extra pass over A (1 thread, TN, packed -> in place: 1367x7x311 171 -> 93 us, 1000x7x311 123 ->
    // 65, 512x8x512 95 -> 51, 256x4x1024 114 -> 56, 1024x16x400 148 -> 107; past L2 the packer's order wins:
    // 2000x7x311 (2.5 MB) 494 -> 591, 3000x3x200 478 -> 923).
    const double a_total_bytes = 4.0 * double(p.batch) * double(p.m) * double(p.k);
    const bool a_read_once_from_l2 = n_tiles == 1 && a_total_bytes <= double(l2) * 7 / 8;
    plan.pack_a = m_tiles > 1 && ((n_tiles > 1 && (a_rows_alias || (!a_small && n_tiles > kMaxInPlaceAPanels))) ||
                                  (p.trans_a && !a_small && !a_read_once_from_l2));
    // JITMM_X86_PACK_A=0/1 forces it (tuning knob).
    if (const char* v = std::getenv("JITMM_X86_PACK_A"))
        plan.pack_a = std::atoi(v) != 0 && (n_tiles > 1 || p.trans_a) && m_tiles > 1;
    // One column panel of densely stored rows (NN, ldb <= 2 nr) is read front to back in place: packing it
    // would only copy it (64x64x16384 1 thread: +10%), and its K blocks need not be short.
    const bool b_rows_in_place = !p.trans_b && n_tiles == 1 && p.ldb <= 2 * nr;
    // A small B as stored (a quarter of L2), beside an A read in place, is read in place too: after the first
    // row tile it is in L2, where a packed copy would also be read from, so the copy is pure cost (1 thread,
    // alternating: 128^3 NN 24.2 -> 21.8 us, 256^3 NN 179 -> 170 us). Not for the small problems the single call
    // serves (its JIT time grows with the tiles).
    const bool b_small_in_place = !p.trans_b && !plan.pack_a && 4.0 * double(p.k) * double(p.n) <= double(l2) / 4 &&
                                  p.flops() / double(p.batch) > kMinFlopsPerThread;
    plan.pack_b = !b_rows_in_place && (p.trans_b || m_tiles > kMaxDirectBRowTiles) && !b_small_in_place;
    // B read in place from memory (few row tiles, B larger than L2: decode-like shapes): each k step prefetches
    // its B row 16 steps ahead, which the hardware prefetchers alone do not keep up with across that many rows
    // (1 thread: 1x4096x4096 NN 7.7 -> 8.6 GFLOP/s, 1x4096x11008 7.9 -> 8.8, 16x4096x4096 67 -> 71; 8 or 32
    // steps ahead gain less). JITMM_X86_PF overrides it.
    // Several threads split N: each reads only its columns' share of B, which is what has to fit in L2 (and
    // then takes long K blocks as a small B does: 17x1023x511 at 16 threads reads 131 KB each, where 32-long K
    // blocks for a B streamed from memory wrote C back 16 times, and the lines that C's unaligned rows share
    // at chunk edges went between the cores each time). Whether B is packed stays a whole-B decision (784x128x
    // 1152, 2 threads: 0.94-0.96 -> 0.91 of oneDNN read in place by its share).
    const double b_share_bytes = 4.0 * double(p.k) * double(p.n) /
                                 double(std::max<int64_t>(1, std::min<int64_t>(threads, n_tiles)));
    const bool b_share_small = !p.trans_b && !plan.pack_a && b_share_bytes <= double(l2) / 4 &&
                               p.flops() / double(p.batch) > kMinFlopsPerThread;
    // Batches that each read their own B stream it from memory too once together they exceed L2 (19x263x924
    // x34: 972 KB per batch, 33 MB in all). The rows are prefetched kBRowPrefetchSteps ahead where that many
    // rows of B take at most a quarter of L2 (the prefetched rows wait there while every column panel of the
    // current rows runs) and B's row stride is not a multiple of 4 KiB (rows further ahead would land in the
    // L1 and L2 sets of the rows in use); else half as far. 1 thread, median us, no prefetch / 16 ahead / 32
    // ahead: 19x263x924 x34 7200 / 5070 / 3880, 8x300x3000 x8 - / 2630 / 2280, 8x2800x3000 - / 2670 / 2280,
    // 30x128x2000 x16 3320 / 2710 / 2620, 5x173x2233 x32 5800 / - / 3750; wide or aliasing rows: 16x11008x4096
    // - / 21700 / 39200, 1x11008x4096 - / 11600 / 15000, 16x4096x4096 - / 6890 / 7430, 8x2048x3000 - / 1830
    // / 1930.
    // So does each batch's own B once the batches' A, B and C together exceed L2, although their Bs alone would
    // fit: each call's batches evict the next call's (75x541x45 TN x19, 97 KB of B a batch, 5 MB in all: 647 ->
    // 462 us; 100x500x64 x16 858 -> 650). Only where B is a quarter or more of a batch's bytes: the later row
    // tiles read B from L2, where the prefetches only take load slots, which a small B does not repay (328x165x34
    // x15, B 8% of a batch: 316 -> 359 us).
    const double b_own_batches = p.batch > 1 && p.stride_b != 0 ? double(p.batch) : 1.0;
    const double b_batch_bytes = 4.0 * double(p.k) * double(p.n);
    const double batch_bytes = b_batch_bytes + 4.0 * (double(p.m) * double(p.k) + double(p.m) * double(p.n));
    // And so does one batch's B whose call, A and C included, exceeds L2: the call's own A and C evict part of
    // B before the next call (1 thread, 32-row K blocks without and with rows prefetched 32 ahead: 36x390x1233 476
    // -> 284 us, 44x390x1233 547 -> 298, 56x390x1233 601 -> 345; medians of 2 alternated rounds, NN: 56x600x800
    // 501 -> 315, 56x300x1500 495 -> 327, 56x700x700 508 -> 341, 48x2000x200 192 -> 173). Not over a K of a few
    // prefetch distances, which the rows ahead overrun (32x4000x100 134 -> 164, 56x4000x100 229 -> 270).
    const bool own_call_evicts_b = b_own_batches == 1 && p.k >= kMinKForOwnCallStreamedB &&
                                   4.0 * b_batch_bytes >= batch_bytes && batch_bytes > double(l2);
    const bool b_streams_from_memory =
        !plan.pack_b && !b_rows_in_place &&
        (b_share_bytes * b_own_batches > double(l2) || own_call_evicts_b ||
         (b_own_batches > 1 && 4.0 * b_batch_bytes >= batch_bytes && batch_bytes * b_own_batches > double(l2)));
    const bool b_far_rows_fit = double(kBRowPrefetchSteps) * double(p.ldb) * 4.0 <= double(l2) / 4 &&
                                (p.ldb * 4) % 4096 != 0;
    // A B read in place from L2 by one row tile of one or two rows (the fewest FMAs per B vector), its rows off
    // 64-byte lines: every B vector is a load split over two lines, and the rows two k steps on are prefetched
    // (1 thread: 1x2155x41 4.66 -> 3.71 us, 1x783x276 10.5 -> 9.0, 2x3295x76 12.2 -> 11.2; rows on whole lines
    // gained nothing, 1x512x512 7.0 -> 7.7). Not for a short K, whose few rows the prefetches run past (1x2265x3
    // TN 0.17 -> 0.34 us), nor for several row tiles reading B again (19x263x924 x34 with one B: 2140 -> 2190),
    // nor for taller tiles (6x82x3822 24.4 -> 28.6).
    const bool b_split_rows_from_l2 = !plan.pack_b && !b_rows_in_place && !b_streams_from_memory &&
                                      m_tiles == 1 && L.mr <= 2 && (p.ldb * 4) % 64 != 0 && p.k >= 16;
    // A B as stored read in place that fills more than 5/8 of L2 (and not more than all of it): between calls
    // part of it leaves L2 (the rest of the call's data, other processes), so its rows are prefetched as from
    // memory, but most of it is still there, so it keeps the long K blocks of a B that fits (past the 3/4 of L2
    // that b_fits_l2 below keeps, it takes them too), not the short ones of a B streaming from memory (1 thread,
    // median us, neither / rows prefetched 16 ahead in 32-row blocks / and in 412-row blocks: 7x390x1233 50-55 /
    // 46-48 / 39.5-42, oneDNN 42; rows prefetched 16 ahead or not, in long blocks: 7x390x800 22.7-23.7 / 22.8-26.7,
    // 7x390x1000 28.8-30.5 / 32.5-33.7, 4x500x700 16.5-17.7 / 19.0-20.8; 7x390x700, 1.1 MB, 19.8 / 19.5).
    // Medians of 2 alternated rounds, NN / TN: 7x390x1233 53.0 -> 40.1 / 54.2 -> 41.6, 8x400x1200 51.5 -> 36.3 /
    // 49.6 -> 36.8, 4x256x1700 26.8 -> 18.4 / 27.1 -> 23.3, 16x500x900 87.4 -> 70.8 / 83.0 -> 76.2, 32x390x1233 195
    // -> 160 / 194 -> 165. Not for tiles of one or two rows, which prefetch their rows two steps ahead where those
    // are off 64-byte lines (2x390x1000 19.2 -> 21.4, 2x400x1200 26.5 -> 28.3), nor for rows a multiple of 4 KiB
    // apart, whose rows ahead land in the L1 sets of the rows in use (2x1024x400 18.5 -> 26.1, 4x1024x400 25.8 ->
    // 28.0, 16x1024x400 69.8 -> 75.1). From 5/8: of a B of 0.6 x L2 many rows lost a little (medians of 3 alternated,
    // NN / TN: 7x500x600 21.0 -> 21.6 / 20.9 -> 21.3, 6x82x3822 22.1 -> 23.2 / 23.1 -> 23.3, 7x150x2000 22.5 -> 24.0 /
    // 22.1 -> 22.6), where 0.7 x L2 still gained (7x1200x300 30.6 -> 23.0 / 30.5 -> 23.5, 6x390x1000 31.8 -> 26.4 /
    // 30.9 -> 26.3).
    // Past 7/8 of L2, B no longer stays there from one row tile to the next: one or two row tiles only (1 thread,
    // median of 2 alternated, 36 to 56 rows over 390x1233, 3 or 4 row tiles of 12x32 or 14x32: 470-570 us ->
    // 610-790; 500x900, 86% of L2, still gained: 36 to 56 rows 187-283 -> 164-254).
    const double b_in_place_bytes = b_share_bytes * b_own_batches;
    const bool b_crowds_l2 = !p.trans_b && !plan.pack_a && !plan.pack_b && !b_rows_in_place && !b_streams_from_memory &&
                             b_in_place_bytes > double(l2) * 5 / 8 && p.flops() / double(p.batch) > kMinFlopsPerThread &&
                             L.mr > 2 && (p.ldb * 4) % 4096 != 0 &&
                             (m_tiles <= kMaxCrowdedL2RowTilesPastSevenEighths || b_in_place_bytes <= double(l2) * 7 / 8);
    if (std::getenv("JITMM_X86_PF") == nullptr) {
        if (b_streams_from_memory) L.b_prefetch_k = b_far_rows_fit ? kBRowPrefetchSteps : kBRowPrefetchSteps / 2;
        else if (b_crowds_l2) L.b_prefetch_k = kCrowdedL2BRowPrefetchSteps;
        else if (b_split_rows_from_l2) L.b_prefetch_k = kSplitBRowPrefetchSteps;
    }
    // With B read in place (few row tiles), short K blocks let every B row stream contiguously across the
    // whole of N (a few dozen concurrent streams the prefetchers follow) instead of hopping between rows.
    // The A row tile may fill 5/8 of L1 where B streams from L2, packed B included (its blocks are packed
    // ahead, between the calls: 128x4096x4096 NT 8x3 tiles 120 -> 126 GFLOP/s with 512-long blocks instead
    // of 376; fewer K blocks, fewer C round trips: 14x2 tiles then run 512-long blocks), a quarter where B
    // comes from memory in place.
    const bool fused_candidate = fused_packing_fits(p, plan, l2, cpu.few_streams_from_memory);
    const int64_t a_budget = l2_lines || plan.pack_b ? l1 * 5 / 8 : l1 / 4;
    // So does a B as stored that fits L2 whole (its row tiles after the first read it from there; 1 thread,
    // 32-long blocks -> 256: 32x410x827 122 -> 108 us, 18x1034x375 85 -> 82, 5x198x1554 20.3 -> 19.0).
    // Not batches that each bring their own B (together they stream from memory: 39x2485x132 x25 5350 -> 12200).
    const bool b_fits_l2 = !p.trans_b && !plan.pack_a && !plan.pack_b && !b_streams_from_memory &&
                           b_share_bytes * b_own_batches <= double(l2) * 3 / 4 &&
                           p.flops() / double(p.batch) > kMinFlopsPerThread;
    int64_t kc_limit = (plan.pack_b || b_rows_in_place || b_small_in_place || b_share_small || b_fits_l2 ||
                        b_crowds_l2)
                           ? std::clamp<int64_t>(a_budget / (int64_t(L.mr) * 4), 64, 512)
                           : 32;
    // B read in place with rows a near multiple of 4 KiB apart over a long K: every 32nd row lands in the same L2
    // sets (2048 of them), and from a few hundred rows they outnumber L2's ways, so B no longer stays there for the
    // next row tile; short blocks keep each block's rows in it (2 threads, N halves read in place, 512-row blocks
    // -> 64: 17x1023x511 265 -> 150-158 us, 17x1024x511 246 -> 136; 300 rows still fit, 17x1023x300 31 us either
    // way, 40x1023x300 60-77 against 74-80 with 64-row blocks). Only where a thread's share of a row spans a KiB
    // or more: narrower pieces spread over the sets (16 threads, 64 columns each: 17x1023x511 52 us with 512-row
    // blocks, 107 with 64).
    const int64_t b_row_off_4k = (p.ldb * 4) % 4096;
    const bool b_rows_near_4k = !p.trans_b && !plan.pack_b && !b_rows_in_place &&
                                std::min(b_row_off_4k, 4096 - b_row_off_4k) < kNear4KiBRowBytes &&
                                b_share_bytes / double(p.k) >= double(kNear4KiBMinShareBytes);
    if (b_rows_near_4k && p.k > kNear4KiBMaxLongK) kc_limit = std::min(kc_limit, kNear4KiBKBlock);
    // A tile as wide as N with A read in place uses each A value once: nothing of A is kept in L1 between
    // calls, so the K block is bounded only by the B block (kc x N) in half of L2. Long K blocks let every A
    // row stream contiguously and save C round trips (1 thread: 4096x16x4096 8x16 tiles 71 -> 106 GFLOP/s
    // with one K block instead of eight, 64x64x4096 6x64 tiles 187 -> 197). Not where a few tiles would
    // leave threads idle unless K is split (the split runs whole K blocks).
    const bool a_read_once = n_tiles == 1 && !plan.pack_a;
    const bool few_tiles_for_threads = num_threads > 1 && p.batch * m_tiles < 4 * int64_t(num_threads);
    if (a_read_once && !few_tiles_for_threads && kc_limit < p.k)
        kc_limit = std::max(kc_limit, std::min<int64_t>(p.k, (l2 / 2) / (4 * round_up(p.n, nr))));
    // (A K that fits one block stays whole: a second block's C round trip costs more than the shorter block
    // gains, 71x630x378 x6 1478 us in blocks of 192, 1263 in one.)
    if (fused_candidate && p.k > kc_limit) kc_limit = std::min<int64_t>(kc_limit, kMaxFusedPackKBlock);
    // One row tile over a B streaming from memory in place, on a chip whose prefetchers take few streams
    // (hw::CpuInfo::few_streams_from_memory, Zen 4): K blocks of kFewStreamsKBlock rows, that many of B's rows
    // streaming across all of N together where 32 outran the prefetchers (1 thread, median us of 5 alternated
    // rounds, 32 -> 8: 3x1112x380 x3 466 -> 353, 4x3668x153 199 -> 143, 2x782x760 TN x13 2770 -> 2230, 4x1286x127
    // x27 1756 -> 1239, 8x4096x4096 7090 -> 5780, 4x11008x4096 16070 -> 14440; 16 rows or 4 were slower than 8).
    // Several row tiles keep 32: each block's C round trip is then several tiles' (32x4096x4096 13.9 -> 16.1
    // ms, 24x2048x3000 4.2 -> 5.4).
    if (cpu.few_streams_from_memory && b_streams_from_memory && m_tiles == 1)
        kc_limit = std::min<int64_t>(kc_limit, kFewStreamsKBlock);
    // JITMM_X86_KC forces the K block: a tuning knob like JITMM_X86_TILE.
    if (const char* forced = std::getenv("JITMM_X86_KC")) kc_limit = std::max(L.k_unroll, std::atoi(forced));
    const int64_t k_blocks = ceil_div(p.k, kc_limit);
    plan.kc = round_up(ceil_div(p.k, k_blocks), L.k_unroll);
    // Two B blocks are in L2 at once (the one in use and the next, packed ahead). A transposed B reused by few
    // row tiles is packed at a high rate against its compute, and its blocks then take an eighth of L2 each
    // instead of half (1 thread, 128x4096x4096 NT: 134 -> 145 GFLOP/s with a quarter; an eighth, medians of 3
    // alternated against a quarter: 128x4096x4096 NT bias+GELU 156 -> 160, 128x4096x11008 NT 158 -> 166,
    // 16x4096x4096 NT 65 -> 74; the same with B's rows padded off 4 KiB strides, so not L2 set aliasing; NN and
    // 512 rows or more measured slower with the smaller block).
    // Fused packing keeps one block in L2 beside the next block's source (prefetched there for its first
    // row tile): a quarter of L2 each (70x855x3712, 256-long K blocks: 855 columns, one block, 3280 us; 544,
    // 2570; 288, 2530).
    const int64_t b_block_bytes = fused_candidate ? l2 / 4 : p.trans_b && m_tiles <= 16 ? l2 / 8 : l2 / 2;
    plan.nc = std::max<int64_t>(nr, b_block_bytes / (plan.kc * 4) / nr * nr);
    // A packed A past a quarter of L3 comes from memory each time it is packed, once per N block (L3 holds it
    // beside B's blocks and C no longer): wider N blocks (their B from L3, a panel at a time) pack it fewer times
    // (1 thread, Zen 4, 2048x4096x4096: 352 columns 657 ms, 1024 637, 2048 629; 2 threads 320 -> 316; 2048^3 160 ->
    // 155, 1024x4096x4096 328 -> 319, 4096^3 1292 -> 1237, 2048x1024x2048 79.8 -> 77.4). An A that L3 holds gains
    // nothing (512x4096x4096, 8 MB: 162 ms -> 168 at 2048 columns; 1024^3 20.0 -> 20.4).
    const int64_t l3_bytes = cpu.l3_bytes > 0 ? cpu.l3_bytes : 32 * 1024 * 1024;
    if (plan.pack_a && plan.pack_b && 4.0 * double(p.m) * double(p.k) > double(l3_bytes) / 4)
        plan.nc = std::max(plan.nc, std::min(round_up(p.n, int64_t(nr)), kStreamedANBlockColumns / nr * nr));
    if (const char* forced = std::getenv("JITMM_X86_NC")) plan.nc = std::max<int64_t>(1, std::atoi(forced) / nr) * nr;
    plan.mc = std::max<int64_t>(L.mr, (l2 / 4) / (plan.kc * 4) / L.mr * L.mr);

    if (plan.pack_a) {
        // Packing keeps A's orientation, so it is a plain copy: rows of kc values (the row stride padded so
        // that the tile's rows do not alias in the same L1 sets), or for a transposed A, k runs of mr values.
        plan.a_panel_ld = p.trans_a ? L.mr : round_up(plan.kc, 16) + 16;
        L.lda = plan.a_panel_ld;
    }
    // The next A row tile's rows are prefetched into L2 while the current tile runs (its copy otherwise
    // waits on memory: ~5% of 1024^3 with cold inputs). JITMM_X86_APF=0 turns it off (tuning knob).
    L.a_prefetch = plan.pack_a && !p.trans_a;
    if (const char* v = std::getenv("JITMM_X86_APF")) L.a_prefetch = L.a_prefetch && std::atoi(v) != 0;
    L.b_packed = plan.pack_b;
    set_b_block_prefetch(p, plan, m_tiles);
    L.ldb = plan.pack_b ? nr : p.ldb;
    if (!plan.pack_b && int64_t(L.k_unroll) * p.ldb * 4 >= (int64_t(1) << 31)) L.k_unroll = 1;

    // Small problems (one K block, no A to pack, a handful of tiles, too little work to share): the driver's
    // loops would cost as much as the arithmetic, so the whole problem becomes one generated function. A
    // transposed B is then packed whole (one block of all its panels) just before that call: a transpose of a
    // few KB costs less than the driver's block loop it replaces (16x16x16 NT: 0.41 us through the dot kernel,
    // whose 256 horizontal sums dominate, against the NN single call's 0.08 us).
    // The single call emits every tile inline, so its JIT time grows with the tiles (64x64x64 NT, 16 tiles: ~22
    // KB of code, 120-175 us against ~27 us for the driver's variants): a transposed B, new to this path, takes
    // it only up to kMaxTransposedSingleCallTiles tiles (8^3 .. 32^3, 16x64x64), keeping JIT time near the
    // dot and driver kernels it replaces.
    const double flops_per_batch = p.flops() / double(p.batch);
    const bool b_fits_single_call = !plan.pack_b || (p.trans_b && m_tiles * n_tiles <= kMaxTransposedSingleCallTiles);
    // (One batch that threads share never is: at two zmm FMAs per cycle none is past the flops above.)
    plan.single_call = !plan.pack_a && b_fits_single_call && p.k <= plan.kc && m_tiles * n_tiles <= 32 &&
                       flops_per_batch <= kMinFlopsPerThread && (threads == 1 || p.batch > 1);
    if (plan.single_call && plan.pack_b) {
        // One block: the panels of all of N (no next block to prefetch).
        plan.nc = round_up(p.n, nr);
        L.b_prefetch_runs = 0;
        L.b_prefetch_step = 0;
        L.b_prefetch_ld = 0;
    }
    // A short K with one K block and one N block: each tile is a few hundred cycles of FMAs, against which the
    // driver's loop and a call per tile cost 15-20% (809x32x4: 3.29 -> 2.76 us as one call); the row sweep runs
    // the row tiles in one generated loop instead. A batch is one task: over several threads only where the
    // batches share them out evenly, the driver's partition of M and N serving the rest (16 threads on the GPU
    // machine's host, median us of 3 alternated rounds, driver -> sweeps of row chunks: 1135x139x2 x52 170 ->
    // 239, 6x3552x13 5.2 -> 8.1; a B packed whole by each of a batch's row chunks: 2 threads, 74x1910x7 NT 14 ->
    // 23).
    const bool sweep_batches_balance = threads == 1 || p.batch % threads == 0 || p.batch >= 4 * int64_t(threads);
    const double packed_b_bytes = 4.0 * double(round_up(p.n, nr)) * double(p.k);
    const bool sweep_fits = !plan.single_call && !plan.pack_a && p.k <= plan.kc && p.k <= kRowSweepMaxK &&
                            n_tiles <= kRowSweepMaxPanels && plan.nc >= p.n && !L.b_from_memory &&
                            sweep_batches_balance && (!plan.pack_b || packed_b_bytes <= double(l2) / 4);
    plan.row_sweep = sweep_fits;
    if (const char* v = std::getenv("JITMM_X86_ROW_SWEEP"); v != nullptr && v[0] != '\0')
        plan.row_sweep = sweep_fits && std::atoi(v) != 0;
    if (plan.row_sweep && plan.pack_b) {
        plan.nc = round_up(p.n, nr);
        L.b_prefetch_runs = 0;
        L.b_prefetch_step = 0;
        L.b_prefetch_ld = 0;
    }
    // A B as stored that the driver packs is packed by each block's first row tile as its FMAs read it (the
    // packing variants store every B vector they load): the copy then costs two stores per k step beside the
    // tile's FMAs instead of a pass with the FMA units idle, and one block buffer in L2 instead of two.
    plan.pack_b_fused = fused_candidate && !plan.single_call && !plan.row_sweep && !L.b_from_memory &&
                        int64_t(L.k_unroll + kFusedPackPrefetchSteps) * p.ldb * 4 < (int64_t(1) << 31);
    if (const char* v = std::getenv("JITMM_X86_FUSED_PACK")) plan.pack_b_fused = plan.pack_b_fused && std::atoi(v) != 0;
    if (plan.pack_b_fused) {
        L.b_source_ldb = p.ldb;
        // (4 steps ahead where rows alias freely: 128x4096x4096 on Zen 4 measured 0, 1, 4, 16 and 32 within 4%,
        // 4 and 16 fastest.)
        const int steps = fused_pack_prefetch_steps(p.ldb * 4);
        L.b_pack_prefetch_k = cpu.few_streams_from_memory ? std::max(kMinFusedPackPrefetchSteps, steps) : steps;
        if (const char* v = std::getenv("JITMM_X86_FUSED_PF")) L.b_pack_prefetch_k = std::max(0, std::atoi(v));
    }
    // A read in place as stored, by row tiles over at most two column panels (the driver's next call soon runs
    // the next row tile), and too large to stay in L2 between calls: each call prefetches the next tile's rows
    // into L1, which the prefetchers do not fetch in time (its rows interleave in K; each A value feeds few
    // FMAs). 1 thread, ratio to oneDNN, medians of 3 alternated rounds: 4096x40x77 x8 0.95 -> 1.50,
    // 12544x64x147 1.04 -> 1.52, 2048x64x256 NT 0.98 -> 1.22, 384x64x384 x16 0.96 -> 1.15, 128x64x128 x96
    // 0.91 -> 1.01, 3136x64x576 1.00 -> 1.12. An A that L2 keeps lost a little (64x64x4096 1.03 -> 0.98,
    // 196x64x384 1.00 -> 0.95, 128x64x128 x12 1.02 -> 0.96), and so did four panels (784x128x1152, every call
    // prefetching the same next rows: 1.01 -> 0.99).
    const int64_t block_panels = ceil_div(std::min(plan.nc, p.n), nr);
    // Tiles of one vector per row are left out: a prefetch per row for every 4 FMAs per row overloads the fill
    // buffers where many cores stream A together (16 threads on the GPU machine's host, 4096x16x4096 on 8x16
    // tiles: 721 -> 897 us, median of 6 alternated rounds; 1 thread gained 4%), while 4096x40x77 x8 (8x48)
    // measured even there (211 / 212).
    L.a_next_tile_prefetch = !plan.pack_a && !p.trans_a && !plan.single_call && !plan.row_sweep && m_tiles > 1 &&
                             L.nv >= 2 &&
                             a_total_bytes >= double(l2) && block_panels <= kMaxPanelsForNextATilePrefetch &&
                             2 * int64_t(L.mr) * p.lda * 4 < (int64_t(1) << 31);
    if (const char* v = std::getenv("JITMM_X86_ANPF")) L.a_next_tile_prefetch = L.a_next_tile_prefetch && std::atoi(v) != 0;
    // An A stored K x M read in place whose batches together exceed L2 (each small enough to stay unpacked)
    // comes from memory a stored row per k step: each step prefetches the row 16 steps on (1 thread,
    // 148x2x85 x64 TT: 486-560 -> 355 us; 4 and 8 steps ahead 400-420).
    L.a_prefetch_k = p.trans_a && !plan.pack_a && a_total_bytes > double(l2) ? kTransposedAPrefetchSteps : 0;
    // Each call prefetches the next call's C tile into L2 over its first iterations, so that an epilogue
    // that reads C (every K block after the first) does not wait on memory. Not for the single call, nor
    // where the K loop needs r11 for a step beyond 32 bits. JITMM_X86_CNPF=0 turns it off (tuning knob).
    const int64_t a_step = L.trans_a ? L.lda * 4 : 4, b_step = L.ldb * 4;
    L.c_next_prefetch = !plan.single_call && !plan.row_sweep && p.ldc * 4 < (int64_t(1) << 31) &&
                        int64_t(L.k_unroll) * std::max(a_step, b_step) < (int64_t(1) << 31);
    if (const char* v = std::getenv("JITMM_X86_CNPF")) L.c_next_prefetch = L.c_next_prefetch && std::atoi(v) != 0;
    // A K of a few steps leaves the tile's stores nothing to overlap with: each store missing L1 waits in the
    // store buffer for its line, one after the other. Prefetching the tile's C lines before the K loop asks for
    // them all at once (1 thread, median us: 31x1237x5 5.2 -> 3.2, 3853x613x3 NT x24 37000 -> 24000, 1846x77x8
    // x28 950 -> 700; K of 16 measured even). Not where C stays in L1 between calls, nor for fewer columns
    // than a vector (a line or two per tile row: the prefetches cost more than they hide, 2014x4x4 2.27 ->
    // 2.46 us). The tuning knob JITMM_X86_CPF (above) overrides it.
    const double c_total_bytes = double(p.batch) * double(p.m) * double(p.n) * 4.0;
    if (std::getenv("JITMM_X86_CPF") == nullptr)
        L.c_prefetch = p.k <= kMaxKForCTilePrefetch && p.n >= 16 && c_total_bytes > double(l1);

    // Threads (computed above): tile-aligned chunks, batches first. The partition changes only
    // the driver, never the generated code, so it stays out of the key (a cache serves any thread count).
    plan.threads = threads;
    // Few tiles and a long K: the tiles alone cannot feed (or evenly share out to) the threads, so K is cut
    // into parts of whole K blocks, each part at least kMinSplitK long (choose_k_splits, below). A few row
    // tiles over a long K may also take K parts x N chunks where M x N chunks would pack the same B columns
    // in several tasks (49x512x4608 at 16 threads: 2 x 8 chunks, B packed twice), if the partition's model
    // finds it cheaper. Whether the split variants exist depends on the shape only (it is in the key); how
    // many parts run depends on the thread count.
    const int64_t units = p.batch * m_tiles * n_tiles;
    const int64_t k_blocks_total = ceil_div(p.k, plan.kc);
    const int64_t max_parts = std::min<int64_t>(k_blocks_total, p.k / kMinSplitK);
    const bool few_row_tiles = m_tiles <= kSplitMaxRowTiles;
    plan.k_split_ready = !plan.single_call && !plan.row_sweep && (units <= kSplitMaxUnits || few_row_tiles) && max_parts >= 2 &&
                         p.n <= x86::kSplitFinishMaxWidth;
    // Each batch's C is cut into M x N chunks by the partition's cost model: a 1-D split over N makes every
    // task pack all of A for a few panels (512^3 on 16 threads: 16 x 1 tiles), a 2-D one shares the packing.
    if (plan.row_sweep) {
        plan.m_chunks = 1;
    } else if (!plan.single_call) {
        PartitionInput in;
        in.batch = p.batch;
        in.m_tiles = m_tiles;
        in.n_tiles = n_tiles;
        in.mr = L.mr;
        in.nr = static_cast<int>(nr);
        in.nv = L.nv;
        in.k = p.k;
        in.kc = plan.kc;
        in.nc = plan.nc;
        in.c_rows_share_lines = (p.ldc * 4) % 64 != 0;
        in.c_is_the_work = p.k * 4 <= kCIsTheWorkKBytes;
        in.pack_a = plan.pack_a;
        in.a_in_place_large = !plan.pack_a && !a_small;
        in.pack_b = plan.pack_b;
        in.trans_b = p.trans_b;
        in.b_from_memory = b_streams_from_memory;
        in.threads = threads;
        in.m = p.m;
        in.n = p.n;
        in.k_parts_max = plan.k_split_ready && units > kSplitMaxUnits ? max_parts : 1;
        // Shared packed A tiles are read back from L3 by the tasks, and their buffer stays with the calling
        // thread for its next calls: at most a quarter of L3 and the cap above of them. One thread shares
        // them between its N blocks (A packed once instead of once per N block: 1 thread, medians of 3
        // alternating, 1024^3 166 -> 180 GFLOP/s, 2048^3 169 -> 179, 128x11008x4096 138 -> 143; measured
        // since against the FMA loop run just before each call, 1024^3 loses: see below).
        const int64_t l3 = cpu.l3_bytes > 0 ? cpu.l3_bytes : 32 * 1024 * 1024;
        const double shared_a_bytes = 4.0 * double(p.batch) * double(round_up(p.m, L.mr)) *
                                      double(round_up(p.k, 16) + 16 * ceil_div(p.k, plan.kc));
        const int64_t shared_a_cap = threads == 1 ? kMaxSharedABytesOneThread : kMaxSharedABytes;
        in.a_shareable = plan.pack_a && shared_a_bytes <= std::min<double>(double(l3) / 4, double(shared_a_cap));
        const Partition part = choose_partition(in);
        plan.m_chunks = part.m_chunks;
        plan.n_chunks = part.n_chunks;
        plan.share_a = part.share_a;
        plan.k_splits = part.k_splits;
        // One thread reads the shared copy back from L3 in each later N block, which the model prices too low
        // against packing A again from L2-prefetched rows: with two N blocks that loses (1024^3, paired against
        // the FMA peak on one core, three runs: unshared +2.3%, +3.0%, +2.9%); four tie (2048^3: +1.0%, -0.6%);
        // eight win (4096^3: shared +3.3%, +4.8%).
        if (threads == 1 && ceil_div(p.n, plan.nc) <= 2) plan.share_a = false;
        if (const char* v = std::getenv("JITMM_X86_SHARE_A")) plan.share_a = plan.pack_a && std::atoi(v) != 0;
        // JITMM_X86_SPLIT=MxN[xK] forces the chunks of a batch and the K parts (tuning knob; clamped to the
        // tiles; K parts only where the split variants exist, and then over all rows).
        if (const char* forced = std::getenv("JITMM_X86_SPLIT")) {
            int mcs = 0, ncs = 0, kps = 1;
            if (std::sscanf(forced, "%dx%dx%d", &mcs, &ncs, &kps) >= 2 && mcs > 0 && ncs > 0) {
                plan.m_chunks = static_cast<int>(std::min<int64_t>(m_tiles, mcs));
                plan.n_chunks = static_cast<int>(std::min<int64_t>(n_tiles, ncs));
                plan.k_splits = plan.k_split_ready ? static_cast<int>(std::clamp<int64_t>(kps, 1, max_parts)) : 1;
                if (plan.k_splits > 1) plan.m_chunks = 1;
            }
        }
        if (plan.k_splits > 1) plan.share_a = false;
    }

    if (plan.k_split_ready && threads > 1 && units <= kSplitMaxUnits) {
        plan.k_splits = choose_k_splits(units, p.batch, threads, max_parts);
        if (plan.k_splits > 1) {
            plan.m_chunks = plan.n_chunks = 1;  // each part task covers every tile
            plan.share_a = false;
        }
    }
    return plan;
}

// An A stored K x M over few columns: the broadcast tiles read mr values of A per k step from a new stored row
// (a walk down K the prefetchers do not follow, one broadcast per A value) and fill a vector per row with N
// columns, most of its lanes padding. Computed as C^T = op(B)^T op(A)^T, A's stored rows are the swapped
// problem's B rows, read front to back into full vectors along M, and the few columns are its rows; the scratch
// C^T is then transposed into C (and C into it first, with beta). 1 thread, median us, in place -> C transposed:
// 2523x4x164 TN 142 -> 31, 2508x17x180 TN 234 -> 112, TT 166 -> 110, 5046x4x328 TN 1121 -> 446, 3000x3x200 TN
// 389 -> 124, 1367x7x311 TN 93 -> 40, 512x8x512 TN 44 -> 19.6, 148x2x85 x64 TN 253 -> 185, 64x4x32 x16 TN 5.3 ->
// 2.6, 300x5x20 x8 TN 8.5 -> 5.4, 2000x8x1000 TT 1314 -> 527, 1024x16x2048 TN 1442 -> 749. Not kept: a K under
// kCTransposedMinK, where the transposes outweigh the K loop (2508x17x12 TN 11.5 -> 14.3, 2508x17x16 14.2 ->
// 15.3), nor kCTransposedMaxN columns or more (2508x24x90 TT 72.7 -> 74.4, 2508x31x180 TT 172 -> 184), nor an A
// stored M x K, which the swapped problem would transpose whole (2477x3x12 x10 NN 64 -> 93, 2085x11x96 x2 NN 75
// -> 101).
// The same pays for up to kCTransposedWideMaxN columns where A does not stay in L2 (the broadcast tiles then
// pack the transposed A by groups of row tiles, a pass over A per column panel, which a few panels' FMAs do not
// repay) and K is long enough for the swapped problem's few rows (N) to run at speed: it is an NN or TN problem
// of N rows over B = A as stored, whose blocks its first row tile packs as it goes (1 thread, median of 2
// alternated rounds, in place -> C transposed, TT / TN: 1330x32x2000 2609 -> 1370 / 2546 -> 1378 us, 3386x64x2000
// 8508 -> 5676 / 8559 -> 6115, 1000x128x1000 1.41x / 1.34x, 3000x128x200 1.10x / 1.10x, 1330x256x500 1.07x /
// 1.06x, 400x256x2000 1.27x / 1.15x, 3386x59x2345 TT 9670 -> 6390). Not kept: K under kCTransposedWideMinK
// (3386x256x100 0.70x, 3386x128x100 0.81x / 0.77x), more columns (3000x384x200 0.85x / 0.86x, 1000x1024x200
// 0.81x / 0.76x), an A within L2 (100x32x1000 0.98x / 0.79x, 1330x64x100 1.03x / 0.97x). Under
// kCTransposedWideMinN columns one thread only: at 16 threads (the GPU machine's host, median of 3 alternated
// rounds) 1330x32x2000 TN ran 482 -> 898 us, 3386x24x2000 TN 914 -> 1521, 3386x32x500 TT 273 -> 392, where from
// 64 columns it gained (1330x64x500 TT 177 -> 119, 1000x128x1000 TN 424 -> 281, 3386x64x2000 TN 1403 -> 1164).
constexpr int64_t kCTransposedMinK = 20;
constexpr int64_t kCTransposedMaxN = 24;
constexpr int64_t kCTransposedMinM = 64;
constexpr int64_t kCTransposedWideMaxN = 256;
constexpr int64_t kCTransposedWideMinK = 200;
constexpr int64_t kCTransposedWideMinN = 48;
// Up to kCTransposedShortKMaxN columns it pays from a K of kCTransposedShortKMinK where A passes L2 (1 thread,
// Zen 4, median of 2 alternated rounds, TN in place -> C transposed: 3637x43x105 523 -> 369 us, 3637x64x105 623 ->
// 521, 3637x96x105 840 -> 772, 3637x32x150 552 -> 392, 2000x43x150 414 -> 291, 2000x96x150 647 -> 547; a K of 50
// lost, 3637x64x50 228 -> 252, 3637x96x50 346 -> 380, and an A within L2 gained little, 2000x43x105 178 -> 170).
constexpr int64_t kCTransposedShortKMaxN = 96;
constexpr int64_t kCTransposedShortKMinK = 100;

bool serves_with_c_transposed(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads) {
    if (isa < hw::X86Isa::avx512 || p.quantized()) return false;
    const bool fits = p.m > 1 && p.n > 1 && p.k > 1;
    if (const char* v = std::getenv("JITMM_X86_CT")) return fits && std::atoi(v) != 0;
    if (!fits || !p.trans_a) return false;
    const bool few_columns =
        p.n < kCTransposedMaxN && p.k >= kCTransposedMinK && p.m >= kCTransposedMinM && p.m >= 4 * p.n;
    const double a_bytes = 4.0 * double(p.batch) * double(p.m) * double(p.k);
    const bool a_past_l2 = a_bytes > double(cpu.l2_bytes) * 7 / 8;
    const bool k_pays = p.k >= kCTransposedWideMinK || (p.n <= kCTransposedShortKMaxN && p.k >= kCTransposedShortKMinK);
    const bool wide_past_l2 =
        p.n <= kCTransposedWideMaxN && k_pays && p.m >= p.n && a_past_l2 &&
        (p.n >= kCTransposedWideMinN || num_threads <= 1);
    return few_columns || wide_past_l2;
}

int choose_k_splits(int64_t units, int64_t batch, int threads, int64_t max_parts) {
    if (threads <= 1 || max_parts < 2 || batch < 1 || units % threads == 0 || units >= 4 * int64_t(threads)) return 1;
    // One task per (batch, part), each over all of its batch's tiles, at most one task per thread.
    const int64_t parts = std::min<int64_t>(max_parts, threads / batch);
    if (parts < 2) return 1;
    // Makespans in tile-K units: unsplit, the tiles shared out whole; split, the tasks in rounds.
    const double unsplit = double(ceil_div(units, threads));
    const double split = double(ceil_div(batch * parts, threads)) * double(units) / double(batch * parts);
    return split <= 0.9 * unsplit ? static_cast<int>(parts) : 1;
}

std::string X86GemmPlan::describe() const {
    char prefetch[96] = "";
    if (layout.b_prefetch_runs > 0)
        std::snprintf(prefetch, sizeof prefetch, " prefetchB=%dx%d", layout.b_prefetch_runs, layout.b_prefetch_step);
    if (layout.c_prefetch) std::strncat(prefetch, " prefetchCtile", sizeof prefetch - std::strlen(prefetch) - 1);
    if (layout.c_next_prefetch) std::strncat(prefetch, " prefetchC", sizeof prefetch - std::strlen(prefetch) - 1);
    if (layout.a_next_tile_prefetch)
        std::strncat(prefetch, " prefetchAnext", sizeof prefetch - std::strlen(prefetch) - 1);
    if (layout.a_prefetch_k > 0) std::strncat(prefetch, " prefetchAk", sizeof prefetch - std::strlen(prefetch) - 1);
    if (layout.store_s32) std::strncat(prefetch, " storeS32", sizeof prefetch - std::strlen(prefetch) - 1);
    if (layout.b_prefetch_k > 0) {
        char rows[32];
        std::snprintf(rows, sizeof rows, " prefetchBrows=%d", layout.b_prefetch_k);
        std::strncat(prefetch, rows, sizeof prefetch - std::strlen(prefetch) - 1);
    }
    char buf[320];
    std::snprintf(buf, sizeof buf, "%s tile %dx%d kc=%lld mc=%lld nc=%lld %s%s%s%s threads=%d split=%dx%dx%d%s%s",
                  hw::isa_name(layout.isa), layout.mr, nr(), static_cast<long long>(kc),
                  static_cast<long long>(mc), static_cast<long long>(nc),
                  pack_b_fused ? "packB(fused)" : pack_b ? "packB" : "directB",
                  pack_a ? " packA" : "", single_call ? " single-call" : row_sweep ? " row-sweep" : "", k_split_ready ? " ksplit-ready" : "",
                  threads, m_chunks, n_chunks, k_splits, share_a ? " sharedA" : "", prefetch);
    return buf;
}

void X86GemmPlan::append_key(KeyWriter& w) const {
    w.i64('I', static_cast<int64_t>(layout.isa)).i64('r', layout.mr).i64('v', layout.nv);
    w.i64('u', layout.k_unroll * 2 + (layout.b_from_memory ? 1 : 0));
    w.i64('p', (pack_b ? 1 : 0) | (pack_a ? 2 : 0) | (single_call ? 4 : 0) | (k_split_ready ? 8 : 0) |
                   (row_sweep ? 16 : 0));
    w.i64('L', layout.ldb);
    w.i64('l', layout.lda).i64('o', layout.trans_a ? 1 : 0);
    w.i64('K', kc).i64('M', mc).i64('N', nc);
    w.i64('f', layout.b_prefetch_k * 4 + (layout.c_prefetch ? 1 : 0) + (layout.a_prefetch ? 2 : 0));
    w.i64('q', layout.a_prefetch_k);
    w.i64('P', layout.b_prefetch_runs).i64('S', layout.b_prefetch_step).i64('D', layout.b_prefetch_ld);
    w.i64('c', (layout.c_next_prefetch ? 1 : 0) | (layout.a_next_tile_prefetch ? 2 : 0));
    if (pack_b_fused) w.i64('F', layout.b_source_ldb).i64('G', layout.b_pack_prefetch_k);
    if (layout.store_s32) w.i64('Z', 1);
}

}  // namespace jitmm::plan
