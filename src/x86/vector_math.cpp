#include "x86/vector_math.hpp"

#include <cstring>

namespace jitmm::x86 {

using Xbyak::Xmm;

Xbyak::Address ConstantPool::operator()(float value) {
    uint32_t pattern;
    std::memcpy(&pattern, &value, sizeof pattern);
    return bits(pattern);
}

Xbyak::Address ConstantPool::bits(uint32_t pattern) { return gen_.ptr[gen_.rip + labels_[pattern]]; }

void ConstantPool::emit() {
    if (labels_.empty()) return;
    gen_.align(64);
    for (auto& [pattern, label] : labels_) {
        gen_.L(label);
        for (int lane = 0; lane < 16; ++lane) gen_.dd(pattern);  // 64 bytes: a zmm (or the low ymm) load
    }
}

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
    g_.vminps(x, x, c_(80.0f));
    g_.vmaxps(x, x, c_(-86.0f));
    g_.vmovups(t0, c_(round_magic));
    g_.vfmadd231ps(t0, x, c_(1.44269504088896341f));
    g_.vsubps(t0, t0, c_(round_magic));                      // n
    g_.vfnmadd231ps(x, t0, c_(0.693145751953125f));       // ln2, high part (exact in f32 times n)
    g_.vfnmadd231ps(x, t0, c_(1.42860682030941723212e-6f)); // ln2, low part
    g_.vmovups(t1, c_(1.0f / 720));
    g_.vfmadd213ps(t1, x, c_(1.0f / 120));
    g_.vfmadd213ps(t1, x, c_(1.0f / 24));
    g_.vfmadd213ps(t1, x, c_(1.0f / 6));
    g_.vfmadd213ps(t1, x, c_(0.5f));
    g_.vfmadd213ps(t1, x, c_(1.0f));
    g_.vfmadd213ps(t1, x, c_(1.0f));
    if (avx512_) {
        g_.vscalefps(x, t1, t0);
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
    g_.vrcp14ps(t, d);                         // y0
    g_.vfnmadd213ps(d, t, c_(1.0f));           // e = 1 - d y0
    g_.vfmadd213ps(d, t, t);                   // y1 = e y0 + y0
}

// x = x / (1 + exp(arg)); arg is consumed. x may be infinite or NaN: it only meets one final multiply.
void VectorMath::divide_by_one_plus_exp(const Xmm& x, const Xmm& arg, const Xmm& t0, const Xmm& t1) {
    exp(arg, t0, t1);
    g_.vaddps(arg, arg, c_(1.0f));
    if (avx512_) {
        reciprocal(arg, t0);
        g_.vmulps(x, x, arg);
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
            g_.vxorps(t0, x, c_.bits(0x80000000u));
            divide_by_one_plus_exp(x, t0, t1, t2);
            return;
        case Activation::gelu_tanh: {
            // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3)
            const float s = 0.7978845608028654f;  // sqrt(2/pi)
            g_.vmulps(t0, x, x);
            g_.vmovups(t1, c_(-2.0f * s * 0.044715f));
            g_.vfmadd213ps(t0, t1, c_(-2.0f * s));  // t0 = -2s(1 + 0.044715 x^2)
            g_.vmulps(t0, t0, x);                   // t0 = -2u
            divide_by_one_plus_exp(x, t0, t1, t2);
            return;
        }
        case Activation::gelu_erf: {
            // 0.5 x (1 + erf(z)), z = x / sqrt(2). With q = erfc(|z|) ~ t*P(t)*exp(-z^2), t = 1/(1 + p|z|)
            // (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7): 1 + erf(z) = 2 - q for z >= 0, q for z < 0.
            // |x| is clamped to 12.5 inside q (q >= 8e-36 stays normal: no denormal assists); past it the
            // result is 0.5 x q(12.5), within 1e-35 |x| of the true value.
            const float p = 0.3275911f * 0.70710678118654752f;
            const float x_max = 12.5f;
            g_.vandps(t0, x, c_.bits(0x7fffffffu));
            g_.vminps(t0, t0, c_(x_max));           // a = min(|x|, 12.5) (NaN x: 12.5, and x carries the NaN)
            g_.vmulps(t0, t0, t0);
            g_.vmulps(t0, t0, c_(-0.5f));           // -z^2
            exp(t0, t1, t2);                        // t0 = exp(-z^2)
            g_.vandps(t1, x, c_.bits(0x7fffffffu));
            g_.vminps(t1, t1, c_(x_max));
            g_.vmulps(t1, t1, c_(p));
            g_.vaddps(t1, t1, c_(1.0f));            // 1 + p|z|
            reciprocal(t1, t2);                     // t
            g_.vmovups(t2, c_(1.061405429f));
            g_.vfmadd213ps(t2, t1, c_(-1.453152027f));
            g_.vfmadd213ps(t2, t1, c_(1.421413741f));
            g_.vfmadd213ps(t2, t1, c_(-0.284496736f));
            g_.vfmadd213ps(t2, t1, c_(0.254829592f));
            g_.vmulps(t2, t2, t1);
            g_.vmulps(t0, t0, t2);                  // q = erfc(|z|)
            g_.vmovups(t1, c_(2.0f));
            g_.vsubps(t1, t1, t0);                  // 2 - q
            if (avx512_) {
                g_.vpmovd2m(g_.k2, x);              // lanes where x < 0 (sign bit)
                g_.vblendmps(t0 | g_.k2, t1, t0);   // x < 0 ? q : 2 - q
            } else {
                g_.vblendvps(t0, t1, t0, x);        // sign of x selects q
            }
            g_.vmulps(x, x, t0);
            g_.vmulps(x, x, c_(0.5f));
            return;
        }
    }
}

}  // namespace jitmm::x86
