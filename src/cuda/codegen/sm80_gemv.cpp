#include "cuda/codegen/sm80_gemv.hpp"

#include "core/dtype.hpp"

#include <algorithm>
#include <cstdint>

namespace jitmm::cuda {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

// Why shared memory at all: the mma fragment wants lanes 4q..4q+3 on one row, so 16-byte loads straight into
// registers make each warp request cover 64 bytes of 8 rows, and the H100 streamed weights that way at only
// 2.1-2.3 TB/s; a warp request of 512 contiguous bytes of one row reached 2.7-2.9 TB/s. cp.async lets each
// request take whole lines of a row and ldmatrix then hands every lane its fragment.
void emit_sm80_gemv(std::ostringstream& os, const Problem& p, const plan::CudaGemmPlan& plan, const std::string& name,
                    GeneratedKernel& out) {
    const int64_t e = dtype_size(p.a_type), ec = dtype_size(p.c_type);
    const int64_t row_bytes = p.k * e;
    const int seg = plan.gemv_segment;
    const int64_t segs = plan.gemv_k_stages(p);
    const int64_t per_warp = ceil_div(segs, int64_t{plan.gemv_warps} * plan.gemv_ctas_k);  // every CTA's warps
    const int64_t mt = plan::gemv_a_tiles(p.m);
    const int groups = plan.gemv_groups;
    const std::string columns = std::to_string(16 * groups);
    const bool tail_n = p.n % (16 * groups) != 0, tail_k = row_bytes % seg != 0, tail_m = p.m < mt * 8;

    os << "\n// ---- shape and split (compile-time)\n";
    os << "constexpr int M = " << p.m << ", N = " << p.n << ", K = " << p.k << ";\n";
    os << "constexpr i64 BATCH = " << p.batch << ", STRIDE_A = " << p.stride_a * e << ", STRIDE_B = " << p.stride_b * e
       << ", STRIDE_C = " << p.stride_c * ec << ";  // bytes\n";
    os << "constexpr i64 LDA = " << p.lda * e << ", LDB = " << p.ldb * e << ", LDC = " << p.ldc * ec
       << ", ROW_BYTES = " << row_bytes << ";  // bytes\n";
    os << "constexpr int KW = " << plan.gemv_warps << ", STAGES = " << plan.gemv_stages << ", SEG = " << seg
       << ", CH = SEG / 16;  // warps splitting K, ring depth, bytes of K per row and stage, its 16-byte chunks\n";
    os << "constexpr int SEGS = " << segs << ", PER_WARP = " << per_warp << ";  // segments of a row, per warp\n";
    os << "constexpr int MT = " << mt << ", A_ROWS = MT * 8, THREADS = KW * 32;\n";
    os << "constexpr int G = " << groups << ", W_ROWS = 16 * G;  // 16-row weight groups sharing the A rows\n";
    os << "constexpr u32 W_BYTES = W_ROWS * SEG, STAGE = (W_ROWS + A_ROWS) * SEG, RING = STAGES * STAGE;\n";
    os << "constexpr int RED_STRIDE = W_ROWS + 4;  // partial sums of a C row in shared memory (conflict-free writes)\n";

    os << R"(
// Chunk c of stage row r sits at chunk c ^ (r & 7) of its row: the 8 rows one ldmatrix reads at the same chunk
// land in 8 different bank groups (rows are SEG bytes apart, a multiple of 128).
__device__ __forceinline__ u32 chunk_at(u32 rows, int r, int c) { return rows + r * SEG + ((c ^ (r & 7)) << 4); }

// Segment sg (bytes sg * SEG ..) of the W_ROWS weight rows from n0 and of the A rows into the stage at st: one
// warp request covers whole lines of one row.
__device__ __forceinline__ void load_stage(u32 st, const char* A, const char* B, int n0, int sg, int lane) {
  const i64 k0 = (i64)sg * SEG;
#pragma unroll
  for (int i = lane; i < W_ROWS * CH; i += 32) {
    const int r = i / CH, c = i % CH;
    const i64 k = k0 + c * 16;
)";
    // Bytes of this chunk inside the matrix: a row past N or a chunk past K reads nothing (zero-filled, from
    // the matrix's first byte so that the address stays valid); the last chunk of a row may be partial.
    const std::string k_bytes = tail_k ? "(k + 16 <= ROW_BYTES ? 16u : k < ROW_BYTES ? (u32)(ROW_BYTES - k) : 0u)" : "16u";
    if (tail_n) {
        os << "    const u32 bytes = n0 + r < N ? " << k_bytes << " : 0u;\n";
    } else {
        os << "    const u32 bytes = " << k_bytes << ";\n";
    }
    os << "    cp_async16_zfill(chunk_at(st, r, c), " << (tail_n || tail_k ? "bytes == 0 ? B : " : "")
       << "B + (i64)(n0 + r) * LDB + k, bytes);\n  }\n";
    os << R"(#pragma unroll
  for (int i = lane; i < A_ROWS * CH; i += 32) {
    const int r = i / CH, c = i % CH;
    const i64 k = k0 + c * 16;
)";
    if (tail_m) os << "    if (r >= M) continue;  // rows past M stay zero (cleared once)\n";
    os << "    const u32 bytes = " << k_bytes << ";\n";
    os << "    cp_async16_zfill(chunk_at(st + W_BYTES, r, c), " << (tail_k ? "bytes == 0 ? A : " : "")
       << "A + (i64)r * LDA + k, bytes);\n  }\n}\n";

    emit_gemv_kernel_head(os, p, plan, name, columns.c_str());
    os << R"(
  // this warp's segments [seg0, seg0 + count): STAGES - 1 in flight ahead of the one computed
  const int seg0 = kw * PER_WARP;
  const int count = SEGS - seg0 < PER_WARP ? (SEGS - seg0 > 0 ? SEGS - seg0 : 0) : PER_WARP;
  Acc acc[G][MT][4];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[g][i][r] = 0;
#pragma unroll
  for (int j = 0; j < STAGES - 1; ++j) {
    if (j < count) load_stage(ring + j * STAGE, A, B, n0, seg0 + j, lane);
    cp_async_commit();
  }
  const int q = lane >> 3, i8 = lane & 7;  // ldmatrix: lanes 8q..8q+7 address the rows of matrix q
)";
    if (tail_m) {
        // After the first loads are on their way: the rows it writes are never loaded.
        os << R"(  // A rows past M: zero in every stage, never loaded
  for (int i = lane; i < STAGES * (A_ROWS - M) * CH; i += 32) {
    const int s = i / ((A_ROWS - M) * CH), rest = i % ((A_ROWS - M) * CH);
    const u32 at = ring + s * STAGE + W_BYTES + (M + rest / CH) * SEG + rest % CH * 16;
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" :: "r"(at), "r"(0u));
  }
  __syncwarp();
)";
    }
    os << R"(  for (int j = 0; j < count; ++j) {
    if (j + STAGES - 1 < count) load_stage(ring + (j + STAGES - 1) % STAGES * STAGE, A, B, n0, seg0 + j + STAGES - 1, lane);
    cp_async_commit();
    cp_async_wait<STAGES - 1>();  // segment j has landed
    __syncwarp();
    const u32 w_rows = ring + j % STAGES * STAGE, a_rows = w_rows + W_BYTES;
)";
    // 32 bytes of K per mma (k16 bf16/f16, k8 tf32, k32 s8). The weight fragment of group g: matrices (rows
    // 0-7 of the group, first 16 bytes), (rows 8-15, first), (rows 0-7, second), (rows 8-15, second). The A
    // fragments: one 8-row tile and two k-steps per ldmatrix (MT 1), or one k-step and two tiles (MT even);
    // they are read once for all the groups.
    if (mt == 1) {
        os << R"(#pragma unroll
    for (int kp = 0; kp < CH / 4; ++kp) {  // two k-steps of 32 bytes
      u32 x[4];
      ldsm_x4(x, chunk_at(a_rows, i8, 4 * kp + q));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const u32 b[2] = {prep(x[2 * h]), prep(x[2 * h + 1])};
#pragma unroll
        for (int g = 0; g < G; ++g) {
          u32 w[4];
          ldsm_x4(w, chunk_at(w_rows, g * 16 + (q & 1) * 8 + i8, 4 * kp + 2 * h + (q >> 1)));
          const u32 a[4] = {prep(w[0]), prep(w[1]), prep(w[2]), prep(w[3])};
          mma(acc[g][0], a, b);
        }
      }
    }
)";
    } else {
        os << R"(#pragma unroll
    for (int ks = 0; ks < CH / 2; ++ks) {  // one k-step of 32 bytes
      u32 x[MT / 2][4];
#pragma unroll
      for (int tp = 0; tp < MT / 2; ++tp)  // A tiles 2 tp and 2 tp + 1
        ldsm_x4(x[tp], chunk_at(a_rows, (2 * tp + (q >> 1)) * 8 + i8, 2 * ks + (q & 1)));
#pragma unroll
      for (int g = 0; g < G; ++g) {
        u32 w[4];
        ldsm_x4(w, chunk_at(w_rows, g * 16 + (q & 1) * 8 + i8, 2 * ks + (q >> 1)));
        const u32 a[4] = {prep(w[0]), prep(w[1]), prep(w[2]), prep(w[3])};
#pragma unroll
        for (int tp = 0; tp < MT / 2; ++tp) {
          const u32 b0[2] = {prep(x[tp][0]), prep(x[tp][1])}, b1[2] = {prep(x[tp][2]), prep(x[tp][3])};
          mma(acc[g][2 * tp], a, b0);
          mma(acc[g][2 * tp + 1], a, b1);
        }
      }
    }
)";
    }
    os << R"(    __syncwarp();  // the next iteration's loads overwrite this stage
  }
)";
    emit_gemv_warp_partials(os, "G");
    emit_gemv_column_sums(os, plan, columns.c_str(), tail_n);
    set_decode_launch(out, p, 16 * groups, plan.threads(), plan.gemv_ctas_k);
    out.waits_for_previous_grid = true;  // emit_gemv_kernel_head waits
    out.smem_bytes = plan.gemv_smem_bytes(p.m);
}

void emit_gemv_kernel_head(std::ostringstream& os, const Problem& p, const plan::CudaGemmPlan& plan,
                           const std::string& name, const char* columns) {
    os << "\n// ---- the kernel\n";
    os << "extern \"C\" __global__ void __launch_bounds__(" << plan.threads() << ", " << plan.min_blocks_per_sm << ") "
       << name << "(const void* __restrict__ a_ptr, const void* __restrict__ b_ptr, void* __restrict__ c_ptr, "
       << "const void* __restrict__ bias_ptr, void* __restrict__ ws_ptr) {\n";
    os << "  extern __shared__ __align__(128) unsigned char smem_raw[];\n";
    emit_grid_dependency_wait(os);
    os << "  constexpr int CTAS_K = " << plan.gemv_ctas_k << ";  // CTAs splitting K for each column tile\n";
    if (plan.gemv_ctas_k > 1)
        os << "  constexpr i64 WS_COUNTER_BYTES = " << plan.workspace_counter_bytes(p)
           << ";  // the workspace: arrival counters, then the CTAs' partial sums\n";
    os << R"(  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 batch = blockIdx.y + (i64)blockIdx.z * 65535;
)";
    if (p.batch > 65535 && p.batch % 65535 != 0) os << "  if (batch >= BATCH) return;\n";
    os << "  const int tile = blockIdx.x / CTAS_K, n0 = tile * " << columns << ";\n";
    os << "  const int kw = blockIdx.x % CTAS_K * KW + warp;  // this warp's K range, among every CTA's warps\n";
    os << R"(  const char* A = (const char*)a_ptr + batch * STRIDE_A;
  const char* B = (const char*)b_ptr + batch * STRIDE_B;
  char* C = (char*)c_ptr + batch * STRIDE_C;
  const char* bias = (const char*)bias_ptr;
  const u32 ring = smem_u32(smem_raw) + warp * RING;
)";
}

void emit_gemv_warp_partials(std::ostringstream& os, const char* groups) {
    os << "\n  // the warps' K ranges meet in shared memory (every ring drained): red[warp][m][n]\n";
    os << R"(  __syncthreads();
  Acc* red = (Acc*)smem_raw;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
)";
    os << "  for (int wg = 0; wg < " << groups << "; ++wg)\n";
    os << R"(#pragma unroll
    for (int i = 0; i < MT; ++i) {
      Acc* rw = red + (warp * A_ROWS + i * 8 + 2 * t) * RED_STRIDE + wg * 16;
      rw[g] = acc[wg][i][0];
      rw[RED_STRIDE + g] = acc[wg][i][1];
      rw[g + 8] = acc[wg][i][2];
      rw[RED_STRIDE + g + 8] = acc[wg][i][3];
    }
  __syncthreads();
)";
}

void emit_gemv_column_sums(std::ostringstream& os, const plan::CudaGemmPlan& plan, const char* columns, bool tail_n) {
    const std::string each = std::string("  for (int i = threadIdx.x; i < M * ") + columns + "; i += THREADS) {\n" +
                             "    const int m = i / " + columns + ", nl = i % " + columns + ", n = n0 + nl;\n" +
                             (tail_n ? "    if (n >= N) continue;\n" : "");
    const std::string warp_sum = R"(    Acc s = 0;
#pragma unroll
    for (int w = 0; w < KW; ++w) s += red[(w * A_ROWS + m) * RED_STRIDE + nl];
)";
    if (plan.gemv_ctas_k > 1) {
        // Each CTA of the tile writes its sums to its own slot; the one that arrives last (the counter, zeroed
        // before the launch) adds the slots in CTA order, whichever came last: the result does not depend on
        // the arrival order.
        os << "\n  // K split over CTAS_K CTAs: this CTA's sums into its slot, the last CTA to arrive adds the slots\n";
        os << "  constexpr int TILES = (N + " << columns << " - 1) / " << columns << ", SLOT = M * " << columns << ";\n";
        os << R"(  const int ctile = (int)batch * TILES + tile;  // its counter
  Acc* const slots = (Acc*)((char*)ws_ptr + WS_COUNTER_BYTES) + (i64)ctile * CTAS_K * SLOT;
)";
        os << each << warp_sum << "    slots[blockIdx.x % CTAS_K * SLOT + i] = s;\n  }\n";
        os << R"(  __shared__ int arrived_last;
  __threadfence();  // the slot is visible before the count says so
  __syncthreads();
  if (threadIdx.x == 0) arrived_last = atomicAdd((unsigned*)ws_ptr + ctile, 1u) == CTAS_K - 1;
  __syncthreads();
  if (!arrived_last) return;
  __threadfence();

  // epilogue: consecutive threads write consecutive columns of a row of C; CTAs summed in order
)";
        os << each << R"(    Acc s = 0;
#pragma unroll 8
    for (int r = 0; r < CTAS_K; ++r) s += __ldcg(slots + r * SLOT + i);
    char* c = C + (i64)m * LDC + (i64)n * EC;
    c_store(c, finish(s, c, m, n, bias));
  }
}
)";
        return;
    }
    os << "\n  // epilogue: consecutive threads write consecutive columns of a row of C; warps summed in order\n";
    os << each << warp_sum << R"(    char* c = C + (i64)m * LDC + (i64)n * EC;
    c_store(c, finish(s, c, m, n, bias));
  }
}
)";
}

void set_decode_launch(GeneratedKernel& out, const Problem& p, int64_t columns, int threads, int ctas_k) {
    out.grid[0] = ceil_div(p.n, columns) * ctas_k;
    out.grid[1] = std::min<int64_t>(p.batch, 65535);
    out.grid[2] = ceil_div(p.batch, 65535);
    out.block = threads;
}

}  // namespace jitmm::cuda
