// Vector math for fused epilogues, emitted inline into a kernel: exp, sigmoid-based SiLU and tanh-GELU,
// erf-GELU, ReLU, on f32 vectors (zmm with AVX-512, ymm with AVX2). Constants live in a RIP-relative pool
// at the end of the code buffer, so the code stays position-independent.
#pragma once

#include "core/problem.hpp"

#include <xbyak/xbyak.h>

#include <cstdint>
#include <map>

namespace jitmm::x86 {

// Broadcast f32 constants, one full vector each, emitted once after the code.
class ConstantPool {
public:
    explicit ConstantPool(Xbyak::CodeGenerator& gen) : gen_(gen) {}
    Xbyak::Address operator()(float value);      // a full-vector memory operand holding value in every lane
    Xbyak::Address bits(uint32_t pattern);       // same, for an integer bit pattern (masks, exponent bias)
    void emit();                                  // call once, after the last instruction

private:
    Xbyak::CodeGenerator& gen_;
    std::map<uint32_t, Xbyak::Label> labels_;
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
    void reciprocal(const Xbyak::Xmm& d, const Xbyak::Xmm& t);
    void divide_by_one_plus_exp(const Xbyak::Xmm& x, const Xbyak::Xmm& arg, const Xbyak::Xmm& t0,
                                const Xbyak::Xmm& t1);
    Xbyak::CodeGenerator& g_;
    ConstantPool& c_;
    bool avx512_;
};

}  // namespace jitmm::x86
