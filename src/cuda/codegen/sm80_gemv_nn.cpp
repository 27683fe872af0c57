#include "cuda/codegen/sm80_gemv.hpp"

#include "core/dtype.hpp"

#include <algorithm>
#include <cstdint>

namespace jitmm::cuda {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

// B stored K x N (16-bit types): a CTA owns 64 columns of C, so that each k-row of its B block is one 128-byte
// line; its warps split K into contiguous ranges and stream 16 k-rows a stage. The probe on the H100 read
// 4096 x 4096 and 4096 x 11008 bf16 this way at 2.4 and 2.7-2.8 TB/s with one CTA per 64 columns (64-172 CTAs),
// no K split across CTAs needed. ldmatrix.trans turns the k-rows into the mma's 16 x 16 (columns x k) fragment.
void emit_sm80_gemv_n_major(std::ostringstream& os, const Problem& p, const plan::CudaGemmPlan& plan,
                            const std::string& name, GeneratedKernel& out) {
    const int64_t e = dtype_size(p.a_type), ec = dtype_size(p.c_type);
    constexpr int kRowsPerStage = 16, kColumns = 64;
    const int64_t steps = plan.gemv_k_stages(p);  // of kRowsPerStage k-rows
    const int64_t per_warp = ceil_div(steps, int64_t{plan.gemv_warps} * plan.gemv_ctas_k);  // every CTA's warps
    const int64_t mt = plan::gemv_a_tiles(p.m);
    const bool tail_n = p.n % kColumns != 0, tail_k = p.k % kRowsPerStage != 0, tail_m = p.m < mt * 8;

    os << "\n// ---- shape and split (compile-time)\n";
    os << "constexpr int M = " << p.m << ", N = " << p.n << ", K = " << p.k << ";\n";
    os << "constexpr i64 BATCH = " << p.batch << ", STRIDE_A = " << p.stride_a * e << ", STRIDE_B = " << p.stride_b * e
       << ", STRIDE_C = " << p.stride_c * ec << ";  // bytes\n";
    os << "constexpr i64 LDA = " << p.lda * e << ", LDB = " << p.ldb * e << ", LDC = " << p.ldc * ec
       << ", ROW_BYTES = " << p.n * e << ";  // bytes (ROW_BYTES: a row of B)\n";
    os << "constexpr int KW = " << plan.gemv_warps << ", STAGES = " << plan.gemv_stages
       << ", SK = " << kRowsPerStage << ", NB = " << kColumns
       << ";  // warps splitting K, ring depth, k-rows a stage, columns a CTA\n";
    os << "constexpr int STEPS = " << steps << ", PER_WARP = " << per_warp << ";  // stages of K, per warp\n";
    os << "constexpr int MT = " << mt << ", A_ROWS = MT * 8, THREADS = KW * 32;\n";
    os << "constexpr u32 W_BYTES = SK * NB * 2, A_ROW = SK * 2, STAGE = W_BYTES + A_ROWS * A_ROW, RING = STAGES * STAGE;\n";
    os << "constexpr int RED_STRIDE = NB + 4;  // partial sums of a C row in shared memory\n";

    os << R"(
// Chunk c (8 columns) of k-row r at chunk c ^ (r & 7) of its 128-byte row: the 8 k-rows one ldmatrix.trans
// reads at the same columns land in 8 different bank groups.
__device__ __forceinline__ u32 w_chunk(u32 w_rows, int r, int c) { return w_rows + r * (NB * 2) + ((c ^ (r & 7)) << 4); }

// Stage sg (k-rows sg * SK ..) of the CTA's 64 columns of B and of the A rows into st: a warp request covers
// whole lines of 4 k-rows.
__device__ __forceinline__ void load_stage(u32 st, const char* A, const char* B, int n0, int sg, int lane) {
  const int k0 = sg * SK;
#pragma unroll
  for (int i = lane; i < SK * 8; i += 32) {
    const int r = i / 8, c = i % 8;
    const i64 col = (i64)(n0 + c * 8) * 2;  // byte offset in the row
)";
    // Bytes of the chunk inside B: k-rows past K and columns past N read nothing (zero-filled, from B's first
    // byte so that the address stays valid); the last chunk of a row may be partial.
    std::string bytes = "16u";
    if (tail_n) bytes = "(col + 16 <= ROW_BYTES ? 16u : col < ROW_BYTES ? (u32)(ROW_BYTES - col) : 0u)";
    if (tail_k) bytes = "(k0 + r < K ? " + bytes + " : 0u)";
    os << "    const u32 bytes = " << bytes << ";\n";
    os << "    cp_async16_zfill(w_chunk(st, r, c), " << (tail_n || tail_k ? "bytes == 0 ? B : " : "")
       << "B + (i64)(k0 + r) * LDB + col, bytes);\n  }\n";
    os << R"(#pragma unroll
  for (int i = lane; i < A_ROWS * 2; i += 32) {
    const int r = i / 2, c = i % 2;
)";
    if (tail_m) os << "    if (r >= M) continue;  // rows past M stay zero (cleared once)\n";
    // A's row r, k-columns k0 + 8c .. + 7: whole, partial (the K tail) or nothing.
    if (tail_k)
        os << "    const int kk = k0 + c * 8;\n    const u32 bytes = kk + 8 <= K ? 16u : kk < K ? (u32)((K - kk) * 2) : 0u;\n"
           << "    cp_async16_zfill(st + W_BYTES + r * A_ROW + c * 16, bytes == 0 ? A : A + (i64)r * LDA + (i64)kk * 2, bytes);\n";
    else
        os << "    cp_async16_zfill(st + W_BYTES + r * A_ROW + c * 16, A + (i64)r * LDA + (i64)(k0 + c * 8) * 2, 16u);\n";
    os << "  }\n}\n";

    emit_gemv_kernel_head(os, p, plan, name, "NB");
    os << R"(
  // this warp's stages [sg0, sg0 + count): STAGES - 1 in flight ahead of the one computed
  const int sg0 = kw * PER_WARP;
  const int count = STEPS - sg0 < PER_WARP ? (STEPS - sg0 > 0 ? STEPS - sg0 : 0) : PER_WARP;
  Acc acc[4][MT][4];  // 16-column tile x 8-row tile of A
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[nt][i][r] = 0;
#pragma unroll
  for (int j = 0; j < STAGES - 1; ++j) {
    if (j < count) load_stage(ring + j * STAGE, A, B, n0, sg0 + j, lane);
    cp_async_commit();
  }
  const int q = lane >> 3, i8 = lane & 7;  // ldmatrix: lanes 8q..8q+7 address the rows of matrix q
)";
    if (tail_m)
        os << R"(  // A rows past M: zero in every stage, never loaded
  for (int i = lane; i < STAGES * (A_ROWS - M) * 2; i += 32) {
    const int s = i / ((A_ROWS - M) * 2), rest = i % ((A_ROWS - M) * 2);
    const u32 at = ring + s * STAGE + W_BYTES + (M + rest / 2) * A_ROW + rest % 2 * 16;
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" :: "r"(at), "r"(0u));
  }
  __syncwarp();
)";
    // One k-step of 16 per stage. The weight fragment (16 columns x 16 k) of column tile nt: ldmatrix.trans of
    // matrices (k 0-7, columns 0-7), (k 0-7, columns 8-15), (k 8-15, columns 0-7), (k 8-15, columns 8-15).
    // The A fragments: rows of A, the stage's two 16-byte chunks of k (two 8-row tiles per ldmatrix for MT 2).
    os << R"(  for (int j = 0; j < count; ++j) {
    if (j + STAGES - 1 < count) load_stage(ring + (j + STAGES - 1) % STAGES * STAGE, A, B, n0, sg0 + j + STAGES - 1, lane);
    cp_async_commit();
    cp_async_wait<STAGES - 1>();  // stage j has landed
    __syncwarp();
    const u32 w_rows = ring + j % STAGES * STAGE, a_rows = w_rows + W_BYTES;
    u32 x[4];
    ldsm_x4(x, a_rows + ()" << (mt == 1 ? "i8" : "(q >> 1) * 8 + i8") << R"() * A_ROW + (q & 1) * 16);
    const u32 b0[2] = {x[0], x[1]}, b1[2] = {x[2], x[3]};
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      u32 w[4];
      ldsm_x4_t(w, w_chunk(w_rows, (q >> 1) * 8 + i8, nt * 2 + (q & 1)));
      mma(acc[nt][0], w, b0);
)";
    if (mt == 2) os << "      mma(acc[nt][1], w, b1);\n";
    else os << "      (void)b1;\n";
    os << R"(    }
    __syncwarp();  // the next iteration's loads overwrite this stage
  }
)";
    emit_gemv_warp_partials(os, "4");
    emit_gemv_column_sums(os, plan, "NB", tail_n);
    set_decode_launch(out, p, kColumns, plan.threads(), plan.gemv_ctas_k);
    out.waits_for_previous_grid = true;  // emit_gemv_kernel_head waits
    out.smem_bytes = std::max<int64_t>(plan.gemv_smem_bytes(p.m), int64_t{plan.gemv_warps} * mt * 8 * (kColumns + 4) * 4);
}

}  // namespace jitmm::cuda
