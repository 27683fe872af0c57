#include "x86/gemm_amx_generator.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "x86/emit_buffer.hpp"

#include <algorithm>
#include <array>
#include <list>
#include <string>

namespace jitmm::x86 {

namespace {

using plan::LowpStep;
using Xbyak::Tmm;

constexpr int kTile = 16;           // rows and 32-bit columns of a C tile
constexpr int kStepBytes = 64;      // bytes of K in one A tile row
constexpr int kBPanelRow = 128;     // bytes of one k group across the 32-column B panel
constexpr int kBlockRowBytes = 128; // the stack block the epilogue reads: 32 columns of 32-bit sums
constexpr int64_t kEarlyLoadSteps = 8;  // panels of this many K steps load the next panel before their stores
constexpr int kPrefetchLinesPerStep = 4;  // LowpCallArgs::prefetch: a 32 x 1 KB A block in 128 K steps

Tmm c_tile(int i, int j) { return Tmm(2 * i + j); }
Tmm a_tile(int i) { return Tmm(4 + i); }
Tmm b_tile(int j) { return Tmm(6 + j); }

// Register plan (System V): rdi = A rows 0-15, r9 = A rows 16-31, r8 = A row stride, rsi = B panel,
// r10 = B row stride, rdx = C, rcx = args, rax = K-step counter. After the main loop the epilogue owns
// r8-r11 and the loop over the rows uses rdi (count), rsi (block row) and rdx (C row).
class AmxEmitter : public Xbyak::CodeGenerator {
public:
    AmxEmitter(const plan::LowpLayout& layout, uint8_t* buffer, size_t capacity)
        : Xbyak::CodeGenerator(capacity, buffer), L_(layout), pool_(*this), epilogue_(*this, pool_, L_) {}

    // ---- the tile configuration of one variant, and the stub that loads it ------------------------------
    // Palette 1: bytes per row at 16 + 2t, rows at 48 + t. Tiles a variant does not use keep the full 16 x 64
    // byte shape, so that a tail of exactly 16 rows or columns (one tile fewer) has the full tile's bytes and
    // shares its stub: the driver then switches between them without another ldtilecfg.
    // k_bytes: the bytes of K one A tile row holds per step, 64, or less in a call of one K block whose K splits
    // into equal shorter steps (plan::amx_k_step_bytes): the A tiles then read k_bytes of each row and the B
    // tiles k_bytes / 4 k groups.
    static std::array<uint8_t, 64> config_bytes(int rows, int cols, int k_bytes) {
        std::array<uint8_t, 64> cfg = {};
        cfg[0] = 1;
        auto set = [&](int tile, int tile_rows, int bytes) {
            cfg[16 + 2 * tile] = static_cast<uint8_t>(bytes & 0xff);
            cfg[17 + 2 * tile] = static_cast<uint8_t>(bytes >> 8);
            cfg[48 + tile] = static_cast<uint8_t>(tile_rows);
        };
        for (int t = 0; t < 8; ++t) set(t, kTile, kStepBytes);
        for (int i = 0; i < 2; ++i) {  // the K step's shape even in unused A and B tiles: tails still share
            set(a_tile(i).getIdx(), kTile, k_bytes);
            set(b_tile(i).getIdx(), k_bytes / 4, kStepBytes);
        }
        const int tm = rows > kTile ? 2 : 1, tn = cols > kTile ? 2 : 1;
        for (int i = 0; i < tm; ++i) {
            const int r = std::min(kTile, rows - kTile * i);
            set(a_tile(i).getIdx(), r, k_bytes);
            for (int j = 0; j < tn; ++j) set(c_tile(i, j).getIdx(), r, std::min(kTile, cols - kTile * j) * 4);
        }
        // One row tile: the second row's C tiles take the first's shape, the other set of panel_pairs (a tail of
        // 16 rows keeps the full tile's configuration: those are its shapes there).
        if (tm == 1)
            for (int j = 0; j < tn; ++j) set(c_tile(1, j).getIdx(), rows, std::min(kTile, cols - kTile * j) * 4);
        for (int j = 0; j < tn; ++j) set(b_tile(j).getIdx(), k_bytes / 4, std::min(kTile, cols - kTile * j) * 4);
        return cfg;
    }

    size_t emit_config_stub(const LowpVariant& v) {
        const auto bytes = config_bytes(v.rows, v.cols, step_bytes(v));
        for (const auto& c : configs_)
            if (c.bytes == bytes) return c.entry;
        configs_.emplace_back();
        configs_.back().bytes = bytes;
        align(16);
        configs_.back().entry = getSize();
        ldtilecfg(ptr[rip + configs_.back().label]);
        ret();
        return configs_.back().entry;
    }

    size_t emit_release_stub() {
        align(16);
        const size_t entry = getSize();
        tilerelease();
        ret();
        return entry;
    }

    size_t emit_variant(const LowpVariant& v) {
        align(16);
        const size_t entry = getSize();
        tm_ = v.rows > kTile ? 2 : 1;
        tn_ = v.cols > kTile ? 2 : 1;
        rows_ = v.rows;
        cols_ = v.cols;
        // The epilogue's vectors run along C's rows: tile columns, or tile rows when the roles are swapped.
        tail_ = (L_.swap_ab ? v.rows : v.cols) % kTile;
        epilogue_.set_tail(tail_);
        step_bytes_ = step_bytes(v);
        const int64_t steps = (v.k_len * plan::step_elem_bytes(L_.step) + step_bytes_ - 1) / step_bytes_;
        // The B panel holds whole 64-byte steps of k groups (16 each): what shorter steps leave of it is skipped
        // after the last one, so that B's pointer reaches the next panel.
        const int64_t step_groups = step_bytes_ / 4;
        b_skip_ = ((steps * step_groups + kTile - 1) / kTile * kTile - steps * step_groups) * kBPanelRow;
        if (!v.last || amx_direct_store(L_)) {
            panels(v, steps);
            ret();
            return entry;
        }
        if (v.first) {
            for (int i = 0; i < tm_; ++i)
                for (int j = 0; j < tn_; ++j) tilezero(c_tile(i, j));
        } else {
            load_strip();
        }
        const bool last_step_copied = last_step_from_copy_in(v);
        main_loop(last_step_copied ? steps - 1 : steps);
        if (last_step_copied) last_step_from_copy();
        if (L_.swap_ab) epilogue_transposed();
        else epilogue();
        ret();
        return entry;
    }

    void finish() {
        for (auto& c : configs_) {
            align(64);
            L(c.label);
            for (uint8_t byte : c.bytes) db(byte);
        }
        emit_gather_index();
        epilogue_.emit_tables();
        pool_.emit();
    }

private:
    // ---- the K-block accumulator strip (variants with the vector epilogue: the last K block) ---------------
    void load_strip() {
        mov(r11, ptr[rcx + kArgAcc]);
        mov(rax, L_.acc_ld);
        for (int i = 0; i < tm_; ++i)
            for (int j = 0; j < tn_; ++j)
                tileloadd(c_tile(i, j), ptr[r11 + rax + i * kTile * L_.acc_ld + j * kTile * 4]);
    }

    // ---- variants without a vector epilogue: a run of column panels ------------------------------------------
    // Registers: as main_loop, plus rbx = panels left and r14 = the strip at this panel.
    // Every 32 x 32 block ends with a drain: the last products finish, then the four C tile stores, and only
    // then would the next block's first tile loads start. From kEarlyLoadSteps K steps per panel, the next
    // panel's first A and B tiles are loaded before this panel's stores, so their latency hides behind the
    // stores. Either way one call replaces a call per panel.
    void panels(const LowpVariant& v, int64_t steps) {
        push(rbx);
        push(r14);
        // Streamed C stores go through a block on the stack (see store_streamed); rows of 32-bit displacements.
        stream_ = v.last && (L_.amx_c_streamed || L_.amx_c_staged) && cols_ == 2 * kTile &&
                  int64_t(2 * kTile) * L_.ldc * dtype_size(L_.c_type) < (int64_t(1) << 31);
        if (stream_) {
            push(r12);
            push(r13);
            push(r15);
            reserve_block();
            xor_(r12, r12);  // no rows waiting to be copied out
            copy_rows_per_step_ = static_cast<int>((rows_ + steps - 1) / steps);
        }
        if (!stream_ && L_.step == LowpStep::amx_int8 && tm_ == 1 && steps == 1 && v.first && v.last && !last_step_from_copy_in(v)) {
            panel_pairs(steps);
            pop(r14);
            pop(rbx);
            return;
        }
        mov(rbx, ptr[rcx + kArgPanels]);
        mov(r14, ptr[rcx + kArgAcc]);
        mov(r8, ptr[rcx + kArgAStride]);
        if (tm_ == 2) {
            mov(r9, r8);
            shl(r9, 4);
            add(r9, rdi);
        }
        mov(r10, kBPanelRow);
        mov(r11, ptr[rcx + kArgPrefetch]);
        // A last step from the call's copy (a_last_step_copied): the loop runs the steps before it in place.
        const bool copied = last_step_from_copy_in(v);
        const int64_t in_place = copied ? steps - 1 : steps;
        init_c(v.first);
        if (in_place > 0) load_step_tiles();
        Xbyak::Label panel, kloop, kdone, last;
        L(panel);
        if (in_place > 0) {
            mov(rax, in_place);
            L(kloop);
            step_products();  // past the last step, B's pointer is at the next panel's start
            if (stream_) copy_out_rows(copy_rows_per_step_);  // the previous panel's C, while the tiles work
            prefetch_lines();
            dec(rax);
            jz(kdone, T_NEAR);
            load_step_tiles();
            jmp(kloop, T_NEAR);
            L(kdone);
        }
        if (copied) copied_step_products();
        if (b_skip_ != 0) add(rsi, b_skip_);
        dec(rbx);
        jz(last, T_NEAR);
        sub(rdi, in_place * step_bytes_);
        if (tm_ == 2) sub(r9, in_place * step_bytes_);
        // The next panel's first step ahead of this panel's stores where a panel has 8 steps or more (1 thread
        // s8 512^3, 8 steps: 88 -> 85 us); with 4 steps the early loads measured 2-3% slower (256^3 s8).
        const bool early = in_place >= kEarlyLoadSteps;
        if (early) load_step_tiles();
        store_panel(v.last);
        if (v.last) add(rdx, 2 * kTile * dtype_size(L_.c_type));
        if (!v.first || !v.last) add(r14, 2 * kTile * 4);  // the strip: read, written, or both
        init_c(v.first);
        if (!early && in_place > 0) load_step_tiles();
        jmp(panel, T_NEAR);
        L(last);
        store_panel(v.last);
        if (stream_) {
            copy_out_rest();
            release_block();
            pop(r15);
            pop(r13);
            pop(r12);
            stream_ = false;
        }
        pop(r14);
        pop(rbx);
    }

    // One row tile (up to 16 rows) over a run of panels of one K block, stored straight into C: the panels take
    // turns between two sets of C tiles (the first row's, and the second row's, which one row tile leaves free),
    // so that a panel's products run while the previous panel's tiles are stored. With one set every panel
    // drained: products, then the stores, and only then the next panel's products (6x2479x42 s8 on one thread:
    // its ~80 panels of one step each waited on the chain load, product, store). A K of one step loads its A
    // tile once for all the panels.
    void panel_pairs(int64_t steps) {
        mov(rbx, ptr[rcx + kArgPanels]);
        mov(r8, ptr[rcx + kArgAStride]);
        mov(r10, kBPanelRow);
        mov(r11, ptr[rcx + kArgPrefetch]);
        const bool a_once = steps == 1;
        if (a_once) tileloadd(a_tile(0), ptr[rdi + r8]);
        auto products = [&](int set) {
            for (int j = 0; j < tn_; ++j) tilezero(c_tile(set, j));
            Xbyak::Label kloop;
            if (steps > 1) {
                mov(rax, steps);
                L(kloop);
            }
            if (!a_once) tileloadd(a_tile(0), ptr[rdi + r8]);
            for (int j = 0; j < tn_; ++j) {
                load_b(b_tile(j), ptr[rsi + r10 + j * kTile * 4]);
                multiply(c_tile(set, j), a_tile(0), b_tile(j));
            }
            if (!a_once) add(rdi, step_bytes_);
            add(rsi, step_bytes_ / 4 * kBPanelRow);
            prefetch_lines();
            if (steps > 1) {
                dec(rax);
                jnz(kloop, T_NEAR);
                sub(rdi, steps * step_bytes_);
            }
            if (b_skip_ != 0) add(rsi, b_skip_);
        };
        auto store = [&](int set) {
            mov(rax, L_.ldc * dtype_size(L_.c_type));
            for (int j = 0; j < tn_; ++j) tilestored(ptr[rdx + rax + j * kTile * 4], c_tile(set, j));
            add(rdx, 2 * kTile * dtype_size(L_.c_type));
        };
        Xbyak::Label loop, last0, last1, done;
        products(0);
        L(loop);
        dec(rbx);
        jz(last0, T_NEAR);
        products(1);
        store(0);
        dec(rbx);
        jz(last1, T_NEAR);
        products(0);
        store(1);
        jmp(loop, T_NEAR);
        L(last0);
        store(0);
        jmp(done, T_NEAR);
        L(last1);
        store(1);
        L(done);
    }

    // A few lines of LowpCallArgs::prefetch per K step, into L2 (r11 walks the range; nothing once it ends).
    // The rate matters more than the coverage: a range read from DRAM at 8 lines a step (past what one core
    // reads from DRAM in a step's time) held up the tile loads (swapped 128x4096x4096 NT, 1 thread: bf16
    // 4 -> 8 lines 875 -> 665 GFLOP/s, s8 1930 -> 1690 GOP/s), though 4 lines cover only half of the rows.
    void prefetch_lines() {
        Xbyak::Label done;
        cmp(r11, ptr[rcx + kArgPrefetchEnd]);
        jae(done, T_NEAR);
        for (int l = 0; l < kPrefetchLinesPerStep; ++l) prefetcht1(ptr[r11 + l * 64]);
        add(r11, kPrefetchLinesPerStep * 64);
        L(done);
    }

    void load_step_tiles() {
        tileloadd(a_tile(0), ptr[rdi + r8]);
        load_b(b_tile(0), ptr[rsi + r10]);
    }
    // One K step's products once its first A and B tiles are loaded (the second ones are loaded here, each
    // right before its first use), then the A and B pointers move to the next step.
    void step_products() {
        multiply(c_tile(0, 0), a_tile(0), b_tile(0));
        if (tn_ == 2) {
            load_b(b_tile(1), ptr[rsi + r10 + kTile * 4]);
            multiply(c_tile(0, 1), a_tile(0), b_tile(1));
        }
        if (tm_ == 2) {
            tileloadd(a_tile(1), ptr[r9 + r8]);
            multiply(c_tile(1, 0), a_tile(1), b_tile(0));
            if (tn_ == 2) multiply(c_tile(1, 1), a_tile(1), b_tile(1));
        }
        add(rdi, step_bytes_);
        if (tm_ == 2) add(r9, step_bytes_);
        add(rsi, step_bytes_ / 4 * kBPanelRow);  // 16 k groups (fewer in a short step)
    }
    // A call of one K block takes plan::amx_k_step_bytes; a K block tail keeps the full steps (one configuration
    // for all K blocks: no switch between them).
    int step_bytes(const LowpVariant& v) const {
        return v.first && v.last ? plan::amx_k_step_bytes(L_.step, v.k_len) : kStepBytes;
    }
    // B with the T1 hint (streamed: it does not evict the A tile from L1) unless the planner found the whole
    // B block small enough to be worth keeping close (LowpLayout::amx_b_streamed).
    void load_b(const Tmm& t, const Xbyak::Address& a) {
        if (L_.amx_b_streamed) tileloaddt1(t, a);
        else tileloadd(t, a);
    }

    // The C tiles of a panel start from zero (first K block) or from the strip at r14.
    void init_c(bool first) {
        if (!first) mov(rax, L_.acc_ld);
        for (int i = 0; i < tm_; ++i)
            for (int j = 0; j < tn_; ++j) {
                if (first) tilezero(c_tile(i, j));
                else tileloadd(c_tile(i, j), ptr[r14 + rax + i * kTile * L_.acc_ld + j * kTile * 4]);
            }
    }

    void store_panel(bool last) {
        if (last && stream_) {  // the call chooses (LowpCallArgs::stream_c)
            Xbyak::Label tiles, done;
            cmp(qword[rcx + kArgStreamC], 0);
            je(tiles, T_NEAR);
            store_streamed();
            jmp(done, T_NEAR);
            L(tiles);
            store_direct();
            L(done);
            return;
        }
        if (last) {
            store_direct();
            return;
        }
        mov(rax, L_.acc_ld);
        for (int i = 0; i < tm_; ++i)
            for (int j = 0; j < tn_; ++j)
                tilestored(ptr[r14 + rax + i * kTile * L_.acc_ld + j * kTile * 4], c_tile(i, j));
    }

    // ---- main loop: one 64-byte K step per iteration ---------------------------------------------------------
    void multiply(const Tmm& c, const Tmm& a, const Tmm& b) {
        if (L_.step == LowpStep::amx_bf16) {
            tdpbf16ps(c, a, b);
            return;
        }
        const bool a_signed = L_.a_type == JITMM_DTYPE_S8, b_signed = L_.b_type == JITMM_DTYPE_S8;
        if (a_signed && b_signed) tdpbssd(c, a, b);
        else if (a_signed) tdpbsud(c, a, b);
        else if (b_signed) tdpbusd(c, a, b);
        else tdpbuud(c, a, b);
    }

    void main_loop(int64_t steps) {
        mov(r8, ptr[rcx + kArgAStride]);
        if (tm_ == 2) {
            mov(r9, r8);
            shl(r9, 4);
            add(r9, rdi);
        }
        mov(r10, kBPanelRow);
        if (L_.swap_ab) mov(r11, ptr[rcx + kArgPrefetch]);  // (r11 is free until the epilogue)
        if (steps == 0) return;
        Xbyak::Label loop;
        mov(rax, steps);
        L(loop);
        load_step_tiles();
        step_products();
        if (L_.swap_ab) prefetch_lines();
        dec(rax);
        jnz(loop, T_NEAR);
    }

    // Whether the variant's last step comes from the call's copy: the last K block ending inside a step, B's rows
    // in the A tiles (swapped) or A read in place at any stride (LowpLayout::a_last_step_copied).
    bool last_step_from_copy_in(const LowpVariant& v) const {
        return v.last && (L_.swap_ab || L_.a_last_step_copied) &&
               plan::amx_swapped_last_step_copied(L_.step, v.k_len, v.first);
    }
    // The same step within a panel run (A's pointers and stride stay for the next panel): the copy's rows by rax,
    // 64 bytes apart (r8 saved around it), then B's pointer moves past the step.
    void copied_step_products() {
        push(r8);
        mov(rax, ptr[rcx + kArgALastStep]);
        mov(r8, kStepBytes);
        tileloadd(a_tile(0), ptr[rax + r8]);
        load_b(b_tile(0), ptr[rsi + r10]);
        multiply(c_tile(0, 0), a_tile(0), b_tile(0));
        if (tn_ == 2) {
            load_b(b_tile(1), ptr[rsi + r10 + kTile * 4]);
            multiply(c_tile(0, 1), a_tile(0), b_tile(1));
        }
        if (tm_ == 2) {
            tileloadd(a_tile(1), ptr[rax + r8 + kTile * kStepBytes]);
            multiply(c_tile(1, 0), a_tile(1), b_tile(0));
            if (tn_ == 2) multiply(c_tile(1, 1), a_tile(1), b_tile(1));
        }
        add(rsi, kStepBytes / 4 * kBPanelRow);
        pop(r8);
    }

    // The K block's last, partial step (plan::amx_swapped_last_step_copied): its A tile rows from the call's
    // zero-padded copy (LowpCallArgs::a_last_step, rows 64 bytes apart), B's from the panel as ever.
    void last_step_from_copy() {
        mov(rdi, ptr[rcx + kArgALastStep]);
        mov(r8, kStepBytes);
        if (tm_ == 2) lea(r9, ptr[rdi + kTile * kStepBytes]);
        load_step_tiles();
        step_products();
    }

    // ---- last K block: straight into C, or through the stack block and the vector epilogue ---------------------
    // (r11 holds the prefetch pointer in panel runs: the second row half is addressed by displacement, or r11
    // is saved around it where 16 rows of C span more than 32 bits.)
    void store_direct() {
        const int64_t row_bytes = L_.ldc * dtype_size(L_.c_type);
        const bool far = tm_ == 2 && row_bytes * kTile >= (int64_t(1) << 31) - 2 * kTile * 4;
        mov(rax, row_bytes);
        if (far) {
            push(r11);
            mov(r11, row_bytes * kTile);
            add(r11, rdx);
        }
        for (int i = 0; i < tm_; ++i)
            for (int j = 0; j < tn_; ++j) {
                if (i == 0) tilestored(ptr[rdx + rax + j * kTile * 4], c_tile(i, j));
                else if (far) tilestored(ptr[r11 + rax + j * kTile * 4], c_tile(i, j));
                else tilestored(ptr[rdx + rax + row_bytes * kTile + j * kTile * 4], c_tile(i, j));
            }
        if (far) pop(r11);
    }

    // Non-temporal C: a panel's four tiles go to the L1 block at rsp, and each C row then gets its two full
    // cache lines with vmovntps (write-combined, no read for ownership: C's lines are never fetched from
    // memory). The copy-out is spread over the next panel's K steps (copy_out_rows after each step's
    // products): 32 rows of stores at once fill the store buffer and stall the next panel's products (s8
    // 1024^3 measured 12% slower than tile stores that way). The rows of C must be 64-byte aligned (the driver
    // checks) and the panel full width (32 columns, two lines). Rows off lines (LowpLayout::amx_c_staged) take
    // the same path with plain stores.
    // Registers: r13 = the next block row to copy, r15 = its C row, r12 = rows still waiting.
    void store_streamed() {
        copy_out_rest();  // (a panel of fewer steps than rows) the block is free before it is overwritten
        mov(rax, kBlockRowBytes);
        for (int i = 0; i < tm_; ++i)
            for (int j = 0; j < tn_; ++j)
                tilestored(ptr[rsp + rax + i * kTile * kBlockRowBytes + j * kTile * 4], c_tile(i, j));
        mov(r13, rsp);
        mov(r15, rdx);
        mov(r12, rows_);
    }
    void copy_out_row(int n) {
        const Xbyak::Zmm lo(2 * (n % 2)), hi(2 * (n % 2) + 1);
        vmovaps(lo, ptr[r13]);
        vmovaps(hi, ptr[r13 + 64]);
        if (L_.amx_c_staged) {  // rows off lines: plain stores (LowpLayout::amx_c_staged)
            vmovups(ptr[r15], lo);
            vmovups(ptr[r15 + 64], hi);
        } else {
            vmovntps(ptr[r15], lo);
            vmovntps(ptr[r15 + 64], hi);
        }
        add(r13, kBlockRowBytes);
        add(r15, static_cast<uint32_t>(L_.ldc * dtype_size(L_.c_type)));
    }
    // Up to `rows` waiting rows (none when this call stores C by tiles: r12 stays 0).
    void copy_out_rows(int rows) {
        Xbyak::Label done;
        for (int n = 0; n < rows; ++n) {
            test(r12, r12);
            jz(done, T_NEAR);
            copy_out_row(n);
            dec(r12);
        }
        L(done);
    }
    void copy_out_rest() {
        Xbyak::Label loop, done;
        L(loop);
        test(r12, r12);
        jz(done, T_NEAR);
        copy_out_row(0);
        dec(r12);
        jmp(loop, T_NEAR);
        L(done);
    }

    // A 64-byte aligned block of 32 rows x 128 bytes on the stack at rsp; release_block() gives it back.
    void reserve_block() {
        push(rbp);
        mov(rbp, rsp);
        sub(rsp, 2 * kTile * kBlockRowBytes);
        and_(rsp, -64);
    }
    void release_block() {
        mov(rsp, rbp);
        pop(rbp);
        vzeroupper();
    }

    // The accumulator tiles stored to a 64-byte aligned block on the stack (rsp + one block row), where the
    // vector epilogue reads them row by row; release_spill() gives the stack back.
    void spill_accumulators() {
        reserve_block();
        mov(rax, kBlockRowBytes);
        for (int i = 0; i < tm_; ++i)
            for (int j = 0; j < tn_; ++j)
                tilestored(ptr[rsp + rax + i * kTile * kBlockRowBytes + j * kTile * 4], c_tile(i, j));
    }

    void release_spill() { release_block(); }

    void epilogue() {
        spill_accumulators();
        epilogue_.load_pointers();
        const int64_t c_size = dtype_size(L_.c_type);
        const int64_t c_row = L_.ldc * c_size;
        const Xbyak::Zmm t0(2), t1(3), t2(4);
        mov(rdi, rows_);
        mov(rsi, rsp);
        mov(rax, c_row);
        Xbyak::Label row;
        L(row);
        for (int j = 0; j < tn_; ++j) {
            const Xbyak::Zmm v(j);
            vmovups(v, ptr[rsi + j * kTile * 4]);
            epilogue_.apply(v, 0, j, tail_ != 0 && j == tn_ - 1, rdx + j * kTile * c_size, t0, t1, t2);
        }
        add(rsi, kBlockRowBytes);
        add(rdx, rax);
        if (L_.bias == BiasKind::per_row) add(r8, static_cast<uint32_t>(dtype_size(L_.bias_type)));
        if (L_.a_scale == ScaleMode::per_row) add(r11, 4);
        dec(rdi);
        jnz(row, T_NEAR);
        release_spill();
    }

    // Swapped roles: the block holds C^T (rows n, columns m). Each C row m gathers its 16-column vectors from a
    // column of the block (stride one block row), then takes the same epilogue as ever and a plain store.
    void epilogue_transposed() {
        spill_accumulators();
        epilogue_.load_pointers();
        const int64_t c_size = dtype_size(L_.c_type);
        const Xbyak::Zmm index(5), t0(2), t1(3), t2(4);
        vmovups(index, ptr[rip + gather_index_]);
        need_gather_index_ = true;
        mov(rdi, cols_);
        mov(rsi, rsp);
        mov(rax, L_.ldc * c_size);
        Xbyak::Label row;
        L(row);
        for (int i = 0; i < tm_; ++i) {  // vectors along n: block rows 16i .. 16i + 15
            const Xbyak::Zmm v(i);
            const bool tail = tail_ != 0 && i == tm_ - 1;
            if (tail) kmovw(k3, k1);
            else kxnorw(k3, k3, k3);
            vpxord(v, v, v);
            vpgatherdd(v | k3, ptr[rsi + index + i * kTile * kBlockRowBytes]);
            epilogue_.apply(v, 0, i, tail, rdx + i * kTile * c_size, t0, t1, t2);
        }
        add(rsi, 4);
        add(rdx, rax);
        if (L_.bias == BiasKind::per_row) add(r8, static_cast<uint32_t>(dtype_size(L_.bias_type)));
        if (L_.a_scale == ScaleMode::per_row) add(r11, 4);
        dec(rdi);
        jnz(row, T_NEAR);
        release_spill();
    }

public:
    void emit_gather_index() {
        if (!need_gather_index_) return;
        align(64);
        L(gather_index_);
        for (int lane = 0; lane < kTile; ++lane) dd(static_cast<uint32_t>(lane * kBlockRowBytes));
    }

private:
    bool need_gather_index_ = false;
    Xbyak::Label gather_index_;

    struct Config {
        std::array<uint8_t, 64> bytes;
        size_t entry = 0;
        Xbyak::Label label;  // referenced before it is placed: kept at a stable address (std::list)
    };

    const plan::LowpLayout L_;
    ConstantPool pool_;
    LowpEpilogue epilogue_;
    std::list<Config> configs_;
    int tm_ = 1, tn_ = 1, rows_ = 0, cols_ = 0, tail_ = 0;
    bool stream_ = false;          // this variant's panels can store C non-temporally (store_streamed)
    int copy_rows_per_step_ = 1;   // streamed C rows copied out after each K step of the next panel
    int step_bytes_ = kStepBytes;  // this variant's K step (A bytes per tile row)
    int64_t b_skip_ = 0;           // bytes of B panel past a short-stepped K
};

}  // namespace

bool amx_direct_store(const plan::LowpLayout& L) {
    if (L.swap_ab) return false;  // the block is C^T
    if (L.compensate || L.bias != BiasKind::none || L.activation != Activation::none || L.beta != 0.0f) return false;
    if (L.int_epilogue) return true;
    return L.step == LowpStep::amx_bf16 && L.c_type == JITMM_DTYPE_F32 && L.alpha == 1.0f &&
           L.a_scale == ScaleMode::none && L.b_scale == ScaleMode::none;
}

LowpCode generate_amx(const plan::LowpLayout& layout, const std::vector<LowpVariant>& variants) {
    if (!plan::step_is_amx(layout.step) || layout.mr != 2 * kTile || layout.nr() != 2 * kTile)
        fail(JITMM_STATUS_INTERNAL_ERROR, "amx generator: the layout is not a 32 x 32 AMX tile");
    if (int64_t(kTile) * layout.acc_ld >= (int64_t(1) << 31))
        fail(JITMM_STATUS_INTERNAL_ERROR, "amx generator: strip offsets exceed 32-bit displacements");
    size_t capacity = 8192;
    for (const auto& v : variants) {
        if (v.rows < 1 || v.rows > layout.mr || v.cols < 1 || v.cols > layout.nr() || v.k_len < 1)
            fail(JITMM_STATUS_INTERNAL_ERROR, "amx generator: variant outside the tile");
        capacity += 4096 + 64;
    }
    return emit_code("amx", capacity, [&](uint8_t* buffer, size_t size) {
        AmxEmitter emitter(layout, buffer, size);
        LowpCode out;
        for (const auto& v : variants) {
            out.config_entries.push_back(emitter.emit_config_stub(v));
            out.entries.push_back(emitter.emit_variant(v));
        }
        out.release_entry = emitter.emit_release_stub();
        emitter.finish();
        out.bytes.assign(emitter.getCode(), emitter.getCode() + emitter.getSize());
        return out;
    });
}

}  // namespace jitmm::x86
