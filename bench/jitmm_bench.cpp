// jitmm-bench: the microbenchmark. For each shape (from flags or a shape file): JIT time of the first
// kernel_create, cache-hit lookup time, median run time and GFLOP/s, and with --check the error against a
// float64 reference. Text table or one JSON array on stdout.
//
// Method (kept simple on purpose, so the numbers are easy to reason about):
//   - One engine per device string for the whole run; the first kernel_create of a shape is timed with
//     steady_clock (jit_us; gen_us is what the kernel itself reports as generation time, 0 on a disk hit).
//   - Cache hit: 100 groups of 10 kernel_create + kernel_release calls; hit_ns is the median group / 10.
//   - Runs: a warm-up (one run, then more until 10% of --min-time-ms), then at least --repeats runs and
//     until --min-time-ms of run time; each run is timed on its own and median_us is the median.
//   - Inputs are uniform random in [-1,1] (integers: small random integers) from a fixed-seed PRNG.
//     A problem whose A+B exceeds the per-core L2 is a "large" problem: it rotates over enough copies of
//     A and B that the working set is twice the last-level cache, capped at 256 MiB of copies, so that
//     repeated runs do not time a cache-resident weight matrix that a real model would stream from DRAM.
//     Small problems run cache-hot, as they do in a tight inference loop.
//   - --check runs once on fresh inputs with C poisoned (NaN, or a garbage pattern for integer C) when
//     beta == 0, and compares batch 0 (and the last batch) with a float64 reference.
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/shape_csv.hpp"
#include "hw/cpu.hpp"

#include <jitmm/jitmm.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace jitmm::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double median(std::vector<double> values) {
    if (values.empty()) return 0.0;
    const size_t mid = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
    double upper = values[mid];
    if (values.size() % 2 == 1) return upper;
    const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
    return 0.5 * (lower + upper);
}

std::string status_message(jitmm_status status) {
    // Read the thread's detail right away: the next jitmm call replaces it.
    const std::string detail = jitmm_last_error_message();
    std::string text = jitmm_status_string(status);
    if (!detail.empty()) text += ": " + detail;
    return text;
}

// ---------------------------------------------------------------------------------------------------
// Element conversions. Written here (not taken from the library) so the reference does not share a bug
// with the code it checks.

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

bool is_float_type(jitmm_dtype t) { return t != JITMM_DTYPE_S8 && t != JITMM_DTYPE_U8 && t != JITMM_DTYPE_S32; }

// Reads count elements of type t at base[start + i*step] as doubles.
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

// ---------------------------------------------------------------------------------------------------
// Inputs: a fixed-seed PRNG (splitmix64: tiny, and the same numbers on every standard library).

class Random {
public:
    explicit Random(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0; }  // [-1, 1)

private:
    uint64_t state_;
};

// Floats uniform in [-1,1]; integers in [-64,64] (u8: [0,128]) so s8 x u8 sums stay far from s32 limits.
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
            case JITMM_DTYPE_F8_E5M2: static_cast<uint8_t*>(data)[i] = fp8_encoder(t).encode(u); break;
        }
    }
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

// 64-byte aligned host memory.
class HostBuffer {
public:
    HostBuffer() = default;
    explicit HostBuffer(size_t bytes) {
        const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
        data_.reset(std::aligned_alloc(64, rounded));
        if (!data_) {
            fail(JITMM_STATUS_OUT_OF_MEMORY, "jitmm-bench: cannot allocate " + std::to_string(bytes) + " bytes");
        }
        bytes_ = bytes;
    }
    void* data() const { return data_.get(); }
    size_t bytes() const { return bytes_; }

private:
    struct Free {
        void operator()(void* p) const { std::free(p); }
    };
    std::unique_ptr<void, Free> data_;
    size_t bytes_ = 0;
};

// ---------------------------------------------------------------------------------------------------
// Layouts: how the desc places each matrix in memory (leading dims of 0 mean tightly packed).

struct Operand {
    jitmm_dtype type;
    int64_t rows, cols;  // as stored
    int64_t ld;
    int64_t stride;    // between batches (0: one matrix shared by every batch)
    int64_t elements;  // extent of all batches, in elements
    int64_t bytes() const { return elements * dtype_size(type); }
};

Operand make_operand(jitmm_dtype type, int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch) {
    Operand op{type, rows, cols, ld > 0 ? ld : cols, stride, 0};
    op.elements = (batch - 1) * stride + (rows - 1) * op.ld + cols;
    return op;
}

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

// ---------------------------------------------------------------------------------------------------
// The float64 reference: C = act(alpha * op(A) op(B) + beta * C0 + bias), compared as it is computed.

double activate(jitmm_epilogue e, double x) {
    switch (e) {
        case JITMM_EPILOGUE_RELU:
        case JITMM_EPILOGUE_BIAS_RELU: return x > 0 ? x : 0.0;
        case JITMM_EPILOGUE_GELU_TANH:
        case JITMM_EPILOGUE_BIAS_GELU_TANH: {
            const double sqrt_2_over_pi = 0.79788456080286535588;
            return 0.5 * x * (1.0 + std::tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
        }
        case JITMM_EPILOGUE_GELU_ERF:
        case JITMM_EPILOGUE_BIAS_GELU_ERF: return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440));
        case JITMM_EPILOGUE_SILU:
        case JITMM_EPILOGUE_BIAS_SILU: return x / (1.0 + std::exp(-x));
        case JITMM_EPILOGUE_NONE:
        case JITMM_EPILOGUE_BIAS: return x;
    }
    return x;
}

struct CheckInputs {
    const jitmm_matmul_desc* desc;
    const void* a;
    const void* b;
    const void* c0;    // C before the run (read only when beta != 0)
    const void* c;     // C after the run
    const void* bias;  // nullptr without a bias epilogue
};

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
                    const double a = arows[r * k + p];
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
                for (int64_t j = 0; j < nb; ++j) {
                    double v = static_cast<double>(d.alpha) * acc[r * kPanel + j];
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

struct CheckResult {
    double max_abs_err = 0.0, rel_err = 0.0, bound = 0.0;
    bool ok = false;
};

// Relative Frobenius bounds (DESIGN.md "Numerics"): f32 1e-5*sqrt(K); f16/bf16 inputs 1e-2; fp8 6e-2;
// integers exact when the result is an exact integer (s32 out, alpha 1, beta 0 or 1, no activation).
// A narrow C type adds its own rounding.
double error_bound(const jitmm_matmul_desc& d) {
    auto narrowest = [&](jitmm_dtype t) {
        switch (t) {
            case JITMM_DTYPE_F8_E4M3:
            case JITMM_DTYPE_F8_E5M2: return 6e-2;
            case JITMM_DTYPE_F16:
            case JITMM_DTYPE_BF16: return 1e-2;
            case JITMM_DTYPE_F32: return 1e-5 * std::sqrt(static_cast<double>(d.k));
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
    r.bound = error_bound(d);
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

// ---------------------------------------------------------------------------------------------------
// Peers: another library timed on the same problem in the same run (ratio_vs_<name> columns). None is
// built in yet; oneDNN/OpenBLAS/LIBXSMM (CPU) and cuBLAS (GPU) implement this and register below.

struct TimingPolicy {
    int repeats = 5;
    double min_time_s = 0.2;
};

class Peer {
public:
    virtual ~Peer() = default;
    virtual const char* name() const = 0;
    // Whether this peer can run desc on device; when not, *why says so (shown in the ratio cell's place).
    virtual bool available(const jitmm_matmul_desc& desc, const std::string& device, std::string* why) const = 0;
    // Median seconds per call of the same problem under the same policy (own buffers). Throws jitmm::Error.
    virtual double time_seconds(const jitmm_matmul_desc& desc, const std::string& device,
                                const TimingPolicy& policy) = 0;
};

struct PeerEntry {
    const char* name;
    std::unique_ptr<Peer> (*create)();
};

const std::vector<PeerEntry>& peer_registry() {
    static const std::vector<PeerEntry> peers;  // none yet
    return peers;
}

// ---------------------------------------------------------------------------------------------------
// Command line.

struct Options {
    std::vector<ShapeRow> shapes;
    std::string device = "cpu";
    int32_t threads = 0;
    TimingPolicy timing;
    bool check = false;
    bool json = false;
    std::vector<std::string> peers;
};

class UsageError : public std::exception {
public:
    explicit UsageError(std::string message) : message_(std::move(message)) {}
    const char* what() const noexcept override { return message_.c_str(); }

private:
    std::string message_;
};

const char* kUsage =
    "usage: jitmm-bench --m M --n N --k K [shape options] [run options]\n"
    "       jitmm-bench --shapes FILE [run options]\n"
    "\n"
    "shape options (C[M,N] = act(alpha * op(A) op(B) + beta * C + bias), row-major):\n"
    "  --m M --n N --k K          problem size (required without --shapes)\n"
    "  --batch B                  batch count (default 1); batches are packed tightly unless\n"
    "  --stride-a/-b/-c S         give a stride (elements; 0 for A or B shares one matrix)\n"
    "  --dtype T                  a, b and c type: f32 f16 bf16 s8 u8 s32 f8_e4m3 f8_e5m2 (default f32)\n"
    "  --a-type T --b-type T --c-type T --bias-type T\n"
    "  --trans-a --trans-b        op(A) = A^T (A stored K x M), op(B) = B^T (B stored N x K)\n"
    "  --lda X --ldb X --ldc X    leading dimensions (default tight)\n"
    "  --alpha A --beta B         (default 1 and 0)\n"
    "  --epilogue E               none bias relu gelu_tanh gelu_erf silu bias_relu bias_gelu_tanh\n"
    "                             bias_gelu_erf bias_silu\n"
    "  --bias-layout L            column (bias[N], default) or row (bias[M])\n"
    "\n"
    "run options:\n"
    "  --shapes FILE              CSV of shapes (header of desc fields: m,n,k,trans_b,dtype,...;\n"
    "                             a device column overrides --device per row; stride_c 0 with\n"
    "                             batch_count > 1 means tightly packed)\n"
    "  --device D                 cpu (default), cuda, cuda:N\n"
    "  --threads N                engine threads (default: JITMM_NUM_THREADS or physical cores)\n"
    "  --repeats R                at least R timed runs (default 5)\n"
    "  --min-time-ms T            and at least T ms of timed runs (default 200)\n"
    "  --check                    compare with a float64 reference (exit 1 past the bound)\n"
    "  --peer NAME                also time a peer library, column ratio_vs_NAME (peer time / ours)\n"
    "  --json                     one JSON array on stdout, one object per shape\n"
    "  --help\n"
    "\n"
    "exit status: 0 all shapes ran (and passed --check), 1 otherwise, 2 bad usage\n";

int64_t parse_int_arg(const std::string& flag, const std::string& value, int64_t min_value) {
    int64_t v = 0;
    const char* last = value.data() + value.size();
    const auto r = std::from_chars(value.data(), last, v);
    if (value.empty() || r.ec != std::errc() || r.ptr != last) throw UsageError(flag + ": bad integer '" + value + "'");
    if (v < min_value) throw UsageError(flag + ": must be at least " + std::to_string(min_value) + ", got " + value);
    return v;
}

float parse_float_arg(const std::string& flag, const std::string& value) {
    float v = 0;
    const char* last = value.data() + value.size();
    const auto r = std::from_chars(value.data(), last, v);
    if (value.empty() || r.ec != std::errc() || r.ptr != last || !std::isfinite(v)) {
        throw UsageError(flag + ": bad number '" + value + "'");
    }
    return v;
}

jitmm_dtype parse_dtype_arg(const std::string& flag, const std::string& value) {
    jitmm_dtype t;
    if (jitmm_dtype_from_name(value.c_str(), &t) != JITMM_STATUS_SUCCESS) {
        throw UsageError(flag + ": unknown dtype '" + value + "' (f32 f16 bf16 s8 u8 s32 f8_e4m3 f8_e5m2)");
    }
    return t;
}

// Tight batch strides for a desc given on the command line (and stride_c for shape files, where 0 is
// not a valid C stride anyway).
int64_t tight_stride(const Operand& op) { return op.rows * op.ld; }

Options parse_args(int argc, char** argv) {
    Options o;
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    bool have_m = false, have_n = false, have_k = false, any_shape_flag = false;
    bool have_stride[3] = {false, false, false};
    bool have_type[3] = {false, false, false};
    jitmm_dtype all_type = JITMM_DTYPE_F32;
    std::string shapes_path;

    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        std::string value;
        bool inline_value = false;
        const size_t eq = flag.find('=');
        if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = flag.substr(eq + 1);
            flag = flag.substr(0, eq);
            inline_value = true;
        }
        auto take = [&]() -> std::string {
            if (inline_value) return value;
            if (i + 1 >= argc) throw UsageError(flag + ": missing value");
            return argv[++i];
        };
        auto no_value = [&]() {
            if (inline_value) throw UsageError(flag + ": takes no value");
        };
        auto shape_flag = [&]() { any_shape_flag = true; };

        if (flag == "--help" || flag == "-h") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (flag == "--m") {
            shape_flag();
            d.m = parse_int_arg(flag, take(), 1);
            have_m = true;
        } else if (flag == "--n") {
            shape_flag();
            d.n = parse_int_arg(flag, take(), 1);
            have_n = true;
        } else if (flag == "--k") {
            shape_flag();
            d.k = parse_int_arg(flag, take(), 1);
            have_k = true;
        } else if (flag == "--batch") {
            shape_flag();
            d.batch_count = parse_int_arg(flag, take(), 1);
        } else if (flag == "--stride-a") {
            shape_flag();
            d.stride_a = parse_int_arg(flag, take(), 0);
            have_stride[0] = true;
        } else if (flag == "--stride-b") {
            shape_flag();
            d.stride_b = parse_int_arg(flag, take(), 0);
            have_stride[1] = true;
        } else if (flag == "--stride-c") {
            shape_flag();
            d.stride_c = parse_int_arg(flag, take(), 0);
            have_stride[2] = true;
        } else if (flag == "--dtype") {
            shape_flag();
            all_type = parse_dtype_arg(flag, take());
        } else if (flag == "--a-type") {
            shape_flag();
            d.a_type = parse_dtype_arg(flag, take());
            have_type[0] = true;
        } else if (flag == "--b-type") {
            shape_flag();
            d.b_type = parse_dtype_arg(flag, take());
            have_type[1] = true;
        } else if (flag == "--c-type") {
            shape_flag();
            d.c_type = parse_dtype_arg(flag, take());
            have_type[2] = true;
        } else if (flag == "--bias-type") {
            shape_flag();
            d.bias_type = parse_dtype_arg(flag, take());
        } else if (flag == "--trans-a") {
            shape_flag();
            no_value();
            d.trans_a = 1;
        } else if (flag == "--trans-b") {
            shape_flag();
            no_value();
            d.trans_b = 1;
        } else if (flag == "--lda") {
            shape_flag();
            d.lda = parse_int_arg(flag, take(), 0);
        } else if (flag == "--ldb") {
            shape_flag();
            d.ldb = parse_int_arg(flag, take(), 0);
        } else if (flag == "--ldc") {
            shape_flag();
            d.ldc = parse_int_arg(flag, take(), 0);
        } else if (flag == "--alpha") {
            shape_flag();
            d.alpha = parse_float_arg(flag, take());
        } else if (flag == "--beta") {
            shape_flag();
            d.beta = parse_float_arg(flag, take());
        } else if (flag == "--epilogue") {
            shape_flag();
            const std::string v = take();
            if (jitmm_epilogue_from_name(v.c_str(), &d.epilogue) != JITMM_STATUS_SUCCESS) {
                throw UsageError("--epilogue: unknown epilogue '" + v + "'");
            }
        } else if (flag == "--bias-layout") {
            shape_flag();
            const std::string v = take();
            if (v == "column" || v == "per_column")
                d.bias_layout = JITMM_BIAS_PER_COLUMN;
            else if (v == "row" || v == "per_row")
                d.bias_layout = JITMM_BIAS_PER_ROW;
            else
                throw UsageError("--bias-layout: expected column or row, got '" + v + "'");
        } else if (flag == "--device") {
            o.device = take();
            if (o.device.empty()) throw UsageError("--device: empty device");
        } else if (flag == "--threads") {
            o.threads = static_cast<int32_t>(parse_int_arg(flag, take(), 0));
            if (o.threads > 4096) throw UsageError("--threads: at most 4096");
        } else if (flag == "--shapes") {
            shapes_path = take();
        } else if (flag == "--repeats") {
            o.timing.repeats = static_cast<int>(std::min<int64_t>(parse_int_arg(flag, take(), 1), 1 << 30));
        } else if (flag == "--min-time-ms") {
            o.timing.min_time_s = static_cast<double>(parse_int_arg(flag, take(), 0)) / 1000.0;
        } else if (flag == "--check") {
            no_value();
            o.check = true;
        } else if (flag == "--json") {
            no_value();
            o.json = true;
        } else if (flag == "--peer") {
            const std::string name = take();
            bool known = false;
            for (const PeerEntry& p : peer_registry()) known = known || name == p.name;
            if (!known) {
                std::string list;
                for (const PeerEntry& p : peer_registry()) list += std::string(list.empty() ? "" : " ") + p.name;
                throw UsageError("--peer: unknown peer '" + name + "' (this jitmm-bench has " +
                                 (list.empty() ? std::string("none built in yet") : list) + ")");
            }
            o.peers.push_back(name);
        } else {
            throw UsageError("unknown option '" + flag + "' (see --help)");
        }
    }

    if (!shapes_path.empty()) {
        if (any_shape_flag) {
            throw UsageError("--shapes: shape options (--m, --dtype, ...) cannot be combined with a shape file");
        }
        try {
            o.shapes = read_shape_file(shapes_path);
        } catch (const Error& e) {
            throw UsageError(e.what());
        }
        if (o.shapes.empty()) throw UsageError(shapes_path + ": no shapes");
        for (ShapeRow& row : o.shapes) {
            if (row.desc.batch_count > 1 && row.desc.stride_c == 0) {
                row.desc.stride_c = tight_stride(operand_c(row.desc));
            }
        }
        return o;
    }
    if (!have_m || !have_n || !have_k) throw UsageError("--m, --n and --k are required (or --shapes FILE); see --help");
    if (!have_type[0]) d.a_type = all_type;
    if (!have_type[1]) d.b_type = all_type;
    if (!have_type[2]) d.c_type = all_type;
    if (d.batch_count > 1) {
        if (!have_stride[0]) d.stride_a = tight_stride(operand_a(d));
        if (!have_stride[1]) d.stride_b = tight_stride(operand_b(d));
        if (!have_stride[2]) d.stride_c = tight_stride(operand_c(d));
    }
    ShapeRow row;
    row.desc = d;
    row.line = 0;
    o.shapes.push_back(row);
    return o;
}

// ---------------------------------------------------------------------------------------------------
// Engines: one per device string for the whole run.

class EnginePool {
public:
    explicit EnginePool(int32_t threads) : threads_(threads) {}
    ~EnginePool() {
        for (auto& entry : engines_) jitmm_engine_destroy(entry.second.engine);
    }
    EnginePool(const EnginePool&) = delete;
    EnginePool& operator=(const EnginePool&) = delete;

    // The engine for device, or nullptr with *error set (the creation error is remembered).
    jitmm_engine* get(const std::string& device, std::string* error) {
        auto it = engines_.find(device);
        if (it == engines_.end()) {
            Entry entry;
            jitmm_engine_config config;
            jitmm_engine_config_init(&config);
            config.device = device.c_str();
            config.num_threads = threads_;
            const jitmm_status st = jitmm_engine_create(&config, &entry.engine);
            if (st != JITMM_STATUS_SUCCESS) {
                entry.engine = nullptr;
                entry.error = "engine for '" + device + "': " + status_message(st);
            }
            it = engines_.emplace(device, entry).first;
        }
        *error = it->second.error;
        return it->second.engine;
    }

private:
    struct Entry {
        jitmm_engine* engine = nullptr;
        std::string error;
    };
    int32_t threads_;
    std::map<std::string, Entry> engines_;
};

// ---------------------------------------------------------------------------------------------------
// One shape.

struct PeerResult {
    std::string name;
    double ratio = NAN;  // peer seconds / jitmm seconds (> 1: jitmm is faster)
    std::string note;    // why there is no ratio
};

struct ShapeResult {
    jitmm_matmul_desc desc;
    std::string device;
    std::string generator, recipe;
    double jit_us = NAN, gen_us = NAN, hit_ns = NAN, median_us = NAN, gflops = NAN;
    int64_t runs = 0, copies = 0;
    bool checked = false;
    CheckResult check;
    std::vector<PeerResult> peers;
    std::string error;  // empty: the shape ran
};

double flops(const jitmm_matmul_desc& d) {
    return 2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k) *
           static_cast<double>(d.batch_count);
}

bool is_host_device(const std::string& device) { return device == "cpu"; }

// How many copies of A and B the timed runs rotate over (see the top of this file).
int64_t rotation_copies(int64_t ab_bytes) {
    constexpr int64_t kCapBytes = int64_t{256} << 20, kMaxCopies = 64;
    const hw::CpuInfo& cpu = hw::cpu_info();
    const int64_t l2 = cpu.l2_bytes > 0 ? cpu.l2_bytes : int64_t{2} << 20;
    const int64_t llc = cpu.l3_bytes > 0 ? cpu.l3_bytes : int64_t{32} << 20;
    if (ab_bytes <= l2) return 1;
    const int64_t wanted = (2 * llc + ab_bytes - 1) / ab_bytes;
    return std::max<int64_t>(1, std::min({wanted, kMaxCopies, kCapBytes / ab_bytes}));
}

struct HostProblem {
    Operand a, b, c;
    int64_t copies = 1;
    size_t a_pitch = 0, b_pitch = 0;  // bytes between copies (64-byte multiples)
    HostBuffer a_buf, b_buf, c_buf, bias_buf;

    explicit HostProblem(const jitmm_matmul_desc& d) : a(operand_a(d)), b(operand_b(d)), c(operand_c(d)) {
        a_pitch = static_cast<size_t>((a.bytes() + 63) / 64 * 64);
        b_pitch = static_cast<size_t>((b.bytes() + 63) / 64 * 64);
        copies = rotation_copies(static_cast<int64_t>(a_pitch + b_pitch));
        a_buf = HostBuffer(a_pitch * static_cast<size_t>(copies));
        b_buf = HostBuffer(b_pitch * static_cast<size_t>(copies));
        c_buf = HostBuffer(static_cast<size_t>(c.bytes()));
        Random ra(0x5eed0001), rb(0x5eed0002), rbias(0x5eed0004);
        fill_random(a.type, a_buf.data(), a.elements, ra);
        fill_random(b.type, b_buf.data(), b.elements, rb);
        for (int64_t i = 1; i < copies; ++i) {
            std::memcpy(a_ptr(i), a_ptr(0), a_pitch);
            std::memcpy(b_ptr(i), b_ptr(0), b_pitch);
        }
        if (epilogue_has_bias(d.epilogue)) {
            const int64_t count = d.bias_layout == JITMM_BIAS_PER_ROW ? d.m : d.n;
            bias_buf = HostBuffer(static_cast<size_t>(count * dtype_size(d.bias_type)));
            fill_random(d.bias_type, bias_buf.data(), count, rbias);
        }
        Random rc(0x5eed0003);
        fill_random(c.type, c_buf.data(), c.elements, rc);
    }
    void* a_ptr(int64_t copy) const { return static_cast<char*>(a_buf.data()) + a_pitch * static_cast<size_t>(copy); }
    void* b_ptr(int64_t copy) const { return static_cast<char*>(b_buf.data()) + b_pitch * static_cast<size_t>(copy); }
    jitmm_matmul_args args(int64_t copy) const {
        jitmm_matmul_args args;
        jitmm_matmul_args_init(&args);
        args.a = a_ptr(copy);
        args.b = b_ptr(copy);
        args.c = c_buf.data();
        args.bias = bias_buf.data();
        return args;
    }
};

// Releases a kernel handle on every way out of run_shape.
struct KernelHandle {
    jitmm_kernel* kernel = nullptr;
    ~KernelHandle() { jitmm_kernel_release(kernel); }
};

void run_shape(jitmm_engine* engine, const Options& options, ShapeResult* r) {
    const jitmm_matmul_desc& d = r->desc;

    // JIT (or disk-cache load) time: the first create of this desc in this process.
    KernelHandle handle;
    const Clock::time_point t0 = Clock::now();
    const jitmm_status created = jitmm_kernel_create(engine, &d, &handle.kernel);
    const double create_s = seconds_since(t0);
    if (created != JITMM_STATUS_SUCCESS) {
        r->error = status_message(created);
        return;
    }
    r->jit_us = create_s * 1e6;
    jitmm_kernel_info info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    if (jitmm_kernel_get_info(handle.kernel, &info) == JITMM_STATUS_SUCCESS) {
        r->generator = info.generator ? info.generator : "";
        r->recipe = info.recipe ? info.recipe : "";
        r->gen_us = info.jit_time_us;
    }

    // Cache-hit lookup: groups of calls so that the clock's own cost is amortized.
    constexpr int kGroups = 100, kPerGroup = 10;
    std::vector<double> groups;
    groups.reserve(kGroups);
    for (int g = 0; g < kGroups; ++g) {
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < kPerGroup; ++i) {
            jitmm_kernel* again = nullptr;
            const jitmm_status st = jitmm_kernel_create(engine, &d, &again);
            if (st != JITMM_STATUS_SUCCESS) {
                r->error = "cache-hit create: " + status_message(st);
                return;
            }
            jitmm_kernel_release(again);
        }
        groups.push_back(seconds_since(start) / kPerGroup);
    }
    r->hit_ns = median(groups) * 1e9;

    if (!is_host_device(r->device)) {
        r->error = "jitmm-bench cannot allocate buffers on device '" + r->device + "' yet (host memory only)";
        return;
    }

    HostProblem problem(d);
    r->copies = problem.copies;

    if (options.check) {
        // The check uses copy 0 with C freshly filled (beta != 0) or poisoned (beta == 0).
        HostBuffer c0;
        if (d.beta != 0.0f) {
            c0 = HostBuffer(problem.c_buf.bytes());
            std::memcpy(c0.data(), problem.c_buf.data(), problem.c_buf.bytes());
        } else {
            fill_poison(problem.c.type, problem.c_buf.data(), problem.c.elements);
        }
        const jitmm_matmul_args args = problem.args(0);
        const jitmm_status st = jitmm_kernel_run(handle.kernel, &args);
        if (st != JITMM_STATUS_SUCCESS) {
            r->error = "run: " + status_message(st);
            return;
        }
        const CheckInputs in{&d,        problem.a_ptr(0),     problem.b_ptr(0),
                             c0.data(), problem.c_buf.data(), problem.bias_buf.data()};
        r->check = check_against_reference(in);
        r->checked = true;
    }

    // Warm-up, then the timed runs.
    int64_t run_index = 0;
    auto run_once = [&]() -> bool {
        const jitmm_matmul_args args = problem.args(run_index++ % problem.copies);
        const jitmm_status st = jitmm_kernel_run(handle.kernel, &args);
        if (st != JITMM_STATUS_SUCCESS) {
            r->error = "run: " + status_message(st);
            return false;
        }
        return true;
    };
    const Clock::time_point warm_start = Clock::now();
    do {
        if (!run_once()) return;
    } while (seconds_since(warm_start) < 0.1 * options.timing.min_time_s);

    constexpr size_t kMaxSamples = 1000000;
    std::vector<double> samples;
    double total = 0.0;
    while ((static_cast<int64_t>(samples.size()) < options.timing.repeats || total < options.timing.min_time_s) &&
           samples.size() < kMaxSamples) {
        const Clock::time_point start = Clock::now();
        if (!run_once()) return;
        const double s = seconds_since(start);
        samples.push_back(s);
        total += s;
    }
    const double med = median(samples);
    r->runs = static_cast<int64_t>(samples.size());
    r->median_us = med * 1e6;
    r->gflops = med > 0 ? flops(d) / med * 1e-9 : NAN;

    for (const std::string& name : options.peers) {
        PeerResult pr;
        pr.name = name;
        for (const PeerEntry& entry : peer_registry()) {
            if (name != entry.name) continue;
            std::unique_ptr<Peer> peer = entry.create();
            try {
                if (peer->available(d, r->device, &pr.note)) {
                    pr.ratio = peer->time_seconds(d, r->device, options.timing) / med;
                }
            } catch (const Error& e) {
                pr.note = e.what();
            }
        }
        r->peers.push_back(pr);
    }
}

// ---------------------------------------------------------------------------------------------------
// Output.

std::string format(const char* fmt, double value) {
    if (std::isnan(value)) return "-";
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), fmt, value);
    return buffer;
}

std::string dtype_str(jitmm_dtype t) {
    const char* name = jitmm_dtype_name(t);
    return name ? name : "?";
}

std::string epilogue_str(jitmm_epilogue e) {
    const char* name = jitmm_epilogue_name(e);
    return name ? name : "?";
}

std::string float_str(float f) {
    char buffer[32];
    const auto r = std::to_chars(buffer, buffer + sizeof(buffer), f);
    return std::string(buffer, r.ptr);
}

// "NT f32 bias_gelu_tanh", "NN bf16*bf16->f32 a=0.5 b=1": the desc in a few characters.
std::string op_summary(const jitmm_matmul_desc& d) {
    std::string s;
    s += d.trans_a ? 'T' : 'N';
    s += d.trans_b ? 'T' : 'N';
    s += ' ';
    if (d.a_type == d.b_type && d.b_type == d.c_type)
        s += dtype_str(d.a_type);
    else
        s += dtype_str(d.a_type) + "*" + dtype_str(d.b_type) + "->" + dtype_str(d.c_type);
    if (d.epilogue != JITMM_EPILOGUE_NONE) {
        s += ' ' + epilogue_str(d.epilogue);
        if (epilogue_has_bias(d.epilogue) && d.bias_layout == JITMM_BIAS_PER_ROW) s += "(row)";
    }
    if (d.alpha != 1.0f) s += " a=" + float_str(d.alpha);
    if (d.beta != 0.0f) s += " b=" + float_str(d.beta);
    if (d.lda || d.ldb || d.ldc) {
        s += " ld=" + std::to_string(d.lda) + "," + std::to_string(d.ldb) + "," + std::to_string(d.ldc);
    }
    return s;
}

class TextTable {
public:
    TextTable(const Options& o, bool show_device) : options_(o), show_device_(show_device) {}

    void header() {
        std::vector<std::string> cells = {"shape", "batch", "op"};
        if (show_device_) cells.push_back("device");
        for (const char* c : {"generator", "jit_us", "hit_ns", "median_us", "GFLOP/s"}) cells.push_back(c);
        if (options_.check) {
            cells.push_back("max_err");
            cells.push_back("rel_err");
        }
        for (const std::string& p : options_.peers) cells.push_back("ratio_vs_" + p);
        print(cells);
    }

    void row(const ShapeResult& r) {
        const jitmm_matmul_desc& d = r.desc;
        std::vector<std::string> cells = {std::to_string(d.m) + "x" + std::to_string(d.n) + "x" + std::to_string(d.k),
                                          std::to_string(d.batch_count), op_summary(d)};
        if (show_device_) cells.push_back(r.device);
        if (r.error.empty() || !std::isnan(r.jit_us)) {
            cells.push_back(r.generator.empty() ? "-" : r.generator);
            cells.push_back(format("%.1f", r.jit_us));
            cells.push_back(format("%.0f", r.hit_ns));
            cells.push_back(format("%.2f", r.median_us));
            cells.push_back(format("%.1f", r.gflops));
            if (options_.check) {
                // NaN here means the output held NaN/Inf: say so rather than print "-".
                auto err_cell = [](double v) { return std::isnan(v) ? std::string("NaN") : format("%.2e", v); };
                cells.push_back(r.checked ? err_cell(r.check.max_abs_err) : "-");
                cells.push_back(r.checked ? err_cell(r.check.rel_err) + (r.check.ok ? "" : " FAIL") : "-");
            }
            for (const PeerResult& p : r.peers) cells.push_back(format("%.2f", p.ratio));
        }
        print(cells);
        if (!r.error.empty()) std::printf("    error: %s\n", r.error.c_str());
        std::fflush(stdout);
    }

private:
    // Fixed widths so rows can stream out as shapes finish; a longer cell just pushes the row right.
    void print(const std::vector<std::string>& cells) {
        std::string line;
        for (size_t i = 0; i < cells.size(); ++i) {
            const std::string& name = column_name(i);
            const bool left = name == "shape" || name == "op" || name == "device" || name == "generator";
            const size_t width = column_width(name);
            const std::string& cell = cells[i];
            const std::string pad = cell.size() < width ? std::string(width - cell.size(), ' ') : "";
            line += (i ? "  " : "") + (left ? cell + pad : pad + cell);
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        std::printf("%s\n", line.c_str());
    }
    std::string column_name(size_t i) const {
        std::vector<std::string> names = {"shape", "batch", "op"};
        if (show_device_) names.push_back("device");
        for (const char* c : {"generator", "jit_us", "hit_ns", "median_us", "GFLOP/s", "max_err", "rel_err"}) {
            if (!options_.check && (std::string(c) == "max_err" || std::string(c) == "rel_err")) continue;
            names.push_back(c);
        }
        return i < names.size() ? names[i] : "ratio";
    }
    static size_t column_width(const std::string& name) {
        if (name == "shape") return 15;
        if (name == "batch") return 5;
        if (name == "op") return 24;
        if (name == "device") return 7;
        if (name == "generator") return 18;
        if (name == "hit_ns") return 7;
        if (name == "median_us") return 10;
        if (name == "GFLOP/s") return 8;
        if (name == "rel_err") return 13;
        return 9;
    }

    const Options& options_;
    bool show_device_;
};

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (const char ch : s) {
        const unsigned char c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buffer[8];
                    std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
                    out += buffer;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    return out + "\"";
}

std::string json_number(double v, const char* fmt = "%.6g") {
    if (!std::isfinite(v)) return "null";
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), fmt, v);
    return buffer;
}

std::string json_object(const ShapeResult& r) {
    const jitmm_matmul_desc& d = r.desc;
    std::vector<std::pair<std::string, std::string>> f = {
        {"m", std::to_string(d.m)},
        {"n", std::to_string(d.n)},
        {"k", std::to_string(d.k)},
        {"batch_count", std::to_string(d.batch_count)},
        {"stride_a", std::to_string(d.stride_a)},
        {"stride_b", std::to_string(d.stride_b)},
        {"stride_c", std::to_string(d.stride_c)},
        {"a_type", json_string(dtype_str(d.a_type))},
        {"b_type", json_string(dtype_str(d.b_type))},
        {"c_type", json_string(dtype_str(d.c_type))},
        {"trans_a", std::to_string(d.trans_a)},
        {"trans_b", std::to_string(d.trans_b)},
        {"lda", std::to_string(d.lda)},
        {"ldb", std::to_string(d.ldb)},
        {"ldc", std::to_string(d.ldc)},
        {"alpha", float_str(d.alpha)},
        {"beta", float_str(d.beta)},
        {"epilogue", json_string(epilogue_str(d.epilogue))},
        {"bias_type", json_string(dtype_str(d.bias_type))},
        {"bias_layout", json_string(d.bias_layout == JITMM_BIAS_PER_ROW ? "row" : "column")},
        {"device", json_string(r.device)},
    };
    if (!std::isnan(r.jit_us)) {
        f.emplace_back("generator", json_string(r.generator));
        f.emplace_back("recipe", json_string(r.recipe));
        f.emplace_back("jit_us", json_number(r.jit_us));
        f.emplace_back("gen_us", json_number(r.gen_us));
        f.emplace_back("hit_ns", json_number(r.hit_ns));
    }
    if (r.runs > 0) {
        f.emplace_back("median_us", json_number(r.median_us));
        f.emplace_back("gflops", json_number(r.gflops));
        f.emplace_back("runs", std::to_string(r.runs));
        f.emplace_back("copies", std::to_string(r.copies));
    }
    if (r.checked) {
        f.emplace_back("max_abs_err", json_number(r.check.max_abs_err, "%.3e"));
        f.emplace_back("rel_err", json_number(r.check.rel_err, "%.3e"));
        f.emplace_back("err_bound", json_number(r.check.bound, "%.3e"));
        f.emplace_back("check_ok", r.check.ok ? "true" : "false");
    }
    for (const PeerResult& p : r.peers) {
        f.emplace_back("ratio_vs_" + p.name, json_number(p.ratio, "%.4g"));
        if (!p.note.empty()) f.emplace_back("note_" + p.name, json_string(p.note));
    }
    if (!r.error.empty()) f.emplace_back("error", json_string(r.error));
    std::string out = "{";
    for (size_t i = 0; i < f.size(); ++i) out += (i ? ", " : "") + json_string(f[i].first) + ": " + f[i].second;
    return out + "}";
}

int bench_main(int argc, char** argv) {
    Options options;
    try {
        options = parse_args(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "jitmm-bench: %s\n", e.what());
        return 2;
    }

    bool show_device = false;
    for (const ShapeRow& row : options.shapes)
        show_device = show_device || (!row.device.empty() && row.device != options.device);

    EnginePool engines(options.threads);
    TextTable table(options, show_device);
    if (options.json) {
        std::printf("[\n");
    } else {
        std::printf("jitmm %s, jitmm-bench: %zu shape(s), device %s, min %d runs and %.0f ms per shape\n",
                    jitmm_version_string(), options.shapes.size(), options.device.c_str(), options.timing.repeats,
                    options.timing.min_time_s * 1e3);
        table.header();
    }
    std::fflush(stdout);

    int failures = 0;
    for (size_t i = 0; i < options.shapes.size(); ++i) {
        const ShapeRow& row = options.shapes[i];
        ShapeResult r;
        r.desc = row.desc;
        r.device = row.device.empty() ? options.device : row.device;
        std::string engine_error;
        jitmm_engine* engine = engines.get(r.device, &engine_error);
        if (engine == nullptr) {
            r.error = engine_error;
        } else {
            try {
                run_shape(engine, options, &r);
            } catch (const Error& e) {
                r.error = e.what();
            } catch (const std::bad_alloc&) {
                r.error = "out of host memory";
            }
        }
        if (!r.error.empty() || (r.checked && !r.check.ok)) ++failures;
        if (options.json) {
            std::printf("%s%s\n", json_object(r).c_str(), i + 1 < options.shapes.size() ? "," : "");
            std::fflush(stdout);
        } else {
            table.row(r);
        }
    }
    if (options.json) {
        std::printf("]\n");
    } else if (failures > 0) {
        std::printf("%d of %zu shape(s) failed\n", failures, options.shapes.size());
    }
    return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace jitmm::bench

int main(int argc, char** argv) { return jitmm::bench::bench_main(argc, argv); }
