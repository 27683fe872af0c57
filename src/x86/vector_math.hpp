// Vector math for fused epilogues, emitted inline into a kernel: exp, sigmoid-based SiLU and tanh-GELU,
// erf-GELU, ReLU, on f32 vectors (zmm with AVX-512, ymm with AVX2). Constants live in a RIP-relative pool
// at the end of the code buffer, so the code stays position-independent.
#pragma once

#include "core/problem.hpp"
#include "x86/zmm_encoder.hpp"

#include <xbyak/xbyak.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace jitmm::x86 {

// Broadcast f32 constants, one full vector each, emitted once after the code.
class ConstantPool {
public:
    explicit ConstantPool(Xbyak::CodeGenerator& gen) : gen_(gen) {}
    Xbyak::Address operator()(float value);      // a full-vector memory operand holding value in every lane
    Xbyak::Address bits(uint32_t pattern);       // same, for an integer bit pattern (masks, exponent bias)
    // For code encoded without Xbyak (zmm_op_rip): the rel32 at rel_at (its instruction ends 4 bytes later) is
    // pointed at the vector of `pattern` when the pool is emitted.
    void refer(uint32_t pattern, size_t rel_at);
    void emit();                                  // call once, after the last instruction

private:
    struct Vector {
        Xbyak::Label label;    // for Xbyak's operands
        bool labeled = false;  // an Xbyak operand names it (a label's definition costs a hash-map insert)
        size_t offset = 0;     // where emit() put it, for refer's
    };
    Xbyak::CodeGenerator& gen_;
    std::map<uint32_t, Vector> vectors_;                      // emitted in pattern order
    std::vector<std::pair<const Vector*, size_t>> references_;  // (vector, rel_at) of refer
};

class VectorMath {
public:
    VectorMath(Xbyak::CodeGenerator& gen, ConstantPool& pool, bool avx512) : g_(gen), c_(pool), avx512_(avx512) {}

    // How many scratch registers apply() needs for an activation.
    static int temps_needed(Activation act);
    // x = act(x) in place; t0..t2 are scratch (only the first temps_needed(act) are touched).
    void apply(Activation act, const Xbyak::Xmm& x, const Xbyak::Xmm& t0, const Xbyak::Xmm& t1,
               const Xbyak::Xmm& t2);
    // x = exp(x) for any finite or infinite x (clamped to the f32 range first); t0, t1 scratch.
    void exp(const Xbyak::Xmm& x, const Xbyak::Xmm& t0, const Xbyak::Xmm& t1);

private:
    // The instructions below, on AVX-512 encoded directly (zmm_encoder: the same bytes as Xbyak's, whose
    // encoding of a constant operand costs ~50 ns, most of a fused activation's JIT time); Xbyak otherwise.
    // op_c: dst = op(a, constant c); op_r: dst = op(a, b).
    template <typename XbyakOp>
    void op_c(ZmmOp op, XbyakOp&& fallback, const Xbyak::Xmm& dst, const Xbyak::Xmm& a, uint32_t c);
    template <typename XbyakOp>
    void op_r(ZmmOp op, XbyakOp&& fallback, const Xbyak::Xmm& dst, const Xbyak::Xmm& a, const Xbyak::Xmm& b);
    void mul(const Xbyak::Xmm& d, const Xbyak::Xmm& a, float c);
    void mul(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Xmm& b);
    void add(const Xbyak::Xmm& d, const Xbyak::Xmm& a, float c);
    void sub(const Xbyak::Xmm& d, const Xbyak::Xmm& a, float c);
    void min(const Xbyak::Xmm& d, const Xbyak::Xmm& a, float c);
    void max(const Xbyak::Xmm& d, const Xbyak::Xmm& a, float c);
    void and_bits(const Xbyak::Xmm& d, const Xbyak::Xmm& a, uint32_t bits);
    void xor_bits(const Xbyak::Xmm& d, const Xbyak::Xmm& a, uint32_t bits);
    void load(const Xbyak::Xmm& d, float c);
    void fmadd213(const Xbyak::Xmm& d, const Xbyak::Xmm& a, float c);           // d = d * a + c
    void fmadd213(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Xmm& b);  // d = d * a + b
    void fmadd231(const Xbyak::Xmm& d, const Xbyak::Xmm& a, float c);           // d = a * c + d
    void fnmadd213(const Xbyak::Xmm& d, const Xbyak::Xmm& a, float c);          // d = -(d * a) + c
    void fnmadd231(const Xbyak::Xmm& d, const Xbyak::Xmm& a, float c);          // d = -(a * c) + d

    void reciprocal(const Xbyak::Xmm& d, const Xbyak::Xmm& t);
    void divide_by_one_plus_exp(const Xbyak::Xmm& x, const Xbyak::Xmm& arg, const Xbyak::Xmm& t0,
                                const Xbyak::Xmm& t1);
    Xbyak::CodeGenerator& g_;
    ConstantPool& c_;
    bool avx512_;
};

}  // namespace jitmm::x86
