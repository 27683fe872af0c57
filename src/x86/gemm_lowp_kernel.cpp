#include "x86/gemm_lowp_kernel.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "x86/gemm_amx_generator.hpp"
#include "x86/gemm_amx_whole_generator.hpp"
#include "x86/gemm_lowp_avx_generator.hpp"
#include "x86/huge_scratch.hpp"
#include "x86/pack_a_transposed.hpp"
#include "x86/pack_lowp.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <immintrin.h>

#include <vector>

namespace jitmm::x86 {

namespace {

using plan::LowpStep;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// The most packed A a task keeps across its N blocks (past it, each N block packs its A panels again).
constexpr int64_t kKeepPackedABytes = int64_t(64) << 20;
// The most panels packed once per call for all tasks (the calling thread keeps the buffer), and the least
// packing a task must be spared for that to pay the extra fork-join (256 KB: ~25 us of packing).
constexpr int64_t kSharedPanelsBytes = int64_t(64) << 20;
constexpr int64_t kMinSharedSavingBytes = int64_t(256) << 10;
// The most bytes of a row tile's A rows prefetched for the next row tile (a 32-row tile of 8 KB rows).
constexpr int64_t kPrefetchRowTileBytes = int64_t(256) << 10;
constexpr int64_t kPrefetchMinABytes = int64_t(1) << 20;  // and for an A of at least this (half an L2)
// run_small: the most packed B (and column sums) a group of batches keeps for its tile kinds, a third of L1 (1
// thread, median us, 4 / 8 / 16 / 32 KB: 55x2x3 NT s8 x23 3.29 / 2.64 / 2.32 / 2.68, 40x40x40 s8 x16 8.75 / 6.56 /
// 5.60 / 6.46; 45x100x64 bf16 x12, two batches of 16 KB at 32 KB, 13.7 -> 17.0).
constexpr int64_t kSmallGroupBytes = int64_t(16) << 10;
// Dense A rows of a small call are packed in blocks of row tiles of about this much (in L1 for its tiles).
constexpr int64_t kDenseABlockBytes = int64_t(8) << 10;

// JITMM_X86_LOWP_SHARE_A=0: every task packs its own panels (measurements).
bool share_off() {
    static const bool off = [] {
        const char* env = std::getenv("JITMM_X86_LOWP_SHARE_A");
        return env != nullptr && env[0] == '0';
    }();
    return off;
}

// Per-thread scratch (Slot 0: B panels, 1: A panels, 2: column compensation, 3: accumulator strip), grown on
// demand, kept for the thread's lifetime, in huge pages where they pay (huge_scratch.hpp).
template <int Slot>
uint8_t* scratch(size_t bytes) {
    thread_local HugeScratch buffer;
    return buffer.get(bytes);
}

// Splits [0, tiles) into `parts` near-equal tile ranges; returns part's range scaled to elements.
void chunk_range(int64_t extent, int64_t tile, int64_t parts, int64_t part, int64_t* begin, int64_t* end) {
    const int64_t tiles = ceil_div(extent, tile);
    const int64_t t0 = tiles * part / parts, t1 = tiles * (part + 1) / parts;
    *begin = std::min(extent, t0 * tile);
    *end = std::min(extent, t1 * tile);
}

// K groups one packed B panel holds for a block of k_len: AMX reads whole 64-byte steps (16 groups).
int64_t panel_groups(const plan::LowpLayout& L, int64_t k_len) {
    const int64_t groups = ceil_div(k_len, plan::step_group(L.step));
    return plan::step_is_amx(L.step) ? round_up(groups, 16) : groups;
}

// Loads a tile configuration on first use in a task and releases the tiles when the task ends, so that no
// tile state outlives the call on this thread (a framework's own AMX code finds the tiles as it left them:
// released).
class TileSession {
public:
    explicit TileSession(LowpStub release) : release_(release) {}
    ~TileSession() {
        if (current_ != nullptr) release_();
    }
    TileSession(const TileSession&) = delete;
    TileSession& operator=(const TileSession&) = delete;
    // Variants whose configurations are byte-identical share one stub (see generate_amx), so a switch between
    // them loads nothing (ldtilecfg costs about as much as a small block's products).
    void use(LowpStub load) {
        if (load == current_) return;
        load();
        current_ = load;
    }

private:
    LowpStub release_;
    LowpStub current_ = nullptr;
};

}  // namespace

Artifact compile_gemm_lowp(const Problem& p, const plan::X86LowpPlan& plan) {
    using K = GemmLowpKernel;
    Artifact artifact;
    artifact.kind = "x86.bin";
    artifact.ints.assign(K::kArtifactInts, -1);
    if (amx_whole_call_fits(p, plan)) {  // one function runs the whole call: no microkernels
        LowpCode code = generate_amx_whole(p, plan);
        artifact.payload = std::move(code.bytes);
        artifact.ints[K::kWholeEntry] = static_cast<int64_t>(code.entries[0]);
        artifact.ints[K::kSlotCount + K::kWholeConfigSlot] = static_cast<int64_t>(code.config_entries[0]);
        artifact.ints[2 * K::kSlotCount] = static_cast<int64_t>(code.release_entry);
        return artifact;
    }
    const int mr = plan.layout.mr, nr = plan.nr();
    const int64_t k_blocks = plan.k_blocks(p.k);
    const int64_t last_k = p.k - (k_blocks - 1) * plan.kc;

    std::vector<LowpVariant> variants;
    std::vector<int> slots;
    // Tile rows run over M (over N when the roles are swapped), tile columns over the other.
    const int64_t rows = plan.layout.swap_ab ? p.n : p.m, cols = plan.layout.swap_ab ? p.m : p.n;
    const int row_kinds[2] = {mr, static_cast<int>(rows % mr)};
    const int col_kinds[2] = {nr, static_cast<int>(cols % nr)};
    for (int rt = 0; rt < 2; ++rt) {
        if (row_kinds[rt] == 0 || (rt == 0 && rows < mr)) continue;
        for (int ct = 0; ct < 2; ++ct) {
            if (col_kinds[ct] == 0 || (ct == 0 && cols < nr)) continue;
            for (int ph = 0; ph < K::kPhaseCount; ++ph) {
                const bool wanted = k_blocks == 1 ? ph == K::kSingle
                                                  : (ph == K::kFirst || ph == K::kLast ||
                                                     (ph == K::kMiddle && k_blocks > 2));
                if (!wanted) continue;
                LowpVariant v;
                v.rows = row_kinds[rt];
                v.cols = col_kinds[ct];
                v.k_len = ph == K::kSingle ? p.k : ph == K::kLast ? last_k : plan.kc;
                v.first = ph == K::kSingle || ph == K::kFirst;
                v.last = ph == K::kSingle || ph == K::kLast;
                variants.push_back(v);
                slots.push_back((rt * 2 + ct) * K::kPhaseCount + ph);
            }
        }
    }
    const bool amx = plan::step_is_amx(plan.layout.step);
    LowpCode code = amx ? generate_amx(plan.layout, variants) : generate_lowp_avx(plan.layout, variants);
    artifact.payload = std::move(code.bytes);
    for (size_t i = 0; i < slots.size(); ++i) {
        artifact.ints[slots[i]] = static_cast<int64_t>(code.entries[i]);
        if (amx) artifact.ints[K::kSlotCount + slots[i]] = static_cast<int64_t>(code.config_entries[i]);
    }
    if (amx) artifact.ints[2 * K::kSlotCount] = static_cast<int64_t>(code.release_entry);
    return artifact;
}

GemmLowpKernel::GemmLowpKernel(KernelMeta meta, const Problem& p, const plan::X86LowpPlan& plan,
                               std::shared_ptr<const ParallelRunner> runner, const Artifact& artifact)
    : Kernel(std::move(meta)), p_(p), plan_(plan), runner_(std::move(runner)) {
    k_blocks_ = plan_.k_blocks(p_.k);
    const bool shifted = plan_.layout.step == LowpStep::vnni_u8s8 && p_.a_type == JITMM_DTYPE_S8;
    comp_factor_ = (shifted ? 128 : 0) + p_.a_zero_point;
    if (artifact.ints.size() != kArtifactInts)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 lowp kernel: artifact has " + std::to_string(artifact.ints.size()) +
                                              " entries, expected " + std::to_string(kArtifactInts));
    code_ = std::make_unique<ExecMemory>(artifact.payload.data(), artifact.payload.size());
    auto entry = [&](int64_t offset) -> const uint8_t* {
        if (offset < 0) return nullptr;
        if (offset >= static_cast<int64_t>(artifact.payload.size()))
            fail(JITMM_STATUS_INTERNAL_ERROR, "x86 lowp kernel: entry offset outside the code");
        return code_->entry(static_cast<size_t>(offset));
    };
    for (int s = 0; s < kSlotCount; ++s) {
        fns_[s] = reinterpret_cast<LowpUkernel>(const_cast<uint8_t*>(entry(artifact.ints[s])));
        configs_[s] = reinterpret_cast<LowpStub>(const_cast<uint8_t*>(entry(artifact.ints[kSlotCount + s])));
    }
    release_ = reinterpret_cast<LowpStub>(const_cast<uint8_t*>(entry(artifact.ints[2 * kSlotCount])));
    whole_ = reinterpret_cast<AmxWholeFn>(const_cast<uint8_t*>(entry(artifact.ints[kWholeEntry])));
    if (whole_ != nullptr && !amx_whole_call_fits(p_, plan_))
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 lowp kernel: a whole-call function for a shape it does not fit");
    whole_packs_b_ = whole_ != nullptr && amx_whole_packs_b(p_, plan_);
    if (plan::step_is_amx(plan_.layout.step) && release_ == nullptr)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 lowp kernel: AMX code without its tilerelease stub");
    static_assert(kWholeConfigSlot == 0 * kPhaseCount + kSingle, "the slot of full tiles, one K block");
    if (whole_ != nullptr && configs_[kWholeConfigSlot] == nullptr)
        fail(JITMM_STATUS_INTERNAL_ERROR, "x86 lowp kernel: a whole-call function without its configuration stub");
    pack_vbmi_ = pack_vbmi_allowed();
    // Operands read in place past K (the bytes past it meet the packed side's zero k rows, exact in integers): the
    // rows whose reads would run past the operand's end (A's, or B's in the swapped order) come from a copy
    // (tile_copied). AMX int8: the tile rows of the last K block read whole steps (one K block: K rounded up to
    // whole dwords, plan::amx_k_reads_rows). VNNI: a u8 A over a K tail reads the dword past K.
    if (plan_.layout.step == LowpStep::amx_int8) {
        const int64_t last_k = p_.k - (k_blocks_ - 1) * plan_.kc;
        const int64_t step = k_blocks_ == 1 ? plan::amx_k_step_bytes(plan_.layout.step, p_.k) : 64;
        overrun_bytes_ = ceil_div(last_k, step) * step - last_k;
    } else if (!plan::step_is_amx(plan_.layout.step) && !plan_.layout.dot_nt && !plan_.layout.swap_ab &&
               !plan_.pack_a && !plan_.layout.a_odd_k_word) {
        const int64_t g = plan::step_group(plan_.layout.step);
        overrun_bytes_ = ceil_div(p_.k, g) * g - p_.k;
    }
    // Batches of such blocks too, a run of them per thread (1 thread, 8x8x8 s8 x64: 8.2 us through the chunk
    // driver, each batch packing and configuring as a whole call does).
    small_ = !plan_.layout.swap_ab && !plan_.layout.dot_nt && (p_.batch > 1 || plan_.threads <= 1) &&
             plan_.m_chunks == 1 && plan_.n_chunks == 1 && k_blocks_ == 1 && p_.m <= plan_.mc && p_.n <= plan_.nc;
}

void GemmLowpKernel::run(const RunArgs& args) const {
    if (whole_ != nullptr) {  // no scales: its C is stored as the tiles hold it
        if (plan_.threads <= 1 || p_.batch == 1) {
            run_whole(args, 0, p_.batch);
        } else {  // a contiguous run of batches per thread, as run_small's
            const int64_t runs = std::min<int64_t>(p_.batch, plan_.threads);
            runner_->parallel_for(runs, [&](int64_t r) {
                run_whole(args, p_.batch * r / runs, p_.batch * (r + 1) / runs);
            });
        }
        return;
    }
    // Per-tensor scales are runtime values: folded with alpha into the one scalar the epilogue multiplies by.
    float scale = p_.alpha;
    if (p_.a_scale == ScaleMode::per_tensor) scale *= args.a_scales[0];
    if (p_.b_scale == ScaleMode::per_tensor) scale *= args.b_scales[0];
    if (small_) {
        if (plan_.threads <= 1 || p_.batch == 1) {
            run_small(args, scale, 0, p_.batch);
        } else {
            // A contiguous run of batches per thread, one tile session each (as the chunk driver's tasks).
            const int64_t runs = std::min<int64_t>(p_.batch, plan_.threads);
            runner_->parallel_for(runs, [&](int64_t r) {
                run_small(args, scale, p_.batch * r / runs, p_.batch * (r + 1) / runs);
            });
        }
        return;
    }
    const int64_t a_size = dtype_size(p_.a_type), b_size = dtype_size(p_.b_type), c_size = dtype_size(p_.c_type);
    const int64_t per_batch = int64_t(plan_.m_chunks) * plan_.n_chunks;
    const int64_t tasks = p_.batch * per_batch;
    const uint8_t* shared_a = plan_.layout.swap_ab ? pack_swapped_a_shared(args) : nullptr;
    const uint8_t* shared_a_panels =
        plan_.layout.swap_ab || plan_.layout.dot_nt ? nullptr : pack_shared_a_panels(args);
    auto task = [&](int64_t t) {
        const int64_t batch = t / per_batch, part = t % per_batch;
        Chunk chunk;
        chunk.a = static_cast<const uint8_t*>(args.a) + batch * p_.stride_a * a_size;
        chunk.b = static_cast<const uint8_t*>(args.b) + batch * p_.stride_b * b_size;
        chunk.c = static_cast<uint8_t*>(args.c) + batch * p_.stride_c * c_size;
        if (plan_.layout.swap_ab) {
            chunk.m0 = 0;
            chunk.m1 = p_.m;
            chunk_range(p_.n, plan_.layout.mr, plan_.m_chunks, part, &chunk.n0, &chunk.n1);
            if (chunk.n0 < chunk.n1) run_swapped_chunk(chunk, args, scale, shared_a);
            return;
        }
        if (plan_.layout.dot_nt) {
            chunk.m0 = 0;
            chunk.m1 = p_.m;
            chunk_range(p_.n, plan_.nr(), plan_.n_chunks, part, &chunk.n0, &chunk.n1);
            if (chunk.n0 < chunk.n1) run_dot_chunk(chunk, args, scale);
            return;
        }
        chunk_range(p_.m, plan_.layout.mr, plan_.m_chunks, part / plan_.n_chunks, &chunk.m0, &chunk.m1);
        chunk_range(p_.n, plan_.nr(), plan_.n_chunks, part % plan_.n_chunks, &chunk.n0, &chunk.n1);
        if (chunk.m0 >= chunk.m1 || chunk.n0 >= chunk.n1) return;
        // (Threads run contiguous runs of tasks: the next task is this thread's but at a run's end.)
        if (per_batch == 1 && batch + 1 < p_.batch && p_.stride_b != 0)
            chunk.next_b = chunk.b + p_.stride_b * b_size;
        run_chunk(chunk, args, scale, shared_a_panels);
    };
    if (plan_.threads <= 1) {
        for (int64_t t = 0; t < tasks; ++t) task(t);
    } else {
        // More tasks than threads (batches): a contiguous run of them per thread (2 threads, 128x64x128 x 12 s8:
        // 14.3 us handed out one by one, 12.8 on one thread, 8.8 in runs).
        runner_->parallel_for_in_runs(tasks, plan_.threads, task);
    }
}

// Tasks that share rows (n_chunks > 1) each packed the same A panels: 2048x4096x4096 NT at 16 threads (2 x 8
// tasks) packed 8 MB of A per task. Where a task spans several N blocks, every A panel (row tile x K block) is
// packed once instead, in pieces over the threads, into the calling thread's scratch, and the tasks read it:
// such a task read its kept panels back from L3 anyway. A task with one N block packs each panel right before
// its row tile, which then reads it from L1/L2; a panel packed by another core comes from L3 and was slower
// than packing it (2 threads, 1024^3: bf16 1002 -> 1089 us, s8 405 -> 492). B panels packed once for the tasks
// that share columns measured slower too (2 threads, 2x1 split, 2048x256x2048 bf16 1132-1183 -> 1213-1231 us),
// so each task packs its own B. Batch 1, at most kSharedPanelsBytes, sparing each task kMinSharedSavingBytes
// or more; JITMM_X86_LOWP_SHARE_A=0 packs per task.
const uint8_t* GemmLowpKernel::pack_shared_a_panels(const RunArgs& args) const {
    const plan::LowpLayout& L = plan_.layout;
    if (share_off() || p_.batch != 1 || plan_.threads <= 1 || !plan_.pack_a || plan_.n_chunks <= 1) return nullptr;
    const int mr = L.mr;
    const int64_t nr = plan_.nr();
    const int64_t task_cols = ceil_div(ceil_div(p_.n, nr), int64_t(plan_.n_chunks)) * nr;
    if (task_cols <= plan_.nc) return nullptr;
    const int g = plan::step_group(L.step);
    const int64_t esz = plan::step_elem_bytes(L.step);
    const int64_t row_tiles = ceil_div(p_.m, int64_t(mr));
    const int64_t panel_bytes = mr * plan_.a_panel_ld * esz;
    const int64_t a_bytes = row_tiles * k_blocks_ * panel_bytes;
    if (a_bytes > kSharedPanelsBytes) return nullptr;
    // What a task no longer packs, less its share of the pieces.
    if (a_bytes / plan_.m_chunks - a_bytes / plan_.threads < kMinSharedSavingBytes) return nullptr;
    uint8_t* panels = scratch<4>(static_cast<size_t>(a_bytes));
    auto piece = [&](int64_t t) {
        const int64_t tile = t / k_blocks_, kb = t % k_blocks_;
        const int64_t k0 = kb * plan_.kc, k_len = std::min(plan_.kc, p_.k - k0);
        pack_a_lowp(L.step, p_.a_type, args.a, p_.lda, p_.trans_a, tile * mr,
                    static_cast<int>(std::min<int64_t>(mr, p_.m - tile * mr)), k0, k_len, panel_groups(L, k_len) * g,
                    plan_.a_panel_ld, panels + t * panel_bytes);
    };
    runner_->parallel_for(row_tiles * k_blocks_, piece);
    return panels;
}

// A u8 A read in place by vpdpbusd over a K that ends inside a k group (plan: the dword past a row's end meets
// the zero rows of packed B): a row's read runs up to 3 bytes past its K, into the next row, except for the
// last rows, whose bytes past the end of A may not be there. A row tile whose reads would pass A's end is read
// from a copy of its rows with those bytes zero (tile_copied).
// AMX int8 reads such a tail too: a K of one block rounded up to whole dwords (plan::amx_k_reads_rows), the
// rows' bytes past K meeting the packed side's zero k rows; `ld` is the stride of the rows in elements (A's, or
// B's in the swapped order).
const uint8_t* GemmLowpKernel::copy_last_rows(const uint8_t* tile, int64_t rows, int64_t k0, int64_t ld) const {
    const int64_t bytes = (rows - 1) * ld + (p_.k - k0);
    uint8_t* copy = scratch<1>(static_cast<size_t>(bytes + 64));
    std::memcpy(copy, tile, static_cast<size_t>(bytes));
    std::memset(copy + bytes, 0, 64);  // AMX: up to a step's 63 bytes past K
    return copy;
}

// LowpLayout::a_last_step_copied: the last, partial 64-byte step of the A tile at `a_tile` (rows `stride` bytes
// apart, a K block of k_len from the tile's start) copied into `buffer`'s rows of 64 bytes, zero past K.
const uint8_t* GemmLowpKernel::copy_a_last_step(const uint8_t* a_tile, int64_t stride, int64_t rows, int64_t k_len,
                                                uint8_t* buffer) const {
    const int64_t esz = dtype_size(p_.a_type);
    const int64_t step_k = 64 / esz, last_step_k = k_len / step_k * step_k;
    pack_amx_last_step(a_tile + last_step_k * esz, stride, static_cast<int>(rows),
                       static_cast<int>((k_len - last_step_k) * esz), buffer);
    return buffer;
}

// AMX int8 or VNNI in place: whether the tile of `rows` rows from row `first` (of `total`, `ld` apart) reads past
// the operand's last byte in the K block from k0 of k_len: only the last K block reads past K, overrun_bytes_.
bool GemmLowpKernel::tile_copied(int64_t first, int64_t rows, int64_t total, int64_t ld, int64_t k0,
                                 int64_t k_len) const {
    return overrun_bytes_ > 0 && k0 + k_len >= p_.k && (total - first - rows) * ld < overrun_bytes_;
}

// An AMX tile row split across cache lines loads slower, so an A in place that is not 64-byte aligned is packed,
// except where all of K is one block of short steps (plan::amx_k_step_bytes): copying its few bytes a row costs
// more than the split loads (3072x2x48 s8, 1 thread: the copy took a third of the call), and int8 with few
// column panels (plan::amx_rows_any_stride: its tile rows serve too few products for the copy to pay).
bool GemmLowpKernel::packs_a(const uint8_t* a) const {
    if (plan_.pack_a) return true;
    if (!plan::step_is_amx(plan_.layout.step)) return false;
    if (k_blocks_ == 1 && plan::amx_k_reads_rows(plan_.layout.step, p_.k)) return false;
    if (plan::amx_rows_any_stride(plan_.layout.step, false, p_.m, p_.n)) return false;
    return reinterpret_cast<uintptr_t>(a) % 64 != 0 || (p_.lda * dtype_size(p_.a_type)) % 64 != 0;
}

// AMX: whether the column tail panels take another tile configuration than the full ones (a tail of other than
// 16 columns; the configurations of one shape are shared stubs, so equal ones are one pointer).
bool GemmLowpKernel::tail_config_differs() const {
    const int64_t nr = plan_.nr();
    if (!plan::step_is_amx(plan_.layout.step) || p_.n < nr || p_.n % nr == 0) return false;
    const bool row_tail = p_.m < plan_.layout.mr;
    const Phase phase = k_blocks_ == 1 ? kSingle : kFirst;
    return configs_[slot(row_tail, true, phase)] != configs_[slot(row_tail, false, phase)];
}

// Loop order: N blocks (B packed for all of K, panel by panel, with its column sums), M blocks, K blocks, row
// tiles (each A tile, packed or in place, stays in L1), then the B panels streaming from L2. With several K
// blocks the partial sums of an M block wait in a strip sized to stay in L2.
void GemmLowpKernel::run_chunk(const Chunk& ch, const RunArgs& args, float scale,
                               const uint8_t* shared_a_panels) const {
    const plan::LowpLayout& L = plan_.layout;
    const int mr = L.mr;
    const int64_t nr = plan_.nr();
    const bool amx = plan::step_is_amx(L.step);
    const int g = plan::step_group(L.step);
    const int64_t esz = plan::step_elem_bytes(L.step);
    const int64_t a_size = dtype_size(p_.a_type), c_size = dtype_size(p_.c_type);
    const int64_t bias_size = p_.bias == BiasKind::none ? 0 : dtype_size(p_.bias_type);
    const int64_t nc_pad = round_up(plan_.nc, nr);
    const int64_t block_groups = panel_groups(L, plan_.kc);  // every K block's panels are this far apart
    const int64_t block_bytes = block_groups * nc_pad * 4;

    const bool pack_a = packs_a(ch.a);
    // A chunk of one M block (decode rows, or a thread's few row tiles) uses each K block of packed B once, right
    // after packing it: packed block by block into one buffer, it stays in L2 instead of going through memory
    // as all of K x nc (16x4096x4096 bf16 at 1 thread: 16 MB written and read back per N block).
    const bool pack_b_per_k_block = ch.m1 - ch.m0 <= plan_.mc && k_blocks_ > 1;
    // B read where it lies (LowpLayout::b_in_place): nothing packed, the kernels get B at (k0, jr).
    const bool b_in_place = L.b_in_place;
    const int64_t b_size = dtype_size(p_.b_type);
    uint8_t* b_full = b_in_place ? nullptr
                                 : scratch<0>(static_cast<size_t>((pack_b_per_k_block ? 1 : k_blocks_) * block_bytes));
    auto pack_b_block = [&](int64_t jc, int64_t n_cur, int64_t kb, int32_t* comp) {
        if (b_in_place) return;
        const int64_t k0 = kb * plan_.kc;
        const int64_t k_len = std::min(plan_.kc, p_.k - k0);
        uint8_t* panels = b_full + (pack_b_per_k_block ? 0 : kb * block_bytes);
        if (L.f16_k_pairs) pack_b_f16_k_pairs(ch.b, p_.ldb, p_.trans_b, k0, k_len, jc, n_cur, panels);
        else
            pack_b_lowp(L.step, p_.b_type, ch.b, p_.ldb, p_.trans_b, k0, k_len, jc, n_cur, static_cast<int>(nr),
                        panel_groups(L, k_len), panels, comp, pack_vbmi_);
        if (comp && kb + 1 == k_blocks_)  // the column sums are complete: scaled once, read by the last K block
            scale_column_sums(comp, n_cur, comp_factor_);
    };
    // With several N blocks, every A panel (row tile x K block) is packed once, in the first N block, and kept
    // for the others (up to kKeepPackedABytes), instead of being packed again in each N block: the repacks
    // cost a fifth of a bf16 2048^3 call with 256-column B blocks.
    const int64_t panel_bytes = mr * plan_.a_panel_ld * esz;
    const int64_t row_tiles = ceil_div(ch.m1 - ch.m0, mr);
    const bool keep_a = pack_a && !shared_a_panels && ch.n1 - ch.n0 > plan_.nc &&
                        row_tiles * k_blocks_ * panel_bytes <= kKeepPackedABytes;
    // An A stored K x M is packed for a whole M block at once, K block by K block: its stored rows are then
    // read front to back across the block. Packed tile by tile, each tile read a few bytes of every stored row,
    // strides that defeat the prefetchers (3072x2x1024 TN s8, 1 thread: 570-1100 us, against 205 NN).
    // So are rows packed back to back (one short K block: plan.a_panel_ld is K rounded to steps), whose panels
    // tile by tile are the same bytes in one call per block instead of a call and its setup per row tile (see
    // run_small's dense A rows).
    const bool dense_a_rows = !amx && k_blocks_ == 1 && plan_.a_panel_ld == panel_groups(L, p_.k) * g;
    const bool pack_a_by_block = pack_a && !shared_a_panels && (p_.trans_a || dense_a_rows);
    const int64_t block_tiles = pack_a_by_block ? ceil_div(std::min(plan_.mc, ch.m1 - ch.m0), int64_t(mr)) : 1;
    uint8_t* a_panels =
        pack_a && !shared_a_panels
            ? scratch<1>(static_cast<size_t>((keep_a ? row_tiles * k_blocks_ : block_tiles) * panel_bytes))
            : nullptr;
    // Kept panels are K block major: one K block's tiles lie in row order, as one M block's pack writes them.
    auto kept_panel = [&](int64_t ir, int64_t kb) {
        return a_panels + (kb * row_tiles + (ir - ch.m0) / mr) * panel_bytes;
    };
    auto* comp = L.compensate ? reinterpret_cast<int32_t*>(scratch<2>(static_cast<size_t>(nc_pad * 4))) : nullptr;
    uint8_t* strip = k_blocks_ > 1 ? scratch<3>(static_cast<size_t>(plan_.mc * L.acc_ld)) : nullptr;

    const bool direct = amx && amx_direct_store(L);
    // Rows of A whole and adjacent (lda = K): a row tile's A is one range (LowpCallArgs::prefetch). Not for
    // an A that fits in L2, where repeated calls find it anyway (the prefetches only take load slots from the
    // tile loads; at 256^3 and 512^3 the difference measured within noise, 5 alternated runs).
    const bool prefetch_rows = amx && !shared_a_panels && !p_.trans_a && p_.lda == p_.k &&
                               int64_t(mr) * p_.lda * a_size <= kPrefetchRowTileBytes &&
                               p_.m * p_.lda * a_size >= kPrefetchMinABytes;
    auto runs_panels = [&](Phase phase) { return amx && (direct || (phase != kSingle && phase != kLast)); };
    // A column tail of other than 16 columns has a tile configuration of its own: taken after each row tile's
    // full panels, every row tile pays two ldtilecfg, which wait for the tile unit to drain (2418x33x2 s8, 1
    // thread: half the call's time in them). Deferred, a block pays two in all, where the A tile is still there to
    // read again (in place, or a packed panel that is kept).
    const bool defer_tail = amx && ch.n1 == p_.n && tail_config_differs() &&
                            (!pack_a || shared_a_panels || keep_a || pack_a_by_block);
    // A in place whose last K block ends inside a step (LowpLayout::a_last_step_copied): that step's rows from a
    // zero-padded copy per row tile (the copy of a packed panel too, where the run found A to pack).
    const bool copy_last_step = L.a_last_step_copied;
    alignas(64) uint8_t last_step[2 * 16 * 64];
    TileSession tiles(release_);
    LowpCallArgs call;
    call.scale = scale;
    // Non-temporal C stores (LowpLayout::amx_c_streamed) need every tile row to start a cache line; staged ones
    // (amx_c_staged, rows off lines) are plain stores.
    call.stream_c = direct && ((L.amx_c_streamed && reinterpret_cast<uintptr_t>(ch.c) % 64 == 0 &&
                                (p_.ldc * c_size) % 64 == 0) ||
                               L.amx_c_staged);
    // LowpLayout::b_src_*: the calls of each block of B prefetch the next block's B as stored, an equal share of
    // its rows each, in call order. A block is one K block of an N block where those are packed one at a time
    // (one M block: pack_b_per_k_block), else all of K for an N block (packed at the N block's start, then read
    // by every M block).
    const bool source_prefetch = L.b_src_rows > 0 && !amx && !b_in_place;
    const int64_t b_stride = p_.ldb * b_size;
    struct SourceShare {
        const uint8_t* base = nullptr;  // the next block's first row as stored
        int64_t rows = 0, rows_per_call = 0, next_call = 0;
    } share;
    // The block of B from (jc, kb) (kb < 0: all of K) is about to be read by `calls` calls.
    auto begin_source_share = [&](int64_t jc, int64_t kb, int64_t calls) {
        share = SourceShare{};
        if (!source_prefetch) return;
        int64_t next_jc = jc, next_kb = kb < 0 ? 0 : kb + 1;
        if (kb < 0 || next_kb == k_blocks_) {
            next_kb = 0;
            next_jc = jc + plan_.nc;
        }
        const uint8_t* b = ch.b;
        if (next_jc >= ch.n1) {  // the chunk's last block: the next batch's first one
            b = ch.next_b;
            next_jc = ch.n0;
        }
        if (b == nullptr) return;
        const int64_t k0 = next_kb * plan_.kc, k_len = kb < 0 ? p_.k : std::min(plan_.kc, p_.k - k0);
        share.base = b + (p_.trans_b ? next_jc * p_.ldb + k0 : k0 * p_.ldb + next_jc) * b_size;
        share.rows = p_.trans_b ? std::min(plan_.nc, ch.n1 - next_jc) : k_len;
        share.rows_per_call = round_up(ceil_div(share.rows, std::max<int64_t>(1, calls)), int64_t(L.b_src_rows));
    };
    auto next_source_share = [&] {
        const int64_t first = share.next_call++ * share.rows_per_call;
        if (share.base == nullptr || first >= share.rows) {
            call.prefetch = call.prefetch_end = nullptr;
            return;
        }
        call.prefetch = share.base + first * b_stride;
        call.prefetch_end = share.base + std::min(share.rows, first + share.rows_per_call) * b_stride;
    };
    for (int64_t jc = ch.n0; jc < ch.n1; jc += plan_.nc) {
        const int64_t n_cur = std::min(plan_.nc, ch.n1 - jc);
        if (comp) std::memset(comp, 0, static_cast<size_t>(nc_pad * 4));
        const int64_t panels_per_block = ceil_div(n_cur, nr);
        if (!pack_b_per_k_block) {
            for (int64_t kb = 0; kb < k_blocks_; ++kb) pack_b_block(jc, n_cur, kb, comp);
            begin_source_share(jc, -1, ceil_div(ch.m1 - ch.m0, int64_t(mr)) * panels_per_block * k_blocks_);
        }
        for (int64_t ic = ch.m0; ic < ch.m1; ic += plan_.mc) {
            const int64_t m_end = std::min(ch.m1, ic + plan_.mc);
            for (int64_t kb = 0; kb < k_blocks_; ++kb) {
                const int64_t k0 = kb * plan_.kc;
                const int64_t k_len = std::min(plan_.kc, p_.k - k0);
                const int64_t groups = panel_groups(L, k_len);
                const Phase phase =
                    k_blocks_ == 1 ? kSingle : kb == 0 ? kFirst : kb + 1 == k_blocks_ ? kLast : kMiddle;
                if (pack_b_per_k_block) {
                    pack_b_block(jc, n_cur, kb, comp);
                    begin_source_share(jc, kb, ceil_div(m_end - ic, int64_t(mr)) * panels_per_block);
                }
                const uint8_t* b_block = b_full + (pack_b_per_k_block ? 0 : kb * block_bytes);
                if (pack_a_by_block && (!keep_a || jc == ch.n0))
                    pack_a_lowp(L.step, p_.a_type, ch.a, p_.lda, p_.trans_a, ic,
                                static_cast<int>(std::min(m_end, p_.m) - ic), k0, k_len, groups * g,
                                plan_.a_panel_ld, keep_a ? kept_panel(ic, kb) : a_panels);
                // The A tile of row tile ir (packed here where A is packed tile by tile, unless `repeat`: its
                // panel is still there) and its stride in call.a_stride.
                auto a_tile_at = [&](int64_t ir, bool repeat) -> const uint8_t* {
                    if (shared_a_panels) {
                        call.a_stride = plan_.a_panel_ld * esz;
                        return shared_a_panels + ((ir / mr) * k_blocks_ + kb) * panel_bytes;
                    }
                    if (pack_a) {
                        uint8_t* a_panel = keep_a            ? kept_panel(ir, kb)
                                           : pack_a_by_block ? a_panels + ((ir - ic) / mr) * panel_bytes
                                                             : a_panels;
                        if (!repeat && !pack_a_by_block && (!keep_a || jc == ch.n0))
                            pack_a_lowp(L.step, p_.a_type, ch.a, p_.lda, p_.trans_a, ir,
                                        static_cast<int>(std::min<int64_t>(mr, p_.m - ir)), k0, k_len, groups * g,
                                        plan_.a_panel_ld, a_panel);
                        call.a_stride = plan_.a_panel_ld * esz;
                        return a_panel;
                    }
                    call.a_stride = p_.lda * a_size;
                    if (p_.trans_a) return ch.a + (k0 * p_.lda + ir) * a_size;  // f16 in place (a_f16_in_place)
                    const int64_t rows = std::min<int64_t>(mr, p_.m - ir);
                    if (tile_copied(ir, rows, p_.m, p_.lda, k0, k_len))
                        return copy_last_rows(ch.a + (ir * p_.lda + k0) * a_size, rows, k0, p_.lda);
                    return ch.a + (ir * p_.lda + k0) * a_size;
                };
                // Row tile ir's calls over the columns [j0, j1) of this N block.
                auto run_row_tile = [&](int64_t ir, const uint8_t* a_tile, int64_t j0, int64_t j1) {
                    const bool row_tail = ir + mr > p_.m;
                    if (copy_last_step && kb + 1 == k_blocks_)
                        call.a_last_step = copy_a_last_step(a_tile, call.a_stride, std::min<int64_t>(mr, p_.m - ir),
                                                            k_len, last_step);
                    if (p_.bias == BiasKind::per_row)
                        call.bias = static_cast<const uint8_t*>(args.bias) + ir * bias_size;
                    if (p_.a_scale == ScaleMode::per_row) call.a_scales = args.a_scales + ir;
                    for (int64_t jr = j0, panels = 1; jr < j1; jr += panels * nr) {
                        const bool col_tail = jr + nr > p_.n;
                        const int s = slot(row_tail, col_tail, phase);
                        // Full panels in one call where the variant runs several (no vector epilogue).
                        panels = col_tail || !runs_panels(phase) ? 1 : (std::min(j1, p_.n) - jr) / nr;
                        call.panels = panels;
                        if (p_.bias == BiasKind::per_column)
                            call.bias = static_cast<const uint8_t*>(args.bias) + jr * bias_size;
                        if (p_.b_scale == ScaleMode::per_column) call.b_scales = args.b_scales + jr;
                        if (comp) call.comp = comp + (jr - jc);
                        if (strip) call.acc = strip + (ir - ic) * L.acc_ld + (jr - jc) * 4;
                        if (amx) tiles.use(configs_[s]);
                        if (source_prefetch) next_source_share();
                        const uint8_t* b_tile = b_in_place ? ch.b + (k0 * p_.ldb + jr) * b_size
                                                           : b_block + ((jr - jc) / nr) * groups * nr * 4;
                        fns_[s](a_tile, b_tile, ch.c + (ir * p_.ldc + jr) * c_size, &call);
                    }
                };
                // A column tail whose tile configuration differs from the full panels' (deferred_tail) runs
                // after the block's full panels, for every row tile, instead of after each row tile's.
                const int64_t n_end = jc + n_cur;
                // (One row tile: nothing to save, and its A tile would be fetched, or copied, twice.)
                const int64_t full_end =
                    defer_tail && n_end == p_.n && m_end - ic > mr ? std::max(jc, p_.n / nr * nr) : n_end;
                for (int64_t ir = ic; ir < m_end; ir += mr) {
                    const uint8_t* a_tile = a_tile_at(ir, false);
                    // The next row tile's A rows, read from the caller's A next (packed or in place), prefetched
                    // into L2 by this row tile's first K block's panel runs: their DRAM reads overlap the tile
                    // products instead of stalling the packer or the first panel.
                    call.prefetch = call.prefetch_end = nullptr;
                    if (prefetch_rows && kb == 0 && ir + mr < ch.m1 && (!pack_a || !keep_a || jc == ch.n0)) {
                        call.prefetch = ch.a + (ir + mr) * p_.lda * a_size;
                        call.prefetch_end = ch.a + std::min(ch.m1, ir + 2 * mr) * p_.lda * a_size;
                    }
                    run_row_tile(ir, a_tile, jc, full_end);
                }
                call.prefetch = call.prefetch_end = nullptr;
                if (full_end < n_end)
                    for (int64_t ir = ic; ir < m_end; ir += mr) run_row_tile(ir, a_tile_at(ir, true), full_end, n_end);
            }
        }
    }
    // Non-temporal stores are weakly ordered: fenced before the task reports done, so that whoever joins the
    // threads (or the caller) reads the C they wrote.
    if (call.stream_c) _mm_sfence();
}

// What run_chunk does for a chunk of one block of each, without the blocking: B packed for one K block and one
// N block, each row tile's A packed right before its calls (or read in place), the tile configuration loaded
// once and released on return. 8^3 bf16 (AMX) spent more time in run() and run_chunk than in the microkernel.
// Tried: packing each B panel right before the first row tile's call to it (its packing would overlap the tile
// unit's work on the previous panel): 64^3 bf16 and s8 3-5% slower (the panel runs are lost).
void GemmLowpKernel::run_small(const RunArgs& args, float scale, int64_t batch_begin, int64_t batch_end) const {
    const plan::LowpLayout& L = plan_.layout;
    const int mr = L.mr;
    const int64_t nr = plan_.nr();
    const bool amx = plan::step_is_amx(L.step);
    const int g = plan::step_group(L.step);
    const int64_t esz = plan::step_elem_bytes(L.step);
    const int64_t a_size = dtype_size(p_.a_type), b_size = dtype_size(p_.b_type), c_size = dtype_size(p_.c_type);
    const int64_t bias_size = p_.bias == BiasKind::none ? 0 : dtype_size(p_.bias_type);
    const int64_t groups = panel_groups(L, p_.k);
    const int64_t panel_bytes = groups * nr * 4;
    const bool panel_runs = amx && amx_direct_store(L);  // full panels in one call (no vector epilogue)
    const int64_t full_panels = p_.n / nr;

    // The tiles in kinds of one tile configuration each: rows [0, m_full) and the row tail, columns [0, n_full)
    // and the column tail, merged where their configurations are the same stub.
    const int64_t m_full = amx ? p_.m / mr * mr : 0, n_full = full_panels * nr;
    // (One row tile of one batch: nothing to save, and its A tile would be fetched, or copied, twice. A packed
    // A: each row tile would be packed once per column kind, 59x42x679 TT s8 x3 16 -> 25 us.)
    const bool col_split =
        tail_config_differs() && !plan_.pack_a && (p_.m > mr || batch_end - batch_begin > 1);
    const bool col_kind = n_full == 0;  // a column kind there is, for the row test
    const bool row_split = amx && m_full > 0 && m_full < p_.m &&
                           configs_[slot(true, col_kind, kSingle)] != configs_[slot(false, col_kind, kSingle)];
    int64_t row_ranges[3] = {0, p_.m, p_.m}, col_ranges[3] = {0, p_.n, p_.n};
    if (row_split) row_ranges[1] = m_full;
    if (col_split) col_ranges[1] = n_full;
    // Batches of several kinds go in groups: each batch of a group packs its B, then every kind runs over all of
    // the group's batches, so that the configurations switch a few times a group instead of a few times a batch
    // (ldtilecfg waits for the tile unit to drain: 55x2x3 NT s8 x23, 1 thread, spent half its tile code's time
    // in two a batch). A group's packed B stays in L1 (kSmallGroupBytes).
    const int64_t b_stride = ceil_div(p_.n, nr) * panel_bytes, comp_stride = round_up(p_.n, nr);
    const int64_t per_batch_bytes = b_stride + (L.compensate ? comp_stride * 4 : 0);
    const int64_t group = row_split || col_split
                              ? std::clamp<int64_t>(kSmallGroupBytes / per_batch_bytes, 1, batch_end - batch_begin)
                              : 1;
    // B read where it lies (LowpLayout::b_in_place): the kernels step through its rows, a panel's columns apart.
    const bool b_in_place = L.b_in_place;
    const int64_t b_panel_bytes = b_in_place ? nr * b_size : panel_bytes;
    uint8_t* b_packed = b_in_place ? nullptr : scratch<0>(static_cast<size_t>(group * b_stride));
    // Batch bt's B panels: the group's i-th packed B, or (b_in_place) the batch's B itself.
    auto b_panels_of = [&](int64_t bt, int64_t i) -> const uint8_t* {
        return b_in_place ? static_cast<const uint8_t*>(args.b) + bt * p_.stride_b * b_size : b_packed + i * b_stride;
    };
    int32_t* comp = L.compensate
                        ? reinterpret_cast<int32_t*>(scratch<2>(static_cast<size_t>(group * comp_stride * 4)))
                        : nullptr;

    alignas(64) uint8_t last_step[2 * 16 * 64];  // LowpLayout::a_last_step_copied
    // One tile session for the batches: their calls share the configurations.
    TileSession tiles(release_);
    LowpCallArgs call;
    call.scale = scale;
    // The A tile of row tile ir of a batch's A (packed: pack_a), and its stride in call.a_stride.
    auto a_tile_at = [&](const uint8_t* a, bool pack_a, int64_t ir) -> const uint8_t* {
        if (pack_a) {
            uint8_t* a_panel = scratch<1>(static_cast<size_t>(mr * plan_.a_panel_ld * esz));
            pack_a_lowp(L.step, p_.a_type, a, p_.lda, p_.trans_a, ir,
                        static_cast<int>(std::min<int64_t>(mr, p_.m - ir)), 0, p_.k, groups * g, plan_.a_panel_ld,
                        a_panel);
            call.a_stride = plan_.a_panel_ld * esz;
            return a_panel;
        }
        call.a_stride = p_.lda * a_size;
        if (p_.trans_a) return a + ir * a_size;  // f16 in place (a_f16_in_place), stored K x M
        const int64_t rows = std::min<int64_t>(mr, p_.m - ir);
        if (tile_copied(ir, rows, p_.m, p_.lda, 0, p_.k))
            return copy_last_rows(a + ir * p_.lda * a_size, rows, 0, p_.lda);
        return a + ir * p_.lda * a_size;
    };
    // Row tile ir's calls over the columns from panel p0: `full` whole panels, then the column tail where `tail`,
    // with B's panels b_panels (b_panels_of) and the group's i-th column sums.
    auto run_row_tile = [&](const uint8_t* b_panels, int64_t i, uint8_t* c, int64_t ir, const uint8_t* a_tile,
                            int64_t p0, int64_t full, bool tail) {
        const bool row_tail = ir + mr > p_.m;
        if (L.a_last_step_copied)  // (as run_chunk's)
            call.a_last_step =
                copy_a_last_step(a_tile, call.a_stride, std::min<int64_t>(mr, p_.m - ir), p_.k, last_step);
        if (p_.bias == BiasKind::per_row) call.bias = static_cast<const uint8_t*>(args.bias) + ir * bias_size;
        if (p_.a_scale == ScaleMode::per_row) call.a_scales = args.a_scales + ir;
        // Pointers advance panel by panel (no division per call).
        const int64_t j0 = p0 * nr;
        const uint8_t* b_panel = b_panels + p0 * b_panel_bytes;
        uint8_t* c_tile = c + (ir * p_.ldc + j0) * c_size;
        int32_t* comp_at = comp ? comp + i * comp_stride + j0 : nullptr;
        auto one_call = [&](int64_t jr, int64_t panels, bool col_tail) {
            const int s = slot(row_tail, col_tail, kSingle);
            call.panels = panels;
            if (p_.bias == BiasKind::per_column) call.bias = static_cast<const uint8_t*>(args.bias) + jr * bias_size;
            if (p_.b_scale == ScaleMode::per_column) call.b_scales = args.b_scales + jr;
            call.comp = comp_at;
            if (amx) tiles.use(configs_[s]);
            fns_[s](a_tile, b_panel, c_tile, &call);
            b_panel += panels * b_panel_bytes;
            c_tile += panels * nr * c_size;
            if (comp_at) comp_at += panels * nr;
        };
        int64_t jr = j0;
        if (panel_runs && full > 0) {
            one_call(jr, full, false);
            jr += full * nr;
        } else {
            for (int64_t f = 0; f < full; ++f, jr += nr) one_call(jr, 1, false);
        }
        if (tail) one_call(jr, 1, true);
    };
    auto pack_b = [&](int64_t bt, int64_t i) {
        if (b_in_place) return;
        const auto* b = static_cast<const uint8_t*>(args.b) + bt * p_.stride_b * b_size;
        int32_t* sums = comp ? comp + i * comp_stride : nullptr;
        if (sums) std::memset(sums, 0, static_cast<size_t>(comp_stride * 4));
        if (L.f16_k_pairs) pack_b_f16_k_pairs(b, p_.ldb, p_.trans_b, 0, p_.k, 0, p_.n, b_packed + i * b_stride);
        else
            pack_b_lowp(L.step, p_.b_type, b, p_.ldb, p_.trans_b, 0, p_.k, 0, p_.n, static_cast<int>(nr), groups,
                        b_packed + i * b_stride, sums, pack_vbmi_);
        if (sums) scale_column_sums(sums, p_.n, comp_factor_);  // complete at once (one K block)
    };
    // Rows packed back to back (a short K in one block, plan.a_panel_ld = K rounded to steps) are packed a block
    // of row tiles per call: the same panels as tile by tile, but one call and its setup per block instead of
    // per row tile, which a K of a few values made most of the packing (1 thread, with pack_a_lowp's vector
    // permutes of short rows: bf16 46x16x9 NT x7 1.90 -> 1.11 us, s8 300x40x7 2.07 -> 1.01).
    const int64_t a_row_bytes = plan_.a_panel_ld * esz;
    const bool dense_a_rows = !amx && plan_.a_panel_ld == groups * g;
    const int64_t a_block_rows =
        dense_a_rows ? std::max<int64_t>(mr, kDenseABlockBytes / a_row_bytes / mr * mr) : int64_t(mr);
    if (!row_split && !col_split) {  // one kind: batch by batch
        for (int64_t bt = batch_begin; bt < batch_end; ++bt) {
            pack_b(bt, 0);
            const auto* a = static_cast<const uint8_t*>(args.a) + bt * p_.stride_a * a_size;
            auto* c = static_cast<uint8_t*>(args.c) + bt * p_.stride_c * c_size;
            const bool pack_a = packs_a(a);
            if (pack_a && dense_a_rows) {
                uint8_t* a_block = scratch<1>(static_cast<size_t>(a_block_rows * a_row_bytes));
                call.a_stride = a_row_bytes;
                for (int64_t i0 = 0; i0 < p_.m; i0 += a_block_rows) {
                    const int64_t rows = std::min(a_block_rows, p_.m - i0);
                    pack_a_lowp(L.step, p_.a_type, a, p_.lda, p_.trans_a, i0, static_cast<int>(rows), 0, p_.k,
                                groups * g, plan_.a_panel_ld, a_block);
                    for (int64_t ir = i0; ir < i0 + rows; ir += mr)
                        run_row_tile(b_panels_of(bt, 0), 0, c, ir, a_block + (ir - i0) * a_row_bytes, 0, full_panels,
                                     full_panels * nr < p_.n);
                }
                continue;
            }
            for (int64_t ir = 0; ir < p_.m; ir += mr)
                run_row_tile(b_panels_of(bt, 0), 0, c, ir, a_tile_at(a, pack_a, ir), 0, full_panels,
                             full_panels * nr < p_.n);
        }
        return;
    }
    for (int64_t g0 = batch_begin; g0 < batch_end; g0 += group) {
        const int64_t g1 = std::min(batch_end, g0 + group);
        for (int64_t bt = g0; bt < g1; ++bt) pack_b(bt, bt - g0);
        for (int r = 0; r < 2; ++r)
            for (int q = 0; q < 2; ++q)
                for (int64_t bt = g0; bt < g1; ++bt) {
                    if (row_ranges[r] == row_ranges[r + 1] || col_ranges[q] == col_ranges[q + 1]) continue;
                    const auto* a = static_cast<const uint8_t*>(args.a) + bt * p_.stride_a * a_size;
                    auto* c = static_cast<uint8_t*>(args.c) + bt * p_.stride_c * c_size;
                    const bool pack_a = packs_a(a);
                    for (int64_t ir = row_ranges[r]; ir < row_ranges[r + 1]; ir += mr)
                        run_row_tile(b_panels_of(bt, bt - g0), bt - g0, c, ir, a_tile_at(a, pack_a, ir),
                                     q == 0 ? 0 : full_panels, q == 0 ? full_panels : 0, col_ranges[q + 1] > n_full);
                }
    }
}

// The whole call in one generated function (gemm_amx_whole_generator.hpp), which loads the tile configuration
// and releases the tiles itself. Its packed B lives on this stack: no per-thread scratch to look up (a TLS
// call from a shared library) for a few KB.
void GemmLowpKernel::run_whole(const RunArgs& args, int64_t batch_begin, int64_t batch_end) const {
    alignas(64) uint8_t b_panels[kAmxWholeMaxBBytes];
    alignas(64) uint8_t a_rows[kAmxWholeMaxACopyBytes];  // the rows the function copies (K ends inside a step)
    const int64_t a_size = dtype_size(p_.a_type), b_size = dtype_size(p_.b_type), c_size = dtype_size(p_.c_type);
    // One tile configuration for the run of batches (ldtilecfg waits for the tile unit to drain: 8^3 s8 x64, 1
    // thread, 5.8 us with one a batch, 2.7 with one a call).
    TileSession tiles(release_);
    for (int64_t bt = batch_begin; bt < batch_end; ++bt) {
        const auto* a = static_cast<const uint8_t*>(args.a) + bt * p_.stride_a * a_size;
        const auto* b = static_cast<const uint8_t*>(args.b) + bt * p_.stride_b * b_size;
        auto* c = static_cast<uint8_t*>(args.c) + bt * p_.stride_c * c_size;
        if (!whole_packs_b_) {  // panel by panel, where amx_whole_panels places them
            const plan::LowpLayout& L = plan_.layout;
            const int64_t groups = amx_whole_k_groups(p_, plan_);
            uint8_t* panel = b_panels;
            for (const AmxWholePanel& at : amx_whole_panels(p_.n)) {
                pack_b_lowp(L.step, p_.b_type, b, p_.ldb, p_.trans_b, 0, p_.k, at.first,
                            std::min<int64_t>(at.tiles * 16, p_.n - at.first), plan_.nr(), groups, panel, nullptr,
                            pack_vbmi_);
                panel += groups * plan_.nr() * 4;
            }
        }
        if (batch_end - batch_begin == 1) {  // the function configures and releases (ahead of its products)
            whole_(a, b, c, b_panels, a_rows, 1);
            continue;
        }
        tiles.use(configs_[kWholeConfigSlot]);  // (the driver's packing leaves the tiles alone)
        whole_(a, b, c, b_panels, a_rows, 0);
    }
}

// Dot products (VNNI, f16 or bf16 decode, B stored N x K): every thread packs all of A (a few rows, K zero padded to
// whole 64-byte vectors; f16 widened to f32) with 128 times its row sums (s8 A), then walks its columns in tiles
// of nr B rows, each tile's rows streaming once from memory and reused from L1 by the row tiles.
void GemmLowpKernel::run_dot_chunk(const Chunk& ch, const RunArgs& args, float scale) const {
    const plan::LowpLayout& L = plan_.layout;
    LowpCallArgs call;
    call.scale = scale;
    if (L.dot_a_in_place) {  // f16 rows read as stored
        run_dot_tiles(ch, args, call, ch.a, p_.lda * dtype_size(p_.a_type));
        return;
    }
    const int64_t ld = plan_.a_panel_ld * plan::step_elem_bytes(L.step);  // bytes
    auto* a_packed = scratch<1>(static_cast<size_t>(p_.m * ld));
    if (L.step == LowpStep::fma_f32 || L.step == LowpStep::dot_bf16) {
        // f16 A widened to f32 rows, bf16 as stored, K zero padded to whole vectors (the packer transposes an A
        // stored K x M).
        pack_a_lowp(L.step, p_.a_type, ch.a, p_.lda, p_.trans_a, 0, static_cast<int>(p_.m), 0, p_.k, plan_.kc,
                    plan_.a_panel_ld, a_packed);
        run_dot_tiles(ch, args, call, a_packed, ld);
        return;
    }
    auto* row_comp = reinterpret_cast<int32_t*>(scratch<2>(static_cast<size_t>(p_.m * 4)));
    const auto* a = reinterpret_cast<const int8_t*>(ch.a);
    // A stored K x M: the byte transposes of pack_a_transposed, which zero the rows' padding too (a byte at a time,
    // K walked once, was 40% of 11x39x3035 TT s8 x33 on one thread).
    const bool transposed = p_.trans_a && pack_a_transposed_available();
    if (transposed) {
        pack_a_transposed(a, p_.lda, 1, 0, static_cast<int>(p_.m), 0, p_.k, ld, ld, 0, a_packed);
    } else if (p_.trans_a) {
        // K walked once, writing the few rows side by side (a row at a time would stride through all of A once
        // per row).
        for (int64_t k = 0; k < p_.k; ++k) {
            const int8_t* column = a + k * p_.lda;
            for (int64_t i = 0; i < p_.m; ++i) reinterpret_cast<int8_t*>(a_packed + i * ld)[k] = column[i];
        }
    }
    for (int64_t i = 0; i < p_.m; ++i) {
        auto* row = reinterpret_cast<int8_t*>(a_packed + i * ld);
        if (!p_.trans_a) std::memcpy(row, a + i * p_.lda, static_cast<size_t>(p_.k));
        if (!transposed) std::memset(row + p_.k, 0, static_cast<size_t>(ld - p_.k));
    }
    if (L.dot_row_comp) {
        s8_row_sums(a_packed, ld, p_.m, round_up(p_.k, 64), row_comp);
        for (int64_t i = 0; i < p_.m; ++i) row_comp[i] *= 128;
    }
    call.comp = row_comp;
    run_dot_tiles(ch, args, call, a_packed, ld);
}

// The chunk's column tiles of nr B rows, each streaming once from memory and reused from L1 by the row tiles.
void GemmLowpKernel::run_dot_tiles(const Chunk& ch, const RunArgs& args, LowpCallArgs& call,
                                   const uint8_t* a_packed, int64_t ld) const {
    const int mr = plan_.layout.mr;
    const int64_t nr = plan_.nr();
    const int64_t b_size = dtype_size(p_.b_type), c_size = dtype_size(p_.c_type);
    const int64_t bias_size = p_.bias == BiasKind::none ? 0 : dtype_size(p_.bias_type);
    const int32_t* row_comp = call.comp;
    for (int64_t jr = ch.n0; jr < ch.n1; jr += nr) {
        const bool col_tail = jr + nr > p_.n;
        if (p_.bias == BiasKind::per_column) call.bias = static_cast<const uint8_t*>(args.bias) + jr * bias_size;
        if (p_.b_scale == ScaleMode::per_column) call.b_scales = args.b_scales + jr;
        const uint8_t* b_rows = ch.b + jr * p_.ldb * b_size;
        for (int64_t ir = 0; ir < p_.m; ir += mr) {
            const bool row_tail = ir + mr > p_.m;
            if (p_.bias == BiasKind::per_row) call.bias = static_cast<const uint8_t*>(args.bias) + ir * bias_size;
            if (p_.a_scale == ScaleMode::per_row) call.a_scales = args.a_scales + ir;
            if (row_comp) call.comp = row_comp + ir;
            fns_[slot(row_tail, col_tail, kSingle)](a_packed + ir * ld, b_rows, ch.c + (ir * p_.ldc + jr) * c_size,
                                                    &call);
        }
    }
}

// Several tasks of one batch each read all of op(A)^T: packing it per task repeats the work (and at M = 1 writes a
// 32-column panel that is mostly zeros) once per thread, 1 MB each for 128x4096x4096 bf16 at 16 threads, about
// a quarter of a task's time measured at 1 thread (128x256x4096 NT: the transposing packer and its memset 17% of
// the samples, the microkernel 45%). Here it is packed once: pieces of (K block, 32-column panel, 256 k groups)
// spread over the threads, then the tasks read it.
const uint8_t* GemmLowpKernel::pack_swapped_a_shared(const RunArgs& args) const {
    const plan::LowpLayout& L = plan_.layout;
    if (share_off() || p_.batch != 1 || plan_.threads <= 1 || plan_.m_chunks <= 1) return nullptr;
    const int64_t nr = plan_.nr();
    const int g = plan::step_group(L.step);
    const int64_t block_bytes = panel_groups(L, plan_.kc) * plan_.nc * 4;
    constexpr int64_t kSliceGroups = 256;  // a multiple of AMX's 16 groups per K step
    const int64_t panels = ceil_div(p_.m, nr);
    const int64_t slices = ceil_div(panel_groups(L, plan_.kc), kSliceGroups);
    const int64_t total = k_blocks_ * block_bytes;
    if (total - total / plan_.threads < kMinSharedSavingBytes) return nullptr;  // M <= 32 at K = 4096 bf16
    uint8_t* packed = scratch<4>(static_cast<size_t>(total));
    const auto* a = static_cast<const uint8_t*>(args.a);
    auto piece = [&](int64_t t) {
        const int64_t kb = t / (panels * slices), p = (t / slices) % panels, s = t % slices;
        const int64_t k0 = kb * plan_.kc;
        const int64_t k_len = std::min(plan_.kc, p_.k - k0);
        const int64_t groups = panel_groups(L, k_len);
        const int64_t g0 = s * kSliceGroups;
        if (g0 >= groups) return;
        const int64_t slice_groups = std::min(kSliceGroups, groups - g0);
        const int64_t slice_k = std::max<int64_t>(0, std::min(slice_groups * g, k_len - g0 * g));
        // op(A)^T as a B operand: stored M x K is "transposed", stored K x M (trans_a) is not.
        pack_b_lowp(L.step, p_.a_type, a, p_.lda, !p_.trans_a, k0 + g0 * g, slice_k, p * nr,
                    std::min(nr, p_.m - p * nr), static_cast<int>(nr), slice_groups,
                    packed + kb * block_bytes + (p * groups + g0) * nr * 4, nullptr, pack_vbmi_);
    };
    runner_->parallel_for(k_blocks_ * panels * slices, piece);
    return packed;
}

// Swapped roles (few rows, B stored N x K): A is packed into 32-column panels, like a B (once per call when
// shared, else per task); B's rows are the A tiles, read in place when their rows are whole, aligned cache lines
// (else copied per tile); the kernel's block is C^T and its epilogue writes C row by row.
void GemmLowpKernel::run_swapped_chunk(const Chunk& ch, const RunArgs& args, float scale,
                                       const uint8_t* shared_a) const {
    const plan::LowpLayout& L = plan_.layout;
    const int mr = L.mr;
    const int64_t nr = plan_.nr();
    const int g = plan::step_group(L.step);
    const int64_t esz = plan::step_elem_bytes(L.step);
    const int64_t b_size = dtype_size(p_.b_type), c_size = dtype_size(p_.c_type);
    const int64_t bias_size = p_.bias == BiasKind::none ? 0 : dtype_size(p_.bias_type);
    const int64_t block_groups = panel_groups(L, plan_.kc);  // every K block's panels are this far apart
    const int64_t block_bytes = block_groups * plan_.nc * 4;

    // All of K one block of short steps (plan::amx_k_step_bytes): the tiles read just K's bytes of each row, in
    // place at any stride, as the normal order's small calls read A (packs_a). 1 thread, median us, copied ->
    // in place: bf16 6x959x16 TT x46 172 -> 96, 6x959x16 NT 3.6 -> 2.1; u8 16x1000x48 NT x2 10.5 -> 7.2. int8 over
    // a K that is not whole dwords too (K rounded up, the last row tile from a copy): s8 6x2752x53 NT 10.0 -> 6.4.
    // int8 with few 32-row panels of A (plan::amx_rows_any_stride) reads B's rows in place at any stride too:
    // 1 thread, median us, copied -> in place, panels: s8 36x100x1886 NT (2) 16.1 -> 12.9, 30x2747x1417 NT (1)
    // 410 -> 340, 64x1000x999 NT (2) 72 -> 59, 128x2000x999 NT (4) 330 -> 320; 256x1000x1000 NT (8) lost, 198 ->
    // 242.
    const bool in_place = (k_blocks_ == 1 && plan::amx_k_reads_rows(plan_.layout.step, p_.k)) ||
                             plan::amx_rows_any_stride(plan_.layout.step, true, p_.m, p_.n);
    const bool misaligned =
        !in_place && (reinterpret_cast<uintptr_t>(ch.b) % 64 != 0 || (p_.ldb * b_size) % 64 != 0);
    // bf16 whose last K block ends inside a step: the whole steps read the rows (in place or copied), the last one
    // a zero-padded copy of its bytes per row tile (plan::amx_swapped_last_step_copied: in place, an Inf or a NaN
    // past K in the rows' padding made the outputs NaN). Copying the rows whole instead cost 1 thread, median us:
    // 16x4096x1000 NT ldb 1024 594 -> 822, 8x300x100 NT ldb 128 1.4 -> 1.95.
    const int64_t last_k = p_.k - (k_blocks_ - 1) * plan_.kc;
    const bool last_step_copied = plan::amx_swapped_last_step_copied(L.step, last_k, k_blocks_ == 1);
    const int64_t last_step_k = last_k / (64 / b_size) * (64 / b_size);  // where it starts in the last block
    alignas(64) uint8_t last_step[2 * 16 * 64];                          // a 32-row tile's rows of 64 bytes
    uint8_t* own_a = shared_a ? nullptr : scratch<0>(static_cast<size_t>(block_bytes));
    uint8_t* b_rows = misaligned ? scratch<1>(static_cast<size_t>(mr * plan_.a_panel_ld * esz)) : nullptr;
    // Several K blocks: the partial sums of the chunk's whole C^T (rows n, columns m) wait in a strip.
    uint8_t* strip = k_blocks_ > 1 ? scratch<3>(static_cast<size_t>((ch.n1 - ch.n0) * L.acc_ld)) : nullptr;

    // One K block of B's whole rows, stored adjacent (ldb = K), a B past half of L2 and several calls per row
    // tile: the first call of each row tile waits on DRAM for every tile load of its rows, the others find
    // them in L2, and they prefetch the next row tile's rows meanwhile (1 thread, median of alternated runs:
    // 128x4096x4096 NT bf16 800 -> 880 GFLOP/s, s8 1690 -> 1930 GOP/s). One call per row tile (16 rows) is
    // bound by DRAM alone.
    const bool prefetch_next_rows = !b_rows && k_blocks_ == 1 && p_.ldb == p_.k && p_.m > nr &&
                                    p_.n * p_.ldb * b_size >= kPrefetchMinABytes;
    TileSession tiles(release_);
    LowpCallArgs call;
    call.scale = scale;
    for (int64_t kb = 0; kb < k_blocks_; ++kb) {
        const int64_t k0 = kb * plan_.kc;
        const int64_t k_len = std::min(plan_.kc, p_.k - k0);
        const int64_t groups = panel_groups(L, k_len);
        const Phase phase = k_blocks_ == 1 ? kSingle : kb == 0 ? kFirst : kb + 1 == k_blocks_ ? kLast : kMiddle;
        // op(A)^T as a B operand: stored M x K is "transposed", stored K x M (trans_a) is not.
        const uint8_t* a_packed = shared_a ? shared_a + kb * block_bytes : own_a;
        if (!shared_a)
            pack_b_lowp(L.step, p_.a_type, ch.a, p_.lda, !p_.trans_a, k0, k_len, 0, p_.m, static_cast<int>(nr),
                        groups, own_a, nullptr, pack_vbmi_);
        const bool copy_last_step = last_step_copied && kb + 1 == k_blocks_;
        // What the tiles read from the rows: the whole steps before the copied one, or all of the block's steps
        // (K zero padded to them: int8 reads them whole).
        const int64_t rows_k = copy_last_step ? last_step_k : k_len;
        const int64_t rows_k_padded = copy_last_step ? last_step_k : groups * g;
        for (int64_t ir = ch.n0; ir < ch.n1; ir += mr) {
            const bool row_tail = ir + mr > p_.n;
            const uint8_t* a_tile;
            if (b_rows) {
                if (rows_k > 0)
                    pack_a_lowp(L.step, p_.b_type, ch.b, p_.ldb, false, ir,
                                static_cast<int>(std::min<int64_t>(mr, p_.n - ir)), k0, rows_k, rows_k_padded,
                                plan_.a_panel_ld, b_rows);
                a_tile = b_rows;
                call.a_stride = plan_.a_panel_ld * esz;
            } else {
                a_tile = ch.b + (ir * p_.ldb + k0) * b_size;
                call.a_stride = p_.ldb * b_size;
                const int64_t rows = std::min<int64_t>(mr, p_.n - ir);
                if (tile_copied(ir, rows, p_.n, p_.ldb, k0, k_len))  // int8: whole steps past B's last byte
                    a_tile = copy_last_rows(a_tile, rows, k0, p_.ldb);
            }
            if (copy_last_step) {
                pack_amx_last_step(ch.b + (ir * p_.ldb + k0 + last_step_k) * b_size, p_.ldb * b_size,
                                   static_cast<int>(std::min<int64_t>(mr, p_.n - ir)),
                                   static_cast<int>((k_len - last_step_k) * b_size), last_step);
                call.a_last_step = last_step;
            }
            if (p_.bias == BiasKind::per_column)
                call.bias = static_cast<const uint8_t*>(args.bias) + ir * bias_size;
            if (p_.b_scale == ScaleMode::per_column) call.b_scales = args.b_scales + ir;
            // The next row tile's rows of B, prefetched into L2 by this row tile's calls, a share each (at the
            // generator's few lines per K step they cover about half of them).
            const int64_t calls = ceil_div(p_.m, nr);
            const uint8_t* next_rows = nullptr;
            int64_t next_bytes = 0;
            if (prefetch_next_rows && ir + mr < ch.n1) {
                next_rows = ch.b + (ir + mr) * p_.ldb * b_size;
                next_bytes = std::min<int64_t>(mr, ch.n1 - ir - mr) * p_.ldb * b_size;
            }
            for (int64_t jr = 0; jr < p_.m; jr += nr) {
                call.prefetch = call.prefetch_end = nullptr;
                if (next_rows) {
                    call.prefetch = next_rows + next_bytes * (jr / nr) / calls;
                    call.prefetch_end = next_rows + next_bytes * (jr / nr + 1) / calls;
                }
                const bool col_tail = jr + nr > p_.m;
                const int s = slot(row_tail, col_tail, phase);
                if (p_.bias == BiasKind::per_row)
                    call.bias = static_cast<const uint8_t*>(args.bias) + jr * bias_size;
                if (p_.a_scale == ScaleMode::per_row) call.a_scales = args.a_scales + jr;
                if (strip) call.acc = strip + (ir - ch.n0) * L.acc_ld + jr * 4;
                tiles.use(configs_[s]);
                fns_[s](a_tile, a_packed + (jr / nr) * groups * nr * 4, ch.c + (jr * p_.ldc + ir) * c_size, &call);
            }
        }
    }
}

}  // namespace jitmm::x86
