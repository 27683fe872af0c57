#include "plan/x86_dot_plan.hpp"

#include "plan/x86_gemm_partition.hpp"
#include "plan/x86_gemm_plan.hpp"
#include "x86/transpose_a_rows.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace jitmm::plan {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How far along its own row each streaming Bt row is prefetched where the next column tile is too far ahead (1
// thread, 3 alternated rounds: 1x11008x4096 NT 10.9 ms without, 10.7 at 1 KiB, 10.2 at 2 KiB).
constexpr int64_t kDotPrefetchAlongRowBytes = 2048;
// Threads up to which the dot kernels prefetch streaming Bt rows at all (measured better at 1 and 2, worse at 16).
constexpr int kDotPrefetchMaxThreads = 4;
// How far along its own row each A row streaming from memory is prefetched (many rows over few columns), and how
// far into L2 where A streams once (see the plan's rows_outer).
constexpr int64_t kDotPrefetchAlongABytes = 1024;
constexpr int64_t kDotPrefetchStreamABytes = 32 * 1024;

struct DotTile {
    int mr, nj;
    bool covering_only = false;  // taken only where its rows cover all of M
};

// Few rows: wide tiles amortize each A load over many B rows. More rows: square-ish tiles balance the A
// and B loads per FMA. Up to 7 rows, one tile as tall as M reads each Bt row once: rows split over several
// tiles re-read Bt from L2 per tile, which cost more than the A loads a tall tile adds (1 thread, median us,
// two alternated rounds, NT: 7x4096x4096 7430-7560 on 1x24 -> 5060-5190 on 7x3; 5x4096x4096 6470-6700 on 1x24
// -> 4490-4670 on 5x5; 6x1000x2048 669 -> 602-619 on 6x4; 7x256x256 9.0 -> 6.9-7.0; 7x64x64 even). Past 8
// rows no tall tile fits the registers, and the 7x3 or 6x4 halves measured even or slower (16x4096x4096).
constexpr DotTile kAvx512DotTiles[] = {{1, 24}, {2, 12}, {3, 8}, {4, 6}, {5, 5, true}, {6, 4, true}, {7, 3, true}};
constexpr DotTile kAvx2DotTiles[] = {{1, 10}, {2, 5}, {3, 3}};
// Bt rows one row reads at once from memory where the prefetchers take few streams (plan_x86_gemm_f32_dot).
constexpr int kFewStreamsRows = 8;

}  // namespace

int balanced_tile_width(int64_t n, int widest, int threads) {
    auto slowest_columns = [&](int nj) {
        const int64_t tiles = ceil_div(n, nj);
        return std::min(n, ceil_div(tiles, std::min<int64_t>(tiles, threads)) * nj);
    };
    // Only for a clear gain: a narrower tile loads A more often per FMA, which counts where B is in cache.
    int best = widest;
    for (int nj = widest - 1; nj >= (widest + 1) / 2; --nj)
        if (slowest_columns(nj) < slowest_columns(best) && slowest_columns(nj) <= 0.95 * slowest_columns(widest))
            best = nj;
    return best;
}

// Fewer columns than most of a vector, with many rows: the broadcast family's vectors run along N, so most of their
// lanes are padding (23x7x1892 NT: 7 of 16), where the dot kernel's vectors run along K and stay full. Only a K of
// several vectors (the horizontal sums then cost little), an A stored M x K (the dot family would copy a K x M one
// into rows) and an A per batch that stays in cache across the column tiles (each re-reads it); a short K (under
// kDotFewColumnsLongK) only for at most half a vector of columns, and not over batches whose A streams from memory.
// 1 thread, median us, broadcast -> dot: 23x7x1892 x7 197 -> 41, 17x3x5000 47 -> 5.3, 52x5x784 12.9 -> 2.7,
// 36x7x1886 34 -> 9.3, 200x8x1000 41 -> 23, 300x12x512 34 -> 24, 512x8x256 25.6 -> 14.8, 300x7x128 8.4 -> 5.2,
// 64x4x1024 x32 930 -> 697, 256x10x256 x4 54 -> 37; not kept: 100x15x100 2.5 -> 3.9, 100x11x100 2.2 -> 2.6,
// 300x7x32 2.3 -> 3.2, 2000x9x64 26 -> 32, 256x14x256 x8 272 -> 359, 1000x12x200 34 -> 40 (short K, over half a
// vector), 256x10x256 x8 263 -> 309 (A past L2), 1000x10x1000 341 -> 562 (A 4 MB: from memory), 100x7x300 TT 6.9 ->
// 15.2 (the copy). Over a long K up to a vector less one: 256x13x1024 69 -> 43, 256x15x1024 64 -> 43. AVX2 (8-float
// vectors): 23x7x1892 x7 102 -> 57, 1000x4x200 30 -> 17; 512x8x256 19 -> 24 and 300x7x128 6.3 -> 7.2 (over half a
// vector on a short K) not kept. Over half a vector, batches whose As pass L2 between them keep the broadcast
// tiles: each column tile re-reads the row tile's A rows, which half a vector of columns spares (1 thread, Zen 4,
// median us, dot -> broadcast: 65x14x2000 x24 1573 -> 1169, 212x9x1066 x7 759 -> 573, 256x13x1024 x4 566 -> 391,
// 30x10x3000 x16 629 -> 542; one batch keeps the dot kernel, 212x9x1066 42 against 63).
// A K from 64 (not 128) since B's transposing pack became the broadcast family's cost over few columns (1 thread,
// median us of 3 alternated rounds, broadcast -> dot: 17x5x114 x4 1.73 -> 0.84, x1 0.46 -> 0.24, x32 13.5 -> 6.8,
// 34x5x114 x4 3.30 -> 1.60, 17x5x64 x4 0.98 -> 0.55, 17x8x100 x4 1.49 -> 1.01, 64x4x64 x16 11.7 -> 5.7, 300x7x64
// 3.25 -> 2.65, 200x5x100 3.22 -> 1.98, 2000x5x64 21.0 -> 13.2, 23x7x96 x7 3.18 -> 1.89, 100x3x80 x10 13.4 -> 5.8).
constexpr int64_t kDotFewColumnsMinK = 64;
constexpr int64_t kDotFewColumnsLongK = 512;
constexpr double kDotFewColumnsMaxABytes = 1024.0 * 1024;

bool few_columns_long_k(const Problem& p, hw::X86Isa isa) {
    const int64_t vlen = x86::vector_length(isa >= hw::X86Isa::avx512 ? hw::X86Isa::avx512 : hw::X86Isa::avx2);
    const double a_bytes = 4.0 * double(p.m) * double(p.k);
    const double a_all_bytes = p.stride_a != 0 ? a_bytes * double(p.batch) : a_bytes;
    const bool long_k = p.k >= kDotFewColumnsLongK;
    return p.m > 16 && (p.n <= vlen / 2 || (long_k && p.n < vlen && a_all_bytes <= kDotFewColumnsMaxABytes)) &&
           !p.trans_a && p.k >= kDotFewColumnsMinK &&
           a_bytes <= kDotFewColumnsMaxABytes && (long_k || a_all_bytes <= kDotFewColumnsMaxABytes);
}

// B stored K x N (NN) over few columns and many rows: the broadcast family's vectors run along N, one FMA per A
// value for a handful of useful lanes, where the dot kernel reads A's rows whole with its vectors along K after a
// copy of B^T (N x K, small: b_rows in the kernel). Its horizontal sums cost a few instructions per output, which
// a K of 4 (N + 2) repays from 2 columns to half a vector. 1 thread, median GFLOP/s, broadcast -> dot, M = 300 /
// 3000: 2x16 20.4 -> 24.0 / 18.1 -> 26.3, 2x12 20.1 -> 14.9 (not kept), 3x24 32.3 -> 29.8 / 30.2 -> 31.6, 3x32
// 31.6 -> 41.9, 4x24 43.9 -> 44.8 / 41.0 -> 46.8, 5x24 54.3 -> 43.2 (not kept), 5x32 52.5 -> 60.8 / 49.4 -> 66.0,
// 6x32 63.0 -> 69.4, 7x32 73.0 -> 71.5 / 69.1 -> 75.6 (not kept), 7x48 73.7 -> 88.3, 8x48 85.5 -> 97.3, 8x512
// 87.7 -> 173.6 / 30.8 -> 45.2; 3050x2x30 17.3 -> 9.8 us, 1000x7x230 37 -> 22.9 us. More columns (two column
// tiles) measured both ways and are left to the broadcast tiles: 300x15x512 138.5 -> 187.7, 3000x12x128 124.3 ->
// 142.7, but 690x15x3097 99.3 -> 66.9, 25x11x3084 126.2 -> 91.9, 1676x14x994 82.7 -> 66.5. AVX2 (8-float
// vectors, whose broadcast tiles waste fewer lanes): from a K of 16 N up to half a vector (4x24 49.1-51.8 ->
// 36.8-37.2, 4x32 even, 4x64 49-55 -> 55-60, 3x24 32.4 -> 44.6 / 38.5 -> 39.8, 2x16 19.1 -> 29.9). The copies of
// B^T (one per batch that has its own B) at most kDotMaxBCopyBytes. Under kDotBAsStoredManyRows rows AVX-512 too
// takes a K of 16 N (median of 3 alternated rounds, GFLOP/s: 17x4x50 39.3 -> 33.3, 21x8x64 83.3 -> 69.4, 24x8x64
// 79.3 -> 72.9 not kept; 17x2x64 19.2 -> 26.2, 21x3x100 31.7 -> 46.2, 17x6x200 64.5 -> 81.6; 32x4x50 37.6 ->
// 45.6, 32x8x64 73.5 -> 80.7).
constexpr double kDotMaxBCopyBytes = 1024.0 * 1024;
constexpr int64_t kDotBAsStoredManyRows = 32;
constexpr int64_t kDotBAsStoredWholeK = 64;
constexpr int64_t kDotBAsStoredMinKWide = 40;
// Up to 16 rows (AVX-512) only up to 5 columns: the broadcast tile's one vector is then under a third useful (1
// thread, Zen 4, median us of 3 alternated rounds, broadcast -> dot: 15x2x2126 x12 131 -> 87-109, 16x4x1000 4.4
// -> 1.8-2.6, 16x5x1000 4.4 -> 2.5, 8x3x500 1.13 -> 0.6-0.96, 4x2x300 0.38 -> 0.21-0.33, 16x3x100 x32 14.2 -> 7.1,
// 13x4x3000 10.6 -> 5.0-6.7, 2x2x1000 x8 8.6 -> 3.6-5.8; 2x4x1000 x8 8.6 -> 6.9-10.7 and 7x4x128 x4 1.04 -> 0.8-1.15
// swing both ways). More columns lose (10x6x2000 5.5 -> 6.6, 6x7x700 x4 4.6 -> 4.8; 16x8x256 even), and so does
// AVX2, whose 8-float broadcast vectors waste fewer lanes (16x4x1000 3.2 -> 4.2, 2x4x1000 x8 8.6 -> 24.9).
constexpr int64_t kDotBAsStoredFewRowsMaxColumns = 5;

bool few_columns_b_as_stored(const Problem& p, hw::X86Isa isa) {
    const bool avx512 = isa >= hw::X86Isa::avx512;
    const int64_t vlen = x86::vector_length(avx512 ? hw::X86Isa::avx512 : hw::X86Isa::avx2);
    const double copy_bytes = 4.0 * double(p.n) * double(p.k) * (p.stride_b != 0 ? double(p.batch) : 1.0);
    // From 5 columns a K of at least kDotBAsStoredMinKWide: a third vector of a few lanes per row loses (1 thread,
    // median us of 3 rounds, broadcast -> dot: 459x6x33 2.45 -> 3.07, 459x5x33 2.47 -> 2.83, 3000x6x36 18.1 ->
    // 19.3; 3000x5x40 20.1 -> 17.8).
    const int64_t many_rows_min_k = p.n >= 5 ? std::max<int64_t>(4 * (p.n + 2), kDotBAsStoredMinKWide) : 4 * (p.n + 2);
    const bool short_k_pays =
        p.n <= vlen / 2 && p.k >= (avx512 && p.m >= kDotBAsStoredManyRows ? many_rows_min_k : 16 * p.n);
    // 7 or 8 columns over a K that ends inside a vector below kDotBAsStoredWholeK: the tail vector's share of the
    // 3 x 8 tiles' loads and sums outweighs the lanes the broadcast tiles waste (1 thread, median us of 3 rounds,
    // broadcast -> dot: 459x8x40 2.91 -> 3.69, 459x8x43 3.10 -> 3.77, 3000x8x56 26.7 -> 28.3; whole vectors win,
    // 459x8x48 3.64 -> 3.43, 3000x8x64 32.5 -> 27.6, and so does a longer K, 459x8x100 6.88 -> 5.78).
    const bool tail_vector_loses = avx512 && p.n >= 7 && p.k % vlen != 0 && p.k < kDotBAsStoredWholeK;
    const bool rows_pay = p.m > 16 || (avx512 && p.n <= kDotBAsStoredFewRowsMaxColumns);
    return !p.trans_b && !p.trans_a && rows_pay && p.n >= 2 && short_k_pays && !tail_vector_loses &&
           copy_bytes <= kDotMaxBCopyBytes;
}

bool dot_family_fits(const Problem& p, hw::X86Isa isa) {
    return (p.trans_b && (p.m <= 16 || few_columns_long_k(p, isa))) || few_columns_b_as_stored(p, isa);
}

// A K of a few vectors leaves each dot product mostly its lane reduction: from 6 rows the GEMM family's packed
// (transposed) B serves it better, small calls or not. 1 thread, median us, dot -> GEMM: 16x16x16 0.41 -> 0.16
// (when first measured), 6x2048x32 17.4 -> 13.1, 7x1000x64 12.1 -> 11.3, 8x1536x24 19.1 -> 9.8, 16x1024x32 24.8
// -> 10.9, 16x512x64 14.6 -> 9.2, 12x3000x40 59.5 -> 32.5. Fewer rows (4x4096x64 30 -> 48, 1x4096x16 5.6 -> 14.3)
// or a longer K (8x4096x128 251 -> 276, 8x2048x96 even) read B once either way and keep the dot kernel. A K of
// one vector goes to the GEMM family from 3 rows (4x4096x16 20.4 -> 14.1, 5x2048x16 12.8 -> 7.4, 4x4096x8 21.9
// -> 12.6, 3x4096x16 15.3 -> 14.0; 2x4096x16 keeps the dot kernel, 10.2 against 14.0).
// The same rule holds for an A stored K x M (copied into rows for the dot family): the GEMM family packs it as
// cheaply (1 thread, median of 3 alternated rounds, TT dot -> GEMM: 8x1536x24 20.3 -> 9.8, 16x1024x32 25.5 ->
// 11.6, 7x1000x33 12.2 -> 8.2, 4x4096x16 22.1 -> 15.7, 3x4096x16 16.6 -> 14.8; kept on the dot kernel:
// 4x4096x64 31.4 against 49.5, 2x4096x16 11.7 against 15.6, 3x512x32 2.4 against 3.4).
// From 8 rows the reductions still outweigh a K of up to ~10 values per row where B stays in cache for the GEMM
// family's packing (1 thread NT, median of 3 alternated rounds, dot -> GEMM us: 8x2048x72 34.5 -> 32.1,
// 10x1000x90 25.7 -> 23.2, 12x2048x100 60.8 -> 54.7, 16x1024x100 40.8 -> 30.2); a B past cache is read once by
// the dot kernel instead of packed from memory (16x4096x150, 2.4 MB: 357 against 428), and fewer rows keep it
// (3x1000x28 5.0 -> 7.9, 4x2048x36 14.8 -> 17.6, 5x2048x48 17.7 -> 19.1; 6x2048x56 even).
constexpr int64_t kDotMinRowsShortK = 6;
constexpr int64_t kDotShortK = 64;
constexpr int64_t kDotMinRowsOneVectorK = 3;
constexpr int64_t kDotOneVectorK = 16;
constexpr int64_t kDotMinRowsPerRowK = 8;
constexpr int64_t kDotKPerRow = 10;
constexpr double kDotPerRowKMaxBBytes = 1024.0 * 1024;
// Two rows or more over a K under 8 (AVX-512): a masked half vector and a lane reduction per dot product, where
// the GEMM family packs B by its masked 16 x 4 transposes (1 thread NT, median us, dot -> GEMM: 2x2998x2 4.33 ->
// 2.66, 2x2998x5 4.34 -> 3.84, 2x2998x7 4.33 -> 4.13, 2x300x4 0.49 -> 0.32, 2x500x3 x8 5.9 -> 3.7; K = 8 keeps
// the dot products, 2x2998x8 4.4 against 5.7; one row keeps them, 1x2998x5 2.4 against 3.6).
constexpr int64_t kDotMinRowsHalfVectorK = 2;
constexpr int64_t kDotHalfVectorK = 8;

// Up to 16 rows over fewer columns than a vector (AVX-512, A stored M x K), from a K of two vectors: the broadcast
// family's one vector of columns is mostly padding and B's transposing pack its main cost, where the dot kernel
// reads B's few rows in place (the short-K rules below were measured over many columns). Up to 5 columns, up to
// 8 from a K of 64, or fewer than 16 over up to 6 rows (one covering tile). 1 thread, median us of 3 alternated
// rounds, broadcast -> dot: 12x5x64 x16 4.21 -> 1.64, x1 0.28 -> 0.14, 16x5x32 x16 1.98 -> 1.53, 16x5x64 x16
// 3.72 -> 2.07, 16x5x100 x16 5.61 -> 2.88, 16x3x64 x64 14.8 -> 6.6, 8x4x64 x16 3.50 -> 0.96, 16x8x64 x16 3.75
// -> 3.03, 8x8x64 x16 3.56 -> 1.71, 7x8x64 x16 3.43 -> 1.89, 11x6x100 x8 3.01 -> 1.19, 6x5x32 x16 2.00 -> 0.80,
// 6x10x32 x16 2.04 -> 1.27, 6x12x48 x16 2.97 -> 1.59, 6x15x64 x16 3.91 -> 2.32, 16x8x128 x1 0.50 -> 0.30. Not
// taken: 16x8x32 x16 2.00 -> 2.33, 7x12x32 x16 1.88 -> 2.15, 16x10x32 x16 2.02 -> 2.55, 16x15x64 x16 3.83 ->
// 5.23, 15x10x25 x38 4.0 -> 6.6; 15x10x50 x38 6.9 -> 8.1 (16x10x64, 16x10x100 x16 about 10% faster, left as
// they are). A K under 32 keeps the broadcast family (6x5x16, 16x5x16, 16x5x24 x16 even).
constexpr int64_t kDotFewColumnsFewRowsMinK = 32;
constexpr int64_t kDotFewColumnsAnyK = 5;
constexpr int64_t kDotHalfVectorColumnsMinK = 64;
constexpr int64_t kDotCoveringRowsFewColumns = 6;

bool few_columns_few_rows(const Problem& p, hw::X86Isa isa) {
    if (isa < hw::X86Isa::avx512 || p.trans_a || p.m > 16 || p.k < kDotFewColumnsFewRowsMinK) return false;
    const int64_t vlen = x86::vector_length(hw::X86Isa::avx512);
    return p.n <= kDotFewColumnsAnyK || (p.n <= vlen / 2 && p.k >= kDotHalfVectorColumnsMinK) ||
           (p.n < vlen && p.m <= kDotCoveringRowsFewColumns);
}

bool dot_family_serves(const Problem& p, hw::X86Isa isa) {
    if (!dot_family_fits(p, isa)) return false;
    const char* env = std::getenv("JITMM_X86_DOT");  // 0: the GEMM family instead, 1: the dot family (measurements)
    if (env != nullptr && env[0] == '0') return false;
    if (env != nullptr && env[0] == '1') return true;
    if (few_columns_long_k(p, isa) || few_columns_b_as_stored(p, isa)) return true;
    if (few_columns_few_rows(p, isa)) return true;
    const double b_bytes = 4.0 * double(p.n) * double(p.k);
    const bool reductions_dominate =
        (p.m >= kDotMinRowsShortK && p.k <= kDotShortK) || (p.m >= kDotMinRowsOneVectorK && p.k <= kDotOneVectorK) ||
        (p.m >= kDotMinRowsPerRowK && p.k < kDotKPerRow * p.m && b_bytes <= kDotPerRowKMaxBBytes) ||
        (isa >= hw::X86Isa::avx512 && p.m >= kDotMinRowsHalfVectorK && p.k < kDotHalfVectorK);
    return !reductions_dominate;
}

X86DotPlan plan_x86_gemm_f32_dot(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads) {
    const int64_t l2_bytes = cpu.l2_bytes > 0 ? cpu.l2_bytes : 1024 * 1024;
    X86DotPlan plan;
    auto& L = plan.layout;
    plan.a_transposed = p.trans_a;
    plan.b_transposed = !p.trans_b;
    const int64_t a_row_stride = p.trans_a ? x86::transposed_a_row_stride(p.k) : p.lda;
    const int64_t b_row_stride = p.trans_b ? p.ldb : x86::transposed_a_row_stride(p.k);
    const bool avx512 = isa >= hw::X86Isa::avx512;
    L.isa = avx512 ? hw::X86Isa::avx512 : hw::X86Isa::avx2;
    // One tile as tall as M where one fits, the shortest; else the least waste as weighed below, ties to the
    // taller tile.
    DotTile best{0, 0};
    double best_waste = 0;
    bool best_covers = false;
    for (DotTile t : avx512 ? std::vector<DotTile>(std::begin(kAvx512DotTiles), std::end(kAvx512DotTiles))
                            : std::vector<DotTile>(std::begin(kAvx2DotTiles), std::end(kAvx2DotTiles))) {
        if (!x86::dot_tile_fits(L.isa, t.mr, t.nj)) continue;
        if (int64_t(t.nj) * b_row_stride * 4 >= (int64_t(1) << 31) ||
            int64_t(t.mr) * a_row_stride * 4 >= (int64_t(1) << 31))
            continue;
        const bool covers = t.mr >= p.m;
        if (t.covering_only && !covers) continue;
        // Many rows (few columns): the padded area of rows and columns, so that the tile's width fits N. Rows
        // over several tiles (8 to 16): the vector loads per output column, padded rows x (1 / mr + 1 / nj), as
        // each row tile streams every Bt row again (1 thread, median us: 13x106x631 NT on 1x24, no padding, 30
        // -> 14 on 4x6; 11x1000x1000 567 -> 389).
        const int64_t padded_rows = ceil_div(p.m, t.mr) * t.mr;
        const double waste = p.m > 16  ? double(padded_rows * ceil_div(p.n, t.nj) * t.nj - p.m * p.n)
                             : covers ? double(padded_rows - p.m)
                                      : double(padded_rows) * (1.0 / t.mr + 1.0 / t.nj);
        const bool better = covers != best_covers ? covers
                                                  : waste < best_waste || (waste == best_waste && t.mr > best.mr);
        if (best.mr == 0 || better) {
            best = t;
            best_waste = waste;
            best_covers = covers;
        }
    }
    if (best.mr == 0) best = DotTile{1, 1};
    // One row over a Bt streamed from memory, on a chip whose prefetchers take few streams: kFewStreamsRows rows
    // at once, where 24 outran them (hw::CpuInfo::few_streams_from_memory; Zen 4, 1 thread, median us without
    // software prefetches, 1x24 -> 1x8: 1x4096x4096 NT 3280 -> 2520, 1x11008x4096 8800 -> 7800, 1x4096x11008
    // 9350 -> 6900; 1x12 2680 / 7900 / 6900, 1x6 2580 / 7250 / 6700).
    // (Few threads: measured on one; many stream at the memory's rate anyway, like the prefetches below.)
    const double bt_bytes = 4.0 * double(p.n) * double(p.k);
    const double b_bytes = 4.0 * double(p.batch) * double(p.n) * double(p.k);
    const double work = std::max(p.flops() / 1.0e6, b_bytes / (256.0 * 1024));
    const int threads = static_cast<int>(std::min<double>(std::max(1, num_threads), std::max(1.0, work)));
    const bool few_streams = cpu.few_streams_from_memory && bt_bytes > double(l2_bytes) && best.mr == 1 &&
                             threads <= kDotPrefetchMaxThreads;
    if (few_streams) best.nj = std::min(best.nj, kFewStreamsRows);
    // JITMM_X86_DOT_TILE=MRxNJ (tuning knob): force the tile where it fits the registers (and keep it as is).
    const char* forced_tile = std::getenv("JITMM_X86_DOT_TILE");
    if (forced_tile != nullptr) {
        DotTile forced{0, 0};
        if (std::sscanf(forced_tile, "%dx%d", &forced.mr, &forced.nj) == 2 && forced.mr >= 1 && forced.nj >= 1 &&
            x86::dot_tile_fits(L.isa, forced.mr, forced.nj))
            best = forced;
    }
    // Threads split N in whole tiles (below): the slowest thread has ceil(tiles / chunks) of them. A narrower
    // tile of the same rows can even that out (1x1000x2048 NT on 16 threads: 42 tiles of 24 columns give some
    // threads 72 columns against an average of 63; tiles of 21 give 63), and where B streams from memory its
    // extra A reloads cost nothing. Widths down to half the chosen one; ties keep the wider tile.
    if (threads > 1 && p.batch == 1 && forced_tile == nullptr && p.m <= 16)  // (many rows: row chunks)
        best.nj = balanced_tile_width(p.n, best.nj, threads);
    L.mr = best.mr;
    L.nj = best.nj;
    L.k = p.k;
    L.lda = a_row_stride;
    L.ldb = b_row_stride;
    L.ldc = p.ldc;
    L.alpha = p.alpha;
    L.beta = p.beta;
    L.bias = p.bias;
    L.activation = p.activation;
    L.k_unroll = 2;
    // Bt larger than L2 streams from memory, one stream per row of the tile, more than the hardware prefetchers
    // follow. Each iteration prefetches the lines that the next column tile (the next nj rows of Bt, which the
    // driver runs next) reads at the same K offset: the whole next tile arrives while this one computes, for any
    // K (a fixed 2 KiB ahead ran past the ends of short rows into lines already loaded: 1 thread, NT, median
    // ratio to oneDNN over 4 alternated rounds, 2 KiB ahead -> next tile: 1x768x768 0.84 -> 1.06, 1x3072x768
    // 0.93 -> 1.09, 1x1024x4096 0.95 -> 1.04, 1x4096x4096 1.00 -> 1.08).
    // Only with one row tile: the later row tiles read the same Bt rows again from L2, where the prefetches
    // only cost load slots (7x4096x4096 NT: 7.3 -> 9.1 ms with them).
    // A next tile past a quarter of L2 is too far ahead (its lines are evicted before they are read: 1x4096x14336,
    // 1.4 MB ahead, 0.98 -> 0.66): long rows take a fixed distance along the row instead.
    const int64_t next_tile_bytes = int64_t(L.nj) * b_row_stride * 4;
    const int64_t distance = next_tile_bytes <= l2_bytes / 4 ? next_tile_bytes : kDotPrefetchAlongRowBytes;
    // Few threads only: many cores together stream Bt at the memory's rate, where the prefetches only take load
    // slots and fill buffers (16 threads on the GPU machine's host, median us of 6 alternated rounds, next tile /
    // 2 KiB ahead / none: 1x4096x4096 NT 424 / 436 / 381, 1x768x768 17.4 / 17.5 / 14.6, 1x3072x768 46 / 43 / 54).
    // Nor where the hardware prefetchers take the few streams alone (few_streams: 1x4096x4096 NT 6050 us with
    // them, 3280 without).
    // Batches that each read their own Bt stream it from memory as soon as together they pass L2 (1 thread, Zen
    // 4, median us of 3 alternated rounds, without -> with: 2x2140x68 NT x5 295 -> 255, 2x1000x200 x8 707 -> 614,
    // 3x700x300 x10 850 -> 780, 4x3000x100 x4 365 -> 355), but one row on a chip whose prefetchers take few
    // streams (1x2000x128 x6 540 -> 600, as few_streams' rows).
    const bool hardware_streams = few_streams || (cpu.few_streams_from_memory && L.mr == 1);
    L.b_prefetch_bytes =
        p.b_bytes_read() > double(l2_bytes) && p.m <= L.mr && threads <= kDotPrefetchMaxThreads && !hardware_streams
            ? distance
            : 0;
    if (const char* v = std::getenv("JITMM_X86_DOT_PF")) L.b_prefetch_bytes = std::max<int64_t>(0, std::atoll(v));
    // The prefetch addresses are 32-bit displacements from the tile's first Bt row.
    if (int64_t(L.nj) * b_row_stride * 4 + L.b_prefetch_bytes + p.k * 4 >= (int64_t(1) << 31)) L.b_prefetch_bytes = 0;

    // Threads split N (each streams its own rows of B); about 1 MFLOP or 256 KiB of B per thread at least
    // (`threads`, above).
    plan.threads = threads;
    const int64_t n_tiles = ceil_div(p.n, L.nj);
    plan.n_chunks = static_cast<int>(std::min<int64_t>(n_tiles, balanced_chunks_per_batch(p.batch, threads)));
    // Many rows (few columns): the threads a batch's N chunks leave idle take row chunks (whole tiles) of it.
    if (p.m > 16)
        plan.m_chunks = static_cast<int>(std::min<int64_t>(
            ceil_div(p.m, L.mr), ceil_div(balanced_chunks_per_batch(p.batch, threads), plan.n_chunks)));

    // Many rows over few columns with an A larger than L2 (all batches): A streams from memory while Bt's few rows
    // stay in cache. With the column tiles outer, A was read from memory for the first column tile with little
    // to overlap, then again from L2 (1 thread, 140x13x1315 NT x10: 966 -> 816-841 us). An A in L2 keeps the
    // column tiles outer: a column tile of Bt stays in L1 (140x13x1315 x1: 35.9 us, 39 with the rows outer).
    const double a_all_bytes = 4.0 * double(p.m) * double(p.k) * (p.stride_a != 0 ? double(p.batch) : 1.0);
    plan.rows_outer = p.m > p.n && a_all_bytes > double(l2_bytes);
    // Its rows' lines are then prefetched 1 KiB ahead along the row (3 rows of 5 KB per tile: 827 -> 765 us; 2
    // KiB ahead and the next row tile's rows gained less). The displacements are 32-bit.
    // Where one column tile covers N, every A value is read once, in order: A is a plain stream from memory, which
    // runs at speed only with many lines in flight, prefetched into L2 kDotPrefetchStreamABytes ahead (1 thread,
    // 2939x7x230 NN: 1 KiB into L1 335 us, 8 KiB 243, 32 KiB into L2 224-232; 1 and 4 KiB, and 16 to 64 KiB into
    // L1, slower). Two column tiles read each row tile twice, the second time from cache: there the near prefetch
    // measured better (140x13x1315 NT x10: 777-782 us at 1 KiB into L1, 800-830 at 32 KiB into L2).
    const bool a_streams_once = p.n <= L.nj;
    const int64_t a_distance = a_streams_once ? kDotPrefetchStreamABytes : kDotPrefetchAlongABytes;
    if (plan.rows_outer && int64_t(L.mr) * L.lda * 4 + a_distance + p.k * 4 < (int64_t(1) << 31)) {
        L.a_prefetch_bytes = a_distance;
        L.a_prefetch_to_l2 = a_streams_once;
    }
    // Few column tiles and a long K: K parts of whole iterations, at least 512 long (see x86_gemm_plan).
    const int64_t units = p.batch * n_tiles;
    const int64_t iterations = p.k / (int64_t(L.k_unroll) * x86::vector_length(L.isa));
    const int64_t max_parts = std::min<int64_t>(iterations, p.k / 512);
    plan.k_split_ready = units <= kSplitMaxUnits && max_parts >= 2 && p.n <= x86::kSplitFinishMaxWidth;
    if (plan.k_split_ready && threads > 1) {
        plan.k_splits = choose_k_splits(units, p.batch, threads, max_parts);
        if (plan.k_splits > 1) plan.n_chunks = plan.m_chunks = 1;  // each part task covers every tile
    }
    return plan;
}

std::string X86DotPlan::describe() const {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s dot tile %dx%d k_unroll=%d%s%s%s%s threads=%d split=%dx%dx%d",
                  hw::isa_name(layout.isa), layout.mr, layout.nj, layout.k_unroll,
                  a_transposed ? (" A^T copied to rows of " + std::to_string(layout.lda)).c_str() : "",
                  b_transposed ? (" B^T copied to rows of " + std::to_string(layout.ldb)).c_str() : "",
                  k_split_ready ? " ksplit-ready" : "",
                  rows_outer ? (layout.a_prefetch_to_l2 ? " rows-outer prefetchA(L2)" : " rows-outer prefetchA") : "",
                  threads,
                  m_chunks, n_chunks, k_splits);
    return buf;
}

void X86DotPlan::append_key(KeyWriter& w) const {
    w.i64('I', static_cast<int64_t>(layout.isa)).i64('r', layout.mr).i64('j', layout.nj);
    w.i64('u', layout.k_unroll);  // threads, the N split and k_splits change only the driver: not in the key
    w.i64('s', k_split_ready ? 1 : 0).i64('f', layout.b_prefetch_bytes);
    if (layout.a_prefetch_bytes > 0) w.i64('p', layout.a_prefetch_bytes);  // (absent: the older keys stay valid)
    if (layout.a_prefetch_to_l2) w.i64('q', 1);
    // The copied rows' stride is baked into the code in place of the problem's lda (only then: the keys of an A
    // read in place stay as they were).
    if (a_transposed) w.i64('T', 1).i64('a', layout.lda);
    if (b_transposed) w.i64('B', 1).i64('b', layout.ldb);
}

}  // namespace jitmm::plan
