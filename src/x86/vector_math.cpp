#include "x86/vector_math.hpp"

#include <cstring>

namespace jitmm::x86 {

using Xbyak::Xmm;

Xbyak::Address ConstantPool::operator()(float value) {
    uint32_t pattern;
    std::memcpy(&pattern, &value, sizeof pattern);
    return bits(pattern);
}

Xbyak::Address ConstantPool::bits(uint32_t pattern) {
    Vector& vector = vectors_[pattern];
    vector.labeled = true;
    return gen_.ptr[gen_.rip + vector.label];
}

void ConstantPool::refer(uint32_t pattern, size_t rel_at) {
    if (references_.empty()) references_.reserve(256);
    references_.emplace_back(&vectors_[pattern], rel_at);  // map nodes stay put
}

void ConstantPool::emit() {
    if (vectors_.empty()) return;
    gen_.align(64);
    for (auto& [pattern, vector] : vectors_) {
        vector.offset = gen_.getSize();
        if (vector.labeled) gen_.L(vector.label);  // the direct references (refer) are patched by offset below
        uint32_t lanes[16];
        for (uint32_t& lane : lanes) lane = pattern;
        append_bytes(gen_, lanes, sizeof lanes);  // 64 bytes: a zmm (or the low ymm) load
    }
    for (const auto& [vector, rel_at] : references_)
        gen_.rewrite(rel_at, static_cast<uint32_t>(vector->offset - (rel_at + 4)), 4);
}

namespace {

uint32_t bits_of(float value) {
    uint32_t pattern;
    std::memcpy(&pattern, &value, sizeof pattern);
    return pattern;
}

}  // namespace

template <typename XbyakOp>
void VectorMath::op_c(ZmmOp op, XbyakOp&& fallback, const Xmm& dst, const Xmm& a, uint32_t c) {
    if (avx512_ && dst.isZMM()) c_.refer(c, zmm_op_rip(g_, op, dst.getIdx(), a.getIdx()));
    else fallback(dst, a, c_.bits(c));
}

template <typename XbyakOp>
void VectorMath::op_r(ZmmOp op, XbyakOp&& fallback, const Xmm& dst, const Xmm& a, const Xmm& b) {
    if (avx512_ && dst.isZMM()) zmm_op(g_, op, dst.getIdx(), a.getIdx(), b.getIdx());
    else fallback(dst, a, b);
}

#define JITMM_XBYAK(op) [this](const Xmm& d, const Xmm& a, const auto& b) { g_.op(d, a, b); }

void VectorMath::mul(const Xmm& d, const Xmm& a, float c) { op_c(kZmmMul, JITMM_XBYAK(vmulps), d, a, bits_of(c)); }
void VectorMath::mul(const Xmm& d, const Xmm& a, const Xmm& b) { op_r(kZmmMul, JITMM_XBYAK(vmulps), d, a, b); }
void VectorMath::add(const Xmm& d, const Xmm& a, float c) { op_c(kZmmAdd, JITMM_XBYAK(vaddps), d, a, bits_of(c)); }
void VectorMath::sub(const Xmm& d, const Xmm& a, float c) { op_c(kZmmSub, JITMM_XBYAK(vsubps), d, a, bits_of(c)); }
void VectorMath::min(const Xmm& d, const Xmm& a, float c) { op_c(kZmmMin, JITMM_XBYAK(vminps), d, a, bits_of(c)); }
void VectorMath::max(const Xmm& d, const Xmm& a, float c) { op_c(kZmmMax, JITMM_XBYAK(vmaxps), d, a, bits_of(c)); }
void VectorMath::and_bits(const Xmm& d, const Xmm& a, uint32_t bits) { op_c(kZmmAnd, JITMM_XBYAK(vandps), d, a, bits); }
void VectorMath::xor_bits(const Xmm& d, const Xmm& a, uint32_t bits) { op_c(kZmmXor, JITMM_XBYAK(vxorps), d, a, bits); }
void VectorMath::fmadd213(const Xmm& d, const Xmm& a, float c) {
    op_c(kZmmFmadd213, JITMM_XBYAK(vfmadd213ps), d, a, bits_of(c));
}
void VectorMath::fmadd213(const Xmm& d, const Xmm& a, const Xmm& b) {
    op_r(kZmmFmadd213, JITMM_XBYAK(vfmadd213ps), d, a, b);
}
void VectorMath::fmadd231(const Xmm& d, const Xmm& a, float c) {
    op_c(kZmmFmadd231, JITMM_XBYAK(vfmadd231ps), d, a, bits_of(c));
}
void VectorMath::fnmadd213(const Xmm& d, const Xmm& a, float c) {
    op_c(kZmmFnmadd213, JITMM_XBYAK(vfnmadd213ps), d, a, bits_of(c));
}
void VectorMath::fnmadd231(const Xmm& d, const Xmm& a, float c) {
    op_c(kZmmFnmadd231, JITMM_XBYAK(vfnmadd231ps), d, a, bits_of(c));
}
void VectorMath::load(const Xmm& d, float c) {
    if (avx512_ && d.isZMM()) c_.refer(bits_of(c), zmm_op_rip(g_, kZmmLoad, d.getIdx(), 0));
    else g_.vmovups(d, c_(c));
}

#undef JITMM_XBYAK

int VectorMath::temps_needed(Activation act) {
    switch (act) {
        case Activation::none: return 0;
        case Activation::relu: return 1;
        case Activation::silu: case Activation::gelu_tanh: case Activation::gelu_erf: return 3;
    }
    return 3;
}

// exp(x) = 2^n * exp(r), n = round(x * log2(e)), r = x - n*ln2 in [-ln2/2, ln2/2]; exp(r) by a degree-6
// polynomial (relative error below 2e-7 on that interval), 2^n folded in by vscalefps or the exponent bits.
// The argument is clamped to [-86, 80]: every result is then a normal f32 (>= 4e-38, so that no later
// multiply, divide or reciprocal meets a denormal: each of those costs a ~150-cycle microcode assist when
// FTZ/DAZ are off, which made GELU on |x| > 10 cost 10x the GEMM's own time), and 1 + exp(x) has a normal
// reciprocal. Callers only need exp at those extremes to saturate a sigmoid, where the clamp is invisible.
void VectorMath::exp(const Xmm& x, const Xmm& t0, const Xmm& t1) {
    const float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer (to nearest even)
    min(x, x, 80.0f);
    max(x, x, -86.0f);
    load(t0, round_magic);
    fmadd231(t0, x, 1.44269504088896341f);
    sub(t0, t0, round_magic);                   // n
    fnmadd231(x, t0, 0.693145751953125f);       // ln2, high part (exact in f32 times n)
    fnmadd231(x, t0, 1.42860682030941723212e-6f); // ln2, low part
    load(t1, 1.0f / 720);
    fmadd213(t1, x, 1.0f / 120);
    fmadd213(t1, x, 1.0f / 24);
    fmadd213(t1, x, 1.0f / 6);
    fmadd213(t1, x, 0.5f);
    fmadd213(t1, x, 1.0f);
    fmadd213(t1, x, 1.0f);
    if (avx512_) {
        op_r(kZmmScalef, [this](const Xmm& d, const Xmm& a, const Xmm& b) { g_.vscalefps(d, a, b); }, x, t1, t0);
    } else {
        g_.vcvtps2dq(t0, t0);
        g_.vpaddd(t0, t0, c_.bits(127));
        g_.vpslld(t0, t0, 23);
        g_.vmulps(x, t1, t0);
    }
}

// d = 1 / d in place (d normal and positive here); t scratch. AVX-512: a 14-bit estimate and one Newton step
// (y1 = y0 + y0 (1 - d y0), relative error ~2^-28 before rounding): three pipelined uops where a divide
// issues only once every 10-16 cycles. AVX2 keeps the divide (its 12-bit estimate would need two steps).
void VectorMath::reciprocal(const Xmm& d, const Xmm& t) {
    if (!avx512_) {
        g_.vmovups(t, c_(1.0f));
        g_.vdivps(d, t, d);
        return;
    }
    if (d.isZMM()) zmm_op(g_, kZmmRcp14, t.getIdx(), 0, d.getIdx());  // y0
    else g_.vrcp14ps(t, d);
    fnmadd213(d, t, 1.0f);                     // e = 1 - d y0
    fmadd213(d, t, t);                         // y1 = e y0 + y0
}

// x = x / (1 + exp(arg)); arg is consumed. x may be infinite or NaN: it only meets one final multiply.
void VectorMath::divide_by_one_plus_exp(const Xmm& x, const Xmm& arg, const Xmm& t0, const Xmm& t1) {
    exp(arg, t0, t1);
    add(arg, arg, 1.0f);
    if (avx512_) {
        reciprocal(arg, t0);
        mul(x, x, arg);
    } else {
        g_.vdivps(x, x, arg);
    }
}

void VectorMath::apply(Activation act, const Xmm& x, const Xmm& t0, const Xmm& t1, const Xmm& t2) {
    switch (act) {
        case Activation::none:
            return;
        case Activation::relu:
            // max(0, x) with x as the second source: MAXPS returns the second source when either is NaN,
            // so NaN propagates instead of turning into 0.
            g_.vxorps(t0, t0, t0);
            g_.vmaxps(x, t0, x);
            return;
        case Activation::silu:  // x * sigmoid(x) = x / (1 + exp(-x))
            xor_bits(t0, x, 0x80000000u);
            divide_by_one_plus_exp(x, t0, t1, t2);
            return;
        case Activation::gelu_tanh: {
            // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3)
            const float s = 0.7978845608028654f;  // sqrt(2/pi)
            mul(t0, x, x);
            load(t1, -2.0f * s * 0.044715f);
            fmadd213(t0, t1, -2.0f * s);  // t0 = -2s(1 + 0.044715 x^2)
            mul(t0, t0, x);               // t0 = -2u
            divide_by_one_plus_exp(x, t0, t1, t2);
            return;
        }
        case Activation::gelu_erf: {
            // 0.5 x (1 + erf(z)), z = x / sqrt(2). With q = erfc(|z|) ~ t*P(t)*exp(-z^2), t = 1/(1 + p|z|):
            // 1 + erf(z) = 2 - q for z >= 0, q for z < 0. P has degree 7, fitted to erfc's relative error (below
            // 5e-7 evaluated in f32 on |z| <= 8.84): in the negative tail q is the result, where Abramowitz &
            // Stegun 7.1.26's 4 degrees (absolute error 1.5e-7) were off by 1.6e-3 at x = -5 and 3% at x = -12.
            // What is left there is exp(-z^2)'s argument rounding (~6e-8 z^2: 1e-5 at x = -12.5).
            // |x| is clamped to 12.5 inside q (q >= 8e-36 stays normal: no denormal assists); past it the
            // result is 0.5 x q(12.5), within 1e-35 |x| of the true value.
            const float p = 0.327f * 0.70710678118654752f;
            const float x_max = 12.5f;
            and_bits(t0, x, 0x7fffffffu);
            min(t0, t0, x_max);                     // a = min(|x|, 12.5) (NaN x: 12.5, and x carries the NaN)
            mul(t0, t0, t0);
            mul(t0, t0, -0.5f);                     // -z^2
            exp(t0, t1, t2);                        // t0 = exp(-z^2)
            and_bits(t1, x, 0x7fffffffu);
            min(t1, t1, x_max);
            mul(t1, t1, p);
            add(t1, t1, 1.0f);                      // 1 + p|z|
            reciprocal(t1, t2);                     // t
            load(t2, -1.444827576e-01f);
            fmadd213(t2, t1, 5.141097835e-01f);
            fmadd213(t2, t1, -4.345227374e-01f);
            fmadd213(t2, t1, 4.787275510e-01f);
            fmadd213(t2, t1, 1.205849413e-02f);
            fmadd213(t2, t1, 2.096027096e-01f);
            fmadd213(t2, t1, 1.797430284e-01f);
            fmadd213(t2, t1, 1.847640136e-01f);
            mul(t2, t2, t1);
            mul(t0, t0, t2);                        // q = erfc(|z|)
            load(t1, 2.0f);
            g_.vsubps(t1, t1, t0);                  // 2 - q
            if (avx512_) {
                g_.vpmovd2m(g_.k2, x);              // lanes where x < 0 (sign bit)
                g_.vblendmps(t0 | g_.k2, t1, t0);   // x < 0 ? q : 2 - q
            } else {
                g_.vblendvps(t0, t1, t0, x);        // sign of x selects q
            }
            mul(x, x, t0);
            mul(x, x, 0.5f);
            return;
        }
    }
}

}  // namespace jitmm::x86
