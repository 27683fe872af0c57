#include "plan/cuda_sm90_plan.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace jitmm::plan {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool aligned16(int64_t elements, int64_t element_bytes) { return (elements * element_bytes) % 16 == 0; }
std::string name(jitmm_dtype t) { return dtype_name_or_null(t) ? dtype_name_or_null(t) : "?"; }

// The dtype combinations the wgmma generator has: f16/bf16 (-> same or f32), tf32 (f32 -> f32),
// s8 (-> s32), fp8 e4m3/e5m2 in any mix (-> f32, bf16, f16) with optional dequantization scales.
bool dtypes_supported(const Problem& p, std::string* why) {
    const std::string combo = name(p.a_type) + "*" + name(p.b_type) + "->" + name(p.c_type);
    bool ok = false;
    if (dtype_is_fp8(p.a_type) && dtype_is_fp8(p.b_type))
        ok = p.c_type == JITMM_DTYPE_F32 || p.c_type == JITMM_DTYPE_BF16 || p.c_type == JITMM_DTYPE_F16;
    else if (p.a_type == p.b_type && (p.a_type == JITMM_DTYPE_F16 || p.a_type == JITMM_DTYPE_BF16))
        ok = p.c_type == p.a_type || p.c_type == JITMM_DTYPE_F32;
    else if (p.a_type == JITMM_DTYPE_F32 && p.b_type == JITMM_DTYPE_F32)
        ok = p.c_type == JITMM_DTYPE_F32;
    else if (p.a_type == JITMM_DTYPE_S8 && p.b_type == JITMM_DTYPE_S8)
        ok = p.c_type == JITMM_DTYPE_S32;
    if (!ok) {
        if (why) *why = "no wgmma kernel for " + combo;
        return false;
    }
    if (p.quantized() && !dtype_is_fp8(p.a_type)) {
        if (why) *why = "dequantization scales on the GPU are for fp8 inputs only (" + combo + ")";
        return false;
    }
    if (p.a_zero_point != 0) {
        if (why) *why = "no A zero point on the GPU";
        return false;
    }
    if (p.bias != BiasKind::none && p.bias_type != p.c_type && p.bias_type != JITMM_DTYPE_F32) {
        if (why) *why = "bias_type " + name(p.bias_type) + " with " + combo + " (the bias is either C's type or f32)";
        return false;
    }
    return true;
}

// Whether an operand is staged (copied K-major and packed, rows staged_ld() elements apart, before the GEMM):
// wgmma reads tf32, s8 and fp8 tiles K-major only, so those types stored M/N-major (A transposed, B not
// transposed) are; so is any operand whose rows or batch strides TMA cannot address (off 16 bytes). A shared
// operand (batch stride 0) is read in place at batch 0.
bool needs_staging(const Problem& p, bool a) {
    const int64_t e = dtype_size(a ? p.a_type : p.b_type);
    const bool mn_major = a ? p.trans_a != 0 : p.trans_b == 0;
    if (e != 2 && mn_major) return true;
    const int64_t ld = a ? p.lda : p.ldb, stride = a ? p.stride_a : p.stride_b;
    return !aligned16(ld, e) || (p.batch > 1 && stride != 0 && !aligned16(stride, e));
}

constexpr int kMaxStages = 12;

// Whether the plan fits the block's shared memory, after narrowing the shared C tile (asynchronous C store)
// as far as it goes: a deep pipeline may need the room.
bool fit_shared_memory(Sm90GemmPlan& plan, const CudaTarget& target) {
    while (plan.smem_bytes() > target.smem_per_block_optin && plan.c_tma && plan.c_pass_bytes > 128)
        plan.c_pass_bytes /= 2;
    return plan.smem_bytes() <= target.smem_per_block_optin;
}

// The deepest pipeline (2..kMaxStages stages) that fits with the plan's C tile as it is.
int deepest_stages(Sm90GemmPlan plan, const CudaTarget& target) {
    int stages = 2;
    for (plan.stages = 3; plan.stages <= kMaxStages && plan.smem_bytes() <= target.smem_per_block_optin; ++plan.stages)
        stages = plan.stages;
    return stages;
}

// Per-block fp8 scales: a tile's columns must lie in one 128-column scale block of B, and the per-k-block
// product needs a second set of accumulators (bn 128 at most).
bool tile_fits_block_scales(const Problem& p, int bn) {
    return p.a_scale != ScaleMode::per_block || bn == 64 || bn == 128;
}

// Whether B can be split between the two CTAs of a cluster: half the tile's rows (K-major) or half its
// 64-column boxes (N-major) each.
bool b_splits(const Sm90GemmPlan& plan) { return plan.b_k_major ? plan.bn % 16 == 0 : plan.bn % 128 == 0; }

// The tiles of the last, partial wave of a persistent grid of sm_count CTAs (0 when the tiles fill whole waves
// or do not fill one).
int64_t tail_tiles(int64_t tiles, int sm_count) { return tiles > sm_count ? tiles % sm_count : 0; }

// "sm90p:BMxBNxSTAGES": ping-pong consumers, each on a whole BM x BN tile (BM 64 or 128, BN 16..128).
bool apply_pingpong_choice(Sm90GemmPlan& plan, const Problem& p, const CudaTarget& target, const char* text) {
    int bm = 0, bn = 0, stages = 0;
    if (std::sscanf(text, "sm90p:%dx%dx%d", &bm, &bn, &stages) != 3 || (bm != 64 && bm != 128) || bn < 16 ||
        bn > 128 || bn % 16 != 0 || stages < 2 || stages > kMaxStages)
        fail(JITMM_STATUS_INVALID_VALUE, std::string("sm90 recipe: expected sm90p:BMxBNxSTAGES (BM 64 or 128, BN "
                                                     "16..128, stages 2..12), got \"") + text + "\"");
    if (p.a_scale == ScaleMode::per_block)
        fail(JITMM_STATUS_INVALID_VALUE, std::string("sm90 recipe ") + text + ": per-block scales need shared tiles");
    plan.pingpong = true;
    plan.consumers = 2;
    plan.bm = bm;
    plan.bn = bn;
    plan.stages = stages;
    plan.cluster_m = 1;
    plan.split_k = 1;
    plan.split_tiles = 0;
    plan.c_pass_bytes = 512;
    if (!fit_shared_memory(plan, target))
        fail(JITMM_STATUS_INVALID_VALUE, std::string("sm90 recipe ") + text + " needs " +
                                             std::to_string(plan.smem_bytes()) + " bytes of shared memory");
    return true;
}

bool costly_activation(const Problem& p) { return activation_uses_exp(p.activation); }

// The 192-wide tiles pay where their epilogue is light: 16-bit or fp8 operands, no GELU or SiLU. With a costly
// activation their consumers' larger share of C measured slower than 128x128 (H100, 384x4096x4096 f16 -> f32
// with bias+GELU: 64x192 35.3 us, 128x128 28.3). An f32 C without them wants the 192-wide tiles as bf16 C does
// (jitmm_tune, bf16 -> f32 NT, against the tile chosen without them: 384x6144x4096 128x192 44.5 us against
// 128x256 53.1, 768x4096x4096 128x192 46.1 against 128x256 54.1, 384x4096x4096 64x192 29.2 against 128x128
// 31.4, 768x6144x4096 64x192 71.1 against 128x128 79.3). fp8 takes only the single-consumer 64x192: its
// 128x192 measured poor (384x14336x4096 -> bf16: 41.9 against 39.0 on 128x128; 768x14336x4096 84.1 against
// 73.4), its 64x192 the best of every tile at 384-768 rows (jitmm_tune: 384x6144x4096 26.3 against 31.5 on
// the 128x256 chosen before, 768x6144x4096 36.0 against 41.5 on 128x128, 384x4096x4096 17.4 against 18.4).
bool wide_tile_fits(const Problem& p, int consumers) {
    if (costly_activation(p)) return false;
    return dtype_is_fp8(p.a_type) ? consumers == 1 : dtype_size(p.a_type) == 2;
}

// A GELU or SiLU epilogue (an exponential and a reciprocal per element on the special-function unit) over a
// short K is a large share of a tile's time that the shared-tile consumers spend with the tensor cores idle;
// ping-pong consumers run it under the other's main loop. H100, bf16 bias+GELU, 128x256 shared tiles vs
// ping-pong 128x128x4 (same build): 4096x4096x1024 65.8 -> 61.1 us, 8192x3072x768 80.9 -> 73.2, 8192x5120x1280
// 185.2 -> 183.0, but 4096x10240x2560 331 -> 334 and 4096^3 199 -> 214 (the 128-column tiles read more per
// FLOP, which a long K feels). Needs at least two tiles per SM to have turns to take.
void take_pingpong_where_it_pays(Sm90GemmPlan& plan, const Problem& p, const CudaTarget& target) {
    if (!costly_activation(p) || p.k > 1536 || plan.split_k > 1 || p.a_scale == ScaleMode::per_block) return;
    Sm90GemmPlan pp = plan;
    pp.pingpong = true;
    pp.consumers = 2;
    pp.bm = 128;
    pp.bn = 128;
    pp.stages = 4;
    pp.c_pass_bytes = 512;
    if (pp.tiles(p) < 2 * target.sm_count || !fit_shared_memory(pp, target)) return;
    plan = pp;
}

// "sm90:BMxBNxSTAGES[xCLUSTER[xSPLIT[xTAIL]]]": JITMM_CUDA_TILE (developer knob) or a tuned choice; part of the
// key like any plan. TAIL 1: only the last partial wave's tiles are split.
bool apply_choice(Sm90GemmPlan& plan, const Problem& p, const CudaTarget& target, const char* text) {
    if (text != nullptr && std::strncmp(text, "sm90p:", 6) == 0) return apply_pingpong_choice(plan, p, target, text);
    if (text == nullptr || std::strncmp(text, "sm90:", 5) != 0) return false;
    int bm = 0, bn = 0, stages = 0, cluster = 1, split = 1, tail = 0;
    const int fields = std::sscanf(text, "sm90:%dx%dx%dx%dx%dx%d", &bm, &bn, &stages, &cluster, &split, &tail);
    if (fields < 3 || (bm != 64 && bm != 128) || bn < 16 || bn > 256 || bn % 16 != 0 || stages < 2 ||
        stages > kMaxStages || (cluster != 1 && cluster != 2) || split < 1 || split > 16 || (split > 1 && cluster > 1) ||
        (tail != 0 && tail != 1))
        fail(JITMM_STATUS_INVALID_VALUE,
             std::string("sm90 recipe: expected sm90:BMxBNxSTAGES[xCLUSTER[xSPLIT_K[xTAIL]]] (BM 64 or 128, BN "
                         "16..256, stages 2..12, cluster 1 or 2, split 1..16, not both, tail 0 or 1), got \"") +
                 text + "\"");
    if (!tile_fits_block_scales(p, bn))
        fail(JITMM_STATUS_INVALID_VALUE, std::string("sm90 recipe ") + text +
                                             ": per-block scales take BN 64 or 128 (one scale block of B per tile)");
    // B stored N-major arrives in boxes 64 columns wide: a narrower tile would take more bytes than its stage
    // holds and its barrier would wait forever (H100: sm90:64x16x12 on 8192x8x8192 NN hung).
    if (!plan.b_k_major && bn % 64 != 0)
        fail(JITMM_STATUS_INVALID_VALUE, std::string("sm90 recipe ") + text +
                                             ": B stored K x N takes BN in multiples of 64 (its 64-column boxes)");
    plan.pingpong = false;
    plan.bm = bm;
    plan.consumers = bm / 64;
    plan.bn = bn;
    plan.stages = stages;
    plan.cluster_m = cluster;
    plan.split_k = split;
    if (split > ceil_div(p.k, plan.bk))
        fail(JITMM_STATUS_INVALID_VALUE, std::string("sm90 recipe ") + text + ": more K ranges than the " +
                                             std::to_string(ceil_div(p.k, plan.bk)) + " k-blocks of K");
    plan.split_tiles = split == 1 ? 0 : tail ? tail_tiles(plan.tiles(p), target.sm_count) : plan.tiles(p);
    if (split > 1 && plan.split_tiles == 0) plan.split_k = 1;  // no partial wave: nothing to split
    if (cluster == 2 && !b_splits(plan))
        fail(JITMM_STATUS_INVALID_VALUE, std::string("sm90 recipe ") + text + ": B tile cannot be split in two");
    plan.c_pass_bytes = 512;
    if (!fit_shared_memory(plan, target))
        fail(JITMM_STATUS_INVALID_VALUE, std::string("sm90 recipe ") + text + " needs " +
                                             std::to_string(plan.smem_bytes()) + " bytes of shared memory");
    return true;
}

// The asynchronous C store (shared memory -> TMA) for C with 16-byte aligned rows and batch strides.
bool c_tma_applies(const Problem& p) {
    const int64_t ec = dtype_size(p.c_type);
    return (ec == 2 || ec == 4) && p.n % 2 == 0 && (p.ldc * ec) % 16 == 0 &&
           (p.batch == 1 || (p.stride_c > 0 && (p.stride_c * ec) % 16 == 0));
}

struct TileCandidate {
    int consumers, bn;
    double efficiency;  // fraction of the SM's wgmma rate the tile sustains (rough; refined by measurement)
};

// 128x256 (two consumer warpgroups of 64x256) is the tile that keeps Hopper's tensor cores busiest; the
// narrower ones trade some of that for filling all SMs when the problem has few tiles. The 192-wide ones
// fill the waves that 256 and 128 leave ragged (H100, bf16 NT, 128x192 against the old choice: 384x6144x4096
// 43.9 -> 36.2 us, 768x4096x4096 44.4 -> 38.2, 768x4096x14336 137 -> 118, 1536x6144x4096 114 -> 103; 64x192
// against 128x128: 384x4096x4096 25.7 -> 24.6, 192x6144x4096 27.7 -> 26.2).
constexpr TileCandidate kTiles[] = {{2, 256, 1.00}, {2, 192, 0.97}, {2, 128, 0.88}, {1, 256, 0.75},
                                    {1, 192, 0.70}, {2, 64, 0.60},  {1, 128, 0.50}, {1, 64, 0.32}};

// 64x192 tiles over more than one wave run closer to 128x192's rate than the table says: over three waves
// they beat 128x192 over two (jitmm_tune, 768x6144x4096 NT: bf16 65.5 against 71.2 us, bf16 -> f32 71.1
// against 76.6), while one partial wave of 128x192 still beats two of 64x192 (384x6144x4096: 41.7 against
// 45.3). Under one wave the table's rate stays (few-tile shapes stream the weights; more CTAs stream faster).
// fp8's 128x256 in one partial wave runs below the table's rate (jitmm_tune, 768x4096x4096: 96 tiles 31.4 us,
// where 64x192 over two waves took 28.8 and 64x128 over three 26.2; 384x6144x4096: 72 tiles 31.5).
double tile_efficiency(const TileCandidate& t, double tiles, int sms, bool fp8) {
    if (t.consumers == 1 && t.bn == 192 && tiles >= sms) return 0.76;
    if (fp8 && t.consumers == 2 && t.bn == 256 && tiles < sms) return 0.9;
    return t.efficiency;
}

}  // namespace

int Sm90GemmPlan::c_cols() const {
    const int per_box = 128 / c_bytes;  // the C tensor map's box: 128 bytes of a row
    for (int passes = 1; passes <= 8; ++passes)
        if (bn % passes == 0 && bn / passes * c_bytes <= c_pass_bytes && (bn / passes) % per_box == 0) return bn / passes;
    return per_box;
}

std::string Sm90GemmPlan::describe() const {
    const std::string c_store = c_tma ? " c=tma/" + std::to_string(c_cols()) : c_pairs ? "" : " c=single";
    const char* a_layout = stage_a ? "staged-k-major" : a_k_major ? "k-major" : "m-major";
    const char* b_layout = stage_b ? "staged-k-major" : b_k_major ? "k-major" : "n-major";
    const std::string split_what = split_k > 1 ? " (" + std::to_string(split_tiles) + " tiles)" : "";
    char buf[320];
    std::snprintf(buf, sizeof buf, "sm90 wgmma+tma %dx%dx%d consumers=%d%s stages=%d cluster=%dx1 split_k=%d%s ctas=%d group_m=%d a=%s b=%s%s",
                  bm, bn, bk, consumers, pingpong ? " (ping-pong)" : "", stages, cluster_m, split_k, split_what.c_str(),
                  ctas, group_m, a_layout, b_layout, c_store.c_str());
    return buf;
}

void Sm90GemmPlan::append_key(KeyWriter& w) const {
    w.i64('f', 90).i64('w', consumers).i64('t', bm).i64('t', bn).i64('t', bk).i64('s', stages).i64('g', group_m);
    w.i64('n', ctas).i64('l', cluster_m).i64('k', split_k).i64('m', a_k_major).i64('m', b_k_major).i64('c', c_pairs).i64('c', c_tma);
    w.i64('p', c_pass_bytes).i64('x', stage_a).i64('x', stage_b).i64('t', split_tiles);
    w.i64('o', a_shared).i64('o', b_shared).i64('q', pingpong);
}

int64_t Sm90GemmPlan::a_tail_rows(const Problem& p) const { return a_k_major ? p.m % bm : 0; }

int64_t Sm90GemmPlan::b_tail_rows(const Problem& p) const { return b_k_major && cluster_m == 1 ? p.n % bn : 0; }

int64_t Sm90GemmPlan::tiles(const Problem& p) const { return ceil_div(p.m, bm) * ceil_div(p.n, bn) * p.batch; }

int64_t Sm90GemmPlan::units(const Problem& p) const {
    const int64_t cluster_units = ceil_div(ceil_div(p.m, bm), cluster_m) * ceil_div(p.n, bn) * p.batch;
    return cluster_units + (split_k > 1 ? split_tiles * (split_k - 1) : 0);
}

int64_t Sm90GemmPlan::workspace_counter_bytes(const Problem&) const {
    if (split_k <= 1) return 0;
    return (split_tiles * consumers * 4 + 255) / 256 * 256;
}

int64_t Sm90GemmPlan::workspace_split_bytes(const Problem& p) const {
    if (split_k <= 1) return 0;
    return workspace_counter_bytes(p) + split_tiles * split_k * int64_t{bm} * bn * 4;
}

int64_t Sm90GemmPlan::staged_ld(const Problem& p) const {
    const int64_t per_16_bytes = 16 / dtype_size(p.a_type);
    return ceil_div(p.k, per_16_bytes) * per_16_bytes;
}

int64_t Sm90GemmPlan::staged_bytes(const Problem& p, bool a) const {
    if (!(a ? stage_a : stage_b)) return 0;
    const int64_t batches = (a ? a_shared : b_shared) ? 1 : p.batch;
    const int64_t bytes = batches * (a ? p.m : p.n) * staged_ld(p) * dtype_size(a ? p.a_type : p.b_type);
    return ceil_div(bytes, 256) * 256;
}

int64_t Sm90GemmPlan::staged_offset(const Problem& p, bool a) const {
    return workspace_split_bytes(p) + (a ? 0 : staged_bytes(p, true));
}

int64_t Sm90GemmPlan::workspace_bytes(const Problem& p) const {
    return workspace_split_bytes(p) + staged_bytes(p, true) + staged_bytes(p, false);
}

bool sm90_applies(const Problem& p, const CudaTarget& target, std::string* why_not) {
    auto no = [&](const std::string& why) {
        if (why_not) *why_not = why;
        return false;
    };
    if (target.arch != "sm_90a") return no("wgmma needs the sm_90a target, this is " + target.arch);
    if (const char* off = std::getenv("JITMM_CUDA_SM90"); off != nullptr && std::string(off) == "0")
        return no("JITMM_CUDA_SM90=0");
    std::string why;
    if (!dtypes_supported(p, &why)) return no(why);
    const bool stage_a = needs_staging(p, true), stage_b = needs_staging(p, false);
    // A staged copy is read (and written) once more than the operand itself: worth it when the other side
    // reuses it; with few rows or columns the SM80 kernel reads it in place. fp8 has no SM80 kernel.
    if (!dtype_is_fp8(p.a_type) && ((stage_a && p.n <= 64) || (stage_b && p.m <= 64)))
        return no(name(p.a_type) + " operand staged (M/N-major, or rows TMA cannot address) with at most 64 rows "
                  "or columns on the other side: the SM80 kernel reads it in place");
    if (p.m > (int64_t{1} << 31) - 256 || p.n > (int64_t{1} << 31) - 256 || p.k > (int64_t{1} << 31) - 256 ||
        p.batch > (int64_t{1} << 31))
        return no("dimensions beyond TMA's 32-bit coordinates");
    // Decode shapes stream B at memory speed on the SM80 skinny kernel; fp8 has no kernel there.
    // Decode shapes (few rows of A, B stored N x K) stream B at memory speed on the SM80 gemv/skinny kernels;
    // fp8 has no kernel there. Rows off 16 bytes come back here (staged), except the skinny kernel's (B stored
    // N x K, up to 16 rows).
    const int64_t e = dtype_size(p.a_type);
    const bool rows16 = aligned16(p.lda, e) && aligned16(p.ldb, e) &&
                        (p.batch == 1 || (aligned16(p.stride_a, e) && aligned16(p.stride_b, e)));
    if (!dtype_is_fp8(p.a_type) && gemv_shape(p) && (rows16 || (p.m <= 16 && p.trans_b)))
        return no("decode shape: the gemv kernel");
    return true;
}

Sm90GemmPlan plan_sm90_gemm(const Problem& p, const CudaTarget& target, const std::string& choice, bool allow_split) {
    std::string why;
    if (!sm90_applies(p, target, &why)) fail(JITMM_STATUS_UNSUPPORTED, "cuda sm90: " + why);
    const int64_t e = dtype_size(p.a_type);
    Sm90GemmPlan plan;
    plan.bk = static_cast<int>(128 / e);
    plan.stage_a = needs_staging(p, true);
    plan.stage_b = needs_staging(p, false);
    plan.a_shared = p.batch > 1 && p.stride_a == 0;
    plan.b_shared = p.batch > 1 && p.stride_b == 0;
    plan.a_k_major = !p.trans_a || plan.stage_a;
    plan.b_k_major = p.trans_b || plan.stage_b;
    plan.c_tma = c_tma_applies(p);
    plan.c_bytes = static_cast<int>(dtype_size(p.c_type));

    // The tile and K split with the least estimated time: the busiest SM's share of work units (a persistent
    // grid of one CTA per SM walks them in turn), each at the tile's efficiency, plus for a split the partial
    // sums' round trip through L2 (each unit writes its slot, the tile's last unit reads the others) and the
    // counters' reset. Rates are the H100's, roughly.
    const TileCandidate* best = nullptr;
    int best_split = 1;
    bool best_tail = false;
    double best_time = 0;
    const int64_t kt = ceil_div(p.k, plan.bk);
    constexpr double kSmRate = 5.5e12;    // dense tensor-core FLOP/s of one SM at the 128x256 tile (measured)
    constexpr double kSmL2Rate = 100e9;   // bytes/s one SM moves to or from L2 (partial sums)
    constexpr double kUnitRamp = 1.5e-6;  // pipeline fill and epilogue of one work unit
    constexpr double kSplitFixed = 1.5e-6; // the counters' memset and the arrival handshake
    // Split K over all tiles is correct (one launch: the last K range of a tile adds the others' partial
    // sums) but measured slower where the model wants it (H100, ncu, 128x4096x4096 bf16: 128x128 tiles split
    // 2 ways 27.9 us, 4 ways 33.7 us, against 19.5 us unsplit on 64x64 tiles): those few-tile shapes are bound
    // by streaming the weights through the SMs, and more CTAs along K did not stream them faster. So the
    // heuristic splits every tile only when allowed; jitmm_tune times those splits.
    // Splitting only the last partial wave (whole waves run unsplit first) should pay on compute-bound shapes,
    // whose tail would leave most SMs idle for a whole tile's time, but it measured no faster either (H100,
    // 2048x11008x4096 bf16, 688 tiles = 5 waves + 28: 281 us unsplit, 283 us with the tail split 2 or 4 ways);
    // it too is only taken when allowed, and tuning times it.
    // JITMM_CUDA_SPLIT=tail|all (developer knob, measurements): let the model split the last partial wave only,
    // or every tile too, as allow_split does.
    const char* split_env = std::getenv("JITMM_CUDA_SPLIT");
    const bool env_all = split_env != nullptr && std::strcmp(split_env, "all") == 0;
    const bool allow_tail = allow_split || env_all || (split_env != nullptr && std::strcmp(split_env, "tail") == 0);
    const int sms = target.sm_count;
    // Every tile is also split by default where even 64 x 64 tiles leave three quarters of the SMs idle over
    // a long K (unlike 128x4096x4096's 128 such tiles): there one CTA per tile is bound by its own k-block
    // loop, not by streaming, and splits paid (H100, bf16, median us, two runs: 64x64x4096 13.0 unsplit, 9.1
    // on the model's 6-way split; 49x512x4608 14.1 -> 11.0 on its 7-way split of 64x64 tiles; 196x256x2304,
    // 36 k-blocks, ran slower with every split tried).
    const bool few_tiles_long_k = ceil_div(p.m, 64) * ceil_div(p.n, 64) * p.batch * 4 <= sms && kt >= 64;
    const int max_split = allow_split || env_all || few_tiles_long_k ? 8 : 1;
    auto consider = [&](const TileCandidate& t, int split, bool tail, double time) {
        // A split must win clearly: it costs a workspace (a tail split only the last wave's partial sums).
        const double margin = split == 1 ? 0.98 : tail ? 0.95 : 0.9;
        if (best == nullptr || time < best_time * margin) {
            best = &t;
            best_split = split;
            best_tail = tail;
            best_time = time;
        }
    };
    for (const TileCandidate& t : kTiles) {
        if (!tile_fits_block_scales(p, t.bn) || (t.bn == 192 && !wide_tile_fits(p, t.consumers))) continue;
        const int bm = 64 * t.consumers;
        const double tiles = double(ceil_div(p.m, bm)) * double(ceil_div(p.n, t.bn)) * double(p.batch);
        const double efficiency = tile_efficiency(t, tiles, sms, dtype_is_fp8(p.a_type));
        const double tile_time = 2.0 * bm * t.bn * double(p.k) / (kSmRate * efficiency);
        auto split_cost = [&](int split) { return double(split) * bm * t.bn * 4.0 / kSmL2Rate + kSplitFixed; };
        for (int split = 1; split <= max_split; ++split) {
            if (split > 1 && (kt < 4 * split || tiles * split > 2.0 * sms)) break;
            const double per_sm = std::ceil(tiles * split / sms);
            double time = per_sm * (tile_time / split + kUnitRamp);
            if (split > 1) time += split_cost(split);
            consider(t, split, false, time);
        }
        // The last partial wave's tiles split as many ways as fill the SMs.
        const int64_t tail = tail_tiles(static_cast<int64_t>(tiles), sms);
        const int tail_split = tail > 0 ? static_cast<int>(std::min<int64_t>(8, sms / tail)) : 1;
        if (allow_tail && tail_split >= 2 && kt >= 4 * tail_split) {
            const double whole_waves = std::floor(tiles / sms);
            consider(t, tail_split, true,
                     whole_waves * (tile_time + kUnitRamp) + tile_time / tail_split + kUnitRamp + split_cost(tail_split));
        }
    }
    plan.consumers = best->consumers;
    plan.bm = 64 * best->consumers;
    plan.bn = best->bn;
    plan.split_k = best_split;
    plan.split_tiles = best_split == 1 ? 0 : best_tail ? tail_tiles(plan.tiles(p), sms) : plan.tiles(p);

    // As deep as shared memory allows (up to 12): the producer runs that many k-blocks ahead. Small tiles
    // (the few-tile LLM shapes, bound by streaming the weights) need the bytes in flight (H100, 128x4096x4096
    // bf16 on 64x64 tiles: 6 stages 19.5 us, 8 stages 18.1, 12 stages 17.2; 128x4096x11008 45.7 -> 41.4).
    plan.stages = deepest_stages(plan, target);
    // An N-major B arrives as bn / 64 separate boxes per stage: over a long K a fourth stage hides their
    // latency better, bought with a narrower shared C tile (H100, bf16 NN, same-run medians, 3 -> 4 stages:
    // 8192^3 705-742 -> 751-752 TFLOP/s, 2048x4096x14336 708 -> 746, 4096x4096x11008 712 -> 763; at K = 4096
    // and with a K-major B it was a wash or slower, so those keep the wider C tile).
    // Where the tiles make at most two waves, the shapes lean on streaming the operands, and the fourth stage
    // pays for any B (H100, bf16 NT 128x256, 3 -> 4 stages: 192x14336x4096 58.1 -> 52.0 us, 256x14336x4096
    // 58.7 -> 53.2, 384x6144x4096 46.1 -> 43.9, 768x4096x4096 46.0 -> 44.4).
    const bool few_waves = plan.tiles(p) <= 2 * target.sm_count;
    if (plan.stages == 3 && plan.c_tma && ((!plan.b_k_major && p.k >= 8192) || few_waves)) {
        Sm90GemmPlan deeper = plan;
        deeper.stages = 4;
        if (fit_shared_memory(deeper, target)) plan = deeper;
    }
    // CTA pairs sharing B (cluster 2x1, each loads half and multicasts it) are correct but measured 2x slower
    // per CTA on the H100 (4096^3 bf16: 337 vs 646 TFLOP/s, at any grid size), so they are only a knob
    // (JITMM_CUDA_TILE=sm90:128x256x3x2) until the pair's pipeline is understood.
    plan.cluster_m = 1;
    take_pingpong_where_it_pays(plan, p, target);
    if (!apply_choice(plan, p, target, std::getenv("JITMM_CUDA_TILE"))) apply_choice(plan, p, target, choice.c_str());

    plan.ctas = static_cast<int>(std::min<int64_t>(plan.units(p), target.sm_count / plan.cluster_m) * plan.cluster_m);
    plan.group_m = 8;
    if (const char* g = std::getenv("JITMM_CUDA_GROUP_M"); g != nullptr && std::atoi(g) >= 1)
        plan.group_m = std::atoi(g);  // developer knob: tile rows walked together
    const int64_t ec = dtype_size(p.c_type);
    plan.c_pairs = p.n % 2 == 0 && p.ldc % 2 == 0 && (p.batch == 1 || p.stride_c % 2 == 0) && ec <= 4;
    return plan;
}

std::vector<std::string> sm90_tune_candidates(const Problem& p, const CudaTarget& target) {
    std::vector<std::string> out;
    if (!sm90_applies(p, target)) return out;
    for (int consumers : {2, 1})
        for (int bn : {256, 192, 128, 64}) {
            if (!tile_fits_block_scales(p, bn)) continue;
            Sm90GemmPlan t;
            t.c_tma = c_tma_applies(p);
            t.c_bytes = static_cast<int>(dtype_size(p.c_type));
            t.consumers = consumers;
            t.bm = 64 * consumers;
            t.bn = bn;
            t.stages = deepest_stages(t, target);
            if (t.smem_bytes() > target.smem_per_block_optin) continue;
            // Tiles far wider than the problem only add waste.
            if (bn > 64 && p.n <= bn / 2) continue;
            if (consumers == 2 && p.m <= 64) continue;
            out.push_back("sm90:" + std::to_string(t.bm) + "x" + std::to_string(bn) + "x" + std::to_string(t.stages));
        }
    // Ping-pong consumers (one's epilogue under the other's main loop) on 128-row tiles, where there are
    // tiles enough for both to take turns.
    if (p.a_scale != ScaleMode::per_block)
        for (int bn : {128, 64}) {
            Sm90GemmPlan t;
            t.pingpong = true;
            t.c_tma = c_tma_applies(p);
            t.c_bytes = static_cast<int>(dtype_size(p.c_type));
            t.bn = bn;
            t.stages = std::min(deepest_stages(t, target), 6);
            if (t.smem_bytes() > target.smem_per_block_optin || t.tiles(p) < 2 * target.sm_count) continue;
            out.push_back("sm90p:128x" + std::to_string(bn) + "x" + std::to_string(t.stages));
        }
    // The heuristic's split of K, when it splits (every tile, or the last partial wave), and the neighbouring
    // split counts with the same tile.
    const Sm90GemmPlan h = plan_sm90_gemm(p, target, "", /*allow_split=*/true);
    const bool tail = h.split_k > 1 && h.split_tiles < h.tiles(p);
    if (h.split_k > 1)
        for (int split : {h.split_k / 2, h.split_k, h.split_k * 2})
            if (split > 1 && split <= 16)
                out.push_back("sm90:" + std::to_string(h.bm) + "x" + std::to_string(h.bn) + "x" +
                              std::to_string(h.stages) + "x1x" + std::to_string(split) + (tail ? "x1" : ""));
    return out;
}

}  // namespace jitmm::plan
