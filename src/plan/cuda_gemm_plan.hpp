// The CUDA GEMM planner (SM80 family, mma.sync): from a Problem and the GPU (arch, SM count, shared memory),
// the kernel family, its tile and pipeline shape, and how each operand travels from global to shared memory.
// Everything here goes into the kernel key.
#pragma once

#include "core/key.hpp"
#include "core/problem.hpp"
#include "hw/gpu.hpp"

#include <cstdint>
#include <string>

namespace jitmm::plan {

enum class CudaKernelFamily : int32_t {
    tiled = 0,   // CTA tile of C, cp.async multi-stage shared-memory pipeline, ldmatrix + mma.sync
    skinny = 1,  // M <= 16 (decode), rows not 16-byte aligned: swap-AB mma.sync from global loads, split-K in a CTA
    gemv = 2,    // M <= 32 (decode), 16-byte rows: weight rows streamed whole-line through shared memory by
                 // cp.async, ldmatrix + swap-AB mma.sync, each warp of a CTA its own contiguous K range
};

// How one operand's tile gets from global into shared memory (tiled family).
enum class OperandPath : int32_t {
    cp_async = 0,  // 16-byte cp.async, shared memory keeps the global orientation (ldmatrix or ldmatrix.trans)
    vector = 1,    // 16-byte loads into registers, stored K-major (transposing 4- and 1-byte types on the way)
    scalar = 2,    // one element per load: leading dimensions or strides that break 16-byte alignment
};

const char* operand_path_name(OperandPath p);

struct CudaGemmPlan {
    CudaKernelFamily family = CudaKernelFamily::tiled;

    // tiled
    int bm = 128, bn = 128, bk = 32;     // CTA tile; bk in elements (bk * element bytes is 64 or 128)
    int warps_m = 2, warps_n = 4;        // warp grid; warp tile = (bm / warps_m) x (bn / warps_n)
    int stages = 3;                      // shared-memory pipeline depth
    int group_m = 8;                     // tile raster: group_m tile rows walked together (L2 reuse)
    OperandPath a_path = OperandPath::cp_async, b_path = OperandPath::cp_async;

    // skinny
    int skinny_row_tiles = 1;            // 16-row tiles of B^T (= columns of C) per warp
    int skinny_warps = 8;                // warps of a CTA, each owning a slice of K
    int skinny_unroll = 4;               // 64-byte K chunks in flight per thread
    bool skinny_vector = true;           // 16-byte loads (false: element loads, for misaligned leading dims)

    // gemv (16 * gemv_groups rows of B^T per CTA)
    int gemv_warps = 4;                  // warps of a CTA, each streaming its own contiguous K range
    int gemv_stages = 4;                 // cp.async ring depth of each warp
    int gemv_segment = 256;              // bytes of K per row and stage (whole 128-byte lines)
    bool gemv_n_major = false;           // B stored K x N (16-bit types): 64 columns of C a CTA, 16 k-rows a stage
    int gemv_groups = 1;                 // B stored N x K: 16-row weight groups a CTA streams against one copy of
                                         // the A rows (2 halves the A rows' share of the traffic from L2)
    int gemv_ctas_k = 1;                 // CTAs splitting K for each column tile (few columns, long K): each
                                         // writes its partial sums to the workspace, the last one adds them up

    // both
    bool c_pairs = true;                 // two adjacent C elements per store (ldc and N even)
    bool c_staged = false;               // tiled: C through shared memory, 16-byte rows stores (no M/N tails)
    int min_blocks_per_sm = 1;           // __launch_bounds__ second argument

    int threads() const;
    int64_t smem_bytes(int element_bytes) const;
    // tiled, C staged: a warp's C tile row in shared memory, padded by 16 bytes (the 8 rows of one fragment
    // store fall in different banks).
    int64_t staged_c_row_bytes(int64_t c_element_bytes) const { return (bn / warps_n) * c_element_bytes + 16; }
    // gemv: the warps' rings, each stage 16 * gemv_groups weight rows and M rounded up to 8 rows of A.
    int64_t gemv_smem_bytes(int64_t m) const;
    // gemv split over CTAs: C's columns a CTA owns, the arrival counters (one per column tile and batch, zeroed
    // before each launch) and the workspace in all (counters, then each CTA's M x columns partial sums).
    int64_t gemv_columns() const { return gemv_n_major ? 64 : 16 * gemv_groups; }
    // The ring stages K takes for one column tile: 16 k-rows each (B stored K x N), or gemv_segment bytes of
    // each row (B stored N x K). The warps of all gemv_ctas_k CTAs share them out.
    int64_t gemv_k_stages(const Problem& p) const;
    int64_t workspace_counter_bytes(const Problem& p) const;
    int64_t workspace_bytes(const Problem& p) const;
    std::string describe() const;
    void append_key(KeyWriter& w) const;
};

// The chip facts a plan depends on; compile-only backends fill them from the arch name.
struct CudaTarget {
    std::string arch;            // "sm_80", "sm_90a", "sm_100a"
    int cc = 80;                 // 10 * major + minor
    int sm_count = 108;
    int64_t smem_per_block_optin = 163 * 1024;
    int64_t smem_per_sm = 164 * 1024;
};

// gemv: the 8-row tiles A is read in (1 for M <= 8, else an even count: ldmatrix fetches two at a time).
int64_t gemv_a_tiles(int64_t m);

// Decode shapes the gemv kernel takes when A's and B's rows are 16-byte aligned: up to 32 rows of A with B
// stored N x K, or up to 16 rows with a 16-bit B stored K x N (gemv_n_major_shape); the Hopper planner leaves
// them to it.
bool gemv_shape(const Problem& p);
bool gemv_n_major_shape(const Problem& p);

CudaTarget cuda_target_from_gpu(const hw::GpuInfo& gpu);
// Defaults for an arch named without a device (A100, H100, B200 figures). Throws UNSUPPORTED for others.
CudaTarget cuda_target_from_arch(const std::string& arch);

// Throws jitmm::Error(JITMM_STATUS_UNSUPPORTED) for dtype combinations the SM80 generator has no kernel for.
void check_cuda_gemm_supported(const Problem& p);

// aligned_pointers: whether A, B and C will be 16-byte aligned at run time (false plans the kernel that
// a misaligned pointer falls back to: element loads and single-element stores everywhere).
CudaGemmPlan plan_cuda_gemm(const Problem& p, const CudaTarget& target, bool aligned_pointers = true);

}  // namespace jitmm::plan
