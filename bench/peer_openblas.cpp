// Peer "openblas": cblas_sgemm, row-major like jitmm, batches as a loop. OpenBLAS has no fused epilogue, so
// for bias/activation shapes the timed call is sgemm plus a separate pass over C (what a framework on top of
// BLAS does); the remark says so. Threads: openblas_set_num_threads (Debian's pthread build, its own pool).
#include "peer.hpp"

#ifdef JITMM_HAVE_OPENBLAS

#include <cblas.h>

namespace jitmm::bench {
namespace {

class OpenBlasPeer final : public Peer {
public:
    std::vector<std::string> paths(const PeerShape& shape, std::string* why) override {
        const jitmm_matmul_desc& d = *shape.desc;
        if (shape.device != "cpu") {
            *why = "CPU only";
            return {};
        }
        if (d.a_type != JITMM_DTYPE_F32 || d.b_type != JITMM_DTYPE_F32 || d.c_type != JITMM_DTYPE_F32 ||
            (epilogue_has_bias(d.epilogue) && d.bias_type != JITMM_DTYPE_F32)) {
            *why = "sgemm is f32 only";
            return {};
        }
        return {"sgemm"};
    }

    void prepare(const PeerShape& shape, const std::string&) override {
        shape_ = shape;
        openblas_set_num_threads(shape.threads);
    }

    void run(int64_t copy) override {
        const jitmm_matmul_desc& d = *shape_.desc;
        const HostProblem& in = *shape_.inputs;
        const float* a = static_cast<const float*>(in.a_ptr(copy));
        const float* b = static_cast<const float*>(in.b_ptr(copy));
        float* c = static_cast<float*>(in.c_buf.data());
        const float* bias = static_cast<const float*>(in.bias_buf.data());
        for (int64_t i = 0; i < d.batch_count; ++i) {
            float* ci = c + i * in.c.stride;
            cblas_sgemm(CblasRowMajor, d.trans_a ? CblasTrans : CblasNoTrans, d.trans_b ? CblasTrans : CblasNoTrans,
                        static_cast<blasint>(d.m), static_cast<blasint>(d.n), static_cast<blasint>(d.k), d.alpha,
                        a + i * in.a.stride, static_cast<blasint>(in.a.ld), b + i * in.b.stride,
                        static_cast<blasint>(in.b.ld), d.beta, ci, static_cast<blasint>(in.c.ld));
            if (d.epilogue != JITMM_EPILOGUE_NONE) apply_epilogue_pass(d, ci, bias);
        }
    }

    std::string remark() const override {
        return shape_.desc->epilogue != JITMM_EPILOGUE_NONE ? "sgemm + epilogue as a separate pass" : "";
    }

    // Debian's pthread OpenBLAS: workers yield-spin for 2^28 TSC ticks (~0.1 s here) before they sleep, and
    // OPENBLAS_THREAD_TIMEOUT is read when the library loads, before main() could set it.
    double spin_after_s() const override { return shape_.threads > 1 ? 0.15 : 0.0; }

private:
    PeerShape shape_;
};

const PeerRegistrar kRegistrar{
    PeerInfo{"openblas", "OpenBLAS", 20, [] { return std::unique_ptr<Peer>(new OpenBlasPeer); }, ""}};

}  // namespace
}  // namespace jitmm::bench

#else  // !JITMM_HAVE_OPENBLAS

namespace jitmm::bench {
namespace {
const PeerRegistrar kRegistrar{
    PeerInfo{"openblas", "OpenBLAS", 20, nullptr, "not built (libopenblas-dev was not found at configure time)"}};
}  // namespace
}  // namespace jitmm::bench

#endif
