#include "plan/x86_lowp_plan.hpp"

#include "core/dtype.hpp"
#include "plan/x86_dot_plan.hpp"
#include "plan/x86_gemm_partition.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace jitmm::plan {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

bool is_int8(jitmm_dtype t) { return t == JITMM_DTYPE_S8 || t == JITMM_DTYPE_U8; }
bool is_half(jitmm_dtype t) { return t == JITMM_DTYPE_BF16 || t == JITMM_DTYPE_F16; }
bool is_float_out(jitmm_dtype t) { return t == JITMM_DTYPE_F32 || is_half(t); }
std::string name(jitmm_dtype t) { return dtype_name_or_null(t); }

// AMX: one k step is a 64-byte row of an A tile.
constexpr int64_t kAmxStepBytes = 64;
constexpr int kEpilogueTemps = 3;  // activation scratch; conversions and loads reuse it
constexpr int64_t kAmxLongRowBytes = 4096;  // AMX K block for long K (bytes of an A row)
constexpr int64_t kAmxDecodeRowBytes = 2048;  // AMX K block with one row tile
constexpr int64_t kAmxDecodeColumns = 2048;   // AMX B block width with one row tile
constexpr int64_t kAmxDecodePackedBytes = 512 * 1024;  // AMX, one row tile: a K block of packed B up to this
constexpr int64_t kAmxStreamedCBytes = int64_t(4) << 20;  // AMX: C from this size written non-temporally
// AMX: C rows off 64-byte lines staged through the L1 block from this much C and this many bytes of K per panel
// (the copy-out spreads over the next panel's K steps: fewer steps bunch its stores).
constexpr int64_t kAmxStagedCBytes = 128 * 1024;
constexpr int64_t kAmxStagedCMinKBytes = 256;
constexpr int64_t kAmxKeptBBytes = 128 * 1024;  // AMX: a K block of packed B up to this is loaded without T1
constexpr int64_t kAmxFewPanels = 4;  // AMX: N of at most this many 32-column panels runs all of K in one block
// A thread of a batched call (whole batches per thread, nothing packed twice) for at least this much work:
// the fan-out is all it costs. AMX, 2 threads against 1, median us (x86 lowp: bf16 / s8): 1 MFLOP in all lost
// (64x64x64 x 2: 1.3 -> 2.0-3.0 / 1.0 -> 1.9-2.9), 2 MFLOP broke even (64x64x64 x 4 2.6 -> 3.0-3.1 / 2.4 -> 2.5-2.6,
// 32x32x64 x 16 4.6-4.8 -> 3.9-4.6 / 3.9 -> 3.5-3.7), 3 MFLOP and up gained (64x64x32 x 12 7.0-7.3 -> 5.4-5.5 /
// 8.2-8.6 -> 6.3). The vector steps gained from 2 MFLOP (64x64x64 x 4 VNNI s8 4.9-5.1 -> 3.8-4.1).
constexpr double kMinFlopsPerBatchThreadAmx = 1.5e6;
// A thread per this many bytes of B, which every call reads and packs: packing is what a call with few rows
// spends its time on (17x1023x511 s8 on one AMX core: ~70 us for 0.5 MB of B against ~10 us of products),
// and since the pool fans out in a microsecond or two, ~7 us of packing pays for a thread.
constexpr double kBBytesPerThread = 64.0 * 1024;
// A thread per this many bytes of a B read in place (the decode paths: B streamed once per call, nothing
// packed). It was a megabyte, set when a fan-out cost tens of microseconds at 16 threads; 1x1000x2048 NT
// bf16 (4 MB) then ran 4 threads at 0.39x oneDNN's 16. 256 KB streams in ~20 us on one core.
constexpr double kStreamedBBytesPerThread = 256.0 * 1024;
// And a thread per this many bytes of A: a few columns leave reading (and packing) A as the work (2 threads,
// 2304x2x768 TT s8 and 577x1x768 TT s8 ran one thread at 0.47x and 0.65x oneDNN's two).
constexpr double kABytesPerThread = 128.0 * 1024;
constexpr double kMinFlopsPerBatchThread = 1.0e6;
constexpr int64_t kThreadWorkMinK = 32;  // (threads: a shorter K counted as this long)
constexpr int64_t kTransposedInt8MinRunBytes = 384;  // (an int8 A stored K x M: M blocks of at least this)

struct TileShape {
    int mr, nv;
};
constexpr TileShape kZmmTiles[] = {{6, 4}, {8, 3}, {4, 6}, {14, 2}, {12, 2}, {28, 1}, {2, 8}, {1, 12}};
constexpr TileShape kYmmTiles[] = {{6, 2}, {5, 2}, {4, 2}, {3, 3}, {2, 4}, {1, 4}, {12, 1}};
constexpr TileShape kFewStreamsOneVectorTile = {12, 1};  // in place of 28 x 1 (choose_tile)

// Scratch registers a step needs in the main loop beyond accumulators, B vectors and the broadcast.
int step_temps(LowpStep s) { return s == LowpStep::madd_s16 ? 1 : 0; }

bool tile_fits(TileShape t, LowpStep step, bool zmm) {
    const int regs = zmm ? 32 : 15;  // AVX2 keeps its column mask in the 16th register
    const int acc = t.mr * t.nv;
    return acc + t.nv + 1 + step_temps(step) <= regs && acc + kEpilogueTemps <= regs;
}

// Estimated cycles per k group over the whole C: per tile the largest of the multiply issue (2 per
// cycle), the load issue (2 per cycle), the B panel streaming from L2 (each k group brings nv vectors of
// 4-byte columns, about 32 bytes per cycle) and the accumulator latency chain (4 cycles; vpdpbusd 5).
double tile_cost(const Problem& p, TileShape t, LowpStep step, int vlen) {
    const double tiles = double(ceil_div(p.m, t.mr)) * double(ceil_div(p.n, int64_t(t.nv) * vlen));
    const double ops = t.mr * t.nv * (step == LowpStep::madd_s16 ? 2.0 : 1.0) / 2.0;
    const double loads = (t.mr + t.nv) / 2.0;
    const double stream = t.nv * vlen * 4 / 32.0;
    // vpdpbusd's latency is 5 (Ice Lake, Sapphire Rapids, Alder Lake): 2 per cycle need 10 accumulators. ymm
    // AVX-VNNI 1 thread, 1024^3 s8: tile 4x16 316 GOP/s, 6x16 432 (256^3: 314 -> 390).
    const double chain = step == LowpStep::vnni_u8s8 ? 5.0 : 4.0;
    return tiles * std::max({ops, loads, stream, chain});
}

TileShape choose_tile(const Problem& p, LowpStep step, bool zmm, bool few_streams) {
    TileShape best{0, 0};
    double best_cost = 0;
    auto consider = [&](TileShape t) {
        if (!tile_fits(t, step, zmm)) return;
        const double c = tile_cost(p, t, step, zmm ? 16 : 8);
        if (best.mr == 0 || c < best_cost * 0.999 || (c <= best_cost * 1.001 && t.mr * t.nv > best.mr * best.nv)) {
            best = t;
            best_cost = c;
        }
    };
    // No more vectors than N needs where a tile fits: the cost above sees one column tile either way, but B is
    // packed in panels of nv vectors, padding included (VNNI tier, 1 thread, median us: u8 3x10x976 a 6x64
    // tile 1.55, 28x16 0.87; 100x40x256, 500x20x128, 1000x33x64 and s8 64x24x1024 even). A wider tile whose
    // panels pad N by at most a quarter stays in (u8 1x112x28 NT x17: 2x128 2.9 us, 6x64 3.8).
    const int vlen = zmm ? 16 : 8;
    const int64_t nv_needed = ceil_div(p.n, int64_t(vlen));
    auto narrow_enough = [&](TileShape t) {
        const int64_t width = int64_t(t.nv) * vlen;
        return t.nv <= nv_needed || double(ceil_div(p.n, width) * width) <= 1.25 * double(p.n);
    };
    for (const bool narrow : {true, false}) {
        // A chip whose prefetchers take few streams (hw::CpuInfo::few_streams_from_memory) runs the one-vector
        // tile at 12 rows: 28 rows of an A read in place outran them (Zen 4, 1 thread, median us, 28 x 1 -> 12 x 1
        // (8 x 1): bf16 4096x16x4096 12400 -> 3980 (3760), 1000x14x934 619 -> 259 (243); a packed A, s8
        // 4096x16x4096, 2844 -> 2889).
        if (zmm)
            for (TileShape t : kZmmTiles) {
                if (few_streams && t.mr == 28 && t.nv == 1) t = kFewStreamsOneVectorTile;
                if (!narrow || narrow_enough(t)) consider(t);
            }
        else for (TileShape t : kYmmTiles) { if (!narrow || narrow_enough(t)) consider(t); }
        if (best.mr != 0) break;
    }
    if (const char* forced = std::getenv("JITMM_X86_LOWP_TILE")) {  // "RxV" (rows x vectors): a tuning knob
        int r = 0, v = 0;
        if (std::sscanf(forced, "%dx%d", &r, &v) == 2 && r >= 1 && v >= 1 && tile_fits({r, v}, step, zmm))
            best = {r, v};
    }
    return best;
}

// AVX-VNNI (VEX vpdpbusd on ymm) at the avx2 tier: the chips that have it run the avx2 tier's int8 with it
// (JITMM_MAX_ISA=avx2 on one with AVX-512 too, or a chip without AVX-512 such as Alder Lake). The avx512 tier
// (AVX-512 without VNNI) keeps the s16 widening: VEX vpdpbusd has no zmm form, and every chip with both
// AVX-512 and AVX-VNNI also has AVX512-VNNI. JITMM_X86_AVX_VNNI=0 turns it off (the s16 path, for tests and
// measurements).
bool avx_vnni_usable(const hw::CpuInfo& cpu, hw::X86Isa isa) {
    if (isa >= hw::X86Isa::avx512 || !cpu.avx_vnni) return false;
    const char* env = std::getenv("JITMM_X86_AVX_VNNI");
    return env == nullptr || env[0] != '0';
}

// int8 with K up to this over a C of at least kShortKVnniMinC values runs on VNNI rather than AMX (choose_step).
constexpr int64_t kShortKVnniMaxK = 32;
constexpr double kShortKVnniMinC = 16384;
constexpr double kShortKVnniMinTailC = 2048;

// A u8 A of under 32 rows that end in a tile tail times B stored N x K runs on VNNI up to this M x N x K (choose_step).
constexpr double kTailRowsVnniMaxMnk = 96.0 * 32 * 32;
constexpr int64_t kTailRowsVnniMaxColumns = 128;
constexpr int64_t kTailRowsWholeMinRows = 12;  // and fewer rows where one whole-call AMX function would run it

// A u8 A of at most this many rows times a B stored K x N of at most this many bytes runs on VNNI (choose_step).
constexpr int64_t kDecodeVnniMaxRows = 4;
constexpr int64_t kDecodeVnniMaxBBytes = 512 * 1024;

// An s8 A of at most this many rows over a K below this and at least this many columns of a B stored K x N runs on
// VNNI, unless its tiles are whole and B at most this many bytes (choose_step).
constexpr int64_t kFewRowsVnniMaxRows = 16;
constexpr int64_t kFewRowsVnniMaxK = 32;
constexpr int64_t kFewRowsVnniMinColumns = 256;
constexpr int64_t kFewRowsVnniWholeBBytes = 16 * 1024;

// Batches of an s8 A with column tails over a K up to this run on VNNI (choose_step).
constexpr int64_t kBatchedTailVnniMinK = 3, kBatchedTailVnniMaxK = 16;
constexpr double kBatchedTailVnniMaxC = 16384;  // values of one batch's C
constexpr int64_t kBatchedTailWholeMinColumns = 48;  // and fewer columns or rows where the whole-call function
constexpr int64_t kBatchedTailWholeMinRows = 24;     // serves (12x113x3 NT x7: VNNI 1.30 us, AMX 1.62)

// bf16 with K up to this runs on converted f32 FMAs rather than AMX (choose_step).
constexpr int64_t kBf16MaxFmaK = 4;
constexpr int64_t kBf16MaxOddFmaK = 7;  // and an odd K up to this
constexpr int64_t kBf16MaxRowTailFmaK = 8;  // and any K up to this over a row tail with C rows off lines
// One row of bf16 over a B stored K x N with K in this range runs on vdpbf16ps rather than AMX (choose_step).
constexpr int64_t kBf16DotOneRowMinK = 32;
constexpr int64_t kBf16DotOneRowMaxK = 256;

// Whether an int8 call likely runs as the whole-call AMX function (gemm_amx_whole_generator.hpp, a call per
// batch): at most 64 C tiles of 16 x 16 (tails overlapping), K in at most two tile steps. (The planner cannot name
// the x86 generator; amx_whole_call_fits decides, from the plan.)
bool amx_whole_call_likely(const Problem& p) {
    const int64_t tiles = (p.m + 15) / 16 * ((p.n + 15) / 16);
    return !p.trans_a && tiles <= 64 && p.k <= 128;
}

// Where vdpbf16ps runs at the FMA rate (no AMX), an odd K up to this, with K x N up to this, of an A stored M x K
// stays on the converted f32 FMAs (choose_step).
constexpr int64_t kBf16DotOddFmaMaxK = 7;
constexpr int64_t kBf16DotOddFmaMaxKN = 256;
constexpr int64_t kBf16FmaBInPlaceFewRows = 4;  // (see choose_step)
constexpr int64_t kBf16FmaBInPlaceMaxRows = 16;
constexpr int64_t kBf16FmaBInPlaceMinColumns = 32;

LowpStep choose_step(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa) {
    if (is_int8(p.a_type)) {
        // Tiny products finish sooner on VNNI than the AMX tile configuration takes: up to 32 x 32 x 32 for a
        // u8 A, up to 16 x 16 x 16 for an s8 A (VNNI adds its +128 shift and the column compensation). 1 thread,
        // TSC per C API call, VNNI -> AMX: s8 16^3 283-306 -> 422-476, 23^3 664-675 -> 517-563, 32^3 671-697 ->
        // 541-559; u8 32^3 381-400 -> 547-578.
        // Batches of them share one tile configuration per thread (run_small): there an s8 A runs AMX too (1 thread,
        // VNNI -> AMX, us: 8^3 x64 5.8 -> 4.2, 16^3 x16 1.77 -> 1.22, 16^3 NT x16 2.25 -> 1.17, 12^3 x32 3.1 ->
        // 2.35), while a u8 A stays on VNNI (16^3 x16 0.83 against 1.23 on AMX).
        const double tiny_mnk = p.a_type == JITMM_DTYPE_S8 ? (p.batch > 1 ? 0.0 : 16.0 * 16 * 16) : 32.0 * 32 * 32;
        // A u8 A of under 32 rows ending in a tile tail (not 16) times B stored N x K, up to kTailRowsVnniMaxMnk:
        // the AMX tails (tile configurations of their own, the transposed B packed into 64-byte steps) cost more
        // than vpdpbusd's products. 1 thread, median us, AMX -> VNNI: u8 13x59x62 NT x9 3.9 -> 3.0 (x64 27.5 -> 20.9, NN 2.6 ->
        // 2.15, TT 3.9 -> 3.4, x1 0.41 -> 0.37), 13x118x62 NT x9 6.8 -> 5.7, 13x59x124 NT x9 5.7 -> 4.5, 26x59x62 NT
        // x9 5.0 -> 4.5; kept AMX: 26x118x124 NT x9 12.5 (VNNI 13.3), whole tiles 32x64x64 NT x9 2.5 (4.1), and an
        // s8 A (13x59x62 NT x9 3.95, VNNI with its shift 4.2); and from 32 rows (100x20x40 0.39, VNNI 0.45). B
        // stored K x N measured mixed (13x59x62 x9 2.7 -> 2.1, 5x300x60 0.61 -> 0.64, 9x150x64 TN x3 1.43 -> 1.47),
        // and wide N lost (5x300x60 NT 0.85 -> 1.44: VNNI's dot products of B's rows).
        // (A call that the whole-call AMX function serves, gemm_amx_whole_generator.hpp, pays no tile
        // configuration for its tails: it overlaps whole tiles. From 12 rows: 1 thread, median us, VNNI -> AMX: u8
        // 13x59x62 NT 0.35 -> 0.33 (x9 2.86 -> 2.63), 13x118x62 NT 0.62 -> 0.53, 26x59x62 NT 0.50 -> 0.41 (x9
        // 4.26 -> 3.61), 13x59x124 NT 0.51 -> 0.43; fewer kept VNNI: 10x128x32 NT 0.24 (AMX 0.31), 5x120x60 NT
        // 0.40 (0.46).)
        const bool whole_call = amx_whole_call_likely(p);
        const double mnk = double(p.m) * double(p.n) * double(p.k);
        const bool tail_rows_u8 = p.a_type == JITMM_DTYPE_U8 && p.trans_b && p.m < 32 && p.m % 16 != 0 &&
                                  p.n <= kTailRowsVnniMaxColumns && mnk <= kTailRowsVnniMaxMnk &&
                                  !(whole_call && p.m >= kTailRowsWholeMinRows);
        const bool tiny = mnk <= tiny_mnk || tail_rows_u8;
        // A K of at most 32 bytes over a C of kShortKVnniMinC values or more: writing C is the work, and the AMX
        // panels, a K step each, drain every 32 x 32 block (products, then stores, then the next loads) where
        // vpdpbusd's stores stream. A u8 A is read as it is; an s8 A pays its +128 shift and column sums, which
        // pay only at a K of two k groups and a wide C. 1 thread, median us, AMX -> VNNI: u8 512x512x8 33 ->
        // 19, 512x512x32 35 -> 27, 1024^2x32 182 -> 156, 640^2x6 44 -> 38, 3136x256x16 137 -> 125; s8 512x512x8
        // 34 -> 24, 77x640x3 6.2 -> 4.3. Kept AMX: u8 512x512x48 33 (VNNI 37), 64x64x32 0.2 (0.5); s8 1000x48x4
        // 3.8 (6.2), 3072x12x5 9 (10), 200x1000x12 22 (24).
        const double c_values = double(p.m) * double(p.n) * double(p.batch);
        // A smaller C as well (from kShortKVnniMinTailC values) where its rows or columns end in tile tails: no
        // whole-call AMX function serves it, and each tail shape costs a tile configuration. 1 thread, median us,
        // AMX -> VNNI: u8 14x795x4 2.33 -> 0.97, 16x300x8 NT 1.19 -> 0.61, 100x100x6 1.63 -> 0.97, 100x120x12
        // 1.81 -> 1.05, 161x98x5 NT 3.3 -> 2.9; s8 14x795x4 2.4 -> 1.7. Whole tiles keep AMX (u8 64x64x16 0.20,
        // VNNI 0.30; s8 64x64x8 0.20, VNNI 0.43).
        // The whole-call function overlaps its tail tiles instead (above), and wins from 20 rows over a K of 12
        // bytes, or 6 over 96 rows and at most 128 columns (1 thread, median us, VNNI -> AMX: u8 100x100x6 0.76 ->
        // 0.55, 100x120x12 1.07 -> 0.71, 48x200x12 0.65 -> 0.41, 40x250x20 1.08 -> 0.68, 100x60x30 0.67 -> 0.39,
        // 20x200x32 0.55 -> 0.32, 120x120x8 1.28 -> 1.05, NT 0.88 -> 0.77, 1.15 -> 0.98, 0.87 -> 0.76, 1.22 ->
        // 1.06, 0.75 -> 0.52, 0.58 -> 0.55, 1.36 -> 1.32); VNNI kept: 16x300x8 0.38 (AMX 0.57), 30x500x8 1.40
        // (2.0), 64x250x4 1.25 (1.44), 50x50x4 0.20 (0.26), 14x795x4 0.80 (1.60), 33x100x10 NT 0.39 (0.59), and
        // B stored N x K under 40 rows (26x242x27 NT 1.12, AMX 1.26).
        const bool whole_tails_amx =
            whole_call && p.batch == 1 && p.m >= (p.trans_b ? 40 : 20) &&
            (p.k >= 12 || (p.k >= 6 && p.m >= 96 && p.n <= 128));
        const bool tails = (p.m % 16 != 0 || p.n % 16 != 0) && !whole_tails_amx;
        const bool short_k_vnni = p.b_type == JITMM_DTYPE_S8 && p.k <= kShortKVnniMaxK &&
                                  (c_values >= kShortKVnniMinC || (tails && c_values >= kShortKVnniMinTailC)) &&
                                  (p.a_type == JITMM_DTYPE_U8 || (p.k <= 8 && p.n >= 256));
        // A u8 A of a few rows times a B stored K x N of at most kDecodeVnniMaxBBytes: packing B is the call either
        // way (each packed value is used by the few rows once), and VNNI's panels pack with less padding and no
        // tile configuration. 1 thread, median us, AMX -> VNNI: u8 1x232x268 3.24 -> 2.12, x8 26.3 -> 17.6,
        // 1x512x256 5.5 -> 4.6, 1x1024x512 21.5 -> 19.3, 4x512x256 6.0 -> 5.5, 4x500x300 6.9 -> 6.2, 1x100x1000 4.8
        // -> 4.1; kept AMX: 4x1024x512 23.3 (23.9), 8x512x256 5.8 (7.5), 1x1024x1024 45.6 (52.1), and an s8 A
        // (1x232x268 3.2, VNNI with its shift 3.6).
        const bool decode_vnni = p.a_type == JITMM_DTYPE_U8 && p.b_type == JITMM_DTYPE_S8 && !p.trans_b &&
                                 p.m <= kDecodeVnniMaxRows && p.k * p.n <= kDecodeVnniMaxBBytes;
        // An s8 A of a few rows over a K short of a half step and a wide B stored K x N: its +128 shift costs little
        // next to the AMX tails and steps of 64 bytes for a K of a few bytes. 1 thread, median us, AMX -> VNNI:
        // s8 4x794x27 2.06 -> 1.43 (TN 2.10 -> 1.47), 2x1000x16 2.21 -> 1.03, 16x794x27 3.54 -> 2.99, 8x512x20 1.25
        // -> 0.90, 16x1024x24 4.18 -> 3.16, 8x4096x16 9.8 -> 8.1, 4x300x20 and 1x300x30 even. Whole 16 x 16 tiles
        // over a B of at most 16 KB keep AMX (one generated function for the call: 16x256x16 0.26, VNNI 0.51), and
        // so do K = 32 (16x2000x32 6.7, VNNI 7.3) and B stored N x K (4x794x27 NT 1.49, VNNI 2.07).
        const bool whole_small = p.m % 16 == 0 && p.n % 16 == 0 && p.k * p.n <= kFewRowsVnniWholeBBytes;
        const bool few_rows_vnni = p.a_type == JITMM_DTYPE_S8 && p.b_type == JITMM_DTYPE_S8 && !p.trans_b &&
                                   p.k < kFewRowsVnniMaxK && p.m <= kFewRowsVnniMaxRows &&
                                   p.n >= kFewRowsVnniMinColumns && !whole_small;
        // Batches of an s8 A over a K of at most kBatchedTailVnniMaxK with column tails and C rows off 64-byte
        // lines: each batch's tail tile (its own configuration) and tile stores across lines cost more than
        // VNNI's +128 shift. 1 thread, median us of 3 alternated runs, AMX -> VNNI: K = 5: 16x36 NT x38 8.09 ->
        // 6.40, 56x57 x16 9.12 -> 7.71, 13x100 NT x8 3.24 -> 2.79, 40x70 NT x10 6.03 -> 4.94, 30x200 x6 5.46 ->
        // 5.15; K = 16: 56x57 x16 9.32 -> 7.17, 37x500 x4 12.2 -> 10.1, 40x70 NT x10 5.55 -> 4.41, 13x100 NT x8 and
        // 30x200 x6 even. Whole columns keep AMX (16x32 NT x38 4.1 against 5.3, 64x64 x16 6.9 against 9.3), and
        // so do K = 32 (16x36 NT x38 6.6 against 7.9), larger batches (1000x100 NT x2 21.7 against 31.6, 108x298x10
        // x6 23.4 against 25.8), K <= 2 (691x5x1 NT x2 1.2 against 3.9, 105x34x2 x2 0.92 against 1.10) and a C
        // of one column tile (8^3 x64 4.2 against 5.8).
        // (From 48 columns the whole-call function, a call per batch with tails overlapping, runs them on AMX: 1
        // thread, median us, VNNI -> AMX: 30x200x5 x6 5.15 -> 3.30, 56x57x5 x16 7.7 -> 7.2, 40x70x16 NT x10 4.4
        // -> 4.3; 16x36x5 NT x38 kept VNNI, 6.5 against 6.9.)
        const bool batched_tail_vnni = p.a_type == JITMM_DTYPE_S8 && p.b_type == JITMM_DTYPE_S8 && p.batch > 1 &&
                                       p.k >= kBatchedTailVnniMinK && p.k <= kBatchedTailVnniMaxK &&
                                       p.n > 16 && p.n % 16 != 0 &&
                                       (p.ldc * dtype_size(p.c_type)) % 64 != 0 &&
                                       double(p.m) * double(p.n) <= kBatchedTailVnniMaxC &&
                                       !(whole_call && p.n >= kBatchedTailWholeMinColumns &&
                                         p.m >= kBatchedTailWholeMinRows);
        // JITMM_X86_LOWP_INT8_STEP=amx|vnni: the step forced where the ISA has it (measurements).
        const char* forced = std::getenv("JITMM_X86_LOWP_INT8_STEP");
        const std::string forced_step = forced != nullptr ? forced : "";
        if (isa >= hw::X86Isa::amx && forced_step == "amx") return LowpStep::amx_int8;
        const bool vnni_forced = forced_step == "vnni";
        if (isa >= hw::X86Isa::amx && !(tiny && p.b_type == JITMM_DTYPE_S8) && !short_k_vnni && !decode_vnni &&
            !few_rows_vnni && !batched_tail_vnni && !vnni_forced)
            return LowpStep::amx_int8;
        if (isa >= hw::X86Isa::avx512_vnni && p.b_type == JITMM_DTYPE_S8) return LowpStep::vnni_u8s8;
        if (p.b_type == JITMM_DTYPE_S8 && avx_vnni_usable(cpu, isa)) return LowpStep::vnni_u8s8;  // ymm
        return LowpStep::madd_s16;
    }
    if (p.a_type == JITMM_DTYPE_BF16) {
        // Tiny products (up to 16 x 16 x 16) finish on vdpbf16ps before AMX has loaded its tile configuration
        // (ldtilecfg alone ~130 TSC): 1 thread, TSC per C API call, AMX -> vdpbf16ps: 8^3 453 -> 274,
        // 16^3 519 -> 369; 23^3 598 -> 1216 stays AMX.
        // Batches share one tile configuration per thread (run_small): AMX from 9^3 (1 thread, vdpbf16ps -> AMX,
        // us: 16^3 x16 1.72 -> 1.21, 12^3 x32 2.52 -> 2.46; 8^3 x64 stays, 3.7 against 4.1).
        const double tiny_mnk = p.batch > 1 ? 8.0 * 8 * 8 : 16.0 * 16 * 16;
        const bool tiny = double(p.m) * double(p.n) * double(p.k) <= tiny_mnk;
        // A K of a few values fills an eighth or less of the 32 a tile product takes, and C is the work: the
        // converted f32 FMAs run it faster (1 thread, median us, AMX -> fma_f32: 1024x77x2 TN 22.3 -> 14.5 (now
        // 17.7 -> 14.4), 197x2304x1 54.5 -> 40.7, 1024x77x3 18.4 -> 13.0, 77x640x3 5.7 -> 4.1, 300x300x4 11.3
        // -> 10.7), unless AMX streams C out non-temporally (1536x1024x8, 6 MB of f32 C, 2 threads: 0.72x
        // oneDNN on the FMAs, 1.45x on AMX). It was K <= 8 until the AMX path read short-stepped A rows in place
        // at any alignment: since then K = 5-8 runs faster on AMX (3072x12x5 18.1 -> 8.6, 256x64x8 x6 14.8 ->
        // 9.7, 128x128x8 x12 25.7 -> 18.1, 3072x160x6 77 -> 46, 100x1000x8 NT 15.6 -> 11.5; 640x250x8 NT 21.7
        // -> 22-25), and K <= 4 measured mixed (256x64x4 x6 14.1 -> 9.1, 1000x1000x2 186 -> 166).
        const double c_bytes = double(p.m) * double(p.n) * double(dtype_size(p.c_type)) * double(p.batch);
        // An odd K up to kBf16MaxOddFmaK has no short AMX step (its rows are not whole dwords), so AMX runs a
        // full 64-byte step for it, and A is packed: the FMAs win there since their packing of A and of a
        // transposed B no longer goes row by row (dense panels, gathers). 1 thread, median us, AMX -> fma_f32:
        // K = 5: 347x34 NT 3.6 -> 2.0, 3072x12 8.6 -> 6.6, 300x300 14.4 -> 10.5, 512x512 33.0 -> 24.7, 700x700
        // TN 85 -> 67, 64x64 NT 0.55 -> 0.48; K = 7: 512x512 NT 37.5 -> 26.2, 300x300 TN 15.4 -> 10.8, 64x1000
        // 9.5 -> 8.5, 32x32 x16 2.8 even. An even K keeps AMX (short steps): K = 6 3072x160 46 -> 60, 3072x12
        // 4.2 -> 7.1, 77x640 5.0 -> 4.9; K = 8 256x64 x6 8.5 -> 12.2, 100x1000 NT 11.9 -> 17.1, 2000x20 4.2 ->
        // 9.0 (only 347x34x6 NT gained, 3.0 -> 2.1).
        // One row times a B stored K x N over a K of kBf16DotOneRowMinK-kBf16DotOneRowMaxK: vdpbf16ps over the
        // same packed pairs, where AMX runs 16-row tiles for the one row (and pads an odd K to whole steps). 1
        // thread, median us of 3 alternated runs, AMX -> dot_bf16: 1x181x69 1.35 -> 0.69, 1x512x69 3.7 -> 2.6,
        // 1x2048x69 14.8 -> 12.1, 1x512x32 1.49 -> 1.00, 1x64x256 1.61 -> 1.01, 1x2048x256 even; kept AMX: K = 1000
        // (1x2048x1000 309 against 514) and 2 rows or more (2x512x256 9.6 against 11.0, 4x181x32 0.41 against 0.64).
        const char* dot_forced = std::getenv("JITMM_X86_LOWP_BF16_DOT");  // 0: AMX (measurements)
        if (isa >= hw::X86Isa::amx && p.m == 1 && !p.trans_b && p.k >= kBf16DotOneRowMinK &&
            p.k <= kBf16DotOneRowMaxK && (dot_forced == nullptr || dot_forced[0] != '0'))
            return LowpStep::dot_bf16;
        // Rows that end in a tile tail over a K of 6 or 8, with C's rows off 64-byte lines: the row tail's tile
        // configuration and the tile stores across lines cost more than the FMAs (1 thread, median us of 3
        // alternated runs, AMX -> fma_f32: K = 6: 100x300 3.73 -> 2.78, 56x57 x16 8.72 -> 6.75, 250x250 7.31 ->
        // 6.27, 1000x77 10.4 -> 8.6, 37x500 x4 11.6 -> 7.8, 999x999 177 -> 140; K = 8: 100x300 3.87 -> 3.27,
        // 56x57 x16 8.75 -> 7.69, 37x500 x4 11.9 -> 9.5, 999x999 178 -> 152, 250x250 and 300x1000 even). AMX
        // stays with C rows on lines (200x2000 35 against 40-43, 5x128 NT x10 K = 8 1.68 against 2.07), whole
        // row tiles (3072x160 45 against 55, 128x100 x8 12.9 against 15.8) and K = 10 (300x1000 33 against 39).
        const bool row_tail_short_k = p.k <= kBf16MaxRowTailFmaK && p.m % 16 != 0 &&
                                      (p.ldc * dtype_size(p.c_type)) % 64 != 0;
        const bool fma_k = p.k <= kBf16MaxFmaK || (p.k % 2 == 1 && p.k <= kBf16MaxOddFmaK) || row_tail_short_k;
        if (fma_k && !tiny && isa >= hw::X86Isa::amx && c_bytes < double(kAmxStreamedCBytes))
            return LowpStep::fma_f32;
        if (isa >= hw::X86Isa::amx && !tiny) return LowpStep::amx_bf16;
        if (isa >= hw::X86Isa::amx) return LowpStep::dot_bf16;
        // vdpbf16ps multiplies two pairs per lane; Sapphire Rapids class cores issue it at a quarter of the FMA
        // rate (107 GFLOP/s against 214 for f32 FMAs, 172 reached by fma_f32 on converted panels), so there the
        // converted path is the default. AMD's Zen 4 issues it at the FMA rate (hw::CpuInfo::bf16_dot_full_rate:
        // 233 GFLOP/s against 117), where it is the default: 1 thread, ratio to oneDNN (which runs vdpbf16ps),
        // fma_f32 -> dot_bf16: 256^3 0.50 -> 1.01, 1024^3 0.50 -> 1.04, 2048x4096x4096 NT 0.50 -> 1.06,
        // 128x4096x4096 NT 0.40 -> 0.99, 16x4096x4096 NN 0.34 -> 0.87, 64^3 0.50 -> 1.07.
        // 100 random shapes (seed 1803): geomean time 0.585 of fma_f32's. The FMAs keep a K of 1, where the
        // pairs are half padding (2007x15x1 NT 3.6 against 8.0 us, 1244x27x1 TN x36 120 against 158, 6x2082x1 NT
        // 1.8 against 2.3), and an odd K of a few values over few columns of an A stored M x K, whose rows the
        // pairs split (median us, fma_f32 against dot_bf16: 3216x9x3 NT x4 34.8 / 53.8, 3216x16x3 NT 7.7 /
        // 12.6, 2000x32x3 8.3 / 10.5, 3216x32x5 NT 17.3 / 19.5, 3216x9x7 NT 13.5 / 15.0; past kBf16DotOddFmaMaxKN
        // the dot products won: 3216x64x5 NT 33.8 / 31.3, 300x300x3 8.5 / 7.9, and so did A stored K x M:
        // 3216x9x5 TN 12.5 / 9.3).
        // JITMM_X86_BF16_DOT=1|0 forces one (measurements).
        const char* dot = std::getenv("JITMM_X86_BF16_DOT");
        const bool dot_forced_on = dot != nullptr && dot[0] == '1', dot_forced_off = dot != nullptr && dot[0] == '0';
        // And few rows times a B stored K x N of at least kBf16FmaBInPlaceMinColumns, which the FMAs read in place
        // (each k row widened as loaded, LowpLayout::b_in_place) where vdpbf16ps needs its k pairs packed: up to
        // kBf16FmaBInPlaceFewRows rows, or up to kBf16FmaBInPlaceMaxRows where B (over the batches with their own)
        // passes half of L2, so that its packing reads it from L3 or memory. 1 thread, Zen 4, median us, dot_bf16
        // -> fma_f32 with B in place: 1x48x796 2.60 -> 1.49, 2x170x484 5.0 -> 4.1, 3x671x1154 200 -> 138, 4x200x1000
        // 24.3 -> 15.3, 4x4096x4096 5106 -> 3273, 6x170x2000 43.2 -> 38.1, 7x144x135 x49 298 -> 182, 16x1000x1000
        // 369 -> 318; not over a B within half of L2 from 6 rows (6x170x484 7.9 -> 9.2, 16x170x484 17.1 -> 25.4),
        // nor from 30 rows (30x500x300 x4 286 -> 372, 48x2000x512 598 -> 973), nor a B of few columns, whose
        // packing costs little (C^T of 6x2x452 TN, 2 rows of 6 columns: 1.6 -> 3.0). An A stored K x M only with
        // such a B: the FMAs' transposing widening of A costs more than the pairs' transpose (2x68x616 TN 4.3 ->
        // 6.1; 3x671x1154 TN 207 -> 145).
        const double l2 = cpu.l2_bytes > 0 ? double(cpu.l2_bytes) : 1024.0 * 1024;
        const bool fma_b_in_place = !p.trans_b && isa >= hw::X86Isa::avx512 && p.n >= kBf16FmaBInPlaceMinColumns &&
                                    ((p.m <= kBf16FmaBInPlaceFewRows && !p.trans_a) ||
                                     (p.m <= kBf16FmaBInPlaceMaxRows && p.b_bytes_read() > l2 / 2));
        const bool fma_short_k = fma_b_in_place || p.k == 1 ||
                                 (!p.trans_a && p.k % 2 == 1 && p.k <= kBf16DotOddFmaMaxK &&
                                  p.k * p.n <= kBf16DotOddFmaMaxKN);
        if (isa >= hw::X86Isa::avx512_bf16 && !dot_forced_off &&
            (dot_forced_on || (cpu.bf16_dot_full_rate && !fma_short_k)))
            return LowpStep::dot_bf16;
    }
    return LowpStep::fma_f32;
}

// The packed element type equals A's own: the kernel can read A where it lies.
// f16 or bf16 on the f32 FMAs with B stored K x N over at most this many row tiles reads B in place
// (LowpLayout::b_in_place): each B value then serves that many tiles, and widening it in every tile's loads costs
// less than packing it (a store and a reload of 4 bytes per 2-byte value). f16: 1 thread, median us, packed ->
// in place (f32 in place): 14x1046x241 81 -> 37 (36), 14x2000x1000 1040 -> 390 (590), 28x512x512 112 -> 78 (68), 56x1046x241 187 ->
// 147 (148), 84x1046x241 241 -> 223 (225), 84x2000x1000 2370 -> 2150 (2300); past it packing wins: 126x512x512
// 336 -> 345 (324), 252x1046x241 609 -> 684 (597), 1024^3 10100 -> 18000 (10050).
constexpr int64_t kF16BInPlaceMaxRowTiles = 6;
// Such a B streamed from memory: K blocks of this many rows, rows prefetched this many k steps ahead (see the
// planner).
constexpr int64_t kF16BStreamedKBlock = 32;
// f16 over at most this many column panels with an A past L2: all of K in one block (see the planner).
constexpr int64_t kF16WholeKMaxPanels = 2;
// fma_f32 up to this K prefetches the C tile before the K loop (LowpLayout::c_prefetch), as the f32 family does.
constexpr int64_t kMaxKForCTilePrefetch = 12;
// f16 A read in place over one column panel up to this K (see the planner), stored M x K or K x M.
constexpr int64_t kF16AInPlaceMaxK = 2;
constexpr int64_t kF16TransposedAInPlaceMaxK = 16;
constexpr int64_t kF16KPairsTransposedAInPlaceMaxK = 12;  // where the k pairs serve instead past it
// f16 k pairs (LowpLayout::f16_k_pairs) from this K (see the planner).
constexpr int64_t kF16KPairsMinK = 8;
constexpr int kF16BRowPrefetchSteps = 32;

bool b_in_place_fits(const Problem& p, const LowpLayout& L) {
    if (const char* forced = std::getenv("JITMM_X86_LOWP_F16_B_IN_PLACE")) {  // 0/1: measurements
        if (forced[0] == '0') return false;
    }
    const bool possible = L.step == LowpStep::fma_f32 &&
                          (p.b_type == JITMM_DTYPE_F16 || p.b_type == JITMM_DTYPE_BF16) && !p.trans_b &&
                          L.isa >= hw::X86Isa::avx512 &&
                          int64_t(L.k_unroll + 1) * p.ldb * dtype_size(p.b_type) < (int64_t(1) << 31);
    if (!possible) return false;
    const char* forced = std::getenv("JITMM_X86_LOWP_F16_B_IN_PLACE");
    return (forced != nullptr && forced[0] == '1') || ceil_div(p.m, int64_t(L.mr)) <= kF16BInPlaceMaxRowTiles;
}

// Decode B blocks (one row tile, or the few of VNNI decode: each packed K block of B is read by those tiles' calls
// right after it is packed) of at most this many bytes: the block is read back from L1, where a larger one (2048
// columns) leaves L1 as it is written and comes back from L2, its lines evicting C's and B's on the way. Where
// that leaves fewer than kDecodeL1BlockMinColumns (long K blocks) the blocks stay as they were: a call per panel
// and a packer call per block cost more than the block saves (16x781x256 bf16: 20.2 -> 21.5 us at 64 columns).
// For a B that stays in L2 (at most kDecodeL1BlockMaxBFraction of it) or K blocks of at most kDecodeL1BlockShortK
// rows: narrow blocks of a B from memory walk down its rows a few lines each (8x1024x512 bf16 x8 800 -> 7570 us
// at 64 columns), where a short K's rows are few enough streams. 1 thread, median us, 2048 -> L1 columns: bf16
// 18x2588x24 9.7 -> 6.6, 16x3000x48 16.3 -> 10.0, 24x777x100 9.8 -> 6.6, 8x1536x512 80 -> 44; s8 6x2479x42 6.3
// -> 3.5, 16x2000x512 65 -> 37, 30x1500x128 13.4 -> 9.6; u8 (VNNI) 4x2000x100 8.3 -> 5.5. Over 36 random decode
// shapes (M 1-32, N 500-4096, K 8-256) budgets of 8, 12 and 16 KB all took 0.75x the time (geometric mean), 24 KB
// 0.84x.
constexpr int64_t kDecodeL1BlockBytes = 16 * 1024;
constexpr int64_t kDecodeL1BlockMinColumns = 64;
constexpr int64_t kDecodeL1BlockShortK = 64;
constexpr double kDecodeL1BlockMaxBFraction = 0.75;

bool decode_block_in_l1(const Problem& p, int64_t kc, int64_t l2) {
    return kc <= kDecodeL1BlockShortK || p.b_bytes_read() <= kDecodeL1BlockMaxBFraction * double(l2);
}

bool a_readable_in_place(const Problem& p, LowpStep step) {
    switch (step) {
        case LowpStep::amx_int8: case LowpStep::amx_bf16: case LowpStep::dot_bf16: return true;
        case LowpStep::vnni_u8s8: return p.a_type == JITMM_DTYPE_U8;
        case LowpStep::madd_s16: case LowpStep::fma_f32: return false;
    }
    return false;
}

}  // namespace

const char* step_name(LowpStep s) {
    switch (s) {
        case LowpStep::amx_int8: return "amx_int8";
        case LowpStep::amx_bf16: return "amx_bf16";
        case LowpStep::vnni_u8s8: return "vnni_u8s8";
        case LowpStep::madd_s16: return "madd_s16";
        case LowpStep::dot_bf16: return "dot_bf16";
        case LowpStep::fma_f32: return "fma_f32";
    }
    return "?";
}

bool is_lowp_problem(const Problem& p) {
    return is_int8(p.a_type) || is_int8(p.b_type) || is_half(p.a_type) || is_half(p.b_type);
}

std::string lowp_unsupported_reason(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa) {
    const std::string combo = name(p.a_type) + "*" + name(p.b_type) + "->" + name(p.c_type);
    if (isa < hw::X86Isa::avx2) return "the tier is below avx2";
    const bool int8 = is_int8(p.a_type) && is_int8(p.b_type);
    const bool half = is_half(p.a_type) && p.a_type == p.b_type;
    if (!int8 && !half)
        return "no x86 kernel multiplies " + name(p.a_type) + " by " + name(p.b_type) +
               " (supported: s8/u8 x s8/u8, bf16 x bf16, f16 x f16)";
    if (int8 ? !(is_float_out(p.c_type) || p.c_type == JITMM_DTYPE_S32) : !is_float_out(p.c_type))
        return "no x86 kernel for " + combo + " (c_type: f32, bf16, f16" + (int8 ? ", s32)" : ")");
    if ((p.a_type == JITMM_DTYPE_F16 || p.c_type == JITMM_DTYPE_F16 ||
         (p.bias != BiasKind::none && p.bias_type == JITMM_DTYPE_F16)) &&
        !cpu.f16c)
        return "f16 needs F16C, which this CPU lacks";
    if (p.bias != BiasKind::none && p.bias_type != p.c_type && p.bias_type != JITMM_DTYPE_F32)
        return "bias_type " + name(p.bias_type) + " with " + combo + " (bias_type: f32 or the c_type)";
    if (p.c_type == JITMM_DTYPE_S32) {
        // s32 C keeps the exact integer sum: only what integer arithmetic does exactly.
        if (p.alpha != 1.0f || (p.beta != 0.0f && p.beta != 1.0f))
            return combo + " computes exactly in integers: alpha must be 1 and beta 0 or 1 (use an f32 c_type "
                           "with scales to dequantize)";
        if (p.activation != Activation::none && p.activation != Activation::relu)
            return combo + ": only relu is exact on s32 (use an f32 c_type for " +
                   activation_name(p.activation) + ")";
        if (p.bias != BiasKind::none && p.bias_type != JITMM_DTYPE_S32)
            return combo + ": the bias must be s32 (bias_type " + name(p.bias_type) + ")";
    }
    return "";
}

namespace {

// C^T = B A^T for few rows: B (stored N x K) goes into the A tiles as it lies and streams once, A is packed like
// a B. Measured on 4096 x 4096 weights: 2x oneDNN at 1-32 rows, 1.4-1.7x at 64-128, still ahead of the normal
// order at 256 (bf16 10.9 against 14.9 ms), even at 512. B's row stride must be whole cache lines (a
// misaligned base is copied at run time), and there must be no compensation term.
constexpr int64_t kSwapMaxRows = 256;
// A B this small is packed in the normal order instead: its packing costs less than the swapped path's
// transposed epilogue, which gathers every C row from the block (1 thread, TSC per C API call, swapped ->
// normal: 64^3 NT s8 2393 -> 782-804).
constexpr int64_t kSwapMinBBytes = 16 * 1024;

// And K must be long for the rows: the swapped calls gather every C row out of their transposed blocks (about a
// cycle per C value), where the normal order packs B (a fraction of a cycle per byte of B): the swap pays from
// about 3 bytes of K per row of C. 1 thread, median us, swapped -> normal: bf16 77x128x96 3.9 -> 2.5, 64x1536x64
// 22.9 -> 19.9, s8 77x256x128 6.1 -> 3.6, 128x1024x256 36 -> 29; kept swapped: bf16 16x4096x128 27 (normal 49),
// 32x4096x256 242 (368), 128x2048x512 360 (392), s8 64x2048x512 56 (71); even: bf16 96x96x512, 200x768x768.
constexpr int64_t kSwapMinKBytesPerRow = 3;
// A thread per this many flops of a swapped call, as the normal order's AMX threads (it was 16 MFLOP: 197x77x1024
// NT bf16, 31 MFLOP, ran one thread at 2, 0.65-0.82x oneDNN's two).
constexpr double kSwappedFlopsPerThread = 4.0e6;

// And N wide for the rows: the swapped order splits N over the threads, each reading all of the packed A^T, where
// the normal order splits the rows too. 1 thread, median us, swapped / normal: bf16 128x128x4096 NT 149 / 127,
// 128x256x4096 NT 311 / 377; 2 threads: 128x128x4096 131 / 60, 128x256x4096 232 / 163, 197x77x1024 32 / 24,
// 128x512x4096 344 / 392, 64x512x2048 71 / 119, 16x128x4096 16 / 21.
constexpr int64_t kSwapMinColumnsPerRow = 2;
constexpr int64_t kSwapMinColumnsPerRowThreads = 4;

// rows_off_lines_ok: B's rows need not be whole cache lines (the swapped path then copies each row tile's rows
// before its tile loads, which still beats packing all of B in the normal order: 1 thread, ratio to oneDNN,
// bf16 1x2414x1348 0.54 -> 0.89, 30x2747x1417 0.60 -> 1.00, 8x4096x4100 0.94 -> 1.55; s8 30x2747x1417 0.66 ->
// 1.06). The caller says no where the VNNI dot products serve instead (they read such rows in place: s8
// 1x2414x1348 1.46 swapped -> 1.11, 8x4096x4100 1.37 -> 1.28).
// From this many rows the swapped order beats the dot products over such rows too: it reads them in place at any
// stride for up to 128 rows (amx_rows_any_stride), where the dot products' lane reductions grow with the rows. 1
// thread, median us, dot -> swapped, s8: 5x3414x60 16.0 -> 7.4 (u8 too), 4x3414x130 20.2 -> 12.2, 8x3414x300 52 ->
// 23, 16x3414x1500 752 -> 392, 4x2414x1348 355 -> 233, 16x4096x4100 3983 -> 1194, 4x500x700 5.9 -> 6.4; fewer rows
// are mixed (3x3414x60 8.4 -> 6.5, 3x3414x300 19.0 -> 20.0, 2x3414x300 15.0 -> 19.3) and keep the dot products.
// Under 8 rows only over a short K or a B past L2: the swapped tiles pad the rows to 16, and over a long K in
// cache the dot products' reductions weigh less (u8, dot -> swapped: 4x282x2306 8.9 -> 15.8, 6x282x2306 13.7
// -> 16.0, 4x282x1000 4.1 -> 6.0, 4x500x700 5.3 -> 6.8; 8x282x2306 even, 16x282x2306 33 -> 17, 4x1000x2306 (B
// 2.3 MB) 213 -> 159).
constexpr int64_t kSwapOverDotMinRows = 4;
constexpr int64_t kSwapOverDotAnyKRows = 8;
constexpr int64_t kSwapOverDotShortK = 256;

bool swap_beats_dot(const Problem& p, int64_t l2) {
    const double b_bytes = double(p.n) * double(p.k) * double(p.batch > 1 && p.stride_b != 0 ? p.batch : 1);
    return p.m >= kSwapOverDotAnyKRows ||
           (p.m >= kSwapOverDotMinRows && (p.k <= kSwapOverDotShortK || b_bytes > double(l2)));
}

bool swap_fits(const Problem& p, LowpStep step, int num_threads, bool rows_off_lines_ok) {
    const char* env = std::getenv("JITMM_X86_LOWP_SWAP");  // 0: the normal roles (measurements)
    if (env != nullptr && env[0] == '0') return false;
    const int64_t b_row_bytes = p.ldb * dtype_size(p.b_type);
    const int64_t columns_per_row = num_threads > 1 ? kSwapMinColumnsPerRowThreads : kSwapMinColumnsPerRow;
    return step_is_amx(step) && p.trans_b && p.m <= kSwapMaxRows && p.n >= 64 && p.n >= columns_per_row * p.m &&
           p.a_zero_point == 0 &&
           (b_row_bytes % 64 == 0 || rows_off_lines_ok) && p.n * p.k * dtype_size(p.b_type) > kSwapMinBBytes &&
           p.k * dtype_size(p.b_type) >= kSwapMinKBytesPerRow * p.m;
}

X86LowpPlan plan_swapped(const Problem& p, LowpLayout L, int64_t l2, int num_threads) {
    X86LowpPlan plan;
    L.swap_ab = true;
    std::swap(L.a_type, L.b_type);
    L.mr = 32;
    L.nv = 2;
    L.k_unroll = 1;
    const int esz = step_elem_bytes(L.step);
    // The packed A (all its rows over a K block) is read again for every 32 rows of B, so it stays in half
    // of L2: one K block when it fits, else K blocks with the partial sums of all of C^T in a strip between
    // them (K blocks outermost: each K slice of A is packed and held once while B's slices stream past).
    // Measured bf16 128x4096x11008 NT (2.8 MB packed): 22.8 ms in one block (the A panels from L3 every
    // time).
    const int64_t step_elems = kAmxStepBytes / esz;
    const int64_t packed_row_bytes = round_up(p.m, 32) * esz;  // one k of the packed A
    const int64_t kc_fit = std::max<int64_t>(step_elems, (l2 / 2) / packed_row_bytes / step_elems * step_elems);
    const int64_t k_blocks = ceil_div(p.k, kc_fit);
    plan.kc = round_up(ceil_div(p.k, k_blocks), step_elems);
    plan.nc = round_up(p.m, 32);
    plan.mc = round_up(p.n, 32);
    plan.pack_a = false;
    plan.a_panel_ld = (round_up(plan.kc * esz, 64) + 64) / esz;
    L.acc_ld = plan.nc * 4 + 64;
    plan.layout = L;
    // Threads split N (the tile rows here), each streaming its own rows of B. A few rows are bound by reading
    // B, not by the products: a thread per kStreamedBBytesPerThread of B as well as per kSwappedFlopsPerThread
    // (1x4096x4096 bf16 at 16 threads planned 2 by the products alone, 0.39x oneDNN).
    const double b_bytes = double(p.k) * double(p.n) * double(dtype_size(p.b_type)) * double(p.batch);
    int threads = std::max(1, num_threads);
    threads = static_cast<int>(std::min<double>(
        threads, std::max({1.0, p.flops() / kSwappedFlopsPerThread, b_bytes / kStreamedBBytesPerThread})));
    plan.threads = threads;
    const int64_t per_batch = balanced_chunks_per_batch(p.batch, threads);
    plan.m_chunks = static_cast<int>(std::min(ceil_div(p.n, int64_t(32)), per_batch));
    plan.n_chunks = 1;
    return plan;
}

// VNNI decode, B stored N x K (a Linear layer's weights): dot products along K read B in place, so the weights
// stream once per call at memory speed instead of being packed (a full copy of B per call, which held the
// packed path to ~0.5x oneDNN on 1-16 rows). JITMM_X86_LOWP_DOT=0 turns it off; 1 takes it up to
// kDotMaxRowsModeled rows whatever the cost model says (tests).
constexpr int64_t kDotMaxRows = 16;
// A B this small is packed instead (as the small calls pack any B): the dot products' lane reductions and
// per-call A packing cost more than packing it (1 thread, TSC per C API call, dot -> packed: 16^3 NT s8
// 870 -> 446, u8 782 -> 178; 8^3 NT s8 965 -> 270, u8 309 -> 136).
constexpr int64_t kDotMinBBytes = 16 * 1024;
// Unless K is long for the few rows: the reductions then come once per long dot product, and packing B (a
// transpose of all of it, into panels mostly padding where N is small) is the call. 1 thread, median us,
// packed -> dot: u8 3x10x976 NT 1.85 -> 0.19, 7x13x1178 NT x27 57 -> 16, s8 4x20x512 NT 1.13 -> 0.41, u8
// 8x30x300 NT 0.51 -> 0.48; 16 rows stay packed (16x16x256 NT s8 0.23, dot 0.88: one whole-call AMX function).
constexpr int64_t kDotMinKBytesSmallB = 256;
constexpr int64_t kDotMaxRowsSmallB = 8;
// A core of one zmm FMA per cycle (Zen 4) keeps the dot products past decode rows, up to kDotMaxRowsModeled,
// where a cost model of the two prefers them (dot_beats_packed_halved_zmm): A and B read in place (the packed
// path's B transpose and column sums, and its columns padded to whole vectors, were most of such calls). 1
// thread, median us of 2 rounds, packed -> dot: s8 17x12x3151 NT 8.8 -> 5.3, 39x18x2832 22.0 -> 13.5, 31x33x812
// TT x2 21.5 -> 13.3, u8 43x7x3379 13.2 -> 8.2, 154x5x3377 x9 553 -> 380, 75x18x1962 22.4 -> 17.8, 18x108x3114
// 37.1 -> 29.3, 149x20x995 21.5 -> 17.6. Where the model prefers the packed tiles, they won: u8 187x16x1736 23.2
// against 30.8, 77x13x3926 23.3 against 25.7, s8 33x32x800 x13 66 against 74, 709x106x260 92 against 152.
constexpr int64_t kDotMaxRowsModeled = 256;

// A K of one 64-byte vector over 6 rows or more (4 from half a vector) leaves each dot product mostly its lane
// reduction, as in the f32 dot family: B packed serves it better (1 thread, median us, dot -> packed: VNNI tier s8
// 16x2048x32 NT 31.9 -> 12.3, 12x3000x24 34.5 -> 19.9, 16x1024x64 15.0 -> 10.1; AMX tier u8 -> f32 8x2560x10
// 18.2 -> 8.4, 16x2048x32 29.5 -> 5.1, 4x4096x16 14.7 -> 3.1, 5x4096x32 20.0 -> 5.7). Fewer rows keep the dot
// products (s8 4x4096x64 15.2 against 31.0, u8 2x4096x32 6.5 against 10.2, 3x4096x16 even).
// A core of one zmm FMA per cycle (Zen 4: zmm ops in two halves, the reductions' shuffles too) moves all three:
// 2-3 rows take B packed up to half a vector of K, 4-7 up to a whole one and 8 or more up to three (1 thread, median us, dot -> packed: s8 2x4096x16 NT 7.4 -> 4.1, 3x4096x32 10.0 -> 7.1, 4x3000x34
// 12.9 -> 8.2, 4x3000x64 12.3 -> 10.4, u8 4x3000x64 10.4 -> 8.2; s8 8x3000x100 30.9 -> 23.3, 12x3000x128 45.3 ->
// 33.9, 16x3000x160 75.7 -> 51.2; even from 256 at 12 and 16 rows, the dot products ahead from 512: 16x3000x512
// 153 against 327). Past those the dot products keep them (2x3000x64 5.0 against 8.7, 3x4096x64 9.6 against
// 12.9).
constexpr int64_t kDotMinRowsShortK = 6;
constexpr int64_t kDotMinRowsHalfK = 4;
constexpr int64_t kDotMinRowsHalfVector = 2;
constexpr int64_t kDotMinRowsOneVector = 4;
constexpr int64_t kDotMinRowsThreeVectors = 8;

// The cost model behind kDotMaxRowsModeled, in cycles of one core of one zmm vpdpbusd a cycle (64 products):
// the packed tiles run the products over columns padded to whole vectors of 16 at ~95% of that rate, after B's
// transpose into panels with its column sums (~0.15 cycles a byte of B); the 4 x 4 dot tiles run them over
// columns padded to 4 at ~71% (loads and B's shift beside the products), plus ~48 cycles of lane reductions and
// stores a tile. Calibrated on Zen 4 over 80 random NT and TT shapes of 17-2048 rows; the dot products are
// taken where they cost no more than the packed tiles. Not for 8 columns or fewer below 2 KB of K, where the
// model misses what the dot products lose (u8 22x6x672 x8 10.8 -> 11.8 us, 184x6x1392 18.7 -> 20.2).
bool dot_beats_packed_halved_zmm(const Problem& p) {
    const double m = double(p.m), n = double(p.n), k = double(p.k * dtype_size(p.b_type));
    if (p.n <= 8 && p.k * dtype_size(p.b_type) < 2048) return false;
    const double products = m * n * k / 64.0;
    const double packed = products * double(round_up(p.n, int64_t(16))) / n / 0.95 + 0.15 * n * k;
    const double dot = products * double(round_up(p.n, int64_t(4))) / n / 0.71 +
                       48.0 * double(ceil_div(p.m, int64_t(4))) * double(ceil_div(p.n, int64_t(4)));
    return packed >= dot;
}

bool dot_fits(const Problem& p, LowpStep step, hw::X86Isa isa, const hw::CpuInfo& cpu) {
    const char* env = std::getenv("JITMM_X86_LOWP_DOT");
    if (env != nullptr && env[0] == '0') return false;
    const int64_t k_bytes = p.k * dtype_size(p.b_type);
    const bool halved_zmm = cpu.zmm_fma_per_cycle == 1;
    const bool reductions_dominate =
        halved_zmm ? (k_bytes <= 32 && p.m >= kDotMinRowsHalfVector) ||
                         (k_bytes <= 64 && p.m >= kDotMinRowsOneVector) ||
                         (k_bytes <= 192 && p.m >= kDotMinRowsThreeVectors)
                   : (k_bytes <= 64 && p.m >= kDotMinRowsShortK) || (k_bytes <= 32 && p.m >= kDotMinRowsHalfK);
    // zmm and mask registers: the AVX-512 VNNI tiers only (AVX-VNNI at avx2 packs B).
    const bool forced = env != nullptr && env[0] == '1';  // every row count the model may take (tests)
    const bool rows_fit = p.m <= kDotMaxRows || (p.m <= kDotMaxRowsModeled &&
                                                 (forced || (halved_zmm && dot_beats_packed_halved_zmm(p))));
    return step == LowpStep::vnni_u8s8 && isa >= hw::X86Isa::avx512 && p.trans_b && rows_fit &&
           !reductions_dominate && p.a_zero_point == 0 &&
           p.ldb * dtype_size(p.b_type) * 15 < (int64_t(1) << 31) &&
           (p.n * p.k * dtype_size(p.b_type) > kDotMinBBytes ||
            (k_bytes >= kDotMinKBytesSmallB && p.m <= kDotMaxRowsSmallB));
}

// Flops a thread of a vector step needs to pay for its fan-out: 2 MFLOP for vpdpbusd on a core of two zmm FMA
// ports (the Intel cores measured), fewer where the same flops take longer: a step of half vpdpbusd's products per
// instruction (vdpbf16ps, vpmaddwd, converted FMAs) or a core issuing one zmm FMA per cycle (Zen 4, 2 threads,
// median us, one thread -> two: bf16 100^3 10.1 -> 6.1, 80^3 4.7 -> 3.1, 32x256x64 5.2 -> 3.1; s8 100^3 5.5 ->
// 3.4; the dot products: u8 16x578x425 NT 22.6 -> 11.8, s8 8x216x668 NT 6.7 -> 3.9, f16 6x468x481 NT 27.4 -> 15.2).
double vector_flops_per_thread(const LowpLayout& L, const hw::CpuInfo& cpu) {
    const double step_rate = (L.step == LowpStep::vnni_u8s8 ? 1.0 : 0.5) *
                             (L.isa >= hw::X86Isa::avx512 ? std::clamp(cpu.zmm_fma_per_cycle, 1, 2) / 2.0 : 1.0);
    return 2.0e6 * step_rate;
}

constexpr int64_t kDotTwoByEightMinRows = 6;
constexpr int64_t kDotTwoByEightMinKBytes = 1024;

X86LowpPlan plan_dot(const Problem& p, LowpLayout L, int num_threads, const hw::CpuInfo& cpu) {
    X86LowpPlan plan;
    L.dot_nt = true;
    L.dot_row_comp = L.compensate;  // s8 A (no zero point here): per row, not per column
    L.compensate = false;
    L.b_row_bytes = p.ldb * dtype_size(p.b_type);
    // Tiles rows x B rows: rows * nv accumulators plus the A rows and B temporaries in 32 registers.
    L.mr = p.m == 1 ? 1 : p.m <= 3 ? static_cast<int>(p.m) : 4;
    L.nv = p.m == 1 ? 16 : p.m <= 3 ? 8 : 4;
    // int8 over 6 or more rows and a long K, on a chip whose prefetchers take about 8 streams: tiles of 2 rows by 8
    // B rows, 8 of B's rows streaming at once instead of 4 (1 thread, Zen 4, median us of 3 alternated rounds,
    // 4x4 -> 2x8: s8 6x1024x2048 NT 225 -> 197, 8x1024x2048 245 -> 215, 12x1024x2048 296 -> 259, 16x1024x2048 326
    // -> 294, 8x4096x4096 1541 -> 1457, 6x700x3000 218 -> 172, 16x11008x4096 5808 -> 5562, 6x1500x1200 250 ->
    // 223, 8x3000x1024 419 -> 399; 4 rows lose, each B row then streamed twice, 4x4096x4096 946 -> 1094, and so do
    // K of 512 or 768 bytes, 8x3000x512 216 -> 246, 16x3000x768 308 -> 427).
    // bf16 and f16 (vdpbf16ps, converted FMAs) gain at 5 and 6 rows only (bf16 6x2000x1500 NT 554 -> 459,
    // 6x4096x4096 2560 -> 2361, 5x1024x2048 321 -> 281; f16 6x1024x2048 408 -> 368), 7 and more mixed (7x4096x4096
    // 2571 -> 2783, 8x2000x1500 622 -> 513).
    const bool two_by_eight_rows = L.step == LowpStep::vnni_u8s8 ? p.m >= kDotTwoByEightMinRows
                                                                 : p.m >= 5 && p.m <= 6;
    if (cpu.few_streams_from_memory && two_by_eight_rows && p.k * dtype_size(p.b_type) >= kDotTwoByEightMinKBytes) {
        L.mr = 2;
        L.nv = 8;
    }
    if (const char* forced = std::getenv("JITMM_X86_LOWP_DOT_TILE")) {  // "RxN", a tuning knob
        int r = 0, n = 0;
        if (std::sscanf(forced, "%dx%d", &r, &n) == 2 && r >= 1 && (n == 4 || n == 8 || n == 16) &&
            r * n + r + 5 <= 32) {
            L.mr = r;
            L.nv = n;
        }
    }
    L.k_unroll = 2;
    // K in whole 64-byte vectors of packed A: 64 int8 values, or 16 f32 values (fma_f32: f16 A widened).
    const int esz = step_elem_bytes(L.step);
    plan.kc = round_up(p.k, 64 / esz);
    plan.nc = round_up(p.n, L.nv);
    plan.mc = round_up(p.m, L.mr);
    plan.pack_a = true;
    plan.a_panel_ld = plan.kc + 64 / esz;  // rows a line apart past the padding
    L.a_row_bytes = plan.a_panel_ld * esz;
    // f16 over many rows (the few-columns case): A's rows in place, each read once per column tile, where packing
    // them wrote and read back twice A's bytes (1 thread, median us, packed -> in place (f32): NT 94x2x2631
    // 28.8 -> 11.0 (12.9), 33x2x3487 x13 346 -> 251 (404), 23x7x1892 x7 53 -> 39 (34), 200x8x1000 38 -> 29 (17)).
    // And over fewer rows where one column tile is all of N: each A row is then widened once either way (1
    // thread, median us of 3 rounds, packed -> in place (f32): NT 6x2x2227 1.56 -> 0.71 (0.66), 4x2x1306 0.36 ->
    // 0.30 (0.21); more column tiles lost, each widening A's rows again: 8x16x1000 2.23 -> 2.42, 4x64x512 1.99 ->
    // 2.54).
    const bool one_column_tile = p.n <= L.nv;
    if (L.step == LowpStep::fma_f32 && !p.trans_a && (p.m > kDotMaxRows || one_column_tile) &&
        int64_t(L.mr) * p.lda * dtype_size(p.a_type) < (int64_t(1) << 31)) {
        L.dot_a_in_place = true;
        plan.pack_a = false;
        L.a_row_bytes = p.lda * dtype_size(p.a_type);
    }
    L.acc_ld = 0;
    plan.layout = L;
    int threads = std::max(1, num_threads);
    // Memory-bound: a thread per kStreamedBBytesPerThread of weights (each streams its own rows of B), as the
    // swapped path, and of A's rows where they are read in place (many rows over few columns: 33x2x3487 f16 NT
    // x13 streams 3 MB of A against 181 KB of B, and ran on one thread of 16: 185 -> 252 us).
    const double a_streamed = L.dot_a_in_place ? double(p.m) * double(p.k) * double(dtype_size(p.a_type)) : 0.0;
    // And a thread per vector_flops_per_thread, or per kMinFlopsPerBatchThread where batches go to the threads
    // whole: B's bytes alone left small calls on one thread (2 threads, median us, one thread -> two: 3x420x86 NT
    // x12 u8 14.9 -> 8.1, 12x130x787 NT x5 u8 32.9 -> 17.2, 8x213x558 NT x2 f16 35.5 -> 18.3, 12x172x589 NT u8 6.9
    // -> 4.0).
    const double flops_threads = std::max(p.flops() / vector_flops_per_thread(L, cpu),
                                          p.batch > 1 ? std::min(double(p.batch), p.flops() / kMinFlopsPerBatchThread)
                                                      : 1.0);
    threads = static_cast<int>(std::min<double>(
        threads, std::max({1.0, flops_threads,
                           (double(p.n) * double(p.k) * double(dtype_size(p.b_type)) + a_streamed) *
                               double(p.batch) / kStreamedBBytesPerThread})));
    plan.threads = threads;
    const int64_t per_batch = balanced_chunks_per_batch(p.batch, threads);
    plan.n_chunks = static_cast<int>(std::min(ceil_div(p.n, int64_t(L.nv)), per_batch));
    plan.m_chunks = 1;
    return plan;
}

constexpr int64_t kF16DotMinKOneRow = 8;
constexpr int64_t kF16DotMinK = 16;

// f16 with B stored N x K: the dot products (widening B's rows as they stream, LowpLayout::dot_nt) where the f32
// engine runs its dot family on the same shape in f32 (plan::dot_family_serves: few rows, or few columns over a
// long K, and K long enough for the lane reductions), instead of transposing all of B into f32 panels.
// JITMM_X86_LOWP_DOT=0 turns it off as for int8.
bool f16_dot_fits(const Problem& p, const LowpLayout& L) {
    const char* env = std::getenv("JITMM_X86_LOWP_DOT");
    if (env != nullptr && env[0] == '0') return false;
    if (L.step != LowpStep::fma_f32 || p.b_type != JITMM_DTYPE_F16 || L.isa < hw::X86Isa::avx512 || !p.trans_b ||
        p.ldb * dtype_size(p.b_type) * 15 >= (int64_t(1) << 31))
        return false;
    // A K of under a vector leaves each dot product a masked load and a lane reduction, where the gathers pack B
    // at a few values a row (1 thread, median us, dot -> packed: 1x3574x2 x2 6.3 -> 3.0, 1x2185x3 1.95 -> 1.2,
    // 2x500x8 0.86 -> 0.67; kept: 1x500x8 0.50 against 0.62-0.73, 2x500x16 0.83 against 1.3).
    if (p.k < (p.m == 1 ? kF16DotMinKOneRow : kF16DotMinK)) return false;
    Problem as_f32 = p;  // the f32 engine's own decision (it reads only the shape and layouts)
    as_f32.a_type = as_f32.b_type = as_f32.c_type = as_f32.bias_type = JITMM_DTYPE_F32;
    return dot_family_serves(as_f32, L.isa);
}

// bf16 with B stored N x K over few rows (up to kBf16DotMaxRows): vdpbf16ps dot products along K read B's rows in
// place (LowpLayout::dot_nt), where AMX packs all of B into 32-column panels whose tiles are mostly padding, or
// (swapped, from 64 columns) copies rows that are not whole lines. The dot products are bound by vdpbf16ps
// (~100 GFLOP/s a core: B at ~100 / M GB/s) or by reading B; the AMX paths read B at ~50-60 GB/s swapped over
// whole-line rows (prefetching the next rows from memory), ~20 over copied rows, 12-45 in the normal order over
// few columns. So at the AMX tier: one row, unless the swapped path reads whole-line rows of a B past half of L2
// (1 thread, median us, AMX / dot: 1x1024x1024 92 / 119, 1x256x1024 x8 277 / 307, 1x4096x4096 2011 / 2140,
// 1x11008x4096 3750 / 4265; within it 1x512x1024 17 / 10, 1x64x2048 x4 29 / 9.2); 2-3 rows unless the swapped
// path reads whole-line rows (or copies rows over a K under kBf16DotMinKSwapped); 4-8 rows over one or two column panels of few columns (M times the columns per
// 32-column panel at most kBf16DotMaxRowPanelColumns) and a K of kBf16DotMinKManyRows or more (AMX's fixed
// costs weigh less at K = 256). 1 thread, median us, AMX -> dot: 3x34x840 NT x16 80 -> 25, 1x34x840 x16 79 ->
// 9.5, 2x16x512 x8 8.3 -> 2.6, 1x1000x1000 86 -> 32, 2x1000x1000 89 -> 42, 3x1000x1000 87 -> 55, 1x300x100
// 1.8 -> 0.95, 4x16x1024 x8 22 -> 10, 4x48x512 x8 20 -> 15, 5x40x700 TT x6 26 -> 18, 8x8x2048 x8 42 -> 21;
// kept AMX: 2x512x1024 16.9 (dot 17.5), 3x512x256 3.0 (7.2), 3x64x256 x4 2.4 (3.8), 4x64x1024 x4 15.7 (19.1),
// 8x32x1024 x4 10.8 (19.5), 8x24x512 x8 11.1 (15.3), 6x16x256 x16 4.2 (8.5), 5x32x2048 x4 even.
constexpr int64_t kBf16DotMaxRows = 8;
constexpr int64_t kBf16DotMaxRowsAnyColumns = 3;
constexpr int64_t kBf16DotMaxRowPanelColumns = 128;
constexpr int64_t kBf16DotMinKManyRows = 512;
constexpr int64_t kBf16DotMinKSwapped = 128;
constexpr int64_t kBf16DotMaxTinyC = 32;

bool bf16_dot_fits(const Problem& p, const LowpLayout& L, int num_threads, int64_t l2) {
    const char* env = std::getenv("JITMM_X86_LOWP_DOT");
    if (env != nullptr && env[0] == '0') return false;
    if (p.a_type != JITMM_DTYPE_BF16 || p.b_type != JITMM_DTYPE_BF16 || L.isa < hw::X86Isa::avx512_bf16 ||
        !p.trans_b || p.a_zero_point != 0 || p.m > kBf16DotMaxRows || p.k < 32 ||
        p.ldb * dtype_size(p.b_type) * 15 >= (int64_t(1) << 31))
        return false;
    const char* forced = std::getenv("JITMM_X86_LOWP_BF16_DOT");  // 0/1: measurements
    if (forced != nullptr) return forced[0] == '1';
    // Without AMX the alternative packs B into f32 panels for the FMAs: 1 thread, median us, fma_f32 -> dot,
    // avx512_bf16 tier: 3x34x840 x16 147 -> 25, 2x4096x4096 10280 -> 2420, 8x32x256 x16 36 -> 22, 8x300x100 8.8
    // -> 6.7, 8x16x1024 x8 30 -> 20 (all 46 shapes of 1-8 rows measured faster).
    if (L.step != LowpStep::amx_bf16) return true;
    const bool swapped_whole_lines = swap_fits(p, LowpStep::amx_bf16, num_threads, false);
    const double b_bytes = double(p.n) * double(p.ldb) * double(dtype_size(p.b_type)) * double(p.batch);
    if (p.m == 1) return !swapped_whole_lines || b_bytes <= double(l2) / 2;
    // 2-3 rows over the swapped path's copied rows, a short K: each dot product is mostly its reduction (1 thread,
    // median us, AMX / dot: 3x779x35 3.4 / 3.8, 2x500x48 1.3 / 1.7, 3x300x40 x4 3.5 / 5.9; 2x800x100 even).
    if (p.m <= kBf16DotMaxRowsAnyColumns)
        return !swapped_whole_lines &&
               (p.k >= kBf16DotMinKSwapped || !swap_fits(p, LowpStep::amx_bf16, num_threads, true));
    // A C of at most kBf16DotMaxTinyC values takes them at any K: AMX runs one mostly empty tile a batch, its A
    // and B copied (1 thread, median us of 3 alternated runs, AMX -> dot: 4x7x410 NT x12 5.1 -> 3.3, 4x7x64 x12
    // 1.13 -> 0.94, 8x4x410 x12 5.4 -> 4.2, 6x5x64 x12 1.13 -> 1.14, 4x5x410 0.53 -> 0.25, 4x7x410 TT x12 14.1 ->
    // 5.8; past it AMX kept: 4x16x128 x12 1.7 (dot 2.7), 8x7x256 x12 3.2 (4.1)).
    if (p.m * p.n <= kBf16DotMaxTinyC) return true;
    const int64_t panels = ceil_div(p.n, int64_t(32));
    return !swapped_whole_lines && panels <= 2 && p.k >= kBf16DotMinKManyRows &&
           p.m * ceil_div(p.n, panels) <= kBf16DotMaxRowPanelColumns;
}

// The most lines of one A tile (rows of `row_lines` cache lines each, `stride_lines` apart) that share an L1
// set: 64 sets of 64-byte lines (48 KB, 12 ways, and every Intel L1D since Sandy Bridge has 64 sets).
int64_t a_tile_lines_per_l1_set(int64_t stride_lines, int64_t row_lines, int rows) {
    constexpr int64_t kSets = 64;
    int64_t count[kSets] = {};
    for (int r = 0; r < rows; ++r)
        for (int64_t l = 0; l < std::min(row_lines, kSets); ++l) ++count[(r * stride_lines + l) % kSets];
    const int64_t wraps = row_lines > kSets ? (row_lines + kSets - 1) / kSets : 1;  // long rows cover each set more
    return *std::max_element(count, count + kSets) * wraps;
}
// Lines of the A tile one set may hold while the B tiles stream through the other ways (of 12). 8 (was 6):
// 1 KB rows (s8/u8 K = 1024, bf16 K = 512) hold 8 lines a set and read in place beat packing A (1 thread,
// median us of 3 alternated runs, packed -> in place: s8 1024^3 742 -> 667, u8 1024^3 747 -> 664,
// s8 1024x1024x3072 3139 -> 2887, bf16 512^3 189 -> 180); 16 a set (bf16 1024^3, 2 KB rows) measured 4% slower
// in place, and long 4 KB K blocks (2048^3, 2048x4096x4096) 1-8% slower (A is not kept in L1 there anyway).
constexpr int64_t kAmxATileWaysPerSet = 8;

// Splits C over `parts` threads of one batch: m_chunks x n_chunks tile-aligned chunks. Every chunk packs its
// own columns of B for all of K, and its own rows of A when A is packed, so an N-only split (each thread
// packing all of A: 16 threads at 1024^3 bf16 pack 2 MB of A each for 134 MFLOP of products) repeats A's
// packing per thread, and an M-only split repeats B's. The split minimizes per thread the products (in
// bytes-of-packing time: an AMX core multiplies ~100 bf16 or ~200 int8 flops in the time it packs a byte,
// the vector steps ~25) plus the bytes packed, preferring N (the old rule) on ties.
// A C line written by two threads, in the split's unit (bytes packed): ~100 cycles of a line moving between
// cores, at ~10 bytes packed a cycle.
constexpr double kSharedCLineBytes = 1000;
// Below this many bytes of an A row (K), an N chunk edge within a page of C is priced like a shared line.
constexpr int64_t kSharedCPageMaxKBytes = 1024;

void choose_split(const Problem& p, X86LowpPlan& plan, int64_t parts, int64_t l2) {
    const LowpLayout& L = plan.layout;
    const int64_t row_tiles = ceil_div(p.m, int64_t(L.mr)), col_tiles = ceil_div(p.n, int64_t(plan.nr()));
    const bool amx = step_is_amx(L.step);
    const double flops_per_byte = amx ? (step_is_int(L.step) ? 200.0 : 100.0) : 25.0;
    const double a_bytes = double(dtype_size(p.a_type)) * (plan.pack_a ? 2.0 : 0.5);  // read + write, or read
    const double b_bytes = 2.0 * double(dtype_size(p.b_type));
    // C rows that are not whole lines put a line at each N chunk edge in two threads' chunks: every row moves it
    // between the cores (2 threads, 640x250x8 NT bf16, N chunks: ldc 250 35 us, ldc 256 14 us). Whole lines cost
    // about the same where a thread's piece of a row is shorter than a page: the L2 streamer, following one
    // thread's stores along the page, fetches the next thread's lines for ownership (the tile stores of an N
    // split were where its time went). It shows while K is short enough for C to be a large part of the work:
    // 2 threads, median us, N chunks -> M chunks: s8 784x512x128 55 -> 33, 512x512x128 35 -> 22, 784x512x256
    // 61 -> 39, 1024x512x512 120 -> 96, 384x768x768 NT 88 -> 82; bf16 784x512x128 64 -> 42, 1500x384x384 NT 188
    // -> 145, 1024x512x512 214 -> 186; at 1 KB of K the N split won (s8 1024^3 316 against 341, bf16 768^2 NT
    // 552 against 588), and the price turned near-ties the wrong way there (1024^3 bf16). A C that stays in the
    // cores' L2 from call to call moves no lines (2 threads, 256^3 s8 and bf16 and 196x384x64 bf16 measured
    // 12-19% slower split by rows), and C written non-temporally (amx_c_streamed) reads none for ownership.
    // Measured at 2 threads only: at 16 (the GPU machine's host) the N chunks still won, s8 784x512x128 7x2
    // 13-16 us against 13x1 17-26, where every thread packing all of B costs more than priced.
    const int64_t a_row_bytes = p.k * dtype_size(p.a_type);
    const int64_t c_size = dtype_size(p.c_type);
    const double c_bytes = double(p.m) * double(p.n) * double(c_size);
    const bool c_rows_share_lines = (p.ldc * c_size) % 64 != 0;
    const bool c_is_the_work = a_row_bytes <= 64 || (parts <= 2 && a_row_bytes < kSharedCPageMaxKBytes &&
                                                     !L.amx_c_streamed && c_bytes >= double(l2) / 2);
    auto cost = [&](int64_t m_chunks, int64_t n_chunks) {
        const double rows = double(ceil_div(row_tiles, m_chunks) * L.mr);
        const double cols = double(ceil_div(col_tiles, n_chunks) * plan.nr());
        const double k = double(p.k);
        const bool edges_shared = c_rows_share_lines || (c_is_the_work && cols * double(c_size) < 4096.0);
        const double shared_lines = edges_shared ? rows * double(std::min<int64_t>(2, n_chunks - 1)) : 0.0;
        return 2.0 * rows * cols * k / flops_per_byte + rows * k * a_bytes + cols * k * b_bytes +
               shared_lines * kSharedCLineBytes;
    };
    int64_t best_m = 1, best_n = std::min(col_tiles, parts);
    double best = cost(best_m, best_n);
    for (int64_t m = 2; m <= std::min(row_tiles, parts); ++m) {
        const int64_t n = std::min(col_tiles, parts / m);
        const double c = cost(m, n);
        if (c < best * 0.97) {
            best = c;
            best_m = m;
            best_n = n;
        }
    }
    plan.m_chunks = static_cast<int>(best_m);
    plan.n_chunks = static_cast<int>(best_n);
    // Fewer columns than threads: the rows take the rest (the old rule).
    if (best_m == 1)
        plan.m_chunks = static_cast<int>(std::min(row_tiles, ceil_div(parts, int64_t(plan.n_chunks))));
}

}  // namespace

// LowpLayout::b_src_*: the next block of B prefetched by the calls of the one before. Where B streams from memory
// (all it reads past L2) and a chunk runs one M block, each block of B was packed from memory between two
// blocks' calls, with nothing to overlap: a third of a 49x512x4608 s8 call. The rate: the next block's lines
// over the K-loop iterations of this block's calls, at most kMaxSourceLinesPerIteration, which the blocks of few
// rows over a long B need to come near covering it (1 thread, Zen 4, median us of 3 alternated rounds, at most
// 4 -> 12 -> 24 lines: 7x140x2707 s8 x7 397 -> 330 -> 256, 10x3696x270 NT bf16 x4 1115 -> 700 -> 688; 48 even;
// the shapes needing fewer lines unchanged).
constexpr int kMaxSourceLinesPerIteration = 24;
constexpr int64_t kS8FlipOneVectorMaxPanels = 2;  // (plan_x86_lowp: an s8 A flipped in the kernel)

void plan_b_source_prefetch(const Problem& p, X86LowpPlan& plan, int64_t l2) {
    LowpLayout& L = plan.layout;
    const char* env = std::getenv("JITMM_X86_LOWP_B_SOURCE_PF");  // 0: never (measurements)
    if (env != nullptr && env[0] == '0') return;
    if (step_is_amx(L.step) || L.isa < hw::X86Isa::avx512 || L.dot_nt || L.swap_ab || L.b_in_place ||
        L.f16_k_pairs || p.b_bytes_read() <= double(l2))
        return;
    const int64_t chunk_rows = ceil_div(p.m, int64_t(plan.m_chunks));
    const int64_t chunk_columns = std::min(p.n, round_up(ceil_div(p.n, int64_t(plan.n_chunks)), plan.nr()));
    const int64_t k_blocks = plan.k_blocks(p.k);
    // A block (GemmLowpKernel::run_chunk): one K block where a chunk of one M block packs them one at a time,
    // else all of K of an N block, read by every M block.
    const bool k_block_blocks = chunk_rows <= plan.mc && k_blocks > 1;
    const int64_t blocks = ceil_div(chunk_columns, plan.nc) * (k_block_blocks ? k_blocks : 1);
    // (Batches of one chunk each, their own B: a chunk's last block prefetches the next batch's first. Not where
    // a batch is one block of each, M within one M block: those run on GemmLowpKernel::run_small.)
    const bool next_batch_b =
        p.batch > 1 && p.stride_b != 0 && plan.m_chunks * plan.n_chunks == 1 && chunk_rows > plan.mc;
    if (blocks < 2 && !next_batch_b) return;
    const int64_t block_k = k_block_blocks ? plan.kc : p.k;
    const int64_t b_size = dtype_size(p.b_type);
    const int64_t stride = p.ldb * b_size;
    const int64_t seg_bytes = (p.trans_b ? block_k : std::min(plan.nc, chunk_columns)) * b_size;
    // (A row whose stride is off lines starts anywhere in its first line: one more.)
    const int64_t seg_lines = ceil_div(seg_bytes, 64) + (stride % 64 != 0 ? 1 : 0);
    const int64_t rows = p.trans_b ? std::min(plan.nc, chunk_columns) : std::min(block_k, p.k);
    const int64_t g = step_group(L.step);
    const int64_t iterations = ceil_div(chunk_rows, int64_t(L.mr)) *
                               ceil_div(std::min(plan.nc, chunk_columns), plan.nr()) *
                               std::max<int64_t>(1, ceil_div(block_k, g) / L.k_unroll);
    const int64_t per_iteration =
        std::clamp<int64_t>(ceil_div(rows * seg_lines, iterations), 1, kMaxSourceLinesPerIteration);
    const int lines = static_cast<int>(std::min(seg_lines, per_iteration));
    const int row_count = static_cast<int>(std::max<int64_t>(1, per_iteration / lines));
    if (int64_t(row_count) * stride >= (int64_t(1) << 31) || round_up(seg_lines, lines) * 64 >= (int64_t(1) << 31))
        return;
    L.b_src_rows = row_count;
    L.b_src_lines = lines;
    L.b_src_seg = round_up(seg_lines, lines) * 64;
    L.b_src_stride = stride;
}

X86LowpPlan plan_x86_lowp(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads) {
    X86LowpPlan plan;
    LowpLayout& L = plan.layout;
    L.step = choose_step(p, cpu, isa);
    L.isa = isa >= hw::X86Isa::avx512 ? isa : hw::X86Isa::avx2;
    L.a_type = p.a_type;
    L.b_type = p.b_type;
    L.c_type = p.c_type;
    L.bias_type = p.bias == BiasKind::none ? p.c_type : p.bias_type;
    L.ldc = p.ldc;
    L.alpha = p.alpha;
    L.beta = p.beta;
    L.bias = p.bias;
    L.activation = p.activation;
    L.a_scale = p.a_scale;
    L.b_scale = p.b_scale;
    L.int_epilogue = p.c_type == JITMM_DTYPE_S32;
    // Decode rows times a B stored N x K whose rows are not whole lines: the VNNI dot products read them in
    // place, where AMX would pack all of B per call (1x1024x2000 NT s8, what a 1024x2000 matrix times a vector
    // becomes, 1 thread: AMX 97 us, VNNI dot 32) and the swapped AMX path copies them tile by tile.
    const bool int8_dot = L.step == LowpStep::amx_int8 && p.b_type == JITMM_DTYPE_S8 &&
                          dot_fits(p, LowpStep::vnni_u8s8, L.isa, cpu);
    if (bf16_dot_fits(p, L, num_threads, cpu.l2_bytes > 0 ? cpu.l2_bytes : 1024 * 1024)) {
        L.step = LowpStep::dot_bf16;
        return plan_dot(p, L, num_threads, cpu);
    }
    const bool swap =
        swap_fits(p, L.step, num_threads, !int8_dot || swap_beats_dot(p, cpu.l2_bytes > 0 ? cpu.l2_bytes : 1 << 20));
    if (int8_dot && !swap) L.step = LowpStep::vnni_u8s8;
    // The +128 shift that makes an s8 A usable by vpdpbusd, and the zero point, both come out as a multiple
    // of B's column sums.
    const bool shifted = L.step == LowpStep::vnni_u8s8 && p.a_type == JITMM_DTYPE_S8;
    L.compensate = shifted || p.a_zero_point != 0;
    if (swap)
        return plan_swapped(p, L, cpu.l2_bytes > 0 ? cpu.l2_bytes : 1024 * 1024, num_threads);
    if (dot_fits(p, L.step, L.isa, cpu) || f16_dot_fits(p, L)) return plan_dot(p, L, num_threads, cpu);

    const int g = step_group(L.step);
    const int esz = step_elem_bytes(L.step);
    const int64_t l1 = cpu.l1d_bytes > 0 ? cpu.l1d_bytes : 32 * 1024;
    const int64_t l2 = cpu.l2_bytes > 0 ? cpu.l2_bytes : 1024 * 1024;
    const bool amx = step_is_amx(L.step);

    // Threads: enough work for each (an AMX core does a 16x16x64 int8 tile product in 16 cycles, so it needs
    // far more work per thread than the vector steps to pay for the fan-out), tile-aligned chunks (see
    // choose_split). A call with few rows is bound by reading (and packing) B instead: a thread per
    // kBBytesPerThread of B as well (16 cores of the GPU machine's host, 1x4096x4096 bf16 with B stored K x N: 2
    // threads by the products alone ran at 0.39x oneDNN's 16).
    // A short K makes writing C the work (3136x256x64 s8 -> s32: 3.2 MB of C for 103 MFLOP, 6 threads by the
    // products, 0.53x oneDNN's 16 on the GPU machine's host): a thread per 256 KB of C as well.
    // AMX: 4 MFLOP is ~4 us of tile products, twice the pool's fan-out at 16 threads (256^3 bf16 ran 2
    // threads at 16 MFLOP each, 0.38x oneDNN's 16).
    const double per_thread = amx ? 4.0e6 : vector_flops_per_thread(L, cpu);
    const double b_bytes = double(p.k) * double(p.n) * double(dtype_size(p.b_type)) * double(p.batch);
    const double c_bytes = double(p.m) * double(p.n) * double(dtype_size(p.c_type)) * double(p.batch);
    const double a_bytes = double(p.m) * double(p.k) * double(dtype_size(p.a_type)) * double(p.batch);
    // Batches too small to split go to the threads whole, where a thread only has to pay for its fan-out:
    // one per kMinFlopsPerBatchThread(Amx), at most one per batch (128x64x128 x 12, 25 MFLOP, had 1 thread).
    const double min_batch_flops = amx ? kMinFlopsPerBatchThreadAmx : kMinFlopsPerBatchThread;
    // A short K costs per C value about what a K of kThreadWorkMinK does (the stores and the loops around the few
    // k steps), which the flops undercount: 2 threads, median us, one thread -> two: bf16 3064x18x6 10.0 -> 5.5,
    // 172x274x4 3.8 -> 3.3, 239x8x6 x28 9.2 -> 8.0; s8 2412x40x8 NT 8.7 -> 5.0, 20x427x9 x10 10.2 -> 7.6 (a K of 64
    // mixed: 437x2x3 NT x34 1.57x, 70x310x3 0.92x).
    const double work = 2.0 * double(p.m) * double(p.n) * double(p.batch) * double(std::max(p.k, kThreadWorkMinK));
    const double batch_threads = p.batch > 1 ? std::min(double(p.batch), work / min_batch_flops) : 1.0;
    int threads = std::max(1, num_threads);
    threads = static_cast<int>(std::min<double>(
        threads, std::max({1.0, work / per_thread, b_bytes / kBBytesPerThread, a_bytes / kABytesPerThread,
                           c_bytes / (256.0 * 1024), batch_threads})));
    plan.threads = threads;
    const int64_t per_batch = balanced_chunks_per_batch(p.batch, threads);

    int64_t kc_unit = 0;    // kc is a multiple of it
    int64_t kc_limit = 0;   // elements: the A tile (mr x kc) stays in L1 while the B panels stream past it
    bool long_k = false;    // AMX: 4 KB K blocks, the B block gets half of L2
    bool decode = false;    // AMX, one row tile: 2 KB K blocks, B blocks of kAmxDecodeColumns
    bool few_panels = false;  // AMX, N of at most kAmxFewPanels panels: all of K in one block, A in place
    if (amx) {
        L.mr = 32;
        L.nv = 2;
        L.k_unroll = 1;
        kc_unit = kAmxStepBytes / esz;
        // The A tile (32 rows of kc) stays in L1 while B tiles stream from L2 past it (loaded with the T1
        // hint, which keeps them from evicting A): 32 KB of A measured best on a 48 KB L1 (bf16 2.5 TFLOP/s
        // per call at kc 512, 2.0 at 1024 where A no longer fits).
        kc_limit = std::max<int64_t>(kc_unit, std::min<int64_t>(1024, l1 * 2 / 3 / L.mr) / esz);
        // Long K: every 32 x 32 block pays a fixed drain when its tiles are stored (the last products finish,
        // then the stores, then the next block's first loads: ~1000 cycles measured, a third of a 16-step
        // block). Blocks of 4 KB rows (64 steps) halve the blocks and the strip round trips; the A tile then
        // streams from L2 beside the B block, which tileloadd sustains (measured 2.3-2.6 TFLOP/s with both
        // operands from L2). Measured bf16 1 thread: 2048^3 23.0 -> 20.1 ms, 2048x4096x4096 NT 96.8 -> 86.9 ms;
        // 1024^3 (K = 2 KB) stays faster with the L1 block (the wider A repacks cost more than the drains).
        // What the drain is (standalone kernel, random bf16, rdtsc per 32 x 32 block, 2.6 GHz TSC): with the A
        // tile in L1 (kc 512) the four tile stores cost ~100-150 TSC per block wherever C lies (hot, an L2
        // strip, cold memory with a 4 KB row stride; prefetchw of C, stores interleaved into the next block's
        // first step and a store to the stack plus a vector copy changed nothing); with A streaming from L2
        // (kc 1024) the same stores cost ~800 (the tile loads of A and B then take the whole L2 bandwidth,
        // 64 B per cycle). Without any store a block runs at ~1150-1200 TSC in both the standalone kernel and
        // this driver (2.2-2.3 TFLOP/s sustained; 2.9 only in the first milliseconds); the stores in the
        // driver still cost ~300 (strip) to ~500 (C) per block, more than standalone, cause not isolated.
        if (p.k * esz >= kAmxLongRowBytes) {
            kc_limit = kAmxLongRowBytes / esz;
            long_k = true;
        }
        // One row tile (decode): every packed B element is used once, so the B block need not stay in L2;
        // what costs is reading a row-major B, and long runs of each row (2048 columns) read it far faster
        // than 256-column strips of 4096 rows (a new page per row). Measured 1 thread, 16 rows, B 4096 wide:
        // bf16 16x11008x4096 26.8 -> 14.7 ms, 16x4096x4096 7.0 -> 5.1 ms; s8 16x11008x4096 13.8 -> 9.5 ms.
        // The driver packs such a chunk's B one K block at a time into one buffer, used at once: a block of
        // at most kAmxDecodePackedBytes stays in L2, where a larger one goes through L3 as it is written and
        // read back. Measured 1 thread, 16x4096x4096 (a 2048-column block): bf16 kc 1024 -> 128 5.0 -> 4.3 ms,
        // s8 kc 2048 -> 256 2.8 -> 2.05 ms; a thread's 256 columns (16 threads) keep the 2 KB rows.
        if (p.m <= L.mr) {
            const int64_t col_tiles = ceil_div(p.n, int64_t(32));
            const int64_t chunk_cols =
                std::min(kAmxDecodeColumns, ceil_div(col_tiles, std::min(col_tiles, per_batch)) * 32);
            const int64_t row_bytes = std::clamp<int64_t>(kAmxDecodePackedBytes / chunk_cols / kAmxStepBytes *
                                                              kAmxStepBytes, 4 * kAmxStepBytes, kAmxDecodeRowBytes);
            kc_limit = row_bytes / esz;
            decode = true;
        }
        // Few column panels: an A tile serves at most kAmxFewPanels products per K step, so keeping it in L1
        // across them saves little, while K blocks cost what A's reading from memory is: each row's K blocks are
        // read in separate passes over the M block (streams the prefetchers lose), and the sums make strip round
        // trips. All of K then goes in one block, the A tile streaming from L2 beside the whole B (which must fit
        // in half of L2, else N blocks would read A from memory again). 1 thread, median us, bf16 K blocks ->
        // one: 2048x32x1024 627 -> 329, 2048x8x1024 539 -> 294, 2048x128x1024 815 -> 591, 2048x32x4096 NT
        // 2330 -> 1167, 2048x128x4096 NT 3258 -> 2422, 512x128x4096 NT 1072 -> 658; 8 panels mixed (2048x256x1024
        // 1181 -> 896, 2048x256x4096 NT 5267 -> 5854), 16 lost (2048x512x1024 1692 -> 1894). Only for an A past
        // half of L2, which comes from memory: a smaller one keeps its K blocks (2 threads, 400x8x1280 NT bf16
        // 10.4 -> 11.6 in one block, 40x8x1600 NT u8 x16 22.4 -> 26.0).
        const int64_t all_k_b_bytes = round_up(p.n, 32) * round_up(ceil_div(p.k, int64_t(g)), 16) * 4;
        const int64_t a_bytes_per_batch = p.m * p.k * dtype_size(p.a_type);
        if (!decode && ceil_div(p.n, int64_t(32)) <= kAmxFewPanels && all_k_b_bytes <= l2 / 2 &&
            a_bytes_per_batch > l2 / 2) {
            kc_limit = round_up(p.k, kc_unit);
            long_k = true;
            few_panels = true;
        }
    } else {
        const TileShape t = choose_tile(p, L.step, L.isa >= hw::X86Isa::avx512, cpu.few_streams_from_memory);
        L.mr = t.mr;
        L.nv = t.nv;
        L.k_unroll = 4;
        kc_unit = int64_t(g) * L.k_unroll;
        kc_limit = std::max<int64_t>(kc_unit, l1 / 2 / (int64_t(L.mr) * esz));
        // f16 A stored M x K over one column panel and a K of at most kF16AInPlaceMaxK, at the AVX512-FP16 tiers:
        // A read in place (LowpLayout::a_f16_in_place). Packing such rows costs a call, a store and a reload per
        // row of a value or two; past them vcvtph2psx's broadcast (ports 0 and 5, as the FMAs) costs more than
        // the packing. 1 thread, median us of 3 alternated runs, packed -> in place: K = 1: 3535x4 3.97 -> 2.69,
        // 668x5 NT x7 5.52 -> 3.79, 1000x3 x10 11.3 -> 7.6, 240x3 NT x24 7.0 -> 5.0, 2692x16 even; K = 2: 3535x4 4.21
        // -> 3.55, 668x5 NT x7 5.87 -> 4.76, 2000x9 2.88 -> 2.12; not taken: K = 3 even (3535x4 4.72 -> 4.87), K = 4
        // 10-18% slower, K = 6 35-44%, 888x10x234 x20 1675 -> 6181.
        const char* a_in_place_env = std::getenv("JITMM_X86_LOWP_F16_A_IN_PLACE");  // 0/1: measurements
        const bool a_in_place_forced = a_in_place_env != nullptr && a_in_place_env[0] == '1';
        // An f16 A stored K x M (the same tiers and one column panel) up to kF16TransposedAInPlaceMaxK: its packing is
        // a transpose (gathers down the stored rows), dearer than the widening of rows above, so the broadcasts
        // pay over a longer K. 1 thread, median us of 3 rounds, packed -> in place (f32): TN 1059x40x3 x4 29.6 ->
        // 13.0 (13.2), 1686x4x3 TT x2 16.9 -> 4.7 (3.8), 500x16x8 3.03 -> 1.82 (0.74), 300x4x12 2.10 -> 1.67,
        // 500x16x12 3.45 -> 2.78, 1000x60x12 13.8 -> 11.9; K = 24 about even (0.93-1.07), 32 to 48 slower (1.02-1.22),
        // 2000x5x16 TT 14.7 -> 13.9 (7.0: at one column vector each widened value serves one FMA).
        const bool rows_fit = !p.trans_a && (p.k <= kF16AInPlaceMaxK || a_in_place_forced) &&
                              int64_t(L.mr) * p.lda * dtype_size(p.a_type) < (int64_t(1) << 31);
        // f16 with at most 8 columns over one vector (LowpLayout::f16_k_pairs) from a K of kF16KPairsMinK: one FMA
        // a row for two k values of the packed A, where the vector's lanes past the 8 columns multiplied padding.
        // 1 thread, median us of 3 rounds, packed A one k a step -> k pairs (f32): NN 187x6x68 2.84 -> 1.87 (2.24),
        // 115x4x707 18.2 -> 11.5 (14.1), 42x8x84 0.83 -> 0.57 (0.63), 1000x3x16 3.94 -> 3.00, 2000x7x8 4.58 -> 4.18,
        // 300x8x32 2.39 -> 1.50, TN 200x5x32 2.47 -> 2.01; NT 24x8x29 0.27 -> 0.20, 1000x3x16 3.50 -> 2.92, TT
        // 200x5x33 2.72 -> 2.39; K = 4-6 even (0.96-1.05).
        // An A stored K x M broadcast in place (below) still wins up to K = 12 (1 thread, median us, in place / k
        // pairs: TN 1059x8x8 x2 7.3 / 11.8, 500x2x12 2.7 / 3.0, 500x2x16 3.6 / 3.2).
        const bool k_pairs_fit = L.step == LowpStep::fma_f32 && p.a_type == JITMM_DTYPE_F16 &&
                                 L.isa >= hw::X86Isa::avx512 && L.nv == 1 && p.n <= 8 && p.k >= kF16KPairsMinK &&
                                 (!p.trans_b || 7 * p.ldb * dtype_size(p.b_type) < (int64_t(1) << 31));
        const int64_t columns_max_k = k_pairs_fit ? kF16KPairsTransposedAInPlaceMaxK : kF16TransposedAInPlaceMaxK;
        const bool columns_fit = p.trans_a && (p.k <= columns_max_k || a_in_place_forced) &&
                                 int64_t(L.k_unroll) * p.lda * dtype_size(p.a_type) + L.mr * 2 < (int64_t(1) << 31);
        if (L.step == LowpStep::fma_f32 && p.a_type == JITMM_DTYPE_F16 && (rows_fit || columns_fit) &&
            isa >= hw::X86Isa::avx512_fp16 && cpu.avx512_fp16 && p.n <= int64_t(L.nr()) &&
            (a_in_place_env == nullptr || a_in_place_env[0] != '0')) {
            L.a_f16_in_place = true;
            L.a_k_bytes = p.trans_a ? p.lda * dtype_size(p.a_type) : dtype_size(p.a_type);
        }
        L.f16_k_pairs = k_pairs_fit && !L.a_f16_in_place;
        if (!L.f16_k_pairs && b_in_place_fits(p, L)) {
            L.b_in_place = true;
            L.b_row_bytes = p.ldb * dtype_size(p.b_type);
            // Only A's panel stays in L1, and it has at most M rows.
            kc_limit = std::max<int64_t>(kc_unit, l1 / 2 / (std::min<int64_t>(L.mr, p.m) * esz));
            // A B that streams from memory (past L2 over the batches that each read their own) is read across
            // many column panels: short K blocks let each of its rows stream across all of N (a few dozen
            // streams the prefetchers follow) instead of every call hopping down the rows, and the rows
            // kF16BRowPrefetchSteps ahead are prefetched, as the f32 tiles do with a B in place. Rows of one
            // column panel stored densely are read front to back anyway. 1 thread, median us, one K block ->
            // 32-long with 32 ahead: 1x531x2139 NN 230 -> 100, 27x1046x241 x41 9000 -> 4160.
            const bool one_dense_panel = p.n <= L.nr() && p.ldb <= 2 * int64_t(L.nr());
            if (!one_dense_panel && p.b_bytes_read() > double(l2)) {
                kc_limit = kF16BStreamedKBlock;
                const bool far_rows_fit = double(kF16BRowPrefetchSteps) * double(L.b_row_bytes) <= double(l2) / 4 &&
                                          L.b_row_bytes % 4096 != 0;
                L.b_prefetch_k = far_rows_fit ? kF16BRowPrefetchSteps : kF16BRowPrefetchSteps / 2;
            }
            if (const char* f = std::getenv("JITMM_X86_LOWP_B_PREFETCH")) L.b_prefetch_k = std::atoi(f);
        }
        // Few column panels (one N block) over an A past L2: all of K in one block, as AMX's few_panels. K blocks
        // read each A row in short pieces, one pass per block over all the rows (strided runs the prefetchers
        // lose, from memory), where one block reads every row front to back; the packed A tile (at most mr x K
        // f32) then streams from L2. 1 thread, median us of 3 alternated runs, L1 blocks -> one: 1876x5x2867 NT
        // 6300 -> 1870 (3900 in a slower phase of the VM), NN 6440 -> 3910, 3965x9x1806 NT x22 135000 -> 115000,
        // x1 7130 -> 2630, 2000x32x1000 1080 -> 940, 500x16x4000 848 -> 737, 938x5x2867 NT 1180 -> 980; an A
        // stored K x M measured slower (1876x5x2867 TN 6850 -> 8010: its gathers read whole lines either way).
        // JITMM_X86_LOWP_F16_WHOLE_K=0 keeps the L1 blocks (measurements).
        const char* whole_k_env = std::getenv("JITMM_X86_LOWP_F16_WHOLE_K");
        const double a_bytes_per_batch = double(p.m) * double(p.k) * double(dtype_size(p.a_type));
        if (L.step == LowpStep::fma_f32 && p.a_type == JITMM_DTYPE_F16 && !L.b_in_place && !p.trans_a &&
            ceil_div(p.n, L.nr()) <= kF16WholeKMaxPanels && a_bytes_per_batch > double(l2) &&
            int64_t(L.mr) * round_up(p.k, kc_unit) * esz <= l2 / 2 && (whole_k_env == nullptr || whole_k_env[0] != '0'))
            kc_limit = round_up(p.k, kc_unit);
        // VNNI decode with B stored K x N: B is packed per call, and packing 128-column strips of every row
        // touches a new page per row. 1 KB K blocks of 2048 columns read long runs of each row. Measured 1 thread
        // s8 vs oneDNN capped to VNNI: 1x4096x4096 0.82 -> 1.30x, 16x4096x4096 0.91 -> 1.11x, 16x11008x4096
        // 0.70 -> 1.21x (256 x 4096 blocks: 0.7x on K = 11008).
        if (L.step == LowpStep::vnni_u8s8 && !p.trans_b && p.m <= kDotMaxRows) {
            kc_limit = 1024;
            decode = true;
        }
    }
    // JITMM_X86_LOWP_KC forces the K block limit (elements): a tuning knob, not for production.
    if (const char* forced = std::getenv("JITMM_X86_LOWP_KC"))
        kc_limit = std::max<int64_t>(kc_unit, std::atoll(forced));
    const int64_t k_blocks = ceil_div(p.k, kc_limit);
    plan.kc = round_up(ceil_div(p.k, k_blocks), kc_unit);
    if (k_blocks == 1) plan.kc = round_up(p.k, kc_unit);
    const int64_t kc_groups = ceil_div(plan.kc, g);
    const int64_t nr = plan.nr();
    // The packed B block (kc x nc) streams from L2 once per row tile: a quarter of L2 (measured: AMX calls
    // slow down 3x once the B block passes ~60% of a 2 MB L2 and spills to L3).
    plan.nc = std::max<int64_t>(nr, (long_k ? l2 / 2 : l2 / 4) / (kc_groups * 4) / nr * nr);
    if (decode) plan.nc = std::max<int64_t>(nr, kAmxDecodeColumns / nr * nr);  // AMX: nr 32 divides it
    if (decode && decode_block_in_l1(p, plan.kc, l2)) {
        int64_t budget = kDecodeL1BlockBytes;
        if (const char* forced = std::getenv("JITMM_X86_LOWP_DECODE_BLOCK")) budget = std::atoll(forced);
        const int64_t l1_columns = budget / (kc_groups * 4) / nr * nr;
        if (l1_columns >= kDecodeL1BlockMinColumns) plan.nc = std::min(plan.nc, l1_columns);
    }
    if (const char* forced = std::getenv("JITMM_X86_LOWP_NC"))  // tuning knobs, like JITMM_X86_LOWP_KC
        plan.nc = std::max<int64_t>(nr, std::atoll(forced) / nr * nr);
    plan.nc = std::min(plan.nc, round_up(p.n, nr));
    // With several K blocks the partial sums of mc x nc live in a strip that must stay in L2 beside the B
    // block: an eighth of L2. Its rows are padded by a cache line so that a tile's 16 rows do not share
    // one L1 set (a power-of-two row would put all 16 in one 12-way set).
    // A small B block (one K block of packed B within kAmxKeptBBytes): plain tile loads, which keep what they
    // can of it in L1 for the next row tile, beat streaming it with the T1 hint. 1 thread, min of 200-1000 calls:
    // s8 256^3 (64 KB) 12.0-12.5 -> 11.2-12.1 us, bf16 256^3 (128 KB) 20.9-21.1 -> 18.8-20.8 us; s8 512^3 (256 KB)
    // even; bf16 512^3 (512 KB) 158-171 -> 182-200 us, where T1 keeps the A tile in L1.
    if (amx) L.amx_b_streamed = kc_groups * 4 * plan.nc > kAmxKeptBBytes;
    // C written with non-temporal stores where it is large and not read first (beta 0): see
    // LowpLayout::amx_c_streamed. 1 thread, median us of 3 alternated runs, tile stores -> streamed (copied out
    // over the next panel's K steps): bf16 1024^3 2077 -> 1881, 2048^3 16333 -> 15522; s8 1024^3 821 -> 807,
    // 2048^3 7397 -> 7018, 2048x4096x4096 NT 29865 -> 27489 (bf16 even). From 4 MB of C (a 1024^2 f32/s32 C),
    // where the C of one call no longer fits in L2 twice over. JITMM_X86_LOWP_STREAM_C=0/1 forces it off/on.
    // A short K (fma_f32): the C tile's lines prefetched before the K loop, where C does not stay in L1 from call
    // to call and a tile row spans a vector or more (the f32 family's rule). 1 thread, median us of 3 alternated
    // runs, without -> with: f16 407x749x1 31.4 -> 21.3, 2800x463x1 NT x25 15090 -> 8900, 709x47x2 NT x40 219 ->
    // 182, 79x1423x7 x21 449 -> 384, 944x1237x11 NT 220 -> 192, 1059x40x3 TN x4 32.6 -> 28.6, 14x1938x7 TT 6.0 ->
    // 4.7; bf16 300x300x5 10.2 -> 7.1, 1024x77x3 TN 11.0 -> 6.3; 64x64x4 and 32x32x8 x16 (C in L1) even.
    // JITMM_X86_LOWP_CPF=0/1 forces it off/on.
    if (L.step == LowpStep::fma_f32) {
        const double c_total = double(p.batch) * double(p.m) * double(p.n) * double(dtype_size(p.c_type));
        L.c_prefetch = p.k <= kMaxKForCTilePrefetch && p.n >= 16 && c_total > double(l1);
        if (const char* forced = std::getenv("JITMM_X86_LOWP_CPF")) L.c_prefetch = forced[0] == '1';
    }
    if (amx && p.beta == 0.0f && !L.swap_ab) {
        const double c_bytes = double(p.m) * double(p.n) * double(dtype_size(p.c_type)) * double(p.batch);
        L.amx_c_streamed = c_bytes >= double(kAmxStreamedCBytes);
        if (const char* forced = std::getenv("JITMM_X86_LOWP_STREAM_C")) L.amx_c_streamed = forced[0] == '1';
        // C rows off 64-byte lines (LowpLayout::amx_c_staged) take the streamed path's block and spread copy-out,
        // with plain stores. 1 thread, median us of 5 alternated runs, tile stores -> staged: bf16 256x255x128
        // 17.4 -> 16.1, 200x1500x256 150 -> 131, 128x999x512 116 -> 106, 1000^3 1934 -> 1768; s8 256x255x256 18.3
        // -> 16.7, 200x1500x100 57.7 -> 49.9, 1000^3 719 -> 679, 512x999x128 103 -> 99. Under 4 K steps a panel
        // (the copy-out bunched) or a C in L1 and L2 it measured even to 15% slower (s8 256x255x64 10.5 -> 12.0,
        // 100x300x64 4.54 -> 4.78; bf16 256x255x32 18.2 -> 19.4). JITMM_X86_LOWP_STAGE_C=0/1 forces it off/on.
        const bool c_rows_off_lines = (p.ldc * dtype_size(p.c_type)) % 64 != 0;
        const int64_t k_block_bytes = std::min(plan.kc, p.k) * step_elem_bytes(L.step);
        // (Only full 32-column panels stage: at least two of them.)
        L.amx_c_staged = c_rows_off_lines && c_bytes >= double(kAmxStagedCBytes) &&
                         k_block_bytes >= kAmxStagedCMinKBytes && p.n >= 2 * int64_t(L.nr());
        if (const char* forced = std::getenv("JITMM_X86_LOWP_STAGE_C"))
            L.amx_c_staged = c_rows_off_lines && forced[0] == '1';
        if (L.amx_c_staged) L.amx_c_streamed = false;  // (non-temporal stores need rows on lines)
    }
    L.acc_ld = round_up(plan.nc, nr) * 4 + 64;
    plan.mc = std::max<int64_t>(L.mr, (l2 / 8) / L.acc_ld / L.mr * L.mr);
    // An A stored K x M is packed an M block at a time (front to back along its stored rows), for the block's
    // row tiles to read from L2: at most a quarter of it (3072x2x1024 TN s8, 1 thread: 1344-row blocks, 1.4 MB
    // of panels, 690-740 us; 512-row blocks 460-500).
    if (p.trans_a) {
        const int64_t panel_row_bytes = round_up(plan.kc * step_elem_bytes(L.step), 64) + 64;
        plan.mc = std::min(plan.mc, std::max<int64_t>(L.mr, (l2 / 4) / panel_row_bytes / L.mr * L.mr));
        // An int8 A is read in runs of at least kTransposedInt8MinRunBytes of each stored row, whatever the caps
        // above: shorter runs leave the prefetchers behind (1 thread, Zen 4, median us of 3 alternated rounds,
        // M blocks of 96-280 rows -> 384: u8 1550x4x1258 TN 1100 -> 560, s8 1000x100x2000 TN 2070 -> 1610, u8
        // 1750 -> 1500, s8 3000x300x500 TN 2430 -> 2360, 2000x64x800 TN 805 -> 780; bf16 even at 384 bytes).
        if (dtype_size(p.a_type) == 1 && !amx)
            plan.mc = std::max(plan.mc, std::min(round_up(p.m, int64_t(L.mr)),
                                                 std::max<int64_t>(L.mr, kTransposedInt8MinRunBytes / L.mr * L.mr)));
    }
    if (const char* forced = std::getenv("JITMM_X86_LOWP_MC"))
        plan.mc = std::max<int64_t>(L.mr, std::atoll(forced) / L.mr * L.mr);

    // A in place when the kernel can read it: same element type, not transposed, no K tail within a k group
    // (AMX: within a 64-byte step, since a tile row is read whole), displacements within 32 bits.
    const int64_t k_multiple = amx ? kc_unit : g;
    const int64_t a_row_bytes = p.lda * dtype_size(p.a_type);
    // AMX with all of K one block that splits into equal short steps (amx_k_step_bytes): the tiles read just K's
    // bytes of each row, so A can be read in place at any row stride (the small path does; run_chunk still
    // packs an A whose rows are not 64-byte aligned). 1 thread, TSC per C API call, packed -> in place: s8 32^3
    // 574-604 -> 380-385, s8 48^3 (3 rows in 4 across two lines) 922-958 -> 682-754. int8 rounds K up to whole
    // dwords (amx_k_reads_rows; the last row tile from a copy): A was packed a row at a time for a K that is not
    // whole dwords, the copy most of the call (1 thread, median us, packed -> in place: s8 1316x31x7 6.0 -> 3.9;
    // 17x1023x511 even, 26.5 -> 26.2). Its steps round up to whole dwords as well where K's do not split into
    // equal ones (K = 65: two steps of 36, 100: two of 52): s8 90x70x65 1.43 -> 1.26, u8 30x1000x90 NT (swapped)
    // 8.6 -> 6.8, s8 100x100x100 2.54 -> 2.51, 300x300x100 18.2 -> 18.3 (10 panels over one A tile: even).
    const bool amx_short_k = amx && p.k <= plan.kc && amx_k_reads_rows(L.step, p.k);
    // A u8 A for vpdpbusd whose K ends inside a k group is read in place too: the dword read past a row's K
    // meets packed B's zero rows (exact: integers), and the driver copies the last row tile, whose reads may run
    // past the end of A (GemmLowpKernel::copy_last_rows). Packing copied every row, a masked load and store
    // each: 1 thread, median us, packed -> in place: u8 1990x12x6 5.6 -> 2.7, 702x29x1 NT 3.2 -> 2.1, 161x98x5
    // NT 2.9 -> 2.5, 100x100x6 0.97 -> 0.73.
    const bool vnni_k_tail_in_place = L.step == LowpStep::vnni_u8s8 && int64_t(L.mr) * p.lda >= 3;
    // int8 AMX with few column panels reads A in place over any K and row stride (amx_rows_any_stride). 1 thread,
    // median us, packed -> in place, panels: s8 36x7x1886 NT (1) 4.76 -> 3.36, 300x20x1886 (1) 29.6 -> 19.2,
    // 1000x32x999 (1) 48.5 -> 22, 300x64x1886 (2) 40.1 -> 26.3, 1000x128x999 (4) 100 -> 87, 1000x100x1000 NT (4)
    // 109 -> 102, 1000x192x999 (6) 132 -> 122, 2000x256x1000 (8) 373 -> 342; more lost (500x500x500 (16) 83 ->
    // 92, 1000^3 (32) 644 -> 653), the A tile then serving enough panels from L1 for its copy to pay.
    const char* bf16_any = std::getenv("JITMM_X86_LOWP_BF16_ANY_STRIDE");  // 0: packed as before (measurements)
    const bool bf16_any_off = L.step == LowpStep::amx_bf16 && bf16_any != nullptr && bf16_any[0] == '0';
    const bool amx_any_stride = amx_rows_any_stride(L.step, false, p.m, p.n) && !bf16_any_off;
    // bf16 over an odd K reads each row's last value alone (LowpLayout::a_odd_k_word). Packing copied all of A
    // for it, a call's only pass over A where N is one column panel (1 thread, Zen 4, median us of 3 alternated
    // runs, packed -> in place: 674x16x2971 683 -> 350, 2000x32x99 67 -> 58, 300x64x1001 177 -> 167, 128x4096x4095
    // 25.4 -> 24.2 ms; 1000x1000x1001 and 1024x4096x1023 even).
    const bool bf16_odd_k_in_place = L.step == LowpStep::dot_bf16 && L.isa >= hw::X86Isa::avx512;
    // An s8 A for vpdpbusd (AVX-512) read in place: each broadcast dword flipped to u8 in its register (one vpxord
    // a row and k group, beside the row's products; LowpLayout::a_s8_flipped) instead of A copied flipped, the
    // copy most of a call over few column panels. Not for one-vector tiles over more than kS8FlipOneVectorMaxPanels
    // panels: each panel flips every A dword again, a vpxord per vpdpbusd. 1 thread, Zen 4, median us of 3
    // alternated rounds, copied -> flipped: 454x17x3671 466 -> 317, 10x1697x36 x15 110 -> 81, 158x38x22 NT x25 43
    // -> 31, 166x436x151 NT 60 -> 55, 500x30x800 NT 68 -> 59, 300x60x2000 186 -> 172, 443x10x312 NT (one panel of
    // one vector) 12.6 -> 12.1; one vector over 5 panels: 642x77x569 NT x8 1650 -> 2355, 1000x70x1000 NT 511 -> 609.
    // JITMM_X86_LOWP_S8_FLIP=0 keeps the copy (measurements).
    const char* flip_env = std::getenv("JITMM_X86_LOWP_S8_FLIP");
    const bool one_vector_many_panels = L.nv == 1 && ceil_div(p.n, int64_t(L.nr())) > kS8FlipOneVectorMaxPanels;
    const bool s8_flip_in_kernel = L.step == LowpStep::vnni_u8s8 && p.a_type == JITMM_DTYPE_S8 &&
                                   L.isa >= hw::X86Isa::avx512 && !one_vector_many_panels &&
                                   (flip_env == nullptr || flip_env[0] != '0');
    plan.pack_a = !(a_readable_in_place(p, L.step) || s8_flip_in_kernel) || p.trans_a ||
                  (p.k % k_multiple != 0 && !amx_short_k && !amx_any_stride && !vnni_k_tail_in_place &&
                   !bf16_odd_k_in_place) ||
                  int64_t(L.mr) * a_row_bytes >= (int64_t(1) << 31);
    // AMX keeps the A tile (32 rows of kc) in L1 while the B panels stream past: rows whose stride crowds
    // the tile's lines into few L1 sets (a large power-of-two K) evict each other. Packing copies them to
    // rows one line apart, which spreads them over every set; a stride that already spreads them (short rows,
    // e.g. 256 bf16 columns: 4 lines per set) is read in place and saves the copy (13% of a 256^3 call).
    // A tile larger than L1 (4 KB K blocks: 128 KB) streams from L2 whatever its stride, so the set test does
    // not apply; where all of N is one N block, each packed panel would serve just that block's few column
    // panels and the copy is pure cost. 1 thread, median us of alternated runs, packed -> in place: s8
    // 64x64x4096 27.6 -> 21.4, s8 4096x16x4096 1829 -> 1155, bf16 64x64x4096 57.3 -> 42.6, s8 1024x256x4096
    // 1125 -> 1028, bf16 1024x128x2048 751 -> 593. Past one N block the kept panels serve them all, and in place
    // measured 2048x4096x4096 NT bf16 69.3 -> 74.2 ms (s8 and 2048x2048x4096 s8 even).
    const char* forced_in_place = std::getenv("JITMM_X86_LOWP_A_IN_PLACE");  // 1: skip the set test (measurements)
    // With few panels the A tile serves too few products for its copy to pay, wherever its lines fall (1 thread,
    // median us, packed -> in place: s8 784x128x1152 97 -> 73, bf16 3136x64x576 439 -> 397).
    const bool a_tile_streams = (int64_t(L.mr) * plan.kc * esz > l1 || few_panels) && p.n <= plan.nc;
    if (amx && !amx_short_k &&
        (a_row_bytes % 64 != 0 ? !amx_any_stride  // misaligned rows: no set test (measured in place above)
                               : (forced_in_place == nullptr || forced_in_place[0] != '1') && !a_tile_streams &&
                                     a_tile_lines_per_l1_set(a_row_bytes / 64, plan.kc * esz / 64, L.mr) >
                                         kAmxATileWaysPerSet))
        plan.pack_a = true;
    if (bf16_any_off && amx_rows_any_stride(L.step, false, p.m, p.n) && a_row_bytes % 64 != 0) plan.pack_a = true;
    if (L.a_f16_in_place) plan.pack_a = false;
    // bf16 with A in place over few panels (amx_rows_any_stride) whose last K block ends inside a step: that step
    // from a copy (LowpLayout::a_last_step_copied). bf16 packed A for any K tail (and for misaligned rows), which
    // was half of such calls: 1 thread, median us of 3 alternated runs, packed -> in place (panels): 92x9x2960 (1)
    // 24.0 -> 12.2, 184x18x1480 (1) 29.2 -> 15.4, 192x2x3096 x4 (1) 530 -> 307, 1993x5x1582 NT (1) 609 -> 404,
    // 1000x32x1000 (1) 100 -> 56, 64x16x4100 x8 (1) 595 -> 377, 500x64x1582 NT (2) 121 -> 81, 300x128x777 NT (4)
    // 52 -> 41, 200x200x1000 NT (7) 71.6 -> 64.3, 2000x256x1000 (8) 853 -> 766; 500x500x500 (16) even, 500 ->
    // 167; 92x4x5920 (aligned rows, K whole steps: in place before) even.
    L.a_odd_k_word = bf16_odd_k_in_place && !plan.pack_a && p.k % 2 != 0;
    L.a_s8_flipped = s8_flip_in_kernel && !plan.pack_a;
    L.a_last_step_copied = L.step == LowpStep::amx_bf16 && !plan.pack_a &&
                           amx_swapped_last_step_copied(L.step, p.k - (k_blocks - 1) * plan.kc, k_blocks == 1);
    // A row of kc packed elements, padded to whole cache lines plus one, so that the tile's rows do not fall
    // into the same L1 sets. AMX reads the row stride at run time and packs an A that is not 64-byte aligned
    // (a tile row split across cache lines loads several times slower), so it always has a panel ready.
    plan.a_panel_ld = (round_up(plan.kc * esz, 64) + 64) / esz;
    // The vector steps with all of K in one block of at most a cache line a row: rows packed back to back (the
    // line of padding only spreads long rows over the L1 sets; a row tile of such rows is a few lines anyway).
    // An A stored with lda = K then packs as one run (pack_a_lowp), where padded rows cost a masked load and
    // store per row: 1 thread, median us, padded -> dense: bf16 2897x2x1 x52 470 -> 171, 342x27x1 1.25 -> 0.98.
    // Not for an f16 A stored K x M: its gathers write whole 16-value rows (pack_a_lowp), and it is no one run.
    const bool f16_gathered_a = p.a_type == JITMM_DTYPE_F16 && p.trans_a;
    if (!amx && k_blocks == 1 && round_up(p.k, g) * esz <= 64 && !f16_gathered_a) plan.a_panel_ld = round_up(p.k, g);
    L.a_row_bytes = plan.pack_a ? plan.a_panel_ld * esz : a_row_bytes;
    if (L.a_f16_in_place && p.trans_a) L.a_row_bytes = dtype_size(p.a_type);  // rows adjacent, k lda apart
    if (amx) L.a_row_bytes = 0;  // not baked: LowpCallArgs::a_stride

    choose_split(p, plan, per_batch, l2);
    // JITMM_X86_LOWP_SPLIT=MxN forces the chunks of a batch (tuning knob; clamped to the tiles and the threads).
    if (const char* forced = std::getenv("JITMM_X86_LOWP_SPLIT")) {
        int mcs = 0, ncs = 0;
        if (std::sscanf(forced, "%dx%d", &mcs, &ncs) == 2 && mcs > 0 && ncs > 0 && int64_t(mcs) * ncs <= per_batch) {
            plan.m_chunks = static_cast<int>(std::min<int64_t>(mcs, ceil_div(p.m, int64_t(L.mr))));
            plan.n_chunks = static_cast<int>(std::min<int64_t>(ncs, ceil_div(p.n, plan.nr())));
        }
    }
    plan_b_source_prefetch(p, plan, l2);
    return plan;
}

std::string X86LowpPlan::describe() const {
    char buf[256];
    char source_prefetch[48] = "";
    if (layout.b_src_rows > 0)
        std::snprintf(source_prefetch, sizeof source_prefetch, " prefetchNextB=%dx%d", layout.b_src_rows,
                      layout.b_src_lines);
    std::snprintf(buf, sizeof buf, "%s %s tile %dx%d kc=%lld mc=%lld nc=%lld %s%s%s%s%s%s%s%s threads=%d split=%dx%d",
                  hw::isa_name(layout.isa), step_name(layout.step), layout.mr, nr(), static_cast<long long>(kc),
                  static_cast<long long>(mc), static_cast<long long>(nc),
                  layout.dot_nt          ? "dotNT"
                  : layout.swap_ab       ? "swapAB"
                  : pack_a               ? "packA"
                  : layout.a_f16_in_place ? "directA16"
                                          : "directA",
                  layout.b_in_place ? " directB" : "",
                  layout.compensate || layout.dot_row_comp ? (layout.a_s8_flipped ? " comp flipA" : " comp") : "",
                  step_is_amx(layout.step) && !layout.amx_b_streamed ? " keepB" : "",
                  layout.a_last_step_copied ? " copyK" : layout.f16_k_pairs ? " kPairs" : "",
                  layout.c_prefetch ? " prefetchC" : "",
                  layout.amx_c_staged ? " stageC" : layout.amx_c_streamed ? " streamC" : "", source_prefetch, threads,
                  m_chunks, n_chunks);
    return buf;
}

void X86LowpPlan::append_key(KeyWriter& w) const {
    const LowpLayout& L = layout;
    w.i64('I', static_cast<int64_t>(L.isa)).i64('S', static_cast<int64_t>(L.step));
    w.i64('T', L.a_type | (L.b_type << 8) | (L.c_type << 16) | (int64_t(L.bias_type) << 24));
    w.i64('r', L.mr).i64('v', L.nv).i64('u', L.k_unroll);
    w.i64('l', L.a_row_bytes).i64('g', L.acc_ld).i64('c', L.ldc);
    w.f32('A', L.alpha).f32('E', L.beta);
    w.i64('e', static_cast<int64_t>(L.bias) | (static_cast<int64_t>(L.activation) << 8));
    w.i64('Q', static_cast<int64_t>(L.a_scale) | (static_cast<int64_t>(L.b_scale) << 8) |
                   (L.compensate ? 1 << 16 : 0) | (L.int_epilogue ? 1 << 17 : 0) | (L.swap_ab ? 1 << 18 : 0) |
                   (L.amx_b_streamed ? 1 << 19 : 0) | (L.amx_c_streamed ? 1 << 20 : 0) |
                   (L.a_last_step_copied ? 1 << 21 : 0) | (L.amx_c_staged ? 1 << 22 : 0) |
                   (L.a_s8_flipped ? 1 << 23 : 0));
    w.i64('K', kc).i64('M', mc).i64('N', nc).i64('p', (pack_a ? 1 : 0) | (a_panel_ld << 1));
    w.i64('h', threads).i64('s', m_chunks * 65536 + n_chunks);
    if (L.dot_nt) w.i64('D', (L.dot_row_comp ? 1 : 0) | (L.dot_a_in_place ? 2 : 0) | (L.b_row_bytes << 2));
    if (L.b_in_place) w.i64('B', L.b_row_bytes).i64('F', L.b_prefetch_k);
    if (L.c_prefetch) w.i64('P', 1);
    if (L.a_f16_in_place) w.i64('H', L.a_k_bytes);
    if (L.f16_k_pairs) w.i64('k', 1);
    if (L.a_odd_k_word) w.i64('o', 1);
    if (L.b_src_rows > 0)
        w.i64('j', L.b_src_rows).i64('J', L.b_src_lines).i64('x', L.b_src_seg).i64('X', L.b_src_stride);
}

// bf16 with an A stored M x K over at most kBf16CtMaxColumns columns, below AMX: the broadcast tiles spend a
// vector of columns and an A broadcast per row on each k pair; computed as C^T, the few columns are the dot
// products' few rows and A's rows their B rows, read in place (1 thread, Zen 4, median us of 2 alternated runs,
// tiles -> C^T: 404x3x1661 NT 225 -> 86, 320x2x2277 x59 15200 -> 5070, 20x4x699 NT x10 32 -> 6.5, 17x5x300 x8
// 9.3 -> 4.5, 3000x4x64 27 -> 16, 64x7x4096 x2 129 -> 101, 681x6x37 NT 6.5 -> 5.7, 100x2x32 NT 0.56 -> 0.33).
// Not 8 columns (1000x8x100 13.9 -> 14.9, 2000x8x700 NT 336 -> 372; 4096x8x4096 NT gained, 3510 -> 2880).
// From 5 columns a K under kBf16CtMinKWide runs faster on the tiles (1 thread, Zen 4, median us of 2 alternated
// rounds, C^T -> tiles: 681x6x37 NT 5.6 -> 4.0, 1752x7x36 21.8 -> 12.6, 3000x7x36 26.8 -> 16.4, 300x7x36 2.8 ->
// 1.7; 4 columns even, 300x4x36 2.2 -> 1.8, 1752x4x36 10.0 -> 11.0; a K of 64 even at 7, 1752x7x64 21.1 -> 19.4,
// 3000x7x64 26.2 -> 30.6).
constexpr int64_t kBf16CtMaxColumns = 7;
constexpr int64_t kBf16CtMinK = 32;
constexpr int64_t kBf16CtWideMinColumns = 5;
constexpr int64_t kBf16CtMinKWide = 64;

// s8 x s8 the same way on VNNI (the swapped problem's B, A as stored, is s8 as vpdpbusd needs; its A, op(B)^T, is
// shifted to u8 like any s8 A): 1 thread, Zen 4, median us of 2 alternated runs, tiles -> C^T: 70x3x1958 NT 15.0
// -> 2.2, 500x6x1000 NT 48.6 -> 17.8, 1000x5x300 NT (f32 C) 31.2 -> 12.6, 1000x2x64 x4 31.5 -> 13.0, 4096x8x4096
// 3220 -> 1630, 2044x4x58 20.7 -> 10.8, 2044x8x58 20.9 -> 18.3, 300x7x20 NT even. 9 columns were mixed (2044x9x300
// 64 -> 48, 1059x9x99 NT x28 405 -> 453) and 16 lost (84x16x213 x26, the swapped problem alone: 48 -> 72).
// Nor under kInt8CtMinRows rows, where the swapped problem's few short rows cost more than the tiles (batches, 1
// thread, median us of 3 alternated runs, tiles -> C^T: 12x4x40 x16 1.69 -> 3.35, 8x2x17 x44 3.5 -> 5.3, 19x2x254
// x10 6.4 -> 8.4; 30x3x64 NT x8 2.5 -> 2.1, 64x4x128 0.90 -> 0.65).
constexpr int64_t kInt8CtMaxColumns = 8;
constexpr int64_t kInt8CtMinK = 16;
constexpr int64_t kInt8CtMinRows = 24;

// An A stored K x M (TN, TT) is packed by transposes in the normal order, while as C^T it is the swapped
// problem's B as stored (K x N there), packed like any B: up to 24 columns both types gain (1 thread, Zen 4,
// median of 3 alternated rounds over 48 random shapes, normal -> C^T, geomean 1.66x: s8 2000x2x2500 TN 2000 ->
// 557 us, 3500x8x2500 TN x12 39700 -> 12600, 2000x13x32 TN x12 163 -> 108, 532x24x2500 TN x12 6100 -> 3900; bf16
// 3500x2x32 TN 28.5 -> 11.2, 1030x13x81 TT 22.1 -> 16.2, 532x24x1386 TN x4 1573 -> 1270); 32 columns mixed
// (64x32x1386 s8 0.78x, 2000x32x32 bf16 0.92x, 532x32x2500 s8 1.36x).
constexpr int64_t kCtTransposedAMaxColumns = 24;

// The scratch C^T of all the batches is written, then read back by the transposes: where it passes half of L2
// and K is under kCtShortKBytes, that round trip outweighs what the swap gains over an A as stored (1 thread,
// Zen 4, median us of 2 alternated rounds, C^T -> tiles: s8 1283x7x52 x40 (1.4 MB of C) 585 -> 449, x20 269 ->
// 230, 3000x8x64 x6 229 -> 166, 2044x4x58 x32 even; bf16 1283x7x52 x20 258 -> 231; kept: s8 500x6x200 x30 (360 KB)
// 254 against 317, bf16 2000x5x128 x16 591 against 741). An A stored K x M keeps it: the tiles would transpose A.
constexpr int64_t kCtShortKBytes = 128;

bool lowp_serves_with_c_transposed(const Problem& p, hw::X86Isa isa, const hw::CpuInfo& cpu) {
    if (const char* v = std::getenv("JITMM_X86_LOWP_CT")) {
        if (v[0] == '0') return false;
    }
    if (isa >= hw::X86Isa::amx || p.n < 2 || p.m <= p.n || p.quantized() || p.a_zero_point != 0) return false;
    const int64_t l2 = cpu.l2_bytes > 0 ? cpu.l2_bytes : 1024 * 1024;
    const double c_bytes = 4.0 * double(p.batch) * double(p.m) * double(p.n);
    if (!p.trans_a && c_bytes > double(l2) / 2 && p.k * dtype_size(p.a_type) < kCtShortKBytes) return false;
    const bool bf16 = isa >= hw::X86Isa::avx512_bf16 && p.a_type == JITMM_DTYPE_BF16 &&
                      p.b_type == JITMM_DTYPE_BF16 && p.c_type == JITMM_DTYPE_F32 && p.n <= (p.trans_a ? kCtTransposedAMaxColumns : kBf16CtMaxColumns) &&
                      p.k >= (p.n >= kBf16CtWideMinColumns && !p.trans_a ? kBf16CtMinKWide : kBf16CtMinK);
    const bool s8 = isa >= hw::X86Isa::avx512_vnni && p.a_type == JITMM_DTYPE_S8 && p.b_type == JITMM_DTYPE_S8 &&
                    (p.c_type == JITMM_DTYPE_S32 || p.c_type == JITMM_DTYPE_F32) && p.n <= (p.trans_a ? kCtTransposedAMaxColumns : kInt8CtMaxColumns) &&
                    p.k >= kInt8CtMinK && p.m >= kInt8CtMinRows;
    return bf16 || s8;
}

// The widened route up to this K: a K of 1-3 is all C, which the f32 tiles (row sweeps) store at their full
// rate. 1 thread, Zen 4, 30 random shapes of K <= 16 per type, median of 3 alternated rounds, geomean speedup
// of widening by K, against the low-precision tiles with A packed a block of row tiles per call: bf16 K 1 1.48x
// (2462x12x1 NT x32 178 -> 69 us), K 2 even, K 3 1.28x, K 4 0.81x (K 5-16 0.56-0.97x before); s8 K 1 1.6x
// (3281x16x3 NT x41 586 -> 176, 564x5x2 NT 2.50 -> 0.70), K 2 1.24x, K 3 even, K 4 0.78x.
constexpr int64_t kWidenMaxK = 3;
constexpr int64_t kS8WidenMaxK = 2;
// A core of two zmm FMAs per cycle runs the f32 tiles at twice that rate against its VNNI or AMX tiles over a K
// they spend mostly padding: an int8 A that is packed (s8, or stored K x M) widens up to K 4 (the GPU machine's
// host, Emerald Rapids, 1 thread, median of 2 alternated rounds over 45 random shapes, geomean speedup of
// widening: s8 K 3 2.66x, K 4 2.57x (476x220x4 AMX 1.81x, 376x4x4 TN x4 3.1x), K 5-8 1.1-1.4x mixed (940x14x5
// 0.85x); u8 stored K x M K 4 2.1x; bf16 K 3 1.94x, K 4 0.89x).
constexpr int64_t kPackedInt8WidenMaxKTwoFmas = 4;
// A u8 A is read in place by the VNNI tiles already (no packing): widening gains at K 1 only (1.31x; K 2 even,
// K 3 0.85x; on Emerald Rapids K 3 0.79x).
constexpr int64_t kU8WidenMaxK = 1;
// f16 without AVX512-FP16 converts in the kernel (fma_f32), which the f32 tiles on widened operands beat up to
// a K of about 32 from 8 rows (40 random shapes of K 10-64: 31x19x10 x35 2.5x, 294x18x12 x21 1.13x, 669x3397x13
// x18 1.24x, 55x3356x20 1.17x, 1005x753x23 1.06x, 72x82x28 1.45x, 65x4x32 3.9x, 456x462x30 even; past K 32 even
// to 0.75x), but not for fewer rows, whose own paths read B in place (2x262x13 0.57x, 6x922x22 0.65x).
constexpr int64_t kF16WidenMaxK = 32;
constexpr int64_t kF16WidenMinRows = 8;
// And at any K from 64 rows and 8 columns (within kWidenMaxBytes): the f32 tiles over operands widened once
// against the conversions inside the packing (1 thread, Zen 4, random seed 2004, median of 2 alternated rounds,
// 27 such rows: geomean 1.11x, min 0.97; 1190x42x740 TT 1759 -> 819 us, 539x29x58 TT x20 1064 -> 458, 45x2162x550
// 1655 -> 1253 (from 8 rows); 128x4096x4096 NT 53.8 -> 44.3 ms past the bound). Fewer rows or columns lose
// (1x210x1898 0.35x, 1622x1x2825 0.36x: decode and matrix-vector paths read B in place).
constexpr int64_t kF16WidenAnyKMinRows = 64;
constexpr int64_t kF16WidenAnyKMinColumns = 8;

constexpr int64_t kWidenMaxBytes = int64_t(64) << 20;

int64_t widen_max_k(const Problem& p, hw::X86Isa isa, const hw::CpuInfo& cpu) {
    if (p.a_type == JITMM_DTYPE_F16) {
        if (isa >= hw::X86Isa::avx512_fp16) return kWidenMaxK;
        if (p.m >= kF16WidenAnyKMinRows && p.n >= kF16WidenAnyKMinColumns) return INT64_MAX;
        return p.m >= kF16WidenMinRows ? kF16WidenMaxK : kWidenMaxK;
    }
    const bool packed_int8 = p.a_type == JITMM_DTYPE_S8 || (p.a_type == JITMM_DTYPE_U8 && p.trans_a);
    if (packed_int8 && cpu.zmm_fma_per_cycle >= 2) return kPackedInt8WidenMaxKTwoFmas;
    if (p.a_type == JITMM_DTYPE_U8) return p.trans_a ? kS8WidenMaxK : kU8WidenMaxK;
    if (p.a_type == JITMM_DTYPE_S8) return kS8WidenMaxK;
    return kWidenMaxK;
}

bool lowp_widens_to_f32(const Problem& p, hw::X86Isa isa, const hw::CpuInfo& cpu) {
    // JITMM_X86_LOWP_WIDEN=K: widen up to that K instead (0: never; tuning knob).
    const char* forced = std::getenv("JITMM_X86_LOWP_WIDEN");
    const int64_t max_k = forced != nullptr && forced[0] != '\0' ? std::atoll(forced) : widen_max_k(p, isa, cpu);
    if (isa < hw::X86Isa::avx2 || p.k > max_k || p.quantized() || p.a_zero_point != 0) return false;
    // The widened operands live in the calling thread's scratch for its lifetime: not past kWidenMaxBytes.
    const double widened_bytes = 4.0 * double(p.batch) * double(p.k) * double(p.m + p.n);
    if (widened_bytes > double(kWidenMaxBytes)) return false;
    if (p.bias != BiasKind::none && p.bias_type != JITMM_DTYPE_F32) return false;
    if (p.c_type == JITMM_DTYPE_F32) return true;
    return p.c_type == JITMM_DTYPE_S32 && p.alpha == 1.0f && p.beta == 0.0f && p.bias == BiasKind::none &&
           (p.activation == Activation::none || p.activation == Activation::relu);
}

Problem widened_f32_problem(const Problem& p) {
    Problem w = p;
    w.a_type = w.b_type = w.c_type = JITMM_DTYPE_F32;
    w.lda = p.a_cols();
    w.ldb = p.b_cols();
    w.stride_a = p.stride_a == 0 && p.batch > 1 ? 0 : p.a_rows() * w.lda;
    w.stride_b = p.stride_b == 0 && p.batch > 1 ? 0 : p.b_rows() * w.ldb;
    if (p.bias != BiasKind::none) w.bias_type = JITMM_DTYPE_F32;
    return w;
}

}  // namespace jitmm::plan
