// Peer "onednn": oneDNN's matmul primitive (epilogue fused as post-ops) and dnnl_sgemm (epilogue as a separate
// pass); the bench reports the faster per shape. f32 now; the matmul path is written around a dtype map so
// that bf16, f16 and s8/u8 inputs only need their entries enabled.
//
// Debian's libdnnl2 runs on OpenMP (DNNL_CPU_RUNTIME == OMP), so the thread count is libgomp's: set with
// omp_set_num_threads, found at run time in the libgomp that libdnnl already loaded (the bench itself is not
// compiled with -fopenmp).
#include "peer.hpp"

#ifdef JITMM_HAVE_ONEDNN

#include "core/error.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <dlfcn.h>

#include <optional>
#include <unordered_map>

namespace jitmm::bench {
namespace {

// The oneDNN type for a jitmm dtype; nullopt where the matmul path is not wired yet.
std::optional<dnnl::memory::data_type> dnnl_type(jitmm_dtype t) {
    switch (t) {
        case JITMM_DTYPE_F32: return dnnl::memory::data_type::f32;
        case JITMM_DTYPE_BF16: return dnnl::memory::data_type::bf16;
        case JITMM_DTYPE_S8: return dnnl::memory::data_type::s8;
        case JITMM_DTYPE_U8: return dnnl::memory::data_type::u8;
        case JITMM_DTYPE_S32: return dnnl::memory::data_type::s32;
        default: return std::nullopt;
    }
}

// OpenMP's thread count for the calling thread, which is the one that calls oneDNN.
bool set_openmp_threads(int threads) {
    using SetFn = void (*)(int);
    static const SetFn set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    if (set == nullptr) return false;
    set(threads);
    return true;
}

dnnl::algorithm eltwise_algorithm(jitmm_epilogue e) {
    switch (e) {
        case JITMM_EPILOGUE_RELU:
        case JITMM_EPILOGUE_BIAS_RELU: return dnnl::algorithm::eltwise_relu;
        case JITMM_EPILOGUE_GELU_TANH:
        case JITMM_EPILOGUE_BIAS_GELU_TANH: return dnnl::algorithm::eltwise_gelu_tanh;
        case JITMM_EPILOGUE_GELU_ERF:
        case JITMM_EPILOGUE_BIAS_GELU_ERF: return dnnl::algorithm::eltwise_gelu_erf;
        case JITMM_EPILOGUE_SILU:
        case JITMM_EPILOGUE_BIAS_SILU: return dnnl::algorithm::eltwise_swish;  // x * sigmoid(alpha x), alpha 1
        case JITMM_EPILOGUE_NONE:
        case JITMM_EPILOGUE_BIAS: break;
    }
    return dnnl::algorithm::undef;
}

// A row-major matrix (rows x cols, leading dimension ld) as a 2D desc, or 3D with the batch in front. A batch
// stride of 0 (one matrix shared by every batch) becomes a batch dimension of 1, which oneDNN broadcasts.
dnnl::memory::desc matrix_desc(dnnl::memory::data_type type, int64_t batch, int64_t rows, int64_t cols, bool trans,
                               int64_t ld, int64_t stride) {
    using dims = dnnl::memory::dims;
    // Logical dims are always (rows, cols) of op(X); a transposed store swaps the strides.
    const dims strides2 = trans ? dims{1, ld} : dims{ld, 1};
    if (batch == 1) return dnnl::memory::desc(dims{rows, cols}, type, strides2);
    const int64_t extent = trans ? cols * ld : rows * ld;  // any valid stride for a batch dimension of 1
    return dnnl::memory::desc(dims{stride == 0 ? 1 : batch, rows, cols}, type,
                              dims{stride == 0 ? extent : stride, strides2[0], strides2[1]});
}

class OneDnnPeer final : public Peer {
public:
    std::vector<std::string> paths(const PeerShape& shape, std::string* why) override {
        const jitmm_matmul_desc& d = *shape.desc;
        if (shape.device != "cpu") {
            *why = "CPU only";
            return {};
        }
        if (!dnnl_type(d.a_type) || !dnnl_type(d.b_type) || !dnnl_type(d.c_type) ||
            (epilogue_has_bias(d.epilogue) && !dnnl_type(d.bias_type))) {
            *why = "no oneDNN CPU matmul for this type (f16 in oneDNN 2.6, fp8)";
            return {};
        }
        if (d.a_scale_mode != JITMM_SCALE_NONE || d.b_scale_mode != JITMM_SCALE_NONE) {
            *why = "dequantization scales are not mapped to oneDNN's";
            return {};
        }
        std::vector<std::string> p = {"matmul"};
        if (d.a_type == JITMM_DTYPE_F32 && d.b_type == JITMM_DTYPE_F32 && d.c_type == JITMM_DTYPE_F32) {
            p.push_back("sgemm");
        }
        return p;
    }

    void prepare(const PeerShape& shape, const std::string& path) override {
        shape_ = shape;
        path_ = path;
        threads_set_ = set_openmp_threads(shape.threads);
        matmul_.reset();
        args_.clear();
        try {
            if (path == "matmul") prepare_matmul();
        } catch (const dnnl::error& e) {
            fail(JITMM_STATUS_UNSUPPORTED, std::string("oneDNN matmul: ") + e.what());
        }
    }

    void run(int64_t copy) override {
        if (matmul_) {
            matmul_->execute(stream_, args_[static_cast<size_t>(copy)]);
            stream_.wait();
        } else {
            run_sgemm(copy);
        }
    }

    std::string remark() const override {
        std::string r;
        if (path_ == "sgemm" && shape_.desc->epilogue != JITMM_EPILOGUE_NONE) r = "sgemm + epilogue as a separate pass";
        if (!threads_set_) r += std::string(r.empty() ? "" : "; ") + "omp_set_num_threads not found: OpenMP default";
        return r;
    }

    // libgomp's workers spin briefly (GOMP_SPINCOUNT) before they sleep.
    double spin_after_s() const override { return shape_.threads > 1 ? 0.01 : 0.0; }

private:
    void prepare_matmul() {
        const jitmm_matmul_desc& d = *shape_.desc;
        const HostProblem& in = *shape_.inputs;
        const int64_t batch = d.batch_count;
        const dnnl::memory::desc a_md = matrix_desc(*dnnl_type(d.a_type), batch, d.m, d.k, d.trans_a != 0,
                                                    in.a.ld, in.a.stride);
        const dnnl::memory::desc b_md = matrix_desc(*dnnl_type(d.b_type), batch, d.k, d.n, d.trans_b != 0,
                                                    in.b.ld, in.b.stride);
        const dnnl::memory::desc c_md = matrix_desc(*dnnl_type(d.c_type), batch, d.m, d.n, false, in.c.ld,
                                                    in.c.stride);

        // oneDNN 2.x computes output_scale * (A*B + bias), then the post-ops in order. Ours is
        // act(alpha*A*B + beta*C + bias): bias goes in the bias desc when alpha is 1 (the common, fastest
        // form), else as a binary add after the sum post-op.
        dnnl::primitive_attr attr;
        dnnl::post_ops ops;
        if (d.alpha != 1.0f) attr.set_output_scales(0, {d.alpha});
        if (d.beta != 0.0f) ops.append_sum(d.beta);
        dnnl::memory::desc bias_md;
        const bool has_bias = epilogue_has_bias(d.epilogue);
        const bool bias_as_post_op = has_bias && d.alpha != 1.0f;
        if (has_bias) {
            const bool per_row = d.bias_layout == JITMM_BIAS_PER_ROW;
            const int64_t rows = per_row ? d.m : 1, cols = per_row ? 1 : d.n;
            bias_md = matrix_desc(*dnnl_type(d.bias_type), batch == 1 ? 1 : 2, rows, cols, false, cols, 0);
            if (bias_as_post_op) ops.append_binary(dnnl::algorithm::binary_add, bias_md);
        }
        const dnnl::algorithm act = eltwise_algorithm(d.epilogue);
        if (act != dnnl::algorithm::undef) {
            const float act_alpha = act == dnnl::algorithm::eltwise_swish ? 1.0f : 0.0f;  // swish(1) is silu
            ops.append_eltwise(1.0f, act, act_alpha, 0.0f);
        }
        attr.set_post_ops(ops);

        const dnnl::matmul::desc desc = has_bias && !bias_as_post_op ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                                                                     : dnnl::matmul::desc(a_md, b_md, c_md);
        const dnnl::matmul::primitive_desc pd(desc, attr, engine_);
        matmul_.emplace(pd);

        // One argument map per copy of A and B, built here so that run() only executes.
        dnnl::memory c_mem(c_md, engine_, in.c_buf.data());
        for (int64_t copy = 0; copy < in.copies; ++copy) {
            std::unordered_map<int, dnnl::memory> args;
            args.emplace(DNNL_ARG_SRC, dnnl::memory(a_md, engine_, in.a_ptr(copy)));
            args.emplace(DNNL_ARG_WEIGHTS, dnnl::memory(b_md, engine_, in.b_ptr(copy)));
            args.emplace(DNNL_ARG_DST, c_mem);
            if (has_bias) {
                dnnl::memory bias_mem(bias_md, engine_, in.bias_buf.data());
                const int binary_index = d.beta != 0.0f ? 1 : 0;  // after the sum post-op, if any
                const int slot = bias_as_post_op ? DNNL_ARG_ATTR_MULTIPLE_POST_OP(binary_index) | DNNL_ARG_SRC_1
                                                 : DNNL_ARG_BIAS;
                args.emplace(slot, bias_mem);
            }
            args_.push_back(std::move(args));
        }
    }

    // dnnl_sgemm is row-major like jitmm, so the desc maps one to one; batches are a loop, as a framework
    // calling sgemm would write it.
    void run_sgemm(int64_t copy) {
        const jitmm_matmul_desc& d = *shape_.desc;
        const HostProblem& in = *shape_.inputs;
        const float* a = static_cast<const float*>(in.a_ptr(copy));
        const float* b = static_cast<const float*>(in.b_ptr(copy));
        float* c = static_cast<float*>(in.c_buf.data());
        const float* bias = static_cast<const float*>(in.bias_buf.data());
        for (int64_t i = 0; i < d.batch_count; ++i) {
            float* ci = c + i * in.c.stride;
            const dnnl_status_t st = dnnl_sgemm(d.trans_a ? 'T' : 'N', d.trans_b ? 'T' : 'N', d.m, d.n, d.k, d.alpha,
                                                a + i * in.a.stride, in.a.ld, b + i * in.b.stride, in.b.ld, d.beta,
                                                ci, in.c.ld);
            if (st != dnnl_success) {
                fail(JITMM_STATUS_INTERNAL_ERROR, "dnnl_sgemm failed (status " + std::to_string(st) + ")");
            }
            if (d.epilogue != JITMM_EPILOGUE_NONE) apply_epilogue_pass(d, ci, bias);
        }
    }

    dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream_{engine_};
    PeerShape shape_;
    std::string path_;
    bool threads_set_ = false;
    std::optional<dnnl::matmul> matmul_;
    std::vector<std::unordered_map<int, dnnl::memory>> args_;
};

const PeerRegistrar kRegistrar{
    PeerInfo{"onednn", "oneDNN", 10, [] { return std::unique_ptr<Peer>(new OneDnnPeer); }, ""}};

}  // namespace
}  // namespace jitmm::bench

#else  // !JITMM_HAVE_ONEDNN

namespace jitmm::bench {
namespace {
const PeerRegistrar kRegistrar{
    PeerInfo{"onednn", "oneDNN", 10, nullptr, "not built (libdnnl-dev was not found at configure time)"}};
}  // namespace
}  // namespace jitmm::bench

#endif
