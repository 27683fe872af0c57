#include "x86/gemm_f32_kernel.hpp"

#include "core/error.hpp"
#include "x86/pack.hpp"
#include "x86/thread_scratch.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace jitmm::x86 {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Per-thread scratch for packed panels (Slot 0: A, 1 and 3: B, 2: K-split partial sums; see thread_scratch).
template <int Slot>
float* pack_buffer(size_t floats) {
    return thread_scratch<GemmF32Kernel, Slot>(floats);
}

// Splits [0, tiles) into `parts` near-equal tile ranges; returns part's range scaled to elements.
void chunk_range(int64_t extent, int64_t tile, int64_t parts, int64_t part, int64_t* begin, int64_t* end) {
    const int64_t tiles = ceil_div(extent, tile);
    const int64_t t0 = tiles * part / parts, t1 = tiles * (part + 1) / parts;
    *begin = std::min(extent, t0 * tile);
    *end = std::min(extent, t1 * tile);
}

}  // namespace

Artifact compile_gemm_f32(const Problem& p, const plan::X86GemmPlan& plan) {
    const int mr = plan.layout.mr, nr = plan.nr();
    const int64_t k_blocks = ceil_div(p.k, plan.kc);
    const int64_t last_k = p.k - (k_blocks - 1) * plan.kc;

    // Only the variants this shape reaches: full and tail rows/columns, and the K-block phases. A single call
    // runs nothing but its own function, so it needs none (emitting them doubled its code and JIT time).
    std::vector<UkernelVariant> variants;
    std::vector<int> slots;
    using K = GemmF32Kernel;
    const int row_kinds[K::kRowKindCount] = {mr, static_cast<int>(p.m % mr), mr};
    const int col_kinds[2] = {nr, static_cast<int>(p.n % nr)};
    for (int rt = 0; rt < K::kRowKindCount && !plan.single_call && !plan.row_sweep; ++rt) {
        if (row_kinds[rt] == 0 || (rt != K::kTailRows && p.m < mr)) continue;
        if (rt == K::kPackingRows && !plan.pack_b_fused) continue;
        for (int ct = 0; ct < 2; ++ct) {
            if (col_kinds[ct] == 0 || (ct == 0 && p.n < nr)) continue;
            for (int ph = 0; ph < K::kPhaseCount; ++ph) {
                bool wanted = k_blocks == 1 ? ph == K::kSingle
                                            : (ph == K::kFirst || ph == K::kLast || (ph == K::kMiddle && k_blocks > 2));
                if (plan.k_split_ready && (ph == K::kPartFirst || ph == K::kPartFirstTail || ph == K::kPartLast))
                    wanted = true;
                if (!wanted) continue;
                UkernelVariant v;
                v.rows = row_kinds[rt];
                v.cols = col_kinds[ct];
                const bool tail_block = ph == K::kLast || ph == K::kPartFirstTail || ph == K::kPartLast;
                v.k_len = (ph == K::kSingle) ? p.k : (tail_block ? last_k : plan.kc);
                v.first = ph == K::kSingle || ph == K::kFirst || ph == K::kPartFirst || ph == K::kPartFirstTail;
                v.last = ph == K::kSingle || ph == K::kLast || ph == K::kPartFirstTail || ph == K::kPartLast;
                v.partial = ph >= K::kPartFirst;
                v.packs_b = rt == K::kPackingRows;
                // Packing variants only for the full width over whole K blocks: each K loop body more costs JIT
                // time (70x855x3712: 95 us with all of them, 66 without the last block's, 51 without the column
                // tail's either) for a few percent at most (83x154x1415 TN 168 -> 173 us); the rest is copied
                // (run_chunk).
                // (Nor for K-split parts, whose bodies are their own: the parts copy.)
                if (v.packs_b && (ct == 1 || v.partial || !(k_blocks == 1 || v.k_len == plan.kc))) continue;
                variants.push_back(v);
                slots.push_back((rt * 2 + ct) * K::kPhaseCount + ph);
            }
        }
    }
    std::vector<PlacedTile> whole;
    if (plan.single_call) {
        for (int64_t ir = 0; ir < p.m; ir += mr) {
            for (int64_t jr = 0; jr < p.n; jr += nr) {
                PlacedTile t;
                t.variant.rows = static_cast<int>(std::min<int64_t>(mr, p.m - ir));
                t.variant.cols = static_cast<int>(std::min<int64_t>(nr, p.n - jr));
                t.variant.k_len = p.k;
                t.a_offset = (p.trans_a ? ir : ir * p.lda) * 4;
                // A packed B (trans_b) is one block of [k][nr] panels.
                t.b_offset = (plan.pack_b ? jr / nr * p.k * nr : jr) * 4;
                t.c_offset = (ir * p.ldc + jr) * 4;
                t.bias_offset = (p.bias == BiasKind::per_column ? jr : p.bias == BiasKind::per_row ? ir : 0) * 4;
                whole.push_back(t);
            }
        }
    }
    RowSweep sweep;
    if (plan.row_sweep) {
        // One row of tiles at the row tile's base pointers; the function steps them down M.
        for (int full = 1; full >= 0; --full) {
            const int rows = full ? mr : static_cast<int>(p.m % mr);
            if (rows == 0) continue;
            for (int64_t jr = 0; jr < p.n; jr += nr) {
                PlacedTile t;
                t.variant.rows = rows;
                t.variant.cols = static_cast<int>(std::min<int64_t>(nr, p.n - jr));
                t.variant.k_len = p.k;
                t.b_offset = (plan.pack_b ? jr / nr * p.k * nr : jr) * 4;
                t.c_offset = jr * 4;
                t.bias_offset = (p.bias == BiasKind::per_column ? jr : 0) * 4;
                (full ? sweep.full_row : sweep.tail_row).push_back(t);
            }
        }
        sweep.a_step = int64_t(mr) * (p.trans_a ? 1 : p.lda) * 4;
        sweep.c_step = int64_t(mr) * p.ldc * 4;
        sweep.bias_step = p.bias == BiasKind::per_row ? int64_t(mr) * 4 : 0;
    }
    SplitFinishLayout finish;
    finish.isa = plan.layout.isa;
    finish.n = p.n;
    finish.beta = p.beta;
    finish.bias = p.bias;
    finish.activation = p.activation;
    GeneratedCode code = generate_gemm_f32(plan.layout, variants, whole, plan.k_split_ready ? &finish : nullptr,
                                           plan.row_sweep ? &sweep : nullptr);
    Artifact artifact;
    artifact.kind = "x86.bin";
    artifact.payload = std::move(code.bytes);
    artifact.ints.assign(GemmF32Kernel::kEntryCount, -1);
    for (size_t i = 0; i < slots.size(); ++i) artifact.ints[slots[i]] = static_cast<int64_t>(code.entries[i]);
    size_t next = slots.size();
    if (!whole.empty()) artifact.ints[GemmF32Kernel::kWholeEntry] = static_cast<int64_t>(code.entries[next++]);
    if (plan.row_sweep) artifact.ints[GemmF32Kernel::kSweepEntry] = static_cast<int64_t>(code.entries[next++]);
    if (plan.k_split_ready) artifact.ints[GemmF32Kernel::kFinishEntry] = static_cast<int64_t>(code.entries[next++]);
    return artifact;
}

GemmF32Kernel::GemmF32Kernel(KernelMeta meta, const Problem& p, const plan::X86GemmPlan& plan,
                             std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact)
    : Kernel(std::move(meta)), p_(p), plan_(plan), runner_(std::move(runner)) {
    k_blocks_ = ceil_div(p_.k, plan_.kc);
    if (artifact.ints.size() != kEntryCount)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 kernel: artifact has " + std::to_string(artifact.ints.size()) +
                                              " entry slots, expected " + std::to_string(kEntryCount));
    code_ = std::make_unique<ExecMemory>(artifact.payload.data(), artifact.payload.size());
    auto extra_entry = [&](int slot) -> UkernelFn {
        const int64_t offset = artifact.ints[slot];
        if (offset < 0) return nullptr;
        if (offset >= static_cast<int64_t>(artifact.payload.size()))
            fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 kernel: entry offset outside the code");
        return reinterpret_cast<UkernelFn>(const_cast<uint8_t*>(code_->entry(static_cast<size_t>(offset))));
    };
    whole_ = extra_entry(kWholeEntry);
    // (through void (*)(), the generic function pointer type: the finish and the sweep have their own signatures)
    finish_ = reinterpret_cast<SplitFinishFn>(reinterpret_cast<void (*)()>(extra_entry(kFinishEntry)));
    sweep_ = reinterpret_cast<RowSweepFn>(reinterpret_cast<void (*)()>(extra_entry(kSweepEntry)));
    if (plan_.k_splits > 1 && finish_ == nullptr)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 kernel: the plan splits K but the artifact has no finish");
    if (plan_.row_sweep && sweep_ == nullptr)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 kernel: the plan sweeps rows but the artifact has no sweep");
    for (int slot = 0; slot < kSlotCount; ++slot) {
        const int64_t offset = artifact.ints[slot];
        if (offset < 0) continue;
        if (offset >= static_cast<int64_t>(artifact.payload.size()))
            fail(JITMM_STATUS_INTERNAL_ERROR, "x86 f32 kernel: entry offset outside the code");
        fns_[slot / (2 * kPhaseCount)][(slot / kPhaseCount) % 2][slot % kPhaseCount] =
            reinterpret_cast<UkernelFn>(const_cast<uint8_t*>(code_->entry(static_cast<size_t>(offset))));
    }
}

void GemmF32Kernel::run(const RunArgs& args) const {
    const auto* a = static_cast<const float*>(args.a);
    const auto* b = static_cast<const float*>(args.b);
    auto* c = static_cast<float*>(args.c);
    const auto* bias = static_cast<const float*>(args.bias);
    if (whole_) {
        // One generated call per batch: nothing else between the caller and the arithmetic.
        // A transposed B is first packed whole into this thread's panels (plan: single_call with pack_b).
        auto one_batch = [&](int64_t t) {
            whole_(a + t * p_.stride_a, whole_b(b + t * p_.stride_b), c + t * p_.stride_c, bias, a, a, c, nullptr);
        };
        if (plan_.threads > 1 && p_.batch > 1) runner_->parallel_for_in_runs(p_.batch, plan_.threads, one_batch);
        else for (int64_t t = 0; t < p_.batch; ++t) one_batch(t);
        return;
    }
    if (sweep_) {
        run_sweep(a, b, c, bias);
        return;
    }
    if (plan_.k_splits > 1) {
        run_split(a, b, c, bias);
        return;
    }
    const int64_t per_batch = int64_t(plan_.m_chunks) * plan_.n_chunks;
    const int64_t tasks = p_.batch * per_batch;
    const int mr = plan_.layout.mr;
    const int64_t a_batch_tiles = ceil_div(p_.m, mr) * k_blocks_;
    std::unique_ptr<SharedPanels> shared_a;
    if (plan_.share_a) shared_a = std::make_unique<SharedPanels>(p_.batch * a_batch_tiles, a_tile_floats());
    auto task = [&](int64_t t) {
        const int64_t batch = t / per_batch, part = t % per_batch;
        int64_t m0, m1, n0, n1;
        chunk_range(p_.m, mr, plan_.m_chunks, part / plan_.n_chunks, &m0, &m1);
        chunk_range(p_.n, plan_.nr(), plan_.n_chunks, part % plan_.n_chunks, &n0, &n1);
        if (m0 >= m1 || n0 >= n1) return;
        ChunkA chunk_a;
        if (shared_a) {
            chunk_a.panels = shared_a.get();
            chunk_a.first = batch * a_batch_tiles;
            chunk_a.first_tile = ceil_div(m1 - m0, mr) * (part % plan_.n_chunks) / plan_.n_chunks;
        }
        run_chunk(a + batch * p_.stride_a, chunk_a, b + batch * p_.stride_b, c + batch * p_.stride_c, bias, m0, m1,
                  n0, n1, 0, k_blocks_, false);
    };
    if (plan_.threads <= 1) {
        for (int64_t t = 0; t < tasks; ++t) task(t);
    } else {
        runner_->parallel_for_in_runs(tasks, plan_.threads, task);  // batches: a contiguous run per thread
    }
}

// One sweep call per batch (the plan sweeps only where the batches share the threads out evenly): its full row
// tiles and the row tail. A B to pack is packed whole first, into the thread's panels (K is short: a few
// hundred KB at most).
void GemmF32Kernel::run_sweep(const float* a, const float* b, float* c, const float* bias) const {
    const int mr = plan_.layout.mr;
    auto one_batch = [&](int64_t batch) {
        sweep_(a + batch * p_.stride_a, whole_b(b + batch * p_.stride_b), c + batch * p_.stride_c, bias, p_.m / mr,
               p_.m % mr != 0 ? 1 : 0);
    };
    if (plan_.threads > 1) runner_->parallel_for_in_runs(p_.batch, plan_.threads, one_batch);
    else for (int64_t t = 0; t < p_.batch; ++t) one_batch(t);
}

const float* GemmF32Kernel::whole_b(const float* b_batch) const {
    if (!plan_.pack_b) return b_batch;
    const int nr = plan_.nr();
    float* panels = pack_buffer<1>(static_cast<size_t>(ceil_div(p_.n, nr) * nr * p_.k));
    pack_b_f32(b_batch, p_.ldb, p_.trans_b, 0, p_.k, 0, p_.n, nr, plan_.layout.isa >= hw::X86Isa::avx512, panels);
    return panels;
}

int64_t GemmF32Kernel::a_tile_floats() const {
    // Whole cache lines per tile: the rows of A as stored are padded to lines already (a_panel_ld).
    const int64_t floats = p_.trans_a ? plan_.kc * plan_.layout.mr : int64_t(plan_.layout.mr) * plan_.a_panel_ld;
    return ceil_div(floats, 16) * 16;
}

// Loop order: N blocks, K blocks (B packed once per block into L2-sized panels), then row tiles outermost
// (each A row tile packed into an L1-resident panel, or a small A read in place) and the B panels innermost,
// streaming from L2.
// B blocks are double buffered: while one block's tiles run, each microkernel call prefetches (b_prefetch,
// spread over its K loop) one run of the next block's source, and the driver packs what the earlier calls
// brought into L2, so that the next block's reads from memory overlap the FMAs instead of stalling a packing
// pass between blocks (1024^3: ~5% of the run). Only the chunk's first block is packed up front.
// With fused packing (plan.pack_b_fused: few rows, a B as stored) there is no copy pass at all: each block's
// first row tile runs the packing variants, which read B as stored (prefetched into L2 by the block before) and
// store the panels that the block's other row tiles then read.
// Packed panels of a transposed A per group of row tiles (a quarter of a 2 MB L2).
constexpr int64_t kTransposedAGroupBytes = 512 * 1024;

void GemmF32Kernel::run_chunk(const float* a, const ChunkA& shared_a, const float* b, float* c, const float* bias,
                              int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t kb0, int64_t kb1,
                              bool split) const {
    const int mr = plan_.layout.mr;
    const int64_t nr = plan_.nr();
    const int64_t m_tiles = ceil_div(p_.m, mr), chunk_tiles = ceil_div(m1 - m0, mr);
    const int64_t first_ir = m0 + shared_a.first_tile * mr;
    // The chunk's own A panel, unless its row tiles come packed from the call's shared panels. A stored K x M
    // is packed a group of row tiles at a time (pack_a_f32_transposed_tiles), up to kTransposedAGroupBytes of
    // panels (1 thread: 2048x100x256 TT, 14x32 tiles, 1194-1258 us packed tile by tile, 972-983 by groups).
    const int64_t panel_floats = a_tile_floats();
    const bool pack_a_groups = plan_.pack_a && !shared_a.panels && p_.trans_a && shared_a.first_tile == 0;
    const int64_t group_tiles =
        pack_a_groups ? std::clamp<int64_t>(kTransposedAGroupBytes / (panel_floats * 4), 1, chunk_tiles) : 1;
    float* a_panel = plan_.pack_a && !shared_a.panels
                         ? pack_buffer<0>(static_cast<size_t>(group_tiles * panel_floats + 16))
                         : nullptr;
    // Block i of the chunk: N block i / k_count, K block kb0 + i % k_count.
    const int64_t k_count = kb1 - kb0, blocks = ceil_div(n1 - n0, plan_.nc) * k_count;
    struct Block {
        int64_t jc, n_cur, kb, k0, k_len;
    };
    auto block = [&](int64_t i) {
        Block blk;
        blk.jc = n0 + (i / k_count) * plan_.nc;
        blk.n_cur = std::min(plan_.nc, n1 - blk.jc);
        blk.kb = kb0 + i % k_count;
        blk.k0 = blk.kb * plan_.kc;
        blk.k_len = std::min(plan_.kc, p_.k - blk.k0);
        return blk;
    };
    auto pack = [&](const Block& blk, float* panels, int64_t u0, int64_t u1) {
        pack_b_f32(b, p_.ldb, p_.trans_b, blk.k0, blk.k_len, blk.jc, blk.n_cur, static_cast<int>(nr),
                   plan_.layout.isa >= hw::X86Isa::avx512, panels, u0, u1);
    };
    const size_t b_floats = static_cast<size_t>(ceil_div(std::min(plan_.nc, n1 - n0), nr) * nr *
                                                std::min(plan_.kc, p_.k));
    // Fused packing: each block's first row tile packs the block's panels as it reads B (one buffer: the
    // block before is done with it), except a column tail's panel, copied just before its call; a block
    // whose first tile is the row tail, or that is K's shorter last block, is copied before its calls (the
    // packing variants cover full tiles over whole K blocks only, compile_gemm_f32).
    const bool fused = plan_.pack_b_fused;
    const bool double_buffer = plan_.pack_b && blocks > 1 && !fused;
    float* b_buffers[2] = {plan_.pack_b ? pack_buffer<1>(b_floats) : nullptr,
                           double_buffer ? pack_buffer<3>(b_floats) : nullptr};
    const int64_t first_step_ir = m0 + shared_a.first_tile % chunk_tiles * mr;
    const bool first_step_packs = fused && first_step_ir + mr <= p_.m;
    auto block_packs_as_it_goes = [&](const Block& blk) {
        return first_step_packs && !split && (k_blocks_ == 1 || blk.k_len == plan_.kc);
    };
    if (plan_.pack_b && !fused) {
        const Block first = block(0);
        pack(first, b_buffers[0], 0, pack_b_units(p_.trans_b, first.k_len, first.n_cur));
    }
    for (int64_t i = 0; i < blocks; ++i) {
        const Block blk = block(i);
        const bool last_block = blk.kb + 1 == k_blocks_;
        Phase phase;
        if (split)
            phase = blk.kb == kb0 ? (last_block ? kPartFirstTail : kPartFirst) : (last_block ? kPartLast : kMiddle);
        else phase = k_blocks_ == 1 ? kSingle : blk.kb == 0 ? kFirst : last_block ? kLast : kMiddle;
        const float* b_panels = b_buffers[fused ? 0 : i % 2];
        const bool block_fused = block_packs_as_it_goes(blk);
        if (fused && !block_fused) pack(blk, b_buffers[0], 0, pack_b_units(false, blk.k_len, blk.n_cur));

        // The next block's source as runs ("rows": B rows for NN, stored rows for trans_b), each cut into
        // segments of what one call's K loop prefetches; call s prefetches segment s. A packing unit is
        // packed two calls after the call that prefetched its last segment (its lines have arrived by then);
        // whatever the calls did not cover is packed after the block.
        // (Fused packing: the next block's source is prefetched the same way, for its first row tile to read.)
        const bool prefetch_next = plan_.pack_b && blocks > 1 && i + 1 < blocks;
        const bool ahead = prefetch_next && !fused;
        const Block next = prefetch_next ? block(i + 1) : blk;
        float* next_panels = ahead ? b_buffers[(i + 1) % 2] : nullptr;
        const int64_t units = ahead ? pack_b_units(p_.trans_b, next.k_len, next.n_cur) : 0;
        const int64_t rows = p_.trans_b ? next.n_cur : next.k_len;
        const int64_t row_floats = p_.trans_b ? next.k_len : next.n_cur;
        const auto& L = plan_.layout;
        const int64_t runs = L.b_prefetch_runs;
        const int64_t seg_floats = runs > 0 && prefetch_next ? blk.k_len / L.k_unroll * L.b_prefetch_step / 4 : 0;
        const int64_t segs_per_row = seg_floats > 0 ? ceil_div(row_floats, seg_floats) : 0;
        // Walked one call at a time (no divisions between the calls): the segment this call prefetches (its
        // first run `seg_row`, part `seg_part` of it), and the rows whose segments all precede the previous
        // call's (rows_complete[1]: prefetched by a call that has finished before the previous one began).
        int64_t seg_row = 0, seg_part = 0, rows_complete[2] = {0, 0};
        auto advance_segment = [&] {
            if (++seg_part == segs_per_row) {
                seg_part = 0;
                seg_row += runs;
            }
            rows_complete[1] = rows_complete[0];
            rows_complete[0] = std::min(rows, seg_row);
        };
        auto segment = [&]() -> const float* {
            if (seg_floats == 0 || seg_row >= rows) return nullptr;
            const float* row = p_.trans_b ? b + (next.jc + seg_row) * p_.ldb + next.k0
                                          : b + (next.k0 + seg_row) * p_.ldb + next.jc;
            return row + seg_part * seg_floats;
        };
        auto units_ready = [&]() -> int64_t {  // units whose lines were all prefetched two calls ago or earlier
            const int64_t rows_done = rows_complete[1];
            if (rows_done == rows) return units;
            return p_.trans_b ? rows_done / kPackBColumns : rows_done;
        };
        int64_t packed = 0;
        for (int64_t step = 0; step < chunk_tiles; ++step) {
            // Row tiles from the first_tile-th, wrapping around (0 unless A is shared).
            const int64_t ir = m0 + (step + shared_a.first_tile) % chunk_tiles * mr;
            const bool has_next = step + 1 < chunk_tiles;
            const int64_t next_ir = m0 + (step + 1 + shared_a.first_tile) % chunk_tiles * mr;
            const bool row_tail = ir + mr > p_.m;
            const int rows = static_cast<int>(std::min<int64_t>(mr, p_.m - ir));
            const float* a_tile = p_.trans_a ? a + blk.k0 * p_.lda + ir : a + ir * p_.lda + blk.k0;
            const int64_t panel_index = shared_a.first + blk.kb * m_tiles + ir / mr;
            if (shared_a.panels) {
                a_tile = shared_a.panels->get(panel_index, [&](float* panel) {
                    pack_a_f32(a, p_.lda, p_.trans_a, ir, rows, blk.k0, blk.k_len, plan_.a_panel_ld, panel);
                });
            } else if (pack_a_groups) {
                if (step % group_tiles == 0)
                    pack_a_f32_transposed_tiles(a, p_.lda, ir, std::min(m1, ir + group_tiles * mr), mr, blk.k0,
                                                blk.k_len, panel_floats, a_panel,
                                                plan_.layout.isa >= hw::X86Isa::avx512);
                a_tile = a_panel + (step % group_tiles) * panel_floats;
            } else if (plan_.pack_a) {
                pack_a_f32(a, p_.lda, p_.trans_a, ir, rows, blk.k0, blk.k_len, plan_.a_panel_ld, a_panel);
                a_tile = a_panel;
            }
            const float* row_bias = p_.bias == BiasKind::per_row ? bias + ir : nullptr;
            // With a_prefetch, the call for panel q prefetches row q of the next row tile's K range (A
            // as stored), so that its packing reads L2 instead of memory; past those rows, the panel. A shared
            // next tile that another task has claimed is read packed: its packed rows instead.
            const int64_t next_rows = plan_.layout.a_prefetch && has_next ? std::min<int64_t>(mr, m1 - next_ir) : 0;
            const float* next_packed = nullptr;
            if (next_rows > 0 && shared_a.panels && shared_a.panels->claimed(panel_index - ir / mr + next_ir / mr))
                next_packed = shared_a.panels->panel(panel_index - ir / mr + next_ir / mr);
            int64_t q = 0;
            // The packing tile reads B as stored and writes the panels the later tiles read.
            const bool packing = block_fused && step == 0;
            for (int64_t jr = blk.jc; jr < blk.jc + blk.n_cur; jr += nr, ++q) {
                const bool col_tail = jr + nr > p_.n;
                float* panel = b_buffers[0] + q * blk.k_len * nr;  // (fused packing's one buffer)
                const bool packs_panel = packing && !col_tail;
                if (packing && col_tail)  // the tail panel copied, then read packed
                    pack_b_f32(b, p_.ldb, false, blk.k0, blk.k_len, jr, p_.n - jr, static_cast<int>(nr),
                               plan_.layout.isa >= hw::X86Isa::avx512, panel, 0, blk.k_len);
                const RowKind row_kind = packs_panel ? kPackingRows : row_tail ? kTailRows : kFullRows;
                const float* b_tile = packs_panel      ? b + blk.k0 * p_.ldb + jr
                                      : plan_.pack_b ? b_panels + q * blk.k_len * nr
                                                     : b + blk.k0 * p_.ldb + jr;
                if (seg_floats > 0 && ahead) {
                    const int64_t ready = units_ready();
                    if (ready > packed) {
                        pack(next, next_panels, packed, ready);
                        packed = ready;
                    }
                }
                const float* bias_tile = p_.bias == BiasKind::per_column ? bias + jr : row_bias;
                const float* a_next = q >= next_rows ? a_tile
                                      : next_packed ? next_packed + q * plan_.a_panel_ld
                                                    : a + (next_ir + q) * p_.lda + blk.k0;
                const float* b_next = segment();
                if (seg_floats > 0) advance_segment();
                // The next call's C tile: the next panel, else the next row tile's first, else the next
                // block's first (the last call prefetches its own).
                float* c_tile = c + ir * p_.ldc + jr;
                const float* c_next = jr + nr < blk.jc + blk.n_cur ? c_tile + nr
                                      : has_next                 ? c + next_ir * p_.ldc + blk.jc
                                      : i + 1 < blocks           ? c + first_ir * p_.ldc + block(i + 1).jc
                                                                 : c_tile;
                // Nothing left to prefetch: the call's own panel (in cache) keeps the prefetches harmless.
                ukernel(row_kind, col_tail, phase)(a_tile, b_tile, c_tile, bias_tile, a_next, b_next ? b_next : b_tile,
                                                   c_next, packs_panel ? panel : nullptr);
            }
        }
        if (ahead && packed < units) pack(next, next_panels, packed, units);
    }
}

// K split: every (batch, K part, column chunk) is a task writing alpha * its partial sum over all the
// batch's rows into scratch (one C-shaped slab per part, C's leading dimension, so the same microkernels
// serve; B is packed once per part and chunk and reused across the row tiles); the finish adds the parts in
// part order and applies beta * C, bias and activation, C written once (run_k_split).
void GemmF32Kernel::run_split(const float* a, const float* b, float* c, const float* bias) const {
    SplitRun r;
    r.batch = p_.batch;
    r.m = p_.m;
    r.n = p_.n;
    r.ldc = p_.ldc;
    r.stride_c = p_.stride_c;
    r.parts = plan_.k_splits;
    r.n_chunks = plan_.n_chunks;
    r.threads = plan_.threads;
    r.bias_kind = p_.bias;
    r.bias = bias;
    r.c = c;
    r.scratch = pack_buffer<2>(static_cast<size_t>(p_.batch * r.parts * p_.m * p_.ldc));
    r.finish = finish_;
    run_k_split(*runner_, r, [&](int64_t batch, int part, int chunk, float* slab) {
        const int64_t kb0 = k_blocks_ * part / r.parts, kb1 = k_blocks_ * (part + 1) / r.parts;
        int64_t n0, n1;
        chunk_range(p_.n, plan_.nr(), r.n_chunks, chunk, &n0, &n1);
        if (n0 >= n1) return;
        run_chunk(a + batch * p_.stride_a, ChunkA{}, b + batch * p_.stride_b, slab, bias, 0, p_.m, n0, n1, kb0, kb1,
                  true);
    });
}

}  // namespace jitmm::x86
