// Peer "cublas": cuBLASLt (cublasLtMatmul with its heuristic's first algorithm), loaded by dlopen from the
// toolkit (libcublasLt.so.13, then .12), on the same shapes in device memory. Row-major C = op(A) op(B) is
// the column-major C^T = op(B)^T op(A)^T, so A and B swap places and M and N swap: cuBLASLt's "A" is our B,
// its M is our N. f16/bf16 accumulate in f32, f32 runs in TF32 (CUBLAS_COMPUTE_32F_FAST_TF32, like jitmm's
// tf32 kernels), s8 in s32 (cuBLASLt's int8 kernels want the TN layout, i.e. B stored N x K).
//
// fp8 (e4m3/e5m2, any mix but e5m2 x e5m2, C f32/bf16/f16): CUBLAS_COMPUTE_32F with fast accumulation
// (no periodic f32 promotion, as jitmm's wgmma accumulators), only in the TN form (our B stored N x K, A
// not transposed). Scales: per tensor through CUBLASLT_MATMUL_DESC_{A,B}_SCALE_POINTER (its A scale is our
// B's); per row / per column through the outer-vector scale mode (cuBLASLt 12.9+: its A vector has our N
// values, its B vector our M), a per-tensor or absent scale on the other side expanded into a vector.
//
// Epilogues, two paths timed and the faster reported (each path's time under the row and in the JSON):
//   "cublasLt+fused":  cuBLASLt's own epilogue: BIAS, RELU(_BIAS), GELU(_BIAS) (its GELU is the tanh form).
//                      Its bias runs along the rows of its D, i.e. our per-column bias (length N); a per-row
//                      bias, gelu_erf and silu have no fused form.
//   "cublasLt+kernel": the plain matmul, then bias + activation as a separate elementwise kernel over C
//                      (epilogue_pass_cuda.hpp, compiled with jitmm's NVRTC wrapper at prepare()), launched on
//                      the same stream: what a framework without the fused form pays.
//
// Device buffers: prepare() uploads as many rotation copies of A and B as jitmm's device runs use
// (device_rotation_copies), bias, scales and C; run() launches on the peer's own stream; the runs are timed
// with CUDA events on that stream like jitmm's (time_on_device); fetch_result() downloads C for --check.
// All driver calls run with the device's primary context current (the one the CUDA runtime inside cuBLAS uses).
#include "epilogue_pass_cuda.hpp"
#include "measure_cuda.hpp"
#include "peer.hpp"
#include "reference.hpp"

#include "core/error.hpp"
#include "cuda/driver.hpp"
#include "cuda/nvrtc.hpp"
#include "hw/gpu.hpp"

#include <cublasLt.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace jitmm::bench {
namespace {

// The entry points used, bound by dlsym from libcublasLt.
struct CublasLtApi {
    decltype(&::cublasLtCreate) create = nullptr;
    decltype(&::cublasLtDestroy) destroy = nullptr;
    decltype(&::cublasLtMatmulDescCreate) desc_create = nullptr;
    decltype(&::cublasLtMatmulDescDestroy) desc_destroy = nullptr;
    decltype(&::cublasLtMatmulDescSetAttribute) desc_set = nullptr;
    decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
    decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
    decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
    decltype(&::cublasLtMatmulPreferenceCreate) pref_create = nullptr;
    decltype(&::cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
    decltype(&::cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
    decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
    decltype(&::cublasLtMatmul) matmul = nullptr;
    decltype(&::cublasLtGetVersion) get_version = nullptr;  // optional
    size_t version = 0;  // e.g. 120903, 130100; 0 when the library does not say
    std::string error;   // why the library is unusable ("" when it is)
};

const CublasLtApi& cublaslt() {
    static const CublasLtApi api = [] {
        CublasLtApi a;
        std::vector<std::string> names = {"libcublasLt.so.13", "libcublasLt.so.12"};
        for (const char* root : {static_cast<const char*>(std::getenv("CUDA_HOME")), "/usr/local/cuda"})
            if (root != nullptr && *root != '\0') {
                names.push_back(std::string(root) + "/lib64/libcublasLt.so.13");
                names.push_back(std::string(root) + "/lib64/libcublasLt.so.12");
            }
        void* lib = nullptr;
        for (const std::string& n : names)
            if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
        if (lib == nullptr) {
            a.error = "libcublasLt.so.13/.12 not found";
            return a;
        }
#define JITMM_BIND(member, symbol)                                                 \
    a.member = reinterpret_cast<decltype(a.member)>(dlsym(lib, #symbol));         \
    if (a.member == nullptr) a.error += (a.error.empty() ? "libcublasLt lacks " : " ") + std::string(#symbol);
        JITMM_BIND(create, cublasLtCreate)
        JITMM_BIND(destroy, cublasLtDestroy)
        JITMM_BIND(desc_create, cublasLtMatmulDescCreate)
        JITMM_BIND(desc_destroy, cublasLtMatmulDescDestroy)
        JITMM_BIND(desc_set, cublasLtMatmulDescSetAttribute)
        JITMM_BIND(layout_create, cublasLtMatrixLayoutCreate)
        JITMM_BIND(layout_destroy, cublasLtMatrixLayoutDestroy)
        JITMM_BIND(layout_set, cublasLtMatrixLayoutSetAttribute)
        JITMM_BIND(pref_create, cublasLtMatmulPreferenceCreate)
        JITMM_BIND(pref_destroy, cublasLtMatmulPreferenceDestroy)
        JITMM_BIND(pref_set, cublasLtMatmulPreferenceSetAttribute)
        JITMM_BIND(heuristic, cublasLtMatmulAlgoGetHeuristic)
        JITMM_BIND(matmul, cublasLtMatmul)
#undef JITMM_BIND
        a.get_version = reinterpret_cast<decltype(a.get_version)>(dlsym(lib, "cublasLtGetVersion"));
        if (a.get_version != nullptr) a.version = a.get_version();
        return a;
    }();
    return api;
}

void check_lt(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        fail(JITMM_STATUS_DEVICE_ERROR, std::string("cuBLASLt ") + what + " failed (status " +
                                            std::to_string(static_cast<int>(s)) + ")");
}

bool lt_type(jitmm_dtype t, cudaDataType_t* out) {
    switch (t) {
        case JITMM_DTYPE_F32: *out = CUDA_R_32F; return true;
        case JITMM_DTYPE_F16: *out = CUDA_R_16F; return true;
        case JITMM_DTYPE_BF16: *out = CUDA_R_16BF; return true;
        case JITMM_DTYPE_S8: *out = CUDA_R_8I; return true;
        case JITMM_DTYPE_S32: *out = CUDA_R_32I; return true;
        case JITMM_DTYPE_F8_E4M3: *out = CUDA_R_8F_E4M3; return true;
        case JITMM_DTYPE_F8_E5M2: *out = CUDA_R_8F_E5M2; return true;
        default: return false;
    }
}

int device_ordinal(const std::string& device) {
    if (device == "cuda") return 0;
    if (device.rfind("cuda:", 0) == 0) return std::atoi(device.c_str() + 5);
    return -1;
}

bool is_fp8(jitmm_dtype t) { return t == JITMM_DTYPE_F8_E4M3 || t == JITMM_DTYPE_F8_E5M2; }
bool is_float_out(jitmm_dtype t) { return t == JITMM_DTYPE_F32 || t == JITMM_DTYPE_F16 || t == JITMM_DTYPE_BF16; }
bool is_vector_scale(jitmm_scale_mode m) { return m == JITMM_SCALE_PER_ROW || m == JITMM_SCALE_PER_COLUMN; }

// The outer-vector scale mode (cuBLASLt 12.9): attribute and enum values as numbers when the headers are older,
// so that this file builds against any 12.x/13.x toolkit; the library in hand decides at run time.
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 120900
constexpr cublasLtMatmulDescAttributes_t kAScaleMode = CUBLASLT_MATMUL_DESC_A_SCALE_MODE;
constexpr cublasLtMatmulDescAttributes_t kBScaleMode = CUBLASLT_MATMUL_DESC_B_SCALE_MODE;
constexpr int32_t kScaleOuterVec32F = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
#else
constexpr cublasLtMatmulDescAttributes_t kAScaleMode = static_cast<cublasLtMatmulDescAttributes_t>(31);
constexpr cublasLtMatmulDescAttributes_t kBScaleMode = static_cast<cublasLtMatmulDescAttributes_t>(32);
constexpr int32_t kScaleOuterVec32F = 3;
#endif
constexpr size_t kOuterVecVersion = 120900;

const char* const kPathPlain = "cublasLt";
const char* const kPathFused = "cublasLt+fused";
const char* const kPathKernel = "cublasLt+kernel";

// cuBLASLt's own epilogue for ours, or why there is none.
bool lt_epilogue(jitmm_epilogue e, cublasLtEpilogue_t* out, std::string* why) {
    switch (e) {
        case JITMM_EPILOGUE_NONE: *out = CUBLASLT_EPILOGUE_DEFAULT; return true;
        case JITMM_EPILOGUE_BIAS: *out = CUBLASLT_EPILOGUE_BIAS; return true;
        case JITMM_EPILOGUE_RELU: *out = CUBLASLT_EPILOGUE_RELU; return true;
        case JITMM_EPILOGUE_BIAS_RELU: *out = CUBLASLT_EPILOGUE_RELU_BIAS; return true;
        case JITMM_EPILOGUE_GELU_TANH: *out = CUBLASLT_EPILOGUE_GELU; return true;
        case JITMM_EPILOGUE_BIAS_GELU_TANH: *out = CUBLASLT_EPILOGUE_GELU_BIAS; return true;
        case JITMM_EPILOGUE_GELU_ERF:
        case JITMM_EPILOGUE_BIAS_GELU_ERF: *why = "cuBLASLt has no erf GELU epilogue (its GELU is the tanh form)"; return false;
        case JITMM_EPILOGUE_SILU:
        case JITMM_EPILOGUE_BIAS_SILU: *why = "cuBLASLt has no SiLU epilogue"; return false;
    }
    *why = "unknown epilogue";
    return false;
}

// The bias type cuBLASLt's bias epilogue takes for this C (its D): the D type, except that fp8 inputs with an
// f32 D take a bf16 bias.
jitmm_dtype lt_bias_type(const jitmm_matmul_desc& d) {
    if (is_fp8(d.a_type) && d.c_type == JITMM_DTYPE_F32) return JITMM_DTYPE_BF16;
    return d.c_type;
}

class CublasPeer final : public Peer {
public:
    ~CublasPeer() override { release(); }

    std::vector<std::string> paths(const PeerShape& shape, std::string* why) override {
        const jitmm_matmul_desc& d = *shape.desc;
        if (device_ordinal(shape.device) < 0) {
            *why = "GPU only";
            return {};
        }
        if (jitmm::cuda::driver() == nullptr) {
            *why = jitmm::cuda::driver_unavailable_reason();
            return {};
        }
        if (!cublaslt().error.empty()) {
            *why = cublaslt().error;
            return {};
        }
        cudaDataType_t t;
        const bool float_in = d.a_type == JITMM_DTYPE_F16 || d.a_type == JITMM_DTYPE_BF16 || d.a_type == JITMM_DTYPE_F32;
        const bool fp8 = is_fp8(d.a_type) && is_fp8(d.b_type);
        if (fp8) {
            if (d.a_type == JITMM_DTYPE_F8_E5M2 && d.b_type == JITMM_DTYPE_F8_E5M2) {
                *why = "cuBLASLt has no e5m2 x e5m2 fp8 matmul";
                return {};
            }
            if (!is_float_out(d.c_type)) {
                *why = "fp8 to " + std::string(jitmm_dtype_name(d.c_type)) + " is not mapped (C f32/bf16/f16 only)";
                return {};
            }
            if (!d.trans_b || d.trans_a) {
                *why = "cuBLASLt fp8 needs the TN form: B stored N x K (--trans-b), A not transposed";
                return {};
            }
        } else {
            const bool ok = d.a_type == d.b_type && lt_type(d.a_type, &t) && lt_type(d.c_type, &t) &&
                            ((float_in && is_float_out(d.c_type)) ||
                             (d.a_type == JITMM_DTYPE_S8 && d.c_type == JITMM_DTYPE_S32));
            if (!ok) {
                *why = "no cuBLASLt mapping for this dtype combination";
                return {};
            }
        }
        if (d.a_scale_mode != JITMM_SCALE_NONE || d.b_scale_mode != JITMM_SCALE_NONE) {
            if (!fp8) {
                *why = "dequantization scales are mapped for fp8 only";
                return {};
            }
            if (d.a_scale_mode == JITMM_SCALE_PER_BLOCK_128) {
                *why = "per-block (1x128 / 128x128) scales are not mapped to cuBLASLt's block scaling";
                return {};
            }
            if ((is_vector_scale(d.a_scale_mode) || is_vector_scale(d.b_scale_mode)) &&
                cublaslt().version < kOuterVecVersion) {
                *why = "per-row/per-column scales need cuBLASLt 12.9+ outer-vector scaling (this one is " +
                       (cublaslt().version ? std::to_string(cublaslt().version) : std::string("of unknown version")) +
                       ")";
                return {};
            }
        }
        if (d.epilogue == JITMM_EPILOGUE_NONE) return {kPathPlain};

        std::vector<std::string> out;
        std::vector<std::string> left_out;
        // The fused path: cuBLASLt's own epilogue.
        std::string fused_why;
        cublasLtEpilogue_t e;
        const bool bias = epilogue_has_bias(d.epilogue);
        if (d.a_type == JITMM_DTYPE_S8) {
            fused_why = "int8 epilogues are not mapped";
        } else if (!lt_epilogue(d.epilogue, &e, &fused_why)) {
            // fused_why says which activation cuBLASLt lacks
        } else if (bias && d.bias_layout == JITMM_BIAS_PER_ROW) {
            fused_why = "cuBLASLt's bias runs along our columns (its D's rows): no per-row bias";
        } else if (bias && d.bias_type != lt_bias_type(d)) {
            fused_why = "cuBLASLt's bias for this C is " + std::string(jitmm_dtype_name(lt_bias_type(d))) + ", not " +
                        jitmm_dtype_name(d.bias_type);
        }
        if (fused_why.empty()) out.push_back(kPathFused);
        else left_out.push_back(std::string(kPathFused) + " n/a: " + fused_why);
        // The separate-kernel path.
        std::string kernel_why = epilogue_pass_unsupported(d);
        if (kernel_why.empty() && jitmm::cuda::nvrtc() == nullptr) kernel_why = jitmm::cuda::nvrtc_unavailable_reason();
        if (kernel_why.empty()) out.push_back(kPathKernel);
        else left_out.push_back(std::string(kPathKernel) + " n/a: " + kernel_why);

        std::string text;
        for (const std::string& w : left_out) text += (text.empty() ? "" : "; ") + w;
        if (out.empty()) {
            *why = "epilogue: " + text;
            return {};
        }
        *why = text;
        return out;
    }

    void prepare(const PeerShape& shape, const std::string& path) override {
        release();
        shape_ = shape;
        path_ = path;
        const jitmm_matmul_desc& d = *shape.desc;
        const HostProblem& in = *shape.inputs;
        const jitmm::cuda::DriverApi& drv = jitmm::cuda::driver_or_throw();
        const CublasLtApi& lt = cublaslt();
        drv_ = &drv;

        CUdevice dev = 0;
        const int ordinal = device_ordinal(shape.device);
        jitmm::cuda::check(drv.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
        jitmm::cuda::check(drv.cuDevicePrimaryCtxRetain(&ctx_, dev), "cuDevicePrimaryCtxRetain");
        device_ = dev;
        Scope scope(*this);

        // Device copies of A and B (as many as jitmm's device runs rotate over), C (as filled, for beta), bias
        // and scales.
        copies_ = device_rotation_copies(in, shape.device);
        a_ = alloc(in.a_pitch * copies_, "cuMemAlloc(A)");
        b_ = alloc(in.b_pitch * copies_, "cuMemAlloc(B)");
        c_ = alloc(in.c_buf.bytes(), "cuMemAlloc(C)");
        for (int64_t i = 0; i < copies_; ++i) {
            jitmm::cuda::check(drv.cuMemcpyHtoD(a_ + in.a_pitch * i, in.a_ptr(i % in.copies), in.a_pitch), "upload A");
            jitmm::cuda::check(drv.cuMemcpyHtoD(b_ + in.b_pitch * i, in.b_ptr(i % in.copies), in.b_pitch), "upload B");
        }
        jitmm::cuda::check(drv.cuMemcpyHtoD(c_, in.c_buf.data(), in.c_buf.bytes()), "upload C");
        const bool has_bias = epilogue_has_bias(d.epilogue);
        if (has_bias) {
            bias_ = alloc(in.bias_buf.bytes(), "cuMemAlloc(bias)");
            jitmm::cuda::check(drv.cuMemcpyHtoD(bias_, in.bias_buf.data(), in.bias_buf.bytes()), "upload bias");
        }
        jitmm::cuda::check(drv.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        workspace_size_ = size_t{32} << 20;
        workspace_ = alloc(workspace_size_, "cuMemAlloc(workspace)");

        // Column-major view: C^T (N x M) = op(B)^T (N x K) * op(A)^T (K x M).
        const bool integer = d.a_type == JITMM_DTYPE_S8;
        const bool fp8 = is_fp8(d.a_type);
        cudaDataType_t a_type = CUDA_R_32F, b_type = CUDA_R_32F, c_type = CUDA_R_32F;
        lt_type(d.a_type, &a_type);
        lt_type(d.b_type, &b_type);
        lt_type(d.c_type, &c_type);
        const cublasComputeType_t compute = integer ? CUBLAS_COMPUTE_32I
                                            : d.a_type == JITMM_DTYPE_F32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                          : CUBLAS_COMPUTE_32F;
        const cudaDataType_t scale = integer ? CUDA_R_32I : CUDA_R_32F;
        check_lt(lt.create(&handle_), "create");
        check_lt(lt.desc_create(&op_, compute, scale), "matmul desc");
        const cublasOperation_t ta = d.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // the first operand is B
        const cublasOperation_t tb = d.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
        check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
        check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
        remark_.clear();
        if (fp8) {
            const int8_t fast = 1;  // no periodic promotion to f32: jitmm's wgmma accumulators do not promote either
            check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast), "FAST_ACCUM");
            remark_ = "fp8 with fast accumulation";
            set_scales(d, in);
        }
        if (path_ == kPathFused) {
            cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DEFAULT;
            std::string why;
            if (!lt_epilogue(d.epilogue, &e, &why)) fail(JITMM_STATUS_UNSUPPORTED, why);
            check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e), "EPILOGUE");
            if (has_bias) {
                const void* bias = reinterpret_cast<const void*>(bias_);
                cudaDataType_t bt = CUDA_R_32F;
                lt_type(d.bias_type, &bt);
                const int32_t bias_type = static_cast<int32_t>(bt);
                check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "BIAS_POINTER");
                check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type),
                         "BIAS_DATA_TYPE");
            }
        }
        // Stored column-major shapes: a row-major R x C matrix with leading dimension ld is C x R here.
        check_lt(lt.layout_create(&la_, b_type, in.b.cols, in.b.rows, in.b.ld), "layout B");
        check_lt(lt.layout_create(&lb_, a_type, in.a.cols, in.a.rows, in.a.ld), "layout A");
        check_lt(lt.layout_create(&lc_, c_type, d.n, d.m, in.c.ld), "layout C");
        if (d.batch_count > 1) {
            const int32_t count = static_cast<int32_t>(d.batch_count);
            const int64_t strides[3] = {in.b.stride, in.a.stride, in.c.stride};
            cublasLtMatrixLayout_t layouts[3] = {la_, lb_, lc_};
            for (int i = 0; i < 3; ++i) {
                check_lt(lt.layout_set(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "batch");
                check_lt(lt.layout_set(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                       sizeof strides[i]),
                         "batch stride");
            }
        }
        cublasLtMatmulPreference_t pref = nullptr;
        check_lt(lt.pref_create(&pref), "preference");
        const uint64_t ws = workspace_size_;
        check_lt(lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "workspace pref");
        int found = 0;
        const cublasStatus_t h = lt.heuristic(handle_, op_, la_, lb_, lc_, lc_, pref, 1, &algo_, &found);
        lt.pref_destroy(pref);
        if (h != CUBLAS_STATUS_SUCCESS || found == 0)
            fail(JITMM_STATUS_UNSUPPORTED,
                 "cuBLASLt has no algorithm for this shape/layout" +
                     std::string(integer ? " (int8 wants B stored N x K)"
                                 : outer_vec_ ? " (with outer-vector scales)"
                                 : path_ == kPathFused ? " (with this epilogue)"
                                                       : "") +
                     " (heuristic status " + std::to_string(static_cast<int>(h)) + ")");
        alpha_f_ = d.alpha, beta_f_ = d.beta;
        alpha_i_ = static_cast<int32_t>(d.alpha), beta_i_ = static_cast<int32_t>(d.beta);
        integer_ = integer;

        if (path_ == kPathKernel) prepare_pass(d, in, ordinal);
        // Every upload above ran on the legacy stream, which the non-blocking stream the runs use does not wait
        // for (a pageable cuMemcpyHtoD may return before the device has the data).
        jitmm::cuda::check(drv.cuCtxSynchronize(), "cuCtxSynchronize");
    }

    void run(int64_t copy) override {
        Scope scope(*this);  // the runtime inside cuBLAS works in the current (primary) context
        const HostProblem& in = *shape_.inputs;
        copy %= copies_;
        const void* alpha = integer_ ? static_cast<const void*>(&alpha_i_) : &alpha_f_;
        const void* beta = integer_ ? static_cast<const void*>(&beta_i_) : &beta_f_;
        const void* a = reinterpret_cast<const void*>(b_ + in.b_pitch * copy);  // column-major first operand: B
        const void* b = reinterpret_cast<const void*>(a_ + in.a_pitch * copy);
        void* c = reinterpret_cast<void*>(c_);
        check_lt(cublaslt().matmul(handle_, op_, alpha, a, la_, b, lb_, beta, c, lc_, c, lc_, &algo_.algo,
                                   reinterpret_cast<void*>(workspace_), workspace_size_,
                                   reinterpret_cast<cudaStream_t>(stream_)),
                 "matmul");
        if (pass_ != nullptr) {
            CUdeviceptr c_arg = c_, bias_arg = bias_;
            int rows = pass_rows_, m = pass_m_, n = pass_n_;
            long long ldc = pass_ldc_, stride_c = pass_stride_c_;
            void* params[] = {&c_arg, &bias_arg, &rows, &m, &n, &ldc, &stride_c};
            jitmm::cuda::check(drv_->cuLaunchKernel(pass_, pass_grid_x_, pass_grid_y_, 1, kEpiloguePassBlock, 1, 1, 0,
                                                    stream_, params, nullptr),
                               "cuLaunchKernel(epilogue pass)");
        }
    }

    void finish() override { jitmm::cuda::check(drv_->cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

    bool time_on_device(const TimingPolicy& policy, Timing* t) override {
        Scope scope(*this);
        *t = time_on_stream(stream_, policy, [&](int64_t i) { run(i); });
        return true;
    }

    void fetch_result() override {
        Scope scope(*this);
        const HostProblem& in = *shape_.inputs;
        jitmm::cuda::check(drv_->cuMemcpyDtoH(in.c_buf.data(), c_, in.c_buf.bytes()), "download C");
    }

    std::string remark() const override {
        std::string r = remark_;
        if (path_ == kPathKernel)
            r += std::string(r.empty() ? "" : "; ") + "bias+activation as a separate kernel over C on the same stream";
        return r;
    }

private:
    // The primary context current for the scope.
    struct Scope {
        explicit Scope(const CublasPeer& p) : drv(*p.drv_) {
            jitmm::cuda::check(drv.cuCtxPushCurrent(p.ctx_), "cuCtxPushCurrent");
        }
        ~Scope() {
            CUcontext popped;
            drv.cuCtxPopCurrent(&popped);
        }
        const jitmm::cuda::DriverApi& drv;
    };

    CUdeviceptr alloc(size_t bytes, const char* what) {
        CUdeviceptr p = 0;
        jitmm::cuda::check(drv_->cuMemAlloc(&p, std::max<size_t>(bytes, 16)), what);
        allocations_.push_back(p);
        return p;
    }

    CUdeviceptr upload_floats(const std::vector<float>& values, const char* what) {
        const CUdeviceptr p = alloc(values.size() * sizeof(float), what);
        jitmm::cuda::check(drv_->cuMemcpyHtoD(p, values.data(), values.size() * sizeof(float)), what);
        return p;
    }

    // fp8 scales. cuBLASLt's A is our B: its A scale is our b_scales, its B scale our a_scales.
    void set_scales(const jitmm_matmul_desc& d, const HostProblem& in) {
        const CublasLtApi& lt = cublaslt();
        outer_vec_ = is_vector_scale(d.a_scale_mode) || is_vector_scale(d.b_scale_mode);
        if (!outer_vec_) {
            if (d.b_scale_mode == JITMM_SCALE_PER_TENSOR) {
                const void* p = reinterpret_cast<const void*>(upload_floats({in.b_scales()[0]}, "upload b_scales"));
                check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p, sizeof p), "A_SCALE_POINTER");
            }
            if (d.a_scale_mode == JITMM_SCALE_PER_TENSOR) {
                const void* p = reinterpret_cast<const void*>(upload_floats({in.a_scales()[0]}, "upload a_scales"));
                check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p, sizeof p), "B_SCALE_POINTER");
            }
            if (d.a_scale_mode != JITMM_SCALE_NONE || d.b_scale_mode != JITMM_SCALE_NONE)
                remark_ += ", per-tensor scales";
            return;
        }
        // Outer vectors: its A vector runs along its D's rows (our N columns), its B vector along its columns
        // (our M rows). A per-tensor or absent scale becomes a vector of that value (or of ones).
        auto expand = [](jitmm_scale_mode mode, const float* s, int64_t count) {
            std::vector<float> v(static_cast<size_t>(count), 1.0f);
            if (mode == JITMM_SCALE_PER_TENSOR) std::fill(v.begin(), v.end(), s[0]);
            if (is_vector_scale(mode)) std::copy(s, s + count, v.begin());
            return v;
        };
        const void* pa = reinterpret_cast<const void*>(
            upload_floats(expand(d.b_scale_mode, in.b_scales(), d.n), "upload b_scales"));
        const void* pb = reinterpret_cast<const void*>(
            upload_floats(expand(d.a_scale_mode, in.a_scales(), d.m), "upload a_scales"));
        const int32_t mode = kScaleOuterVec32F;
        if (lt.desc_set(op_, kAScaleMode, &mode, sizeof mode) != CUBLAS_STATUS_SUCCESS ||
            lt.desc_set(op_, kBScaleMode, &mode, sizeof mode) != CUBLAS_STATUS_SUCCESS)
            fail(JITMM_STATUS_UNSUPPORTED, "this cuBLASLt refuses the outer-vector scale mode");
        check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof pa), "A_SCALE_POINTER");
        check_lt(lt.desc_set(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof pb), "B_SCALE_POINTER");
        remark_ += ", scales as outer vectors";
    }

    // The separate epilogue kernel: compiled once per variant for this process, loaded per prepare.
    void prepare_pass(const jitmm_matmul_desc& d, const HostProblem& in, int ordinal) {
        const EpiloguePassConfig config = epilogue_pass_config(d);
        const hw::GpuProbe& gpus = hw::gpu_probe();
        if (ordinal < 0 || ordinal >= static_cast<int>(gpus.devices.size()))
            fail(JITMM_STATUS_NO_DEVICE, "no device " + std::to_string(ordinal) + " in the GPU probe");
        const hw::GpuInfo& gpu = gpus.devices[static_cast<size_t>(ordinal)];
        const std::string arch = gpu.arch_name();
        const std::string key = arch + "_" + config.key();
        auto it = cubins_.find(key);
        if (it == cubins_.end()) {
            jitmm::cuda::CompileResult compiled =
                jitmm::cuda::compile_to_cubin(epilogue_pass_source(config), "jitmm_bench_epilogue_" + key + ".cu", arch);
            it = cubins_.emplace(key, std::move(compiled.cubin)).first;
        }
        jitmm::cuda::check(drv_->cuModuleLoadData(&module_, it->second.data()), "cuModuleLoadData(epilogue pass)");
        jitmm::cuda::check(drv_->cuModuleGetFunction(&pass_, module_, kEpiloguePassKernel),
                           "cuModuleGetFunction(epilogue pass)");
        pass_rows_ = static_cast<int>(d.batch_count * d.m);
        pass_m_ = static_cast<int>(d.m);
        pass_n_ = static_cast<int>(d.n);
        pass_ldc_ = in.c.ld;
        pass_stride_c_ = in.c.stride;
        const int64_t per_block = int64_t{kEpiloguePassBlock} * config.vec;
        pass_grid_x_ = static_cast<unsigned>((d.n + per_block - 1) / per_block);
        // About 16 blocks per SM in all; each block strides over its share of the rows.
        const int64_t target = int64_t{std::max(gpu.sm_count, 1)} * 16;
        const int64_t y = std::max<int64_t>(1, (target + pass_grid_x_ - 1) / pass_grid_x_);
        pass_grid_y_ = static_cast<unsigned>(std::min<int64_t>({y, pass_rows_, 65535}));
    }

    void release() {
        if (drv_ == nullptr || ctx_ == nullptr) return;
        const CublasLtApi& lt = cublaslt();
        {
            Scope scope(*this);
            if (stream_) drv_->cuStreamSynchronize(stream_);
            if (la_) lt.layout_destroy(la_);
            if (lb_) lt.layout_destroy(lb_);
            if (lc_) lt.layout_destroy(lc_);
            if (op_) lt.desc_destroy(op_);
            if (handle_) lt.destroy(handle_);
            for (CUdeviceptr p : allocations_) drv_->cuMemFree(p);
            if (module_) drv_->cuModuleUnload(module_);
            if (stream_) drv_->cuStreamDestroy(stream_);
        }
        drv_->cuDevicePrimaryCtxRelease(device_);
        la_ = lb_ = lc_ = nullptr;
        op_ = nullptr;
        handle_ = nullptr;
        allocations_.clear();
        a_ = b_ = c_ = bias_ = workspace_ = 0;
        module_ = nullptr;
        pass_ = nullptr;
        stream_ = nullptr;
        ctx_ = nullptr;
        outer_vec_ = false;
    }

    PeerShape shape_;
    std::string path_, remark_;
    const jitmm::cuda::DriverApi* drv_ = nullptr;
    CUdevice device_ = 0;
    CUcontext ctx_ = nullptr;
    CUstream stream_ = nullptr;
    std::vector<CUdeviceptr> allocations_;  // every buffer below, freed by release()
    CUdeviceptr a_ = 0, b_ = 0, c_ = 0, bias_ = 0, workspace_ = 0;
    size_t workspace_size_ = 0;
    int64_t copies_ = 1;
    cublasLtHandle_t handle_ = nullptr;
    cublasLtMatmulDesc_t op_ = nullptr;
    cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
    cublasLtMatmulHeuristicResult_t algo_{};
    bool integer_ = false, outer_vec_ = false;
    float alpha_f_ = 1, beta_f_ = 0;
    int32_t alpha_i_ = 1, beta_i_ = 0;
    // The separate epilogue pass (path "cublasLt+kernel").
    std::map<std::string, std::vector<uint8_t>> cubins_;  // arch + variant -> cubin, kept for the process
    CUmodule module_ = nullptr;
    CUfunction pass_ = nullptr;
    int pass_rows_ = 0, pass_m_ = 0, pass_n_ = 0;
    long long pass_ldc_ = 0, pass_stride_c_ = 0;
    unsigned pass_grid_x_ = 1, pass_grid_y_ = 1;
};

const PeerRegistrar kRegistrar{
    PeerInfo{"cublas", "cuBLASLt", 40, [] { return std::unique_ptr<Peer>(new CublasPeer); }, ""}};

}  // namespace
}  // namespace jitmm::bench
