#include "x86/gemm_lowp_epilogue.hpp"

#include "core/dtype.hpp"

namespace jitmm::x86 {

using Xbyak::RegExp;
using Xbyak::Xmm;
using plan::step_is_int;

LowpEpilogue::LowpEpilogue(Xbyak::CodeGenerator& gen, ConstantPool& pool, const plan::LowpLayout& layout)
    : g_(gen),
      pool_(pool),
      math_(gen, pool, layout.isa >= hw::X86Isa::avx512),
      L_(layout),
      zmm_(layout.isa >= hw::X86Isa::avx512),
      vlen_(layout.vlen()) {}

bool LowpEpilogue::runtime_scale() const {
    return L_.a_scale == ScaleMode::per_tensor || L_.b_scale == ScaleMode::per_tensor;
}

Xmm LowpEpilogue::vec(int idx) const {
    return zmm_ ? Xmm(Xbyak::Operand::ZMM, idx) : Xmm(Xbyak::Operand::YMM, idx);
}

Xmm LowpEpilogue::half(const Xmm& x) const {
    return zmm_ ? Xmm(Xbyak::Operand::YMM, x.getIdx()) : Xmm(x.getIdx());
}

Xbyak::Address LowpEpilogue::red_zone() const { return g_.ptr[g_.rsp - 64]; }

void LowpEpilogue::load_pointers() {
    if (L_.bias != BiasKind::none) g_.mov(g_.r8, g_.ptr[g_.rcx + kArgBias]);
    if (L_.compensate) g_.mov(g_.r9, g_.ptr[g_.rcx + kArgComp]);
    if (L_.b_scale == ScaleMode::per_column) g_.mov(g_.r10, g_.ptr[g_.rcx + kArgBScales]);
    if (L_.a_scale == ScaleMode::per_row) g_.mov(g_.r11, g_.ptr[g_.rcx + kArgAScales]);
}

void LowpEpilogue::set_tail(int tail) {
    tail_ = tail;
    if (tail == 0) return;
    if (zmm_) {
        g_.mov(g_.eax, (1u << tail) - 1);
        g_.kmovw(g_.k1, g_.eax);
    } else {
        // Lanes [0, tail) all ones: a sliding window over a -1 ... -1, 0 ... 0 table.
        g_.vmovups(vec(kAvx2MaskRegister), g_.ptr[g_.rip + mask_table_ + (8 - tail) * 4]);
        need_mask_table_ = true;
    }
}

void LowpEpilogue::emit_tables() {
    if (!need_mask_table_) return;
    g_.align(32);
    g_.L(mask_table_);
    for (int i = 0; i < 8; ++i) g_.dd(0xffffffffu);
    for (int i = 0; i < 8; ++i) g_.dd(0);
}

void LowpEpilogue::copy_bytes(const RegExp& dst, const RegExp& src, int bytes) {
    int off = 0;
    for (; bytes - off >= 8; off += 8) {
        g_.mov(g_.rsi, g_.qword[src + off]);
        g_.mov(g_.qword[dst + off], g_.rsi);
    }
    if (bytes - off >= 4) {
        g_.mov(g_.esi, g_.dword[src + off]);
        g_.mov(g_.dword[dst + off], g_.esi);
        off += 4;
    }
    if (bytes - off >= 2) {
        g_.mov(g_.si, g_.word[src + off]);
        g_.mov(g_.word[dst + off], g_.si);
    }
}

// ---- loads: a vector of f32 (or s32) lanes from memory of the given type, masked in the tail ------------
void LowpEpilogue::load_f32(const Xmm& dst, const RegExp& src, jitmm_dtype type, bool tail) {
    const bool masked = tail && tail_ != 0;
    if (type == JITMM_DTYPE_F32 || type == JITMM_DTYPE_S32) {
        if (!masked) g_.vmovups(dst, g_.ptr[src]);
        else if (zmm_) g_.vmovups(dst | g_.k1 | g_.T_z, g_.ptr[src]);
        else g_.vmaskmovps(dst, vec(kAvx2MaskRegister), g_.ptr[src]);
        return;
    }
    // 16-bit types: AVX2 has no 16-bit masked load, so a tail is first copied into zeroed stack memory.
    RegExp from = src;
    if (masked && !zmm_) {
        g_.vpxor(Xmm(dst.getIdx()), Xmm(dst.getIdx()), Xmm(dst.getIdx()));
        g_.vmovdqu(red_zone(), Xmm(dst.getIdx()));
        copy_bytes(g_.rsp - 64, src, tail_ * 2);
        from = g_.rsp - 64;
    }
    const bool k = masked && zmm_;
    if (type == JITMM_DTYPE_BF16) {
        if (k) g_.vpmovzxwd(dst | g_.k1 | g_.T_z, g_.ptr[from]);
        else g_.vpmovzxwd(dst, g_.ptr[from]);
        g_.vpslld(dst, dst, 16);
    } else {
        if (k) g_.vcvtph2ps(dst | g_.k1 | g_.T_z, g_.ptr[from]);
        else g_.vcvtph2ps(dst, g_.ptr[from]);
    }
}

void LowpEpilogue::load_s32(const Xmm& dst, const RegExp& src, bool tail) {
    if (!tail || tail_ == 0) g_.vmovups(dst, g_.ptr[src]);
    else if (zmm_) g_.vmovdqu32(dst | g_.k1 | g_.T_z, g_.ptr[src]);
    else g_.vpmaskmovd(dst, vec(kAvx2MaskRegister), g_.ptr[src]);
}

void LowpEpilogue::broadcast_f32(const Xmm& dst, const RegExp& src, jitmm_dtype type) {
    switch (type) {
        case JITMM_DTYPE_BF16:
            g_.vpbroadcastw(dst, g_.word[src]);
            g_.vpslld(dst, dst, 16);  // each dword held the value twice; keep the upper copy
            return;
        case JITMM_DTYPE_F16:
            g_.vpbroadcastw(half(dst), g_.word[src]);
            g_.vcvtph2ps(dst, half(dst));
            return;
        default:
            g_.vbroadcastss(dst, g_.dword[src]);
            return;
    }
}

// ---- f32 -> bf16, round to nearest even, NaN kept quiet; the result is in half(v)'s low lanes ----------
void LowpEpilogue::to_bf16(const Xmm& v, const Xmm& t0, const Xmm& t1, const Xmm& t2) {
    if (L_.isa >= hw::X86Isa::avx512_bf16) {
        g_.vcvtneps2bf16(half(v), v);
        return;
    }
    g_.vpsrld(t0, v, 16);
    if (zmm_) g_.vpandd(t0, t0, pool_.bits(1)); else g_.vpand(t0, t0, pool_.bits(1));
    g_.vpaddd(t0, t0, pool_.bits(0x7fff));
    g_.vpaddd(t0, t0, v);           // + 0x7fff + lsb: rounds the upper half to nearest even
    g_.vpsrld(t0, t0, 16);
    g_.vpsrld(t1, v, 16);
    // NaN lanes: truncated with the quiet bit set instead (rounding could carry them into inf).
    if (zmm_) g_.vpord(t1, t1, pool_.bits(0x40)); else g_.vpor(t1, t1, pool_.bits(0x40));
    if (zmm_) {
        g_.vcmpps(g_.k2, v, v, 3);  // unordered: NaN lanes
        g_.vmovdqa32(t0 | g_.k2, t1);
        g_.vpmovdw(half(v), t0);
    } else {
        g_.vcmpps(t2, v, v, 3);
        g_.vblendvps(t0, t0, t1, t2);
        g_.vpackusdw(t0, t0, t0);       // per 128-bit lane: [a0..a3 a0..a3 | a4..a7 a4..a7]
        g_.vpermq(Xbyak::Ymm(v.getIdx()), Xbyak::Ymm(t0.getIdx()), 0x08);  // qwords 0 and 2 to the low half
    }
}

// ---- stores -----------------------------------------------------------------------------------------------
void LowpEpilogue::store(const RegExp& dst, const Xmm& v, jitmm_dtype type, bool tail, const Xmm& t0,
                         const Xmm& t1, const Xmm& t2) {
    const bool masked = tail && tail_ != 0;
    if (type == JITMM_DTYPE_F32 || type == JITMM_DTYPE_S32) {
        if (!masked) g_.vmovups(g_.ptr[dst], v);
        else if (zmm_) g_.vmovups(g_.ptr[dst] | g_.k1, v);
        else g_.vmaskmovps(g_.ptr[dst], vec(kAvx2MaskRegister), v);
        return;
    }
    if (type == JITMM_DTYPE_F16) {
        if (zmm_) {
            if (masked) g_.vcvtps2ph(g_.ptr[dst] | g_.k1, v, 0);
            else g_.vcvtps2ph(g_.ptr[dst], v, 0);
            return;
        }
        g_.vcvtps2ph(half(v), v, 0);  // imm 0: round to nearest even
    } else {
        to_bf16(v, t0, t1, t2);
        if (zmm_) {
            if (masked) g_.vmovdqu16(g_.ptr[dst] | g_.k1, half(v));
            else g_.vmovups(g_.ptr[dst], half(v));
            return;
        }
    }
    // AVX2: eight 16-bit values in the xmm half of v.
    if (!masked) {
        g_.vmovdqu(g_.ptr[dst], half(v));
    } else {
        g_.vmovdqu(red_zone(), half(v));
        copy_bytes(dst, g_.rsp - 64, tail_ * 2);
    }
}

// ---- the epilogue of one accumulator vector -----------------------------------------------------------------
void LowpEpilogue::apply(const Xmm& v, int row, int j, bool tail, const RegExp& c, const Xmm& t0, const Xmm& t1,
                         const Xmm& t2) {
    const int vb = vlen_ * 4;  // bytes of one vector of 32-bit lanes
    const int64_t bias_size = dtype_size(L_.bias_type);
    if (step_is_int(L_.step) && L_.compensate) g_.vpsubd(v, v, g_.ptr[g_.r9 + j * vb]);

    if (L_.int_epilogue) {
        if (L_.beta != 0.0f) {  // beta == 1 (the planner allows nothing else on s32)
            load_s32(t0, c, tail);
            g_.vpaddd(v, v, t0);
        }
        if (L_.bias == BiasKind::per_row) {
            g_.vpbroadcastd(t0, g_.dword[g_.r8 + row * 4]);
            g_.vpaddd(v, v, t0);
        } else if (L_.bias == BiasKind::per_column) {
            load_s32(t0, g_.r8 + j * vb, tail);
            g_.vpaddd(v, v, t0);
        }
        if (L_.activation == Activation::relu) {
            if (zmm_) g_.vpxord(t0, t0, t0); else g_.vpxor(t0, t0, t0);
            g_.vpmaxsd(v, v, t0);
        }
        store(c, v, JITMM_DTYPE_S32, tail, t0, t1, t2);
        return;
    }

    if (step_is_int(L_.step)) g_.vcvtdq2ps(v, v);
    if (runtime_scale()) {
        if (zmm_) {
            g_.vmulps(v, v, g_.ptr_b[g_.rcx + kArgScale]);
        } else {
            g_.vbroadcastss(t0, g_.dword[g_.rcx + kArgScale]);
            g_.vmulps(v, v, t0);
        }
    } else if (L_.alpha != 1.0f) {
        g_.vmulps(v, v, pool_(L_.alpha));
    }
    if (L_.b_scale == ScaleMode::per_column) {
        if (tail && tail_ != 0) {
            load_f32(t0, g_.r10 + j * vb, JITMM_DTYPE_F32, true);
            g_.vmulps(v, v, t0);
        } else {
            g_.vmulps(v, v, g_.ptr[g_.r10 + j * vb]);
        }
    }
    if (L_.a_scale == ScaleMode::per_row) {
        if (zmm_) {
            g_.vmulps(v, v, g_.ptr_b[g_.r11 + row * 4]);
        } else {
            g_.vbroadcastss(t0, g_.dword[g_.r11 + row * 4]);
            g_.vmulps(v, v, t0);
        }
    }
    if (L_.beta != 0.0f) {
        load_f32(t0, c, L_.c_type, tail);
        if (L_.beta == 1.0f) g_.vaddps(v, v, t0);
        else g_.vfmadd231ps(v, t0, pool_(L_.beta));
    }
    if (L_.bias == BiasKind::per_row) {
        broadcast_f32(t0, g_.r8 + row * bias_size, L_.bias_type);
        g_.vaddps(v, v, t0);
    } else if (L_.bias == BiasKind::per_column) {
        load_f32(t0, g_.r8 + j * vlen_ * bias_size, L_.bias_type, tail);
        g_.vaddps(v, v, t0);
    }
    math_.apply(L_.activation, v, t0, t1, t2);
    store(c, v, L_.c_type, tail, t0, t1, t2);
}

}  // namespace jitmm::x86
