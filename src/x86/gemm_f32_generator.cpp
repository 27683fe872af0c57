#include "x86/gemm_f32_generator.hpp"

#include "core/error.hpp"
#include "x86/emit_buffer.hpp"
#include "x86/vector_math.hpp"
#include "x86/zmm_encoder.hpp"

#include <xbyak/xbyak.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace jitmm::x86 {

namespace {

// What a variant's epilogue does with C, the bias and the activation (from its place in K).
struct EpilogueWork {
    bool read_c;
    float c_scale;  // beta for the first K block, 1 for the others
    bool add_bias;
    Activation act;
    bool operator==(const EpilogueWork& o) const {
        return read_c == o.read_c && c_scale == o.c_scale && add_bias == o.add_bias && act == o.act;
    }
};

EpilogueWork epilogue_work(const GemmF32Layout& L, const UkernelVariant& v) {
    EpilogueWork w;
    w.read_c = !v.first || (L.beta != 0.0f && !v.partial);
    w.c_scale = v.first ? L.beta : 1.0f;
    w.add_bias = v.last && !v.partial && L.bias != BiasKind::none;
    w.act = v.last && !v.partial ? L.activation : Activation::none;
    return w;
}

// Whether two variants run the same K loop (tile and K block alike; they may differ in the epilogue, a K-split
// part's included: its slab has C's leading dimension, so only the epilogue knows it is not C). On
// AVX-512 a column tail runs the full tile's K loop when it has as many vectors: the two share one body,
// whose last vector is masked with k1 (all lanes for the full tile), set by each entry: in the epilogue, and
// in the K loop where B is read as stored (a packed B is zero padded to the full width). A masked load or
// merge-masked FMA costs what the plain one does; one body instead of two halves the JIT time of a B read in
// place (34x692x1649 NN, 32-deep K blocks: 65 -> 42 us).
bool same_body(const GemmF32Layout& L, const UkernelVariant& a, const UkernelVariant& b) {
    if (a.rows != b.rows || a.k_len != b.k_len || a.packs_b != b.packs_b) return false;
    if (a.cols == b.cols) return true;
    const int vlen = vector_length(L.isa);
    return L.isa >= hw::X86Isa::avx512 && (a.cols + vlen - 1) / vlen == (b.cols + vlen - 1) / vlen;
}

using Xbyak::Xmm;
using Xbyak::Reg64;

// Register plan (System V): rdi = A, rsi = B, rdx = C, rcx = bias, r8 = the A row to prefetch, r9 = the
// next B block's source to prefetch, r10 = the next call's C row to prefetch (the seventh argument, from the
// stack); rax = K-loop counter; r11 = A's or B's per-k step when it is not an immediate, or the next C row
// (K loop), then the C row cursor (epilogue), r10 = its row step when not an immediate. A packs_b variant's
// K loop keeps its packed-panel cursor (the eighth argument) in rcx, the bias pointer waiting in the red zone.
class GemmF32Emitter : public Xbyak::CodeGenerator {
public:
    GemmF32Emitter(const GemmF32Layout& layout, uint8_t* buffer, size_t capacity)
        : Xbyak::CodeGenerator(capacity, buffer),
          L_(layout),
          avx512_(layout.isa >= hw::X86Isa::avx512),
          vlen_(vector_length(layout.isa)),
          pool_(*this),
          math_(*this, pool_, avx512_) {}

    // Variants that differ only in their epilogue (the first, middle and last K blocks of one tile), or in a
    // column tail that same_body lets share the K loop, share one body: each entry sets its column mask (k1)
    // where the widths differ and leaves its epilogue's number in the red zone below the stack pointer (the
    // body calls nothing and pushes nothing); the body branches to that epilogue at the end. Identical
    // entries (a middle and a last block without bias or activation) are one. This keeps the JIT time of
    // many-block and column-tail shapes down: Xbyak's encoding of the unrolled K loop and the epilogues is
    // most of it. Returns one entry offset per variant.
    std::vector<size_t> emit_variant_group(const std::vector<UkernelVariant>& group) {
        std::vector<size_t> kinds;  // index into group of each distinct epilogue
        std::vector<size_t> firsts;  // index into group of each distinct entry (epilogue and width)
        std::vector<int> kind_of(group.size()), entry_of(group.size());
        bool widths_differ = false;
        for (size_t i = 0; i < group.size(); ++i) {
            widths_differ = widths_differ || group[i].cols != group[0].cols;
            size_t k = 0;
            while (k < kinds.size() && !(epilogue_work(L_, group[kinds[k]]) == epilogue_work(L_, group[i]))) ++k;
            if (k == kinds.size()) kinds.push_back(i);
            kind_of[i] = static_cast<int>(k);
            size_t e = 0;
            while (e < firsts.size() && !(kind_of[firsts[e]] == kind_of[i] && group[firsts[e]].cols == group[i].cols))
                ++e;
            if (e == firsts.size()) firsts.push_back(i);
            entry_of[i] = static_cast<int>(e);
        }
        mask_last_vector_ = widths_differ;
        if (firsts.size() == 1) {  // one entry: straight-line code (Xbyak labels cost microseconds to make)
            align(16);
            const size_t entry = getSize();
            begin_variant(group[0]);
            prefetch_c(group[0]);
            zero_accumulators();
            k_loop(group[0].k_len);
            end_packing();
            epilogue(group[0]);
            vzeroupper();
            ret();
            return std::vector<size_t>(group.size(), entry);
        }
        const auto epilogue_kind = dword[rsp - 8];
        Xbyak::Label body;
        std::vector<Xbyak::Label> epilogues(kinds.size());
        std::vector<size_t> entry_offsets(firsts.size());
        for (size_t e = 0; e < firsts.size(); ++e) {
            align(16);
            entry_offsets[e] = getSize();
            if (widths_differ) set_column_mask(group[firsts[e]].cols);
            if (kinds.size() > 1) mov(epilogue_kind, static_cast<uint32_t>(kind_of[firsts[e]]));
            if (e + 1 < firsts.size()) jmp(body, T_NEAR);
        }
        L(body);
        begin_variant(group[0]);
        prefetch_c(group[0]);
        zero_accumulators();
        k_loop(group[0].k_len);
        end_packing();
        for (size_t k = 1; k < kinds.size(); ++k) {
            cmp(epilogue_kind, static_cast<uint32_t>(k));
            je(epilogues[k], T_NEAR);
        }
        for (size_t k = 0; k < kinds.size(); ++k) {
            L(epilogues[k]);
            epilogue(group[kinds[k]]);
            vzeroupper();
            ret();
        }
        mask_last_vector_ = false;
        std::vector<size_t> entries(group.size());
        for (size_t i = 0; i < group.size(); ++i) entries[i] = entry_offsets[entry_of[i]];
        return entries;
    }

    // Every tile one after another; the base pointers live in callee-saved registers. Tiles of the same variant
    // share one body, called with the tile's pointers in rdi/rsi/rdx/rcx (a leaf that touches no stack): a
    // 64^3 problem has ten tiles of two variants, and emitting each inline made 19 KB of code and 113 us of
    // JIT time. Without repeats the tiles stay inline. The shared bodies come first, so that every call
    // branches back to a known offset (no Xbyak labels).
    size_t emit_whole(const std::vector<PlacedTile>& tiles) {
        in_whole_ = true;
        TileBodies bodies;
        for (const PlacedTile& t : tiles) bodies.add(t.variant);
        const bool shared = bodies.variants.size() < tiles.size();
        if (shared) emit_bodies(bodies);
        align(16);
        const size_t entry = getSize();
        const Reg64 bases[4] = {r12, r13, r14, r15};
        for (const Reg64& r : bases) push(r);
        mov(r12, rdi);
        mov(r13, rsi);
        mov(r14, rdx);
        mov(r15, rcx);
        for (const PlacedTile& t : tiles) {
            if (shared) {
                call_tile(t, bodies);
            } else {
                tile_pointers(t);
                emit_tile_body(t.variant);
            }
        }
        for (int i = 3; i >= 0; --i) pop(bases[i]);
        vzeroupper();
        ret();
        in_whole_ = false;
        return entry;
    }

    // The distinct tile variants of a whole-problem or sweep function, in first-use order, and where each one's
    // body (a leaf function, emit_bodies) starts.
    struct TileBodies {
        std::vector<UkernelVariant> variants;
        std::vector<size_t> offsets;
        size_t index_of(const UkernelVariant& v) const {
            size_t b = 0;
            while (b < variants.size() && !same_variant(variants[b], v)) ++b;
            return b;
        }
        void add(const UkernelVariant& v) {
            if (index_of(v) == variants.size()) variants.push_back(v);
        }
    };
    void emit_bodies(TileBodies& bodies) {
        for (const UkernelVariant& v : bodies.variants) {
            align(16);
            bodies.offsets.push_back(getSize());
            emit_tile_body(v);
            ret();
        }
    }
    // A tile's pointers in rdi/rsi/rdx/rcx from the base pointers in r12-r15.
    void tile_pointers(const PlacedTile& t) {
        lea_offset(rdi, r12, t.a_offset);
        lea_offset(rsi, r13, t.b_offset);
        lea_offset(rdx, r14, t.c_offset);
        lea_offset(rcx, r15, t.bias_offset);
    }
    void call_tile(const PlacedTile& t, const TileBodies& bodies) {
        tile_pointers(t);
        call_back(bodies.offsets[bodies.index_of(t.variant)]);
    }

    // The row sweep (RowSweep): every distinct tile a function (a leaf taking its pointers in rdi/rsi/rdx/rcx),
    // then the entry: a loop over the full row tiles calling the row's tiles, and the tail row's tiles after it.
    // The base pointers live in r12-r15, the row tile count in rbx and the tail flag in rbp.
    size_t emit_row_sweep(const RowSweep& s) {
        in_whole_ = true;
        TileBodies bodies;
        for (const auto* row : {&s.full_row, &s.tail_row})
            for (const PlacedTile& t : *row) bodies.add(t.variant);
        emit_bodies(bodies);
        align(16);
        const size_t entry = getSize();
        const Reg64 saved[6] = {r12, r13, r14, r15, rbx, rbp};
        for (const Reg64& r : saved) push(r);
        mov(r12, rdi);
        mov(r13, rsi);
        mov(r14, rdx);
        mov(r15, rcx);
        mov(rbx, r8);
        mov(rbp, r9);
        auto call_row = [&](const std::vector<PlacedTile>& row) {
            for (const PlacedTile& t : row) call_tile(t, bodies);
        };
        Xbyak::Label tail, done;
        test(rbx, rbx);
        jz(tail, T_NEAR);
        align(16);
        const size_t loop = getSize();
        call_row(s.full_row);
        advance(r12, rax, s.a_step);
        advance(r14, rax, s.c_step);
        advance(r15, rax, s.bias_step);
        dec(rbx);
        jnz_back(loop);
        L(tail);
        if (!s.tail_row.empty()) {
            test(rbp, rbp);
            jz(done, T_NEAR);
            call_row(s.tail_row);
        }
        L(done);
        for (int i = 5; i >= 0; --i) pop(saved[i]);
        vzeroupper();
        ret();
        in_whole_ = false;
        return entry;
    }

    static bool same_variant(const UkernelVariant& x, const UkernelVariant& y) {
        return x.rows == y.rows && x.cols == y.cols && x.k_len == y.k_len && x.first == y.first && x.last == y.last &&
               x.partial == y.partial;
    }

    // One tile of the whole problem: its pointers in rdi/rsi/rdx/rcx.
    void emit_tile_body(const UkernelVariant& v) {
        begin_variant(v);
        prefetch_c(v);
        zero_accumulators();
        k_loop(v.k_len);
        epilogue(v);
    }

    size_t emit_finish(const SplitFinishLayout& f) { return emit_split_finish(*this, pool_, math_, f); }

    // AVX-512 with a GELU or SiLU: the activation of every accumulator register, emitted once, from the
    // highest down to zmm0 and a ret; activation_chain_[c] is the entry that activates zmm0..zmm(c-1). A
    // variant's epilogue calls it for its own accumulators instead of emitting the activation of each: the
    // copies in the full, row-tail, column-tail and corner variants were most of the kernel's code and half
    // its JIT time (1000^3 bias+GELU: 22 KB, 74 us). Its scratch is the top three registers, which hold no
    // accumulator (the planner keeps kEpilogueTemps free) and are dead when the epilogue runs.
    void emit_activation_chain() {
        const Activation act = L_.activation;
        const bool costly = activation_uses_exp(act);
        const int accumulators = L_.mr * L_.nv, regs = vector_register_count(L_.isa);
        if (!avx512_ || !costly || accumulators + kEpilogueTemps > regs) return;
        align(16);
        activation_chain_.assign(static_cast<size_t>(accumulators) + 1, 0);
        for (int r = accumulators - 1; r >= 0; --r) {
            activation_chain_[static_cast<size_t>(r) + 1] = getSize();
            math_.apply(act, vreg(r), vreg(regs - 3), vreg(regs - 2), vreg(regs - 1));
        }
        ret();
    }

    void finish() { pool_.emit(); }

private:
    // ---- register allocation for one variant --------------------------------------------------------
    void begin_variant(const UkernelVariant& v) {
        packing_ = v.packs_b;
        if (packing_) {
            // The packed-panel cursor in rcx; the bias pointer waits below the stack pointer (the eighth
            // argument is above the return address and the seventh).
            mov(ptr[rsp - kSavedBiasOffset], rcx);
            mov(rcx, ptr[rsp + 16]);
        }
        rows_ = v.rows;
        cols_ = v.cols;
        nvec_ = (v.cols + vlen_ - 1) / vlen_;
        tail_ = v.cols % vlen_;
        // Accumulators first, then the B vectors, then the broadcast register; AVX2 keeps its column mask
        // in the last register.
        b_base_ = rows_ * nvec_;
        bcast_ = b_base_ + (L_.b_from_memory ? 0 : nvec_);
        mask_reg_ = vector_register_count(L_.isa) - 1;
        if (tail_ != 0 && !mask_last_vector_) set_tail_mask();  // (a shared body's entries set it)
    }
    // After a packing variant's K loop: the bias pointer back in rcx for the epilogue.
    void end_packing() {
        if (packing_) mov(rcx, ptr[rsp - kSavedBiasOffset]);
    }
    // Below the epilogue number (rsp - 8) in the red zone.
    static constexpr int kSavedBiasOffset = 16;
    Xmm vreg(int i) const { return avx512_ ? Xmm(Xbyak::Operand::ZMM, i) : Xmm(Xbyak::Operand::YMM, i); }
    Xmm acc(int i, int j) const { return vreg(i * nvec_ + j); }
    Xmm bvec(int j) const { return vreg(b_base_ + j); }
    Xmm bcast() const { return vreg(bcast_); }
    // Scratch for the epilogue: the registers after the accumulators (the planner leaves at least
    // kEpilogueTemps of them free of the AVX2 mask register).
    Xmm temp(int t) const { return vreg(b_base_ + t); }
    bool is_tail_vector(int j) const { return (tail_ != 0 || mask_last_vector_) && j == nvec_ - 1; }

    // k1 = the lanes of the last vector of a tile `cols` wide (all of them for whole vectors); AVX-512 only.
    void set_column_mask(int cols) {
        const int tail = cols % vlen_;
        mov(eax, tail == 0 ? 0xffffu : (1u << tail) - 1);
        kmovw(k1, eax);
    }

    void set_tail_mask() {
        if (avx512_) {
            mov(eax, (1u << tail_) - 1);
            kmovw(k1, eax);
        } else {
            // Lanes [0, tail) all-ones: a sliding window over a -1...-1, 0...0 table.
            vmovups(vreg(mask_reg_), ptr[rip + mask_table_ + (8 - tail_) * 4]);
            need_mask_table_ = true;
        }
    }

    // ---- loads and stores honouring the column tail ---------------------------------------------------
    void load_vector(const Xmm& dst, const Xbyak::Address& src, bool tail) {
        if (!tail) {
            vmovups(dst, src);
        } else if (avx512_) {
            vmovups(dst | k1 | T_z, src);
        } else {
            vmaskmovps(dst, vreg(mask_reg_), src);
        }
    }
    void store_vector(const Xbyak::Address& dst, const Xmm& src, bool tail) {
        if (!tail) {
            vmovups(dst, src);
        } else if (avx512_) {
            vmovups(dst | k1, src);
        } else {
            vmaskmovps(dst, vreg(mask_reg_), src);
        }
    }

    void zero_accumulators() {
        for (int i = 0; i < rows_; ++i)
            for (int j = 0; j < nvec_; ++j) vxorps(acc(i, j), acc(i, j), acc(i, j));
    }

    // ---- main loop: broadcast A[i][k], FMA against the row B[k][0..cols) --------------------------------
    int64_t a_row_bytes() const { return L_.trans_a ? 4 : L_.lda * 4; }  // between rows i of op(A)
    int64_t a_k_bytes() const { return L_.trans_a ? L_.lda * 4 : 4; }    // between steps k
    int64_t b_k_bytes() const { return (packing_ ? L_.b_source_ldb : L_.ldb) * 4; }
    int packed_row_bytes() const { return L_.nv * vlen_ * 4; }

    // Lines of one B row the kernel reads (a packed panel row: the full width; B as stored: the tile's
    // columns, one line more where the rows do not start on lines).
    int b_row_lines() const {
        if (packing_) return (cols_ * 4 + 63) / 64 + ((L_.b_source_ldb * 4) % 64 != 0 ? 1 : 0);
        const int bytes = (L_.b_packed ? L_.nv * vlen_ : cols_) * 4;
        return (bytes + 63) / 64;
    }
    // prefetcht0 of line `line` of the B row `b_prefetch_k` (packing: b_pack_prefetch_k) steps after step u
    // (none past the tile's lines; a packing variant's last one covers the row's last value).
    void prefetch_b(int u, int line) {
        const int ahead = packing_ ? L_.b_pack_prefetch_k : L_.b_prefetch_k;
        if (ahead <= 0 || line >= b_row_lines()) return;
        const int64_t in_row = packing_ ? std::min(line * 64, cols_ * 4 - 4) : line * 64;
        const int64_t off = int64_t(u + ahead) * b_k_bytes() + in_row;
        if (off > INT32_MAX) return;
        prefetcht0(ptr[rsi + static_cast<int32_t>(off)]);
    }

    // The tile's values of the stored A row `a_prefetch_k` steps after step u (A stored K x M, read in place):
    // each k step reads mr values from a new row, which the prefetchers do not follow down K. The span may
    // start anywhere in a line, so one line more than mr values fill.
    void prefetch_transposed_a(int u) {
        if (L_.a_prefetch_k <= 0 || !L_.trans_a) return;
        const int64_t off = int64_t(u + L_.a_prefetch_k) * a_k_bytes();
        for (int64_t line = 0; line < int64_t(L_.mr) * 4 + 63; line += 64)
            if (off + line <= INT32_MAX) prefetcht0(ptr[rdi + static_cast<int32_t>(off + line)]);
    }

    // The C tile's lines, so that the epilogue's reads and stores find them in L1 after the K loop.
    void prefetch_c(const UkernelVariant& v) {
        if (!L_.c_prefetch) return;
        const int lines = (v.cols * 4 + 63) / 64;
        const int64_t span = int64_t(v.rows - 1) * L_.ldc * 4 + lines * 64;
        if (span > INT32_MAX) return;
        for (int i = 0; i < v.rows; ++i)
            for (int l = 0; l < lines; ++l)
                prefetcht0(ptr[rdx + static_cast<int32_t>(int64_t(i) * L_.ldc * 4 + l * 64)]);
    }

    // The K loop's and the plain epilogue's instructions. On AVX-512 their unmasked forms go through
    // zmm_encoder: the same bytes in a few nanoseconds instead of Xbyak's 20-60.
    static bool fits_disp32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }
    bool direct(const Reg64& base, int64_t offset) const {
        return avx512_ && fits_disp32(offset) && zmm_memory_operand_ok(base);
    }
    void load_from(const Xmm& dst, const Reg64& base, int64_t offset, bool tail) {
        if (!tail && direct(base, offset)) load_zmm(*this, dst.getIdx(), base, static_cast<int32_t>(offset));
        else load_vector(dst, ptr[base + offset], tail);
    }
    void store_to(const Reg64& base, int64_t offset, const Xmm& src, bool tail) {
        if (!tail && direct(base, offset)) store_zmm(*this, base, static_cast<int32_t>(offset), src.getIdx());
        else store_vector(ptr[base + offset], src, tail);
    }
    void broadcast_from(const Xmm& dst, const Reg64& base, int64_t offset) {
        if (direct(base, offset)) broadcast_zmm(*this, dst.getIdx(), base, static_cast<int32_t>(offset));
        else vbroadcastss(dst, ptr[base + offset]);
    }
    void fma(const Xmm& acc, const Xmm& b, const Xmm& a) {
        if (avx512_) fma231_zmm(*this, acc.getIdx(), b.getIdx(), a.getIdx());
        else vfmadd231ps(acc, b, a);
    }
    void add_vectors(const Xmm& dst, const Xmm& a, const Xmm& b) {
        if (avx512_) add_zmm(*this, dst.getIdx(), a.getIdx(), b.getIdx());
        else vaddps(dst, a, b);
    }

    // One vector per row: the FMA reads its A value as an embedded broadcast ({1to16}), one instruction where a
    // broadcast and an FMA were two. Zen 4 issues a zmm broadcast from memory on a vector pipe, and one per FMA
    // held the one-vector tiles to 70% of the FMA rate (1 thread, median us, broadcast -> embedded: 156x14x1350
    // 80 -> 57, 716x14x934 x2 637 -> 463, 1576x16x171 213 -> 159, 1098x7x2155 NT 983 -> 747, 4096x16x4096 6940
    // -> 5300). Wider tiles keep the broadcast register: one per 2-4 FMAs measured no cost (14 x 2 with embedded
    // broadcasts, 1024^3, within 1%), and every vector's FMA would load the A value again.
    bool embedded_broadcast(int64_t a_offset) const { return avx512_ && nvec_ == 1 && fits_disp32(a_offset); }

    void k_step(int u) {
        prefetch_transposed_a(u);
        // The B prefetches ride between the row broadcasts, one line after each row (the rest at the end).
        int next_line = 0;
        if (L_.b_from_memory) {
            // Few rows: each B vector feeds its FMAs straight from memory (L1), freeing the registers for
            // a wider tile. The direct-B tail vector is merge-masked: masked lanes are neither loaded nor added.
            for (int i = 0; i < rows_; ++i) {
                broadcast_from(bcast(), rdi, u * a_k_bytes() + i * a_row_bytes());
                for (int j = 0; j < nvec_; ++j) {
                    const auto src = ptr[rsi + u * b_k_bytes() + j * vlen_ * 4];
                    if (is_tail_vector(j) && !L_.b_packed) vfmadd231ps(acc(i, j) | k1, bcast(), src);
                    else vfmadd231ps(acc(i, j), bcast(), src);
                    if (j % 2 == 1) prefetch_b(u, next_line++);
                }
            }
            while (next_line < b_row_lines()) prefetch_b(u, next_line++);
            return;
        }
        for (int j = 0; j < nvec_; ++j) {
            // A packed panel is zero padded to full width: only B read as stored needs the mask.
            const bool as_stored = !L_.b_packed || packing_;
            load_from(bvec(j), rsi, u * b_k_bytes() + j * vlen_ * 4, is_tail_vector(j) && as_stored);
            // Packing: the vector as loaded (masked lanes zero) is the panel's row, padding included.
            if (packing_) store_to(rcx, int64_t(u) * packed_row_bytes() + j * vlen_ * 4, bvec(j), false);
        }
        for (int i = 0; i < rows_; ++i) {
            const int64_t a_offset = u * a_k_bytes() + i * a_row_bytes();
            if (embedded_broadcast(a_offset)) {
                vfmadd231ps(acc(i, 0), bvec(0), ptr_b[rdi + static_cast<int32_t>(a_offset)]);
            } else {
                broadcast_from(bcast(), rdi, a_offset);
                for (int j = 0; j < nvec_; ++j) fma(acc(i, j), bvec(j), bcast());
            }
            prefetch_b(u, next_line++);
        }
        while (next_line < b_row_lines()) prefetch_b(u, next_line++);
    }

    void lea_offset(const Reg64& dst, const Reg64& base, int64_t bytes) {
        if (bytes >= INT32_MIN && bytes <= INT32_MAX) {
            lea(dst, ptr[base + static_cast<int32_t>(bytes)]);
        } else {
            mov(dst, bytes);
            add(dst, base);
        }
    }

    void advance(const Reg64& cursor, const Reg64& step_reg, int64_t bytes) {
        if (bytes == 0) return;
        if (bytes >= INT32_MIN && bytes <= INT32_MAX) {
            add(cursor, static_cast<uint32_t>(bytes));
        } else {
            mov(step_reg, bytes);
            add(cursor, step_reg);
        }
    }

    // Not in the whole-problem function: there is no next call, and its pushes move the stack arguments.
    bool c_next_prefetch() const { return L_.c_next_prefetch && !in_whole_; }

    // Branches back to code already emitted, by offset: an Xbyak label's bookkeeping (hash maps, allocations)
    // costs more than encoding the few instructions of a small kernel's loop.
    void jnz_back(size_t target) {
        const int64_t rel8 = int64_t(target) - int64_t(getSize() + 2);
        if (rel8 >= -128) {
            db(0x75);  // jnz rel8
            db(static_cast<uint8_t>(rel8));
        } else {
            db(0x0F);  // jnz rel32
            db(0x85);
            dd(static_cast<uint32_t>(static_cast<int32_t>(int64_t(target) - int64_t(getSize() + 4))));
        }
    }
    void call_back(size_t target) {
        db(0xE8);  // call rel32
        dd(static_cast<uint32_t>(static_cast<int32_t>(int64_t(target) - int64_t(getSize() + 4))));
    }

    void k_loop(int64_t k_len) {
        // Within one unrolled iteration the k offsets are displacements; they must fit in 32 bits.
        int unroll = std::max(1, L_.k_unroll);
        while (unroll > 1 && (int64_t(unroll) * std::max(a_k_bytes(), b_k_bytes()) >= (int64_t(1) << 31))) --unroll;
        const int64_t iterations = k_len / unroll;
        const int64_t remainder = k_len % unroll;
        if (iterations > 0) {
            if (c_next_prefetch()) mov(r10, ptr[rsp + 8]);  // the seventh argument
            mov(rax, iterations);
            align(64);  // the loop starts on a line (23^3 NT: 10% faster than where it happened to fall)
            const size_t loop = getSize();
            for (int u = 0; u < unroll; ++u) k_step(u);
            if (L_.a_next_tile_prefetch && !in_whole_) {
                // The next row tile's A rows (as stored) at this iteration's K offset, into L1: the next call
                // finds its A there instead of waiting on each row's lines (once per line would need 16 k steps
                // per iteration; the repeats hit L1 and cost load slots only).
                for (int r = 0; r < L_.mr; ++r)
                    prefetcht0(ptr[rdi + static_cast<int32_t>((L_.mr + r) * a_row_bytes())]);
            }
            if (L_.a_prefetch && !L_.trans_a) {
                // The next A tile's row, unroll floats per iteration: one call covers the row's K range.
                prefetcht1(ptr[r8]);
                add(r8, unroll * 4);
            }
            if (L_.b_prefetch_runs > 0) {
                // Runs of the next B block's source, read from L2 when the driver packs them.
                for (int r = 0; r < L_.b_prefetch_runs; ++r)
                    prefetcht1(ptr[r9 + static_cast<int32_t>(r * L_.b_prefetch_ld)]);
                add(r9, L_.b_prefetch_step);
            }
            if (c_next_prefetch()) {
                // One row of the next call's C tile per iteration, the first mr iterations (rax counts down
                // from `iterations`); later ones repeat the last row (L2 hits).
                const int row_bytes = L_.nv * vlen_ * 4;  // a full tile row, over as many lines as it touches
                for (int off = 0; off < row_bytes; off += 64) prefetcht1(ptr[r10 + off]);
                if (row_bytes % 64 == 0) prefetcht1(ptr[r10 + row_bytes - 4]);
                lea(r11, ptr[r10 + static_cast<int32_t>(L_.ldc * 4)]);
                cmp(rax, static_cast<int32_t>(std::max<int64_t>(0, iterations - L_.mr + 1)));
                cmovg(r10, r11);
            }
            advance(rdi, r11, unroll * a_k_bytes());
            advance(rsi, r11, unroll * b_k_bytes());
            if (packing_) advance(rcx, r11, int64_t(unroll) * packed_row_bytes());
            dec(rax);
            jnz_back(loop);
        }
        if (remainder == 1) {
            k_step(0);
        } else if (remainder > 1) {
            // The last steps as a loop of one: the unroll's code again, once, instead of up to unroll - 1 more
            // copies (the encoding is most of a small kernel's JIT time; the loop costs a few cycles).
            mov(rax, remainder);
            align(64);  // (as the main loop)
            const size_t loop = getSize();
            k_step(0);
            advance(rdi, r11, a_k_bytes());
            advance(rsi, r11, b_k_bytes());
            if (packing_) advance(rcx, r11, packed_row_bytes());
            dec(rax);
            jnz_back(loop);
        }
    }

    // ---- epilogue: alpha, beta*C or +C, bias, activation, one store per vector -------------------------
    void epilogue(const UkernelVariant& v) {
        const EpilogueWork w = epilogue_work(L_, v);
        const Activation act = w.act;
        const Xmm t0 = temp(0), t1 = temp(1), t2 = temp(2);

        // With the shared activation chain: alpha, C and bias over the tile, the chain, then the stores.
        const bool chained = act != Activation::none && !activation_chain_.empty();
        if (chained) {
            pre_activation(w);
            call_back(activation_chain_[static_cast<size_t>(rows_ * nvec_)]);
            mov(r11, rdx);
            for (int i = 0; i < rows_; ++i) {
                for (int j = 0; j < nvec_; ++j) {
                    if (L_.store_s32) vcvtps2dq(acc(i, j), acc(i, j));
                    store_to(r11, j * vlen_ * 4, acc(i, j), is_tail_vector(j));
                }
                if (i + 1 < rows_) advance(r11, r10, L_.ldc * 4);
            }
            return;
        }
        mov(r11, rdx);
        for (int i = 0; i < rows_; ++i) {
            for (int j = 0; j < nvec_; ++j) {
                scale_and_add(w, i, j, t0);
                math_.apply(act, acc(i, j), t0, t1, t2);
                if (L_.store_s32) vcvtps2dq(acc(i, j), acc(i, j));
                store_to(r11, j * vlen_ * 4, acc(i, j), is_tail_vector(j));
            }
            if (i + 1 < rows_) advance(r11, r10, L_.ldc * 4);
        }
    }

    // Accumulator (i, j): alpha, beta*C or +C (r11 at row i of C), bias; t0 is scratch.
    void scale_and_add(const EpilogueWork& w, int i, int j, const Xmm& t0) {
        const Xmm a = acc(i, j);
        const bool tail = is_tail_vector(j);
        if (L_.alpha != 1.0f) scale_by_constant(a, L_.alpha);
        if (w.read_c) {
            load_from(t0, r11, j * vlen_ * 4, tail);
            if (w.c_scale == 1.0f) add_vectors(a, a, t0);
            else add_scaled_constant(a, t0, w.c_scale);
        }
        if (w.add_bias) {
            if (L_.bias == BiasKind::per_row) broadcast_from(t0, rcx, i * 4);
            else load_from(t0, rcx, j * vlen_ * 4, tail);
            add_vectors(a, a, t0);
        }
    }

    // a *= c and a += t * c, c a pool constant: encoded directly on AVX-512 (an Xbyak operand on a pool
    // constant costs ~50 ns to encode, an alpha or beta one per accumulator and variant).
    void scale_by_constant(const Xmm& a, float c) {
        if (avx512_) pool_.refer(bits_of_float(c), zmm_op_rip(*this, kZmmMul, a.getIdx(), a.getIdx()));
        else vmulps(a, a, pool_(c));
    }
    void add_scaled_constant(const Xmm& a, const Xmm& t, float c) {
        if (avx512_) pool_.refer(bits_of_float(c), zmm_op_rip(*this, kZmmFmadd231, a.getIdx(), t.getIdx()));
        else vfmadd231ps(a, t, pool_(c));
    }
    static uint32_t bits_of_float(float value) {
        uint32_t bits;
        std::memcpy(&bits, &value, sizeof bits);
        return bits;
    }

    // alpha, beta*C or +C and the bias on every accumulator of the tile (r11 walks the rows of C).
    void pre_activation(const EpilogueWork& w) {
        mov(r11, rdx);
        for (int i = 0; i < rows_; ++i) {
            for (int j = 0; j < nvec_; ++j) scale_and_add(w, i, j, temp(0));
            if (i + 1 < rows_) advance(r11, r10, L_.ldc * 4);
        }
    }

public:
    bool need_mask_table_ = false;
    Xbyak::Label mask_table_;

    void emit_mask_table() {
        if (!need_mask_table_) return;
        align(32);
        L(mask_table_);
        for (int i = 0; i < 8; ++i) dd(0xffffffffu);
        for (int i = 0; i < 8; ++i) dd(0);
    }

private:
    const GemmF32Layout L_;
    const bool avx512_;
    const int vlen_;
    ConstantPool pool_;
    VectorMath math_;
    int rows_ = 0, cols_ = 0, nvec_ = 0, tail_ = 0;
    int b_base_ = 0, bcast_ = 0, mask_reg_ = 0;
    bool in_whole_ = false;
    bool packing_ = false;           // the variant being emitted packs B (UkernelVariant::packs_b)
    bool mask_last_vector_ = false;  // a body shared by tiles of different widths: the epilogue masks with k1
    std::vector<size_t> activation_chain_;  // emit_activation_chain's entries by accumulator count (or empty)
};

}  // namespace

GeneratedCode generate_gemm_f32(const GemmF32Layout& layout, const std::vector<UkernelVariant>& variants,
                                const std::vector<PlacedTile>& whole, const SplitFinishLayout* finish,
                                const RowSweep* sweep) {
    const int vlen = vector_length(layout.isa);
    const int nr = layout.nv * vlen;
    // A generous bound on the code size: the unrolled K body and the epilogue of every variant.
    size_t capacity = 8192;
    const int64_t max_a_disp = int64_t(layout.mr) * (layout.trans_a ? 4 : layout.lda * 4);
    if (max_a_disp >= (int64_t(1) << 31))
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32 generator: A row offsets exceed 32-bit displacements");
    if (layout.a_next_tile_prefetch && (layout.trans_a || 2 * max_a_disp >= (int64_t(1) << 31)))
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32 generator: next A tile prefetch needs rows within 32 bits");
    if (layout.b_prefetch_runs > 0 && int64_t(layout.b_prefetch_runs - 1) * layout.b_prefetch_ld >= (int64_t(1) << 31))
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32 generator: B prefetch runs exceed 32-bit displacements");
    if (layout.store_s32 && (layout.beta != 0.0f || finish != nullptr ||
                             std::any_of(variants.begin(), variants.end(),
                                         [](const UkernelVariant& v) { return !v.first || !v.last; })))
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32 generator: an s32 C is stored once, never read back");
    if (layout.c_next_prefetch && layout.ldc * 4 >= (int64_t(1) << 31))
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32 generator: C rows exceed 32-bit displacements");
    for (const auto& v : variants) {
        if (v.rows < 1 || v.rows > layout.mr || v.cols < 1 || v.cols > nr || v.k_len < 1)
            fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32 generator: variant outside the tile");
        if (v.packs_b && (!layout.b_packed || layout.b_from_memory || layout.b_source_ldb < v.cols))
            fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32 generator: a packing variant needs packed B registers");
        const size_t nvec = static_cast<size_t>((v.cols + vlen - 1) / vlen);
        capacity += 1024 + static_cast<size_t>(layout.b_prefetch_runs) * 8 + static_cast<size_t>(layout.mr) * 8 +
                    static_cast<size_t>(layout.k_unroll + 1) * (layout.mr / 16 + 2) * 8 +
                    static_cast<size_t>(layout.k_unroll + 1) * (nvec * 20 + v.rows * (10 + nvec * 7)) * 2 +
                    static_cast<size_t>(v.rows) * nvec * 440 +
                    (v.packs_b ? 64 + static_cast<size_t>(layout.k_unroll + 1) * nvec * 24 : 0);
    }
    for (const auto& t : whole) {
        const size_t nvec = static_cast<size_t>((t.variant.cols + vlen - 1) / vlen);
        capacity += 512 + static_cast<size_t>(layout.k_unroll + 1) * (nvec * 20 + t.variant.rows * (10 + nvec * 7)) * 2 +
                    static_cast<size_t>(t.variant.rows) * nvec * 440;
    }
    if (sweep) {
        // Each tile's call (four lea and a call), and one body per distinct tile: at most four (full and tail
        // rows and columns), counted as one per tile shape.
        capacity += 256;
        std::vector<std::pair<int, int>> shapes;
        for (const auto* row : {&sweep->full_row, &sweep->tail_row}) {
            for (const auto& t : *row) {
                capacity += 48;
                const std::pair<int, int> shape{t.variant.rows, t.variant.cols};
                if (std::find(shapes.begin(), shapes.end(), shape) != shapes.end()) continue;
                shapes.push_back(shape);
                const size_t nvec = static_cast<size_t>((t.variant.cols + vlen - 1) / vlen);
                capacity += 512 + static_cast<size_t>(layout.k_unroll + 1) * (nvec * 20 + t.variant.rows * (10 + nvec * 7)) * 2 +
                            static_cast<size_t>(t.variant.rows) * nvec * 440;
            }
        }
    }
    if (finish) capacity += 256 + static_cast<size_t>((finish->n + vlen - 1) / vlen) * 448;
    return emit_code("gemm_f32", capacity, [&](uint8_t* buffer, size_t size) {
        GemmF32Emitter emitter(layout, buffer, size);
        GeneratedCode out;
        emitter.emit_activation_chain();
        // Variants grouped by K loop, in order of first appearance; entries stay in the variants' order.
        out.entries.assign(variants.size(), 0);
        std::vector<bool> done(variants.size(), false);
        for (size_t i = 0; i < variants.size(); ++i) {
            if (done[i]) continue;
            std::vector<size_t> members;
            for (size_t j = i; j < variants.size(); ++j)
                if (!done[j] && same_body(layout, variants[i], variants[j])) members.push_back(j);
            std::vector<UkernelVariant> group;
            for (size_t j : members) group.push_back(variants[j]);
            const std::vector<size_t> entries = emitter.emit_variant_group(group);
            for (size_t g = 0; g < members.size(); ++g) {
                out.entries[members[g]] = entries[g];
                done[members[g]] = true;
            }
        }
        if (!whole.empty()) out.entries.push_back(emitter.emit_whole(whole));
        if (sweep) out.entries.push_back(emitter.emit_row_sweep(*sweep));
        if (finish) out.entries.push_back(emitter.emit_finish(*finish));
        emitter.emit_mask_table();
        emitter.finish();
        out.bytes.assign(emitter.getCode(), emitter.getCode() + emitter.getSize());
        return out;
    });
}

}  // namespace jitmm::x86
