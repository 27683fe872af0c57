#include "cuda/codegen/sm90_stage.hpp"

#include "core/dtype.hpp"

namespace jitmm::cuda {

// The staging copy of an operand into the workspace, K-major and packed (rows DST_LD elements apart):
// element (r, k) from src[k * LD + r] (stored M/N-major: transposed through a 32 x 32 shared tile so that both
// sides move along their contiguous dimension) or src[r * LD + k] (K-major with rows TMA cannot address: a
// plain copy). K past the end is never read by the GEMM (the tensor map stops at K).
void emit_sm90_stage_kernel(std::ostringstream& os, const Problem& p, const plan::Sm90GemmPlan& plan, bool a) {
    const int64_t e = dtype_size(a ? p.a_type : p.b_type);
    const char* name = a ? "jitmm_sm90_stage_a" : "jitmm_sm90_stage_b";
    const int64_t rows = a ? p.m : p.n, ld = a ? p.lda : p.ldb, stride = a ? p.stride_a : p.stride_b;
    const bool mn_major = a ? p.trans_a : !p.trans_b;
    const char* type = e == 1 ? "unsigned char" : e == 2 ? "u16" : "u32";
    os << "\n// ---- staging: " << (a ? "A" : "B") << (mn_major ? " (stored M/N-major) transposed" : " (K-major) copied")
       << " into the workspace, K-major and packed\n";
    os << "extern \"C\" __global__ void __launch_bounds__(256) " << name << "(const " << type << "* __restrict__ src, "
       << type << "* __restrict__ dst) {\n";
    os << "  typedef " << type << " T;\n";
    os << "  constexpr int R = " << rows << ", KK = " << p.k << ";\n";
    // A shared operand (batch stride 0) is copied once.
    os << "  constexpr i64 BATCHES = " << ((a ? plan.a_shared : plan.b_shared) ? 1 : p.batch) << ";\n";
    os << "  constexpr i64 LD = " << ld << ", STRIDE = " << stride << ", DST_LD = " << plan.staged_ld(p)
       << ", DST_STRIDE = (i64)R * DST_LD;\n";
    os << "  const int r0 = blockIdx.x * 32, k0 = blockIdx.y * 32, tx = threadIdx.x % 32, ty = threadIdx.x / 32;\n";
    if (mn_major) {
        os << R"(  __shared__ T tile[32][33];
  for (i64 b = blockIdx.z; b < BATCHES; b += gridDim.z) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int k = k0 + ty + 8 * j, r = r0 + tx;
      if (k < KK && r < R) tile[ty + 8 * j][tx] = src[b * STRIDE + (i64)k * LD + r];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = r0 + ty + 8 * j, k = k0 + tx;
      if (r < R && k < KK) dst[b * DST_STRIDE + (i64)r * DST_LD + k] = tile[tx][ty + 8 * j];
    }
    __syncthreads();
  }
}
)";
    } else {
        os << R"(  for (i64 b = blockIdx.z; b < BATCHES; b += gridDim.z) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = r0 + ty + 8 * j, k = k0 + tx;
      if (r < R && k < KK) dst[b * DST_STRIDE + (i64)r * DST_LD + k] = src[b * STRIDE + (i64)r * LD + k];
    }
  }
}
)";
    }
}

}  // namespace jitmm::cuda
