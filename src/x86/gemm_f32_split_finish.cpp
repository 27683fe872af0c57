#include "x86/gemm_f32_split_finish.hpp"

#include "x86/gemm_f32_generator.hpp"

#include <algorithm>
#include <atomic>
#include <memory>

namespace jitmm::x86 {

using Xbyak::Xmm;

// Register plan (System V): rdi = partial row, rdx = C row, rcx = bias.
size_t emit_split_finish(Xbyak::CodeGenerator& g, ConstantPool& pool, VectorMath& math, const SplitFinishLayout& f) {
    const bool avx512 = f.isa >= hw::X86Isa::avx512;
    const int vlen = vector_length(f.isa);
    auto vreg = [&](int i) { return avx512 ? Xmm(Xbyak::Operand::ZMM, i) : Xmm(Xbyak::Operand::YMM, i); };
    const Xmm x = vreg(0), t0 = vreg(1), t1 = vreg(2), t2 = vreg(3), mask = vreg(4);
    const int64_t nvec = (f.n + vlen - 1) / vlen;
    const int tail = static_cast<int>(f.n % vlen);
    Xbyak::Label table;

    g.align(16);
    const size_t entry = g.getSize();
    if (tail != 0) {
        if (avx512) {
            g.mov(g.eax, (1u << tail) - 1);
            g.kmovw(g.k1, g.eax);
        } else {
            g.vmovups(mask, g.ptr[g.rip + table + (8 - tail) * 4]);
        }
    }
    auto load = [&](const Xmm& dst, const Xbyak::Address& src, bool masked) {
        if (!masked) g.vmovups(dst, src);
        else if (avx512) g.vmovups(dst | g.k1 | g.T_z, src);
        else g.vmaskmovps(dst, mask, src);
    };
    for (int64_t j = 0; j < nvec; ++j) {
        const bool masked = tail != 0 && j == nvec - 1;
        const int32_t off = static_cast<int32_t>(j * vlen * 4);
        load(x, g.ptr[g.rdi + off], masked);
        if (f.beta != 0.0f) {
            load(t0, g.ptr[g.rdx + off], masked);
            if (f.beta == 1.0f) g.vaddps(x, x, t0);
            else g.vfmadd231ps(x, t0, pool(f.beta));
        }
        if (f.bias == BiasKind::per_row) {
            g.vbroadcastss(t0, g.ptr[g.rcx]);
            g.vaddps(x, x, t0);
        } else if (f.bias == BiasKind::per_column) {
            load(t0, g.ptr[g.rcx + off], masked);
            g.vaddps(x, x, t0);
        }
        math.apply(f.activation, x, t0, t1, t2);
        if (!masked) g.vmovups(g.ptr[g.rdx + off], x);
        else if (avx512) g.vmovups(g.ptr[g.rdx + off] | g.k1, x);
        else g.vmaskmovps(g.ptr[g.rdx + off], mask, x);
    }
    g.vzeroupper();
    g.ret();
    if (tail != 0 && !avx512) {
        g.align(32);
        g.L(table);
        for (int i = 0; i < 8; ++i) g.dd(0xffffffffu);
        for (int i = 0; i < 8; ++i) g.dd(0);
    }
    return entry;
}

void sum_partials(float* p0, int64_t part_stride, int parts, int64_t n) {
    for (int s = 1; s < parts; ++s) {
        const float* ps = p0 + s * part_stride;
        for (int64_t j = 0; j < n; ++j) p0[j] += ps[j];
    }
}

namespace {
std::atomic<int64_t> fused_finish_max{kSplitFusedFinishMax};
}  // namespace

int64_t set_split_fused_finish_max(int64_t floats) { return fused_finish_max.exchange(floats); }

void run_k_split(const ParallelRunner& runner, const SplitRun& r,
                 const std::function<void(int64_t batch, int part, int chunk, float* slab)>& part) {
    const int64_t slab = r.m * r.ldc;
    auto finish_rows = [&](int64_t batch, int64_t i0, int64_t i1) {
        float* slabs = r.scratch + batch * r.parts * slab;
        float* cb = r.c + batch * r.stride_c;
        for (int64_t i = i0; i < i1; ++i) {
            float* row = slabs + i * r.ldc;
            sum_partials(row, slab, r.parts, r.n);
            r.finish(row, nullptr, cb + i * r.ldc, r.bias_kind == BiasKind::per_row ? r.bias + i : r.bias);
        }
    };
    const bool fused = int64_t(r.parts) * r.m * r.n <= fused_finish_max.load(std::memory_order_relaxed);
    const int64_t per_batch = int64_t(r.parts) * r.n_chunks;
    auto run_task = [&](int64_t t) {
        const int64_t batch = t / per_batch;
        const int p = static_cast<int>(t % per_batch / r.n_chunks);
        part(batch, p, static_cast<int>(t % r.n_chunks), r.scratch + (batch * r.parts + p) * slab);
        return batch;
    };
    if (fused) {
        // Each part's slab writes are released by its increment; the increment that completes the batch
        // acquires them all (a chain of read-modify-writes).
        std::unique_ptr<std::atomic<int>[]> done(new std::atomic<int>[static_cast<size_t>(r.batch)]);
        for (int64_t b = 0; b < r.batch; ++b) done[b].store(0, std::memory_order_relaxed);
        runner.parallel_for(r.batch * per_batch, [&](int64_t t) {
            const int64_t batch = run_task(t);
            if (done[batch].fetch_add(1, std::memory_order_acq_rel) + 1 == per_batch) finish_rows(batch, 0, r.m);
        });
        return;
    }
    runner.parallel_for(r.batch * per_batch, [&](int64_t t) { run_task(t); });
    const int64_t groups = std::max<int64_t>(1, std::min<int64_t>(r.m, r.threads));
    runner.parallel_for(r.batch * groups, [&](int64_t t) {
        const int64_t batch = t / groups, g = t % groups;
        finish_rows(batch, r.m * g / groups, r.m * (g + 1) / groups);
    });
}

}  // namespace jitmm::x86
