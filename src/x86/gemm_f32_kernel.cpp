#include "x86/gemm_f32_kernel.hpp"

#include "core/dump.hpp"
#include "x86/pack_b.hpp"

#include <algorithm>
#include <vector>

namespace jitmm::x86 {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Per-thread scratch for packed B panels, grown on demand and kept for the thread's lifetime.
float* pack_buffer(size_t floats) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    return buffer.data();
}

// Splits [0, tiles) into `parts` near-equal tile ranges; returns part's range scaled to elements.
void chunk_range(int64_t extent, int64_t tile, int64_t parts, int64_t part, int64_t* begin, int64_t* end) {
    const int64_t tiles = ceil_div(extent, tile);
    const int64_t t0 = tiles * part / parts, t1 = tiles * (part + 1) / parts;
    *begin = std::min(extent, t0 * tile);
    *end = std::min(extent, t1 * tile);
}

}  // namespace

GemmF32Kernel::GemmF32Kernel(KernelMeta meta, const Problem& p, const plan::X86GemmPlan& plan,
                             std::shared_ptr<const ParallelRunner> runner)
    : Kernel(std::move(meta)), p_(p), plan_(plan), runner_(std::move(runner)) {
    const int mr = plan_.layout.mr, nr = plan_.nr();
    k_blocks_ = ceil_div(p_.k, plan_.kc);
    const int64_t last_k = p_.k - (k_blocks_ - 1) * plan_.kc;

    // Only the variants this shape reaches: full and tail rows/columns, and the K-block phases.
    std::vector<UkernelVariant> variants;
    std::vector<UkernelFn*> slots;
    const int row_kinds[2] = {mr, static_cast<int>(p_.m % mr)};
    const int col_kinds[2] = {nr, static_cast<int>(p_.n % nr)};
    for (int rt = 0; rt < 2; ++rt) {
        if (row_kinds[rt] == 0 || (rt == 0 && p_.m < mr)) continue;
        for (int ct = 0; ct < 2; ++ct) {
            if (col_kinds[ct] == 0 || (ct == 0 && p_.n < nr)) continue;
            for (int ph = 0; ph < kPhaseCount; ++ph) {
                const bool wanted = k_blocks_ == 1 ? ph == kSingle
                                                   : (ph == kFirst || ph == kLast || (ph == kMiddle && k_blocks_ > 2));
                if (!wanted) continue;
                UkernelVariant v;
                v.rows = row_kinds[rt];
                v.cols = col_kinds[ct];
                v.k_len = (ph == kSingle) ? p_.k : (ph == kLast ? last_k : plan_.kc);
                v.first = ph == kSingle || ph == kFirst;
                v.last = ph == kSingle || ph == kLast;
                variants.push_back(v);
                slots.push_back(&fns_[rt][ct][ph]);
            }
        }
    }
    const GeneratedCode code = generate_gemm_f32(plan_.layout, variants);
    if (dump_enabled()) {
        dump_artifact(this->meta().key, "x86.bin", code.bytes.data(), code.bytes.size());
        std::string listing = this->meta().generator + "\n" + this->meta().recipe + "\nentries:";
        for (size_t i = 0; i < variants.size(); ++i)
            listing += "\n  rows=" + std::to_string(variants[i].rows) + " cols=" + std::to_string(variants[i].cols) +
                       " k=" + std::to_string(variants[i].k_len) + (variants[i].first ? " first" : "") +
                       (variants[i].last ? " last" : "") + " offset=" + std::to_string(code.entries[i]);
        listing += "\n";
        dump_artifact(this->meta().key, "x86.txt", listing.data(), listing.size());
    }
    code_ = std::make_unique<ExecMemory>(code.bytes.data(), code.bytes.size());
    set_code_size(code.bytes.size());
    for (size_t i = 0; i < slots.size(); ++i)
        *slots[i] = reinterpret_cast<UkernelFn>(const_cast<uint8_t*>(code_->entry(code.entries[i])));
}

void GemmF32Kernel::run(const RunArgs& args) const {
    const auto* a = static_cast<const float*>(args.a);
    const auto* b = static_cast<const float*>(args.b);
    auto* c = static_cast<float*>(args.c);
    const auto* bias = static_cast<const float*>(args.bias);
    const int64_t per_batch = int64_t(plan_.m_chunks) * plan_.n_chunks;
    const int64_t tasks = p_.batch * per_batch;
    auto task = [&](int64_t t) {
        const int64_t batch = t / per_batch, part = t % per_batch;
        int64_t m0, m1, n0, n1;
        chunk_range(p_.m, plan_.layout.mr, plan_.m_chunks, part / plan_.n_chunks, &m0, &m1);
        chunk_range(p_.n, plan_.nr(), plan_.n_chunks, part % plan_.n_chunks, &n0, &n1);
        if (m0 >= m1 || n0 >= n1) return;
        run_chunk(a + batch * p_.stride_a, b + batch * p_.stride_b, c + batch * p_.stride_c, bias, m0, m1, n0, n1);
    };
    if (plan_.threads <= 1) {
        for (int64_t t = 0; t < tasks; ++t) task(t);
    } else {
        runner_->parallel_for(tasks, task);
    }
}

// GotoBLAS order: N blocks, K blocks (pack B once per block), M blocks, then the register tiles, the
// B micro-panel (kc x nr) staying in L1 while the row tiles stream past it.
void GemmF32Kernel::run_chunk(const float* a, const float* b, float* c, const float* bias, int64_t m0, int64_t m1,
                              int64_t n0, int64_t n1) const {
    const int64_t mr = plan_.layout.mr, nr = plan_.nr();
    for (int64_t jc = n0; jc < n1; jc += plan_.nc) {
        const int64_t n_cur = std::min(plan_.nc, n1 - jc);
        for (int64_t kb = 0; kb < k_blocks_; ++kb) {
            const int64_t k0 = kb * plan_.kc;
            const int64_t k_len = std::min(plan_.kc, p_.k - k0);
            const Phase phase = k_blocks_ == 1 ? kSingle : kb == 0 ? kFirst : kb + 1 == k_blocks_ ? kLast : kMiddle;
            float* panels = nullptr;
            if (plan_.pack_b) {
                panels = pack_buffer(static_cast<size_t>(ceil_div(n_cur, nr) * nr * k_len));
                pack_b_f32(b, p_.ldb, p_.trans_b, k0, k_len, jc, n_cur, static_cast<int>(nr), panels);
            }
            for (int64_t ic = m0; ic < m1; ic += plan_.mc) {
                const int64_t m_end = std::min(m1, ic + plan_.mc);
                for (int64_t jr = jc; jr < jc + n_cur; jr += nr) {
                    const bool col_tail = jr + nr > p_.n;
                    const float* b_tile = plan_.pack_b ? panels + ((jr - jc) / nr) * k_len * nr : b + k0 * p_.ldb + jr;
                    for (int64_t ir = ic; ir < m_end; ir += mr) {
                        const bool row_tail = ir + mr > p_.m;
                        const float* a_tile = p_.trans_a ? a + k0 * p_.lda + ir : a + ir * p_.lda + k0;
                        const float* bias_tile =
                            p_.bias == BiasKind::per_column ? bias + jr : p_.bias == BiasKind::per_row ? bias + ir : nullptr;
                        ukernel(row_tail, col_tail, phase)(a_tile, b_tile, c + ir * p_.ldc + jr, bias_tile);
                    }
                }
            }
        }
    }
}

}  // namespace jitmm::x86
