#include "cuda/codegen/sm90_wgmma.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/codegen/epilogue.hpp"
#include "cuda/codegen/sm90_stage.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

namespace jitmm::cuda {
namespace {

using plan::Sm90GemmPlan;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

const char* ptx_type(jitmm_dtype t) {
    switch (t) {
        case JITMM_DTYPE_F16: return "f16";
        case JITMM_DTYPE_BF16: return "bf16";
        case JITMM_DTYPE_F32: return "tf32";
        case JITMM_DTYPE_S8: return "s8";
        case JITMM_DTYPE_F8_E4M3: return "e4m3";
        case JITMM_DTYPE_F8_E5M2: return "e5m2";
        default: fail(JITMM_STATUS_INTERNAL_ERROR, "sm90 generator: no wgmma input type");
    }
}

// ---------------------------------------------------------------------------------------------------
// Prelude: types, mbarriers, the bulk tensor copy, wgmma fences and the shared-memory descriptor.

void emit_prelude(std::ostringstream& os) {
    os << R"(typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef long long i64;
struct __align__(64) TmaMap { u64 words[16]; };  // CUtensorMap, opaque

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// mbarriers: "full" completes when a stage's bytes have landed, "empty" when every consumer warp is done with it.
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}

// One box of a tensor map into shared memory; completion is counted on the stage's full barrier.
__device__ __forceinline__ void tma_load(u32 dst, const TmaMap* map, u32 bar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
               :: "r"(dst), "l"((u64)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
// The same box into this shared-memory offset of every CTA in ctas (a cluster mask), each CTA's own barrier
// at bar's offset counting the bytes.
__device__ __forceinline__ void tma_load_multicast(u32 dst, const TmaMap* map, u32 bar, int c0, int c1, int c2, u16 ctas) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4, %5}], [%2], %6;\n"
               :: "r"(dst), "l"((u64)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(ctas) : "memory");
}
// Arrival on the barrier at the same offset in CTA `cta` of the cluster (this CTA included).
__device__ __forceinline__ void mbar_arrive_in(u32 bar, u32 cta) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\nmbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n"
               :: "r"(bar), "r"(cta) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// The C tile: shared memory -> global by the copy engine (out-of-bounds parts are not written), tracked as
// bulk groups of the issuing thread.
__device__ __forceinline__ void tma_store(const TmaMap* map, u32 src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
               :: "l"((u64)map), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Ordinary shared-memory stores made visible to the copy engine.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Barrier of one warpgroup (ids 1.. ; 0 is __syncthreads).
__device__ __forceinline__ void warpgroup_sync(int id) { asm volatile("bar.sync %0, 128;\n" :: "r"(id) : "memory"); }
// A handoff between warpgroups: `threads` arrivals complete barrier id; arrive does not wait, sync does.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const TmaMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"((u64)map) : "memory");
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle: start, leading and stride byte offsets in 16-byte units.
__device__ __forceinline__ u64 smem_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}
)";
}

// wgmma.mma_async m64 x BN x KSTEP with both operands from shared memory, accumulating into d.
void emit_wgmma(std::ostringstream& os, const Problem& p, const Sm90GemmPlan& plan, int kstep) {
    const bool integer = p.a_type == JITMM_DTYPE_S8;
    const int nacc = plan.bn / 2;  // accumulators per thread: 64 x BN over 128 threads
    std::ostringstream ins;
    ins << "wgmma.mma_async.sync.aligned.m64n" << plan.bn << "k" << kstep << "." << (integer ? "s32" : "f32") << "."
        << ptx_type(p.a_type) << "." << ptx_type(p.b_type) << " {";
    for (int i = 0; i < nacc; ++i) ins << (i ? ", " : "") << "%" << i;
    std::string tail;
    if (!integer) tail += ", 1, 1";                          // no negation of A or B
    if (dtype_size(p.a_type) == 2)                           // 16-bit types read M/N-major tiles transposed
        tail += std::string(", ") + (plan.a_k_major ? "0" : "1") + ", " + (plan.b_k_major ? "0" : "1");
    ins << "}, %" << nacc << ", %" << nacc + 1;
    const std::string head = ins.str();
    const char* reg = integer ? "r" : "f";
    os << "\n// the tensor-core instruction: " << (p.a_type == JITMM_DTYPE_F32 ? "tf32 (f32 inputs, low mantissa bits ignored)" : ptx_type(p.a_type)) << "\n";
    // scale-d 1: d += A * B (d is zeroed per tile); scale-d 0: d = A * B, d's old values unused (per-block
    // scales start each k-block's product fresh).
    auto emit = [&](const char* name, const char* scale_d, const char* constraint, const char* comment) {
        os << "// " << comment << "\n__device__ __forceinline__ void " << name << "(Acc (&d)[NACC], u64 da, u64 db) {\n";
        os << "  asm volatile(\"" << head << ", " << scale_d << tail << ";\\n\"\n    : ";
        for (int i = 0; i < nacc; ++i)
            os << (i ? ", " : "") << (i && i % 8 == 0 ? "\n      " : "") << "\"" << constraint << reg << "\"(d[" << i << "])";
        os << "\n    : \"l\"(da), \"l\"(db));\n}\n";
    };
    emit("wgmma", "1", "+", "d += A * B");
    if (p.a_scale == ScaleMode::per_block) emit("wgmma_first", "0", "=", "d = A * B");
    // Keeps the compiler from moving reads or writes of the accumulators across the asynchronous wgmma.
    os << "__device__ __forceinline__ void acc_fence(Acc (&d)[NACC]) {\n#pragma unroll\n  for (int i = 0; i < NACC; ++i) asm volatile(\"\" : \"+"
       << reg << "\"(d[i]) :: \"memory\");\n}\n";
}

// The dequantization factor of one element of C (fp8 with scales) as an expression: the product of the A scale
// (one per tensor, or this row's) and the B scale (one per tensor, or this column's), each named by the caller.
std::string scale_product(const Problem& p, const std::string& a_tensor, const std::string& a_row,
                          const std::string& b_tensor, const std::string& b_column) {
    std::string s;
    auto mul = [&](const std::string& f) { s = s.empty() ? f : s + " * " + f; };
    if (p.a_scale == ScaleMode::per_tensor) mul(a_tensor);
    if (p.a_scale == ScaleMode::per_row) mul(a_row);
    if (p.b_scale == ScaleMode::per_tensor) mul(b_tensor);
    if (p.b_scale == ScaleMode::per_column) mul(b_column);
    return s.empty() ? "1.0f" : s;
}

// The consumers' main loop over k-blocks [kb0, kb1) of a work unit, into accs (the consumer's 64-row slices
// of the tile: its own slice when the consumers share a tile, every slice when they alternate tiles).
void emit_main_loop(std::ostringstream& os, const Problem& p, const Sm90GemmPlan& plan) {
    if (p.a_scale != ScaleMode::per_block) {
        os << R"(    // main loop: one commit group per stage; the stage before is released once its group has completed
    int prev = -1;
    for (int kb = kb0; kb < kb1; ++kb) {
      mbar_wait(full_bar + 8 * s, phase);
      const u32 sa = base + s * STAGE_BYTES, sb = sa + A_STAGE;
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < BK / KSTEP; ++ks)
#pragma unroll
        for (int sl = 0; sl < SLICES; ++sl) wgmma(accs[sl], a_desc(sa, )" << (plan.pingpong ? "sl" : "consumer") << R"(, ks), b_desc(sb, ks));
      wg_commit();
      wg_wait<1>();
      if (prev >= 0 && lane == 0) release(empty_bar + 8 * prev);
      prev = s;
      if (++s == STAGES) { s = 0; phase ^= 1u; }
    }
    wg_wait<0>();
#pragma unroll
    for (int sl = 0; sl < SLICES; ++sl) acc_fence(accs[sl]);
    if (prev >= 0 && lane == 0) release(empty_bar + 8 * prev);  // prev < 0: an empty K range

)";
        return;
    }
    // Per-block fp8 scales (a k-block of 128 bytes is one scale block): each k-block's product goes to a
    // product buffer of its own (wgmma with scale-d 0) and is added to acc scaled by sa(row, kb) *
    // sb(column block, kb) once complete. Two buffers alternate so that the next k-block's wgmma runs while
    // this one is scaled (one commit group in flight, as in the unscaled loop); scales are read at issue.
    os << R"(    // main loop with per-block scales: products of k-blocks in part0 / part1 alternately, acc += part * scale
    Acc (&acc)[NACC] = accs[0];  // the consumer's slice (consumers share tiles here)
    const int row_a = m0 + consumer * 64 + warp * 16 + lane / 4;  // rows row_a and row_a + 8 (clamped for loads)
    const float* const sa_row0 = a_scales + (i64)(row_a < M ? row_a : M - 1) * KT;
    const float* const sa_row1 = a_scales + (i64)(row_a + 8 < M ? row_a + 8 : M - 1) * KT;
    const float* const sb_blk = b_scales + (i64)(n0 / 128) * KT;
    Acc part0[NACC], part1[NACC];
    float sc0_lo = 0, sc0_hi = 0, sc1_lo = 0, sc1_hi = 0;  // the scales of the block in part0 / part1
    int s0 = 0, s1 = 0;                                     // and the stages they came from
    // Issues k-block kb into part: waits for its stage, reads its scales, one commit group.
    auto issue = [&](Acc (&part)[NACC], int kb, float& lo, float& hi, int& stage) {
      const float sb_k = __ldg(sb_blk + kb);
      lo = __ldg(sa_row0 + kb) * sb_k;
      hi = __ldg(sa_row1 + kb) * sb_k;
      mbar_wait(full_bar + 8 * s, phase);
      const u32 sa = base + s * STAGE_BYTES, sb = sa + A_STAGE;
      wg_fence();
      wgmma_first(part, a_desc(sa, consumer, 0), b_desc(sb, 0));
#pragma unroll
      for (int ks = 1; ks < BK / KSTEP; ++ks) wgmma(part, a_desc(sa, consumer, ks), b_desc(sb, ks));
      wg_commit();
      stage = s;
      if (++s == STAGES) { s = 0; phase ^= 1u; }
    };
    // Adds a completed product, frees its stage.
    auto retire = [&](Acc (&part)[NACC], float lo, float hi, int stage) {
      acc_fence(part);
      if (lane == 0) release(empty_bar + 8 * stage);
#pragma unroll
      for (int i = 0; i < NACC; ++i) acc[i] += part[i] * ((i & 2) ? hi : lo);  // i & 2: the row + 8 half
    };
    if (kb0 < kb1) issue(part0, kb0, sc0_lo, sc0_hi, s0);  // (an empty K range adds nothing)
    for (int kb = kb0; kb < kb1; kb += 2) {
      if (kb + 1 < kb1) { issue(part1, kb + 1, sc1_lo, sc1_hi, s1); wg_wait<1>(); } else { wg_wait<0>(); }
      retire(part0, sc0_lo, sc0_hi, s0);
      if (kb + 1 >= kb1) break;
      if (kb + 2 < kb1) { issue(part0, kb + 2, sc0_lo, sc0_hi, s0); wg_wait<1>(); } else { wg_wait<0>(); }
      retire(part1, sc1_lo, sc1_hi, s1);
    }
)";
}

// The producer's TMA loads of one operand's tile into a stage (x: "a" or "b"; its rows inside the matrix in
// x_rows where the tile may be partial). K-major: one box of the tile, or the tail map's box for a partial last
// tile; M/N-major: boxes of 64 elements, those past the edge skipped.
struct OperandLoad {
    const char* smem;       // the stage's shared address of this operand ("sa", "sb")
    const char* x;          // "a" or "b": names tma_x, tma_x_tail and x_rows
    const char* tile;       // the tile's rows ("BM", "BN")
    const char* origin;     // its first row ("m0", "n0")
    std::string batch;      // the batch coordinate ("batch", or "0" for a shared operand)
    bool k_major, partial;  // partial: the tile may reach past the matrix
    const char* tail_guard; // a condition before the tail map's load, where a tile may hold no row at all
};

void emit_operand_loads(std::ostringstream& os, const OperandLoad& o) {
    const std::string x = o.x, map = "&tma_" + x, rows = x + "_rows";
    const std::string coords = std::string(", bar, kb * BK, ") + o.origin + ", " + o.batch + ");\n";
    if (o.k_major && !o.partial) {
        os << "        tma_load(" << o.smem << ", " << map << coords;
    } else if (o.k_major) {
        os << "        if (" << rows << " == " << o.tile << ") tma_load(" << o.smem << ", " << map << coords;
        os << "        else " << o.tail_guard << "tma_load(" << o.smem << ", " << map << "_tail" << coords;
    } else {
        os << "#pragma unroll\n        for (int j = 0; j < " << o.tile << " / 64; ++j)\n          "
           << (o.partial ? "if (64 * j < " + rows + ") " : std::string()) << "tma_load(" << o.smem
           << " + j * BK * 128, " << map << ", bar, " << o.origin << " + 64 * j, kb * BK, " << o.batch << ");\n";
    }
}

}  // namespace

GeneratedKernel generate_sm90_gemm(const Problem& p, const Sm90GemmPlan& plan) {
    const int64_t e = dtype_size(p.a_type), ec = dtype_size(p.c_type);
    const int kstep = static_cast<int>(32 / e);  // K per wgmma: 32 bytes of each operand row
    const int64_t tiles_m = ceil_div(p.m, plan.bm), tiles_n = ceil_div(p.n, plan.bn);
    const int cluster = plan.cluster_m;
    const int64_t units_m = ceil_div(tiles_m, cluster);
    // Rows past M: a partial last tile, or the second tile of a CTA pair whose first tile is the last one.
    const bool tail_m = p.m % plan.bm != 0 || tiles_m % cluster != 0, tail_n = p.n % plan.bn != 0;
    const bool fp8 = dtype_is_fp8(p.a_type);

    GeneratedKernel out;
    out.name = "jitmm_sm90_wgmma";
    std::ostringstream os;
    os << "// jitmm " << out.name << " (generator v" << kSm90GeneratorVersion << ")\n// problem: " << describe(p)
       << "\n// plan: " << plan.describe() << "\n";
    emit_prelude(os);
    os << "typedef " << (p.a_type == JITMM_DTYPE_S8 ? "int" : "float") << " Acc;\n";

    os << "\n// ---- shape and tiling (compile-time)\n";
    os << "constexpr int M = " << p.m << ", N = " << p.n << ", K = " << p.k << ";\n";
    os << "constexpr i64 LDC = " << p.ldc * ec << ", STRIDE_C = " << p.stride_c * ec << ";  // bytes\n";
    os << "constexpr int BM = " << plan.bm << ", BN = " << plan.bn << ", BK = " << plan.bk << ", KSTEP = " << kstep
       << ", STAGES = " << plan.stages << ", CONSUMERS = " << plan.consumers << ";\n";
    os << "constexpr int NACC = BN / 2;  // accumulators per consumer thread and 64-row slice (64 x BN over a warpgroup)\n";
    if (plan.pingpong)
        os << "// ping-pong: the consumers take turns at tiles, each computing all SLICES 64-row slices of its tile, so that\n"
              "// one's epilogue runs while the other's main loop keeps the tensor cores busy\n";
    os << "constexpr bool PINGPONG = " << (plan.pingpong ? "true" : "false") << ";\n";
    os << "constexpr int SLICES = " << (plan.pingpong ? plan.bm / 64 : 1)
       << ", RELEASERS = " << (plan.pingpong ? 1 : plan.consumers)
       << " * 4 * " << cluster << ";  // slices per consumer; warps that free a stage\n";
    os << "constexpr int TILES_M = " << tiles_m << ", TILES_N = " << tiles_n << ", KT = " << ceil_div(p.k, plan.bk)
       << ";\n";
    os << "// work units: CLUSTER vertically adjacent tiles (one per CTA of a cluster), walked in groups of GROUP_U rows\n";
    const int64_t tile_units = units_m * tiles_n * p.batch;
    const int64_t split_tiles = plan.split_k > 1 ? plan.split_tiles : 0;
    os << "constexpr int CLUSTER = " << cluster << ", UNITS_M = " << units_m << ", GROUP_U = " << std::max(1, plan.group_m / cluster)
       << ";\n";
    os << "// split K: the last SPLIT_TILES tiles run as SPLIT K ranges each, after the WHOLE tiles that run unsplit\n";
    os << "constexpr int SPLIT = " << plan.split_k << ", SPLIT_TILES = " << split_tiles << ", WHOLE = " << tile_units - split_tiles
       << ", UNITS = " << plan.units(p) << ";\n";
    os << "constexpr i64 BATCH = " << p.batch << ";\n";
    if (plan.split_k > 1)
        os << "constexpr i64 WS_COUNTER_BYTES = " << plan.workspace_counter_bytes(p)
           << ";  // split K: arrival counters (one per tile and consumer), then the partial-sum slots\n";
    os << "constexpr u32 A_STAGE = BM * 128, B_STAGE = BN * 128, STAGE_BYTES = A_STAGE + B_STAGE;  // 128 bytes of K per row\n";
    if (plan.c_tma) {
        os << "// C tiles in shared memory, one per consumer: boxes of 64 rows x 128 bytes (EPB elements), swizzled\n";
        os << "constexpr u32 EPB = " << 128 / ec << ", CN = " << plan.c_cols() << ", C_WG_BYTES = 64 * CN * " << ec
           << ", C_TILE_BYTES = CONSUMERS * C_WG_BYTES;  // CN columns at a time\n";
    } else {
        os << "constexpr u32 C_TILE_BYTES = 0;\n";
    }
    emit_wgmma(os, p, plan, kstep);
    emit_epilogue_helpers(os, p);

    // Descriptors of one k-step. K-major tiles: rows of 128 bytes, 8-row groups 1024 bytes apart, the k-step
    // moves 32 bytes along the row. M/N-major tiles: boxes of 64 elements x BK rows; the k-step moves 16 rows,
    // 8-row groups are 1024 bytes apart and boxes (64-element atoms along M/N) BK * 128 bytes apart.
    os << "\n// ---- shared-memory descriptors of k-step ks (128-byte swizzle)\n";
    os << "__device__ __forceinline__ u64 a_desc(u32 sa, int consumer, int ks) {\n";
    if (plan.a_k_major) os << "  return smem_desc(sa + consumer * 64 * 128 + ks * 32, 16, 1024);\n}\n";
    else os << "  return smem_desc(sa + consumer * BK * 128 + ks * KSTEP * 128, BK * 128, 1024);\n}\n";
    os << "__device__ __forceinline__ u64 b_desc(u32 sb, int ks) {\n";
    if (plan.b_k_major) os << "  return smem_desc(sb + ks * 32, 16, 1024);\n}\n";
    else os << "  return smem_desc(sb + ks * KSTEP * 128, BK * 128, 1024);\n}\n";

    // A consumer warp frees a stage in its own CTA, and with a pair also in the peer (whose producer writes
    // half of this CTA's B tile).
    if (cluster == 1) {
        os << "__device__ __forceinline__ void release(u32 bar) { mbar_arrive(bar); }\n";
    } else {
        os << "__device__ __forceinline__ void release(u32 bar) {\n#pragma unroll\n  for (u32 c = 0; c < CLUSTER; ++c) mbar_arrive_in(bar, c);\n}\n";
    }

    // Tile order: groups of GROUP_M tile rows, column by column inside a group (neighbours share L2 lines).
    os << R"(
// ---- persistent tile order: unit u of this CTA's cluster, rank = this CTA's place in it
__device__ __forceinline__ void tile_coords(int u, int rank, int& m0, int& n0, int& batch) {
  batch = u / (UNITS_M * TILES_N);
  const int r = u % (UNITS_M * TILES_N), per_group = GROUP_U * TILES_N;
  const int first = r / per_group * GROUP_U;
  const int group_rows = UNITS_M - first < GROUP_U ? UNITS_M - first : GROUP_U;
  m0 = ((first + r % per_group % group_rows) * CLUSTER + rank) * BM;
  n0 = r % per_group / group_rows * BN;
}
// unit u: tile (unit of CLUSTER tiles), its K range split and k-blocks [kb0, kb1)
__device__ __forceinline__ void unit_coords(int u, int rank, int& m0, int& n0, int& batch, int& tile, int& split, int& kb0, int& kb1) {
  if (u < WHOLE) {
    tile = u, split = 0, kb0 = 0, kb1 = KT;
  } else {
    const int v = u - WHOLE;
    tile = WHOLE + v / SPLIT, split = v % SPLIT;
    kb0 = split * KT / SPLIT, kb1 = (split + 1) * KT / SPLIT;
  }
  tile_coords(tile, rank, m0, n0, batch);
}
)";

    // ---- the kernel
    const int consumer_regs = plan.consumers == 2 ? 232 : 240;
    os << "\n// ---- the kernel: warpgroup 0 produces (one thread issues TMA), warpgroups 1.." << plan.consumers
       << " consume\n";
    os << "extern \"C\" __global__ void ";
    if (cluster > 1) os << "__cluster_dims__(" << cluster << ", 1, 1) ";
    os << "__launch_bounds__(" << plan.threads() << ", 1) " << out.name
       << "(const __grid_constant__ TmaMap tma_a, const __grid_constant__ TmaMap tma_b, const __grid_constant__ TmaMap tma_c, "
          "const __grid_constant__ TmaMap tma_a_tail, const __grid_constant__ TmaMap tma_b_tail, void* __restrict__ c_ptr, "
          "const void* __restrict__ bias_ptr, const float* __restrict__ a_scales, const float* __restrict__ b_scales, "
          "Acc* __restrict__ ws) {\n";
    os << "  extern __shared__ unsigned char smem_raw[];\n";
    emit_grid_dependency_wait(os);
    os << R"(  // 128-byte swizzle repeats every 1024 bytes: stages start on that boundary.
  const u32 base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const u32 c_tiles = base + STAGES * STAGE_BYTES;  // C_TILE_BYTES (asynchronous C store), a multiple of 1024
  const u32 full_bar = c_tiles + C_TILE_BYTES, empty_bar = full_bar + 8 * STAGES;
  const u32 flags = empty_bar + 8 * STAGES;  // one word per consumer (split K: "this unit adds the partial sums")
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int rank = blockIdx.x % CLUSTER, first_unit = blockIdx.x / CLUSTER, unit_step = gridDim.x / CLUSTER;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar + 8 * s, 1);                          // the producer's expect_tx arrival (+ the bytes)
      mbar_init(empty_bar + 8 * s, RELEASERS);                 // every warp that read the stage (pairs: of both CTAs)
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
)";
    os << (cluster > 1 ? "  cluster_sync();  // the peer's barriers are initialised before anyone signals them\n"
                       : "  __syncthreads();\n");
    os << R"(
  if (wg == 0) {
    // ---- producer: give registers to the consumers; one thread walks the tiles and fills the stages
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0) {
    tma_prefetch_map(&tma_a);
    tma_prefetch_map(&tma_b);
    int s = 0;
    u32 phase = 0;
    for (int u = first_unit; u < UNITS; u += unit_step) {
      int m0, n0, batch, tile, split, kb0, kb1;
      unit_coords(u, rank, m0, n0, batch, tile, split, kb0, kb1);
)";
    // A partial last tile loads only the rows (K-major: through the tail map, whose box is that high) or the
    // 64-element boxes (M/N-major) that lie inside the matrix, and expects only their bytes: the copy engine's
    // out-of-bounds fill is slow. The stage rows it skips keep stale data, which reaches only C rows and
    // columns that are never stored.
    const bool b_tail = tail_n && cluster == 1;
    if (tail_m) os << "      const int a_rows = M - m0 < BM ? (M - m0 > 0 ? M - m0 : 0) : BM;  // rows of the tile inside A\n";
    if (b_tail) os << "      const int b_rows = N - n0 < BN ? N - n0 : BN;  // rows (columns of C) of the tile inside B\n";
    const std::string a_bytes = !tail_m        ? "A_STAGE"
                                : plan.a_k_major ? "a_rows * 128u"
                                                 : "(a_rows + 63) / 64 * (BK * 128u)";
    const std::string b_bytes = !b_tail        ? "B_STAGE"
                                : plan.b_k_major ? "b_rows * 128u"
                                                 : "(b_rows + 63) / 64 * (BK * 128u)";
    os << "      const u32 tx = " << a_bytes << " + " << b_bytes << ";  // bytes a stage receives\n";
    os << R"(      for (int kb = kb0; kb < kb1; ++kb) {
        mbar_wait(empty_bar + 8 * s, phase ^ 1u);       // the consumers (of both CTAs of a pair) released it
        const u32 bar = full_bar + 8 * s, sa = base + s * STAGE_BYTES, sb = sa + A_STAGE;
        mbar_expect_tx(bar, tx);
)";
    // A shared operand (batch stride 0) is read at batch 0 by every batch.
    const std::string a_batch = plan.a_shared ? "0" : "batch", b_batch = plan.b_shared ? "0" : "batch";
    // A's tile may lie wholly past M (the second CTA of a pair on the last tile row): nothing to load then.
    emit_operand_loads(os, {"sa", "a", "BM", "m0", a_batch, plan.a_k_major, tail_m, "if (a_rows > 0) "});
    if (cluster == 1) {
        emit_operand_loads(os, {"sb", "b", "BN", "n0", b_batch, plan.b_k_major, b_tail, ""});
    } else {
        // This CTA's share of B, written into both CTAs of the pair.
        os << "        // B: this CTA loads its half and multicasts it to the pair\n";
        if (plan.b_k_major)
            os << "        tma_load_multicast(sb + rank * (BN / 2) * 128, &tma_b, bar, kb * BK, n0 + rank * (BN / 2), " << b_batch << ", 3);\n";
        else
            os << "#pragma unroll\n        for (int j = rank * (BN / 128); j < (rank + 1) * (BN / 128); ++j)\n"
                  "          tma_load_multicast(sb + j * BK * 128, &tma_b, bar, n0 + 64 * j, kb * BK, " << b_batch << ", 3);\n";
    }
    os << R"(        if (++s == STAGES) { s = 0; phase ^= 1u; }
      }
    }
    }
  } else {

)";
    os << (plan.pingpong ? "  // ---- consumers: warpgroup wg - 1 computes whole tiles, taking turns with the other\n"
                         : "  // ---- consumers: warpgroup wg - 1 owns rows (wg - 1) * 64 .. + 63 of each tile\n");
    os << "  asm volatile(\"setmaxnreg.inc.sync.aligned.u32 " << consumer_regs << ";\\n\");\n";
    os << R"(  const int consumer = wg - 1, warp = tid / 32, lane = tid % 32;
  // this warpgroup's C tile in shared memory (asynchronous C store), as a shared and a generic address
  const u32 c_tile_s = c_tiles + consumer * (C_TILE_BYTES / CONSUMERS);
  char* const c_tile = (char*)smem_raw + (c_tile_s - smem_u32(smem_raw));
  (void)c_tile; (void)tma_c;
  char* const C0 = (char*)c_ptr;
  const char* bias = (const char*)bias_ptr;
  (void)bias; (void)a_scales; (void)b_scales;
  int s = 0;
  u32 phase = 0;
  Acc accs[SLICES][NACC];
  (void)ws;
)";
    if (!plan.pingpong) {
        os << R"(  for (int u = first_unit; u < UNITS; u += unit_step) {
    int m0, n0, batch, tile, split, kb0, kb1;
    unit_coords(u, rank, m0, n0, batch, tile, split, kb0, kb1);
)";
    } else {
        // The stage ring is filled in the CTA's unit order; consumer c takes units c, c + 2, ... of it, so its
        // place in the ring follows from the unit (KT k-blocks each). It waits for its turn before the first
        // stage: the other consumer has then passed every earlier stage, so the stage barriers it waits on are
        // at most one phase ahead (their parity names the phase unambiguously).
        os << R"(  for (int u = first_unit + consumer * unit_step; u < UNITS; u += CONSUMERS * unit_step) {
    int m0, n0, batch, tile, split, kb0, kb1;
    unit_coords(u, rank, m0, n0, batch, tile, split, kb0, kb1);
    const int pos = (u - first_unit) / unit_step * KT;
    s = pos % STAGES;
    phase = (u32)(pos / STAGES) & 1u;
    if (u != first_unit) named_barrier_sync(3 + consumer, 256);  // my turn: the other main loop is done
)";
    }
    os << R"(#pragma unroll
    for (int sl = 0; sl < SLICES; ++sl) {
#pragma unroll
      for (int i = 0; i < NACC; ++i) accs[sl][i] = 0;
      acc_fence(accs[sl]);
    }
)";
    emit_main_loop(os, p, plan);
    if (plan.pingpong)
        os << "    if (u + unit_step < UNITS) named_barrier_arrive(3 + (1 - consumer), 256);  // the other's turn\n";
    if (plan.split_k > 1) {
        // Each K range stores its partial sums in its own slot, laid out as the threads hold them (16-byte
        // chunks, consecutive threads adjacent: coalesced), then counts itself in. The tile's last range to
        // arrive adds every slot in range order (its own read back too: the same sums whoever is last, and
        // the accumulators are free while it reads) and runs the epilogue; the others go on to their next unit.
        const char* vec = p.a_type == JITMM_DTYPE_S8 ? "int4" : "float4";
        os << "    if (u >= WHOLE) {\n      Acc (&acc)[NACC] = accs[0];\n";
        os << "      typedef " << vec << " Acc4;\n";
        os << R"(      const int sk = tile - WHOLE;  // among the split tiles
      Acc4* const slots = (Acc4*)((char*)ws + WS_COUNTER_BYTES) + (i64)sk * SPLIT * CONSUMERS * 32 * NACC + consumer * 32 * NACC;
      constexpr int SLOT = CONSUMERS * 32 * NACC;  // Acc4s between the slots of consecutive ranges
      Acc4* const mine = slots + split * SLOT;
#pragma unroll
      for (int i = 0; i < NACC / 4; ++i) {
        Acc4 q;
        q.x = acc[4 * i]; q.y = acc[4 * i + 1]; q.z = acc[4 * i + 2]; q.w = acc[4 * i + 3];
        __stcg(mine + i * 128 + tid, q);
      }
      __threadfence();
      warpgroup_sync(1 + consumer);
      volatile int* last = (volatile int*)((char*)smem_raw + (flags - smem_u32(smem_raw))) + consumer;
      if (tid == 0) *last = atomicAdd((unsigned*)ws + sk * CONSUMERS + consumer, 1u) == SPLIT - 1;
      warpgroup_sync(1 + consumer);
      if (!*last) continue;
      __threadfence();
      // Every range's piece is loaded before any is added: one L2 round trip per piece, not one per range
      // (added one range after another, each load waited for the add before it: H100, 384x6144x4096 split 4
      // ways, 64 dependent round trips per tile made a quarter-K unit cost most of a whole tile).
#pragma unroll
      for (int i = 0; i < NACC / 4; ++i) {
        Acc4 q[SPLIT];
#pragma unroll
        for (int r = 0; r < SPLIT; ++r) q[r] = __ldcg(slots + r * SLOT + i * 128 + tid);
        Acc s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma unroll
        for (int r = 0; r < SPLIT; ++r) {
          s0 += q[r].x; s1 += q[r].y; s2 += q[r].z; s3 += q[r].w;
        }
        acc[4 * i] = s0; acc[4 * i + 1] = s1; acc[4 * i + 2] = s2; acc[4 * i + 3] = s3;
      }
    }
)";
    }
    os << R"(
    // epilogue, a 64-row slice at a time: thread owns rows r and r + 8 and columns 2q, 2q + 1 of each 8-column slice
    char* C = C0 + (i64)batch * STRIDE_C;
#pragma unroll
    for (int sl = 0; sl < SLICES; ++sl) {
    Acc (&acc)[NACC] = accs[sl];
    const int m_wg = m0 + (PINGPONG ? sl : consumer) * 64;
    const int row0 = m_wg + warp * 16 + lane / 4, col0 = n0 + (lane % 4) * 2;
)";
    const int passes = plan.c_tma ? plan.bn / plan.c_cols() : 1;
    os << "#pragma unroll\n    for (int pass = 0; pass < " << passes << "; ++pass) {  // C columns pass * CN ..\n";
    if (plan.c_tma)
        os << R"(    // the previous store from this warpgroup's C tile has finished reading it
    if (tid == 0) bulk_wait_read();
    warpgroup_sync(1 + consumer);
)";
    // Dequantization scales (fp8): per tensor once, per row per h, per column per slice.
    if (fp8) {
        if (p.a_scale == ScaleMode::per_tensor) os << "    const float sa_all = a_scales[0];\n";
        if (p.b_scale == ScaleMode::per_tensor) os << "    const float sb_all = b_scales[0];\n";
    }
    os << "#pragma unroll\n    for (int h = 0; h < 2; ++h) {\n      const int row = row0 + 8 * h;\n";
    if (tail_m) os << "      if (row >= M) continue;\n";
    if (fp8 && p.a_scale == ScaleMode::per_row) os << "      const float sa_row = a_scales[row];\n";
    os << "#pragma unroll\n      for (int j = pass * (BN / 8 / " << passes << "); j < (pass + 1) * (BN / 8 / " << passes
       << "); ++j) {\n        const int col = col0 + 8 * j;\n";
    if (tail_n) os << "        if (col >= N) continue;\n";
    os << "        Acc v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];\n";
    if (fp8 && p.quantized()) {
        const std::string next_column =
            (tail_n || !plan.c_pairs) ? "(col + 1 < N ? b_scales[col + 1] : 0.0f)" : "b_scales[col + 1]";
        os << "        v0 *= " << scale_product(p, "sa_all", "sa_row", "sb_all", "b_scales[col]") << ";\n";
        os << "        v1 *= " << scale_product(p, "sa_all", "sa_row", "sb_all", next_column) << ";\n";
    }
    os << "        char* c = C + (i64)row * LDC + (i64)col * EC;\n";
    if (plan.c_tma) {
        // Into this warpgroup's shared C tile: element (r, cl) at box cl / EPB, row r, its 16-byte chunk XOR-ed
        // with r % 8 (the 128-byte swizzle the C tensor map names): a warp's 8 rows hit 8 different bank groups.
        os << "        const int r = row - m_wg, cl = col - n0 - pass * CN, byte = (cl % EPB) * EC;\n";
        os << "        c_store2(c_tile + (cl / EPB) * (64 * 128) + r * 128 + ((((byte >> 4) ^ (r & 7))) << 4) + (byte & 15),\n"
              "                 finish(v0, c, row, col, bias), finish(v1, c + EC, row, col + 1, bias));\n";
    } else if (plan.c_pairs) {
        os << "        c_store2(c, finish(v0, c, row, col, bias), finish(v1, c + EC, row, col + 1, bias));\n";
    } else {
        os << "        c_store(c, finish(v0, c, row, col, bias));\n";
        os << "        " << (tail_n ? "if (col + 1 < N) " : "") << "c_store(c + EC, finish(v1, c + EC, row, col + 1, bias));\n";
    }
    os << "      }\n    }\n";
    if (plan.c_tma) {
        os << R"(    // the tile is in shared memory: one thread hands it to the copy engine and the warpgroup moves on
    fence_async_smem();
    warpgroup_sync(1 + consumer);
    if (tid == 0) {
#pragma unroll
      for (int box = 0; box < CN / EPB; ++box) {
        const int n_box = n0 + pass * CN + box * EPB;
        if (n_box < N) tma_store(&tma_c, c_tile_s + box * (64 * 128), n_box, m_wg, batch);
      }
      bulk_commit();
    }
)";
    }
    os << "    }\n    }\n  }\n";  // passes, slices, units
    if (plan.c_tma) os << "  if (tid == 0) bulk_wait_all();  // the last tile's store has read shared memory\n";
    os << "  }\n";
    if (cluster > 1) os << "  cluster_sync();  // no CTA leaves while its peer may still signal its barriers\n";
    os << "}\n";
    if (plan.stage_a) emit_sm90_stage_kernel(os, p, plan, true);
    if (plan.stage_b) emit_sm90_stage_kernel(os, p, plan, false);

    out.source = os.str();
    out.grid[0] = plan.ctas;
    out.block = plan.threads();
    out.smem_bytes = plan.smem_bytes();
    out.waits_for_previous_grid = true;  // emit_grid_dependency_wait at the kernel's start
    return out;
}

}  // namespace jitmm::cuda
