#include "x86/gemm_lowp_avx_generator.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "x86/emit_buffer.hpp"
#include "x86/zmm_encoder.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace jitmm::x86 {

namespace {

using plan::LowpStep;
using Xbyak::Reg64;
using Xbyak::Xmm;

// Register plan (System V): rdi = A, rsi = B panel, rdx = C, rcx = args; r8 = K-loop counter; rax = C row
// cursor (and the strip); vector registers: accumulators, then the B vectors, the broadcast and the step's
// scratch. The epilogue reuses the B registers as its scratch.
class LowpAvxEmitter : public Xbyak::CodeGenerator {
public:
    LowpAvxEmitter(const plan::LowpLayout& layout, uint8_t* buffer, size_t capacity)
        : Xbyak::CodeGenerator(capacity, buffer),
          L_(layout),
          zmm_(layout.isa >= hw::X86Isa::avx512),
          vlen_(layout.vlen()),
          nr_(layout.nr()),
          pool_(*this),
          epilogue_(*this, pool_, L_) {}

    size_t emit_variant(const LowpVariant& v) {
        align(16);
        const size_t entry = getSize();
        if (L_.dot_nt) {
            emit_dot(v);
            return entry;
        }
        begin_variant(v);
        if (v.last) prefetch_c(v);
        if (v.first) zero_accumulators();
        else strip(/*load=*/true);
        if (L_.a_s8_flipped) load_flip_constant();
        if (L_.f16_k_pairs) {
            const int next = k_loop(v.k_len / 2);
            if (v.k_len % 2 != 0) k_pair_step(next, /*single=*/true);  // K's odd last value
        } else if (L_.a_odd_k_word && v.k_len % 2 != 0) {
            odd_k_step(k_loop(v.k_len / 2));
        } else {
            k_loop((v.k_len + plan::step_group(L_.step) - 1) / plan::step_group(L_.step));
        }
        if (v.last) {
            if (L_.f16_k_pairs) add_k_pairs();
            epilogue();
        } else {
            strip(/*load=*/false);
        }
        vzeroupper();
        ret();
        return entry;
    }

    void finish() {
        epilogue_.emit_tables();
        pool_.emit();
    }

private:
    // ---- register allocation for one variant --------------------------------------------------------------
    void begin_variant(const LowpVariant& v) {
        rows_ = v.rows;
        nvec_ = (v.cols + vlen_ - 1) / vlen_;
        tail_ = v.cols % vlen_;
        b_base_ = rows_ * nvec_;
        bcast_ = b_base_ + nvec_;
        epilogue_.set_tail(tail_);
    }
    Xmm vreg(int i) const { return zmm_ ? Xmm(Xbyak::Operand::ZMM, i) : Xmm(Xbyak::Operand::YMM, i); }
    // Register numbers for zmm_encoder (an Xbyak register object costs more to make than the encoding).
    int acc_idx(int i, int j) const { return i * nvec_ + j; }
    int bvec_idx(int j) const { return b_base_ + j; }
    Xmm acc(int i, int j) const { return vreg(i * nvec_ + j); }
    Xmm bvec(int j) const { return vreg(b_base_ + j); }
    Xmm bcast() const { return vreg(bcast_); }
    Xmm step_temp() const { return vreg(bcast_ + 1); }
    int flip_idx() const { return bcast_ + 1; }  // LowpLayout::a_s8_flipped: 0x80 in every byte

    void load_flip_constant() {
        if (!zmm_ || flip_idx() >= 32) throw Xbyak::Error(Xbyak::ERR_INTERNAL);  // (every zmm tile has room)
        mov(r9d, 0x80808080);
        vpbroadcastd(Xbyak::Zmm(flip_idx()), r9d);
    }
    bool is_tail_vector(int j) const { return tail_ != 0 && j == nvec_ - 1; }
    int vector_bytes() const { return vlen_ * 4; }

    void zero_accumulators() {
        for (int i = 0; i < rows_; ++i)
            for (int j = 0; j < nvec_; ++j) {
                if (zmm_) zmm_op(*this, kZmmPxord, acc_idx(i, j), acc_idx(i, j), acc_idx(i, j));
                else vpxor(acc(i, j), acc(i, j), acc(i, j));
            }
    }

    // The K-block accumulator strip: whole vectors (the strip is padded to whole tiles).
    void strip(bool load) {
        mov(rax, ptr[rcx + kArgAcc]);
        for (int i = 0; i < rows_; ++i)
            for (int j = 0; j < nvec_; ++j) {
                const int64_t offset = i * L_.acc_ld + j * vector_bytes();
                if (zmm_ && offset <= INT32_MAX) {
                    if (load) load_zmm(*this, acc_idx(i, j), rax, static_cast<int32_t>(offset));
                    else store_zmm(*this, rax, static_cast<int32_t>(offset), acc_idx(i, j));
                    continue;
                }
                const auto addr = ptr[rax + offset];
                if (load) vmovups(acc(i, j), addr);
                else vmovups(addr, acc(i, j));
            }
    }

    // The C tile's lines before the K loop (LowpLayout::c_prefetch): a short K leaves the tile's stores nothing
    // to overlap with, and each store missing L1 would wait for its line in turn.
    void prefetch_c(const LowpVariant& v) {
        if (!L_.c_prefetch) return;
        const int64_t c_size = dtype_size(L_.c_type), row_bytes = L_.ldc * c_size;
        const int lines = static_cast<int>((v.cols * c_size + 63) / 64);
        if (int64_t(v.rows - 1) * row_bytes + lines * 64 > INT32_MAX) return;
        for (int i = 0; i < v.rows; ++i)
            for (int l = 0; l < lines; ++l) prefetcht0(ptr[rdx + static_cast<int32_t>(i * row_bytes + l * 64)]);
    }

    // ---- main loop: per k group, the B row's vectors times each row's broadcast A dword -------------------
    int64_t b_group_bytes() const { return int64_t(nr_) * 4; }

    void multiply(const Xmm& a, int i, int j) {
        // AVX-512: the plain forms through zmm_encoder (the same bytes as Xbyak's in a few nanoseconds; the K
        // loop's products and loads are most of a kernel's JIT time: 238x70x1022 f16 x29 151 -> 58 us).
        if (zmm_) {
            const int a_idx = a.getIdx();
            switch (L_.step) {
                case LowpStep::vnni_u8s8: zmm_op(*this, kZmmDpbusd, acc_idx(i, j), a_idx, bvec_idx(j)); return;
                case LowpStep::dot_bf16: zmm_op(*this, kZmmDpbf16ps, acc_idx(i, j), bvec_idx(j), a_idx); return;
                case LowpStep::fma_f32: fma231_zmm(*this, acc_idx(i, j), bvec_idx(j), a_idx); return;
                default: break;
            }
        }
        switch (L_.step) {
            case LowpStep::vnni_u8s8:  // u8 A (first) x s8 B; wraps (no saturation), exact while C fits s32
                if (zmm_) vpdpbusd(acc(i, j), a, bvec(j));
                else vpdpbusd(acc(i, j), a, bvec(j), Xbyak::VexEncoding);  // AVX-VNNI: no AVX512-VL needed
                return;
            case LowpStep::madd_s16:
                vpmaddwd(step_temp(), bvec(j), a);  // two s16 products summed exactly into s32
                vpaddd(acc(i, j), acc(i, j), step_temp());
                return;
            case LowpStep::dot_bf16: vdpbf16ps(acc(i, j), bvec(j), a); return;
            case LowpStep::fma_f32: vfmadd231ps(acc(i, j), bvec(j), a); return;
            case LowpStep::amx_int8: case LowpStep::amx_bf16: break;
        }
        throw Xbyak::Error(Xbyak::ERR_INTERNAL);
    }

    // B's k-th row in place (LowpLayout::b_in_place): f16 widened on the load, the column tail masked (k1 holds
    // the epilogue's tail mask), so nothing past the row's last column is read.
    void load_b_in_place(int u) {
        // Rows more than 2 KB apart defeat the hardware's stride prefetcher: each k step asks for the lines of
        // the row b_prefetch_k steps ahead.
        if (L_.b_prefetch_k > 0)
            for (int j = 0; j < nvec_; j += 2) prefetcht0(ptr[rsi + (u + L_.b_prefetch_k) * L_.b_row_bytes + j * vlen_ * 2]);
        for (int j = 0; j < nvec_; ++j) {
            const auto src = ptr[rsi + u * L_.b_row_bytes + j * vlen_ * 2];
            if (L_.b_type == JITMM_DTYPE_BF16) {  // bf16: the upper half of an f32
                if (is_tail_vector(j)) vpmovzxwd(bvec(j) | k1 | T_z, src);
                else vpmovzxwd(bvec(j), src);
                vpslld(bvec(j), bvec(j), 16);
                continue;
            }
            if (is_tail_vector(j)) vcvtph2ps(bvec(j) | k1 | T_z, src);
            else vcvtph2ps(bvec(j), src);
        }
    }

    // LowpLayout::f16_k_pairs (one vector of at most 8 columns): each k step takes two k values, one FMA for what
    // took two. The B vector holds them interleaved (lane 2c + e: column c at k + e, packed so by
    // pack_b_f16_k_pairs), and each row's two packed f32 A values (8 bytes) are broadcast to every lane pair.
    // `single`: K's odd last value alone, broadcast to every lane (B's k + 1 lanes are zero; whatever lies past a
    // packed row's K is never read, as a NaN there would reach C).
    void k_pair_step(int u, bool single) {
        vmovups(bvec(0), ptr[rsi + u * b_group_bytes()]);
        for (int i = 0; i < rows_; ++i) {
            const auto src = ptr[rdi + i * L_.a_row_bytes + u * 8];
            if (single) vbroadcastss(bcast(), src);
            else vbroadcastsd(Xbyak::Zmm(bcast().getIdx()), src);
            vfmadd231ps(acc(i, 0), bvec(0), bcast());
        }
    }

    // The pairs' lanes summed (2c + 1 into 2c), then the even lanes compressed into lanes 0-7: column c in lane c.
    void add_k_pairs() {
        mov(eax, 0x5555);
        kmovw(k3, eax);
        for (int i = 0; i < rows_; ++i) {
            vpermilps(bvec(0), acc(i, 0), 0xb1);  // adjacent lanes swapped
            vaddps(acc(i, 0), acc(i, 0), bvec(0));
            vcompressps(acc(i, 0) | k3 | T_z, acc(i, 0));
        }
    }

    void k_step(int u) {
        if (L_.f16_k_pairs) {
            k_pair_step(u, false);
            return;
        }
        if (L_.b_in_place) load_b_in_place(u);
        else
            for (int j = 0; j < nvec_; ++j) {
                const int64_t offset = u * b_group_bytes() + j * vector_bytes();
                if (zmm_ && offset <= INT32_MAX) load_zmm(*this, bvec_idx(j), rsi, static_cast<int32_t>(offset));
                else vmovups(bvec(j), ptr[rsi + offset]);
            }
        for (int i = 0; i < rows_; ++i) {
            if (L_.a_f16_in_place) {
                vcvtph2psx(bcast(), ptr_b[rdi + i * L_.a_row_bytes + u * L_.a_k_bytes]);  // one f16, widened
                for (int j = 0; j < nvec_; ++j) multiply(bcast(), i, j);
                continue;
            }
            const int64_t offset = i * L_.a_row_bytes + u * 4;
            // One vector per row: the A dword as the product's embedded broadcast ({1to16}), one instruction where
            // a broadcast and a product were two (Zen 4 issues a zmm broadcast on a vector pipe: one per product
            // held bf16 4096x16x4096 on 12 x 1 to 58% of vdpbf16ps' rate). vpdpbusd takes only its s8 operand
            // (B) from memory, so VNNI keeps the broadcast.
            const bool embedded = zmm_ && nvec_ == 1 && offset <= INT32_MAX &&
                                  (L_.step == LowpStep::dot_bf16 || L_.step == LowpStep::fma_f32);
            if (embedded) {
                const auto src = ptr_b[rdi + static_cast<int32_t>(offset)];
                if (L_.step == LowpStep::dot_bf16) vdpbf16ps(acc(i, 0), bvec(0), src);
                else vfmadd231ps(acc(i, 0), bvec(0), src);
                continue;
            }
            if (zmm_ && offset <= INT32_MAX) {
                if (L_.step == LowpStep::fma_f32) broadcast_zmm(*this, bcast_, rdi, static_cast<int32_t>(offset));
                else broadcast_dword_zmm(*this, bcast_, rdi, static_cast<int32_t>(offset));
            } else {
                const auto src = ptr[rdi + offset];
                if (L_.step == LowpStep::fma_f32) vbroadcastss(bcast(), src);
                else vpbroadcastd(bcast(), src);
            }
            if (L_.a_s8_flipped) zmm_op(*this, kZmmPxord, bcast_, bcast_, flip_idx());
            const Xmm a = bcast();
            for (int j = 0; j < nvec_; ++j) multiply(a, i, j);
        }
    }

    // LowpLayout::a_odd_k_word: the last k pair of an odd K block, whose second value lies past the row. Each
    // row's last bf16 is broadcast to the even words only (k4 = every other word), so the pair is (a, 0) against
    // B's (b, 0): a * b exactly, whatever lies past the row.
    void odd_k_step(int u) {
        mov(eax, 0x55555555);
        kmovd(k4, eax);
        for (int j = 0; j < nvec_; ++j) vmovups(bvec(j), ptr[rsi + u * b_group_bytes() + j * vector_bytes()]);
        for (int i = 0; i < rows_; ++i) {
            vpbroadcastw(bcast() | k4 | T_z, ptr[rdi + i * L_.a_row_bytes + u * 4]);
            for (int j = 0; j < nvec_; ++j) multiply(bcast(), i, j);
        }
    }

    // LowpLayout::b_src_*: this iteration's lines of the next B block as stored, into L2. r11 walks the call's
    // share (LowpCallArgs::prefetch up to prefetch_end) along a group of b_src_rows rows, r10 is where the group's
    // segments end; then r11 moves to the next group's first line. (r10 and r11 are the epilogue's, after the
    // K loop.)
    void prefetch_next_b_source() {
        Xbyak::Label done;
        cmp(r11, ptr[rcx + kArgPrefetchEnd]);
        jae(done, T_NEAR);
        for (int r = 0; r < L_.b_src_rows; ++r)
            for (int l = 0; l < L_.b_src_lines; ++l)
                prefetcht1(ptr[r11 + static_cast<int32_t>(r * L_.b_src_stride + l * 64)]);
        add(r11, L_.b_src_lines * 64);
        cmp(r11, r10);
        jb(done, T_NEAR);
        const int64_t group = int64_t(L_.b_src_rows) * L_.b_src_stride;
        add(r11, static_cast<int32_t>(group - L_.b_src_seg));
        add(r10, static_cast<int32_t>(group));
        L(done);
    }

    static constexpr int64_t kMinIterationsForRemainderLoop = 4;
    // Bytes A's pointer moves a k step: a dword of packed A (one f32, or the k group), two f32 of k pairs, or an
    // f16 A in place's k stride.
    int64_t a_step_bytes() const { return L_.a_f16_in_place ? L_.a_k_bytes : L_.f16_k_pairs ? 8 : 4; }

    // Returns the step offset (u) where a step after the loop reads: past unrolled remainder steps, or 0 where
    // the loop moved the pointers past every step.
    int k_loop(int64_t groups) {
        const int unroll = std::max(1, L_.k_unroll);
        const int64_t iterations = groups / unroll, remainder = groups % unroll;
        if (iterations > 0) {
            Xbyak::Label loop;
            mov(r8, iterations);
            if (L_.b_src_rows > 0) {
                mov(r11, ptr[rcx + kArgPrefetch]);
                lea(r10, ptr[r11 + static_cast<int32_t>(L_.b_src_seg)]);
            }
            L(loop);
            for (int u = 0; u < unroll; ++u) k_step(u);
            if (L_.b_src_rows > 0) prefetch_next_b_source();
            add(rdi, static_cast<uint32_t>(unroll * a_step_bytes()));
            add(rsi, static_cast<uint32_t>(unroll * (L_.b_in_place ? L_.b_row_bytes : b_group_bytes())));
            dec(r8);
            jnz(loop, T_NEAR);
        }
        if (remainder == 1 || (remainder > 1 && iterations < kMinIterationsForRemainderLoop)) {
            for (int u = 0; u < remainder; ++u) k_step(u);
            return static_cast<int>(remainder);
        } else if (remainder > 1) {
            // The last groups as a loop of one: the step's code once more instead of up to unroll - 1 copies
            // (JIT time). Not for a short K, whose few groups the loop's branches slow (1 thread, unrolled ->
            // loop: s8 16x36x5 0.17 -> 0.19 us, f16 100x300x6 2.68 -> 2.75).
            Xbyak::Label loop;
            mov(r8, remainder);
            L(loop);
            k_step(0);
            add(rdi, static_cast<uint32_t>(a_step_bytes()));
            add(rsi, static_cast<uint32_t>(L_.b_in_place ? L_.b_row_bytes : b_group_bytes()));
            dec(r8);
            jnz(loop, T_NEAR);
        }
        return 0;
    }

    // ---- epilogue: every accumulator through the fused epilogue, row by row ------------------------------
    void epilogue() {
        epilogue_.load_pointers();
        const int64_t c_size = dtype_size(L_.c_type);
        const Xmm t0 = vreg(b_base_), t1 = vreg(b_base_ + 1), t2 = vreg(b_base_ + 2);
        mov(rax, rdx);
        for (int i = 0; i < rows_; ++i) {
            for (int j = 0; j < nvec_; ++j)
                epilogue_.apply(acc(i, j), i, j, is_tail_vector(j), rax + j * vlen_ * c_size, t0, t1, t2);
            if (i + 1 < rows_) {
                const int64_t step = L_.ldc * c_size;
                if (step <= INT32_MAX) {
                    add(rax, static_cast<uint32_t>(step));
                } else {
                    mov(rdi, step);
                    add(rax, rdi);
                }
            }
        }
    }

    // ---- dot_nt (decode rows, B stored N x K): C[i][j] = dot(A row i, B row j) along K --------------------
    // Registers: acc(i, j) = zmm i * nv + j; the A rows next, then three B temporaries and the 0x80 bytes.
    // rdi = packed A (rows layout.a_row_bytes apart, K zero padded to whole vectors), rsi = B's first row of the
    // tile. VNNI: 64 int8 k values a vector (u8 A x s8 B by vpdpbusd, s32 sums); fma_f32: 16 f32 k values of A
    // against 16 f16 values of B widened by vcvtph2ps (f32 sums); dot_bf16: 32 bf16 k values of A and B as
    // stored, pairs summed by vdpbf16ps (f32 sums).
    void emit_dot(const LowpVariant& v) {
        const int rows = v.rows, cols = v.cols, nt = L_.nv;
        const bool f32 = L_.step == LowpStep::fma_f32;
        const bool bf16 = L_.step == LowpStep::dot_bf16;
        const int64_t k_per_vector = f32 ? 16 : bf16 ? 32 : 64;
        const int b_vector_bytes = f32 ? 32 : 64;
        const int a_vector_bytes = L_.dot_a_in_place ? 32 : 64;
        auto dacc = [&](int i, int j) { return Xbyak::Zmm(i * nt + j); };
        auto arow = [&](int i) { return Xbyak::Zmm(rows * nt + i); };
        const int tbase = rows * nt + rows;
        auto btmp = [&](int t) { return Xbyak::Zmm(tbase + t % 3); };
        const Xbyak::Zmm flip(tbase + 3);
        auto add_lanes = [&](const Xbyak::Zmm& d, const Xbyak::Zmm& x, const Xbyak::Zmm& y) {
            if (f32 || bf16) vaddps(d, x, y);
            else vpaddd(d, x, y);
        };
        const int64_t full = v.k_len / k_per_vector, tail = v.k_len % k_per_vector;
        for (int i = 0; i < rows; ++i)
            for (int j = 0; j < nt; ++j) vpxord(dacc(i, j), dacc(i, j), dacc(i, j));
        if (L_.dot_row_comp) {
            mov(eax, 0x80808080u);
            vpbroadcastd(flip, eax);
        }
        if (tail != 0) {  // one mask bit per k value of the last vector
            mov(rax, (uint64_t(1) << tail) - 1);
            if (bf16) kmovd(k3, eax);
            else kmovq(k3, rax);
        }
        int t = 0;
        auto step = [&](int64_t u, bool masked) {
            for (int i = 0; i < rows; ++i) {
                const auto a_src = ptr[rdi + i * L_.a_row_bytes + u * a_vector_bytes];
                if (L_.dot_a_in_place) {  // f16 rows as stored: the lanes past K masked like B's
                    if (masked) vcvtph2ps(arow(i) | k3 | T_z, a_src);
                    else vcvtph2ps(arow(i), a_src);
                } else if (f32) {
                    vmovups(arow(i), a_src);
                } else {
                    vmovdqu8(arow(i), a_src);
                }
            }
            for (int j = 0; j < cols; ++j) {
                const Xbyak::Zmm b = btmp(t++);
                const auto b_src = ptr[rsi + j * L_.b_row_bytes + u * b_vector_bytes];
                if (f32) {
                    // The packed A rows' padding past K is zero, and so are the masked lanes of B (and of A in
                    // place): nothing past K counts.
                    if (masked) vcvtph2ps(b | k3 | T_z, b_src);
                    else vcvtph2ps(b, b_src);
                    for (int i = 0; i < rows; ++i) vfmadd231ps(dacc(i, j), arow(i), b);
                    continue;
                }
                if (bf16) {  // B's lanes past K masked to zero: a NaN or an Inf in its rows' padding never counts
                    if (masked) vmovdqu16(b | k3 | T_z, b_src);
                    else vmovdqu16(b, b_src);
                    for (int i = 0; i < rows; ++i) vdpbf16ps(dacc(i, j), arow(i), b);
                    continue;
                }
                if (masked) vmovdqu8(b | k3 | T_z, b_src);
                else vmovdqu8(b, b_src);
                if (L_.dot_row_comp) {
                    vpxord(b, b, flip);  // s8 b -> u8 b + 128
                    for (int i = 0; i < rows; ++i) vpdpbusd(dacc(i, j), b, arow(i));
                } else {
                    for (int i = 0; i < rows; ++i) vpdpbusd(dacc(i, j), arow(i), b);  // u8 A x s8 B
                }
            }
        };
        const int unroll = std::max(1, L_.k_unroll);
        if (full / unroll > 0) {
            Xbyak::Label loop;
            mov(r8, full / unroll);
            L(loop);
            for (int u = 0; u < unroll; ++u) step(u, false);
            add(rdi, unroll * a_vector_bytes);
            add(rsi, unroll * b_vector_bytes);
            dec(r8);
            jnz(loop, T_NEAR);
        }
        for (int64_t u = 0; u < full % unroll; ++u) step(u, false);
        if (tail != 0) step(full % unroll, true);

        // Per row: the nt accumulators reduced across lanes into lanes [0, nt) of acc(i, 0).
        const Xbyak::Zmm tmp(tbase);
        for (int i = 0; i < rows; ++i) {
            std::vector<Xbyak::Zmm> w;
            for (int j = 0; j < nt; ++j) w.push_back(dacc(i, j));
            // dwords: pairs interleaved and summed, then qwords: each 128-bit chunk holds 4 partial sums.
            for (int level = 0; level < 2; ++level) {
                std::vector<Xbyak::Zmm> next;
                for (size_t q = 0; q + 1 < w.size(); q += 2) {
                    if (level == 0) {
                        vpunpckldq(tmp, w[q], w[q + 1]);
                        vpunpckhdq(w[q], w[q], w[q + 1]);
                    } else {
                        vpunpcklqdq(tmp, w[q], w[q + 1]);
                        vpunpckhqdq(w[q], w[q], w[q + 1]);
                    }
                    add_lanes(w[q], w[q], tmp);
                    next.push_back(w[q]);
                }
                w = next;
            }
            // Chunks: pairs of 128-bit chunks summed twice; w[q] holds columns 4q..4q+3 per chunk.
            for (int level = 0; level < 2; ++level) {
                std::vector<Xbyak::Zmm> next;
                for (size_t q = 0; q < w.size(); q += 2) {
                    const Xbyak::Zmm x = w[q], y = q + 1 < w.size() ? w[q + 1] : w[q];
                    vshufi32x4(tmp, x, y, 0xdd);
                    vshufi32x4(x, x, y, 0x88);
                    add_lanes(x, x, tmp);
                    next.push_back(x);
                }
                w = next;
            }
        }
        if (L_.dot_row_comp) mov(rdi, ptr[rcx + kArgComp]);
        epilogue_.set_tail(cols % 16);
        epilogue_.load_pointers();
        const int64_t c_size = dtype_size(L_.c_type);
        const Xmm t0 = Xbyak::Zmm(tbase), t1 = Xbyak::Zmm(tbase + 1), t2 = Xbyak::Zmm(tbase + 2);
        mov(rax, rdx);
        for (int i = 0; i < rows; ++i) {
            if (L_.dot_row_comp) {
                vpbroadcastd(t0, ptr[rdi + i * 4]);
                vpsubd(dacc(i, 0), dacc(i, 0), t0);
            }
            epilogue_.apply(dacc(i, 0), i, 0, cols % 16 != 0, rax, t0, t1, t2);
            if (i + 1 < rows) {
                const int64_t stride = L_.ldc * c_size;
                if (stride <= INT32_MAX) {
                    add(rax, static_cast<uint32_t>(stride));
                } else {
                    mov(rsi, stride);
                    add(rax, rsi);
                }
            }
        }
        vzeroupper();
        ret();
    }

    const plan::LowpLayout L_;
    const bool zmm_;
    const int vlen_;
    const int nr_;
    ConstantPool pool_;
    LowpEpilogue epilogue_;
    int rows_ = 0, nvec_ = 0, tail_ = 0;
    int b_base_ = 0, bcast_ = 0;
};

}  // namespace

LowpCode generate_lowp_avx(const plan::LowpLayout& layout, const std::vector<LowpVariant>& variants) {
    if (plan::step_is_amx(layout.step))
        fail(JITMM_STATUS_INTERNAL_ERROR, "lowp avx generator: an AMX step belongs to the AMX generator");
    if (int64_t(layout.mr) * layout.a_row_bytes >= (int64_t(1) << 31) ||
        int64_t(layout.mr) * layout.acc_ld >= (int64_t(1) << 31))
        fail(JITMM_STATUS_INTERNAL_ERROR, "lowp avx generator: row offsets exceed 32-bit displacements");
    if (layout.b_in_place && (layout.step != LowpStep::fma_f32 || layout.isa < hw::X86Isa::avx512 ||
                              (layout.b_type != JITMM_DTYPE_F16 && layout.b_type != JITMM_DTYPE_BF16) ||
                              int64_t(layout.k_unroll + 1) * layout.b_row_bytes >= (int64_t(1) << 31)))
        fail(JITMM_STATUS_INTERNAL_ERROR, "lowp avx generator: B in place needs an f16 or bf16 B, fma_f32, "
                                          "AVX-512 and 32-bit row offsets");
    if (layout.f16_k_pairs && (layout.step != LowpStep::fma_f32 || layout.isa < hw::X86Isa::avx512 ||
                               layout.nv != 1 || layout.b_in_place || layout.a_f16_in_place))
        fail(JITMM_STATUS_INTERNAL_ERROR, "lowp avx generator: f16 k pairs need fma_f32, AVX-512, one vector of "
                                          "packed B and packed A");
    for (const auto& v : variants)
        if (layout.f16_k_pairs && v.cols > 8)
            fail(JITMM_STATUS_INTERNAL_ERROR, "lowp avx generator: f16 k pairs past 8 columns");
    if (layout.a_f16_in_place &&
        int64_t(layout.mr) * layout.a_row_bytes + int64_t(layout.k_unroll) * layout.a_k_bytes >= (int64_t(1) << 31))
        fail(JITMM_STATUS_INTERNAL_ERROR, "lowp avx generator: f16 A in place past 32-bit displacements");
    const int nr = layout.nr();
    size_t capacity = 16384;
    for (const auto& v : variants) {
        if (v.rows < 1 || v.rows > layout.mr || v.cols < 1 || v.cols > nr || v.k_len < 1)
            fail(JITMM_STATUS_INTERNAL_ERROR, "lowp avx generator: variant outside the tile");
        if (layout.dot_nt) capacity += size_t(v.rows + 1) * size_t(v.cols + 1) * 64 * size_t(layout.k_unroll + 2);
        capacity += 2048 + size_t(layout.k_unroll + 1) * size_t(v.rows + 1) * size_t(layout.nv + 1) * 24 +
                    size_t(v.rows) * size_t(layout.nv) * 640;
    }
    // The estimate is generous; should it still fall short, try again with twice the room.
    return emit_code("lowp avx", capacity, [&](uint8_t* buffer, size_t size) {
        LowpAvxEmitter emitter(layout, buffer, size);
        LowpCode out;
        for (const auto& v : variants) out.entries.push_back(emitter.emit_variant(v));
        emitter.finish();
        out.bytes.assign(emitter.getCode(), emitter.getCode() + emitter.getSize());
        return out;
    });
}

}  // namespace jitmm::x86
