#include "x86/backend_x86.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "hw/cpu.hpp"
#include "plan/x86_dot_plan.hpp"
#include "plan/x86_gemm_plan.hpp"
#include "plan/x86_gemv_plan.hpp"
#include "plan/x86_kgroup_plan.hpp"
#include "plan/x86_lowp_plan.hpp"
#include "x86/gemm_f32_dot_kernel.hpp"
#include "x86/gemm_f32_gemv_kernel.hpp"
#include "x86/gemm_f32_kernel.hpp"
#include "x86/gemm_f32_kgroup_kernel.hpp"
#include "x86/gemm_lowp_kernel.hpp"
#include "x86/pack.hpp"
#include "x86/thread_scratch.hpp"
#include "x86/widen.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace jitmm::x86 {

namespace {

// A plan of one x86 kernel family: its recipe, how to compile it and how to load it. Recipe provides
// describe() and append_key(); Family names the generator and its version, compiles and loads.
template <typename Family>
class X86Plan final : public Plan {
public:
    using Recipe = typename Family::Recipe;
    X86Plan(const Problem& p, Recipe recipe, std::shared_ptr<const ParallelRunner> runner)
        : p_(p), recipe_(std::move(recipe)), runner_(std::move(runner)) {}

    const char* generator() const override { return Family::generator(recipe_); }
    int generator_version() const override { return Family::kVersion; }
    std::string describe() const override { return recipe_.describe(); }
    void append_key(KeyWriter& w) const override { recipe_.append_key(w); }
    Artifact compile() const override { return Family::compile(p_, recipe_); }
    std::shared_ptr<Kernel> load(const Artifact& artifact, KernelMeta meta) const override {
        return std::make_shared<typename Family::KernelType>(std::move(meta), p_, recipe_, runner_, artifact);
    }

private:
    Problem p_;
    Recipe recipe_;
    std::shared_ptr<const ParallelRunner> runner_;
};

// Broadcast-FMA register tiles over packed panels: the general f32 family.
struct BroadcastF32Family {
    using Recipe = plan::X86GemmPlan;
    using KernelType = GemmF32Kernel;
    static constexpr int kVersion = 17;  // bump when the emitted code changes for the same recipe (10: aligned,
                                         // 11: one shared activation chain, 12: alpha/beta encoded directly,
                                         // 13: erf-GELU's erfc to relative accuracy, 14: B packing variants,
                                         // 15: K-split parts and column tails share bodies, 16: one-vector tiles'
                                         // embedded broadcasts, 17: the row sweep)
    static const char* generator(const Recipe& r) {
        return r.layout.isa >= hw::X86Isa::avx512 ? "x86_f32_avx512" : "x86_f32_avx2";
    }
    static Artifact compile(const Problem& p, const Recipe& r) { return compile_gemm_f32(p, r); }
};

// Dot products along K: C = A * B^T with B stored N x K and few rows.
struct DotF32Family {
    using Recipe = plan::X86DotPlan;
    using KernelType = GemmF32DotKernel;
    static constexpr int kVersion = 7;  // 4: code aligned where it runs (emit_buffer); 5: AVX-512 vector epilogue;
                                        // 6: Bt rows streaming from memory prefetched ahead; 7: the sums of a row
                                        // by a reduction tree, erf-GELU's erfc to relative accuracy
    static const char* generator(const Recipe& r) {
        return r.layout.isa >= hw::X86Isa::avx512 ? "x86_f32_dot_avx512" : "x86_f32_dot_avx2";
    }
    static Artifact compile(const Problem& p, const Recipe& r) { return compile_gemm_f32_dot(p, r); }
};

// Groups of K values per FMA into column slots: many rows over 2 to 8 columns and a short K.
struct KGroupF32Family {
    using Recipe = plan::X86KGroupPlan;
    using KernelType = GemmF32KGroupKernel;
    static constexpr int kVersion = 1;
    static const char* generator(const Recipe&) { return "x86_f32_kgroup_avx512"; }
    static Artifact compile(const Problem& p, const Recipe& r) { return compile_gemm_f32_kgroup(p, r); }
};

// One row of A times a B stored K x N, B streamed in place in the order it is stored (AVX-512).
struct GemvF32Family {
    using Recipe = plan::X86GemvPlan;
    using KernelType = GemmF32GemvKernel;
    static constexpr int kVersion = 1;
    static const char* generator(const Recipe&) { return "x86_f32_gemv_avx512"; }
    static Artifact compile(const Problem& p, const Recipe& r) { return compile_gemm_f32_gemv(p, r); }
};

// A matrix times a vector (C = A b, N = 1) with b and C dense: C^T = b^T A^T is one row times A^T, a decode
// shape, which the f32 dot family and the low-precision swapped AMX path serve by streaming A once front to back
// over all the threads. The broadcast tiles would spend a whole vector of FMA lanes on the single column
// (1 thread, 4096x1x4096 NN f32: 3.9 GFLOP/s, half of oneDNN's), and the low-precision tiles 31 of 32 columns
// (16 threads: 0.22x oneDNN in bf16). An A stored K x M makes it one row times a B stored K x N, the decode
// shape of the broadcast tiles (1 thread, 265x1x64 TN x16: 0.26x oneDNN unswapped). The plan of the swapped
// problem is wrapped: its kernel is called with the
// operands (and their scales) exchanged; the key is the caller's problem plus the swapped recipe.
// Same-type operands only (u8 x s8 has no swapped instruction here), no zero point, no block scales.
bool serves_as_swapped(const Problem& p) {
    const bool dense_b_column = p.trans_b || p.ldb == 1;
    const bool scales_swap = p.a_scale != ScaleMode::per_block && p.b_scale != ScaleMode::per_block;
    return p.n == 1 && p.m > 1 && dense_b_column && p.ldc == 1 && p.a_type == p.b_type &&
           p.a_zero_point == 0 && scales_swap;
}

ScaleMode swapped_scale(ScaleMode s) {
    if (s == ScaleMode::per_row) return ScaleMode::per_column;
    if (s == ScaleMode::per_column) return ScaleMode::per_row;
    return s;
}

Problem swapped_operands(const Problem& p) {
    Problem s = p;
    s.m = 1;
    s.n = p.m;
    s.trans_a = false;
    // A as stored is the swapped problem's B: M x K is its B^T, K x M (op(A) = A^T) its B as stored.
    s.trans_b = !p.trans_a;
    s.lda = p.k;       // b as one row of K values
    s.ldb = p.lda;
    s.ldc = p.m;       // C^T: one row of M values
    s.stride_a = p.stride_b;
    s.stride_b = p.stride_a;
    // bias[N] (one value) is the bias of the swapped problem's one row; bias[M] is its per-column bias. The
    // scales of A (per row of M) become those of the swapped B (per column), and the other way round.
    if (p.bias == BiasKind::per_column) s.bias = BiasKind::per_row;
    else if (p.bias == BiasKind::per_row) s.bias = BiasKind::per_column;
    s.a_scale = swapped_scale(p.b_scale);
    s.b_scale = swapped_scale(p.a_scale);
    return s;
}

// A plan serving the caller's problem through another plan's kernel (operands swapped, C computed transposed,
// operands widened): the inner generator named with a suffix, the inner recipe described after a prefix, the key
// the inner key after a tag of its own; `wrap` builds the caller's kernel around the inner one.
class WrappedPlan final : public Plan {
public:
    using Wrap = std::function<std::shared_ptr<Kernel>(std::shared_ptr<Kernel>)>;
    WrappedPlan(std::unique_ptr<Plan> inner, const char* suffix, std::string prefix, int64_t key_tag, Wrap wrap)
        : inner_(std::move(inner)), generator_(std::string(inner_->generator()) + suffix), prefix_(std::move(prefix)),
          key_tag_(key_tag), wrap_(std::move(wrap)) {}

    const char* generator() const override { return generator_.c_str(); }
    int generator_version() const override { return inner_->generator_version(); }
    std::string describe() const override { return prefix_ + inner_->describe(); }
    void append_key(KeyWriter& w) const override {
        w.i64('W', key_tag_);
        inner_->append_key(w);
    }
    Artifact compile() const override { return inner_->compile(); }
    std::shared_ptr<Kernel> load(const Artifact& artifact, KernelMeta meta) const override {
        return wrap_(inner_->load(artifact, std::move(meta)));
    }

private:
    std::unique_ptr<Plan> inner_;
    std::string generator_, prefix_;
    int64_t key_tag_;
    Wrap wrap_;
};

class SwappedOperandsKernel final : public Kernel {
public:
    explicit SwappedOperandsKernel(std::shared_ptr<Kernel> inner) : Kernel(inner->meta()), inner_(std::move(inner)) {}
    void run(const RunArgs& args) const override {
        RunArgs swapped = args;
        swapped.a = args.b;
        swapped.b = args.a;
        swapped.a_scales = args.b_scales;
        swapped.b_scales = args.a_scales;
        inner_->run(swapped);
    }
    size_t workspace_bytes() const override { return inner_->workspace_bytes(); }

private:
    std::shared_ptr<Kernel> inner_;
};

// C^T = op(B)^T op(A)^T computed into a scratch of N rows of M values, then transposed into C (see
// plan::serves_with_c_transposed and plan::lowp_serves_with_c_transposed; C of 4-byte values, f32 or s32, which
// the transposes move as they are): the swapped problem's A is op(B)^T, its B op(A)^T, its bias per row a bias
// per column of C (and the other way round); alpha, beta and the activation act elementwise. With beta, C is
// first transposed into the scratch.
// (Whole lines per row, off multiples of 4 KiB: the transposes read 16 rows at one offset.)
int64_t transposed_c_ld(const Problem& p) {
    const int64_t ld = (p.m + 15) / 16 * 16;
    return ld % 1024 == 0 ? ld + 16 : ld;
}

Problem c_transposed_problem(const Problem& p) {
    Problem s = plan::transposed_product_problem(p);
    s.ldc = transposed_c_ld(p);
    s.stride_c = p.n * s.ldc;
    return s;
}

class TransposedCKernel final : public Kernel {
public:
    TransposedCKernel(std::shared_ptr<Kernel> inner, const Problem& p, bool avx512,
                      std::shared_ptr<const ParallelRunner> runner)
        : Kernel(inner->meta()), inner_(std::move(inner)), p_(p), ldt_(transposed_c_ld(p)), avx512_(avx512),
          runner_(std::move(runner)) {}
    void run(const RunArgs& args) const override {
        const int64_t batch_floats = p_.n * ldt_;
        // (The calling thread's, whole lines per row: ldt_ is whole lines.)
        float* scratch = thread_scratch<TransposedCKernel>(static_cast<size_t>(p_.batch * batch_floats));
        auto* c = static_cast<float*>(args.c);
        // The transposes in pieces of kTransposeRows rows of C per batch, over as many threads as have about
        // kTransposeFloatsPerThread values each.
        const int64_t pieces = (p_.m + kTransposeRows - 1) / kTransposeRows, tasks = p_.batch * pieces;
        const int threads = static_cast<int>(std::clamp<int64_t>(
            p_.batch * p_.m * p_.n / kTransposeFloatsPerThread, 1, std::min<int64_t>(tasks, runner_->num_threads())));
        auto transpose = [&](bool into_scratch) {
            auto piece = [&](int64_t t) {
                const int64_t batch = t / pieces, i0 = t % pieces * kTransposeRows;
                const int64_t rows = std::min(kTransposeRows, p_.m - i0);
                float* ct = scratch + batch * batch_floats + i0;
                float* cb = c + batch * p_.stride_c + i0 * p_.ldc;
                if (into_scratch) transpose_f32(cb, p_.ldc, rows, p_.n, ct, ldt_, avx512_);
                else transpose_f32(ct, ldt_, p_.n, rows, cb, p_.ldc, avx512_);
            };
            if (threads > 1) runner_->parallel_for_in_runs(tasks, threads, piece);
            else for (int64_t t = 0; t < tasks; ++t) piece(t);
        };
        if (p_.beta != 0.0f) transpose(true);
        RunArgs swapped = args;
        swapped.a = args.b;
        swapped.b = args.a;
        swapped.c = scratch;
        inner_->run(swapped);
        transpose(false);
    }
    size_t workspace_bytes() const override { return inner_->workspace_bytes(); }  // (passed through to it)

private:
    static constexpr int64_t kTransposeRows = 256;
    static constexpr int64_t kTransposeFloatsPerThread = 16384;
    std::shared_ptr<Kernel> inner_;
    Problem p_;
    int64_t ldt_;
    bool avx512_;
    std::shared_ptr<const ParallelRunner> runner_;
};

// A low-precision problem of a very short K run in f32 (plan::lowp_widens_to_f32): each call widens A and B into
// the calling thread's scratch (tight rows; one copy of an operand that every batch shares), then runs the f32
// kernel of the widened problem on them. The widening is a few values per C row or column: K of them.
class WidenedF32Kernel final : public Kernel {
public:
    WidenedF32Kernel(std::shared_ptr<Kernel> inner, const Problem& p, const Problem& widened, bool avx512,
                     std::shared_ptr<const ParallelRunner> runner)
        : Kernel(inner->meta()), inner_(std::move(inner)), p_(p), w_(widened), avx512_(avx512),
          runner_(std::move(runner)) {}
    void run(const RunArgs& args) const override {
        const int64_t a_batches = w_.batch > 1 && w_.stride_a == 0 ? 1 : w_.batch;
        const int64_t b_batches = w_.batch > 1 && w_.stride_b == 0 ? 1 : w_.batch;
        const int64_t a_floats = w_.a_rows() * w_.lda, b_floats = w_.b_rows() * w_.ldb;
        float* a32 = thread_scratch<WidenedF32Kernel, 0>(static_cast<size_t>(a_batches * a_floats));
        float* b32 = thread_scratch<WidenedF32Kernel, 1>(static_cast<size_t>(b_batches * b_floats));
        const auto* a = static_cast<const uint8_t*>(args.a);
        const auto* b = static_cast<const uint8_t*>(args.b);
        // Pieces of kWidenValuesPerThread values or more (whole stored rows of one batch's operand) over as many
        // threads as they feed: A's batches first, then B's.
        const int64_t values = a_batches * a_floats + b_batches * b_floats;
        const int threads = static_cast<int>(std::clamp<int64_t>(values / kWidenValuesPerThread, 1,
                                                                 runner_->num_threads()));
        const int64_t a_pieces = pieces_of(a_floats, a_batches, threads, values);
        const int64_t b_pieces = pieces_of(b_floats, b_batches, threads, values);
        auto widen = [&](int64_t t) {
            const bool of_a = t < a_batches * a_pieces;
            const int64_t u = of_a ? t : t - a_batches * a_pieces, pieces = of_a ? a_pieces : b_pieces;
            const int64_t batch = u / pieces, piece = u % pieces;
            const int64_t rows = of_a ? p_.a_rows() : p_.b_rows(), cols = of_a ? p_.a_cols() : p_.b_cols();
            const int64_t r0 = rows * piece / pieces, r1 = rows * (piece + 1) / pieces;
            if (r0 == r1) return;
            const int64_t ld = of_a ? p_.lda : p_.ldb;
            const int64_t esz = dtype_size(of_a ? p_.a_type : p_.b_type);
            const uint8_t* src = (of_a ? a + batch * p_.stride_a * esz : b + batch * p_.stride_b * esz) + r0 * ld * esz;
            float* dst = (of_a ? a32 + batch * a_floats : b32 + batch * b_floats) + r0 * cols;
            widen_to_f32(src, of_a ? p_.a_type : p_.b_type, r1 - r0, cols, ld, dst, avx512_);
        };
        const int64_t tasks = a_batches * a_pieces + b_batches * b_pieces;
        if (threads > 1) runner_->parallel_for_in_runs(tasks, threads, widen);
        else for (int64_t t = 0; t < tasks; ++t) widen(t);
        RunArgs widened = args;
        widened.a = a32;
        widened.b = b32;
        inner_->run(widened);
    }
    size_t workspace_bytes() const override { return inner_->workspace_bytes(); }

private:
    static constexpr int64_t kWidenValuesPerThread = 65536;
    // Pieces per batch of an operand of `floats` values a batch: its share of `threads` by its share of all the
    // values (one piece a batch where the batches alone feed them).
    static int64_t pieces_of(int64_t floats, int64_t batches, int threads, int64_t values) {
        if (threads <= 1 || batches >= threads) return 1;
        const double share = double(floats) * double(batches) / double(std::max<int64_t>(1, values));
        return std::max<int64_t>(1, static_cast<int64_t>(share * threads + 0.5) / batches);
    }
    std::shared_ptr<Kernel> inner_;
    Problem p_, w_;
    bool avx512_;
    std::shared_ptr<const ParallelRunner> runner_;
};

std::unique_ptr<Plan> swapped_operands_plan(std::unique_ptr<Plan> inner) {
    return std::make_unique<WrappedPlan>(std::move(inner), "_swapped", "A and B swapped (C^T = B^T A^T): ", 1,
                                         [](std::shared_ptr<Kernel> k) -> std::shared_ptr<Kernel> {
                                             return std::make_shared<SwappedOperandsKernel>(std::move(k));
                                         });
}

std::unique_ptr<Plan> transposed_c_plan(std::unique_ptr<Plan> inner, const Problem& p, bool avx512,
                                        std::shared_ptr<const ParallelRunner> runner) {
    return std::make_unique<WrappedPlan>(
        std::move(inner), "_ct", "C transposed (C^T = op(B)^T op(A)^T): ", 2,
        [p, avx512, runner](std::shared_ptr<Kernel> k) -> std::shared_ptr<Kernel> {
            return std::make_shared<TransposedCKernel>(std::move(k), p, avx512, runner);
        });
}

std::unique_ptr<Plan> widened_f32_plan(std::unique_ptr<Plan> inner, const Problem& p, bool avx512,
                                       std::shared_ptr<const ParallelRunner> runner) {
    const Problem widened = plan::widened_f32_problem(p);
    return std::make_unique<WrappedPlan>(
        std::move(inner), "_widened", "widened to f32: ", 3,
        [p, widened, avx512, runner](std::shared_ptr<Kernel> k) -> std::shared_ptr<Kernel> {
            return std::make_shared<WidenedF32Kernel>(std::move(k), p, widened, avx512, runner);
        });
}

// Low precision: int8 (AMX, VNNI, widened), bf16 (AMX, vdpbf16ps, via f32), f16 (via f32).
struct LowpFamily {
    using Recipe = plan::X86LowpPlan;
    using KernelType = GemmLowpKernel;
    // 2: vector_math's exp clamp and reciprocal; 3: shared AMX tile configs; 4: AMX panel runs per call;
    // 5: AMX early next-panel loads only from 8 K steps, small B blocks without the T1 hint; 6: AMX calls of one
    // K block in equal short K steps (plan::amx_k_step_bytes); 7: AMX one-step calls of whole tiles as one
    // whole-call function (gemm_amx_whole_generator.hpp); 8: its C tiles rotate singly, ldtilecfg after the first
    // B panel's packing; 9: and K in two equal tile steps; 10: code aligned where it runs (emit_buffer); 11: AMX
    // swapped calls prefetch LowpCallArgs::prefetch in their K loop; 12: int8 calls of one K block round K up
    // to whole dwords (plan::amx_k_reads_rows); 13: erf-GELU's erfc to relative accuracy; 14: bf16 swapped calls
    // read a K block's partial last step from LowpCallArgs::a_last_step; 15: and normal-order bf16 calls with A in
    // place (LowpLayout::a_last_step_copied), panel runs included; 16: runs of panels of one row tile and one K
    // block alternate two sets of C tiles (panel_pairs), the second set configured as the first; 17: fma_f32
    // calls prefetch their C tile over a short K (LowpLayout::c_prefetch); 18: the vector K loops' remainder
    // past 4 iterations as a loop of one step; 19: the whole-call AMX function overlaps tail tiles, copies A rows
    // that K's steps would read past K; 20: and runs three or four K steps, copying only the last step; 21: and
    // leaves the tile configuration to stubs (a call per batch under one configuration); 22: but for a single
    // call (its sixth argument); 23: and no longer serves over three or four steps past 160 products (the kernel
    // refuses an artifact whose whole-call choice differs from amx_whole_call_fits); 24: and visits row tile by
    // row tile over a C of 32 KB; 25: and serves up to 128 C tiles; 26: one-vector tiles of the vdpbf16ps and
    // f32 FMA steps take A by embedded broadcasts; 27: vdpbf16ps tiles read an A in place over an odd K
    static constexpr int kVersion = 27;
    static const char* generator(const Recipe& r) {
        const bool zmm = r.layout.isa >= hw::X86Isa::avx512;
        switch (r.layout.step) {
            case plan::LowpStep::amx_int8: return "x86_int8_amx";
            case plan::LowpStep::amx_bf16: return "x86_bf16_amx";
            case plan::LowpStep::vnni_u8s8: return zmm ? "x86_int8_vnni_avx512" : "x86_int8_avxvnni_avx2";
            case plan::LowpStep::madd_s16: return zmm ? "x86_int8_s16_avx512" : "x86_int8_s16_avx2";
            case plan::LowpStep::dot_bf16: return "x86_bf16_dot_avx512";
            case plan::LowpStep::fma_f32:
                if (r.layout.a_type == JITMM_DTYPE_F16) return zmm ? "x86_f16_f32_avx512" : "x86_f16_f32_avx2";
                return zmm ? "x86_bf16_f32_avx512" : "x86_bf16_f32_avx2";
        }
        return "x86_lowp";
    }
    static Artifact compile(const Problem& p, const Recipe& r) { return compile_gemm_lowp(p, r); }
};

class X86Backend final : public Backend {
public:
    explicit X86Backend(const EngineOptions& o)
        : device_("cpu"),
          runner_(std::make_shared<ParallelRunner>(o.num_threads, o.parallel_for, o.parallel_for_ctx)) {
        const hw::CpuInfo& cpu = hw::cpu_info();
        isa_ = std::min(cpu.best_isa, o.max_isa);
        // The probe asked for the tile permission once per process; a refusal leaves the best tier below amx.
        if (cpu.amx_tile && cpu.best_isa < hw::X86Isa::amx && o.max_isa >= hw::X86Isa::amx)
            verbose_log(std::string("cpu: AMX is present but not usable (") + cpu.amx_note +
                        "); int8 and bf16 run at " + hw::isa_name(isa_));
        // The fingerprint names what changes generated code: the tier and the cache sizes the blocking uses.
        fingerprint_ = std::string("x86 isa=") + hw::isa_name(isa_) + " l1=" + std::to_string(cpu.l1d_bytes) +
                       " l2=" + std::to_string(cpu.l2_bytes) + " l3=" + std::to_string(cpu.l3_bytes);
    }

    const std::string& device() const override { return device_; }
    const std::string& fingerprint() const override { return fingerprint_; }

    std::unique_ptr<Plan> plan(const Problem& p) const override { return plan(p, true); }

    // c_transposable: false for the swapped problem of a C computed transposed (never swapped back).
    std::unique_ptr<Plan> plan(const Problem& p, bool c_transposable) const {
        // One row of A stored K x 1 (lda 1) is the same K values as a row stored 1 x K: planned as that, the
        // decode paths serve it (1 thread, 1x4096x4096 TT f32: 5.8 ms on the broadcast tiles, 0.75x oneDNN).
        if (p.m == 1 && p.trans_a && p.lda == 1) {
            Problem row = p;
            row.trans_a = false;
            row.lda = p.k;
            return plan(row, c_transposable);
        }
        // Likewise one column of B stored K x 1 (ldb 1) is a row stored 1 x K: a matrix-vector product, read as
        // NT the dot paths sum along K in vectors (1 thread, 1x1x3664 f32: 4.0 us on a broadcast tile's one
        // serial FMA chain).
        if (p.n == 1 && !p.trans_b && p.ldb == 1 && p.k > 1) {
            Problem column = p;
            column.trans_b = true;
            column.ldb = p.k;
            return plan(column, c_transposable);
        }
        // K = 1 (an outer product): an A stored 1 x M holds the same M values as an M x 1 column of stride 1,
        // and a B stored N x 1 with stride 1 the same N values as a 1 x N row; planned untransposed, neither is
        // packed for a transpose.
        if (p.k == 1 && !plan::is_lowp_problem(p) && (p.trans_a || (p.trans_b && p.ldb == 1))) {
            Problem outer = p;
            if (p.trans_a) {
                outer.trans_a = false;
                outer.lda = 1;
            }
            if (p.trans_b && p.ldb == 1) {
                outer.trans_b = false;
                outer.ldb = p.n;
            }
            return plan(outer, c_transposable);
        }
        if (serves_as_swapped(p)) return swapped_operands_plan(plan(swapped_operands(p)));
        if (c_transposable && plan::is_lowp_problem(p) && plan::lowp_serves_with_c_transposed(p, isa_, hw::cpu_info()))
            return transposed_c_plan(plan(c_transposed_problem(p), false), p, isa_ >= hw::X86Isa::avx512, runner_);
        if (plan::is_lowp_problem(p)) {
            const std::string why = plan::lowp_unsupported_reason(p, hw::cpu_info(), isa_);
            if (!why.empty())
                fail(JITMM_STATUS_UNSUPPORTED, std::string("cpu (") + hw::isa_name(isa_) + "): no kernel for a_type=" +
                                                   dtype_name_or_null(p.a_type) + " b_type=" +
                                                   dtype_name_or_null(p.b_type) + " c_type=" +
                                                   dtype_name_or_null(p.c_type) + ": " + why);
            if (plan::lowp_widens_to_f32(p, isa_, hw::cpu_info())) {
                if (auto widened = widened_plan(p)) return widened;
            }
            return std::make_unique<X86Plan<LowpFamily>>(
                p, plan::plan_x86_lowp(p, hw::cpu_info(), isa_, runner_->num_threads()), runner_);
        }
        const bool all_f32 = p.a_type == JITMM_DTYPE_F32 && p.b_type == JITMM_DTYPE_F32 &&
                             p.c_type == JITMM_DTYPE_F32 && (p.bias == BiasKind::none || p.bias_type == JITMM_DTYPE_F32);
        if (!all_f32)
            fail(JITMM_STATUS_UNSUPPORTED, std::string("cpu: no kernel for a_type=") + dtype_name_or_null(p.a_type) +
                                               " b_type=" + dtype_name_or_null(p.b_type) + " c_type=" +
                                               dtype_name_or_null(p.c_type) +
                                               (p.bias != BiasKind::none
                                                    ? std::string(" bias_type=") + dtype_name_or_null(p.bias_type)
                                                    : std::string()) +
                                               " (x86 kernels take f32 inputs with f32 C and bias, or s8/u8, bf16, "
                                               "f16 inputs)");
        if (isa_ < hw::X86Isa::avx2)
            fail(JITMM_STATUS_UNSUPPORTED, "cpu: this CPU has no AVX2+FMA (or the cap is below avx2); jitmm needs at "
                                           "least the avx2 tier");
        if (c_transposable && plan::serves_with_c_transposed(p, hw::cpu_info(), isa_, runner_->num_threads()))
            return transposed_c_plan(plan(c_transposed_problem(p), false), p, isa_ >= hw::X86Isa::avx512, runner_);
        if (plan::gemv_serves(p, hw::cpu_info(), isa_, runner_->num_threads()))
            return std::make_unique<X86Plan<GemvF32Family>>(
                p, plan::plan_x86_gemm_f32_gemv(p, hw::cpu_info(), isa_, runner_->num_threads()), runner_);
        // Few rows over many columns of a transposed B and a short K: C^T = B A^T, many rows over few columns,
        // on the k-group kernel storing its rows as C's columns (plan::kgroup_serves_swapped).
        if (plan::kgroup_serves_swapped(p, isa_)) {
            const Problem s = plan::transposed_product_problem(p);
            plan::X86KGroupPlan recipe =
                plan::plan_x86_gemm_f32_kgroup(s, hw::cpu_info(), isa_, runner_->num_threads());
            recipe.layout.c_transposed = true;
            return swapped_operands_plan(std::make_unique<X86Plan<KGroupF32Family>>(s, std::move(recipe), runner_));
        }
        if (plan::kgroup_serves(p, isa_))
            return std::make_unique<X86Plan<KGroupF32Family>>(
                p, plan::plan_x86_gemm_f32_kgroup(p, hw::cpu_info(), isa_, runner_->num_threads()), runner_);
        if (plan::dot_family_serves(p, isa_))
            return std::make_unique<X86Plan<DotF32Family>>(
                p, plan::plan_x86_gemm_f32_dot(p, hw::cpu_info(), isa_, runner_->num_threads()), runner_);
        return std::make_unique<X86Plan<BroadcastF32Family>>(
            p, plan::plan_x86_gemm_f32(p, hw::cpu_info(), isa_, runner_->num_threads()), runner_);
    }

    // The f32 plan of a widened low-precision problem (plan::lowp_widens_to_f32), or null where its s32 C cannot
    // be stored by the broadcast tiles (an s32 C needs their store_s32 epilogue over one K block, C never read).
    std::unique_ptr<Plan> widened_plan(const Problem& p) const {
        const Problem w = plan::widened_f32_problem(p);
        const bool avx512 = isa_ >= hw::X86Isa::avx512;
        if (p.c_type == JITMM_DTYPE_F32) return widened_f32_plan(plan(w, true), p, avx512, runner_);
        plan::X86GemmPlan recipe = plan::plan_x86_gemm_f32(w, hw::cpu_info(), isa_, runner_->num_threads());
        if (recipe.kc < w.k || recipe.k_split_ready) return nullptr;
        recipe.layout.store_s32 = true;
        return widened_f32_plan(std::make_unique<X86Plan<BroadcastF32Family>>(w, recipe, runner_), p, avx512, runner_);
    }

    std::string describe(jitmm_report_format format) const override {
        const hw::CpuInfo& cpu = hw::cpu_info();
        if (format == JITMM_REPORT_JSON)
            return std::string("{\"device\": \"cpu\", \"isa\": \"") + hw::isa_name(isa_) + "\", \"threads\": " +
                   std::to_string(runner_->num_threads()) + ", \"probe\": " + hw::cpu_report_json(cpu) + "}";
        return std::string("device: cpu\nisa (after cap): ") + hw::isa_name(isa_) +
               "\nthreads: " + std::to_string(runner_->num_threads()) + "\n" + hw::cpu_report_text(cpu);
    }

private:
    std::string device_;
    std::string fingerprint_;
    hw::X86Isa isa_ = hw::X86Isa::none;
    std::shared_ptr<ParallelRunner> runner_;
};

}  // namespace

std::unique_ptr<Backend> make_x86_backend(const EngineOptions& options) {
    return std::make_unique<X86Backend>(options);
}

}  // namespace jitmm::x86
