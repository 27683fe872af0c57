#include "plan/cuda_gemm_plan.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace jitmm::plan {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Index arithmetic in the kernels is 32-bit within a matrix (byte offsets of whole rows are 64-bit).
constexpr int64_t kMaxDim = int64_t{1} << 27;

bool aligned16(int64_t elements, int64_t element_bytes) { return (elements * element_bytes) % 16 == 0; }

// Rows of A the gemv kernel takes. H100, Llama-2 7B/70B linear layers, ratio to cuBLASLt: at 32 rows
// 0.96-1.09 (the Hopper kernel's 64x64 tiles: 0.68-1.05, 0.68 at 32x1280x8192); at 64 rows only 0.75-0.98,
// where the A tiles re-read per 16 weight rows cost more than streaming the weights once saves.
constexpr int64_t kGemvMaxRows = 32;

// A gemv CTA streams one column tile's K range at ~37 GB/s (H100: 4096 x 4096 bf16 at 2.4 TB/s from 64 CTAs),
// so with few column tiles (8 x 8 x 65536: one) most SMs sit idle and one CTA reads megabytes alone. Then
// CTAs split K too, up to a CTA per SM, each warp keeping at least kMinGemvStagesPerWarp stages (the ring's
// ramp) and at most kMaxGemvCtasK partial sums for the last CTA to add.
constexpr int kMinGemvStagesPerWarp = 8;
constexpr int kMaxGemvCtasK = 64;

// One CTA tile the planner may pick for the tiled family, with what the estimate needs.
struct TileCandidate {
    int bm, bn, warps_m, warps_n, stages;
    int bk_bytes;       // K per stage row, in bytes (64 or 128)
    int ctas_per_sm;    // resident CTAs the register and shared-memory budget allow
    double efficiency;  // fraction of the SM's mma.sync rate this tile shape sustains (rough, measured shapes)
    bool elements_only = false;  // only for thin shapes with an operand read element by element (rows off 16 bytes)
};

// Efficiencies relative to 128x128 with 4 warps of 64x64, 128-byte K rows and two CTAs per SM (H100, bf16,
// 4096^3, 8192^3 and 2048x11008x4096). 256x128 with 8 warps of 64x64 reads each A and B element into shared
// memory for more of the tile: ~6% more per full wave, but one CTA per SM leaves a partial last wave idle
// where two CTAs per SM backfill it. 64-byte K rows take twice the barriers per mma. Warp tiles down to 16x32
// for M <= 16.
constexpr TileCandidate kTiles[] = {
    {256, 128, 4, 2, 3, 128, 1, 1.06}, {128, 128, 2, 2, 3, 128, 2, 1.00}, {128, 128, 2, 2, 4, 64, 2, 0.97},
    {128, 256, 2, 4, 3, 64, 1, 0.80},  {128, 128, 2, 4, 4, 64, 1, 0.85},  {64, 128, 2, 2, 4, 64, 3, 0.75},
    {64, 64, 2, 2, 4, 64, 4, 0.60},    {32, 64, 1, 2, 4, 64, 6, 0.40},    {16, 128, 1, 4, 4, 64, 6, 0.30},
    {16, 64, 1, 2, 4, 64, 8, 0.25},    {16, 32, 1, 2, 4, 64, 8, 0.20},
    // Element loads are latency-bound: 4 warps on a 32 x 32 tile with 128-byte K rows keep 32 loads a thread
    // in flight and halve the k-tiles (H100, bf16 17 x 1023 x 511 with odd leading dimensions, NN / NT:
    // 47 / 47 us on 32 x 64 with 2 warps, 13.6 / 9.8 us on this; f16 30 x 999 x 1001 153 -> 28 us).
    {32, 32, 2, 2, 4, 128, 8, 0.35, true},
};

// Estimated time of the grid: waves of (SMs x resident CTAs), each CTA's tile at the tile's efficiency. With
// one CTA per SM a partial last wave costs a whole one; with several, CTAs finish at staggered times and the
// last ones run alone, faster, so past the first wave the count of waves is fractional (measured: 2048 x 11008
// with 5.2 waves ran 10% faster on 128x128 tiles than on 256x128, which win on whole waves).
double tile_time(const Problem& p, const TileCandidate& t, const CudaTarget& target) {
    // The table's CTAs per SM assume an H100's shared memory; an SM with less (sm_86: 100 KB) holds fewer.
    const int64_t smem = int64_t{t.stages} * (t.bm + t.bn) * t.bk_bytes + 1024;  // + the driver's reserve
    const int resident = static_cast<int>(std::clamp<int64_t>(target.smem_per_sm / smem, 1, t.ctas_per_sm));
    const double tiles = double(ceil_div(p.m, t.bm)) * double(ceil_div(p.n, t.bn)) * double(p.batch);
    const double fill = tiles / (double(target.sm_count) * resident);
    const double waves = fill <= 1 ? 1 : resident == 1 ? std::ceil(fill) : fill;
    // Fewer co-resident CTAs than the efficiency was measured with: fewer warps to hide latency. Not measured
    // (an A100's 164 KB per SM holds one 96 KB tile where an H100 holds two); a margin that keeps such a GPU
    // on the tiles that still pair up.
    const double efficiency = resident < t.ctas_per_sm ? 0.8 * t.efficiency : t.efficiency;
    return waves * resident * double(t.bm) * double(t.bn) / efficiency;
}

// CTAs splitting K per column tile: only where the column tiles leave more than three quarters of the SMs idle
// (the split costs a workspace, a memset and the last CTA's sum); decode shapes with tens of column tiles keep
// streaming unsplit, as measured.
int gemv_ctas_splitting_k(const Problem& p, const CudaGemmPlan& plan, const CudaTarget& target) {
    const int64_t tiles = ceil_div(p.n, plan.gemv_columns()) * p.batch;
    if (tiles * 4 > target.sm_count) return 1;
    const int64_t by_k = plan.gemv_k_stages(p) / (int64_t{plan.gemv_warps} * kMinGemvStagesPerWarp);
    const int64_t by_sms = target.sm_count / tiles;
    return static_cast<int>(std::clamp<int64_t>(std::min(by_k, by_sms), 1, kMaxGemvCtasK));
}

OperandPath operand_path(bool k_major, int64_t ld, int64_t stride, int64_t batch, int64_t e, bool aligned_pointers) {
    const bool aligned = aligned_pointers && aligned16(ld, e) && (batch == 1 || aligned16(stride, e));
    if (!aligned) return OperandPath::scalar;
    // ldmatrix.trans moves 16-bit elements only: 4- and 1-byte M/N-major tiles are transposed on the way in.
    return k_major || e == 2 ? OperandPath::cp_async : OperandPath::vector;
}

// JITMM_CUDA_TILE (developer knob for tuning runs): "tiled:BMxBNxWMxWNxSTAGES[xBK_BYTES[xBLOCKS_PER_SM]]" (BK 64
// or 128 bytes; blocks per SM the launch bounds ask the registers to allow, 1..4),
// "skinny:NTxKWxU" or "gemv:WARPSxSTAGESxSEGMENT_BYTESxBLOCKS_PER_SM[xGROUPS[xCTAS_K]]".
// Applied where it fits the problem; part of the key like any plan.
bool apply_override(CudaGemmPlan& plan, int64_t element_bytes) {
    const char* text = std::getenv("JITMM_CUDA_TILE");
    if (text == nullptr || *text == '\0') return false;
    int v[7] = {0, 0, 0, 0, 0, 64, 1};
    const int fields = std::sscanf(text, "tiled:%dx%dx%dx%dx%dx%dx%d", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]);
    if (fields >= 5) {
        if (plan.family != CudaKernelFamily::tiled) return false;
        const bool ok = v[0] >= 16 && v[0] % 16 == 0 && v[1] >= 16 && v[1] % 16 == 0 && v[2] >= 1 && v[3] >= 1 &&
                        v[0] % (16 * v[2]) == 0 && v[1] % (16 * v[3]) == 0 && v[4] >= 2 && v[4] <= 8 &&
                        v[2] * v[3] <= 16 && (v[5] == 64 || v[5] == 128) && v[6] >= 1 && v[6] <= 4;
        if (!ok) fail(JITMM_STATUS_INVALID_VALUE, std::string("JITMM_CUDA_TILE: bad tiled shape \"") + text + "\"");
        plan.bm = v[0];
        plan.bn = v[1];
        plan.warps_m = v[2];
        plan.warps_n = v[3];
        plan.stages = v[4];
        plan.bk = static_cast<int>(v[5] / element_bytes);
        plan.min_blocks_per_sm = v[6];
        return true;
    }
    if (std::sscanf(text, "skinny:%dx%dx%d", &v[0], &v[1], &v[2]) == 3) {
        // Also replaces the gemv kernel for B stored N x K (16-byte loads then), to compare the two.
        if (plan.family == CudaKernelFamily::tiled || plan.gemv_n_major) return false;
        if (v[0] < 1 || v[0] > 4 || v[1] < 1 || v[1] > 16 || v[2] < 1 || v[2] > 8)
            fail(JITMM_STATUS_INVALID_VALUE, std::string("JITMM_CUDA_TILE: bad skinny shape \"") + text + "\"");
        if (plan.family == CudaKernelFamily::gemv) plan.skinny_vector = true;
        plan.family = CudaKernelFamily::skinny;
        plan.skinny_row_tiles = v[0];
        plan.skinny_warps = v[1];
        plan.skinny_unroll = v[2];
        plan.min_blocks_per_sm = plan.skinny_warps > 8 ? 1 : 2;
        return true;
    }
    v[4] = 1;
    v[5] = plan.gemv_ctas_k;
    if (std::sscanf(text, "gemv:%dx%dx%dx%dx%dx%d", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) >= 4) {
        if (plan.family != CudaKernelFamily::gemv) return false;
        if (v[0] < 1 || v[0] > 16 || v[1] < 2 || v[1] > 8 || (v[2] != 128 && v[2] != 256 && v[2] != 512) || v[3] < 1 ||
            v[3] > 8 || v[4] < 1 || v[4] > 2 || (v[4] > 1 && plan.gemv_n_major) || v[5] < 1 || v[5] > kMaxGemvCtasK)
            fail(JITMM_STATUS_INVALID_VALUE, std::string("JITMM_CUDA_TILE: bad gemv shape \"") + text + "\"");
        plan.gemv_warps = v[0];
        plan.gemv_stages = v[1];
        plan.gemv_segment = v[2];
        plan.min_blocks_per_sm = v[3];
        plan.gemv_groups = v[4];
        plan.gemv_ctas_k = v[5];
        return true;
    }
    fail(JITMM_STATUS_INVALID_VALUE, std::string("JITMM_CUDA_TILE: expected tiled:BMxBNxWMxWNxSTAGES[xBK[xBLOCKS]], "
                                                 "skinny:NTxKWxU or gemv:WARPSxSTAGESxSEGMENTxBLOCKS[xGROUPS[xCTAS_K]], got \"") + text + "\"");
}

}  // namespace

const char* operand_path_name(OperandPath p) {
    switch (p) {
        case OperandPath::cp_async: return "cp.async";
        case OperandPath::vector: return "vector";
        case OperandPath::scalar: return "scalar";
    }
    return "?";
}

int CudaGemmPlan::threads() const {
    switch (family) {
        case CudaKernelFamily::skinny: return 32 * skinny_warps;
        case CudaKernelFamily::gemv: return 32 * gemv_warps;
        default: return 32 * warps_m * warps_n;
    }
}

int64_t CudaGemmPlan::smem_bytes(int element_bytes) const {
    if (family != CudaKernelFamily::tiled) return 0;
    return int64_t{stages} * (bm + bn) * bk * element_bytes;
}

int64_t CudaGemmPlan::gemv_smem_bytes(int64_t m) const {
    // B stored K x N: a stage is 16 k-rows of 64 two-byte columns and 16 k of each A row.
    const int64_t stage = gemv_n_major ? 16 * 64 * 2 + gemv_a_tiles(m) * 8 * 32
                                       : (16 * gemv_groups + gemv_a_tiles(m) * 8) * int64_t{gemv_segment};
    return int64_t{gemv_warps} * gemv_stages * stage;
}

int64_t CudaGemmPlan::gemv_k_stages(const Problem& p) const {
    return gemv_n_major ? ceil_div(p.k, 16) : ceil_div(p.k * dtype_size(p.a_type), gemv_segment);
}

int64_t CudaGemmPlan::workspace_counter_bytes(const Problem& p) const {
    if (family != CudaKernelFamily::gemv || gemv_ctas_k <= 1) return 0;
    return (ceil_div(p.n, gemv_columns()) * p.batch * 4 + 255) / 256 * 256;
}

int64_t CudaGemmPlan::workspace_bytes(const Problem& p) const {
    if (family != CudaKernelFamily::gemv || gemv_ctas_k <= 1) return 0;
    const int64_t slot = p.m * gemv_columns() * 4;  // one CTA's partial sums (f32 or s32)
    return workspace_counter_bytes(p) + ceil_div(p.n, gemv_columns()) * p.batch * gemv_ctas_k * slot;
}

int64_t gemv_a_tiles(int64_t m) { return m <= 8 ? 1 : ceil_div(m, 16) * 2; }

bool gemv_n_major_shape(const Problem& p) {
    return p.m <= 16 && !p.trans_a && !p.trans_b && dtype_size(p.a_type) == 2;
}

bool gemv_shape(const Problem& p) { return (p.m <= kGemvMaxRows && !p.trans_a && p.trans_b) || gemv_n_major_shape(p); }

std::string CudaGemmPlan::describe() const {
    char buf[256];
    if (family == CudaKernelFamily::gemv && gemv_n_major) {
        std::snprintf(buf, sizeof buf, "sm80 gemv, B stored K x N (cp.async k-rows, ldmatrix.trans, swap-AB mma.sync) "
                      "columns=64 warps=%d (split K) ctas_k=%d stages=%d of 16 k-rows blocks/SM=%d", gemv_warps,
                      gemv_ctas_k, gemv_stages, min_blocks_per_sm);
    } else if (family == CudaKernelFamily::gemv) {
        std::snprintf(buf, sizeof buf, "sm80 gemv (cp.async rows, swap-AB mma.sync) rows=%d warps=%d (split K) "
                      "ctas_k=%d stages=%d segment=%dB blocks/SM=%d", 16 * gemv_groups, gemv_warps, gemv_ctas_k,
                      gemv_stages, gemv_segment, min_blocks_per_sm);
    } else if (family == CudaKernelFamily::skinny) {
        std::snprintf(buf, sizeof buf, "sm80 skinny (swap-AB mma.sync) rows=%d warps=%d (split K) unroll=%d %s loads",
                      16 * skinny_row_tiles, skinny_warps, skinny_unroll, skinny_vector ? "16-byte" : "element");
    } else {
        std::snprintf(buf, sizeof buf, "sm80 tiled (mma.sync) %dx%dx%d warps=%dx%d stages=%d group_m=%d a=%s b=%s%s",
                      bm, bn, bk, warps_m, warps_n, stages, group_m, operand_path_name(a_path),
                      operand_path_name(b_path), c_staged ? " c=staged" : c_pairs ? "" : " c=single");
    }
    return buf;
}

void CudaGemmPlan::append_key(KeyWriter& w) const {
    w.i64('f', static_cast<int64_t>(family));
    w.i64('t', bm).i64('t', bn).i64('t', bk).i64('w', warps_m).i64('w', warps_n).i64('s', stages).i64('g', group_m);
    w.i64('p', static_cast<int64_t>(a_path)).i64('p', static_cast<int64_t>(b_path));
    w.i64('k', skinny_row_tiles).i64('k', skinny_warps).i64('k', skinny_unroll).i64('k', skinny_vector);
    w.i64('v', gemv_warps).i64('v', gemv_stages).i64('v', gemv_segment).i64('v', gemv_n_major);
    w.i64('c', c_pairs).i64('c', c_staged).i64('o', min_blocks_per_sm);
}

CudaTarget cuda_target_from_gpu(const hw::GpuInfo& gpu) {
    CudaTarget t;
    t.arch = gpu.arch_name();
    t.cc = gpu.cc_major * 10 + gpu.cc_minor;
    t.sm_count = std::max(1, gpu.sm_count);
    t.smem_per_block_optin = gpu.smem_per_block_optin;
    t.smem_per_sm = gpu.smem_per_sm;
    return t;
}

CudaTarget cuda_target_from_arch(const std::string& arch) {
    CudaTarget t;
    t.arch = arch;
    if (arch == "sm_80") {
        t.cc = 80, t.sm_count = 108, t.smem_per_block_optin = 163 * 1024, t.smem_per_sm = 164 * 1024;
    } else if (arch == "sm_86") {
        t.cc = 86, t.sm_count = 84, t.smem_per_block_optin = 99 * 1024, t.smem_per_sm = 100 * 1024;
    } else if (arch == "sm_89") {
        t.cc = 89, t.sm_count = 128, t.smem_per_block_optin = 99 * 1024, t.smem_per_sm = 100 * 1024;
    } else if (arch == "sm_90" || arch == "sm_90a") {
        t.cc = 90, t.sm_count = 132, t.smem_per_block_optin = 227 * 1024, t.smem_per_sm = 228 * 1024;
    } else if (arch == "sm_100" || arch == "sm_100a") {
        t.cc = 100, t.sm_count = 148, t.smem_per_block_optin = 227 * 1024, t.smem_per_sm = 228 * 1024;
    } else {
        fail(JITMM_STATUS_UNSUPPORTED, "cuda: unknown arch \"" + arch +
                                           "\" for compile-only mode (sm_80, sm_86, sm_89, sm_90a, sm_100a)");
    }
    return t;
}

void check_cuda_gemm_supported(const Problem& p) {
    auto name = [](jitmm_dtype t) { return std::string(dtype_name_or_null(t) ? dtype_name_or_null(t) : "?"); };
    const std::string combo = name(p.a_type) + "*" + name(p.b_type) + "->" + name(p.c_type);
    const bool in_ok = p.a_type == p.b_type &&
                       (p.a_type == JITMM_DTYPE_F16 || p.a_type == JITMM_DTYPE_BF16 || p.a_type == JITMM_DTYPE_F32 ||
                        p.a_type == JITMM_DTYPE_S8);
    bool out_ok = false;
    if (p.a_type == JITMM_DTYPE_F16) out_ok = p.c_type == JITMM_DTYPE_F16 || p.c_type == JITMM_DTYPE_F32;
    if (p.a_type == JITMM_DTYPE_BF16) out_ok = p.c_type == JITMM_DTYPE_BF16 || p.c_type == JITMM_DTYPE_F32;
    if (p.a_type == JITMM_DTYPE_F32) out_ok = p.c_type == JITMM_DTYPE_F32;
    if (p.a_type == JITMM_DTYPE_S8) out_ok = p.c_type == JITMM_DTYPE_S32;
    if (!in_ok || !out_ok)
        fail(JITMM_STATUS_UNSUPPORTED,
             "cuda: no kernel for " + combo +
                 " (supported: f16*f16->f16|f32, bf16*bf16->bf16|f32, f32*f32->f32 via tf32, s8*s8->s32)");
    if (p.bias != BiasKind::none) {
        const bool bias_ok = p.bias_type == p.c_type || p.bias_type == JITMM_DTYPE_F32;
        if (!bias_ok)
            fail(JITMM_STATUS_UNSUPPORTED, "cuda: bias_type " + name(p.bias_type) + " with " + combo +
                                               " (the bias is either C's type or f32)");
    }
    if (p.m > kMaxDim || p.n > kMaxDim || p.k > kMaxDim)
        fail(JITMM_STATUS_UNSUPPORTED, "cuda: m, n and k must each be at most 2^27 for this generator");
    // Dequantization scales and zero points are an x86 feature so far: refusing them here keeps a quantized
    // problem from running without its correction.
    if (p.quantized())
        fail(JITMM_STATUS_UNSUPPORTED, "cuda: no kernel with dequantization scales or an A zero point yet (" +
                                           combo + ")");
}

CudaGemmPlan plan_cuda_gemm(const Problem& p, const CudaTarget& target, bool aligned_pointers) {
    check_cuda_gemm_supported(p);
    const int64_t e = dtype_size(p.a_type);
    CudaGemmPlan plan;

    // Decode shapes with B stored N x K (a Linear layer's weight): stream B at memory speed.
    const bool decode = p.m <= 16 && !p.trans_a && p.trans_b;
    const bool rows16 = aligned_pointers && aligned16(p.lda, e) && aligned16(p.ldb, e) &&
                        (p.batch == 1 || (aligned16(p.stride_a, e) && aligned16(p.stride_b, e)));
    if (gemv_shape(p) && rows16) {
        // Whole 128-byte lines of a row per request: the H100 streamed 90 MB of weights at 2.7-2.8 TB/s this
        // way, against 2.1-2.3 TB/s when a warp's 16-byte loads cover 64 bytes of 8 rows (the mma fragment's
        // layout, the skinny kernel). Measured per M (bench/RESULTS.md), 4 warps and two CTAs per SM in ~96 KB
        // of rings each: 256-byte segments 4 deep for one 8-row tile of A, 3 deep for two, 128-byte segments 4
        // deep for four (the A rows are part of every stage).
        plan.family = CudaKernelFamily::gemv;
        plan.gemv_warps = 4;
        plan.gemv_stages = p.m <= 8 || p.m > 16 ? 4 : 3;
        plan.gemv_segment = p.m <= 16 ? 256 : 128;
        plan.min_blocks_per_sm = 2;
        if (gemv_n_major_shape(p)) {
            // B stored K x N: 64 columns a CTA (a 128-byte line of each k-row), 8 warps splitting K, 4 stages
            // (a scratch probe read 4096 x 4096 bf16 so at 2.4 TB/s with 64 CTAs, 4096 x 11008 at 2.7).
            plan.gemv_n_major = true;
            plan.gemv_warps = 8;
            plan.gemv_stages = 4;
        } else if (p.m > 16) {
            // Four 8-row tiles of A: two 16-row weight groups per CTA share them, which halves the A rows' share
            // of the traffic from L2 (H100, 32 x {4096x11008, 11008x4096} bf16: 3% faster than 16 weight rows
            // with 128-byte segments, two CTAs per SM), where the rings of 256-byte segments 3 deep fit.
            CudaGemmPlan two = plan;
            two.gemv_groups = 2;
            two.gemv_stages = 3;
            two.gemv_segment = 256;
            two.min_blocks_per_sm = 1;
            if (two.gemv_smem_bytes(p.m) <= target.smem_per_block_optin) plan = two;
        }
        while (plan.gemv_stages > 2 && plan.gemv_smem_bytes(p.m) > target.smem_per_block_optin) --plan.gemv_stages;
        plan.gemv_ctas_k = gemv_ctas_splitting_k(p, plan, target);
        plan.c_pairs = false;
        plan.bm = plan.bn = plan.bk = 0;
        plan.warps_m = plan.warps_n = plan.stages = plan.group_m = 0;
        apply_override(plan, e);
        if (plan.family == CudaKernelFamily::gemv && plan.gemv_smem_bytes(p.m) > target.smem_per_block_optin)
            fail(JITMM_STATUS_INVALID_VALUE, "JITMM_CUDA_TILE: the gemv recipe needs more shared memory than a block has");
        return plan;
    }
    if (decode) {
        // Rows that break 16-byte alignment: element loads into the mma fragments. One 16-row tile per warp
        // keeps the CTA count up (N / 16); 8 warps split K inside the CTA; two CTAs per SM resident (launch
        // bounds cap the registers).
        plan.family = CudaKernelFamily::skinny;
        plan.skinny_vector = false;
        plan.skinny_row_tiles = 1;
        plan.skinny_unroll = 1;
        const int64_t chunks = ceil_div(p.k, 64 / e);
        int warps = 8;
        while (warps > 1 && int64_t{warps} * plan.skinny_unroll > chunks) warps /= 2;
        plan.skinny_warps = warps;
        plan.min_blocks_per_sm = 2;
        plan.c_pairs = false;
        plan.bm = plan.bn = plan.bk = 0;
        plan.warps_m = plan.warps_n = plan.stages = plan.group_m = 0;
        apply_override(plan, e);
        if (plan.skinny_warps > 8) plan.min_blocks_per_sm = 1;
        return plan;
    }

    plan.family = CudaKernelFamily::tiled;
    plan.bk = static_cast<int>(64 / e);  // 64 bytes of K per stage row
    plan.a_path = operand_path(!p.trans_a, p.lda, p.stride_a, p.batch, e, aligned_pointers);
    plan.b_path = operand_path(p.trans_b, p.ldb, p.stride_b, p.batch, e, aligned_pointers);
    // Vector operands hold their next tile in registers: the 64x64 warp tiles would spill.
    const bool staged = plan.a_path == OperandPath::vector || plan.b_path == OperandPath::vector;
    const TileCandidate* best = nullptr;
    double best_time = 0;
    const bool thin = p.m <= 32;  // decode with B stored K x N: bound by streaming B, so CTAs count, not tiles
    const bool element_loads = plan.a_path == OperandPath::scalar || plan.b_path == OperandPath::scalar;
    for (const TileCandidate& t : kTiles) {
        if (int64_t{t.stages} * (t.bm + t.bn) * t.bk_bytes > target.smem_per_block_optin) continue;
        if (staged && t.bm * t.bn / (t.warps_m * t.warps_n) > 64 * 32) continue;
        if (t.elements_only && (!element_loads || !thin)) continue;  // measured on thin shapes only
        if (thin) {
            // The shortest tile that covers M, then the widest that still gives every SM a CTA.
            if (t.bm < std::min<int64_t>(p.m, 32) || t.bm > 32 || (p.m <= 16 && t.bm != 16)) continue;
            const int64_t ctas = ceil_div(p.n, t.bn) * p.batch;
            const bool fills = ctas >= target.sm_count;
            const double score = fills ? -double(t.bn) : double(t.bn);  // lower is better
            if (best == nullptr || score < best_time) {
                best = &t;
                best_time = score;
            }
            continue;
        }
        // Tiles past 128x128 only where every SM gets one: with fewer CTAs than SMs the smaller tiles spread
        // the same work over more SMs (the estimate below assumes full waves).
        const int64_t tiles = ceil_div(p.m, t.bm) * ceil_div(p.n, t.bn) * p.batch;
        if (t.bm * t.bn > 128 * 128 && tiles < target.sm_count) continue;
        const double time = tile_time(p, t, target);
        if (best == nullptr || time < best_time * 0.97) {
            best = &t;
            best_time = time;
        }
    }
    plan.bm = best->bm;
    plan.bn = best->bn;
    plan.warps_m = best->warps_m;
    plan.warps_n = best->warps_n;
    plan.stages = best->stages;
    plan.bk = static_cast<int>(best->bk_bytes / e);
    plan.min_blocks_per_sm = 1;
    plan.group_m = 8;
    plan.c_pairs = aligned_pointers && p.n % 2 == 0 && p.ldc % 2 == 0 && (p.batch == 1 || p.stride_c % 2 == 0);
    apply_override(plan, e);
    // C through shared memory once the main loop is done: each warp's tile is written as whole 16-byte pieces
    // of rows instead of 2-element pieces of 8 rows (half of every 32-byte sector per store). Only without M/N
    // tails and with 16-byte C rows, and where the stages' shared memory holds every warp's padded C tile.
    const int64_t ec = dtype_size(p.c_type);
    const int64_t warp_c_bytes = int64_t{plan.bm / plan.warps_m} * plan.staged_c_row_bytes(ec);
    plan.c_staged = plan.c_pairs && plan.a_path == OperandPath::cp_async && plan.b_path == OperandPath::cp_async &&
                    p.m % plan.bm == 0 && p.n % plan.bn == 0 && (p.ldc * ec) % 16 == 0 &&
                    (p.batch == 1 || (p.stride_c * ec) % 16 == 0) && (plan.bn / plan.warps_n) * ec % 16 == 0 &&
                    int64_t{plan.warps_m} * plan.warps_n * warp_c_bytes <= plan.smem_bytes(static_cast<int>(e));
    // The shared tile must fit (the override may ask for more than the chip has).
    if (plan.smem_bytes(static_cast<int>(e)) > target.smem_per_block_optin)
        fail(JITMM_STATUS_INVALID_VALUE, "cuda: tile " + plan.describe() + " needs " +
                                             std::to_string(plan.smem_bytes(static_cast<int>(e))) +
                                             " bytes of shared memory; the chip allows " +
                                             std::to_string(target.smem_per_block_optin));
    return plan;
}

}  // namespace jitmm::plan
