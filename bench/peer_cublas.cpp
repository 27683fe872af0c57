// Peer "cublas": cuBLASLt (cublasLtMatmul with its heuristic's first algorithm), loaded by dlopen from the
// toolkit (libcublasLt.so.13, then .12), on the same shapes in device memory. Row-major C = op(A) op(B) is
// the column-major C^T = op(B)^T op(A)^T, so A and B swap places and M and N swap. f16/bf16 accumulate in
// f32, f32 runs in TF32 (CUBLAS_COMPUTE_32F_FAST_TF32, like jitmm's tf32 kernels), s8 in s32 (cuBLASLt's
// int8 kernels want the TN layout, i.e. B stored N x K). Plain matmuls only: epilogues are reported n/a.
//
// Device buffers: prepare() uploads every rotation copy of A and B from the bench's host inputs, run()
// launches on the peer's own stream, finish() waits for it, fetch_result() downloads C for --check. All
// driver calls run with the device's primary context current (the one the CUDA runtime inside cuBLAS uses).
#include "peer.hpp"

#include "core/error.hpp"
#include "cuda/driver.hpp"

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
    std::string error;  // why the library is unusable ("" when it is)
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
        default: return false;
    }
}

int device_ordinal(const std::string& device) {
    if (device == "cuda") return 0;
    if (device.rfind("cuda:", 0) == 0) return std::atoi(device.c_str() + 5);
    return -1;
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
        const bool ok = d.a_type == d.b_type && lt_type(d.a_type, &t) && lt_type(d.c_type, &t) &&
                        ((float_in && d.c_type != JITMM_DTYPE_S32) ||
                         (d.a_type == JITMM_DTYPE_S8 && d.c_type == JITMM_DTYPE_S32));
        if (!ok) {
            *why = "no cuBLASLt mapping for this dtype combination";
            return {};
        }
        if (d.epilogue != JITMM_EPILOGUE_NONE) {
            *why = "epilogues are not mapped to cuBLASLt's";
            return {};
        }
        return {"cublasLt"};
    }

    void prepare(const PeerShape& shape, const std::string&) override {
        release();
        shape_ = shape;
        const jitmm_matmul_desc& d = *shape.desc;
        const HostProblem& in = *shape.inputs;
        const jitmm::cuda::DriverApi& drv = jitmm::cuda::driver_or_throw();
        const CublasLtApi& lt = cublaslt();
        drv_ = &drv;

        CUdevice dev = 0;
        jitmm::cuda::check(drv.cuDeviceGet(&dev, device_ordinal(shape.device)), "cuDeviceGet");
        jitmm::cuda::check(drv.cuDevicePrimaryCtxRetain(&ctx_, dev), "cuDevicePrimaryCtxRetain");
        device_ = dev;
        Scope scope(*this);

        // Device copies of every rotation copy of A and B, and C (as filled, for beta).
        copies_ = in.copies;
        jitmm::cuda::check(drv.cuMemAlloc(&a_, in.a_pitch * copies_), "cuMemAlloc(A)");
        jitmm::cuda::check(drv.cuMemAlloc(&b_, in.b_pitch * copies_), "cuMemAlloc(B)");
        jitmm::cuda::check(drv.cuMemAlloc(&c_, in.c_buf.bytes()), "cuMemAlloc(C)");
        for (int64_t i = 0; i < copies_; ++i) {
            jitmm::cuda::check(drv.cuMemcpyHtoD(a_ + in.a_pitch * i, in.a_ptr(i), in.a_pitch), "upload A");
            jitmm::cuda::check(drv.cuMemcpyHtoD(b_ + in.b_pitch * i, in.b_ptr(i), in.b_pitch), "upload B");
        }
        jitmm::cuda::check(drv.cuMemcpyHtoD(c_, in.c_buf.data(), in.c_buf.bytes()), "upload C");
        jitmm::cuda::check(drv.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        workspace_size_ = size_t{32} << 20;
        jitmm::cuda::check(drv.cuMemAlloc(&workspace_, workspace_size_), "cuMemAlloc(workspace)");

        // Column-major view: C^T (N x M) = op(B)^T (N x K) * op(A)^T (K x M).
        const bool integer = d.a_type == JITMM_DTYPE_S8;
        cudaDataType_t ab_type = CUDA_R_32F, c_type = CUDA_R_32F;
        lt_type(d.a_type, &ab_type);
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
        // Stored column-major shapes: a row-major R x C matrix with leading dimension ld is C x R here.
        check_lt(lt.layout_create(&la_, ab_type, in.b.cols, in.b.rows, in.b.ld), "layout B");
        check_lt(lt.layout_create(&lb_, ab_type, in.a.cols, in.a.rows, in.a.ld), "layout A");
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
            fail(JITMM_STATUS_UNSUPPORTED, "cuBLASLt has no algorithm for this shape/layout" +
                                               std::string(integer ? " (int8 wants B stored N x K)" : ""));
        alpha_f_ = d.alpha, beta_f_ = d.beta;
        alpha_i_ = static_cast<int32_t>(d.alpha), beta_i_ = static_cast<int32_t>(d.beta);
        integer_ = integer;
    }

    void run(int64_t copy) override {
        Scope scope(*this);  // the runtime inside cuBLAS works in the current (primary) context
        const HostProblem& in = *shape_.inputs;
        const void* alpha = integer_ ? static_cast<const void*>(&alpha_i_) : &alpha_f_;
        const void* beta = integer_ ? static_cast<const void*>(&beta_i_) : &beta_f_;
        const void* a = reinterpret_cast<const void*>(b_ + in.b_pitch * copy);  // column-major first operand: B
        const void* b = reinterpret_cast<const void*>(a_ + in.a_pitch * copy);
        void* c = reinterpret_cast<void*>(c_);
        check_lt(cublaslt().matmul(handle_, op_, alpha, a, la_, b, lb_, beta, c, lc_, c, lc_, &algo_.algo,
                                   reinterpret_cast<void*>(workspace_), workspace_size_,
                                   reinterpret_cast<cudaStream_t>(stream_)),
                 "matmul");
    }

    void finish() override { jitmm::cuda::check(drv_->cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

    void fetch_result() override {
        Scope scope(*this);
        const HostProblem& in = *shape_.inputs;
        jitmm::cuda::check(drv_->cuMemcpyDtoH(in.c_buf.data(), c_, in.c_buf.bytes()), "download C");
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
            for (CUdeviceptr p : {a_, b_, c_, workspace_})
                if (p) drv_->cuMemFree(p);
            if (stream_) drv_->cuStreamDestroy(stream_);
        }
        drv_->cuDevicePrimaryCtxRelease(device_);
        la_ = lb_ = lc_ = nullptr;
        op_ = nullptr;
        handle_ = nullptr;
        a_ = b_ = c_ = workspace_ = 0;
        stream_ = nullptr;
        ctx_ = nullptr;
    }

    PeerShape shape_;
    const jitmm::cuda::DriverApi* drv_ = nullptr;
    CUdevice device_ = 0;
    CUcontext ctx_ = nullptr;
    CUstream stream_ = nullptr;
    CUdeviceptr a_ = 0, b_ = 0, c_ = 0, workspace_ = 0;
    size_t workspace_size_ = 0;
    int64_t copies_ = 1;
    cublasLtHandle_t handle_ = nullptr;
    cublasLtMatmulDesc_t op_ = nullptr;
    cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
    cublasLtMatmulHeuristicResult_t algo_{};
    bool integer_ = false;
    float alpha_f_ = 1, beta_f_ = 0;
    int32_t alpha_i_ = 1, beta_i_ = 0;
};

const PeerRegistrar kRegistrar{
    PeerInfo{"cublas", "cuBLASLt", 40, [] { return std::unique_ptr<Peer>(new CublasPeer); }, ""}};

}  // namespace
}  // namespace jitmm::bench
