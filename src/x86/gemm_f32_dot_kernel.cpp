#include "x86/gemm_f32_dot_kernel.hpp"

#include "core/error.hpp"
#include "x86/gemm_f32_generator.hpp"
#include "x86/transpose_a_rows.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace jitmm::x86 {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Entry slots: 4 whole-K (row tail x column tail), 8 K-split parts (x last part), the split finish.
constexpr int kDotSlots = 4 + 8 + 1;

// Per-thread scratch for K-split partial sums (owned by the calling thread for the duration of a run).
float* split_scratch(size_t floats) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    return buffer.data();
}

// Per-thread rows of a transposed operand (owned by the thread that copies into them: the calling thread for a
// whole run, whose tasks on other threads only read them, or the thread running a task): one buffer for A's rows
// (kARows) and one for B's (kBRows). 64-byte aligned: the row stride is whole lines, so every row starts on a line.
enum ScratchUse { kARows = 0, kBRows = 1 };
float* transposed_rows_scratch(ScratchUse use, size_t floats) {
    struct Aligned {
        std::vector<float> storage;
        float* data = nullptr;
        size_t size = 0;
    };
    thread_local Aligned buffers[2];
    Aligned& buffer = buffers[use];
    if (buffer.size < floats) {
        buffer.storage.assign(floats + 16, 0.0f);
        const auto address = reinterpret_cast<uintptr_t>(buffer.storage.data());
        buffer.data = buffer.storage.data() + ((64 - address % 64) % 64) / sizeof(float);
        buffer.size = floats;
    }
    return buffer.data;
}

// An operand stored K x count (rows ld_src apart, batches stride apart) copied into its count rows of K, ld apart,
// in the scratch `use`: a copy per batch that has its own (stride 0: one for all). Returns the rows' batch stride.
int64_t copy_into_rows(ScratchUse use, const float* src, int64_t ld_src, int64_t stride, int64_t batch, int64_t count,
                       int64_t k, int64_t ld, bool avx512, const float** rows_out) {
    const int64_t copies = stride == 0 ? 1 : batch;
    float* rows = transposed_rows_scratch(use, static_cast<size_t>(copies * count * ld));
    for (int64_t b = 0; b < copies; ++b)
        transpose_a_to_rows(src + b * stride, ld_src, count, k, rows + b * count * ld, ld, avx512);
    *rows_out = rows;
    return copies == 1 ? 0 : count * ld;
}

}  // namespace

Artifact compile_gemm_f32_dot(const Problem& p, const plan::X86DotPlan& plan) {
    const int mr = plan.layout.mr, nj = plan.layout.nj;
    const int row_kinds[2] = {mr, static_cast<int>(p.m % mr)};
    const int col_kinds[2] = {nj, static_cast<int>(p.n % nj)};
    std::vector<DotVariant> variants;
    std::vector<int> slots;
    for (int rt = 0; rt < 2; ++rt) {
        if (row_kinds[rt] == 0 || (rt == 0 && p.m < mr)) continue;
        for (int ct = 0; ct < 2; ++ct) {
            if (col_kinds[ct] == 0 || (ct == 0 && p.n < nj)) continue;
            variants.push_back(DotVariant{row_kinds[rt], col_kinds[ct]});
            slots.push_back(rt * 2 + ct);
            if (!plan.k_split_ready) continue;
            for (int last = 0; last < 2; ++last) {
                variants.push_back(DotVariant{row_kinds[rt], col_kinds[ct], true, last == 1});
                slots.push_back(4 + (rt * 2 + ct) * 2 + last);
            }
        }
    }
    SplitFinishLayout finish;
    finish.isa = plan.layout.isa;
    finish.n = p.n;
    finish.beta = p.beta;
    finish.bias = p.bias;
    finish.activation = p.activation;
    GeneratedDotCode code = generate_gemm_f32_dot(plan.layout, variants, plan.k_split_ready ? &finish : nullptr);
    Artifact artifact;
    artifact.kind = "x86.bin";
    artifact.payload = std::move(code.bytes);
    artifact.ints.assign(kDotSlots, -1);
    for (size_t i = 0; i < slots.size(); ++i) artifact.ints[slots[i]] = static_cast<int64_t>(code.entries[i]);
    if (plan.k_split_ready) artifact.ints[kDotSlots - 1] = static_cast<int64_t>(code.entries.back());
    return artifact;
}

GemmF32DotKernel::GemmF32DotKernel(KernelMeta meta, const Problem& p, const plan::X86DotPlan& plan,
                                   std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact)
    : Kernel(std::move(meta)), p_(p), plan_(plan), runner_(std::move(runner)) {
    if (artifact.ints.size() != kDotSlots)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 dot kernel: artifact has " + std::to_string(artifact.ints.size()) +
                                              " entry slots, expected " + std::to_string(kDotSlots));
    code_ = std::make_unique<ExecMemory>(artifact.payload.data(), artifact.payload.size());
    for (int slot = 0; slot < kDotSlots; ++slot) {
        const int64_t offset = artifact.ints[slot];
        if (offset < 0) continue;
        if (offset >= static_cast<int64_t>(artifact.payload.size()))
            fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 dot kernel: entry offset outside the code");
        void* entry = const_cast<uint8_t*>(code_->entry(static_cast<size_t>(offset)));
        if (slot < 4) fns_[slot / 2][slot % 2] = reinterpret_cast<DotFn>(entry);
        else if (slot < 12) parts_[(slot - 4) / 4][((slot - 4) / 2) % 2][(slot - 4) % 2] = reinterpret_cast<DotPartFn>(entry);
        else finish_ = reinterpret_cast<DotFn>(entry);
    }
    if (plan_.k_splits > 1 && finish_ == nullptr)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 dot kernel: the plan splits K but the artifact has no finish");
}

// A stored K x M is copied into rows where every task reads it: per batch inside the task where each batch is
// one task (the rows stay in cache and only one batch's rows are held per thread), else once per call before
// any task runs (N chunks or K parts of a batch all read the same rows). Either way the kernels read the same
// values, so the results do not depend on how the threads split the work. A shared A (stride 0) is copied once.
bool GemmF32DotKernel::copies_a_per_task() const {
    return plan_.a_transposed && plan_.n_chunks == 1 && plan_.m_chunks == 1 && plan_.k_splits <= 1;
}

GemmF32DotKernel::ARows GemmF32DotKernel::a_rows(const float* a) const {
    if (!plan_.a_transposed || copies_a_per_task()) return ARows{a, p_.stride_a};
    ARows rows{};
    rows.stride = copy_into_rows(kARows, a, p_.lda, p_.stride_a, p_.batch, p_.m, p_.k, plan_.layout.lda, avx512(),
                                 &rows.a);
    return rows;
}

// A B stored K x N (few columns) is copied into its N rows of K once per call, before any task runs (every
// row tile reads all of them; a shared B, stride 0, once).
GemmF32DotKernel::BRows GemmF32DotKernel::b_rows(const float* b) const {
    if (!plan_.b_transposed) return BRows{b, p_.stride_b};
    BRows rows{};
    rows.stride = copy_into_rows(kBRows, b, p_.ldb, p_.stride_b, p_.batch, p_.n, p_.k, plan_.layout.ldb, avx512(),
                                 &rows.b);
    return rows;
}

void GemmF32DotKernel::run(const RunArgs& args) const {
    const BRows b = b_rows(static_cast<const float*>(args.b));
    const float* bt = b.b;
    auto* c = static_cast<float*>(args.c);
    const auto* bias = static_cast<const float*>(args.bias);
    if (plan_.k_splits > 1) {
        run_split(a_rows(static_cast<const float*>(args.a)), b, c, bias);
        return;
    }
    const ARows a = a_rows(static_cast<const float*>(args.a));
    const int64_t nj = plan_.layout.nj;
    const int64_t mr = plan_.layout.mr;
    const int64_t chunks = int64_t(plan_.n_chunks) * plan_.m_chunks;
    const int64_t tasks = p_.batch * chunks;
    auto task = [&](int64_t t) {
        const int64_t batch = t / chunks, part = (t % chunks) % plan_.n_chunks, row_part = (t % chunks) / plan_.n_chunks;
        const int64_t tiles = ceil_div(p_.n, nj), row_tiles = ceil_div(p_.m, mr);
        const int64_t n0 = std::min(p_.n, tiles * part / plan_.n_chunks * nj);
        const int64_t n1 = std::min(p_.n, tiles * (part + 1) / plan_.n_chunks * nj);
        const int64_t m0 = std::min(p_.m, row_tiles * row_part / plan_.m_chunks * mr);
        const int64_t m1 = std::min(p_.m, row_tiles * (row_part + 1) / plan_.m_chunks * mr);
        if (n0 >= n1 || m0 >= m1) return;
        const float* a_batch = a.a + batch * a.stride;
        if (copies_a_per_task()) {
            float* rows = transposed_rows_scratch(kARows, static_cast<size_t>(p_.m * plan_.layout.lda));
            transpose_a_to_rows(a_batch, p_.lda, p_.m, p_.k, rows, plan_.layout.lda, avx512());
            a_batch = rows;
        }
        run_chunk(a_batch, bt + batch * b.stride, c + batch * p_.stride_c, bias, m0, m1, n0, n1);
    };
    if (plan_.threads <= 1) {
        for (int64_t t = 0; t < tasks; ++t) task(t);
    } else {
        runner_->parallel_for(tasks, task);
    }
}

// Column tiles outermost: a tile's nj rows of B stream once while the few rows of A stay in cache.
void GemmF32DotKernel::run_chunk(const float* a, const float* bt, float* c, const float* bias, int64_t m0,
                                 int64_t m1, int64_t n0, int64_t n1) const {
    const int64_t mr = plan_.layout.mr, nj = plan_.layout.nj;
    auto tile = [&](int64_t i, int64_t j) {
        const float* bias_tile =
            p_.bias == BiasKind::per_column ? bias + j : p_.bias == BiasKind::per_row ? bias + i : nullptr;
        fns_[i + mr > p_.m][j + nj > p_.n](a + i * plan_.layout.lda, bt + j * plan_.layout.ldb, c + i * p_.ldc + j, bias_tile);
    };
    if (plan_.rows_outer) {
        for (int64_t i = m0; i < m1; i += mr)
            for (int64_t j = n0; j < n1; j += nj) tile(i, j);
    } else {
        for (int64_t j = n0; j < n1; j += nj)
            for (int64_t i = m0; i < m1; i += mr) tile(i, j);
    }
}

// K split: every (batch, K part) is a task writing alpha * its partial sums for every column tile into a
// C-shaped scratch slab per part (A's part read once per task, each B row's part once); run_k_split adds
// the parts in part order and applies beta * C, bias and activation. Part boundaries fall on whole
// iterations; the last part also runs the rest of K.
void GemmF32DotKernel::run_split(const ARows& a, const BRows& b, float* c, const float* bias) const {
    const int parts = plan_.k_splits;
    const int64_t mr = plan_.layout.mr, nj = plan_.layout.nj;
    const int64_t step = int64_t(plan_.layout.k_unroll) * vector_length(plan_.layout.isa);
    const int64_t iterations = p_.k / step;
    SplitRun r;
    r.batch = p_.batch;
    r.m = p_.m;
    r.n = p_.n;
    r.ldc = p_.ldc;
    r.stride_c = p_.stride_c;
    r.parts = parts;
    r.threads = plan_.threads;
    r.bias_kind = p_.bias;
    r.bias = bias;
    r.c = c;
    r.scratch = split_scratch(static_cast<size_t>(p_.batch * parts * p_.m * p_.ldc));
    r.finish = finish_;
    run_k_split(*runner_, r, [&](int64_t batch, int part, int /*chunk: one per part*/, float* slab) {
        const int64_t it0 = iterations * part / parts, it1 = iterations * (part + 1) / parts;
        const int last = part + 1 == parts ? 1 : 0;
        const float* ab = a.a + batch * a.stride + it0 * step;
        for (int64_t j = 0; j < p_.n; j += nj) {
            const float* bb = b.b + batch * b.stride + j * plan_.layout.ldb + it0 * step;
            const bool col_tail = j + nj > p_.n;
            for (int64_t i = 0; i < p_.m; i += mr)
                parts_[i + mr > p_.m][col_tail][last](ab + i * plan_.layout.lda, bb, slab + i * p_.ldc + j, nullptr, it1 - it0);
        }
    });
}

}  // namespace jitmm::x86
