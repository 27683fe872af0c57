// Peer "libxsmm": LIBXSMM 1.17's dispatch-then-call small GEMM (libxsmm_smmdispatch, then the returned JIT
// kernel per call), for the shapes LIBXSMM itself treats as small (M*N*K <= LIBXSMM_MAX_MNK).
//
// LIBXSMM is column-major. A row-major C = op(A) op(B) is, read column-major, C^T = op(B)^T op(A)^T: the
// kernel gets (m, n, k) = (N, M, K), B's buffer as its first operand and A's as its second. A transposed B
// (row-major) becomes LIBXSMM's TRANS_A, which 1.17's JIT does not generate: those shapes are "n/a".
// One kernel call runs on one thread; batches are a loop.
#include "peer.hpp"

#ifdef JITMM_HAVE_LIBXSMM

#include "core/error.hpp"

#include <libxsmm.h>

namespace jitmm::bench {
namespace {

class LibxsmmPeer final : public Peer {
public:
    std::vector<std::string> paths(const PeerShape& shape, std::string* why) override {
        const jitmm_matmul_desc& d = *shape.desc;
        if (shape.device != "cpu") {
            *why = "CPU only";
            return {};
        }
        if (d.a_type != JITMM_DTYPE_F32 || d.b_type != JITMM_DTYPE_F32 || d.c_type != JITMM_DTYPE_F32) {
            *why = "f32 only here";
            return {};
        }
        if (d.epilogue != JITMM_EPILOGUE_NONE) {
            *why = "no fused epilogue in LIBXSMM's small GEMM";
            return {};
        }
        if (d.alpha != 1.0f || (d.beta != 0.0f && d.beta != 1.0f)) {
            *why = "LIBXSMM's JIT takes alpha 1 and beta 0 or 1 only";
            return {};
        }
        const double mnk = static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k);
        if (mnk > static_cast<double>(LIBXSMM_MAX_MNK)) {
            *why = "larger than LIBXSMM's small-matrix limit (M*N*K <= LIBXSMM_MAX_MNK = " +
                   std::to_string(LIBXSMM_MAX_MNK) + ")";
            return {};
        }
        if (dispatch(shape) == nullptr) {
            *why = d.trans_b ? "no kernel for transposed B (LIBXSMM 1.17's JIT has no TRANS_A)"
                             : "libxsmm_smmdispatch returned no kernel";
            return {};
        }
        return {"smm"};
    }

    void prepare(const PeerShape& shape, const std::string&) override {
        shape_ = shape;
        kernel_ = dispatch(shape);
        if (kernel_ == nullptr) fail(JITMM_STATUS_UNSUPPORTED, "libxsmm_smmdispatch returned no kernel");
    }

    void run(int64_t copy) override {
        const jitmm_matmul_desc& d = *shape_.desc;
        const HostProblem& in = *shape_.inputs;
        const float* a = static_cast<const float*>(in.a_ptr(copy));
        const float* b = static_cast<const float*>(in.b_ptr(copy));
        float* c = static_cast<float*>(in.c_buf.data());
        for (int64_t i = 0; i < d.batch_count; ++i) {
            kernel_(b + i * in.b.stride, a + i * in.a.stride, c + i * in.c.stride);  // C^T = op(B)^T op(A)^T
        }
    }

    std::string remark() const override { return shape_.threads > 1 ? "one thread (one kernel call per matrix)" : ""; }

private:
    // Cached by LIBXSMM after the first call for a descriptor, so calling it again in prepare() is cheap.
    static libxsmm_smmfunction dispatch(const PeerShape& shape) {
        const jitmm_matmul_desc& d = *shape.desc;
        const HostProblem& in = *shape.inputs;
        const libxsmm_blasint m = static_cast<libxsmm_blasint>(d.n), n = static_cast<libxsmm_blasint>(d.m),
                              k = static_cast<libxsmm_blasint>(d.k);
        const libxsmm_blasint lda = static_cast<libxsmm_blasint>(in.b.ld), ldb = static_cast<libxsmm_blasint>(in.a.ld),
                              ldc = static_cast<libxsmm_blasint>(in.c.ld);
        const float alpha = d.alpha, beta = d.beta;
        const int flags = (d.trans_b ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (d.trans_a ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
        return libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
    }

    PeerShape shape_;
    libxsmm_smmfunction kernel_ = nullptr;
};

const PeerRegistrar kRegistrar{
    PeerInfo{"libxsmm", "LIBXSMM", 30, [] { return std::unique_ptr<Peer>(new LibxsmmPeer); }, ""}};

}  // namespace
}  // namespace jitmm::bench

#else  // !JITMM_HAVE_LIBXSMM

namespace jitmm::bench {
namespace {
const PeerRegistrar kRegistrar{
    PeerInfo{"libxsmm", "LIBXSMM", 30, nullptr, "not built (libxsmm-dev was not found at configure time)"}};
}  // namespace
}  // namespace jitmm::bench

#endif
