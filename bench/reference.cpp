#include "reference.hpp"

#include "core/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

namespace jitmm::bench {
namespace {

uint32_t float_bits(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    return bits;
}

float bits_float(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
}

}  // namespace

// IEEE binary16, round to nearest even, overflow to infinity.
uint16_t f32_to_f16(float value) {
    uint32_t x = float_bits(value);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to infinity
    if (x < 0x38800000u) {
        // Below the smallest normal (2^-14): a multiple of 2^-24; scaling by 2^24 is exact and
        // nearbyint rounds to even. 0x400 (the smallest normal) comes out right by itself.
        const float scaled = bits_float(x) * 16777216.0f;
        return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
    }
    const uint32_t exponent = (x >> 23) - 127 + 15;
    const uint32_t mantissa = x & 0x7fffffu;
    uint32_t h = (exponent << 10) | (mantissa >> 13);
    const uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is correct
    return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0) {
        const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
    return bits_float(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t f32_to_bf16(float value) {
    const uint32_t x = float_bits(value);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bf16_to_f32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

namespace {

// FP8 (OCP): e4m3 has no infinity (S.1111.111 is NaN, max 448); e5m2 is IEEE-like (S.11111.00 is inf).
struct Fp8Format {
    int exponent_bits, mantissa_bits, bias;
    bool ieee_specials;  // true for e5m2
};
constexpr Fp8Format kE4M3{4, 3, 7, false};
constexpr Fp8Format kE5M2{5, 2, 15, true};

double fp8_to_double(uint8_t bits, const Fp8Format& f) {
    const bool negative = (bits & 0x80u) != 0;
    const int exponent = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
    const int mantissa = bits & ((1 << f.mantissa_bits) - 1);
    const int max_exponent = (1 << f.exponent_bits) - 1;
    double magnitude;
    if (f.ieee_specials && exponent == max_exponent) {
        magnitude = mantissa == 0 ? HUGE_VAL : NAN;
    } else if (!f.ieee_specials && exponent == max_exponent && mantissa == (1 << f.mantissa_bits) - 1) {
        magnitude = NAN;
    } else if (exponent == 0) {
        magnitude = std::ldexp(mantissa, 1 - f.bias - f.mantissa_bits);
    } else {
        magnitude = std::ldexp((1 << f.mantissa_bits) + mantissa, exponent - f.bias - f.mantissa_bits);
    }
    return negative ? -magnitude : magnitude;
}

// Nearest finite FP8 value (ties to the even code), saturating. Only used to fill inputs, so a binary
// search over the 128 decoded magnitudes is plenty.
class Fp8Encoder {
public:
    explicit Fp8Encoder(const Fp8Format& format) {
        for (int code = 0; code < 128; ++code) {
            const double v = fp8_to_double(static_cast<uint8_t>(code), format);
            if (std::isfinite(v)) magnitudes_.push_back(v);  // increasing with the code
        }
    }
    uint8_t encode(double value) const {
        const double a = std::fabs(value);
        size_t hi =
            static_cast<size_t>(std::lower_bound(magnitudes_.begin(), magnitudes_.end(), a) - magnitudes_.begin());
        size_t code;
        if (hi == magnitudes_.size()) {
            code = magnitudes_.size() - 1;
        } else if (hi == 0 || magnitudes_[hi] == a) {
            code = hi;
        } else {
            const double up = magnitudes_[hi] - a, down = a - magnitudes_[hi - 1];
            code = up < down ? hi : down < up ? hi - 1 : (hi % 2 == 0 ? hi : hi - 1);
        }
        return static_cast<uint8_t>(code | (std::signbit(value) ? 0x80u : 0u));
    }

private:
    std::vector<double> magnitudes_;
};

const Fp8Encoder& fp8_encoder(jitmm_dtype t) {
    static const Fp8Encoder e4m3(kE4M3), e5m2(kE5M2);
    return t == JITMM_DTYPE_F8_E4M3 ? e4m3 : e5m2;
}

}  // namespace

bool is_float_type(jitmm_dtype t) { return t != JITMM_DTYPE_S8 && t != JITMM_DTYPE_U8 && t != JITMM_DTYPE_S32; }

void decode(jitmm_dtype t, const void* base, int64_t start, int64_t step, int64_t count, double* out) {
    switch (t) {
        case JITMM_DTYPE_F32: {
            const float* p = static_cast<const float*>(base) + start;
            for (int64_t i = 0; i < count; ++i) out[i] = p[i * step];
            break;
        }
        case JITMM_DTYPE_F16: {
            const uint16_t* p = static_cast<const uint16_t*>(base) + start;
            for (int64_t i = 0; i < count; ++i) out[i] = f16_to_f32(p[i * step]);
            break;
        }
        case JITMM_DTYPE_BF16: {
            const uint16_t* p = static_cast<const uint16_t*>(base) + start;
            for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_f32(p[i * step]);
            break;
        }
        case JITMM_DTYPE_S8: {
            const int8_t* p = static_cast<const int8_t*>(base) + start;
            for (int64_t i = 0; i < count; ++i) out[i] = p[i * step];
            break;
        }
        case JITMM_DTYPE_U8: {
            const uint8_t* p = static_cast<const uint8_t*>(base) + start;
            for (int64_t i = 0; i < count; ++i) out[i] = p[i * step];
            break;
        }
        case JITMM_DTYPE_S32: {
            const int32_t* p = static_cast<const int32_t*>(base) + start;
            for (int64_t i = 0; i < count; ++i) out[i] = p[i * step];
            break;
        }
        case JITMM_DTYPE_F8_E4M3:
        case JITMM_DTYPE_F8_E5M2: {
            const uint8_t* p = static_cast<const uint8_t*>(base) + start;
            const Fp8Format& f = t == JITMM_DTYPE_F8_E4M3 ? kE4M3 : kE5M2;
            for (int64_t i = 0; i < count; ++i) out[i] = fp8_to_double(p[i * step], f);
            break;
        }
    }
}


void fill_random(jitmm_dtype t, void* data, int64_t count, Random& rng) {
    for (int64_t i = 0; i < count; ++i) {
        const double u = rng.uniform();
        switch (t) {
            case JITMM_DTYPE_F32: static_cast<float*>(data)[i] = static_cast<float>(u); break;
            case JITMM_DTYPE_F16: static_cast<uint16_t*>(data)[i] = f32_to_f16(static_cast<float>(u)); break;
            case JITMM_DTYPE_BF16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(static_cast<float>(u)); break;
            case JITMM_DTYPE_S8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(std::lround(u * 64)); break;
            case JITMM_DTYPE_U8:
                static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(std::lround((u + 1) * 64));
                break;
            case JITMM_DTYPE_S32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(std::lround(u * 64)); break;
            case JITMM_DTYPE_F8_E4M3:
            case JITMM_DTYPE_F8_E5M2:  // j/4, |j| <= 8: exact in both formats, so encode() does not round
                static_cast<uint8_t*>(data)[i] = fp8_encoder(t).encode(static_cast<double>(std::lround(u * 8)) / 4);
                break;
        }
    }
}

void fill_scales(float* data, int64_t count, Random& rng) {
    for (int64_t i = 0; i < count; ++i) data[i] = static_cast<float>(1 + rng.next() % 12) / 4.0f;
}

int64_t scale_count(jitmm_scale_mode mode, int64_t m, int64_t n, int64_t k, bool is_a) {
    switch (mode) {
        case JITMM_SCALE_NONE: return 0;
        case JITMM_SCALE_PER_TENSOR: return 1;
        case JITMM_SCALE_PER_ROW: return m;
        case JITMM_SCALE_PER_COLUMN: return n;
        case JITMM_SCALE_PER_BLOCK_128: return (is_a ? m : (n + 127) / 128) * ((k + 127) / 128);
    }
    return 0;
}

const char* scale_mode_str(jitmm_scale_mode mode) {
    switch (mode) {
        case JITMM_SCALE_NONE: return "none";
        case JITMM_SCALE_PER_TENSOR: return "tensor";
        case JITMM_SCALE_PER_ROW: return "row";
        case JITMM_SCALE_PER_COLUMN: return "column";
        case JITMM_SCALE_PER_BLOCK_128: return "block";
    }
    return "?";
}

// What beta == 0 must never read: NaN for float types, a garbage pattern for integers.
void fill_poison(jitmm_dtype t, void* data, int64_t count) {
    switch (t) {
        case JITMM_DTYPE_F32: std::fill_n(static_cast<float*>(data), count, NAN); break;
        case JITMM_DTYPE_F16: std::fill_n(static_cast<uint16_t*>(data), count, uint16_t{0x7e00}); break;
        case JITMM_DTYPE_BF16: std::fill_n(static_cast<uint16_t*>(data), count, uint16_t{0x7fc0}); break;
        case JITMM_DTYPE_F8_E4M3: std::fill_n(static_cast<uint8_t*>(data), count, uint8_t{0x7f}); break;
        case JITMM_DTYPE_F8_E5M2: std::fill_n(static_cast<uint8_t*>(data), count, uint8_t{0x7e}); break;
        case JITMM_DTYPE_S8:
        case JITMM_DTYPE_U8:
        case JITMM_DTYPE_S32: std::memset(data, 0x5a, static_cast<size_t>(count * dtype_size(t))); break;
    }
}

int64_t Operand::bytes() const { return elements * dtype_size(type); }

namespace {

Operand make_operand(jitmm_dtype type, int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch) {
    Operand op{type, rows, cols, ld > 0 ? ld : cols, stride, 0};
    op.elements = (batch - 1) * stride + (rows - 1) * op.ld + cols;
    return op;
}

}  // namespace

Operand operand_a(const jitmm_matmul_desc& d) {
    return d.trans_a ? make_operand(d.a_type, d.k, d.m, d.lda, d.stride_a, d.batch_count)
                     : make_operand(d.a_type, d.m, d.k, d.lda, d.stride_a, d.batch_count);
}
Operand operand_b(const jitmm_matmul_desc& d) {
    return d.trans_b ? make_operand(d.b_type, d.n, d.k, d.ldb, d.stride_b, d.batch_count)
                     : make_operand(d.b_type, d.k, d.n, d.ldb, d.stride_b, d.batch_count);
}
Operand operand_c(const jitmm_matmul_desc& d) {
    return make_operand(d.c_type, d.m, d.n, d.ldc, d.stride_c, d.batch_count);
}

bool epilogue_has_bias(jitmm_epilogue e) {
    return e == JITMM_EPILOGUE_BIAS || e == JITMM_EPILOGUE_BIAS_RELU || e == JITMM_EPILOGUE_BIAS_GELU_TANH ||
           e == JITMM_EPILOGUE_BIAS_GELU_ERF || e == JITMM_EPILOGUE_BIAS_SILU;
}


double activate(jitmm_epilogue e, double x) {
    switch (e) {
        case JITMM_EPILOGUE_RELU:
        case JITMM_EPILOGUE_BIAS_RELU: return x > 0 ? x : 0.0;
        case JITMM_EPILOGUE_GELU_TANH:
        case JITMM_EPILOGUE_BIAS_GELU_TANH: {
            const double sqrt_2_over_pi = 0.79788456080286535588;
            // 0.5 x (1 + tanh(u)) as x / (1 + exp(-2u)): 1 + tanh(u) cancels to nothing in double once u < -18.
            return x / (1.0 + std::exp(-2.0 * sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
        }
        case JITMM_EPILOGUE_GELU_ERF:
        case JITMM_EPILOGUE_BIAS_GELU_ERF: return 0.5 * x * std::erfc(-x * 0.70710678118654752440);  // = 1 + erf, no cancellation
        case JITMM_EPILOGUE_SILU:
        case JITMM_EPILOGUE_BIAS_SILU: return x / (1.0 + std::exp(-x));
        case JITMM_EPILOGUE_NONE:
        case JITMM_EPILOGUE_BIAS: return x;
    }
    return x;
}

namespace {

struct ErrorSums {
    double max_abs = 0.0, diff2 = 0.0, ref2 = 0.0;
    bool nan = false;
    void add(const ErrorSums& o) {
        max_abs = std::max(max_abs, o.max_abs);
        diff2 += o.diff2;
        ref2 += o.ref2;
        nan = nan || o.nan;
    }
};

// Rows [row_begin, row_end) of one batch. B is decoded one panel of columns at a time (K x kPanel
// doubles) and four rows share each panel load, which keeps the reference a few GFLOP/s.
ErrorSums reference_rows(const CheckInputs& in, int64_t batch, int64_t row_begin, int64_t row_end) {
    constexpr int64_t kPanel = 64, kRows = 4;
    const jitmm_matmul_desc& d = *in.desc;
    const Operand oa = operand_a(d), ob = operand_b(d), oc = operand_c(d);
    const int64_t a_base = batch * oa.stride, b_base = batch * ob.stride, c_base = batch * oc.stride;
    const int64_t k = d.k;
    std::vector<double> panel(static_cast<size_t>(k * kPanel)), arows(static_cast<size_t>(k * kRows));
    std::vector<double> acc(static_cast<size_t>(kRows * kPanel)), crow(kPanel), c0row(kPanel), bias(kPanel);
    ErrorSums sums;
    const bool has_bias = epilogue_has_bias(d.epilogue);
    // sa(i) * sb(j); 1 without scales. Per-row A scales index rows of C, per-column B scales its columns
    // (a per-row mode on B or per-column on A is rejected by the library, so only these are read).
    auto scale_of = [](jitmm_scale_mode mode, const float* s, int64_t index) {
        if (mode == JITMM_SCALE_NONE || mode == JITMM_SCALE_PER_BLOCK_128 || s == nullptr) return 1.0;
        return static_cast<double>(mode == JITMM_SCALE_PER_TENSOR ? s[0] : s[index]);
    };
    // Per-block scales weigh each product by its K block's sa[i][kb] * sb[j / 128][kb]; a 64-column panel
    // lies inside one 128-column block of B's scales.
    const bool block_scales = d.a_scale_mode == JITMM_SCALE_PER_BLOCK_128 && in.a_scales && in.b_scales;
    const int64_t k_blocks = (k + 127) / 128;
    for (int64_t j0 = 0; j0 < d.n; j0 += kPanel) {
        const int64_t nb = std::min(kPanel, d.n - j0);
        for (int64_t p = 0; p < k; ++p) {  // op(B)(p, j) for j in [j0, j0+nb)
            if (d.trans_b)
                decode(ob.type, in.b, b_base + j0 * ob.ld + p, ob.ld, nb, &panel[p * kPanel]);
            else
                decode(ob.type, in.b, b_base + p * ob.ld + j0, 1, nb, &panel[p * kPanel]);
        }
        for (int64_t i0 = row_begin; i0 < row_end; i0 += kRows) {
            const int64_t mb = std::min(kRows, row_end - i0);
            for (int64_t r = 0; r < mb; ++r) {  // op(A)(i, p) for p in [0, K)
                const int64_t i = i0 + r;
                if (d.trans_a)
                    decode(oa.type, in.a, a_base + i, oa.ld, k, &arows[r * k]);
                else
                    decode(oa.type, in.a, a_base + i * oa.ld, 1, k, &arows[r * k]);
            }
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t p = 0; p < k; ++p) {
                const double* bp = &panel[p * kPanel];
                for (int64_t r = 0; r < mb; ++r) {
                    double a = arows[r * k + p];
                    if (block_scales)
                        a *= double(in.a_scales[(i0 + r) * k_blocks + p / 128]) *
                             double(in.b_scales[(j0 / 128) * k_blocks + p / 128]);
                    double* out = &acc[r * kPanel];
                    for (int64_t j = 0; j < nb; ++j) out[j] += a * bp[j];
                }
            }
            for (int64_t r = 0; r < mb; ++r) {
                const int64_t i = i0 + r;
                decode(oc.type, in.c, c_base + i * oc.ld + j0, 1, nb, crow.data());
                if (d.beta != 0.0f) decode(oc.type, in.c0, c_base + i * oc.ld + j0, 1, nb, c0row.data());
                if (has_bias) {
                    if (d.bias_layout == JITMM_BIAS_PER_ROW)
                        decode(d.bias_type, in.bias, i, 0, nb, bias.data());
                    else
                        decode(d.bias_type, in.bias, j0, 1, nb, bias.data());
                }
                const double sa = scale_of(d.a_scale_mode, in.a_scales, i);
                for (int64_t j = 0; j < nb; ++j) {
                    const double sb = scale_of(d.b_scale_mode, in.b_scales, j0 + j);
                    double v = static_cast<double>(d.alpha) * sa * sb * acc[r * kPanel + j];
                    if (d.beta != 0.0f) v += static_cast<double>(d.beta) * c0row[j];
                    if (has_bias) v += bias[j];
                    v = activate(d.epilogue, v);
                    const double got = crow[j];
                    if (std::isnan(got) || std::isinf(got)) {
                        sums.nan = true;
                        continue;
                    }
                    const double diff = got - v;
                    sums.max_abs = std::max(sums.max_abs, std::fabs(diff));
                    sums.diff2 += diff * diff;
                    sums.ref2 += v * v;
                }
            }
        }
    }
    return sums;
}

}  // namespace


// Relative Frobenius bounds (DESIGN.md "Numerics"): f32 1e-5*sqrt(K), as tf32 5e-3; f16/bf16 inputs 1e-2; fp8 6e-2;
// integers exact when the result is an exact integer (s32 out, alpha 1, beta 0 or 1, no activation).
// A narrow C type adds its own rounding.
double error_bound(const jitmm_matmul_desc& d, bool tf32) {
    auto narrowest = [&](jitmm_dtype t) {
        switch (t) {
            case JITMM_DTYPE_F8_E4M3:
            case JITMM_DTYPE_F8_E5M2: return 6e-2;
            case JITMM_DTYPE_F16:
            case JITMM_DTYPE_BF16: return 1e-2;
            case JITMM_DTYPE_F32: return tf32 ? 5e-3 : 1e-5 * std::sqrt(static_cast<double>(d.k));
            case JITMM_DTYPE_S8:
            case JITMM_DTYPE_U8:
            case JITMM_DTYPE_S32: return 0.0;
        }
        return 0.0;
    };
    double bound = std::max(narrowest(d.a_type), narrowest(d.b_type));
    const bool int_inputs = !is_float_type(d.a_type) && !is_float_type(d.b_type);
    if (int_inputs) {
        const bool exact = d.c_type == JITMM_DTYPE_S32 && d.alpha == 1.0f && (d.beta == 0.0f || d.beta == 1.0f) &&
                           (d.epilogue == JITMM_EPILOGUE_NONE || d.epilogue == JITMM_EPILOGUE_RELU);
        if (!exact) bound = 1e-5 * std::sqrt(static_cast<double>(d.k));
    }
    switch (d.c_type) {
        case JITMM_DTYPE_F16: bound = std::max(bound, 1e-3); break;
        case JITMM_DTYPE_BF16: bound = std::max(bound, 1e-2); break;
        case JITMM_DTYPE_F8_E4M3:
        case JITMM_DTYPE_F8_E5M2: bound = std::max(bound, 6e-2); break;
        case JITMM_DTYPE_S8:
        case JITMM_DTYPE_U8: bound = std::max(bound, 1e-2); break;
        default: break;
    }
    return bound;
}

CheckResult check_against_reference(const CheckInputs& in) {
    const jitmm_matmul_desc& d = *in.desc;
    std::vector<int64_t> batches = {0};
    if (d.batch_count > 1) batches.push_back(d.batch_count - 1);  // a wrong batch stride shows here
    const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(), (d.m + 3) / 4));
    ErrorSums total;
    for (int64_t batch : batches) {
        std::vector<ErrorSums> parts(static_cast<size_t>(threads));
        std::vector<std::thread> workers;
        const int64_t rows_per = (d.m + threads - 1) / threads;
        for (int64_t t = 0; t < threads; ++t) {
            const int64_t begin = t * rows_per, end = std::min(d.m, begin + rows_per);
            if (begin >= end) continue;
            workers.emplace_back([&, t, begin, end] { parts[t] = reference_rows(in, batch, begin, end); });
        }
        for (std::thread& w : workers) w.join();
        for (const ErrorSums& p : parts) total.add(p);
    }
    CheckResult r;
    r.bound = error_bound(d, in.tf32);
    if (total.nan) {
        r.max_abs_err = r.rel_err = NAN;
        r.ok = false;
        return r;
    }
    r.max_abs_err = total.max_abs;
    r.rel_err = total.ref2 > 0 ? std::sqrt(total.diff2 / total.ref2) : std::sqrt(total.diff2);
    r.ok = r.rel_err <= r.bound;
    return r;
}


}  // namespace jitmm::bench
