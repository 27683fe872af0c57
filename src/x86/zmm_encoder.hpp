// Direct EVEX encodings of the instructions an AVX-512 f32 K loop, its plain epilogue and the activations are
// made of (vector loads and stores, a broadcast of A, FMAs, arithmetic on registers or on a RIP-relative
// constant). Xbyak builds an Address and runs its generic encoder for
// each: 20-60 ns an instruction, most of the JIT time of a small kernel. These write the same bytes (test_zmm_encoder.cpp
// compares them with Xbyak's) in a few nanoseconds. Only plain forms: no opmask, a base register without
// index, and not rsp/r12 (which need a SIB byte) nor rbp/r13 (no displacement-free form);
// zmm_memory_operand_ok says whether a base qualifies, callers use Xbyak otherwise.
#pragma once

#include <xbyak/xbyak.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace jitmm::x86 {

inline bool zmm_memory_operand_ok(const Xbyak::Reg64& base) {
    const int b = base.getIdx() & 7;
    return b != 4 && b != 5;
}

// Appends n bytes at the end of g's code in one copy (CodeArray::db checks the room and stores one byte per
// call: about 13% of a kernel's JIT time when every byte went through it); returns where they start. Past the
// buffer's room it throws Xbyak's ERR_CODE_IS_TOO_BIG, as db would (the generators' callers then retry with a
// larger buffer).
inline size_t append_bytes(Xbyak::CodeGenerator& g, const void* bytes, size_t n) {
    const size_t at = g.getSize();
    try {
        g.setSize(at + n);
    } catch (const Xbyak::Error&) {
        throw Xbyak::Error(Xbyak::ERR_CODE_IS_TOO_BIG);
    }
    std::memcpy(const_cast<uint8_t*>(g.getCode()) + at, bytes, n);  // the generator's own, writable buffer
    return at;
}

namespace evex_detail {

// The bytes of one instruction, appended at once.
struct Bytes {
    uint8_t b[16];
    int n = 0;
    void put(int byte) { b[n++] = static_cast<uint8_t>(byte); }
    void put32(uint32_t v) {
        std::memcpy(b + n, &v, 4);
        n += 4;
    }
    size_t commit(Xbyak::CodeGenerator& g) const { return append_bytes(g, b, static_cast<size_t>(n)); }
};

// 0x62 and the three payload bytes of a 512-bit operation: reg = the ModRM.reg register (0..31), vvvv = the
// second source (0..31; 0 where there is none: the fields are stored inverted, all ones), rm = the ModRM.rm
// register (a zmm 0..31, or a base GPR, whose index has no bit 4: X stays clear), mm = opcode map (1: 0F,
// 2: 0F38), pp = implied prefix (0: none, 1: 66, 2: F3).
inline void prefix(Bytes& e, int reg, int vvvv, int rm, int mm, int pp) {
    const int p0 = ((~reg >> 3 & 1) << 7) | ((~rm >> 4 & 1) << 6) | ((~rm >> 3 & 1) << 5) | ((~reg >> 4 & 1) << 4) | mm;
    const int p1 = ((~vvvv & 15) << 3) | 4 | pp;
    const int p2 = (2 << 5) | ((~vvvv >> 4 & 1) << 3);  // L'L = 512 bits, V'
    e.put(0x62);
    e.put(p0);
    e.put(p1);
    e.put(p2);
}

// ModRM (and displacement) for [base + disp]; n is the EVEX compressed-displacement scale of the operand.
inline void memory(Bytes& e, int reg, const Xbyak::Reg64& base, int32_t disp, int n) {
    const int rm = base.getIdx() & 7;
    if (disp == 0) {
        e.put(((reg & 7) << 3) | rm);
    } else if (disp % n == 0 && disp / n >= -128 && disp / n <= 127) {
        e.put(0x40 | ((reg & 7) << 3) | rm);
        e.put(static_cast<uint8_t>(disp / n));
    } else {
        e.put(0x80 | ((reg & 7) << 3) | rm);
        e.put32(static_cast<uint32_t>(disp));
    }
}

}  // namespace evex_detail

// One EVEX.512.W0 operation by opcode: the map (1: 0F, 2: 0F38), the implied prefix (0: none, 1: 66) and
// the opcode byte.
struct ZmmOp {
    uint8_t map, pp, opcode;
};
constexpr ZmmOp kZmmAdd{1, 0, 0x58}, kZmmMul{1, 0, 0x59}, kZmmSub{1, 0, 0x5C}, kZmmMin{1, 0, 0x5D},
    kZmmMax{1, 0, 0x5F}, kZmmAnd{1, 0, 0x54}, kZmmXor{1, 0, 0x57}, kZmmLoad{1, 0, 0x10};
constexpr ZmmOp kZmmFmadd213{2, 1, 0xA8}, kZmmFmadd231{2, 1, 0xB8}, kZmmFnmadd213{2, 1, 0xAC},
    kZmmFnmadd231{2, 1, 0xBC}, kZmmScalef{2, 1, 0x2C}, kZmmRcp14{2, 1, 0x4C};

// op zmm(dst), zmm(a), zmm(b); a = 0 for the one-source operations (kZmmLoad, kZmmRcp14: dst = op(b)).
inline void zmm_op(Xbyak::CodeGenerator& g, ZmmOp op, int dst, int a, int b) {
    evex_detail::Bytes e;
    evex_detail::prefix(e, dst, a, b, op.map, op.pp);
    e.put(op.opcode);
    e.put(0xC0 | ((dst & 7) << 3) | (b & 7));
    e.commit(g);
}

// op zmm(dst), zmm(a), zword [rip + rel32] with rel32 left 0: returns where it lies (the instruction ends 4
// bytes later), for the caller to point it at its operand once that has a place (ConstantPool::refer).
inline size_t zmm_op_rip(Xbyak::CodeGenerator& g, ZmmOp op, int dst, int a) {
    evex_detail::Bytes e;
    evex_detail::prefix(e, dst, a, 0, op.map, op.pp);
    e.put(op.opcode);
    e.put(((dst & 7) << 3) | 5);  // mod 00, rm 101: rip + disp32
    const int rel = e.n;
    e.put32(0);
    return e.commit(g) + static_cast<size_t>(rel);
}

// vfmadd231ps zmm(dst), zmm(a), zmm(b): dst += a * b.
inline void fma231_zmm(Xbyak::CodeGenerator& g, int dst, int a, int b) { zmm_op(g, kZmmFmadd231, dst, a, b); }

// vaddps zmm(dst), zmm(a), zmm(b).
inline void add_zmm(Xbyak::CodeGenerator& g, int dst, int a, int b) { zmm_op(g, kZmmAdd, dst, a, b); }

// op zmm(reg), [base + disp] (or the store form, op [base + disp], zmm(reg)): map, implied prefix, opcode,
// and the operand's compressed-displacement scale.
inline void zmm_memory_op(Xbyak::CodeGenerator& g, ZmmOp op, int reg, const Xbyak::Reg64& base, int32_t disp,
                          int scale) {
    evex_detail::Bytes e;
    evex_detail::prefix(e, reg, 0, base.getIdx(), op.map, op.pp);
    e.put(op.opcode);
    evex_detail::memory(e, reg, base, disp, scale);
    e.commit(g);
}

// vbroadcastss zmm(dst), dword [base + disp].
inline void broadcast_zmm(Xbyak::CodeGenerator& g, int dst, const Xbyak::Reg64& base, int32_t disp) {
    zmm_memory_op(g, ZmmOp{2, 1, 0x18}, dst, base, disp, 4);
}

// vmovups zmm(dst), zword [base + disp].
inline void load_zmm(Xbyak::CodeGenerator& g, int dst, const Xbyak::Reg64& base, int32_t disp) {
    zmm_memory_op(g, kZmmLoad, dst, base, disp, 64);
}

// vmovups zword [base + disp], zmm(src).
inline void store_zmm(Xbyak::CodeGenerator& g, const Xbyak::Reg64& base, int32_t disp, int src) {
    zmm_memory_op(g, ZmmOp{1, 0, 0x11}, src, base, disp, 64);
}

// The low-precision K loops' products (gemm_lowp_avx_generator): dst += a . b per lane.
constexpr ZmmOp kZmmPxord{1, 1, 0xEF};    // vpxord (zeroing an accumulator: a xor a)
constexpr ZmmOp kZmmDpbusd{2, 1, 0x50};   // vpdpbusd: four u8 x s8 products (a unsigned, b signed) into s32
constexpr ZmmOp kZmmDpbf16ps{2, 2, 0x52};  // vdpbf16ps (F3 prefix): two bf16 x bf16 products into f32

// vpbroadcastd zmm(dst), dword [base + disp].
inline void broadcast_dword_zmm(Xbyak::CodeGenerator& g, int dst, const Xbyak::Reg64& base, int32_t disp) {
    zmm_memory_op(g, ZmmOp{2, 1, 0x58}, dst, base, disp, 4);
}

}  // namespace jitmm::x86
