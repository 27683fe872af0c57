#include "cuda/codegen/sm80_mma.hpp"

#include "cuda/codegen/epilogue.hpp"
#include "cuda/codegen/sm80_gemv.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>

namespace jitmm::cuda {
namespace {

using plan::CudaGemmPlan;
using plan::CudaKernelFamily;
using plan::OperandPath;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int log2_exact(int64_t v) {
    int s = 0;
    while ((int64_t{1} << s) < v) ++s;
    return s;
}

const char* elem_type(int64_t bytes) { return bytes == 1 ? "u8" : bytes == 2 ? "u16" : "u32"; }

// Element loads a thread may hold in registers for the next k-tile (both operands): a thin tile's 48 fit
// beside its accumulators; a large tile's (the misaligned-pointer fallback: 64 for 128 x 128) would spill.
constexpr int64_t kMaxElementRegisters = 48;

// ---------------------------------------------------------------------------------------------------
// Prelude: types and the PTX wrappers every kernel uses. No headers: NVRTC's builtins cover threadIdx,
// __syncthreads, __shfl_xor_sync, uint4 and the math functions.

void emit_prelude(std::ostringstream& os, jitmm_dtype in) {
    os << R"(typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef long long i64;

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(u32 dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
}
// Reads `bytes` (0..16) and zero-fills the rest of the 16-byte chunk: the tails of M, N and K.
__device__ __forceinline__ void cp_async16_zfill(u32 dst, const void* src, u32 bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
__device__ __forceinline__ void ldsm_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ uint4 ldg16(const void* p) {
  uint4 v;
  asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
// Streamed once (the weights of a decode GEMM): keep them out of L1.
__device__ __forceinline__ uint4 ldg16_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 zero4() { uint4 v; v.x = v.y = v.z = v.w = 0u; return v; }
__device__ __forceinline__ u32 word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
)";

    // One element as raw bits, and a 16-byte vector that is only partly inside the matrix.
    const int64_t e = dtype_size(in);
    os << "constexpr int E = " << e << ";  // input element bytes\n";
    os << "__device__ __forceinline__ u32 ld_elem(const char* p) { return *(const " << elem_type(e) << "*)p; }\n";
    os << R"(__device__ __forceinline__ uint4 ld_partial(const char* p, int valid) {
  u32 w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int j = 0; j < 16 / E; ++j)
    if (j < valid) w[j * E / 4] |= ld_elem(p + j * E) << (j * E % 4 * 8);
  uint4 v; v.x = w[0]; v.y = w[1]; v.z = w[2]; v.w = w[3];
  return v;
}
__device__ __forceinline__ u32 elem_of(const uint4& v, int j) { return E == 4 ? word(v, j) : E == 2 ? (word(v, j >> 1) >> ((j & 1) * 16)) & 0xffffu : (word(v, j >> 2) >> ((j & 3) * 8)) & 0xffu; }
)";

    // The tensor-core instruction for the input type; fragments are always 4 (A) and 2 (B) 32-bit registers.
    switch (in) {
        case JITMM_DTYPE_F16:
        case JITMM_DTYPE_BF16: {
            const char* t = in == JITMM_DTYPE_F16 ? "f16" : "bf16";
            os << "typedef float Acc;\nconstexpr int KSTEP = 16;  // K per mma\n"
               << "__device__ __forceinline__ u32 prep(u32 x) { return x; }\n"
               << "__device__ __forceinline__ void mma(Acc (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {\n"
               << "  asm(\"mma.sync.aligned.m16n8k16.row.col.f32." << t << "." << t << ".f32 "
               << "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
               << "      : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
               << "      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n}\n";
            break;
        }
        case JITMM_DTYPE_F32:
            // f32 bits rounded to tf32 (round to nearest, ties away) before the tensor core sees them.
            os << "typedef float Acc;\nconstexpr int KSTEP = 8;  // K per mma\n"
               << "__device__ __forceinline__ u32 prep(u32 x) {\n"
               << "  u32 r; asm(\"cvt.rna.tf32.f32 %0, %1;\\n\" : \"=r\"(r) : \"f\"(__uint_as_float(x))); return r;\n}\n"
               << "__device__ __forceinline__ void mma(Acc (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {\n"
               << "  asm(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               << "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
               << "      : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
               << "      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n}\n";
            break;
        case JITMM_DTYPE_S8:
            os << "typedef int Acc;\nconstexpr int KSTEP = 32;  // K per mma\n"
               << "__device__ __forceinline__ u32 prep(u32 x) { return x; }\n"
               << "__device__ __forceinline__ void mma(Acc (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {\n"
               << "  asm(\"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
               << "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
               << "      : \"+r\"(d[0]), \"+r\"(d[1]), \"+r\"(d[2]), \"+r\"(d[3])\n"
               << "      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n}\n";
            break;
        default: fail(JITMM_STATUS_INTERNAL_ERROR, "sm80 generator: no mma for this input type");
    }
}

// ---------------------------------------------------------------------------------------------------
// Tiled family.

struct Operand {
    char tag;             // 'a' or 'b'
    OperandPath path;
    bool k_major;         // K contiguous in global memory (A not transposed, B transposed)
    int tile;             // BM or BN
    int64_t extent;       // M or N
    int64_t ld_bytes;
    bool smem_k_major() const { return k_major || path != OperandPath::cp_async; }
    std::string up() const { return std::string(1, static_cast<char>(tag - 'a' + 'A')); }
};

// Constants and the swizzle of one operand's shared tile. Rows are 16-byte chunks XOR-ed with a few row
// bits so that the 8 rows an ldmatrix (or a cp.async phase) touches fall into 8 different bank groups.
void emit_operand_layout(std::ostringstream& os, const Operand& o, int bk, int64_t e) {
    const std::string U = o.up();
    const int rows = o.smem_k_major() ? o.tile : bk;
    const int64_t row_bytes = o.smem_k_major() ? bk * e : o.tile * e;
    const int64_t cpr = row_bytes / 16;
    const int shift = cpr >= 8 ? 0 : log2_exact(8 / cpr);
    const int64_t mask = std::min<int64_t>(cpr, 8) - 1;
    os << "\n// ---- " << U << " tile in shared memory: " << rows << " rows x " << row_bytes << " bytes ("
       << (o.smem_k_major() ? "K" : (o.tag == 'a' ? "M" : "N")) << " contiguous), swizzled\n";
    os << "constexpr int " << U << "_ROW_BYTES = " << row_bytes << ", " << U << "_CPR = " << cpr << ", " << U
       << "_STAGE_BYTES = " << rows * row_bytes << ";\n";
    os << "constexpr i64 " << U << "_LD = " << o.ld_bytes << ";  // bytes between rows in global memory\n";
    os << "constexpr int " << U << "_EXTENT = " << o.extent << ";\n";
    os << "__device__ __forceinline__ u32 " << o.tag << "_swz(int r, int ch) { return r * " << U
       << "_ROW_BYTES + ((ch ^ ((r >> " << shift << ") & " << mask << ")) << 4); }\n";
}

// The global -> shared copy of one k-tile of one operand.
void emit_operand_loader(std::ostringstream& os, const Operand& o, const Problem& p, const CudaGemmPlan& plan,
                         int64_t e, bool through_registers) {
    const std::string U = o.up();
    const bool tail_outer = o.extent % o.tile != 0;
    const bool tail_k = p.k % plan.bk != 0;
    const int threads = plan.threads();
    const char* outer = o.tag == 'a' ? "m" : "n";

    if (o.path == OperandPath::cp_async) {
        const int rows = o.smem_k_major() ? o.tile : plan.bk;
        const int64_t cpr = (o.smem_k_major() ? plan.bk * e : o.tile * e) / 16;
        const int64_t chunks = rows * cpr;
        const int64_t iters = ceil_div(chunks, threads);
        // Without tails, with every thread moving the same number of chunks and a swizzle that repeats every
        // THREADS / CPR rows, a thread's i-th chunk is its first one moved by a constant number of rows: one
        // address pair per thread, constant offsets (immediates in the instructions) for the rest.
        const bool row_tail = o.smem_k_major() ? tail_outer : tail_k;
        const bool chunk_tail = o.smem_k_major() ? tail_k : tail_outer;
        const int cpr_i = static_cast<int>(cpr);
        const int row_step = threads / cpr_i;
        const int shift = cpr >= 8 ? 0 : log2_exact(8 / cpr);
        const int mask = static_cast<int>(std::min<int64_t>(cpr, 8)) - 1;
        if (!row_tail && !chunk_tail && threads % cpr_i == 0 && chunks % threads == 0 &&
            ((row_step >> shift) & mask) == 0 && row_step % (1 << shift) == 0) {
            os << "// cp.async: " << chunks << " chunks of 16 bytes, " << iters << " per thread, " << row_step
               << " rows apart\n";
            os << "__device__ __forceinline__ void " << o.tag << "_load(u32 s, const char* g, int o0, int k0) {\n";
            os << "  const int r = threadIdx.x / " << U << "_CPR, ch = threadIdx.x % " << U << "_CPR;\n";
            if (o.smem_k_major())
                os << "  const char* src = g + (i64)(o0 + r) * " << U << "_LD + (i64)k0 * E + ch * 16;  // row: " << outer
                   << ", chunk: k\n";
            else
                os << "  const char* src = g + (i64)(k0 + r) * " << U << "_LD + (i64)o0 * E + ch * 16;  // row: k, chunk: "
                   << outer << "\n";
            os << "  const u32 dst = s + " << o.tag << "_swz(r, ch);\n";
            os << "#pragma unroll\n  for (int i = 0; i < " << iters << "; ++i)\n";
            os << "    cp_async16(dst + i * " << row_step << " * " << U << "_ROW_BYTES, src + i * (i64)" << row_step * o.ld_bytes
               << ");\n}\n";
            return;
        }
        os << "// cp.async: " << chunks << " chunks of 16 bytes, " << iters << " per thread\n";
        os << "__device__ __forceinline__ void " << o.tag << "_load(u32 s, const char* g, int o0, int k0) {\n";
        os << "#pragma unroll\n  for (int i = 0; i < " << iters << "; ++i) {\n";
        os << "    const int c = threadIdx.x + i * THREADS;\n";
        if (chunks % threads != 0) os << "    if (c >= " << chunks << ") break;\n";
        os << "    const int r = c / " << U << "_CPR, ch = c % " << U << "_CPR;\n";
        if (o.smem_k_major()) {
            os << "    const char* src = g + (i64)(o0 + r) * " << U << "_LD + (i64)k0 * E + ch * 16;  // row: "
               << outer << ", chunk: k\n";
        } else {
            os << "    const char* src = g + (i64)(k0 + r) * " << U << "_LD + (i64)o0 * E + ch * 16;  // row: k, chunk: "
               << outer << "\n";
        }
        // Tails: rows past the matrix read nothing; a chunk straddling the end reads its valid bytes.
        if (!row_tail && !chunk_tail) {
            os << "    cp_async16(s + " << o.tag << "_swz(r, ch), src);\n";
        } else {
            os << "    int bytes = 16;\n";
            if (row_tail) {
                if (o.smem_k_major()) os << "    if (o0 + r >= " << U << "_EXTENT) bytes = 0;\n";
                else os << "    if (k0 + r >= K) bytes = 0;\n";
            }
            if (chunk_tail) {
                if (o.smem_k_major()) os << "    const int rem = (K - k0) * E - ch * 16;\n";
                else os << "    const int rem = (" << U << "_EXTENT - o0) * E - ch * 16;\n";
                os << "    if (rem < bytes) bytes = rem > 0 ? rem : 0;\n";
            }
            os << "    cp_async16_zfill(s + " << o.tag << "_swz(r, ch), bytes > 0 ? src : g, (u32)bytes);\n";
        }
        os << "  }\n}\n";
        return;
    }

    // The other paths store K-major, whatever the global orientation. A unit is v elements contiguous in
    // global memory: 16 bytes (vector) or one element (scalar).
    const bool vec = o.path == OperandPath::vector;
    const int64_t v = vec ? 16 / e : 1;
    const int64_t units = static_cast<int64_t>(o.tile) * plan.bk / v;
    const int64_t iters = ceil_div(units, threads);
    const std::string guard = units % threads != 0 ? "    if (u >= " + std::to_string(units) + ") break;\n" : "";
    // Element copies unroll by 4 only: fully unrolled, ptxas hoists every load and runs out of registers.
    const std::string loop = std::string(through_registers ? "#pragma unroll\n" : "#pragma unroll 4\n") + "  for (int i = 0; i < " +
                             std::to_string(iters) + "; ++i) {\n    const int u = threadIdx.x + i * THREADS;\n" + guard;

    // M/N-major units: which k row and which unit along M/N. A warp takes 8 k rows x 4 units when the tile
    // allows (64 contiguous bytes per row in global memory; the transposed shared stores of one warp then
    // spread over the banks instead of hitting one column of the tile), else 32 units of one k row.
    std::string mn_k = "u / " + std::to_string(o.tile / v), mn_o = "u % " + std::to_string(o.tile / v);
    if (vec && plan.bk % 8 == 0 && (o.tile / v) % 4 == 0) {
        mn_k = "((u & 7) + 8 * ((u >> 5) % " + std::to_string(plan.bk / 8) + "))";
        mn_o = "(((u >> 3) & 3) + 4 * ((u >> 5) / " + std::to_string(plan.bk / 8) + "))";
    }

    // Where unit u comes from, and whether (how much of) it lies inside the matrix.
    std::string where, ok, valid;
    if (o.k_major) {
        where = "    const int o = o0 + u / " + std::to_string(plan.bk / v) + ", k = k0 + u % " +
                std::to_string(plan.bk / v) + " * " + std::to_string(v) + ";\n";
        ok = tail_outer ? "o < " + U + "_EXTENT" : "true";
        valid = "K - k";
    } else {
        where = "    const int k = k0 + " + mn_k + ", o = o0 + " + mn_o + " * " + std::to_string(v) + ";\n";
        ok = tail_k ? "k < K" : "true";
        valid = U + "_EXTENT - o";
    }
    where += std::string("    const char* src = g + (i64)") + (o.k_major ? "o" : "k") + " * " + U + "_LD + (i64)" +
             (o.k_major ? "k" : "o") + " * E;\n";
    const bool unit_tail = o.k_major ? tail_k : tail_outer;
    std::string load;
    if (vec) {
        if (!unit_tail && ok == "true") load = "ldg16(src)";
        else
            load = "!(" + ok + ") || (" + (unit_tail ? valid : std::to_string(v)) + ") <= 0 ? zero4() : (" +
                   (unit_tail ? valid : std::to_string(v)) + ") >= " + std::to_string(v) +
                   " ? ldg16(src) : ld_partial(src, " + (unit_tail ? valid : std::to_string(v)) + ")";
    } else {
        std::string cond = ok == "true" ? "" : ok;
        if (unit_tail) cond += (cond.empty() ? "" : " && ") + std::string("(") + valid + ") > 0";
        load = cond.empty() ? "ld_elem(src)" : "(" + cond + ") ? ld_elem(src) : 0u";
    }

    // Where unit u goes in the K-major shared tile (transposed on the way when global memory is M/N-major).
    std::string place;
    const std::string et = elem_type(e);
    if (o.k_major) {
        place = "    const int row = u / " + std::to_string(plan.bk / v) + ", kb = u % " + std::to_string(plan.bk / v) +
                " * " + std::to_string(v * e) + ";\n";
        place += vec ? "    *(uint4*)(s + " + std::string(1, o.tag) + "_swz(row, kb >> 4)) = val;\n"
                     : "    *(" + et + "*)(s + " + std::string(1, o.tag) + "_swz(row, kb >> 4) + (kb & 15)) = (" + et +
                           ")val;\n";
    } else {
        place = "    const int kb = " + mn_k + " * E, row0 = " + mn_o + " * " + std::to_string(v) + ";\n";
        place += vec ? "#pragma unroll\n    for (int j = 0; j < " + std::to_string(v) + "; ++j)\n      *(" + et +
                           "*)(s + " + std::string(1, o.tag) + "_swz(row0 + j, kb >> 4) + (kb & 15)) = (" + et +
                           ")elem_of(val, j);\n"
                     : "    *(" + et + "*)(s + " + std::string(1, o.tag) + "_swz(row0, kb >> 4) + (kb & 15)) = (" + et +
                           ")val;\n";
    }

    if (through_registers) {
        // Loads into registers early (fetch), stored late (store): the load latency hides behind the mma, and
        // every load of the tile is in flight at once.
        const char* unit = vec ? "uint4" : "u32";
        os << "// " << (vec ? "16-byte" : "element") << " loads through registers: " << units << " units, " << iters
           << " per thread\n";
        os << "constexpr int " << U << "_IT = " << iters << ";\n";
        os << "__device__ __forceinline__ void " << o.tag << "_fetch(" << unit << " (&r)[" << U
           << "_IT], const char* g, int o0, int k0) {\n"
           << loop << where << "    r[i] = " << load << ";\n  }\n}\n";
        os << "__device__ __forceinline__ void " << o.tag << "_store(unsigned char* s, const " << unit << " (&r)[" << U
           << "_IT]) {\n"
           << loop << "    const " << unit << " val = r[i];\n" << place << "  }\n}\n";
    } else {
        // Element loads straight into shared memory: the slow path for misaligned operands, no registers held.
        os << "// element copies: " << units << " elements, " << iters << " per thread\n";
        os << "__device__ __forceinline__ void " << o.tag << "_copy(unsigned char* s, const char* g, int o0, int k0) {\n"
           << loop << where << "    const u32 val = " << load << ";\n" << place << "  }\n}\n";
    }
}

void emit_tiled(std::ostringstream& os, const Problem& p, const CudaGemmPlan& plan, const std::string& name,
                GeneratedKernel& out) {
    const int64_t e = dtype_size(p.a_type);
    const int64_t ec = dtype_size(p.c_type);
    const int threads = plan.threads();
    const int wm = plan.bm / plan.warps_m, wn = plan.bn / plan.warps_n;
    const int64_t tiles_m = ceil_div(p.m, plan.bm), tiles_n = ceil_div(p.n, plan.bn);
    const Operand a{'a', plan.a_path, !p.trans_a, plan.bm, p.m, p.lda * e};
    const Operand b{'b', plan.b_path, p.trans_b, plan.bn, p.n, p.ldb * e};

    os << "\n// ---- shape and tiling (compile-time)\n";
    os << "constexpr int M = " << p.m << ", N = " << p.n << ", K = " << p.k << ";\n";
    os << "constexpr i64 BATCH = " << p.batch << ", STRIDE_A = " << p.stride_a * e << ", STRIDE_B = " << p.stride_b * e
       << ", STRIDE_C = " << p.stride_c * ec << ";  // bytes\n";
    os << "constexpr i64 LDC = " << p.ldc * ec << ";  // bytes\n";
    os << "constexpr int BM = " << plan.bm << ", BN = " << plan.bn << ", BK = " << plan.bk
       << ", STAGES = " << plan.stages << ", THREADS = " << threads << ";\n";
    os << "constexpr int WARPS_M = " << plan.warps_m << ", WM = " << wm << ", WN = " << wn << ", MI = " << wm / 16
       << ", NI = " << wn / 8 << ";  // warp tile, in 16x8 mma tiles\n";
    os << "constexpr int KT = " << ceil_div(p.k, plan.bk) << ", TILES_M = " << tiles_m << ", TILES_N = " << tiles_n
       << ", GROUP_M = " << plan.group_m << ";\n";

    // Operands that are not copied by cp.async go through registers (the next k-tile's loads issued before
    // this one's mma): always for 16-byte vectors; for element loads while their registers stay few (thin
    // tiles: 17 x 1023 x 511 bf16 with odd leading dimensions took 3 us a k-tile on an H100 when each thread's
    // 48 element loads went out four at a time, each group waiting for the last).
    const bool a_vec = a.path == OperandPath::vector, b_vec = b.path == OperandPath::vector;
    auto per_thread = [&](const Operand& o) { return ceil_div(int64_t{o.tile} * plan.bk, threads); };
    const int64_t element_regs = (a.path == OperandPath::scalar ? per_thread(a) : 0) +
                                 (b.path == OperandPath::scalar ? per_thread(b) : 0);
    const bool elements_in_registers = element_regs <= kMaxElementRegisters;
    const bool a_regs = a_vec || (a.path == OperandPath::scalar && elements_in_registers);
    const bool b_regs = b_vec || (b.path == OperandPath::scalar && elements_in_registers);

    emit_operand_layout(os, a, plan.bk, e);
    emit_operand_loader(os, a, p, plan, e, a_regs);
    emit_operand_layout(os, b, plan.bk, e);
    emit_operand_loader(os, b, p, plan, e, b_regs);

    const bool a_async = a.path == OperandPath::cp_async, b_async = b.path == OperandPath::cp_async;
    auto load_stage = [&](const std::string& stage, const std::string& k0, const std::string& indent) {
        std::string s;
        if (a_async) s += indent + "a_load(sa + " + stage + " * A_STAGE_BYTES, A, m0, " + k0 + ");\n";
        if (b_async) s += indent + "b_load(sb + " + stage + " * B_STAGE_BYTES, B, n0, " + k0 + ");\n";
        return s;
    };

    // The fragments of one k-step from shared memory: ldmatrix x4 gives a whole 16x(32 bytes) A fragment, or
    // two 8x(32 bytes) B fragments. prep() (tf32 rounding) is applied as they arrive.
    os << "\n// ---- fragments of one k-step of this warp's tile\n";
    os << "__device__ __forceinline__ void load_a_fragment(u32 (&f)[4], u32 sa_k, int ks, int mi, int wm0, int lane) {\n";
    os << "  const int j8 = lane >> 3, r8 = lane & 7;\n";
    if (a.smem_k_major())
        os << "  ldsm_x4(f, sa_k + a_swz(wm0 + mi * 16 + (j8 & 1) * 8 + r8, ks * 2 + (j8 >> 1)));\n";
    else
        os << "  ldsm_x4_t(f, sa_k + a_swz(ks * 16 + (j8 >> 1) * 8 + r8, (wm0 + mi * 16 + (j8 & 1) * 8) >> 3));\n";
    os << "#pragma unroll\n  for (int q = 0; q < 4; ++q) f[q] = prep(f[q]);\n}\n";
    os << "// B fragments 2*nj and 2*nj+1\n";
    os << "__device__ __forceinline__ void load_b_pair(u32 (&bf)[NI][2], u32 sb_k, int ks, int nj, int wn0, int lane) {\n";
    os << "  const int j8 = lane >> 3, r8 = lane & 7;\n  u32 r[4];\n";
    if (b.smem_k_major())
        os << "  ldsm_x4(r, sb_k + b_swz(wn0 + nj * 16 + (j8 >> 1) * 8 + r8, ks * 2 + (j8 & 1)));\n";
    else
        os << "  ldsm_x4_t(r, sb_k + b_swz(ks * 16 + (j8 & 1) * 8 + r8, (wn0 + nj * 16 + (j8 >> 1) * 8) >> 3));\n";
    os << R"(  bf[2 * nj][0] = prep(r[0]); bf[2 * nj][1] = prep(r[1]);
  bf[2 * nj + 1][0] = prep(r[2]); bf[2 * nj + 1][1] = prep(r[3]);
}
__device__ __forceinline__ void load_fragments(u32 (&af)[MI][4], u32 (&bf)[NI][2], u32 sa_k, u32 sb_k, int ks,
                                               int wm0, int wn0, int lane) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) load_a_fragment(af[mi], sa_k, ks, mi, wm0, lane);
#pragma unroll
  for (int nj = 0; nj < NI / 2; ++nj) load_b_pair(bf, sb_k, ks, nj, wn0, lane);
}
)";

    os << "\n// ---- the kernel\n";
    os << "extern \"C\" __global__ void __launch_bounds__(" << threads << ", " << plan.min_blocks_per_sm << ") "
       << name << "(const void* __restrict__ a_ptr, const void* __restrict__ b_ptr, void* __restrict__ c_ptr, "
       << "const void* __restrict__ bias_ptr) {\n";
    os << "  extern __shared__ __align__(128) unsigned char smem[];\n";
    emit_grid_dependency_wait(os);
    os << R"(  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 batch = blockIdx.y + (i64)blockIdx.z * 65535;
)";
    if (p.batch > 65535 && p.batch % 65535 != 0) os << "  if (batch >= BATCH) return;\n";
    os << R"(  // Tiles in groups of GROUP_M rows: neighbouring CTAs share A rows and B columns in L2.
  const int pid = blockIdx.x, per_group = GROUP_M * TILES_N;
  const int first_m = pid / per_group * GROUP_M;
  const int group_rows = TILES_M - first_m < GROUP_M ? TILES_M - first_m : GROUP_M;
  const int m0 = (first_m + pid % per_group % group_rows) * BM;
  const int n0 = pid % per_group / group_rows * BN;
  const char* A = (const char*)a_ptr + batch * STRIDE_A;
  const char* B = (const char*)b_ptr + batch * STRIDE_B;
  char* C = (char*)c_ptr + batch * STRIDE_C;
  const char* bias = (const char*)bias_ptr;
  unsigned char* smem_a = smem;
  unsigned char* smem_b = smem + STAGES * A_STAGE_BYTES;
  const u32 sa = smem_u32(smem_a), sb = smem_u32(smem_b);
  const int wm0 = warp % WARPS_M * WM, wn0 = warp / WARPS_M * WN;

  Acc acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0;
)";
    if (a_regs) os << "  " << (a_vec ? "uint4" : "u32") << " a_regs[A_IT];\n";
    if (b_regs) os << "  " << (b_vec ? "uint4" : "u32") << " b_regs[B_IT];\n";

    // Prologue: the first k-tiles in flight. The cp.async loop refills a slot as soon as the fragments of its
    // tile are loaded, so every slot holds a tile in flight; the staged loop keeps one slot for the tile it
    // stores after the mma.
    const bool all_async = a_async && b_async;
    os << "\n  // prologue: k-tiles 0 .. " << (all_async ? "STAGES-1" : "STAGES-2") << " in flight\n";
    os << "#pragma unroll\n  for (int s = 0; s < " << (all_async ? "STAGES" : "STAGES - 1")
       << "; ++s) {\n    if (s < KT) {\n";
    os << load_stage("s", "s * BK", "      ");
    if (a_regs) os << "      a_fetch(a_regs, A, m0, s * BK);\n      a_store(smem_a + s * A_STAGE_BYTES, a_regs);\n";
    if (b_regs) os << "      b_fetch(b_regs, B, n0, s * BK);\n      b_store(smem_b + s * B_STAGE_BYTES, b_regs);\n";
    if (!a_async && !a_regs) os << "      a_copy(smem_a + s * A_STAGE_BYTES, A, m0, s * BK);\n";
    if (!b_async && !b_regs) os << "      b_copy(smem_b + s * B_STAGE_BYTES, B, n0, s * BK);\n";
    os << "    }\n    cp_async_commit();\n  }\n";

    if (all_async) {
        // Both operands arrive by cp.async. One set of fragment registers: each fragment is reloaded for the next
        // k-step as soon as its last mma of this k-step has issued, so the ldmatrix latency hides under the
        // remaining mma without a second register set (the warp tile's accumulators leave no room for one).
        // Rows of the warp tile alternate direction over B (the last B fragment is reused first), and the last
        // row of a k-step runs in the direction the next k-step's first row starts: the B pair it frees first
        // is the one needed first. The last k-step of a tile waits for tile kt+1 before its last row, then
        // loads tile kt+1's fragments; past that barrier no warp reads tile kt, whose slot is refilled last
        // (after the fragment loads, which the cp.async would otherwise hold back).
        os << R"(
  // main loop: fragments reloaded for the next k-step as each one's last mma issues
  constexpr int KS = BK / KSTEP;
  static_assert(KS % 2 == 0, "row directions repeat from tile to tile");
  u32 af[MI][4], bf[NI][2];
  cp_async_wait<STAGES - 1>();
  __syncthreads();
  load_fragments(af, bf, sa, sb, 0, wm0, wn0, lane);
  for (int kt = 0; kt < KT; ++kt) {
    const u32 sa_k = sa + kt % STAGES * A_STAGE_BYTES, sb_k = sb + kt % STAGES * B_STAGE_BYTES;
    const u32 sa_n = sa + (kt + 1) % STAGES * A_STAGE_BYTES, sb_n = sb + (kt + 1) % STAGES * B_STAGE_BYTES;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const bool last = ks == KS - 1;  // the next k-step is tile kt+1's first (a stale slot after the last tile)
      const u32 na = last ? sa_n : sa_k, nb = last ? sb_n : sb_k;
      const int nks = last ? 0 : ks + 1;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        if (last && mi == MI - 1) {
          cp_async_wait<STAGES - 2>();  // tile kt+1 has landed
          __syncthreads();
#pragma unroll
          for (int i = 0; i < MI - 1; ++i) load_a_fragment(af[i], na, nks, i, wm0, lane);
        }
        const bool reverse = (mi + ks * (MI - 1)) & 1;
#pragma unroll
        for (int j = 0; j < NI; ++j) {
          const int ni = reverse ? NI - 1 - j : j;
          mma(acc[mi][ni], af[mi], bf[ni]);
          if (mi == MI - 1 && (j & 1)) load_b_pair(bf, nb, nks, ni >> 1, wn0, lane);  // both of the pair used
        }
        if (!last || mi == MI - 1) load_a_fragment(af[mi], na, nks, mi, wm0, lane);
      }
    }
    // tile kt + STAGES into tile kt's slot: every warp passed the barrier after its last fragment load of tile kt
    const int pf = kt + STAGES;
    if (pf < KT) {
)";
        os << load_stage("kt % STAGES", "pf * BK", "      ");
        os << R"(    }
    cp_async_commit();
  }
)";
    } else {
        // Registers or element copies stage an operand after the mma: one barrier per tile, fragments loaded
        // just before their mma.
        os << R"(
  // main loop: wait for k-tile kt, refill the slot freed by kt-1, multiply kt
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int pf = kt + STAGES - 1, pf_slot = pf % STAGES;
    if (pf < KT) {
)";
        os << load_stage("pf_slot", "pf * BK", "      ");
        if (a_regs) os << "      a_fetch(a_regs, A, m0, pf * BK);\n";
        if (b_regs) os << "      b_fetch(b_regs, B, n0, pf * BK);\n";
        os << R"(    }
    cp_async_commit();
    const int slot = kt % STAGES;
#pragma unroll
    for (int ks = 0; ks < BK / KSTEP; ++ks) {
      u32 af[MI][4], bf[NI][2];
      load_fragments(af, bf, sa + slot * A_STAGE_BYTES, sb + slot * B_STAGE_BYTES, ks, wm0, wn0, lane);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const int nn = mi & 1 ? NI - 1 - ni : ni;  // serpentine: the last B fragment is reused next row
          mma(acc[mi][nn], af[mi], bf[nn]);
        }
    }
)";
        // The slot pf_slot was freed by k-tile kt-1 (everyone passed this iteration's barrier).
        os << "    if (pf < KT) {\n";
        if (a_regs) os << "      a_store(smem_a + pf_slot * A_STAGE_BYTES, a_regs);\n";
        if (b_regs) os << "      b_store(smem_b + pf_slot * B_STAGE_BYTES, b_regs);\n";
        if (!a_async && !a_regs) os << "      a_copy(smem_a + pf_slot * A_STAGE_BYTES, A, m0, pf * BK);\n";
        if (!b_async && !b_regs) os << "      b_copy(smem_b + pf_slot * B_STAGE_BYTES, B, n0, pf * BK);\n";
        os << "    }\n  }\n";
    }

    // One CTA per tile (grouped rows of tiles, see above), batches over y and z.
    out.grid[0] = tiles_m * tiles_n;
    out.grid[1] = std::min<int64_t>(p.batch, 65535);
    out.grid[2] = ceil_div(p.batch, 65535);
    out.block = threads;
    out.smem_bytes = plan.smem_bytes(static_cast<int>(e));
    out.waits_for_previous_grid = true;  // emit_grid_dependency_wait at the kernel's start

    if (plan.c_staged) {
        // Epilogue through shared memory (no tails, 16-byte C rows): each warp writes its finished values into
        // its own padded tile, then stores whole 16-byte pieces of rows (a warp instruction covers whole
        // sectors of a few rows instead of 4 bytes of 8 rows). The padding (16 bytes a row) puts the 8 rows
        // of one fragment store in different banks.
        os << "\n  // epilogue through shared memory: finished values into this warp's padded tile, then 16-byte row pieces\n";
        os << "  constexpr int C_ROW = " << plan.staged_c_row_bytes(ec)
           << ", C_CHUNKS = WN * EC / 16;  // C_ROW: WN * EC + 16, rows padded off the banks of the next\n";
        os << R"(  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages
  unsigned char* const c_tile = smem + warp * (WM * C_ROW);
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = mi * 16 + h * 8 + g, cl = ni * 8 + t * 2;
        const int row = m0 + wm0 + r, col = n0 + wn0 + cl;
        const char* c = C + (i64)row * LDC + (i64)col * EC;
        c_store2((char*)c_tile + r * C_ROW + cl * EC, finish(acc[mi][ni][2 * h], c, row, col, bias),
                 finish(acc[mi][ni][2 * h + 1], c + EC, row, col + 1, bias));
      }
  __syncwarp();
#pragma unroll 4
  for (int i = lane; i < WM * C_CHUNKS; i += 32) {
    const int r = i / C_CHUNKS, ch = i % C_CHUNKS;
    *(uint4*)(C + (i64)(m0 + wm0 + r) * LDC + (i64)(n0 + wn0) * EC + ch * 16) = *(const uint4*)(c_tile + r * C_ROW + ch * 16);
  }
}
)";
        return;
    }

    // Epilogue: straight from the accumulators (row g and g+8, columns 2t and 2t+1 of each 16x8 tile).
    const bool tail_m = p.m % plan.bm != 0, tail_n = p.n % plan.bn != 0;
    os << "\n  // epilogue: each thread owns rows g, g+8 and columns 2t, 2t+1 of every 16x8 tile\n";
    os << "  const int g = lane >> 2, t = lane & 3;\n";
    os << "#pragma unroll\n  for (int mi = 0; mi < MI; ++mi)\n#pragma unroll\n    for (int ni = 0; ni < NI; ++ni)\n"
       << "#pragma unroll\n      for (int h = 0; h < 2; ++h) {\n";
    os << "        const int row = m0 + wm0 + mi * 16 + h * 8 + g, col = n0 + wn0 + ni * 8 + t * 2;\n";
    os << "        const Acc v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];\n";
    if (tail_m) os << "        if (row >= M) continue;\n";
    os << "        char* c = C + (i64)row * LDC + (i64)col * EC;\n";
    if (plan.c_pairs) {
        os << "        " << (tail_n ? "if (col < N) " : "")
           << "c_store2(c, finish(v0, c, row, col, bias), finish(v1, c + EC, row, col + 1, bias));\n";
    } else {
        os << "        " << (tail_n ? "if (col < N) " : "") << "c_store(c, finish(v0, c, row, col, bias));\n";
        os << "        " << (tail_n ? "if (col + 1 < N) " : "") << "c_store(c + EC, finish(v1, c + EC, row, col + 1, bias));\n";
    }
    os << "      }\n}\n";
}
// ---------------------------------------------------------------------------------------------------
// Skinny family (M <= 16, B stored N x K): C^T = B^T A^T on the tensor cores, B^T's rows in the mma's 16-row
// slot and M in its 8-column slot. The sum over k does not care about order, so each lane loads 16
// contiguous bytes of a row and the same permutation of k is used for both operands: words x, y feed one
// mma, z, w the next. No shared memory on the way in; the warps of a CTA split K and meet in shared memory.

void emit_skinny(std::ostringstream& os, const Problem& p, const CudaGemmPlan& plan, const std::string& name,
                 GeneratedKernel& out) {
    const int64_t e = dtype_size(p.a_type);
    const int64_t ec = dtype_size(p.c_type);
    const int threads = plan.threads();
    const int rows = 16 * plan.skinny_row_tiles;
    const int64_t ve = 16 / e, chunk = 4 * ve;
    const int64_t kch = ceil_div(p.k, chunk);
    const int64_t step = int64_t{plan.skinny_warps} * plan.skinny_unroll;
    // tail_k: some lane's 16 bytes of the last chunk reach past K (partly, or entirely for lanes t > 0).
    const bool tail_n = p.n % rows != 0, tail_k = p.k % chunk != 0, tail_chunks = kch % step != 0;

    os << "\n// ---- shape and split (compile-time)\n";
    os << "constexpr int M = " << p.m << ", N = " << p.n << ", K = " << p.k << ";\n";
    os << "constexpr i64 BATCH = " << p.batch << ", STRIDE_A = " << p.stride_a * e << ", STRIDE_B = " << p.stride_b * e
       << ", STRIDE_C = " << p.stride_c * ec << ";  // bytes\n";
    os << "constexpr i64 LDA = " << p.lda * e << ", LDB = " << p.ldb * e << ", LDC = " << p.ldc * ec << ";  // bytes\n";
    os << "constexpr int NT = " << plan.skinny_row_tiles << ", KW = " << plan.skinny_warps << ", U = "
       << plan.skinny_unroll << ", THREADS = " << threads << ";  // row tiles per warp, warps splitting K, chunks in flight\n";
    os << "constexpr int MT = " << ceil_div(p.m, 8) << ", VE = " << ve << ", CHUNK = " << chunk << ", KCH = " << kch
       << ", ROWS = " << rows << ", RSTRIDE = " << rows + 4 << ";\n";
    os << "__device__ __forceinline__ uint4 prep4(uint4 v) { v.x = prep(v.x); v.y = prep(v.y); v.z = prep(v.z); v.w = prep(v.w); return v; }\n";

    // 16 bytes at p, zeros where the row or k is outside the matrix.
    auto load = [&](const char* fn) {
        if (!plan.skinny_vector) return std::string("!ok ? zero4() : ld_partial(p, valid)");
        if (!tail_k) return std::string("ok ? ") + fn + "(p) : zero4()";
        return std::string("!ok || valid <= 0 ? zero4() : valid >= VE ? ") + fn + "(p) : ld_partial(p, valid)";
    };
    os << "__device__ __forceinline__ uint4 w_load(const char* p, bool ok, int valid) { (void)valid; return "
       << load("ldg16_stream") << "; }\n";
    os << "__device__ __forceinline__ uint4 x_load(const char* p, bool ok, int valid) { (void)valid; return "
       << load("ldg16") << "; }\n";

    // One batch of U chunks: 2 x NT rows of B^T and MT rows of A, 16 bytes each, into registers.
    os << "\n// ---- loads of chunks c0 + u * KW (u < U) for this lane\n";
    os << "__device__ __forceinline__ void fetch(uint4 (&w)[U][NT][2], uint4 (&x)[U][MT], const char* A, const char* B,"
       << " int c0, int n0, int g, int t) {\n";
    os << R"(#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int ch = c0 + u * KW, k = ch * CHUNK + t * VE;
)";
    os << "    const bool live = " << (tail_chunks ? "ch < KCH" : "true") << ";\n";
    os << "    const int valid = K - k;\n";
    os << R"(#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = n0 + nt * 16 + h * 8 + g;
)";
    os << "        w[u][nt][h] = w_load(B + (i64)n * LDB + (i64)k * E, live" << (tail_n ? " && n < N" : "")
       << ", valid);\n";
    os << R"(      }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int m = mt * 8 + g;
)";
    os << "      x[u][mt] = x_load(A + (i64)m * LDA + (i64)k * E, live" << (p.m % 8 != 0 ? " && m < M" : "")
       << ", valid);\n";
    os << "    }\n  }\n}\n";

    os << "\n// ---- the kernel\n";
    os << "extern \"C\" __global__ void __launch_bounds__(" << threads << ", " << plan.min_blocks_per_sm << ") "
       << name << "(const void* __restrict__ a_ptr, const void* __restrict__ b_ptr, void* __restrict__ c_ptr, "
       << "const void* __restrict__ bias_ptr) {\n";
    os << "  __shared__ Acc red[KW][MT * 8][RSTRIDE];\n";
    emit_grid_dependency_wait(os);
    os << R"(  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const i64 batch = blockIdx.y + (i64)blockIdx.z * 65535;
)";
    if (p.batch > 65535 && p.batch % 65535 != 0) os << "  if (batch >= BATCH) return;\n";
    os << R"(  const int n0 = blockIdx.x * ROWS;
  const char* A = (const char*)a_ptr + batch * STRIDE_A;
  const char* B = (const char*)b_ptr + batch * STRIDE_B;
  char* C = (char*)c_ptr + batch * STRIDE_C;
  const char* bias = (const char*)bias_ptr;
  Acc acc[NT][MT][4];
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0;

  // main loop over batches of U chunks (chunk c0 + u * KW for warp c0 % KW): the next batch's loads are
  // issued before this batch's mma, so that HBM always has this lane's requests in flight.
  uint4 w[U][NT][2], x[U][MT];
  if (warp < KCH) fetch(w, x, A, B, warp, n0, g, t);
  for (int c0 = warp; c0 < KCH; c0 += KW * U) {
    uint4 wc[U][NT][2], xc[U][MT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) { wc[u][nt][0] = w[u][nt][0]; wc[u][nt][1] = w[u][nt][1]; }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) xc[u][mt] = x[u][mt];
    }
    if (c0 + KW * U < KCH) fetch(w, x, A, B, c0 + KW * U, n0, g, t);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const uint4 lo = prep4(wc[u][nt][0]), hi = prep4(wc[u][nt][1]), xv = prep4(xc[u][mt]);
          const u32 a0[4] = {lo.x, hi.x, lo.y, hi.y}, b0[2] = {xv.x, xv.y};
          const u32 a1[4] = {lo.z, hi.z, lo.w, hi.w}, b1[2] = {xv.z, xv.w};
          mma(acc[nt][mt], a0, b0);
          mma(acc[nt][mt], a1, b1);
        }
  }

  // the K slices of the warps meet in shared memory: red[warp][m][n]
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int n = nt * 16 + g, m = mt * 8 + 2 * t;
      red[warp][m][n] = acc[nt][mt][0];
      red[warp][m + 1][n] = acc[nt][mt][1];
      red[warp][m][n + 8] = acc[nt][mt][2];
      red[warp][m + 1][n + 8] = acc[nt][mt][3];
    }
  __syncthreads();

  // epilogue: consecutive threads write consecutive columns of a row of C
  for (int i = threadIdx.x; i < M * ROWS; i += THREADS) {
    const int m = i / ROWS, nl = i % ROWS, n = n0 + nl;
)";
    if (tail_n) os << "    if (n >= N) continue;\n";
    os << R"(    Acc s = 0;
#pragma unroll
    for (int w = 0; w < KW; ++w) s += red[w][m][nl];
    char* c = C + (i64)m * LDC + (i64)n * EC;
    c_store(c, finish(s, c, m, n, bias));
  }
}
)";

    set_decode_launch(out, p, rows, threads, 1);
    out.smem_bytes = 0;  // static shared memory only
    out.waits_for_previous_grid = true;  // emit_grid_dependency_wait at the kernel's start
}

}  // namespace

GeneratedKernel generate_sm80_gemm(const Problem& p, const CudaGemmPlan& plan) {
    plan::check_cuda_gemm_supported(p);
    GeneratedKernel out;
    const char* names[] = {"jitmm_sm80_tiled", "jitmm_sm80_skinny", "jitmm_sm80_gemv"};
    out.name = names[static_cast<int>(plan.family)];
    std::ostringstream os;
    os << "// jitmm " << out.name << " (generator v" << kSm80GeneratorVersion << ")\n// problem: " << describe(p)
       << "\n// plan: " << plan.describe() << "\n";
    emit_prelude(os, p.a_type);
    emit_epilogue_helpers(os, p);
    switch (plan.family) {
        case CudaKernelFamily::tiled: emit_tiled(os, p, plan, out.name, out); break;
        case CudaKernelFamily::skinny: emit_skinny(os, p, plan, out.name, out); break;
        case CudaKernelFamily::gemv:
            if (plan.gemv_n_major) emit_sm80_gemv_n_major(os, p, plan, out.name, out);
            else emit_sm80_gemv(os, p, plan, out.name, out);
            break;
    }
    out.source = os.str();
    return out;
}

}  // namespace jitmm::cuda
