#include "x86/gemm_f32_dot_generator.hpp"

#include "core/error.hpp"
#include "x86/gemm_f32_generator.hpp"
#include "x86/emit_buffer.hpp"
#include "x86/vector_math.hpp"

#include <xbyak/xbyak.h>

#include <algorithm>
#include <string>
#include <vector>

namespace jitmm::x86 {

namespace {

using Xbyak::Xmm;

// Register plan (System V): rdi = A, rsi = Bt, rdx = C, rcx = bias, r8 = K-loop counter, r11 = C row cursor.
class GemmF32DotEmitter : public Xbyak::CodeGenerator {
public:
    GemmF32DotEmitter(const GemmF32DotLayout& layout, uint8_t* buffer, size_t capacity)
        : Xbyak::CodeGenerator(capacity, buffer),
          L_(layout),
          avx512_(layout.isa >= hw::X86Isa::avx512),
          vlen_(vector_length(layout.isa)),
          k_tail_(static_cast<int>(layout.k % vector_length(layout.isa))),
          pool_(*this),
          math_(*this, pool_, avx512_) {}

    size_t emit_variant(const DotVariant& v) {
        align(16);
        const size_t entry = getSize();
        rows_ = v.rows;
        cols_ = v.cols;
        partial_ = v.partial;
        const bool rest = !v.partial || v.k_rest;
        if (k_tail_ != 0 && rest) set_k_tail_mask();
        zero_accumulators();
        k_loop(v.partial, rest);
        epilogue();
        vzeroupper();
        ret();
        return entry;
    }

    size_t emit_finish(const SplitFinishLayout& f) { return emit_split_finish(*this, pool_, math_, f); }

    void finish() {
        if (need_lane_order_) {  // reduce_row's permute: lane p takes the sum in lane 4 (p % 4) + p / 4
            align(64);
            L(lane_order_);
            for (int p = 0; p < 16; ++p) dd(static_cast<uint32_t>(4 * (p % 4) + p / 4));
        }
        if (need_mask_table_) {
            align(32);
            L(mask_table_);
            for (int i = 0; i < 8; ++i) dd(0xffffffffu);
            for (int i = 0; i < 8; ++i) dd(0);
        }
        pool_.emit();
    }

private:
    // ---- registers: accumulators, then A vectors, then the B vector; AVX2 keeps its mask in the last ----
    Xmm vreg(int i) const { return avx512_ ? Xmm(Xbyak::Operand::ZMM, i) : Xmm(Xbyak::Operand::YMM, i); }
    Xmm acc(int i, int j) const { return vreg(i * cols_ + j); }
    Xmm avec(int i) const { return vreg(rows_ * cols_ + i); }
    Xmm bvec() const { return vreg(rows_ * cols_ + rows_); }
    Xmm mask() const { return vreg(vector_register_count(L_.isa) - 1); }
    // Scratch for the scalar epilogue: past the accumulators (the planner leaves kEpilogueTemps + 1).
    Xmm scalar(int t) const { return Xmm(rows_ * cols_ + t); }

    void set_k_tail_mask() {
        if (avx512_) {
            mov(eax, (1u << k_tail_) - 1);
            kmovw(k1, eax);
        } else {
            vmovups(mask(), ptr[rip + mask_table_ + (8 - k_tail_) * 4]);
            need_mask_table_ = true;
        }
    }

    void zero_accumulators() {
        for (int i = 0; i < rows_; ++i)
            for (int j = 0; j < cols_; ++j) vxorps(acc(i, j), acc(i, j), acc(i, j));
    }

    void load(const Xmm& dst, const Xbyak::Address& src, bool tail) {
        if (!tail) vmovups(dst, src);
        else if (avx512_) vmovups(dst | k1 | T_z, src);
        else vmaskmovps(dst, mask(), src);
    }

    // One vector of K: rows of A and rows of Bt at byte offset `off` from the cursors.
    void k_step(int64_t off, bool tail) {
        for (int i = 0; i < rows_; ++i) load(avec(i), ptr[rdi + i * L_.lda * 4 + off], tail);
        for (int j = 0; j < cols_; ++j) {
            load(bvec(), ptr[rsi + j * L_.ldb * 4 + off], tail);
            for (int i = 0; i < rows_; ++i) vfmadd231ps(acc(i, j), avec(i), bvec());
        }
    }

    // The lines `b_prefetch_bytes` past the ones each Bt row reads in this iteration (the planner's distance:
    // the next column tile's rows at the same K): many rows stream at once from memory, more than the hardware
    // prefetchers follow.
    void prefetch_b_rows(int64_t step_bytes) {
        if (L_.b_prefetch_bytes <= 0) return;
        for (int j = 0; j < cols_; ++j)
            for (int64_t off = 0; off < step_bytes; off += 64)
                prefetcht0(ptr[rsi + j * L_.ldb * 4 + L_.b_prefetch_bytes + off]);
    }

    // The lines `a_prefetch_bytes` along each A row past the ones this iteration reads (A streaming from memory),
    // into L1, or into L2 for a distance that L1 would not hold (a_prefetch_to_l2).
    void prefetch_a_rows(int64_t step_bytes) {
        if (L_.a_prefetch_bytes <= 0) return;
        for (int i = 0; i < rows_; ++i)
            for (int64_t off = 0; off < step_bytes; off += 64) {
                const Xbyak::Address line = ptr[rdi + i * L_.lda * 4 + L_.a_prefetch_bytes + off];
                if (L_.a_prefetch_to_l2) prefetcht1(line);
                else prefetcht0(line);
            }
    }

    // Whole K, or (partial) r8 iterations given by the caller, then (rest) what K has past them.
    void k_loop(bool partial, bool rest) {
        const int64_t full = L_.k / vlen_;
        const int64_t iterations = full / L_.k_unroll;
        const int64_t step_bytes = int64_t(L_.k_unroll) * vlen_ * 4;
        if (partial || iterations > 0) {
            Xbyak::Label loop, done;
            if (partial) {
                test(r8, r8);
                jz(done, T_NEAR);
            } else {
                mov(r8, iterations);
            }
            L(loop);
            for (int u = 0; u < L_.k_unroll; ++u) k_step(int64_t(u) * vlen_ * 4, false);
            prefetch_b_rows(step_bytes);
            prefetch_a_rows(step_bytes);
            add(rdi, static_cast<uint32_t>(step_bytes));
            add(rsi, static_cast<uint32_t>(step_bytes));
            dec(r8);
            jnz(loop, T_NEAR);
            L(done);
        }
        if (!rest) return;
        const int64_t left = full % L_.k_unroll;
        for (int64_t u = 0; u < left; ++u) k_step(u * vlen_ * 4, false);
        if (k_tail_ != 0) k_step(left * vlen_ * 4, true);
    }

    // Sum of the lanes of acc into lane 0 of its xmm; t is scratch.
    void horizontal_sum(int acc_index, int t_index) {
        const Xmm x(acc_index), t(t_index);
        if (avx512_) {
            vextractf64x4(Xbyak::Ymm(t_index), Xbyak::Zmm(acc_index), 1);
            vaddps(Xbyak::Ymm(acc_index), Xbyak::Ymm(acc_index), Xbyak::Ymm(t_index));
        }
        if (avx512_) vextractf32x4(t, Xbyak::Ymm(acc_index), 1);  // EVEX: the registers may be xmm16+
        else vextractf128(t, Xbyak::Ymm(acc_index), 1);
        vaddps(x, x, t);
        vmovhlps(t, t, x);
        vaddps(x, x, t);
        vmovshdup(t, x);
        vaddss(x, x, t);
    }

    // AVX-512: alpha, beta*C, bias and the activation run on vectors of up to 16 of a row's sums, stored under a
    // lane mask (k3: k1 is the K tail's, k2 the erf-GELU's). The sums come from reduce_row (`tree`), or else
    // from horizontal_sum's scalars through the red zone below the stack pointer (the kernel is a leaf). One
    // activation per row and 16 columns instead of per output: with a GELU, the scalar copies were most of the
    // kernel's code and JIT time (16x4096x4096 NT bias+GELU, a 4x6 tile: 13.6 -> 6.5 KB, 101 -> 28 us; run time
    // 4x64x64 2.85 -> 1.57 us, 8x256x256 SiLU 22.5 -> 15.1). Through the red zone only for those activations:
    // the wide reload of the row's scalar stores cannot be forwarded from them, which cost a cheap epilogue more
    // than it saved (16x128x512 bias+ReLU 13.5 -> 14.5-15.0 us). (A K part's kernel stores its alpha-scaled sums.)
    void vector_epilogue(bool tree) {
        constexpr int kRedZone = 128;  // bytes below rsp a leaf may use; holds up to 32 sums of a row
        const Xbyak::Zmm t1(scalar(1).getIdx()), t2(scalar(2).getIdx()), t3(scalar(3).getIdx());
        mov(r11, rdx);
        for (int i = 0; i < rows_; ++i) {
            if (!tree) {
                for (int j = 0; j < cols_; ++j) {
                    horizontal_sum(i * cols_ + j, scalar(0).getIdx());
                    vmovss(ptr[rsp - kRedZone + j * 4], Xmm(i * cols_ + j));
                }
            }
            for (int c0 = 0; c0 < cols_; c0 += 16) {
                const int lanes = std::min(16, cols_ - c0);
                const Xbyak::Zmm x = tree ? reduce_row(i, c0, lanes) : Xbyak::Zmm(scalar(0).getIdx());
                if (c0 == 0 || lanes != 16) {
                    mov(eax, (1u << lanes) - 1);
                    kmovw(k3, eax);
                }
                if (!tree) vmovups(x | k3 | T_z, ptr[rsp - kRedZone + c0 * 4]);
                if (L_.alpha != 1.0f) vmulps(x, x, pool_(L_.alpha));
                if (!partial_) {
                    if (L_.beta != 0.0f) {
                        vmovups(t1 | k3 | T_z, ptr[r11 + c0 * 4]);
                        if (L_.beta == 1.0f) vaddps(x, x, t1);
                        else vfmadd231ps(x, t1, pool_(L_.beta));
                    }
                    if (L_.bias == BiasKind::per_column) {
                        vmovups(t1 | k3 | T_z, ptr[rcx + c0 * 4]);
                        vaddps(x, x, t1);
                    }
                    if (L_.bias == BiasKind::per_row) vaddps(x, x, ptr_b[rcx + i * 4]);
                    math_.apply(L_.activation, x, t1, t2, t3);
                }
                vmovups(ptr[r11 + c0 * 4] | k3, x);
            }
            if (i + 1 < rows_) {
                mov(rax, L_.ldc * 4);
                add(r11, rax);
            }
        }
    }

    // AVX-512: the sums of n (at most 16) accumulators of row i from column c0 into lanes 0 .. n - 1 of one of
    // them (returned): a tree of four levels, each pairing registers by in-lane shuffles and one add, then one
    // permute (46 instructions for 16 sums, 16 for 4, where horizontal_sum takes 8 per sum: with a short K the
    // reductions were most of the kernel: 1 thread, median us, 2x4096x16 NT 10.5 -> 6.0, 2x1573x13 x2 8.7 ->
    // 5.7, 1x4096x8 5.9 -> 3.7, 2x702x11 TT x16 31 -> 20, 3x518x19 2.4 -> 1.7; a long K even). Input p ends
    // in lane 4 (p % 4) + p / 4 (the levels split 256, 128, 64 and 32 bits): the permute puts it in lane p.
    // Inputs sit at the front, so that pairs with an absent partner (a zeroed register) are few and pairs of
    // two absent ones cost nothing.
    Xbyak::Zmm reduce_row(int i, int c0, int n) {
        using Xbyak::Zmm;
        std::vector<int> regs(16, -1);
        for (int j = 0; j < n; ++j) regs[j] = acc(i, c0 + j).getIdx();
        const Zmm tmp(scalar(0).getIdx()), zero(scalar(1).getIdx());
        bool zeroed = false;
        auto operand = [&](int r) {
            if (r >= 0) return Zmm(r);
            if (!zeroed) vxorps(zero, zero, zero);
            zeroed = true;
            return zero;
        };
        for (int level = 0; level < 4; ++level) {
            std::vector<int> next(regs.size() / 2, -1);
            for (size_t p = 0; p < next.size(); ++p) {
                const int a = regs[2 * p], b = regs[2 * p + 1];
                if (a < 0 && b < 0) continue;
                const Zmm dst(a >= 0 ? a : b), x = operand(a), y = operand(b);
                if (level == 0) {  // 256-bit halves: x's 8 partial sums low, y's high
                    vshuff64x2(tmp, x, y, 0x44);
                    vshuff64x2(dst, x, y, 0xee);
                } else if (level == 1) {  // 128-bit lanes: one input's 4 partial sums per lane
                    vshuff32x4(tmp, x, y, 0x88);
                    vshuff32x4(dst, x, y, 0xdd);
                } else if (level == 2) {  // pairs of floats within the lanes
                    vunpcklpd(tmp, x, y);
                    vunpckhpd(dst, x, y);
                } else {  // single floats
                    vshufps(tmp, x, y, 0x88);
                    vshufps(dst, x, y, 0xdd);
                }
                vaddps(dst, dst, tmp);
                next[p] = dst.getIdx();
            }
            regs = next;
        }
        const Zmm sums(regs[0]);
        vmovups(tmp, ptr[rip + lane_order_]);
        need_lane_order_ = true;
        vpermps(sums, tmp, sums);
        return sums;
    }

    // Per output, in lane 0 of an xmm: alpha, beta*C, bias, activation, one scalar store. AVX-512 takes
    // vector_epilogue: with the reduction tree from four columns (fewer measured even), else with a GELU or SiLU.
    void epilogue() {
        if (avx512_ && cols_ >= 4) {
            vector_epilogue(true);
            return;
        }
        const bool costly = activation_uses_exp(L_.activation);
        if (avx512_ && costly && !partial_) {
            vector_epilogue(false);
            return;
        }
        const Xmm t0 = scalar(0), t1 = scalar(1), t2 = scalar(2), t3 = scalar(3);
        mov(r11, rdx);
        for (int i = 0; i < rows_; ++i) {
            for (int j = 0; j < cols_; ++j) {
                const int a_index = i * cols_ + j;
                const Xmm x(a_index);
                horizontal_sum(a_index, t0.getIdx());
                if (L_.alpha != 1.0f) vmulss(x, x, pool_(L_.alpha));
                if (partial_) {
                    vmovss(ptr[r11 + j * 4], x);
                    continue;
                }
                if (L_.beta != 0.0f) {
                    vmovss(t0, ptr[r11 + j * 4]);
                    if (L_.beta == 1.0f) vaddss(x, x, t0);
                    else vfmadd231ss(x, t0, pool_(L_.beta));
                }
                if (L_.bias == BiasKind::per_column) vaddss(x, x, ptr[rcx + j * 4]);
                if (L_.bias == BiasKind::per_row) vaddss(x, x, ptr[rcx + i * 4]);
                math_.apply(L_.activation, x, t1, t2, t3);
                vmovss(ptr[r11 + j * 4], x);
            }
            if (i + 1 < rows_) {
                mov(rax, L_.ldc * 4);
                add(r11, rax);
            }
        }
    }

    const GemmF32DotLayout L_;
    const bool avx512_;
    const int vlen_;
    const int k_tail_;
    ConstantPool pool_;
    VectorMath math_;
    int rows_ = 0, cols_ = 0;
    bool partial_ = false;
    bool need_mask_table_ = false;
    Xbyak::Label mask_table_;
    bool need_lane_order_ = false;
    Xbyak::Label lane_order_;
};

}  // namespace

bool dot_tile_fits(hw::X86Isa isa, int mr, int nj) {
    const int regs = vector_register_count(isa) - (isa >= hw::X86Isa::avx512 ? 0 : 1);
    // Main loop: accumulators, A vectors, the B vector. Epilogue: accumulators and four scalar temps.
    return mr * nj + mr + 1 <= regs && mr * nj + kEpilogueTemps + 1 <= regs;
}

GeneratedDotCode generate_gemm_f32_dot(const GemmF32DotLayout& layout, const std::vector<DotVariant>& variants,
                                       const SplitFinishLayout* finish) {
    if (!dot_tile_fits(layout.isa, layout.mr, layout.nj))
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_dot generator: tile does not fit the registers");
    if (int64_t(layout.nj) * layout.ldb * 4 >= (int64_t(1) << 31) ||
        int64_t(layout.mr) * layout.lda * 4 >= (int64_t(1) << 31))
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_dot generator: row offsets exceed 32-bit displacements");
    size_t capacity = 8192;
    for (const auto& v : variants) {
        if (v.rows < 1 || v.rows > layout.mr || v.cols < 1 || v.cols > layout.nj)
            fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_dot generator: variant outside the tile");
        const size_t outputs = static_cast<size_t>(v.rows) * v.cols;
        capacity += 1024 + static_cast<size_t>(layout.k_unroll + 2) * (v.rows + v.cols) * (10 + 7 * v.rows) +
                    outputs * 400;
    }
    if (finish) capacity += 256 + static_cast<size_t>((finish->n + 7) / 8) * 448;
    return emit_code("gemm_f32_dot", capacity, [&](uint8_t* buffer, size_t size) {
        GemmF32DotEmitter emitter(layout, buffer, size);
        GeneratedDotCode out;
        for (const auto& v : variants) out.entries.push_back(emitter.emit_variant(v));
        if (finish) out.entries.push_back(emitter.emit_finish(*finish));
        emitter.finish();
        out.bytes.assign(emitter.getCode(), emitter.getCode() + emitter.getSize());
        return out;
    });
}

}  // namespace jitmm::x86
