// x86 low-precision matmul correctness: int8 (u8/s8 x s8/u8) exact in s32 (saturation corners, K large) and
// dequantized to f32/bf16/f16 (scales per tensor, row, column; A zero point; bias; activations), bf16 and
// f16 inputs within DESIGN.md's bounds, at every ISA tier this machine can be capped to, over odd shapes, all
// four layouts, ld > width, batches and thread counts. Outputs are poisoned before every run; padding between
// rows must stay intact. AMX tile state must be released on every thread that ran tiles.
#include "env_guard.hpp"
#include "guard_page.hpp"
#include "hw/cpu.hpp"
#include "skip.hpp"
#include "x86/gemm_amx_whole_generator.hpp"
#include "x86/pack_lowp.hpp"

#include <catch2/catch.hpp>
#include <jitmm/jitmm.h>
#include <xbyak/xbyak.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using jitmm::hw::X86Isa;

constexpr uint32_t kPadSentinel = 0x5a5a5a5au;  // bytes left in C's row padding; must survive

bool is_int8(jitmm_dtype t) { return t == JITMM_DTYPE_S8 || t == JITMM_DTYPE_U8; }
size_t type_size(jitmm_dtype t) {
    switch (t) {
        case JITMM_DTYPE_F32: case JITMM_DTYPE_S32: return 4;
        case JITMM_DTYPE_BF16: case JITMM_DTYPE_F16: return 2;
        default: return 1;
    }
}

// 64-byte aligned storage, as frameworks allocate tensors (AMX reads whole cache lines in place only then).
template <typename T>
struct Aligned64 {
    using value_type = T;
    Aligned64() = default;
    template <typename U>
    Aligned64(const Aligned64<U>&) {}
    T* allocate(size_t n) {
        return static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64));
    }
    void deallocate(T* p, size_t) { std::free(p); }
    bool operator==(const Aligned64&) const { return true; }
    bool operator!=(const Aligned64&) const { return false; }
};

// A typed buffer as raw bytes, read back as double.
struct Buffer {
    jitmm_dtype type = JITMM_DTYPE_F32;
    std::vector<uint8_t, Aligned64<uint8_t>> bytes;
    Buffer() = default;
    Buffer(jitmm_dtype t, size_t count) : type(t), bytes(count * type_size(t)) {}
    size_t size() const { return bytes.size() / type_size(type); }
    double get(size_t i) const {
        const uint8_t* p = bytes.data() + i * type_size(type);
        switch (type) {
            case JITMM_DTYPE_S8: return static_cast<int8_t>(*p);
            case JITMM_DTYPE_U8: return *p;
            case JITMM_DTYPE_S32: { int32_t v; std::memcpy(&v, p, 4); return v; }
            case JITMM_DTYPE_F32: { float v; std::memcpy(&v, p, 4); return v; }
            case JITMM_DTYPE_BF16: { uint16_t v; std::memcpy(&v, p, 2); return jitmm::x86::bf16_to_f32(v); }
            case JITMM_DTYPE_F16: { uint16_t v; std::memcpy(&v, p, 2); return jitmm::x86::f16_to_f32(v); }
            default: return 0;
        }
    }
    int32_t get_s32(size_t i) const {
        int32_t v;
        std::memcpy(&v, bytes.data() + i * 4, 4);
        return v;
    }
    void set_s32(size_t i, int32_t v) { std::memcpy(bytes.data() + i * 4, &v, 4); }
    void set_f32(size_t i, float v) { std::memcpy(bytes.data() + i * 4, &v, 4); }
    void set_bits16(size_t i, uint16_t v) { std::memcpy(bytes.data() + i * 2, &v, 2); }
    void* data() { return bytes.data(); }
};

// Random values that the type represents exactly: int8 over its whole range, bf16 and f16 built from bits
// (magnitudes in [1/32, 1) with random signs), f32 in [-1, 1].
void fill_random(Buffer& buf, std::mt19937& rng) {
    std::uniform_int_distribution<int> bits(0, 1 << 30);
    for (size_t i = 0; i < buf.size(); ++i) {
        const int r = bits(rng);
        switch (buf.type) {
            case JITMM_DTYPE_S8: case JITMM_DTYPE_U8: buf.bytes[i] = static_cast<uint8_t>(r); break;
            case JITMM_DTYPE_S32: buf.set_s32(i, (r % 20001) - 10000); break;
            case JITMM_DTYPE_F32: buf.set_f32(i, float(r % 20001 - 10000) / 10000.0f); break;
            case JITMM_DTYPE_BF16:  // sign, exponent 122..126, 7 mantissa bits
                buf.set_bits16(i, static_cast<uint16_t>(((r & 1) << 15) | ((122 + (r >> 1) % 5) << 7) |
                                                        ((r >> 4) & 0x7f)));
                break;
            case JITMM_DTYPE_F16:  // sign, exponent 10..14, 10 mantissa bits
                buf.set_bits16(i, static_cast<uint16_t>(((r & 1) << 15) | ((10 + (r >> 1) % 5) << 10) |
                                                        ((r >> 4) & 0x3ff)));
                break;
            default: break;
        }
    }
}

void fill_constant_int8(Buffer& buf, int value) {
    for (auto& byte : buf.bytes) byte = static_cast<uint8_t>(value);
}

struct Case {
    jitmm_dtype a = JITMM_DTYPE_U8, b = JITMM_DTYPE_S8, c = JITMM_DTYPE_S32, bias_type = JITMM_DTYPE_F32;
    int64_t m = 1, n = 1, k = 1, batch = 1;
    bool ta = false, tb = false;
    int64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;
    float alpha = 1, beta = 0;
    jitmm_epilogue epilogue = JITMM_EPILOGUE_NONE;
    jitmm_bias_layout bias_layout = JITMM_BIAS_PER_COLUMN;
    jitmm_scale_mode a_scale = JITMM_SCALE_NONE, b_scale = JITMM_SCALE_NONE;
    int32_t zero_point = 0;
    bool share_b = false;
    int a_fill = 1000, b_fill = 1000;  // int8 constants for the saturation corners (1000: random)
    int64_t b_offset = 0;              // elements B starts past a 64-byte boundary
    bool poison_pads = false;          // bf16/f16 A and B: NaN, +Inf and -Inf in the rows' padding past width
};

// The A, B and C types of a case from a row of a test's {a, b, c} type table.
void set_types(Case& c, const jitmm_dtype (&types)[3]) {
    c.a = types[0];
    c.b = types[1];
    c.c = types[2];
}

std::string describe(const Case& c) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "%s*%s->%s %lldx%lldx%lld batch=%lld %c%c pads=%lld/%lld/%lld alpha=%g beta=%g %s %s bias=%s "
                  "scales=%d/%d zp=%d%s fill=%d/%d",
                  jitmm_dtype_name(c.a), jitmm_dtype_name(c.b), jitmm_dtype_name(c.c), (long long)c.m,
                  (long long)c.n, (long long)c.k, (long long)c.batch, c.ta ? 'T' : 'N', c.tb ? 'T' : 'N',
                  (long long)c.lda_pad, (long long)c.ldb_pad, (long long)c.ldc_pad, c.alpha, c.beta,
                  jitmm_epilogue_name(c.epilogue), c.bias_layout == JITMM_BIAS_PER_ROW ? "row" : "col",
                  jitmm_dtype_name(c.bias_type), int(c.a_scale), int(c.b_scale), int(c.zero_point),
                  c.share_b ? " shared-B" : "", c.a_fill, c.b_fill);
    return buf;
}

bool has_bias(jitmm_epilogue e) { return e == JITMM_EPILOGUE_BIAS || e >= JITMM_EPILOGUE_BIAS_RELU; }

double activate(jitmm_epilogue e, double x) {
    switch (e) {
        case JITMM_EPILOGUE_RELU: case JITMM_EPILOGUE_BIAS_RELU: return x > 0 ? x : 0;
        case JITMM_EPILOGUE_GELU_TANH: case JITMM_EPILOGUE_BIAS_GELU_TANH:
            // 0.5 x (1 + tanh(u)) as x / (1 + exp(-2u)): 1 + tanh(u) cancels to nothing in double once u < -18.
            return x / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        case JITMM_EPILOGUE_GELU_ERF: case JITMM_EPILOGUE_BIAS_GELU_ERF:
            return 0.5 * x * std::erfc(-x / std::sqrt(2.0));  // = 1 + erf(z): no cancellation
        case JITMM_EPILOGUE_SILU: case JITMM_EPILOGUE_BIAS_SILU: return x / (1 + std::exp(-x));
        default: return x;
    }
}

// Relative Frobenius bound for a float C: the inputs are exact in both computations, so what is left is f32
// accumulation (bf16/f16 inputs: DESIGN.md's 1e-2), f32 epilogue arithmetic and the rounding of C.
double float_bound(const Case& c) {
    if (!is_int8(c.a)) return 1e-2;
    switch (c.c) {
        case JITMM_DTYPE_BF16: return 1e-2;
        case JITMM_DTYPE_F16: return 2e-3;
        default: return 1e-5;
    }
}

void check_case(jitmm_engine* engine, const Case& c, std::mt19937& rng) {
    INFO("case: " << describe(c));
    const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
    const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
    const int64_t lda = a_cols + c.lda_pad, ldb = b_cols + c.ldb_pad, ldc = c.n + c.ldc_pad;
    const int64_t stride_a = a_rows * lda, stride_b = c.share_b ? 0 : b_rows * ldb, stride_c = c.m * ldc;

    Buffer a(c.a, stride_a * c.batch), b(c.b, std::max<int64_t>(stride_b, b_rows * ldb) * c.batch + c.b_offset);
    if (c.a_fill != 1000) fill_constant_int8(a, c.a_fill);
    else fill_random(a, rng);
    if (c.b_fill != 1000) fill_constant_int8(b, c.b_fill);
    else fill_random(b, rng);
    if (c.poison_pads && !is_int8(c.a)) {  // what a kernel reads past a row's width must never count
        const uint16_t poison[3] = {0x7fc0, 0x7f80, 0xff80};  // bf16 NaN, +Inf, -Inf (f16: NaN, NaN, NaN)
        for (size_t i = 0; i < a.size(); ++i)
            if (int64_t(i) % lda >= a_cols) a.set_bits16(i, poison[i % 3]);
        for (size_t i = c.b_offset; i < b.size(); ++i)
            if (int64_t(i - c.b_offset) % ldb >= b_cols) b.set_bits16(i, poison[i % 3]);
    }
    const bool bias_on = has_bias(c.epilogue);
    Buffer bias(c.bias_type, bias_on ? (c.bias_layout == JITMM_BIAS_PER_ROW ? c.m : c.n) : 1);
    fill_random(bias, rng);
    std::vector<float> a_scales(c.a_scale == JITMM_SCALE_PER_ROW ? c.m : 1);
    std::vector<float> b_scales(c.b_scale == JITMM_SCALE_PER_COLUMN ? c.n : 1);
    std::uniform_real_distribution<float> scale_dist(0.001f, 0.02f);
    for (auto& s : a_scales) s = scale_dist(rng);
    for (auto& s : b_scales) s = scale_dist(rng);

    // C: random where beta reads it, poison where it must not be read (NaN bits for float types, a pattern
    // for s32); the row padding holds a sentinel.
    Buffer c0(c.c, stride_c * c.batch);
    fill_random(c0, rng);
    const size_t cs = type_size(c.c);
    for (int64_t i = 0; i < (int64_t)c0.size(); ++i) {
        uint8_t* p = c0.bytes.data() + i * cs;
        if (i % ldc >= c.n) std::memcpy(p, &kPadSentinel, cs);
        else if (c.beta == 0) std::memset(p, 0xff, cs);  // NaN in f32/bf16/f16, -1 in s32
    }
    Buffer out = c0;

    jitmm_matmul_desc d;
    REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
    d.m = c.m; d.n = c.n; d.k = c.k; d.batch_count = c.batch;
    d.a_type = c.a; d.b_type = c.b; d.c_type = c.c; d.bias_type = c.bias_type;
    d.trans_a = c.ta; d.trans_b = c.tb;
    d.lda = lda; d.ldb = ldb; d.ldc = ldc;
    d.stride_a = stride_a; d.stride_b = stride_b; d.stride_c = stride_c;
    d.alpha = c.alpha; d.beta = c.beta;
    d.epilogue = c.epilogue;
    d.bias_layout = c.bias_layout;
    d.a_scale_mode = c.a_scale;
    d.b_scale_mode = c.b_scale;
    d.a_zero_point = c.zero_point;
    jitmm_matmul_args args;
    REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
    args.a = a.data(); args.b = b.bytes.data() + c.b_offset * type_size(c.b);
    args.c = out.data(); args.bias = bias.data();
    args.a_scales = a_scales.data();
    args.b_scales = b_scales.data();
    const jitmm_status st = jitmm_matmul(engine, &d, &args);
    INFO("status: " << jitmm_status_string(st) << " " << jitmm_last_error_message());
    REQUIRE(st == JITMM_STATUS_SUCCESS);

    const bool int_out = c.c == JITMM_DTYPE_S32;
    const double bound = float_bound(c);
    // The operands as numbers once: the reference's inner loops then index plain arrays (the per-element type
    // switch made large shapes take seconds each).
    std::vector<int32_t> a_int, b_int;
    std::vector<double> a_val, b_val;
    if (int_out || is_int8(c.a)) {
        a_int.resize(a.size());
        b_int.resize(b.size());
        for (size_t i = 0; i < a.size(); ++i) a_int[i] = static_cast<int32_t>(a.get(i));
        for (size_t i = 0; i < b.size(); ++i) b_int[i] = static_cast<int32_t>(b.get(i));
    } else {
        a_val.resize(a.size());
        b_val.resize(b.size());
        for (size_t i = 0; i < a.size(); ++i) a_val[i] = a.get(i);
        for (size_t i = 0; i < b.size(); ++i) b_val[i] = b.get(i);
    }
    for (int64_t bt = 0; bt < c.batch; ++bt) {
        double err2 = 0, ref2 = 0;
        int64_t bad_pad = 0, non_finite = 0, int_mismatch = 0;
        int32_t first_got = 0;
        int64_t first_want = 0;
        for (int64_t i = 0; i < c.m; ++i) {
            for (int64_t j = 0; j < ldc; ++j) {
                const size_t at = size_t(bt * stride_c + i * ldc + j);
                if (j >= c.n) {
                    bad_pad += std::memcmp(out.bytes.data() + at * cs, &kPadSentinel, cs) != 0;
                    continue;
                }
                if (int_out || is_int8(c.a)) {
                    // Integer sum of (a - zero point) * b, exactly.
                    int64_t acc = 0;
                    for (int64_t p = 0; p < c.k; ++p) {
                        const int64_t av = int64_t(a_int[size_t(bt * stride_a + (c.ta ? p * lda + i : i * lda + p))]) -
                                           c.zero_point;
                        const size_t b_at = size_t(c.b_offset + bt * stride_b + (c.tb ? j * ldb + p : p * ldb + j));
                        const int64_t bv = int64_t(b_int[b_at]);
                        acc += av * bv;
                    }
                    if (int_out) {
                        int64_t want = acc;
                        if (c.beta != 0) want += c0.get_s32(at);
                        if (bias_on) want += int64_t(bias.get(c.bias_layout == JITMM_BIAS_PER_ROW ? i : j));
                        if (c.epilogue == JITMM_EPILOGUE_RELU || c.epilogue == JITMM_EPILOGUE_BIAS_RELU)
                            want = std::max<int64_t>(want, 0);
                        const int32_t got = out.get_s32(at);
                        if (int64_t(got) != want && int_mismatch++ == 0) {
                            first_got = got;
                            first_want = want;
                        }
                        continue;
                    }
                    double ref = double(c.alpha) * double(acc);
                    if (c.a_scale != JITMM_SCALE_NONE) ref *= a_scales[c.a_scale == JITMM_SCALE_PER_ROW ? i : 0];
                    if (c.b_scale != JITMM_SCALE_NONE) ref *= b_scales[c.b_scale == JITMM_SCALE_PER_COLUMN ? j : 0];
                    if (c.beta != 0) ref += double(c.beta) * c0.get(at);
                    if (bias_on) ref += bias.get(c.bias_layout == JITMM_BIAS_PER_ROW ? i : j);
                    ref = activate(c.epilogue, ref);
                    const double got = out.get(at);
                    if (!std::isfinite(got)) ++non_finite;
                    err2 += (got - ref) * (got - ref);
                    ref2 += ref * ref;
                    continue;
                }
                double acc = 0;
                for (int64_t p = 0; p < c.k; ++p)
                    acc += a_val[size_t(bt * stride_a + (c.ta ? p * lda + i : i * lda + p))] *
                           b_val[size_t(c.b_offset + bt * stride_b + (c.tb ? j * ldb + p : p * ldb + j))];
                double ref = c.alpha * acc;
                if (c.beta != 0) ref += double(c.beta) * c0.get(at);
                if (bias_on) ref += bias.get(c.bias_layout == JITMM_BIAS_PER_ROW ? i : j);
                ref = activate(c.epilogue, ref);
                const double got = out.get(at);
                if (!std::isfinite(got)) ++non_finite;
                err2 += (got - ref) * (got - ref);
                ref2 += ref * ref;
            }
        }
        INFO("batch " << bt);
        REQUIRE(bad_pad == 0);
        if (int_out) {
            INFO("first mismatch: got " << first_got << " want " << first_want);
            REQUIRE(int_mismatch == 0);
            continue;
        }
        REQUIRE(non_finite == 0);
        const double rel = std::sqrt(err2) / std::max(std::sqrt(ref2), 1e-30);
        INFO("relative Frobenius error " << rel << " bound " << bound);
        REQUIRE(rel <= bound);
    }
}

struct Tier {
    const char* name;
    X86Isa isa;
};

// Every tier this machine can be capped to; a tier it lacks is reported, never silently passed.
std::vector<Tier> runnable_tiers() {
    std::vector<Tier> tiers;
    const X86Isa best = jitmm::hw::cpu_info().best_isa;
    for (Tier t : {Tier{"avx2", X86Isa::avx2}, Tier{"avx512", X86Isa::avx512}, Tier{"avx512_vnni", X86Isa::avx512_vnni},
                   Tier{"avx512_bf16", X86Isa::avx512_bf16}, Tier{"avx512_fp16", X86Isa::avx512_fp16},
                   Tier{"amx", X86Isa::amx}}) {
        if (best >= t.isa) tiers.push_back(t);
        else WARN_SKIPPED("tier " << t.name << " not available on this CPU (best: " << jitmm::hw::isa_name(best)
                                    << ")");
    }
    return tiers;
}

jitmm_engine* make_engine(const char* max_isa, int threads, jitmm_parallel_for_fn pf = nullptr, void* ctx = nullptr) {
    jitmm_engine_config cfg;
    REQUIRE(jitmm_engine_config_init(&cfg) == JITMM_STATUS_SUCCESS);
    cfg.max_isa = max_isa;
    cfg.num_threads = threads;
    cfg.cache_dir = "";
    cfg.parallel_for = pf;
    cfg.parallel_for_ctx = ctx;
    jitmm_engine* e = nullptr;
    REQUIRE(jitmm_engine_create(&cfg, &e) == JITMM_STATUS_SUCCESS);
    return e;
}

struct EngineGuard {
    jitmm_engine* e;
    ~EngineGuard() { jitmm_engine_destroy(e); }
};

const int64_t kOdd[] = {1, 7, 33, 65, 127, 3, 17, 48};

// The generator a desc gets (to check that a tier really runs the family it should).
std::string generator_of(jitmm_engine* e, const jitmm_matmul_desc& d) {
    jitmm_kernel* k = nullptr;
    if (jitmm_kernel_create(e, &d, &k) != JITMM_STATUS_SUCCESS)
        return std::string("error: ") + jitmm_last_error_message();
    jitmm_kernel_info info;
    info.struct_size = sizeof info;
    jitmm_kernel_get_info(k, &info);
    std::string g = info.generator;
    jitmm_kernel_release(k);
    return g;
}

}  // namespace

TEST_CASE("x86 lowp: each tier runs the family it should", "[x86][lowp]") {
    struct Want {
        jitmm_dtype a, b;
        const char* tier;
        const char* generator;
    };
    const Want wants[] = {
        {JITMM_DTYPE_U8, JITMM_DTYPE_S8, "amx", "x86_int8_amx"},
        {JITMM_DTYPE_S8, JITMM_DTYPE_U8, "amx", "x86_int8_amx"},
        {JITMM_DTYPE_S8, JITMM_DTYPE_S8, "avx512_fp16", "x86_int8_vnni_avx512"},
        {JITMM_DTYPE_S8, JITMM_DTYPE_S8, "avx512_vnni", "x86_int8_vnni_avx512"},
        {JITMM_DTYPE_U8, JITMM_DTYPE_U8, "avx512_vnni", "x86_int8_s16_avx512"},
        {JITMM_DTYPE_U8, JITMM_DTYPE_S8, "avx512", "x86_int8_s16_avx512"},
        // The avx2 tier: AVX-VNNI (VEX vpdpbusd) where the chip has it, else widened to s16; u8 B always s16.
        {JITMM_DTYPE_S8, JITMM_DTYPE_S8, "avx2",
         jitmm::hw::cpu_info().avx_vnni ? "x86_int8_avxvnni_avx2" : "x86_int8_s16_avx2"},
        {JITMM_DTYPE_U8, JITMM_DTYPE_S8, "avx2",
         jitmm::hw::cpu_info().avx_vnni ? "x86_int8_avxvnni_avx2" : "x86_int8_s16_avx2"},
        {JITMM_DTYPE_U8, JITMM_DTYPE_U8, "avx2", "x86_int8_s16_avx2"},
        {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, "amx", "x86_bf16_amx"},
        // vdpbf16ps where it issues at the FMA rate (AMD), else the converted f32 FMAs.
        {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, "avx512_bf16",
         jitmm::hw::cpu_info().bf16_dot_full_rate ? "x86_bf16_dot_avx512" : "x86_bf16_f32_avx512"},
        {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, "avx512_vnni", "x86_bf16_f32_avx512"},
        {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, "avx2", "x86_bf16_f32_avx2"},
        {JITMM_DTYPE_F16, JITMM_DTYPE_F16, "amx", "x86_f16_f32_avx512"},
        {JITMM_DTYPE_F16, JITMM_DTYPE_F16, "avx2", "x86_f16_f32_avx2"},
    };
    const X86Isa best = jitmm::hw::cpu_info().best_isa;
    for (const Want& w : wants) {
        X86Isa tier;
        REQUIRE(jitmm::hw::isa_from_name(w.tier, &tier));
        if (best < tier) {
            WARN_SKIPPED("tier " << w.tier << " not available on this CPU");
            continue;
        }
        EngineGuard e{make_engine(w.tier, 1)};
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = 40; d.n = 40; d.k = 64;
        d.a_type = w.a; d.b_type = w.b;
        d.c_type = is_int8(w.a) ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
        INFO(w.tier << " " << jitmm_dtype_name(w.a) << "*" << jitmm_dtype_name(w.b));
        CHECK(generator_of(e.e, d) == w.generator);
    }
}

TEST_CASE("x86 lowp int8: exact s32 over odd shapes and every layout at every tier", "[x86][lowp]") {
    std::mt19937 rng(701);
    const jitmm_dtype pairs[][2] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8},
                                    {JITMM_DTYPE_S8, JITMM_DTYPE_U8}, {JITMM_DTYPE_U8, JITMM_DTYPE_U8}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        EngineGuard e{make_engine(tier.name, 1)};
        int it = 0;
        for (const auto& pair : pairs) {
            for (int layout = 0; layout < 4; ++layout) {
                for (int s = 0; s < 4; ++s, ++it) {
                    Case c;
                    c.a = pair[0];
                    c.b = pair[1];
                    c.m = kOdd[(it * 3) % 8];
                    c.n = kOdd[(it * 5 + 1) % 8];
                    c.k = kOdd[(it * 7 + 2) % 8] + (it % 3 == 0 ? 64 : 0);
                    c.ta = layout & 1;
                    c.tb = layout & 2;
                    c.lda_pad = it % 3;
                    c.ldc_pad = (it % 4 == 1) ? 5 : 0;
                    check_case(e.e, c, rng);
                }
            }
        }
    }
}

TEST_CASE("x86 lowp int8: saturation corners with K large are exact", "[x86][lowp]") {
    std::mt19937 rng(702);
    struct Corner {
        jitmm_dtype a, b;
        int a_fill, b_fill;
    };
    // 255 * 127 * 2 overflows s16 (vpmaddubsw would saturate); -128 * -128 needs the s8 x s8 path exactly.
    const Corner corners[] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8, 255, 127},  {JITMM_DTYPE_U8, JITMM_DTYPE_S8, 255, -128},
                              {JITMM_DTYPE_S8, JITMM_DTYPE_S8, -128, -128}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8, -128, 127},
                              {JITMM_DTYPE_S8, JITMM_DTYPE_S8, 127, -128},  {JITMM_DTYPE_U8, JITMM_DTYPE_U8, 255, 255},
                              {JITMM_DTYPE_S8, JITMM_DTYPE_U8, -128, 255}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        EngineGuard e{make_engine(tier.name, 2)};
        int it = 0;
        for (const Corner& corner : corners) {
            Case c;
            c.a = corner.a;
            c.b = corner.b;
            c.a_fill = corner.a_fill;
            c.b_fill = corner.b_fill;
            c.m = 33;
            c.n = 47;
            c.k = 4099;  // several K blocks at every tier, and a K tail inside every k group size
            c.ta = it & 1;
            c.tb = it & 2;
            check_case(e.e, c, rng);
            ++it;
        }
        // Random values over the full ranges with K large, and a zero point (exact in s32 too).
        for (int32_t zp : {0, 131, -77}) {
            Case c;
            c.a = zp < 0 ? JITMM_DTYPE_S8 : JITMM_DTYPE_U8;
            c.m = 65;
            c.n = 33;
            c.k = 4099;
            c.zero_point = zp;
            c.tb = zp != 0;
            check_case(e.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp int8: s32 integer epilogue (beta 1, s32 bias, relu) stays exact", "[x86][lowp]") {
    std::mt19937 rng(703);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        EngineGuard e{make_engine(tier.name, 1)};
        int it = 0;
        for (jitmm_epilogue ep :
             {JITMM_EPILOGUE_NONE, JITMM_EPILOGUE_RELU, JITMM_EPILOGUE_BIAS, JITMM_EPILOGUE_BIAS_RELU}) {
            for (float beta : {0.0f, 1.0f}) {
                Case c;
                c.a = (it & 1) ? JITMM_DTYPE_S8 : JITMM_DTYPE_U8;
                c.m = kOdd[it % 8] + 30;
                c.n = kOdd[(it + 3) % 8] + 2;
                c.k = 300 + it;
                c.beta = beta;
                c.epilogue = ep;
                c.bias_type = JITMM_DTYPE_S32;
                c.bias_layout = (it & 2) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                c.zero_point = (it % 3 == 0) ? ((it & 1) ? -5 : 17) : 0;
                c.ldc_pad = it % 3;
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
}

TEST_CASE("x86 lowp int8: dequantizing epilogues to f32, bf16 and f16", "[x86][lowp]") {
    std::mt19937 rng(704);
    const jitmm_dtype outs[] = {JITMM_DTYPE_F32, JITMM_DTYPE_BF16, JITMM_DTYPE_F16};
    const jitmm_scale_mode a_modes[] = {JITMM_SCALE_NONE, JITMM_SCALE_PER_TENSOR, JITMM_SCALE_PER_ROW};
    const jitmm_scale_mode b_modes[] = {JITMM_SCALE_NONE, JITMM_SCALE_PER_TENSOR, JITMM_SCALE_PER_COLUMN};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        EngineGuard e{make_engine(tier.name, 2)};
        for (int it = 0; it < 18; ++it) {
            Case c;
            c.a = (it & 1) ? JITMM_DTYPE_S8 : JITMM_DTYPE_U8;
            c.c = outs[it % 3];
            c.m = kOdd[it % 8] + (it % 5);
            c.n = kOdd[(it * 3 + 1) % 8] + 16;
            c.k = 100 + 37 * it;
            c.a_scale = a_modes[(it / 3) % 3];
            c.b_scale = b_modes[(it + it / 3) % 3];
            c.zero_point = (it % 4 == 0) ? ((it & 1) ? -3 : 128) : 0;
            const bool scaled = c.a_scale != JITMM_SCALE_NONE || c.b_scale != JITMM_SCALE_NONE;
            c.alpha = !scaled ? 0.001f : (it % 5 == 0 ? 2.0f : 1.0f);
            c.beta = (it % 3 == 1) ? 0.5f : 0.0f;
            c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
            c.bias_layout = (it % 4 == 3) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
            c.bias_type = (it % 2) ? c.c : JITMM_DTYPE_F32;
            c.ta = it % 6 == 5;
            c.tb = it % 4 == 2;
            c.ldc_pad = it % 2;
            check_case(e.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp bf16 and f16: odd shapes, layouts, outputs and epilogues", "[x86][lowp]") {
    std::mt19937 rng(705);
    const jitmm_dtype ins[] = {JITMM_DTYPE_BF16, JITMM_DTYPE_F16};
    const jitmm_dtype outs[] = {JITMM_DTYPE_F32, JITMM_DTYPE_BF16, JITMM_DTYPE_F16};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        EngineGuard e{make_engine(tier.name, 1)};
        int it = 0;
        for (jitmm_dtype in : ins) {
            for (int layout = 0; layout < 4; ++layout) {
                for (int s = 0; s < 5; ++s, ++it) {
                    Case c;
                    c.a = c.b = in;
                    c.c = outs[it % 3];
                    c.m = kOdd[(it * 3) % 8];
                    c.n = kOdd[(it * 5 + 2) % 8];
                    c.k = kOdd[(it * 7 + 1) % 8] + (it % 4 == 0 ? 100 : 0);
                    c.ta = layout & 1;
                    c.tb = layout & 2;
                    c.lda_pad = it % 3;
                    c.ldb_pad = (it % 5 == 1) ? 3 : 0;
                    c.ldc_pad = (it % 4 == 1) ? 2 : 0;
                    c.alpha = (it % 4 == 3) ? -0.5f : 1.0f;
                    c.beta = (it % 3 == 2) ? 1.0f : 0.0f;
                    c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = (it % 2) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    c.bias_type = (it % 3 == 0) ? c.c : JITMM_DTYPE_F32;
                    check_case(e.e, c, rng);
                }
            }
        }
        // K large: several K blocks (the accumulator strip) at every tier.
        for (jitmm_dtype in : ins) {
            Case c;
            c.a = c.b = in;
            c.c = JITMM_DTYPE_F32;
            c.m = 70;
            c.n = 50;
            c.k = 3001;
            c.tb = in == JITMM_DTYPE_F16;
            c.epilogue = JITMM_EPILOGUE_BIAS_GELU_ERF;
            check_case(e.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp AMX: few rows times B stored N x K swap the tile roles (B read in place)", "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    std::mt19937 rng(710);
    const jitmm_dtype ins[][2] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_U8}, {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}};
    const jitmm_dtype int_outs[] = {JITMM_DTYPE_S32, JITMM_DTYPE_F32, JITMM_DTYPE_BF16, JITMM_DTYPE_F16};
    const jitmm_dtype half_outs[] = {JITMM_DTYPE_F32, JITMM_DTYPE_BF16, JITMM_DTYPE_F16};
    for (int threads : {1, 3}) {
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (const auto& in : ins) {
            for (int64_t m : {1, 7, 17, 32, 100}) {
                Case c;
                c.a = in[0];
                c.b = in[1];
                const bool int8 = is_int8(c.a);
                c.c = int8 ? int_outs[it % 4] : half_outs[it % 3];
                c.m = m;
                c.n = kOdd[it % 8] + 64;
                // Rows of whole lines, and K long enough for the rows (3 bytes per row) that the roles swap.
                c.k = int8 ? 64 * (1 + it % 5) + (3 * m + 63) / 64 * 64 : 32 * (1 + it % 7) + (3 * m + 63) / 64 * 32;
                c.tb = true;
                c.ta = it % 3 == 2;
                c.ldb_pad = (it % 4 == 1) ? 64 : 0;  // keeps B's rows whole cache lines
                c.b_offset = (it % 5 == 3) ? 1 : 0;  // a misaligned B: its rows get copied
                c.batch = (it % 6 == 5) ? 2 : 1;
                if (c.c != JITMM_DTYPE_S32) {
                    c.alpha = int8 ? 0.01f : 1.0f;
                    c.beta = (it % 3 == 1) ? 0.5f : 0.0f;
                    c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = (it % 2) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    if (int8 && it % 4 == 2) {
                        c.alpha = 1.0f;
                        c.a_scale = JITMM_SCALE_PER_ROW;
                        c.b_scale = JITMM_SCALE_PER_COLUMN;
                    }
                } else if (it % 2) {
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                    c.bias_type = JITMM_DTYPE_S32;
                    c.bias_layout = (it % 4 == 1) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                }
                check_case(e.e, c, rng);
                ++it;
            }
        }
        // The recipe says so.
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = 4; d.n = 256; d.k = 512;
        d.a_type = d.b_type = JITMM_DTYPE_BF16;
        d.trans_b = 1;
        jitmm_kernel* k = nullptr;
        REQUIRE(jitmm_kernel_create(e.e, &d, &k) == JITMM_STATUS_SUCCESS);
        jitmm_kernel_info info;
        info.struct_size = sizeof info;
        jitmm_kernel_get_info(k, &info);
        CHECK(std::string(info.recipe).find("swapAB") != std::string::npos);
        jitmm_kernel_release(k);
    }
}

// A matrix times a vector (N = 1, b and C dense, same-type operands; A stored M x K or K x M) runs on the swapped
// problem's plan with A and B (and their scales) exchanged: exact for int8, within the bounds otherwise, at every tier.
TEST_CASE("x86 lowp: a matrix times a vector runs with the operands swapped", "[x86][lowp]") {
    std::mt19937 rng(1201);
    struct Types {
        jitmm_dtype a, b, c;
    };
    const Types types[] = {{JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                           {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_F32},
                           {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32},
                           {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16},
                           {JITMM_DTYPE_F16, JITMM_DTYPE_F16, JITMM_DTYPE_F32}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Types& t : types) {
                for (int64_t m : {2, 33, 300, 1000}) {
                    Case c;
                    c.a = t.a, c.b = t.b, c.c = t.c;
                    c.m = m;
                    c.n = 1;
                    c.k = it % 3 == 0 ? 1500 : 64 * (1 + it % 4) + it % 3;
                    c.tb = it % 2 == 1;
                    c.ta = it % 3 == 2;  // A stored K x M: the swapped problem's B as stored
                    c.lda_pad = it % 4 == 1 ? 64 : 0;
                    c.batch = it % 5 == 2 ? 3 : 1;
                    c.share_b = c.batch > 1 && it % 2 == 0;
                    const bool float_c = t.c != JITMM_DTYPE_S32;
                    if (float_c) {
                        c.beta = it % 3 == 1 ? 0.5f : 0.0f;
                        c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    }
                    if (t.a == JITMM_DTYPE_S8 && float_c) {
                        c.a_scale = it % 2 ? JITMM_SCALE_PER_ROW : JITMM_SCALE_PER_TENSOR;
                        c.b_scale = it % 3 ? JITMM_SCALE_PER_COLUMN : JITMM_SCALE_NONE;
                    }
                    jitmm_matmul_desc d;
                    REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
                    d.m = c.m; d.n = 1; d.k = c.k; d.trans_a = c.ta; d.trans_b = c.tb;
                    d.a_type = c.a; d.b_type = c.b; d.c_type = c.c;
                    d.lda = (c.ta ? c.m : c.k) + c.lda_pad; d.ldb = c.tb ? c.k : 1; d.ldc = 1;
                    d.a_scale_mode = c.a_scale; d.b_scale_mode = c.b_scale;
                    INFO("m " << c.m << " k " << c.k << (c.ta ? " TN" : " NN"));
                    CHECK(generator_of(e.e, d).find("swapped") != std::string::npos);
                    check_case(e.e, c, rng);
                    ++it;
                }
            }
            // u8 x s8 (no swapped instruction) keeps the normal order; still exact.
            Case u8;
            u8.m = 300, u8.n = 1, u8.k = 200;
            check_case(e.e, u8, rng);
        }
    }
}

TEST_CASE("x86 lowp VNNI: decode rows times B stored N x K as dot products (B read in place)", "[x86][lowp]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::avx512_vnni) {
        WARN_SKIPPED("no AVX512-VNNI on this CPU");
        return;
    }
    std::mt19937 rng(712);
    const jitmm_dtype ins[][2] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8}};
    const jitmm_dtype outs[] = {JITMM_DTYPE_S32, JITMM_DTYPE_F32, JITMM_DTYPE_BF16, JITMM_DTYPE_F16};
    const int64_t ks[] = {64, 4099, 1, 130, 256, 63, 4096, 515};
    for (int threads : {1, 3}) {
        EngineGuard e{make_engine("avx512_vnni", threads)};
        int it = 0;
        for (const auto& in : ins) {
            for (int64_t m : {1, 2, 3, 4, 7, 16}) {
                Case c;
                c.a = in[0];
                c.b = in[1];
                c.c = outs[it % 4];
                c.m = m;
                c.k = ks[it % 8];
                // Past 16 KB of B: a smaller B is packed, not read in place (the planner's kDotMinBBytes).
                c.n = kOdd[it % 8] + (it % 3 == 0 ? 64 : 0) + 16 * 1024 / c.k;
                c.tb = true;
                c.ta = it % 3 == 2;
                c.ldb_pad = (it % 4 == 1) ? 5 : 0;
                c.b_offset = (it % 5 == 3) ? 1 : 0;
                c.batch = (it % 6 == 5) ? 2 : 1;
                if (it % 7 == 4) {  // saturation corners: every product at its extreme
                    c.a_fill = c.a == JITMM_DTYPE_U8 ? 255 : -128;
                    c.b_fill = (it % 2) ? 127 : -128;
                }
                if (c.c != JITMM_DTYPE_S32) {
                    c.alpha = 0.01f;
                    c.beta = (it % 3 == 1) ? 0.5f : 0.0f;
                    c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = (it % 2) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    if (it % 4 == 2) {
                        c.alpha = 1.0f;
                        c.a_scale = JITMM_SCALE_PER_ROW;
                        c.b_scale = JITMM_SCALE_PER_COLUMN;
                    }
                } else if (it % 2) {
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                    c.bias_type = JITMM_DTYPE_S32;
                    c.bias_layout = (it % 4 == 1) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    c.beta = (it % 3 == 1) ? 1.0f : 0.0f;
                }
                INFO("m " << m << " n " << c.n << " k " << c.k << " it " << it);
                check_case(e.e, c, rng);
                ++it;
            }
        }
        // B stored K x N (packed in 1 KB K blocks of ~2048 columns): N past one block, K past one block.
        for (int64_t m : {1, 16}) {
            Case c;
            c.a = m == 1 ? JITMM_DTYPE_U8 : JITMM_DTYPE_S8;
            c.b = JITMM_DTYPE_S8;
            c.m = m;
            c.n = 2100;
            c.k = 1100;
            check_case(e.e, c, rng);
        }
        // Full 255 / -128 x 127 / -128 corners with K large, and the recipe says so.
        for (int m : {1, 16}) {
            for (int fill : {127, -128}) {
                Case c;
                c.a = m == 1 ? JITMM_DTYPE_U8 : JITMM_DTYPE_S8;
                c.b = JITMM_DTYPE_S8;
                c.a_fill = m == 1 ? 255 : -128;
                c.b_fill = fill;
                c.m = m;
                c.n = 37;
                c.k = 8195;
                c.tb = true;
                check_case(e.e, c, rng);
            }
        }
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = 16; d.n = 256; d.k = 512;
        d.a_type = d.b_type = JITMM_DTYPE_S8;
        d.c_type = JITMM_DTYPE_S32;
        d.trans_b = 1;
        jitmm_kernel* k = nullptr;
        REQUIRE(jitmm_kernel_create(e.e, &d, &k) == JITMM_STATUS_SUCCESS);
        jitmm_kernel_info info;
        info.struct_size = sizeof info;
        jitmm_kernel_get_info(k, &info);
        CHECK(std::string(info.recipe).find("dotNT") != std::string::npos);
        jitmm_kernel_release(k);
        // A long K over 6 or more rows: 2 x 8 tiles where the prefetchers take about 8 streams (the cases above
        // with 7 and 16 rows and K past 1 KB ran them there), 4 x 4 elsewhere.
        d.k = 2048;
        REQUIRE(jitmm_kernel_create(e.e, &d, &k) == JITMM_STATUS_SUCCESS);
        jitmm_kernel_get_info(k, &info);
        INFO(info.recipe);
        const bool two_by_eight = std::string(info.recipe).find("tile 2x8") != std::string::npos;
        CHECK(two_by_eight == jitmm::hw::cpu_info().few_streams_from_memory);
        jitmm_kernel_release(k);
    }
}

// The dot products on 2 x 8 tiles (2 rows by 8 rows of B: Zen 4's choice for int8 over 6+ rows and bf16/f16 over
// 5-6 rows with a long K; forced here on any chip): row tails, K tails, A stored K x M, batches and 2 threads.
TEST_CASE("x86 lowp: dot products on 2x8 tiles (forced) over row and K tails", "[x86][lowp]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::avx512_vnni) {
        WARN_SKIPPED("no AVX512-VNNI on this CPU");
        return;
    }
    const EnvGuard tile("JITMM_X86_LOWP_DOT_TILE", "2x8");
    std::mt19937 rng(2808);
    const jitmm_dtype types[][3] = {{JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                    {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                    {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32},
                                    {JITMM_DTYPE_F16, JITMM_DTYPE_F16, JITMM_DTYPE_F32}};
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("avx512_bf16", threads)};
        int it = 0;
        for (const auto& t : types) {
            for (int64_t m : {5, 6, 7, 13}) {
                Case c;
                set_types(c, t);
                c.m = m;
                c.k = it % 2 ? 2100 : 1100 + it;
                c.n = 300 + kOdd[it % 8];
                c.tb = true;
                c.ta = it % 3 == 1;
                c.batch = it % 4 == 3 ? 2 : 1;
                c.ldb_pad = it % 2;
                INFO(describe(c));
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
}

// Past decode rows (17-256, which a core of one zmm product a cycle takes by the cost model, forced here on any
// chip): many row tiles and their tails, s8 and u8, NT and TT, dequantized and s32 C, 1 and 2 threads, exact.
TEST_CASE("x86 lowp VNNI: dot products over up to 256 rows (forced), exactly", "[x86][lowp]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::avx512_vnni) {
        WARN_SKIPPED("no AVX512-VNNI on this CPU");
        return;
    }
    const EnvGuard forced("JITMM_X86_LOWP_DOT", "1");
    std::mt19937 rng(1766);
    int it = 0;
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("avx512_vnni", threads)};
        for (int64_t m : {17, 33, 102, 255}) {
            for (int64_t n : {9, 28, 77}) {
                Case c;
                c.a = it % 2 ? JITMM_DTYPE_U8 : JITMM_DTYPE_S8;
                c.b = JITMM_DTYPE_S8;
                c.c = it % 3 == 1 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
                c.m = m;
                c.n = n;
                c.k = 2048 + kOdd[it % 8];
                c.tb = true;
                c.ta = it % 4 == 3;
                c.lda_pad = it % 5 == 1 ? 3 : 0;
                c.ldb_pad = it % 3 == 2 ? 5 : 0;
                c.batch = it % 6 == 4 ? 2 : 1;
                if (it % 7 == 2) {
                    c.a_fill = c.a == JITMM_DTYPE_U8 ? 255 : -128;
                    c.b_fill = -128;
                }
                if (c.c == JITMM_DTYPE_F32) {
                    c.alpha = 0.01f;
                    c.a_scale = JITMM_SCALE_PER_ROW;
                    c.b_scale = JITMM_SCALE_PER_COLUMN;
                    c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = (it % 2) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                }
                INFO("m " << m << " n " << n << " k " << c.k << " it " << it);
                check_case(e.e, c, rng);
                ++it;
            }
        }
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = 100; d.n = 28; d.k = 3000;
        d.a_type = d.b_type = JITMM_DTYPE_S8;
        d.c_type = JITMM_DTYPE_S32;
        d.trans_b = 1;
        jitmm_kernel* k = nullptr;
        REQUIRE(jitmm_kernel_create(e.e, &d, &k) == JITMM_STATUS_SUCCESS);
        jitmm_kernel_info info;
        info.struct_size = sizeof info;
        jitmm_kernel_get_info(k, &info);
        CHECK(std::string(info.recipe).find("dotNT") != std::string::npos);
        jitmm_kernel_release(k);
    }
}

TEST_CASE("x86 lowp VNNI dot products: A stored K x M transposed by vectors, s8 row sums by vpsadbw, exactly",
          "[x86][lowp]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::avx512_vnni) {
        WARN_SKIPPED("no AVX512-VNNI on this CPU");
        return;
    }
    // The dot path packs A (rows zero padded to whole 64-byte vectors): stored K x M through pack_a_transposed,
    // and an s8 A's row sums (its +128 compensation) over the padded rows. Rows 1-16 (lane tails of the byte
    // transposes), K tails of a vector, lda pads, batches, and the extreme sums (-128 and 127 everywhere).
    std::mt19937 rng(3035);
    const int64_t ms[] = {1, 3, 11, 16, 7, 2};
    const int64_t ks[] = {3035, 65, 1000, 64, 129, 700};
    for (const char* tier : {"avx512_vnni", "amx"}) {
        if (std::string(tier) == "amx" && jitmm::hw::cpu_info().best_isa < X86Isa::amx) continue;
        EngineGuard e{make_engine(tier, 1)};
        for (int it = 0; it < 12; ++it) {
            Case c;
            c.a = it % 3 == 2 ? JITMM_DTYPE_U8 : JITMM_DTYPE_S8;
            c.b = JITMM_DTYPE_S8;
            c.m = ms[it % 6];
            c.k = ks[(it + it / 6) % 6];
            c.n = 39 + 16 * 1024 / c.k;  // past the planner's kDotMinBBytes
            c.ta = it % 4 != 3;
            c.tb = true;
            c.lda_pad = it % 3 == 1 ? 13 : 0;
            c.batch = it % 4 == 0 ? 3 : 1;
            if (it % 5 == 4) {
                c.a_fill = c.a == JITMM_DTYPE_U8 ? 255 : (it % 2 ? 127 : -128);
                c.b_fill = -128;
            }
            INFO("tier " << tier << " it " << it);
            check_case(e.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp AMX: long K in 4 KB blocks and A read in place or packed by its stride", "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    std::mt19937 rng(4096);
    const jitmm_dtype ins[][2] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8},
                                  {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}};
    const jitmm_dtype int_outs[] = {JITMM_DTYPE_S32, JITMM_DTYPE_F32, JITMM_DTYPE_BF16};
    const jitmm_dtype half_outs[] = {JITMM_DTYPE_F32, JITMM_DTYPE_BF16, JITMM_DTYPE_F16};
    for (int threads : {1, 2, 4}) {
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (const auto& in : ins) {
            const bool int8 = is_int8(in[0]);
            const int64_t esz = int8 ? 1 : 2;
            // K in bytes: one 4 KB block exactly, a block and a tail, three blocks and a partial 64-byte step
            // (A packed), short rows read in place (256 and 512 bytes; 320 is an odd number of lines).
            for (int64_t k_bytes : {4096, 4096 + 128, 3 * 4096 + 64 + 2 * 4, 256, 320, 512, 2048}) {
                Case c;
                c.a = in[0];
                c.b = in[1];
                c.c = int8 ? int_outs[it % 3] : half_outs[it % 3];
                c.k = k_bytes / esz;
                c.m = std::vector<int64_t>{1, 7, 33, 64, 100, 1023 % 97, 40}[it % 7];
                c.n = std::vector<int64_t>{33, 64, 97, 1, 130}[it % 5];
                c.tb = it % 2 == 1;
                c.ta = it % 7 == 4;
                c.lda_pad = (it % 3 == 1) ? 64 / esz : 0;
                c.ldc_pad = (it % 4 == 2) ? 5 : 0;
                c.batch = (it % 5 == 3) ? 2 : 1;
                if (c.c != JITMM_DTYPE_S32) {
                    c.alpha = int8 ? 0.01f : 1.0f;
                    c.beta = (it % 3 == 2) ? 0.5f : 0.0f;
                    c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                }
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
    // One row tile (decode plan): several 2 KB K blocks and 2048-column B blocks, a column tail past them,
    // B row-major or stored N x K (the swapped path takes the latter when it fits), 1 and 3 threads.
    for (int threads : {1, 3}) {
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (jitmm_dtype t : {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_BF16}) {
            for (int64_t m : {1, 7, 16, 32}) {
                Case c;
                c.a = t;
                c.b = t == JITMM_DTYPE_BF16 ? t : JITMM_DTYPE_S8;
                c.c = t == JITMM_DTYPE_BF16 ? JITMM_DTYPE_BF16 : (it % 2 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32);
                c.m = m;
                c.n = 2048 + 33 + 16 * (it % 3);
                c.k = (t == JITMM_DTYPE_BF16 ? 2 * 1024 : 2 * 2048) + 64 * (it % 2) + (it % 3 == 2 ? 4 : 0);
                c.tb = it % 4 == 3;
                c.ldb_pad = it % 3 == 1 ? 16 : 0;
                c.ldc_pad = it % 2 ? 3 : 0;
                if (c.c != JITMM_DTYPE_S32) {
                    c.alpha = t == JITMM_DTYPE_BF16 ? 1.0f : 0.01f;
                    c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_GELU_TANH : JITMM_EPILOGUE_NONE;
                }
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
    // Swapped roles with the packed A past half of L2: K blocks with all of C^T's partial sums in the strip.
    for (int threads : {1, 3}) {
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (jitmm_dtype t : {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_BF16}) {
            for (int64_t m : {100, 256, 33}) {
                Case c;
                c.a = t;
                c.b = t == JITMM_DTYPE_BF16 ? t : JITMM_DTYPE_S8;
                const bool int8 = t != JITMM_DTYPE_BF16;
                c.c = int8 ? (it % 2 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32) : JITMM_DTYPE_F32;
                c.m = m;
                c.n = 97 + 32 * (it % 2);
                c.k = (int8 ? 4 : 2) * (1024 * 1024 / 2 / 256) * (m == 33 ? 8 : 1) + 64 * (it % 3);
                c.tb = true;
                c.ta = it % 4 == 3;
                c.ldb_pad = it % 3 == 1 ? 64 : 0;
                c.ldc_pad = it % 2 ? 5 : 0;
                if (c.c != JITMM_DTYPE_S32) {
                    c.alpha = int8 ? 0.01f : 1.0f;
                    c.beta = it % 3 == 2 ? 0.5f : 0.0f;
                    c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_SILU : JITMM_EPILOGUE_BIAS;
                    c.bias_layout = it % 4 < 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    if (int8 && it % 3 == 1) {
                        c.alpha = 1.0f;
                        c.a_scale = JITMM_SCALE_PER_ROW;
                        c.b_scale = JITMM_SCALE_PER_COLUMN;
                    }
                } else {
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                    c.bias_type = JITMM_DTYPE_S32;
                    c.bias_layout = it % 4 == 0 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                }
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
    // Row and column tails over three K blocks with the strip between them.
    EngineGuard e{make_engine("amx", 2)};
    for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_BF16}) {
        Case c;
        c.a = c.b = t;
        c.c = t == JITMM_DTYPE_S8 ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
        c.m = 97;
        c.n = 161;
        c.k = t == JITMM_DTYPE_S8 ? 9000 : 4500;
        check_case(e.e, c, rng);
    }
    // The recipes say so: 4 KB K blocks for long K, A in place when its stride spreads the tile over the L1
    // sets, packed when a power-of-two stride would crowd them.
    auto recipe_of = [&](int64_t m, int64_t n, int64_t k) {
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = m; d.n = n; d.k = k;
        d.a_type = d.b_type = JITMM_DTYPE_BF16;
        jitmm_kernel* kernel = nullptr;
        REQUIRE(jitmm_kernel_create(e.e, &d, &kernel) == JITMM_STATUS_SUCCESS);
        jitmm_kernel_info info;
        info.struct_size = sizeof info;
        jitmm_kernel_get_info(kernel, &info);
        std::string r = info.recipe;
        jitmm_kernel_release(kernel);
        return r;
    };
    CHECK(recipe_of(2048, 2048, 4096).find("kc=2048") != std::string::npos);
    // One row tile: a thread's K block of packed B is at most 512 KB (2 threads: 2048 columns each, 128 bf16 rows).
    CHECK(recipe_of(16, 4096, 4096).find("kc=128 ") != std::string::npos);
    CHECK(recipe_of(16, 4096, 4096).find("nc=2048") != std::string::npos);  // and 2048-column B blocks
    {
        jitmm_matmul_desc d;  // swapped with the packed A past half of L2: K blocks
        jitmm_matmul_desc_init(&d);
        d.m = 128; d.n = 4096; d.k = 11008;
        d.a_type = d.b_type = JITMM_DTYPE_BF16;
        d.trans_b = 1;
        jitmm_kernel* kernel = nullptr;
        REQUIRE(jitmm_kernel_create(e.e, &d, &kernel) == JITMM_STATUS_SUCCESS);
        jitmm_kernel_info info;
        info.struct_size = sizeof info;
        jitmm_kernel_get_info(kernel, &info);
        const std::string r = info.recipe;
        jitmm_kernel_release(kernel);
        CHECK(r.find("swapAB") != std::string::npos);
        if (jitmm::hw::cpu_info().l2_bytes > 0 && jitmm::hw::cpu_info().l2_bytes <= 4 * 1024 * 1024)
            CHECK(r.find("kc=11008") == std::string::npos);
    }
    CHECK(recipe_of(256, 256, 256).find("directA") != std::string::npos);
    CHECK(recipe_of(1024, 1024, 1024).find("packA") != std::string::npos);
}

TEST_CASE("x86 lowp AMX: packed A panels kept across N blocks (several K blocks, tails, threads)", "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    // 64-column B blocks make several N blocks per task: the A panels of the first are reused by the others.
    setenv("JITMM_X86_LOWP_NC", "64", 1);
    std::mt19937 rng(777);
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_U8, JITMM_DTYPE_BF16}) {
            for (int variant = 0; variant < 3; ++variant) {
                Case c;
                c.a = t;
                c.b = t == JITMM_DTYPE_BF16 ? t : JITMM_DTYPE_S8;
                const bool int8 = t != JITMM_DTYPE_BF16;
                c.c = int8 ? (variant == 2 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32) : JITMM_DTYPE_F32;
                c.m = std::vector<int64_t>{70, 96, 33}[variant];
                c.n = std::vector<int64_t>{200, 257, 128}[variant];
                // 2 KB rows: two K blocks; A packed for its power-of-two stride, or transposed.
                c.k = (int8 ? 2048 : 1024) + (variant == 1 ? 64 : 0);
                c.ta = variant == 2;
                c.tb = it % 2 == 1;
                c.ldc_pad = variant == 1 ? 3 : 0;
                if (c.c != JITMM_DTYPE_S32) {
                    c.alpha = int8 ? 0.01f : 1.0f;
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                    c.beta = variant == 2 ? 0.5f : 0.0f;
                }
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
    unsetenv("JITMM_X86_LOWP_NC");
}

TEST_CASE("x86 lowp AMX: swapped calls prefetching the next row tile's rows of B stay exact", "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    std::mt19937 rng(4242);
    EngineGuard e{make_engine("amx", 1)};
    // Swapped roles with B's rows adjacent and 1 MB of B: each row tile's calls prefetch the next row tile's
    // rows (a share per call; 2 and 4 calls per row tile, column and row tails).
    for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_BF16}) {
        for (int64_t m : {40, 100}) {
            Case c;
            c.a = t;
            c.b = t == JITMM_DTYPE_BF16 ? t : JITMM_DTYPE_S8;
            c.c = t == JITMM_DTYPE_BF16 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
            c.m = m;
            c.n = 520;
            c.k = t == JITMM_DTYPE_BF16 ? 1024 : 2048;
            c.tb = true;
            check_case(e.e, c, rng);
        }
    }
    // The vector epilogue after the K loop reloads r11 (the prefetch pointer) with its scales.
    Case c;
    c.a = c.b = JITMM_DTYPE_S8;
    c.c = JITMM_DTYPE_F32;
    c.m = 70;
    c.n = 520;
    c.k = 2048;
    c.tb = true;
    c.a_scale = JITMM_SCALE_PER_ROW;
    c.b_scale = JITMM_SCALE_PER_COLUMN;
    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
    c.bias_layout = JITMM_BIAS_PER_ROW;
    check_case(e.e, c, rng);
}

TEST_CASE("x86 lowp AMX: tails of 16 rows or columns share the full tile's configuration, others switch",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    // 48 = 32 + 16: every variant has the full tile's configuration bytes (one ldtilecfg per task); 23, 39, 7:
    // tails with their own configurations interleaved with the shared one; several K blocks (2 KB rows) and
    // epilogues through the stack block; threads split the tails across tasks.
    std::mt19937 rng(4848);
    const int64_t dims[] = {48, 80, 16, 23, 39, 112, 7};
    for (int threads : {1, 2, 3}) {
        INFO("threads " << threads);
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_U8, JITMM_DTYPE_BF16}) {
            for (int s = 0; s < 5; ++s, ++it) {
                Case c;
                c.a = t;
                c.b = t == JITMM_DTYPE_BF16 ? t : JITMM_DTYPE_S8;
                const bool int8 = t != JITMM_DTYPE_BF16;
                c.m = dims[(it + threads) % 7];
                c.n = dims[(it * 3 + 1) % 7];
                c.k = s == 4 ? (int8 ? 4160 : 2080) : std::vector<int64_t>{48, 64, 130, 1000}[s];
                c.tb = s % 2 == 1;
                c.c = int8 ? (s == 2 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32) : JITMM_DTYPE_F32;
                if (s == 2) {
                    c.alpha = int8 ? 0.01f : 1.0f;
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                }
                check_case(e.e, c, rng);
            }
        }
    }
}

TEST_CASE("x86 lowp AMX: column tails of their own configuration run after the block's full panels, exactly",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    // N = 32 x panels + a tail of 1, 4, 15 or 20 columns: every row tile of an M block runs its full panels, then
    // every row tile its tail panel. A read in place (few panels, K tails copied at the end of A), packed and kept
    // across N blocks, packed by M block (TN), packed once for the threads; batches of small calls; several K
    // and M blocks (the strip), the vector epilogue, row tails, ld pads.
    struct Shape {
        int64_t m, n, k;
        bool ta, tb;
        int64_t batch;
        const char *kc, *mc, *nc;  // forced blocks ("" keeps the plan's)
        int threads;
    };
    const Shape shapes[] = {
        {290, 33, 2, false, false, 1, "", "", "", 1},      {197, 47, 36, false, true, 1, "", "64", "", 1},
        {131, 68, 21, false, false, 1, "", "", "", 1},      {70, 36, 57, false, false, 3, "", "", "", 1},
        {100, 52, 282, false, true, 2, "128", "64", "", 1}, {161, 100, 130, false, false, 1, "64", "64", "64", 1},
        {99, 116, 200, true, false, 1, "", "64", "64", 1},  {150, 260, 140, false, true, 1, "", "", "96", 2},
        {64, 84, 64, true, true, 2, "", "", "", 1},         {100, 300, 200, false, false, 1, "64", "64", "96", 1},
    };
    std::mt19937 rng(3547);
    int it = 0;
    for (const Shape& sh : shapes) {
        EngineGuard e{make_engine("amx", sh.threads)};
        auto force = [](const char* name, const char* value) {
            return *value != '\0' ? std::make_unique<EnvGuard>(name, value) : nullptr;
        };
        const auto kc = force("JITMM_X86_LOWP_KC", sh.kc), mc = force("JITMM_X86_LOWP_MC", sh.mc),
                   nc = force("JITMM_X86_LOWP_NC", sh.nc);
        for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_U8}) {
            Case c;
            c.a = t;
            c.b = JITMM_DTYPE_S8;
            c.m = sh.m;
            c.n = sh.n;
            c.k = sh.k;
            c.ta = sh.ta;
            c.tb = sh.tb;
            c.batch = sh.batch;
            c.lda_pad = it % 3 == 1 ? 5 : 0;
            c.ldc_pad = it % 4 == 2 ? 3 : 0;
            if (it++ % 5 == 3) {  // the last K block through the vector epilogue
                c.c = JITMM_DTYPE_F32;
                c.alpha = 0.01f;
                c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
            }
            check_case(e.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp AMX: batches of small calls with tails run tile kind by tile kind over groups of batches",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    // Row tails (33-63 rows) and column tails (not 16 columns) of their own tile configurations: every batch of a
    // group packs its B, then each kind of tile runs over the group's batches. Several groups (small B: up to 16
    // KB a group), the last one short; the zero point's column sums per batch, vector epilogues with bias and
    // scales, an A packed (bf16 rows off cache lines), K tails, ld pads, 1 and 2 threads.
    struct Shape {
        int64_t m, n, k, batch;
    };
    const Shape shapes[] = {{55, 2, 3, 23}, {40, 40, 40, 17}, {33, 17, 64, 19}, {63, 70, 20, 9}, {45, 100, 64, 5}};
    std::mt19937 rng(5523);
    int it = 0;
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("amx", threads)};
        for (const Shape& sh : shapes) {
            for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_U8, JITMM_DTYPE_BF16}) {
                Case c;
                c.a = t;
                c.b = t == JITMM_DTYPE_BF16 ? t : JITMM_DTYPE_S8;
                c.c = t == JITMM_DTYPE_BF16 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
                c.m = sh.m; c.n = sh.n; c.k = sh.k; c.batch = sh.batch;
                c.tb = it % 2 == 1;
                c.lda_pad = it % 3 == 1 ? (t == JITMM_DTYPE_BF16 ? 3 : 64) : 0;
                c.ldc_pad = it % 4 == 2 ? 5 : 0;
                if (t == JITMM_DTYPE_U8 && it % 3 == 0) c.zero_point = 7;
                if (it % 5 == 4) {
                    c.c = JITMM_DTYPE_F32;
                    c.alpha = t == JITMM_DTYPE_BF16 ? 1.0f : 0.01f;
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                    c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    if (t != JITMM_DTYPE_BF16) c.b_scale = JITMM_SCALE_PER_COLUMN;
                }
                INFO("threads " << threads << " case " << it);
                ++it;
                check_case(e.e, c, rng);
            }
        }
    }
}

TEST_CASE("x86 lowp AMX: one call runs a row tile's column panels (strip and direct stores, tails, K and N blocks)",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    // Variants without a vector epilogue (strip stores, direct s32/f32 stores) run every full panel of a row
    // tile in one call, loading the next panel's first tiles before the stores; the column tail and the
    // epilogue variants run alone. Small K blocks (3-5 per call: first, middle and last phases) and B blocks of
    // 3 or 5 panels (several N blocks, the last one short), row and column tails, ld pads, threads 1-3.
    std::mt19937 rng(3232);
    for (int threads : {1, 2, 3}) {
        INFO("threads " << threads);
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_U8, JITMM_DTYPE_BF16}) {
            for (int s = 0; s < 4; ++s, ++it) {
                const bool int8 = t != JITMM_DTYPE_BF16;
                EnvGuard kc("JITMM_X86_LOWP_KC", s == 3 ? "4096" : int8 ? "128" : "64");
                EnvGuard nc("JITMM_X86_LOWP_NC", s % 2 == 0 ? "96" : "160");
                Case c;
                c.a = t;
                c.b = int8 ? JITMM_DTYPE_S8 : t;
                c.m = std::vector<int64_t>{64, 45, 97, 32}[s];
                c.n = std::vector<int64_t>{256, 200, 330, 512}[s];
                c.k = int8 ? std::vector<int64_t>{384, 640, 200, 64}[s] : std::vector<int64_t>{192, 320, 100, 32}[s];
                c.tb = it % 2 == 1;
                c.ldc_pad = s == 1 ? 5 : 0;
                c.lda_pad = s == 2 ? 64 : 0;
                c.c = int8 ? (s == 2 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32) : JITMM_DTYPE_F32;
                if (s == 2) {  // the last K block through the vector epilogue, one panel per call
                    c.alpha = int8 ? 0.01f : 1.0f;
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                }
                if (t == JITMM_DTYPE_U8 && s == 1) c.zero_point = 3;  // compensation: the epilogue again
                check_case(e.e, c, rng);
            }
        }
    }
}

TEST_CASE("x86 lowp AMX: C written with non-temporal stores (aligned rows streamed, others by tile stores)",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    // JITMM_X86_LOWP_STREAM_C=1 turns the streamed stores on at any size. They serve the direct-store variants
    // (s32 or f32 C, beta 0, no epilogue) where C's rows are whole cache lines (ldc a multiple of 16 elements,
    // C 64-byte aligned); an ldc of 5 elements over keeps tile stores in the same code, batches move C's
    // alignment, column tails and epilogue variants never stream. Several K and N blocks (strip phases before
    // the streamed last one), long 4 KB K blocks, one K block of short panels, A packed (K tails) or read in
    // place at 4096-byte strides, threads 1-4.
    EnvGuard stream("JITMM_X86_LOWP_STREAM_C", "1");
    std::mt19937 rng(7070);
    for (int threads : {1, 2, 3, 4}) {
        INFO("threads " << threads);
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_U8, JITMM_DTYPE_BF16}) {
            for (int s = 0; s < 7; ++s, ++it) {
                const bool int8 = t != JITMM_DTYPE_BF16;
                const int64_t esz = int8 ? 1 : 2;
                // Blocking: small K and N blocks (s 0-2), the planner's own (s 3-6: long K, one K block, three
                // 1 KB K blocks with A read in place at a 3 KB stride).
                std::optional<EnvGuard> kc, nc;
                if (s < 3) {
                    kc.emplace("JITMM_X86_LOWP_KC", int8 ? "128" : "64");
                    nc.emplace("JITMM_X86_LOWP_NC", s == 1 ? "160" : "96");
                }
                Case c;
                c.a = t;
                c.b = int8 ? JITMM_DTYPE_S8 : t;
                c.c = int8 ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
                c.m = std::vector<int64_t>{64, 45, 97, 33, 70, 48, 40}[s];
                c.n = std::vector<int64_t>{256, 200, 330, 1008, 96, 80, 64}[s];
                c.k = std::vector<int64_t>{384, 640, 200, 4096 + 64, 4096, 1024, 3072}[s] / esz;
                c.tb = it % 2 == 1;
                c.batch = s == 1 || s == 4 ? 2 : 1;
                c.ldc_pad = std::vector<int64_t>{0, 5, 0, 16, 0, 0, 0}[s];
                c.lda_pad = s == 4 ? 4096 / esz : s == 2 ? 64 / esz : 0;  // s 4: rows 8 KB apart
                if (s == 5 && it % 3 == 0) {  // the epilogue variants beside the streamed layout
                    c.c = JITMM_DTYPE_F32;
                    c.alpha = int8 ? 0.01f : 1.0f;
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                }
                if (t == JITMM_DTYPE_U8 && s == 2) c.zero_point = 3;  // compensation: the epilogue again
                check_case(e.e, c, rng);
            }
        }
    }
}

TEST_CASE("x86 lowp AMX: C rows off cache lines staged through the L1 block (plain stores)", "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    // JITMM_X86_LOWP_STAGE_C=1 stages every direct-store layout whose C rows start off 64-byte lines (ldc not a
    // multiple of 16 elements): full 32-column panels go through the stack block and are copied out over the
    // next panel's K steps, column tails keep tile stores. Several K and N blocks, one K step per panel (the
    // copy-out all at the next store) and long ones, A packed or in place, transposed B, batches (each batch's C
    // at another offset from a line), f32 / s32 C with scales beside it (the vector epilogue), threads 1-4.
    std::optional<EnvGuard> stage;
    stage.emplace("JITMM_X86_LOWP_STAGE_C", "1");
    std::mt19937 rng(7171);
    for (int threads : {1, 2, 3, 4}) {
        INFO("threads " << threads);
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_U8, JITMM_DTYPE_BF16}) {
            for (int s = 0; s < 6; ++s, ++it) {
                const bool int8 = t != JITMM_DTYPE_BF16;
                const int64_t esz = int8 ? 1 : 2;
                std::optional<EnvGuard> kc, nc;
                if (s < 2) {
                    kc.emplace("JITMM_X86_LOWP_KC", int8 ? "128" : "64");
                    nc.emplace("JITMM_X86_LOWP_NC", s == 1 ? "160" : "96");
                }
                Case c;
                c.a = t;
                c.b = int8 ? JITMM_DTYPE_S8 : t;
                c.c = int8 ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
                c.m = std::vector<int64_t>{64, 45, 97, 33, 70, 130}[s];
                c.n = std::vector<int64_t>{256, 201, 330, 999, 96, 255}[s];
                c.k = std::vector<int64_t>{384, 640, 64, 4096 + 64, 1024, 512}[s] / esz;
                c.tb = it % 2 == 1;
                c.batch = s == 1 || s == 4 ? 3 : 1;
                c.ldc_pad = std::vector<int64_t>{1, 5, 3, 0, 7, 0}[s];
                c.lda_pad = s == 4 ? 4096 / esz : 0;
                if (s == 5 && it % 3 == 0) {  // the epilogue variants beside the staged layout
                    c.c = JITMM_DTYPE_F32;
                    c.alpha = int8 ? 0.01f : 1.0f;
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                }
                check_case(e.e, c, rng);
            }
        }
    }
    // Without the knob the planner stages a C of rows off lines past 128 KB over K blocks of 4 steps or more, and
    // keeps tile stores for rows on lines, a short K or a C that stays small.
    stage.reset();
    EngineGuard e{make_engine("amx", 1)};
    auto recipe_of = [&](int64_t m, int64_t n, int64_t k, int64_t ldc) {
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = m; d.n = n; d.k = k; d.ldc = ldc;
        d.a_type = d.b_type = JITMM_DTYPE_S8;
        d.c_type = JITMM_DTYPE_S32;
        jitmm_kernel* kernel = nullptr;
        REQUIRE(jitmm_kernel_create(e.e, &d, &kernel) == JITMM_STATUS_SUCCESS);
        jitmm_kernel_info info;
        info.struct_size = sizeof info;
        jitmm_kernel_get_info(kernel, &info);
        std::string r = info.recipe;
        jitmm_kernel_release(kernel);
        return r;
    };
    CHECK(recipe_of(256, 999, 512, 999).find("stageC") != std::string::npos);
    CHECK(recipe_of(256, 992, 512, 1000).find("stageC") != std::string::npos);
    CHECK(recipe_of(256, 992, 512, 992).find("stageC") == std::string::npos);  // rows on lines
    CHECK(recipe_of(256, 999, 64, 999).find("stageC") == std::string::npos);   // one K step a panel
    CHECK(recipe_of(32, 255, 512, 255).find("stageC") == std::string::npos);   // 32 KB of C
}

TEST_CASE("x86 lowp: B packed by the VBMI byte permutes and by the AVX2 unpacks gives the same results",
          "[x86][lowp]") {
    // Row-major B (K x N) through both packers: int8 k groups of 4 (with the column sums of the compensation)
    // and 16-bit pairs; widths with panel tails, K tails inside a group, ld pads, AMX and VNNI tiers (int8 panels of
    // 64 columns or more by whole 64-byte row loads where the VBMI packer takes them).
    std::mt19937 rng(4242);
    const jitmm_dtype ins[][2] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8},
                                  {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}};
    const int64_t ns[] = {1, 17, 32, 45, 100, 257};
    const int64_t ks[] = {1, 3, 64, 67, 130, 2050};
    for (const char* vbmi : {"1", "0"}) {
        EnvGuard knob("JITMM_X86_PACK_VBMI", vbmi);
        for (const char* tier : {"amx", "avx512_vnni"}) {
            if (std::string(tier) == "amx" && jitmm::hw::cpu_info().best_isa < X86Isa::amx) continue;
            if (jitmm::hw::cpu_info().best_isa < X86Isa::avx512_vnni) continue;
            for (int threads : {1, 2}) {
                INFO("vbmi " << vbmi << " tier " << tier << " threads " << threads);
                EngineGuard e{make_engine(tier, threads)};
                int it = 0;
                for (const auto& in : ins) {
                    for (int s = 0; s < 6; ++s, ++it) {
                        Case c;
                        c.a = in[0];
                        c.b = in[1];
                        c.c = c.a == JITMM_DTYPE_BF16 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
                        c.m = it % 3 == 0 ? 5 : 40;
                        c.n = ns[(it + threads) % 6];
                        c.k = ks[(it * 5 + 1) % 6];
                        c.ldb_pad = it % 4 == 1 ? 3 : 0;
                        c.zero_point = it % 5 == 2 && c.a == JITMM_DTYPE_U8 ? 77 : 0;
                        check_case(e.e, c, rng);
                    }
                }
            }
        }
    }
}

namespace {

// A low-precision A packer's step, the A type it packs and the byte it xors each value with (an s8 A shifted to u8).
struct PackAStep {
    jitmm::plan::LowpStep step;
    jitmm_dtype type;
    uint8_t flip;
};

constexpr uint8_t kUntouchedPanelByte = 0xa5;

// Bytes of a packed A panel (panel_rows x panel_ld values of esz bytes, filled with kUntouchedPanelByte before
// packing) that differ from what the packer must write: source(r, k, byte) ^ flip for rows r < rows and k < k_len,
// zeros up to k_padded, the panel untouched everywhere else.
template <typename Source>
int64_t wrong_panel_bytes(const std::vector<uint8_t>& panel, int64_t panel_rows, int64_t panel_ld, int64_t rows,
                          int64_t k_len, int64_t k_padded, int64_t esz, uint8_t flip, Source source) {
    int64_t wrong = 0;
    for (int64_t r = 0; r < panel_rows; ++r)
        for (int64_t k = 0; k < panel_ld; ++k)
            for (int64_t b = 0; b < esz; ++b) {
                uint8_t want = kUntouchedPanelByte;
                if (r < rows && k < k_len) want = static_cast<uint8_t>(source(r, k, b) ^ flip);
                else if (r < rows && k < k_padded) want = 0;
                wrong += panel[size_t((r * panel_ld + k) * esz + b)] != want;
            }
    return wrong;
}

}  // namespace

TEST_CASE("x86 lowp: a transposed A packs into the panels element by element would give", "[x86][lowp]") {
    // A stored K x M packed for the steps that read A as stored (the vector transpose where the chip has
    // AVX-512 BW, else the scalar loop): row counts around the 8- and 16-row blocks and the wide passes (256
    // rows and more), K tails inside and past a 64-byte vector, zero padding up to k_padded, ld > width, offsets i0 and k0, an s8 A shifted for VNNI.
    // Panel bytes past each row's k_padded and rows past `rows` must stay as they were.
    using jitmm::plan::LowpStep;
    const PackAStep steps[] = {{LowpStep::amx_int8, JITMM_DTYPE_S8, 0},
                               {LowpStep::vnni_u8s8, JITMM_DTYPE_S8, 0x80},
                               {LowpStep::vnni_u8s8, JITMM_DTYPE_U8, 0},   {LowpStep::amx_bf16, JITMM_DTYPE_BF16, 0},
                               {LowpStep::dot_bf16, JITMM_DTYPE_BF16, 0}};
    // (From 256 rows and 64 bytes of K, the stored lines are walked whole, in passes of up to 512 rows; so are
    // panel rows of one 16-byte piece at any row count: 8 bf16, 16 int8.)
    const int row_counts[] = {1, 5, 8, 9, 15, 16, 17, 31, 32, 256, 300, 577};
    const int64_t k_lens[] = {1, 2, 7, 12, 16, 31, 32, 33, 64, 65, 100, 130};
    std::mt19937 rng(7007);
    std::uniform_int_distribution<int> byte(0, 255);
    int it = 0;
    for (const PackAStep& st : steps) {
        const int64_t esz = type_size(st.type);
        const int64_t group = jitmm::plan::step_group(st.step);
        for (int rows : row_counts) {
            for (int64_t k_len : k_lens) {
                ++it;
                const int64_t i0 = it % 3, k0 = it % 5;
                const int64_t lda = i0 + rows + (it % 4 == 0 ? 0 : 1 + it % 9);
                const int64_t vector_k = 64 / esz;
                const int64_t k_padded = it % 2 ? (k_len + group - 1) / group * group
                                                : (k_len + vector_k - 1) / vector_k * vector_k;
                const int64_t panel_ld = k_padded + (it % 3 == 1 ? 8 : 0);
                INFO("step " << int(st.step) << " rows " << rows << " k_len " << k_len << " i0 " << i0 << " k0 "
                             << k0 << " lda " << lda << " k_padded " << k_padded << " panel_ld " << panel_ld);
                std::vector<uint8_t> a(size_t((k0 + k_len) * lda * esz));
                for (auto& v : a) v = static_cast<uint8_t>(byte(rng));
                const int panel_rows = rows + 2;
                std::vector<uint8_t> panel(size_t(panel_rows * panel_ld * esz), kUntouchedPanelByte);
                jitmm::x86::pack_a_lowp(st.step, st.type, a.data(), lda, true, i0, rows, k0, k_len, k_padded,
                                        panel_ld, panel.data());
                REQUIRE(wrong_panel_bytes(panel, panel_rows, panel_ld, rows, k_len, k_padded, esz, st.flip,
                                          [&](int64_t r, int64_t k, int64_t b) {
                                              return a[size_t(((k0 + k) * lda + i0 + r) * esz + b)];
                                          }) == 0);
            }
        }
    }
}

TEST_CASE("x86 lowp: short A rows packed back to back, several to a vector (byte permutes), never past A's end",
          "[x86][lowp]") {
    // A stored M x K with padded rows of at most 32 bytes packed densely (panel_ld = k_padded): several rows per
    // vector where the chip has VBMI, the rest row by row; an s8 A shifted for VNNI. A ends at a PROT_NONE page;
    // the panel past its rows must stay as it was.
    using jitmm::plan::LowpStep;
    const PackAStep steps[] = {{LowpStep::vnni_u8s8, JITMM_DTYPE_S8, 0x80}, {LowpStep::vnni_u8s8, JITMM_DTYPE_U8, 0},
                               {LowpStep::dot_bf16, JITMM_DTYPE_BF16, 0}, {LowpStep::amx_int8, JITMM_DTYPE_S8, 0}};
    std::mt19937 rng(7117);
    std::uniform_int_distribution<int> byte(0, 255);
    int it = 0;
    for (const PackAStep& st : steps) {
        const int64_t esz = type_size(st.type);
        const int64_t group = jitmm::plan::step_group(st.step);
        for (int rows : {1, 2, 3, 5, 6, 12, 13, 64, 333}) {
            for (int64_t k_len = 1; k_len * esz <= 32; ++k_len) {
                ++it;
                const int64_t k_padded = (k_len + group - 1) / group * group;
                if (k_padded * esz > 32) continue;
                const int64_t lda = k_len + (it % 3 == 0 ? 0 : it % 7);
                const int64_t i0 = it % 2;
                const int64_t bytes = ((i0 + rows - 1) * lda + k_len) * esz;
                GuardedBytes guarded_memory(static_cast<size_t>(bytes));
                auto* a = guarded_memory.data();
                for (int64_t i = 0; i < bytes; ++i) a[i] = static_cast<uint8_t>(byte(rng));
                INFO("step " << int(st.step) << " rows " << rows << " k_len " << k_len << " lda " << lda << " i0 "
                             << i0);
                const int panel_rows = rows + 2;
                std::vector<uint8_t> panel(size_t(panel_rows * k_padded * esz), kUntouchedPanelByte);
                jitmm::x86::pack_a_lowp(st.step, st.type, a, lda, false, i0, rows, 0, k_len, k_padded, k_padded,
                                        panel.data());
                REQUIRE(wrong_panel_bytes(panel, panel_rows, k_padded, rows, k_len, k_padded, esz, st.flip,
                                          [&](int64_t r, int64_t k, int64_t b) {
                                              return a[size_t(((i0 + r) * lda + k) * esz + b)];
                                          }) == 0);
            }
        }
    }
}

TEST_CASE("x86 lowp: A stored K x M (TN, TT) over odd rows, K tails, ld pads, tiers and threads", "[x86][lowp]") {
    // The transposing A packer through whole calls: row counts that leave 8- and 16-row block tails, K tails
    // inside a 64-byte vector, several K blocks, lda > M, int8 (exact) and 16-bit inputs, 1 and 3 threads.
    std::mt19937 rng(7008);
    const jitmm_dtype ins[][2] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8},
                                  {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}, {JITMM_DTYPE_F16, JITMM_DTYPE_F16}};
    const int64_t ms[] = {1, 7, 17, 33, 65, 100, 250};
    const int64_t ns[] = {1, 16, 45, 130};
    const int64_t ks[] = {1, 31, 33, 67, 130, 600, 1100};
    for (const Tier& tier : runnable_tiers()) {
        for (int threads : {1, 3}) {
            INFO("tier " << tier.name << " threads " << threads);
            EngineGuard e{make_engine(tier.name, threads)};
            for (int it = 0; it < 14; ++it) {
                Case c;
                const auto& in = ins[it % 4];
                c.a = in[0];
                c.b = in[1];
                c.c = is_int8(c.a) ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
                c.m = ms[(it * 3 + threads) % 7];
                c.n = ns[(it + threads) % 4];
                c.k = ks[(it * 5 + 1) % 7];
                c.ta = true;
                c.tb = it % 3 == 1;
                c.lda_pad = it % 3 == 0 ? 0 : 1 + it % 8;
                c.ldb_pad = it % 4 == 2 ? 5 : 0;
                check_case(e.e, c, rng);
            }
        }
    }
}

TEST_CASE("x86 lowp: long K with few columns (A read in place past L1, narrow B packed in long slices)",
          "[x86][lowp]") {
    // A tile larger than L1 (4 KB K blocks) is read in place whatever its stride, also a power of two; a narrow
    // row-major B (rows of 64-128 bytes) is packed in slices of many rows, with a K tail inside the last k group
    // and ld pads. Both B packers, AMX and VNNI tiers (the latter with the s8 A's column sums), 1 and 2 threads.
    std::mt19937 rng(64064);
    for (const char* vbmi : {"1", "0"}) {
        EnvGuard knob("JITMM_X86_PACK_VBMI", vbmi);
        for (const char* tier : {"amx", "avx512_vnni"}) {
            if (std::string(tier) == "amx" && jitmm::hw::cpu_info().best_isa < X86Isa::amx) continue;
            if (jitmm::hw::cpu_info().best_isa < X86Isa::avx512_vnni) continue;
            for (int threads : {1, 2}) {
                INFO("vbmi " << vbmi << " tier " << tier << " threads " << threads);
                EngineGuard e{make_engine(tier, threads)};
                int it = 0;
                for (jitmm_dtype t : {JITMM_DTYPE_S8, JITMM_DTYPE_U8, JITMM_DTYPE_BF16}) {
                    const bool int8 = t != JITMM_DTYPE_BF16;
                    const int64_t esz = int8 ? 1 : 2;
                    for (int s = 0; s < 4; ++s, ++it) {
                        Case c;
                        c.a = t;
                        c.b = int8 ? JITMM_DTYPE_S8 : t;
                        c.c = int8 ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
                        c.m = std::vector<int64_t>{64, 100, 33, 160}[s];
                        c.n = std::vector<int64_t>{64 / esz, 16, 45, 128 / esz}[s];
                        c.k = std::vector<int64_t>{4096, 4096 + 6, 2 * 4096 + 64, 4096 + 2}[s] / esz;
                        c.lda_pad = s == 2 ? 64 / esz : 0;   // stays 64-byte aligned: in place
                        c.ldb_pad = s == 1 ? 3 : s == 3 ? 16 : 0;
                        c.ldc_pad = s % 2 ? 5 : 0;
                        c.zero_point = c.a == JITMM_DTYPE_U8 && s == 1 ? 77 : 0;
                        check_case(e.e, c, rng);
                    }
                }
            }
        }
    }
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) return;
    EngineGuard e{make_engine("amx", 1)};
    auto recipe_of = [&](int64_t m, int64_t n, int64_t k, jitmm_dtype t) {
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = m; d.n = n; d.k = k;
        d.a_type = d.b_type = t;
        d.c_type = t == JITMM_DTYPE_BF16 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
        jitmm_kernel* kernel = nullptr;
        REQUIRE(jitmm_kernel_create(e.e, &d, &kernel) == JITMM_STATUS_SUCCESS);
        jitmm_kernel_info info;
        info.struct_size = sizeof info;
        jitmm_kernel_get_info(kernel, &info);
        std::string r = info.recipe;
        jitmm_kernel_release(kernel);
        return r;
    };
    // 4 KB rows: the 128 KB A tile streams from L2 anyway, so it is read in place (no copy).
    CHECK(recipe_of(64, 64, 4096, JITMM_DTYPE_S8).find("directA") != std::string::npos);
    CHECK(recipe_of(4096, 16, 4096, JITMM_DTYPE_S8).find("directA") != std::string::npos);
    CHECK(recipe_of(64, 64, 2048, JITMM_DTYPE_BF16).find("directA") != std::string::npos);
}

TEST_CASE("x86 lowp AVX-VNNI: the avx2 tier runs VEX vpdpbusd on ymm, exactly", "[x86][lowp]") {
    if (!jitmm::hw::cpu_info().avx_vnni || jitmm::hw::cpu_info().best_isa < X86Isa::avx2) {
        WARN_SKIPPED("no AVX-VNNI on this CPU (the avx2 tier widens int8 to s16 there)");
        return;
    }
    std::mt19937 rng(715);
    // The tier is chosen for s8 B at avx2 (u8 B keeps s16), and JITMM_X86_AVX_VNNI=0 turns it off.
    {
        EngineGuard e{make_engine("avx2", 1)};
        for (jitmm_dtype a : {JITMM_DTYPE_U8, JITMM_DTYPE_S8}) {
            for (int tb = 0; tb < 2; ++tb) {
                for (int64_t m : {1, 16, 256}) {
                    jitmm_matmul_desc d;
                    jitmm_matmul_desc_init(&d);
                    d.m = m; d.n = 256; d.k = 512;
                    d.a_type = a; d.b_type = JITMM_DTYPE_S8;
                    d.c_type = JITMM_DTYPE_S32;
                    d.trans_b = tb;
                    INFO(jitmm_dtype_name(a) << " m " << m << " tb " << tb);
                    CHECK(generator_of(e.e, d) == "x86_int8_avxvnni_avx2");  // never the zmm dot path
                }
            }
        }
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = d.n = d.k = 64;
        d.a_type = d.b_type = JITMM_DTYPE_U8;
        d.c_type = JITMM_DTYPE_S32;
        CHECK(generator_of(e.e, d) == "x86_int8_s16_avx2");
    }
    {
        EnvGuard off("JITMM_X86_AVX_VNNI", "0");
        EngineGuard e{make_engine("avx2", 1)};
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = d.n = d.k = 64;
        d.a_type = d.b_type = JITMM_DTYPE_S8;
        d.c_type = JITMM_DTYPE_S32;
        CHECK(generator_of(e.e, d) == "x86_int8_s16_avx2");
    }
    const jitmm_dtype ins[][2] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8}};
    const int64_t odd[] = {1, 7, 33, 1023, 5, 64, 17, 9};
    for (int threads : {1, 2, 3}) {
        INFO("threads " << threads);
        EngineGuard e{make_engine("avx2", threads)};
        int it = 0;
        // Exact s32 over odd shapes, every layout, leading dimensions past the width, zero points.
        for (const auto& in : ins) {
            for (int layout = 0; layout < 4; ++layout) {
                for (int s = 0; s < 3; ++s, ++it) {
                    Case c;
                    c.a = in[0];
                    c.b = in[1];
                    c.m = odd[(it * 3 + threads) % 8];
                    c.n = odd[(it * 5 + 1) % 8];
                    c.k = odd[(it * 7 + 2) % 8];
                    if (c.m * c.n * c.k > 40000000) c.k = 37;  // keep the reference loop short
                    c.ta = layout & 1;
                    c.tb = layout & 2;
                    c.lda_pad = it % 3;
                    c.ldb_pad = (it % 4 == 2) ? 3 : 0;
                    c.ldc_pad = (it % 4 == 1) ? 5 : 0;
                    c.zero_point = it % 5 == 0 ? (c.a == JITMM_DTYPE_U8 ? 113 : -9) : 0;
                    c.batch = (it % 7 == 6) ? 2 : 1;
                    check_case(e.e, c, rng);
                }
            }
        }
        // Saturation corners with K large: every product at its extreme, sums past 2^24 (u8 255 x 127 over
        // 8195 = 265 M; s8 A goes through the +128 shift, so -128 becomes 0 and the compensation carries it).
        const int corners[][2] = {{255, 127}, {255, -128}, {-128, -128}, {-128, 127}, {127, -128}, {127, 127}};
        int ci = 0;
        for (const auto& corner : corners) {
            Case c;
            c.a = corner[0] == 255 ? JITMM_DTYPE_U8 : JITMM_DTYPE_S8;
            c.b = JITMM_DTYPE_S8;
            c.a_fill = corner[0];
            c.b_fill = corner[1];
            c.m = ci % 2 ? 1 : 13;
            c.n = 33 + ci;
            c.k = ci % 2 ? 8195 : 4099;
            c.ta = ci & 1;
            c.tb = ci & 2;
            check_case(e.e, c, rng);
            ++ci;
        }
        // Integer epilogue (beta 1, s32 bias, relu) and dequantizing epilogues with scales to f32/bf16/f16.
        const jitmm_dtype outs[] = {JITMM_DTYPE_S32, JITMM_DTYPE_F32, JITMM_DTYPE_BF16, JITMM_DTYPE_F16};
        const jitmm_scale_mode a_modes[] = {JITMM_SCALE_NONE, JITMM_SCALE_PER_TENSOR, JITMM_SCALE_PER_ROW};
        const jitmm_scale_mode b_modes[] = {JITMM_SCALE_NONE, JITMM_SCALE_PER_TENSOR, JITMM_SCALE_PER_COLUMN};
        for (int j = 0; j < 12; ++j) {
            Case c;
            c.a = (j & 1) ? JITMM_DTYPE_S8 : JITMM_DTYPE_U8;
            c.c = outs[j % 4];
            c.m = odd[j % 8] % 100 + 2;
            c.n = odd[(j + 3) % 8] % 200 + 9;
            c.k = 100 + 71 * j;
            c.tb = j % 3 == 1;
            c.ldc_pad = j % 2;
            c.zero_point = (j % 3 == 0) ? ((j & 1) ? -4 : 128) : 0;
            c.bias_layout = (j % 4 == 3) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
            if (c.c == JITMM_DTYPE_S32) {
                c.beta = (j % 8 == 0) ? 1.0f : 0.0f;
                c.epilogue = (j % 8 == 0) ? JITMM_EPILOGUE_BIAS_RELU : JITMM_EPILOGUE_RELU;
                c.bias_type = JITMM_DTYPE_S32;
            } else {
                c.a_scale = a_modes[j % 3];
                c.b_scale = b_modes[(j / 3) % 3];
                const bool scaled = c.a_scale != JITMM_SCALE_NONE || c.b_scale != JITMM_SCALE_NONE;
                c.alpha = scaled ? 1.0f : 0.001f;
                c.beta = (j % 3 == 2) ? 0.5f : 0.0f;
                c.epilogue = static_cast<jitmm_epilogue>((j * 5) % JITMM_EPILOGUE_COUNT);
                c.bias_type = (j % 2) ? c.c : JITMM_DTYPE_F32;
            }
            check_case(e.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp int8: the avx2 s16 widening path with AVX-VNNI turned off (JITMM_X86_AVX_VNNI=0)",
          "[x86][lowp]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::avx2) {
        WARN_SKIPPED("no AVX2 on this CPU");
        return;
    }
    // On a chip with AVX-VNNI the tier tests above run vpdpbusd at avx2; this keeps the s16 path covered.
    EnvGuard off("JITMM_X86_AVX_VNNI", "0");
    std::mt19937 rng(716);
    EngineGuard e{make_engine("avx2", 2)};
    int it = 0;
    for (jitmm_dtype a : {JITMM_DTYPE_U8, JITMM_DTYPE_S8}) {
        for (int layout = 0; layout < 4; ++layout, ++it) {
            Case c;
            c.a = a;
            c.m = kOdd[(it * 3) % 8];
            c.n = kOdd[(it * 5 + 1) % 8] + 9;
            c.k = kOdd[(it * 7 + 2) % 8] + 64;
            c.ta = layout & 1;
            c.tb = layout & 2;
            c.lda_pad = it % 3;
            check_case(e.e, c, rng);
        }
        Case c;
        c.a = a;
        c.a_fill = a == JITMM_DTYPE_U8 ? 255 : -128;
        c.b_fill = -128;
        c.m = 9;
        c.n = 21;
        c.k = 4099;
        check_case(e.e, c, rng);
    }
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = d.n = d.k = 64;
    d.a_type = d.b_type = JITMM_DTYPE_S8;
    d.c_type = JITMM_DTYPE_S32;
    CHECK(generator_of(e.e, d) == "x86_int8_s16_avx2");
}

TEST_CASE("x86 lowp bf16: the vdpbf16ps generator (JITMM_X86_BF16_DOT=1)", "[x86][lowp]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::avx512_bf16) {
        WARN_SKIPPED("no AVX512-BF16 on this CPU");
        return;
    }
    setenv("JITMM_X86_BF16_DOT", "1", 1);
    std::mt19937 rng(708);
    EngineGuard e{make_engine("avx512_bf16", 2)};
    const jitmm_dtype outs[] = {JITMM_DTYPE_F32, JITMM_DTYPE_BF16, JITMM_DTYPE_F16};
    for (int it = 0; it < 8; ++it) {
        Case c;
        c.a = c.b = JITMM_DTYPE_BF16;
        c.c = outs[it % 3];
        c.m = kOdd[it % 8] + 3;
        c.n = kOdd[(it + 2) % 8] + 1;
        c.k = it == 7 ? 5001 : kOdd[(it + 5) % 8];
        c.ta = it & 1;
        c.tb = it & 2;
        c.lda_pad = it % 2;
        c.beta = (it % 3 == 1) ? 0.5f : 0.0f;
        c.epilogue = static_cast<jitmm_epilogue>((it * 3) % JITMM_EPILOGUE_COUNT);
        check_case(e.e, c, rng);
    }
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = d.n = d.k = 64;
    d.a_type = d.b_type = JITMM_DTYPE_BF16;
    CHECK(generator_of(e.e, d) == "x86_bf16_dot_avx512");
    unsetenv("JITMM_X86_BF16_DOT");
}

// One-vector register tiles (12 x 1 where the prefetchers take few streams, 28 x 1 elsewhere; forced here) read A
// by embedded broadcasts on the vdpbf16ps and converted-FMA steps: bf16 on both steps, f16 on the FMAs, odd
// shapes, every layout, ld pads with NaN and Inf in them, epilogues, beta, bf16 and f32 C, 1 and 2 threads.
TEST_CASE("x86 lowp: one-vector tiles on the vdpbf16ps and converted-FMA steps", "[x86][lowp]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::avx512_bf16) {
        WARN_SKIPPED("no AVX512-BF16 on this CPU");
        return;
    }
    std::mt19937 rng(1210);
    const char* tiles[] = {"12x1", "28x1"};
    const char* dots[] = {"1", "0"};
    int it = 0;
    for (const char* tile : tiles) {
        const EnvGuard forced_tile("JITMM_X86_LOWP_TILE", tile);
        for (const char* dot : dots) {
            const EnvGuard step("JITMM_X86_BF16_DOT", dot);
            EngineGuard e{make_engine("avx512_bf16", 1 + it % 2)};
            for (int s = 0; s < 4; ++s, ++it) {
                Case c;
                c.a = c.b = (s == 3 && dot[0] == '0') ? JITMM_DTYPE_F16 : JITMM_DTYPE_BF16;
                c.c = s == 1 ? JITMM_DTYPE_BF16 : JITMM_DTYPE_F32;
                c.m = kOdd[(it * 3) % 8] + 29;
                c.n = kOdd[(it + 1) % 8] % 16 + 1;  // one vector of columns
                c.k = kOdd[(it * 5 + 2) % 8] + (s == 2 ? 300 : 0);
                c.ta = s & 1;
                c.tb = (s >> 1) & 1;
                c.lda_pad = it % 3;
                c.ldb_pad = it % 2;
                c.ldc_pad = it % 4 == 1 ? 5 : 0;
                c.poison_pads = true;
                c.beta = s == 2 ? 0.5f : 0.0f;
                c.epilogue = static_cast<jitmm_epilogue>((it * 3) % JITMM_EPILOGUE_COUNT);
                INFO("tile " << tile << " vdpbf16ps " << dot << " " << describe(c));
                check_case(e.e, c, rng);
            }
        }
    }
}

// bf16 over 2-7 columns of f32 C, and s8 x s8 over 2-8 columns of s32 or f32 C, below AMX run as C^T (few rows of
// the swapped problem on the dot products, then transposed into C): both B layouts, batches (shared B too), beta
// (C transposed in first), bias per row and per column, epilogues, ldc > N, 1 and 2 threads; the generator is the
// dot products', C transposed, and one column more keeps the tiles.
TEST_CASE("x86 lowp: few columns computed as C transposed below AMX", "[x86][lowp]") {
    struct Types {
        const char* tier;
        X86Isa isa;
        jitmm_dtype ab, c;
        const char* generator;
        int64_t max_columns;
    };
    const Types sets[] = {
        {"avx512_bf16", X86Isa::avx512_bf16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32, "x86_bf16_dot_avx512_ct", 7},
        {"avx512_vnni", X86Isa::avx512_vnni, JITMM_DTYPE_S8, JITMM_DTYPE_S32, "x86_int8_vnni_avx512_ct", 8},
        {"avx512_vnni", X86Isa::avx512_vnni, JITMM_DTYPE_S8, JITMM_DTYPE_F32, "x86_int8_vnni_avx512_ct", 8},
    };
    std::mt19937 rng(1211);
    for (const Types& t : sets) {
        if (jitmm::hw::cpu_info().best_isa < t.isa) {
            WARN_SKIPPED("tier " << t.tier << " not available on this CPU");
            continue;
        }
        for (int threads : {1, 2}) {
            EngineGuard e{make_engine(t.tier, threads)};
            for (int it = 0; it < 10; ++it) {
                Case c;
                c.a = c.b = t.ab;
                c.c = t.c;
                c.m = it % 2 ? 404 : 37 + it;
                c.n = 2 + it % (t.max_columns - 1);
                c.k = it % 3 == 0 ? 1661 : 33 + 17 * it;
                c.tb = it % 2;
                c.batch = it % 4 == 3 ? 3 : 1;
                c.share_b = it == 7;
                c.lda_pad = it % 3;
                c.ldb_pad = it % 2;
                c.ldc_pad = it % 5 == 1 ? 3 : 0;
                c.poison_pads = t.ab == JITMM_DTYPE_BF16;
                c.alpha = it % 4 == 2 && t.c == JITMM_DTYPE_F32 ? -0.5f : 1.0f;
                c.beta = it % 3 == 1 ? (t.c == JITMM_DTYPE_F32 ? 0.5f : 1.0f) : 0.0f;
                if (t.c == JITMM_DTYPE_F32) {
                    c.epilogue = static_cast<jitmm_epilogue>((it * 7) % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                }
                INFO(t.tier << " threads " << threads << " " << describe(c));
                check_case(e.e, c, rng);
            }
            jitmm_matmul_desc d;
            jitmm_matmul_desc_init(&d);
            d.m = 404; d.n = 3; d.k = 1661; d.trans_b = 1;
            d.a_type = d.b_type = t.ab;
            d.c_type = t.c;
            d.lda = 1661; d.ldb = 1661; d.ldc = 3;
            CHECK(generator_of(e.e, d) == t.generator);
            d.n = t.max_columns + 1; d.ldc = d.n;
            CHECK(generator_of(e.e, d) != t.generator);
            if (t.ab == JITMM_DTYPE_BF16) {
                // bf16 over 5 or more columns keeps the tiles below a K of 64 (681x6x37 NT: 5.6 us as C^T, 4.0)
                d.m = 681; d.n = 6; d.k = 37; d.lda = d.ldb = 37; d.ldc = 6;
                CHECK(generator_of(e.e, d) != t.generator);
                d.k = 64; d.lda = d.ldb = 64;
                CHECK(generator_of(e.e, d) == t.generator);
            }
            // A stored K x M (TN, TT): up to 24 columns, the A as stored packed as the swapped problem's B.
            for (int it = 0; it < 8; ++it) {
                Case c;
                c.a = c.b = t.ab;
                c.c = t.c;
                c.m = it % 2 ? 532 : 40 + 13 * it;
                c.n = 2 + (it * 5) % 23;
                c.k = it % 3 == 0 ? 1386 : 32 + 19 * it;
                c.ta = true;
                c.tb = it % 2 == 0;
                c.batch = it % 4 == 1 ? 3 : 1;
                c.share_b = it == 5;
                c.lda_pad = it % 3;
                c.ldb_pad = (it + 1) % 2;
                c.ldc_pad = it % 3 == 2 ? 1 : 0;
                c.poison_pads = t.ab == JITMM_DTYPE_BF16;
                c.beta = it % 3 == 0 ? (t.c == JITMM_DTYPE_F32 ? -1.0f : 1.0f) : 0.0f;
                if (t.c == JITMM_DTYPE_F32) {
                    c.alpha = it % 2 ? 0.5f : 1.0f;
                    c.epilogue = static_cast<jitmm_epilogue>((it * 5 + 1) % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = it % 2 ? JITMM_BIAS_PER_COLUMN : JITMM_BIAS_PER_ROW;
                }
                INFO(t.tier << " threads " << threads << " " << describe(c));
                check_case(e.e, c, rng);
            }
            // (The swapped problem is NN there: bf16 takes the converted FMAs where vdpbf16ps runs at half rate.)
            auto computed_transposed = [&] { return generator_of(e.e, d).find("_ct") != std::string::npos; };
            d.trans_a = 1; d.trans_b = 0;
            d.m = 2000; d.n = 24; d.k = 300;
            d.lda = 2000; d.ldb = 24; d.ldc = 24;
            CHECK(computed_transposed());
            d.n = 25; d.ldb = 25; d.ldc = 25;
            CHECK_FALSE(computed_transposed());
        }
    }
    // The planner: a short K whose scratch C^T passes half of L2 stays on the tiles (A as stored); a long K, or
    // an A stored K x M, keeps C^T.
    jitmm::hw::CpuInfo cpu;
    cpu.l2_bytes = 1024 * 1024;
    jitmm::Problem p;
    p.m = 1283; p.n = 7; p.k = 52; p.lda = 52; p.ldb = 7; p.ldc = 7;
    p.a_type = p.b_type = JITMM_DTYPE_S8;
    p.c_type = JITMM_DTYPE_S32;
    CHECK(jitmm::plan::lowp_serves_with_c_transposed(p, X86Isa::avx512_bf16, cpu));
    p.batch = 20; p.stride_a = 1283 * 52; p.stride_b = 52 * 7; p.stride_c = 1283 * 7;
    CHECK_FALSE(jitmm::plan::lowp_serves_with_c_transposed(p, X86Isa::avx512_bf16, cpu));
    p.k = 200; p.lda = 200; p.stride_a = 1283 * 200; p.stride_b = 200 * 7;
    CHECK(jitmm::plan::lowp_serves_with_c_transposed(p, X86Isa::avx512_bf16, cpu));
    p.k = 52; p.trans_a = true; p.lda = 1283; p.stride_a = 1283 * 52; p.stride_b = 52 * 7;
    CHECK(jitmm::plan::lowp_serves_with_c_transposed(p, X86Isa::avx512_bf16, cpu));
}

// The AMX tier runs one row times a B stored K x N over a K of 32-256 on vdpbf16ps (the normal order, B packed in
// pairs): odd K, A stored K x M, ld pads, NaN in the pads, batches, epilogues, bf16 C, 1 and 2 threads.
TEST_CASE("x86 lowp AMX tier: one bf16 row times B stored K x N takes vdpbf16ps (K 32-256)", "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    std::mt19937 rng(709);
    struct Shape {
        int64_t n, k, batch;
    };
    const Shape shapes[] = {{181, 69, 1}, {2048, 128, 1}, {90, 138, 3}, {362, 35, 1}, {7, 256, 5}, {1000, 32, 2}};
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (const Shape& s : shapes) {
            Case c;
            c.a = c.b = JITMM_DTYPE_BF16;
            c.c = it % 3 == 2 ? JITMM_DTYPE_BF16 : JITMM_DTYPE_F32;
            c.m = 1; c.n = s.n; c.k = s.k; c.batch = s.batch;
            c.ta = it % 2 == 1;
            c.lda_pad = it % 2 ? 3 : 0;
            c.ldb_pad = it % 3 ? 5 : 0;
            c.ldc_pad = it % 4 == 1 ? 2 : 0;
            c.poison_pads = true;
            c.beta = it % 4 == 2 ? 1.0f : 0.0f;
            c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_GELU_TANH : JITMM_EPILOGUE_NONE;
            INFO("threads " << threads);
            check_case(e.e, c, rng);
            ++it;
        }
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = 1; d.n = 181; d.k = 69;
        d.a_type = d.b_type = JITMM_DTYPE_BF16;
        CHECK(generator_of(e.e, d) == "x86_bf16_dot_avx512");
        d.k = 1000;  // a long K, and two rows, keep AMX
        CHECK(generator_of(e.e, d) == "x86_bf16_amx");
        d.k = 69;
        d.m = 2;
        CHECK(generator_of(e.e, d) == "x86_bf16_amx");
    }
}

TEST_CASE("x86 lowp: small calls (one block each) over shapes 1-64 at every tier, and short AMX K steps",
          "[x86][lowp]") {
    // The small path (GemmLowpKernel::run_small): one K block, one N and M block, one thread, batch 1. Fresh
    // random inputs and poisoned C per case; odd and tile-sized extents, ld pads (A rows misaligned for AMX,
    // which then packs them), transposes, beta, bias per row or column, scales, zero points.
    std::mt19937 rng(6464);
    const int64_t sizes[] = {1, 5, 8, 16, 17, 23, 31, 32, 33, 48, 64};
    const jitmm_dtype ins[][3] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_U8, JITMM_DTYPE_U8, JITMM_DTYPE_S32},
                                  {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16},
                                  {JITMM_DTYPE_F16, JITMM_DTYPE_F16, JITMM_DTYPE_F32}};
    const X86Isa best = jitmm::hw::cpu_info().best_isa;
    for (const char* tier : {"amx", "avx512_bf16", "avx512_vnni", "avx2"}) {
        X86Isa t;
        REQUIRE(jitmm::hw::isa_from_name(tier, &t));
        if (best < t) continue;
        for (int threads : {1, 2}) {
            EngineGuard e{make_engine(tier, threads)};
            int it = 0;
            for (const auto& in : ins) {
                for (int rep = 0; rep < 6; ++rep, ++it) {
                    INFO("tier " << tier << " threads " << threads << " it " << it);
                    Case c;
                    set_types(c, in);
                    const bool cube = it % 3 == 0;  // m = n = k, as the small-shape benchmarks
                    c.m = sizes[(it * 7 + rep) % 11];
                    c.n = cube ? c.m : sizes[(it * 5 + 3) % 11];
                    c.k = cube ? c.m : sizes[(it * 3 + 1) % 11];
                    c.ta = it % 5 == 3;
                    c.tb = it % 4 == 2;
                    c.lda_pad = it % 3 == 1 ? 3 : 0;
                    c.ldb_pad = it % 4 == 1 ? 5 : 0;
                    c.ldc_pad = it % 5 == 2 ? 2 : 0;
                    const bool int_c = c.c == JITMM_DTYPE_S32;
                    if (!int_c) {
                        c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.beta = it % 4 == 3 ? 0.5f : 0.0f;
                        c.alpha = it % 6 == 5 ? 0.75f : 1.0f;
                        c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        if (is_int8(c.a)) {
                            c.a_scale = it % 2 ? JITMM_SCALE_PER_ROW : JITMM_SCALE_PER_TENSOR;
                            c.b_scale = it % 3 ? JITMM_SCALE_PER_COLUMN : JITMM_SCALE_NONE;
                        }
                    } else {
                        c.beta = it % 3 == 2 ? 1.0f : 0.0f;
                        c.epilogue = it % 4 == 1 ? JITMM_EPILOGUE_RELU : JITMM_EPILOGUE_NONE;
                    }
                    if (c.a == JITMM_DTYPE_U8 && it % 2 == 0) c.zero_point = 3 + it % 100;
                    check_case(e.e, c, rng);
                }
            }
        }
    }
    // K in short AMX steps (one K block whose bytes split into as many equal steps of whole dwords as 64-byte
    // steps would take: the tiles read just K's bytes, plan::amx_k_step_bytes), and K that does not split (padded
    // 64-byte steps): small calls and the blocked path (more rows than one M block), threads, ld pads that
    // misalign the rows, several column panels per call, B stored N x K (the swapped roles at few rows).
    if (best >= X86Isa::amx) {
        // bytes of K: 4 16 32 48 60 | 80 = 2 x 40, 96 = 2 x 48, 120 = 2 x 60, 144 = 3 x 48, 180 = 3 x 60 |
        // not splitting: 66, 100, 200
        const int64_t k_bytes[] = {4, 16, 32, 48, 60, 80, 96, 120, 144, 180, 66, 100, 200};
        for (int threads : {1, 2}) {
            EngineGuard e{make_engine("amx", threads)};
            int it = 0;
            for (int64_t kb : k_bytes) {
                for (int blocked = 0; blocked < 2; ++blocked, ++it) {
                    INFO("short K steps, threads " << threads << " K bytes " << kb << " blocked " << blocked);
                    Case c;
                    const bool bf16 = it % 3 == 2 && kb % 2 == 0;
                    c.a = bf16 ? JITMM_DTYPE_BF16 : it % 2 ? JITMM_DTYPE_S8 : JITMM_DTYPE_U8;
                    c.b = bf16 ? JITMM_DTYPE_BF16 : JITMM_DTYPE_S8;
                    c.c = bf16 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
                    c.m = blocked ? 500 + 97 * (it % 8) : 17 + 13 * (it % 5);  // blocked: past one M block
                    c.n = blocked ? 100 + 45 * (it % 8) : 40 + 24 * (it % 4);
                    c.k = bf16 ? kb / 2 : kb;
                    c.lda_pad = it % 3 == 0 ? 4 : 0;
                    c.tb = it % 4 == 3;
                    c.beta = it % 5 == 4 ? 1.0f : 0.0f;
                    check_case(e.e, c, rng);
                }
            }
        }
    }
    // Which generator the tiny cubes take at the amx tier: vdpbf16ps up to 16^3 bf16, VNNI up to 16^3 for an s8
    // A and 32^3 for a u8 A, AMX above.
    if (best >= X86Isa::amx) {
        EngineGuard e{make_engine("amx", 1)};
        struct Want {
            jitmm_dtype a, b;
            int64_t size;
            const char* generator;
        };
        const Want wants[] = {{JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, 8, "x86_bf16_dot_avx512"},
                              {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, 16, "x86_bf16_dot_avx512"},
                              {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, 17, "x86_bf16_amx"},
                              {JITMM_DTYPE_S8, JITMM_DTYPE_S8, 16, "x86_int8_vnni_avx512"},
                              {JITMM_DTYPE_S8, JITMM_DTYPE_S8, 17, "x86_int8_amx"},
                              {JITMM_DTYPE_U8, JITMM_DTYPE_S8, 32, "x86_int8_vnni_avx512"},
                              {JITMM_DTYPE_U8, JITMM_DTYPE_S8, 33, "x86_int8_amx"}};
        for (const Want& w : wants) {
            jitmm_matmul_desc d;
            jitmm_matmul_desc_init(&d);
            d.m = d.n = d.k = w.size;
            d.a_type = w.a;
            d.b_type = w.b;
            d.c_type = is_int8(w.a) ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
            INFO(jitmm_dtype_name(w.a) << " " << w.size);
            CHECK(generator_of(e.e, d) == w.generator);
        }
    }
}

TEST_CASE("x86 lowp: randomized sweep of batches, shared B, ld padding and threads 1-4", "[x86][lowp]") {
    std::mt19937 rng(706);
    std::uniform_int_distribution<int> pick(0, 1 << 20);
    const jitmm_dtype ins[][2] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8},
                                  {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}, {JITMM_DTYPE_F16, JITMM_DTYPE_F16}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 2, 3, 4}) {
            INFO("threads " << threads);
            EngineGuard e{make_engine(tier.name, threads)};
            for (int it = 0; it < 4; ++it) {
                Case c;
                const auto& in = ins[pick(rng) % 4];
                c.a = in[0];
                c.b = in[1];
                c.c = is_int8(c.a) && (pick(rng) & 1) ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
                c.m = 1 + pick(rng) % 150;
                c.n = 1 + pick(rng) % 150;
                c.k = 1 + pick(rng) % 300;
                c.batch = 1 + pick(rng) % 3;
                c.share_b = c.batch > 1 && pick(rng) % 3 == 0;
                c.ta = pick(rng) & 1;
                c.tb = pick(rng) & 1;
                c.lda_pad = (pick(rng) & 1) ? pick(rng) % 9 : 0;
                c.ldb_pad = (pick(rng) & 1) ? pick(rng) % 9 : 0;
                c.ldc_pad = (pick(rng) & 1) ? pick(rng) % 9 : 0;
                if (c.c != JITMM_DTYPE_S32) {
                    c.alpha = is_int8(c.a) ? 0.01f : 1.0f;
                    c.beta = (pick(rng) & 1) ? 0.5f : 0.0f;
                    c.epilogue = static_cast<jitmm_epilogue>(pick(rng) % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = (pick(rng) & 1) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                }
                check_case(e.e, c, rng);
            }
            // Large enough that every thread gets work (AMX fans out only past ~16 MFLOP).
            Case big;
            big.a = (threads & 1) ? JITMM_DTYPE_U8 : JITMM_DTYPE_BF16;
            big.b = (threads & 1) ? JITMM_DTYPE_S8 : JITMM_DTYPE_BF16;
            big.c = (threads & 1) ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
            big.m = 200;
            big.n = 230;
            big.k = 300;
            big.batch = 2;
            check_case(e.e, big, rng);
        }
    }
}

namespace {

// Reads the calling thread's tile configuration (all zero when the tiles are released or never used).
class TileConfigReader : public Xbyak::CodeGenerator {
public:
    TileConfigReader() {
        sttilecfg(ptr[rdi]);
        ret();
    }
    bool released() {
        alignas(64) uint8_t cfg[64];
        std::memset(cfg, 0xee, sizeof cfg);
        getCode<void (*)(void*)>()(cfg);
        for (uint8_t byte : cfg)
            if (byte != 0) return false;
        return true;
    }
};

// A framework's parallel-for on its own threads that checks, after every task, that the task left no tile
// configuration behind.
struct CheckingPool {
    TileConfigReader* reader;
    std::atomic<int> tasks{0};
    std::atomic<int> leaked{0};
    static void parallel_for(void* self_ptr, int64_t n, jitmm_task_fn fn, void* fn_ctx) {
        auto* self = static_cast<CheckingPool*>(self_ptr);
        std::vector<std::thread> threads;
        std::atomic<int64_t> next{0};
        for (int t = 0; t < 3; ++t)
            threads.emplace_back([&] {
                for (int64_t i; (i = next.fetch_add(1)) < n;) {
                    fn(fn_ctx, i);
                    self->tasks.fetch_add(1);
                    if (!self->reader->released()) self->leaked.fetch_add(1);
                }
            });
        for (auto& t : threads) t.join();
    }
};

}  // namespace

TEST_CASE("x86 lowp AMX: tiles configured per task on pool threads and released when the run returns",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU (" << jitmm::hw::cpu_info().amx_note << ")");
        return;
    }
    TileConfigReader reader;
    std::mt19937 rng(707);
    // The engine's own pool, threads 2-4, and several caller threads sharing one engine at once.
    for (int threads : {2, 3, 4}) {
        EngineGuard e{make_engine("amx", threads)};
        std::vector<std::thread> callers;
        std::atomic<int> failures{0};
        for (int t = 0; t < 2; ++t)
            callers.emplace_back([&, t] {
                std::mt19937 local(1000 + t);
                Case c;
                c.a = t ? JITMM_DTYPE_BF16 : JITMM_DTYPE_U8;
                c.b = t ? JITMM_DTYPE_BF16 : JITMM_DTYPE_S8;
                c.c = t ? JITMM_DTYPE_BF16 : JITMM_DTYPE_F32;
                c.alpha = t ? 1.0f : 0.01f;
                c.m = 250;
                c.n = 190;
                c.k = 700;
                c.batch = 2;
                c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                check_case(e.e, c, local);  // REQUIRE from a thread: counted below instead of trusted alone
                if (!reader.released()) failures.fetch_add(1);
            });
        for (auto& t : callers) t.join();
        CHECK(failures == 0);
        Case c;
        c.a = JITMM_DTYPE_S8;
        c.m = 300;
        c.n = 300;
        c.k = 256;
        check_case(e.e, c, rng);
        CHECK(reader.released());  // the calling thread runs tasks too
    }
    // A framework's parallel-for: every task must leave its thread's tiles released.
    CheckingPool pool;
    pool.reader = &reader;
    EngineGuard e{make_engine("amx", 3, &CheckingPool::parallel_for, &pool)};
    for (jitmm_dtype t : {JITMM_DTYPE_U8, JITMM_DTYPE_BF16}) {
        Case c;
        c.a = t;
        c.b = t == JITMM_DTYPE_U8 ? JITMM_DTYPE_S8 : t;
        c.c = t == JITMM_DTYPE_U8 ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
        c.m = 320;
        c.n = 320;
        c.k = 512;
        c.batch = 3;
        check_case(e.e, c, rng);
    }
    CHECK(pool.tasks > 0);
    CHECK(pool.leaked == 0);
}

TEST_CASE("x86 lowp AMX: small calls of one or two K steps run as one generated function, tails overlapping",
          "[x86][lowp][amx]") {
    // (The shortest K here would be widened to f32 otherwise: this is the AMX function's test.)
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    // gemm_amx_whole_generator: K one to four equal tile steps (up to 64 bytes each), one thread, direct stores.
    // M and N past 16 that end inside a tile take one more whole tile ending at the last row or column (it
    // overlaps the one before: those values are stored twice); under 16, one short tile. A K that ends inside
    // a step reads A's last row tile (int8) or every row (bf16) from the function's zero-padded copy. B stored K x
    // N is packed inside the function (32-column panels, one-tile panels, shifted panels, zero k rows past K), B
    // stored N x K by the driver. Odd ld pads (A rows split across lines, B rows misaligned), B off a 64-byte
    // boundary, NaN and Inf in bf16 rows' padding past K, the int8 saturation corners, batches, and the tiles
    // released when the call returns; shapes next to the path (K past two steps, a bias) take the microkernels and must
    // agree too.
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU (" << jitmm::hw::cpu_info().amx_note << ")");
        return;
    }
    TileConfigReader reader;
    std::mt19937 rng(4848);
    EngineGuard e{make_engine("amx", 1)};
    const int64_t extents[] = {16, 32, 48, 64, 80, 128, 1, 7, 17, 31, 33, 63, 65, 100};
    // K bytes: one step 4-64; two steps 72 = 2 x 36, 80, 96, 120, 128; 100 splits into no equal dword steps; and K
    // tails inside a step (int8 rounds up to dwords, bf16 copies its rows).
    // Three and four steps (each product loads its own A and B tiles): 129-256 bytes.
    const int64_t int8_k[] = {4,  12, 16, 20, 40,  48,  60,  64,  72,  80,  96,  120, 128,
                              100, 1, 3,  33, 63,  65,  127, 129, 192, 200, 255, 256};
    const int64_t bf16_k[] = {2,  6, 8, 10, 20, 24, 30, 32, 36, 40,  48,  60, 64,
                              50, 1, 3, 17, 31, 33, 63, 65, 96, 100, 127, 128};
    constexpr int kKinds = 25;
    const jitmm_dtype ins[][2] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8}, {JITMM_DTYPE_S8, JITMM_DTYPE_S8},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_U8}, {JITMM_DTYPE_U8, JITMM_DTYPE_U8},
                                  {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}};
    for (int it = 0; it < 350; ++it) {
        Case c;
        const auto& in = ins[it % 5];
        c.a = in[0];
        c.b = in[1];
        const bool bf16 = c.a == JITMM_DTYPE_BF16;
        c.c = bf16 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
        c.m = extents[(it * 7) % 14];
        c.n = extents[(it / 14 + it) % 14];
        if (c.m * c.n > 64 * 64 * 2) c.m = 32;  // within the unrolled tile count
        c.k = bf16 ? bf16_k[(it / 5 + it) % kKinds] : int8_k[(it / 5) % kKinds];
        c.tb = it % 4 == 3;
        c.lda_pad = it % 3 == 1 ? 3 : 0;
        c.ldb_pad = it % 5 == 2 ? 7 : 0;
        c.ldc_pad = it % 7 == 4 ? 5 : 0;
        c.b_offset = it % 6 == 5 ? 3 : 0;
        c.poison_pads = bf16 && it % 2 == 0;
        c.batch = it % 4 == 1 ? 3 : 1;  // a call of the function per batch, one tile configuration for all
        if (!bf16 && it % 9 == 0) {  // saturation corners: -128 * -128, 255 * 255, 255 * -128
            c.a_fill = c.a == JITMM_DTYPE_S8 ? -128 : 255;
            c.b_fill = c.b == JITMM_DTYPE_S8 ? -128 : 255;
        }
        // Beside the path: five K steps or more, or an epilogue (the microkernels).
        switch (it % 13) {
            case 9: c.k += bf16 ? 128 : 256; break;
            case 10: c.beta = 1.0f; break;
            default: break;
        }
        INFO("it " << it << ": " << describe(c));
        check_case(e.e, c, rng);
        CHECK(reader.released());
    }
    // C of 32 KB and more over a K of 32 bytes and more: the function visits row tile by row tile (up to 128
    // tiles).
    const int64_t big[][2] = {{128, 128}, {127, 127}, {100, 100}, {160, 96}, {96, 160}, {64, 256}, {90, 90},
                              {160, 160}, {192, 127}, {250, 64}};
    const int64_t big_k[] = {64, 100, 128, 33, 61};
    for (int it = 0; it < 50; ++it) {
        Case c;
        const auto& in = ins[it % 5];
        c.a = in[0];
        c.b = in[1];
        const bool bf16 = c.a == JITMM_DTYPE_BF16;
        c.c = bf16 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
        c.m = big[(it / 5 + it) % 10][0];  // (every shape meets several type pairs)
        c.n = big[(it / 5 + it) % 10][1];
        c.k = big_k[(it / 10) % 5] / (bf16 ? 2 : 1) + (bf16 ? 1 : 0);
        c.tb = it % 3 == 1;
        c.lda_pad = it % 4 == 2 ? 5 : 0;
        c.ldc_pad = it % 5 == 3 ? 3 : 0;
        c.poison_pads = bf16;
        c.batch = it % 6 == 4 ? 2 : 1;
        INFO("rows " << it << ": " << describe(c));
        check_case(e.e, c, rng);
        CHECK(reader.released());
    }
}

TEST_CASE("x86 lowp: kernels reload from the disk cache and still compute exactly", "[x86][lowp]") {
    char dir[] = "/tmp/jitmm-lowp-cache-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    std::mt19937 rng(709);
    for (int round = 0; round < 2; ++round) {  // the first generates and stores, the second loads
        INFO("round " << round);
        jitmm_engine_config cfg;
        jitmm_engine_config_init(&cfg);
        cfg.cache_dir = dir;
        cfg.num_threads = 2;
        jitmm_engine* e = nullptr;
        REQUIRE(jitmm_engine_create(&cfg, &e) == JITMM_STATUS_SUCCESS);
        EngineGuard guard{e};
        Case c;
        c.a = JITMM_DTYPE_S8;
        c.c = JITMM_DTYPE_BF16;
        c.m = 77;
        c.n = 45;
        c.k = 200;
        c.b_scale = JITMM_SCALE_PER_COLUMN;
        c.a_scale = JITMM_SCALE_PER_TENSOR;
        c.epilogue = JITMM_EPILOGUE_BIAS_GELU_TANH;
        check_case(e, c, rng);
        Case d;
        d.a = d.b = JITMM_DTYPE_BF16;
        d.c = JITMM_DTYPE_F32;
        d.m = 64;
        d.n = 96;
        d.k = 640;
        d.tb = true;
        check_case(e, d, rng);
    }
    std::string cmd = std::string("rm -rf ") + dir;
    CHECK(std::system(cmd.c_str()) == 0);
}

TEST_CASE("x86 lowp: validation of scales and zero points, honest UNSUPPORTED, old struct sizes", "[x86][lowp][api]") {
    EngineGuard e{make_engine(nullptr, 1)};
    std::vector<uint8_t> a(64 * 64), b(64 * 64);
    std::vector<float> c(64 * 64);
    float scale = 0.5f;
    auto desc = [] {
        jitmm_matmul_desc d;
        jitmm_matmul_desc_init(&d);
        d.m = 8; d.n = 8; d.k = 8;
        d.a_type = JITMM_DTYPE_U8; d.b_type = JITMM_DTYPE_S8; d.c_type = JITMM_DTYPE_F32;
        return d;
    };
    jitmm_matmul_args args;
    jitmm_matmul_args_init(&args);
    args.a = a.data(); args.b = b.data(); args.c = c.data();
    auto expect = [&](const jitmm_matmul_desc& d, const jitmm_matmul_args& r, jitmm_status want, const char* text) {
        const jitmm_status got = jitmm_matmul(e.e, &d, &r);
        INFO("want " << jitmm_status_string(want) << " mentioning \"" << text << "\", got "
                     << jitmm_status_string(got) << ": " << jitmm_last_error_message());
        CHECK(got == want);
        CHECK(std::string(jitmm_last_error_message()).find(text) != std::string::npos);
    };
    CHECK(desc().a_scale_mode == JITMM_SCALE_NONE);
    CHECK(desc().b_scale_mode == JITMM_SCALE_NONE);
    CHECK(desc().a_zero_point == 0);
    CHECK(args.a_scales == nullptr);
    CHECK(args.b_scales == nullptr);

    jitmm_matmul_desc d = desc();
    d.b_scale_mode = JITMM_SCALE_PER_COLUMN;
    expect(d, args, JITMM_STATUS_NULL_POINTER, "args.b_scales");
    d = desc();
    d.a_scale_mode = JITMM_SCALE_PER_TENSOR;
    expect(d, args, JITMM_STATUS_NULL_POINTER, "args.a_scales");
    d = desc();
    d.a_scale_mode = JITMM_SCALE_PER_COLUMN;
    expect(d, args, JITMM_STATUS_INVALID_VALUE, "desc.a_scale_mode");
    d = desc();
    d.b_scale_mode = JITMM_SCALE_PER_ROW;
    expect(d, args, JITMM_STATUS_INVALID_VALUE, "desc.b_scale_mode");
    d = desc();
    d.b_scale_mode = static_cast<jitmm_scale_mode>(9);
    expect(d, args, JITMM_STATUS_INVALID_VALUE, "desc.b_scale_mode");
    d = desc();
    d.a_type = d.b_type = JITMM_DTYPE_BF16;
    d.b_scale_mode = JITMM_SCALE_PER_TENSOR;
    expect(d, args, JITMM_STATUS_INVALID_VALUE, "desc.b_scale_mode");
    d = desc();
    d.c_type = JITMM_DTYPE_S32;
    d.a_scale_mode = JITMM_SCALE_PER_TENSOR;
    expect(d, args, JITMM_STATUS_INVALID_VALUE, "floating-point c_type");
    d = desc();
    d.a_zero_point = 256;
    expect(d, args, JITMM_STATUS_INVALID_VALUE, "desc.a_zero_point");
    d = desc();
    d.a_type = JITMM_DTYPE_S8;
    d.a_zero_point = -129;
    expect(d, args, JITMM_STATUS_INVALID_VALUE, "desc.a_zero_point");
    d = desc();
    d.a_type = d.b_type = JITMM_DTYPE_F32;
    d.a_zero_point = 3;
    expect(d, args, JITMM_STATUS_INVALID_VALUE, "desc.a_zero_point");

    // Valid but without a kernel: UNSUPPORTED, naming why.
    d = desc();
    d.c_type = JITMM_DTYPE_S32;
    d.alpha = 2.0f;
    expect(d, args, JITMM_STATUS_UNSUPPORTED, "alpha must be 1");
    d = desc();
    d.c_type = JITMM_DTYPE_S32;
    d.epilogue = JITMM_EPILOGUE_GELU_TANH;
    expect(d, args, JITMM_STATUS_UNSUPPORTED, "only relu");
    d = desc();
    d.c_type = JITMM_DTYPE_S32;
    d.epilogue = JITMM_EPILOGUE_BIAS;
    args.bias = c.data();
    expect(d, args, JITMM_STATUS_UNSUPPORTED, "bias must be s32");
    d = desc();
    d.a_type = JITMM_DTYPE_BF16;
    d.b_type = JITMM_DTYPE_F32;
    expect(d, args, JITMM_STATUS_UNSUPPORTED, "bf16 by f32");
    d = desc();
    d.a_type = d.b_type = JITMM_DTYPE_BF16;
    d.c_type = JITMM_DTYPE_S32;
    expect(d, args, JITMM_STATUS_UNSUPPORTED, "c_type");
    d = desc();
    d.a_type = d.b_type = d.c_type = JITMM_DTYPE_F32;
    d.c_type = JITMM_DTYPE_BF16;
    expect(d, args, JITMM_STATUS_UNSUPPORTED, "c_type=bf16");

    // A caller built against the header before the quantization fields: its struct_size ends before them,
    // and whatever lies past it is not read.
    d = desc();
    d.struct_size = (offsetof(jitmm_matmul_desc, a_scale_mode) + alignof(jitmm_matmul_desc) - 1) /
                    alignof(jitmm_matmul_desc) * alignof(jitmm_matmul_desc);
    d.a_scale_mode = static_cast<jitmm_scale_mode>(77);
    d.a_zero_point = 12345;
    jitmm_matmul_args old_args = args;
    old_args.struct_size = offsetof(jitmm_matmul_args, a_scales);
    old_args.a_scales = reinterpret_cast<const float*>(&scale);
    const jitmm_status st = jitmm_matmul(e.e, &d, &old_args);
    INFO(jitmm_last_error_message());
    CHECK(st == JITMM_STATUS_SUCCESS);
}

namespace {

// C of one call with fixed random inputs (seeded per shape), as raw bytes: the same problem on engines with
// different thread counts must give the same bits (threads split N and M, never K).
std::vector<uint8_t> run_for_bits(jitmm_engine* e, const jitmm_matmul_desc& d, uint32_t seed) {
    std::mt19937 rng(seed);
    // Tight matrices; batches (batch_count > 1) at the desc's strides.
    const int64_t batches = d.batch_count;
    const auto size = [&](int64_t stride, int64_t one) {
        return size_t(batches > 1 ? stride * (batches - 1) + one : one);
    };
    Buffer a(d.a_type, size(d.stride_a, d.m * d.k)), b(d.b_type, size(d.stride_b, d.k * d.n)),
        c(d.c_type, size(d.stride_c, d.m * d.n));
    fill_random(a, rng);
    fill_random(b, rng);
    std::memset(c.data(), 0xff, c.bytes.size());
    jitmm_matmul_args args;
    REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
    args.a = a.data();
    args.b = b.data();
    args.c = c.data();
    const jitmm_status st = jitmm_matmul(e, &d, &args);
    INFO(jitmm_last_error_message());
    REQUIRE(st == JITMM_STATUS_SUCCESS);
    return std::vector<uint8_t>(c.bytes.begin(), c.bytes.end());
}

// The case's problem on tight matrices (batches packed, a shared B at stride 0) gives the same bits on `e` as on
// the one-thread engine `one`, twice.
void check_bits_match_one_thread(jitmm_engine* one, jitmm_engine* e, const Case& c, uint32_t seed) {
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = c.m; d.n = c.n; d.k = c.k;
    d.a_type = c.a; d.b_type = c.b; d.c_type = c.c;
    d.trans_a = c.ta;
    d.trans_b = c.tb;
    if (c.batch > 1) {
        d.batch_count = c.batch;
        d.stride_a = c.m * c.k;
        d.stride_b = c.share_b ? 0 : c.k * c.n;
        d.stride_c = c.m * c.n;
    }
    const auto ref = run_for_bits(one, d, seed);
    CHECK(run_for_bits(e, d, seed) == ref);
    CHECK(run_for_bits(e, d, seed) == ref);
}

}  // namespace

TEST_CASE("x86 lowp: decode rows and larger shapes split over 3, 5 and 16 threads, exact and bit-identical",
          "[x86][lowp][amx]") {
    // B large enough that the planner gives a thread per megabyte of B (decode rows: B stored N x K swaps the
    // AMX roles, K x N packs B), and a few rows enough for a 2D split; odd N and K, every tier this CPU has.
    std::mt19937 rng(7161);
    const jitmm_dtype ins[][3] = {{JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                  {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32}};
    struct Shape {
        int64_t m, n, k;
        bool tb;
        bool ta = false;
    };
    // (B stored N x K with rows of whole cache lines takes the swapped AMX path; K = 4099 does not.)
    const Shape shapes[] = {{1, 2111, 4096, true}, {2, 1999, 2304, true}, {3, 2049, 1601, false},
                            {4, 1187, 4160, true}, {16, 2100, 2111, false}, {1, 3001, 1999, false},
                            {200, 517, 1200, false}, {97, 1043, 768, true}, {1, 2111, 4099, true},
                            {257, 700, 1000, false}, {130, 1100, 512, true},
                            // swapped with A^T packed once per call (shared by the tasks), A stored K x M, and K
                            // long enough for several K blocks of it
                            {33, 1500, 2048, true, true}, {100, 600, 11008, true, false},
                            // larger 2D splits (A panels packed once per call where tasks span several N blocks)
                            {520, 700, 1500, false, false}, {300, 900, 1200, true, true}};
    for (const Tier& tier : runnable_tiers()) {
        if (tier.isa != X86Isa::amx && tier.isa != X86Isa::avx512_vnni && tier.isa != X86Isa::avx2) continue;
        EngineGuard one{make_engine(tier.name, 1)};
        for (int threads : {3, 5, 16}) {
            INFO("tier " << tier.name << " threads " << threads);
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                const auto& in = ins[(it + threads) % 3];
                Case c;
                set_types(c, in);
                c.m = s.m;
                c.n = s.n;
                c.k = s.k;
                c.tb = s.tb;
                c.ta = s.ta;
                check_case(e.e, c, rng);
                check_bits_match_one_thread(one.e, e.e, c, 100 + it);
                ++it;
            }
        }
    }
}

TEST_CASE("x86 lowp: small batched problems spread over 2-4 threads, exact and bit-identical to one thread",
          "[x86][lowp]") {
    // Batches too small to split go whole to the threads (a contiguous run of batches each): attention-sized
    // and odd shapes, every layout, shared B, int8 exact and 16-bit within bounds, at every tier.
    std::mt19937 rng(7009);
    const jitmm_dtype ins[][3] = {{JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                  {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32}};
    struct Shape {
        int64_t m, n, k, batch;
        bool ta, tb;
    };
    const Shape shapes[] = {{128, 64, 128, 12, false, false}, {128, 128, 64, 12, false, true},
                            {64, 64, 64, 8, false, false},    {32, 32, 64, 33, false, true},
                            {33, 17, 65, 7, true, false},     {70, 45, 100, 5, true, true},
                            {64, 64, 32, 12, false, true},    {200, 96, 150, 3, false, false}};
    for (const Tier& tier : runnable_tiers()) {
        EngineGuard one{make_engine(tier.name, 1)};
        for (int threads : {2, 3, 4}) {
            INFO("tier " << tier.name << " threads " << threads);
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                const auto& in = ins[(it + threads) % 3];
                Case c;
                set_types(c, in);
                c.m = s.m;
                c.n = s.n;
                c.k = s.k;
                c.batch = s.batch;
                c.ta = s.ta;
                c.tb = s.tb;
                c.share_b = it % 3 == 2;
                c.lda_pad = it % 2;
                check_case(e.e, c, rng);
                check_bits_match_one_thread(one.e, e.e, c, 200 + it);
                ++it;
            }
        }
    }
}

// Batches of problems of one block each run the small-call path per batch (a run of batches per thread, one tile
// session for the run): dequantizing scales, A's zero point, row and column bias, activations and beta over
// batches with their own B or a shared one, every tier, 1 and 3 threads (bit-identical to 1).
TEST_CASE("x86 lowp: batches of small blocks with scales, zero point, bias and activations", "[x86][lowp]") {
    std::mt19937 rng(7331);
    struct Shape {
        int64_t m, n, k, batch;
        bool ta, tb;
    };
    const Shape shapes[] = {{8, 8, 8, 64, false, false},  {16, 16, 16, 16, false, true}, {7, 33, 17, 9, true, false},
                            {32, 32, 32, 5, false, false}, {1, 11, 282, 6, false, true},  {4, 21, 203, 7, true, true}};
    const jitmm_dtype ins[][3] = {{JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_BF16},
                                  {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16},
                                  {JITMM_DTYPE_F16, JITMM_DTYPE_F16, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32}};
    for (const Tier& tier : runnable_tiers()) {
        EngineGuard one{make_engine(tier.name, 1)};
        EngineGuard three{make_engine(tier.name, 3)};
        int it = 0;
        for (const Shape& s : shapes) {
            for (const auto& in : ins) {
                INFO("tier " << tier.name << " case " << it);
                Case c;
                set_types(c, in);
                c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
                c.ta = s.ta; c.tb = s.tb;
                c.share_b = it % 4 == 1;
                c.lda_pad = it % 3;
                c.ldc_pad = it % 2;
                if (c.c != JITMM_DTYPE_S32) {
                    c.beta = it % 3 == 1 ? 0.5f : 0.0f;
                    c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                }
                if (is_int8(c.a) && c.c != JITMM_DTYPE_S32) {
                    c.a_scale = it % 2 ? JITMM_SCALE_PER_ROW : JITMM_SCALE_PER_TENSOR;
                    c.b_scale = it % 3 ? JITMM_SCALE_PER_COLUMN : JITMM_SCALE_NONE;
                    if (c.a == JITMM_DTYPE_U8) c.zero_point = 3 + it % 120;
                }
                check_case(one.e, c, rng);
                check_case(three.e, c, rng);
                check_bits_match_one_thread(one.e, three.e, c, 300 + it);
                ++it;
            }
        }
    }
}

TEST_CASE("x86 lowp: few rows times a small B over a long K (dot products), narrow N on the vector tiles",
          "[x86][lowp]") {
    // B of at most 16 KB stored N x K with K >= 256 bytes and at most 8 rows: the VNNI dot products; at the
    // VNNI tiers the same shapes stored K x N take tiles of no more vectors than N needs.
    std::mt19937 rng(5151);
    struct Shape {
        int64_t m, n, k, batch;
    };
    const Shape shapes[] = {{3, 10, 976, 1}, {7, 13, 1178, 3}, {4, 20, 512, 1}, {8, 30, 300, 2}, {1, 5, 257, 1},
                            {5, 33, 290, 1}};
    const jitmm_dtype ins[][3] = {{JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_BF16}};
    for (const Tier& tier : runnable_tiers()) {
        EngineGuard e{make_engine(tier.name, 1)};
        int it = 0;
        for (const Shape& s : shapes) {
            for (const auto& in : ins) {
                for (int layout = 0; layout < 4; ++layout, ++it) {
                    INFO("tier " << tier.name << " case " << it);
                    Case c;
                    set_types(c, in);
                    c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
                    c.ta = layout & 2;
                    c.tb = layout & 1;
                    c.lda_pad = it % 3 == 0 ? 5 : 0;
                    c.ldb_pad = it % 2 == 0 ? 3 : 0;
                    c.ldc_pad = it % 2;
                    c.share_b = it % 5 == 1;
                    if (c.c != JITMM_DTYPE_S32) {
                        c.beta = it % 3 == 1 ? 0.5f : 0.0f;
                        if (c.m * c.n >= 64) c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        c.a_scale = it % 2 ? JITMM_SCALE_PER_ROW : JITMM_SCALE_PER_TENSOR;
                        c.b_scale = it % 3 ? JITMM_SCALE_PER_COLUMN : JITMM_SCALE_NONE;
                    }
                    check_case(e.e, c, rng);
                }
            }
        }
    }
}

TEST_CASE("x86 lowp AMX: 4-16 rows times s8 B rows off cache lines take the swapped order (was dot products), exactly",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    // B stored N x K with rows not whole lines (K, pads, an offset base), read in place as the A tiles of the
    // swapped order; K tails of a dword and of a step, s8 and u8 A (TN and NN storage), batches, float epilogues,
    // 1 and 2 threads.
    std::mt19937 rng(3414);
    struct Shape {
        int64_t m, n, k, batch;
    };
    const Shape shapes[] = {{5, 3414, 60, 1}, {7, 958, 96, 2}, {16, 500, 130, 1}, {4, 777, 61, 3}, {9, 1200, 301, 1}};
    int it = 0;
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("amx", threads)};
        for (const Shape& sh : shapes) {
            Case c;
            c.a = it % 2 ? JITMM_DTYPE_U8 : JITMM_DTYPE_S8;
            c.b = JITMM_DTYPE_S8;
            c.m = sh.m; c.n = sh.n; c.k = sh.k; c.batch = sh.batch;
            c.tb = true;
            c.ta = it % 3 == 1;
            c.ldb_pad = it % 4 == 2 ? 7 : 0;
            c.b_offset = it % 5 == 3 ? 3 : 0;
            c.lda_pad = it % 3 == 2 ? 2 : 0;
            if (it % 4 == 3) {
                c.c = JITMM_DTYPE_F32;
                c.alpha = 0.01f;
                c.epilogue = JITMM_EPILOGUE_BIAS_GELU_TANH;
            }
            INFO("case " << it);
            ++it;
            check_case(e.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp AMX: swapped roles read B's rows in place at any stride over one block of short K steps",
          "[x86][lowp][amx]") {
    // Few rows times B stored N x K with K one block of short steps (K bytes a multiple of 4 below 64): the tiles
    // read each row's K bytes where they lie, whatever ldb and B's alignment.
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    std::mt19937 rng(6262);
    EngineGuard one{make_engine("amx", 1)};
    EngineGuard two{make_engine("amx", 2)};
    struct Shape {
        int64_t m, n, k, batch;
        jitmm_dtype in, out;
    };
    const Shape shapes[] = {{6, 959, 16, 3, JITMM_DTYPE_BF16, JITMM_DTYPE_F32}, {5, 700, 20, 1, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16},
                            {16, 1000, 48, 2, JITMM_DTYPE_U8, JITMM_DTYPE_S32}, {12, 1500, 44, 1, JITMM_DTYPE_S8, JITMM_DTYPE_F32},
                            {3, 2000, 28, 1, JITMM_DTYPE_BF16, JITMM_DTYPE_F32}};
    int it = 0;
    for (const Shape& s : shapes) {
        for (int variant = 0; variant < 4; ++variant, ++it) {
            INFO("case " << it);
            Case c;
            c.a = s.in;
            c.b = s.in == JITMM_DTYPE_U8 ? JITMM_DTYPE_S8 : s.in;
            c.c = s.out;
            c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
            c.tb = true;
            c.ta = variant & 1;
            c.ldb_pad = variant == 0 ? 0 : variant == 1 ? 1 : variant == 2 ? 3 : 16;
            c.b_offset = variant == 3 ? 5 : 0;
            c.lda_pad = variant;
            c.ldc_pad = variant % 2;
            if (c.c != JITMM_DTYPE_S32) {
                c.beta = variant == 2 ? 0.5f : 0.0f;
                c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
            }
            check_case(one.e, c, rng);
            check_case(two.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp VNNI: a K of 1-3 packs B as one run of dwords (gathers, widened rows) with its column sums",
          "[x86][lowp]") {
    // pack_b_lowp with panels of one k group and K < 4: every column's dword (its bytes past K zero), the padding
    // to whole panels zero, the column sums. B ends at a PROT_NONE page (the gathers read a dword per column:
    // never past the last column's bytes), stored N x K (ldb >= K) and K x N (ldb >= N), widths with tails of
    // the eight-column vectors.
    std::mt19937 rng(3666);
    for (bool trans_b : {true, false}) {
        for (int64_t k : {1, 2, 3}) {
            for (int64_t width : {1, 7, 8, 9, 33, 3666}) {
                for (int64_t pad : {0, 1, 5}) {
                    const int64_t ldb = (trans_b ? k : width) + pad;
                    const int64_t bytes = trans_b ? (width - 1) * ldb + k : (k - 1) * ldb + width;
                    GuardedBytes guarded_memory(static_cast<size_t>(bytes));
                    auto* b = guarded_memory.data();
                    for (int64_t i = 0; i < bytes; ++i) b[i] = static_cast<uint8_t>(rng());
                    const int nr = 32;
                    const int64_t padded = (width + nr - 1) / nr * nr;
                    std::vector<uint32_t> panels(static_cast<size_t>(padded), 0xdeadbeef);
                    std::vector<int32_t> sums(static_cast<size_t>(padded), 5);
                    jitmm::x86::pack_b_lowp(jitmm::plan::LowpStep::vnni_u8s8, JITMM_DTYPE_S8, b, ldb, trans_b, 0, k, 0,
                                            width, nr, 1, panels.data(), sums.data(), false);
                    int64_t wrong = 0, wrong_sums = 0;
                    for (int64_t c = 0; c < padded; ++c) {
                        uint32_t want = 0;
                        int32_t sum = 5;
                        for (int64_t e = 0; e < k && c < width; ++e) {
                            const uint8_t v = b[trans_b ? c * ldb + e : e * ldb + c];
                            want |= uint32_t(v) << (8 * e);
                            sum += static_cast<int8_t>(v);
                        }
                        wrong += panels[size_t(c)] != want;
                        wrong_sums += c < width && sums[size_t(c)] != sum;
                    }
                    INFO((trans_b ? "NT" : "NN") << " k " << k << " width " << width << " ldb " << ldb);
                    CHECK(wrong == 0);
                    CHECK(wrong_sums == 0);
                }
            }
        }
    }
    // And whole calls: s8 A (the +128 shift and its sums) and u8 A, both layouts, batches, pads, at every tier.
    const int64_t shapes[][3] = {{9, 3666, 1}, {20, 301, 2}, {3, 40, 3}, {100, 17, 1}};
    int it = 0;
    for (const Tier& tier : runnable_tiers()) {
        EngineGuard e{make_engine(tier.name, 1)};
        for (const auto& sh : shapes) {
            Case c;
            c.a = it % 2 ? JITMM_DTYPE_U8 : JITMM_DTYPE_S8;
            c.b = JITMM_DTYPE_S8;
            c.m = sh[0]; c.n = sh[1]; c.k = sh[2];
            c.tb = it % 3 != 1;
            c.ldb_pad = it % 4 == 2 ? 3 : 0;
            c.batch = it % 3 == 0 ? 2 : 1;
            INFO("tier " << tier.name << " case " << it);
            ++it;
            check_case(e.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp: a short K of row-major B packs every panel in one pass (VBMI), never past B's last byte",
          "[x86][lowp][amx]") {
    // pack_b_lowp with B stored K x N and K up to 64 rows: 32-column panels of `groups` k groups (int8 x 4, bf16
    // x 2), the groups past K zero, the columns past the width zero, the column sums (VNNI). B ends at a PROT_NONE
    // page (masked loads only), ldb > N.
    if (!jitmm::x86::pack_vbmi_allowed()) return;  // no AVX512-VBMI
    std::mt19937 rng(2479);
    using jitmm::plan::LowpStep;
    for (LowpStep step : {LowpStep::amx_int8, LowpStep::vnni_u8s8, LowpStep::amx_bf16}) {
        const bool bytes = step != LowpStep::amx_bf16;
        const int g = bytes ? 4 : 2;
        const int64_t esz = bytes ? 1 : 2;
        for (int64_t k : {1, 2, 3, 4, 5, 13, 24, 42, 63, 64}) {
            for (int64_t width : {1, 31, 32, 33, 100, 2479}) {
                for (int64_t pad : {0, 3}) {
                    const int64_t ldb = width + pad;
                    const int64_t bytes_b = ((k - 1) * ldb + width) * esz;
                    GuardedBytes guarded_memory(static_cast<size_t>(bytes_b));
                    auto* b = guarded_memory.data();
                    for (int64_t i = 0; i < bytes_b; ++i) b[i] = static_cast<uint8_t>(rng());
                    const int nr = 32;
                    const int64_t live = (k + g - 1) / g;
                    const int64_t groups = step == LowpStep::vnni_u8s8 ? live : (live + 15) / 16 * 16;
                    const int64_t panels = (width + nr - 1) / nr;
                    std::vector<uint8_t> out(static_cast<size_t>(panels * groups * nr * 4), 0xa5);
                    std::vector<int32_t> sums(static_cast<size_t>(panels * nr), 5);
                    const bool with_sums = step == LowpStep::vnni_u8s8;
                    jitmm::x86::pack_b_lowp(step, bytes ? JITMM_DTYPE_S8 : JITMM_DTYPE_BF16, b, ldb, false, 0, k, 0,
                                            width, nr, groups, out.data(), with_sums ? sums.data() : nullptr, true);
                    int64_t wrong = 0, wrong_sums = 0;
                    for (int64_t p = 0; p < panels; ++p)
                        for (int64_t q = 0; q < groups; ++q)
                            for (int64_t c = 0; c < nr; ++c)
                                for (int64_t e = 0; e < g; ++e)
                                    for (int64_t byte = 0; byte < esz; ++byte) {
                                        const int64_t kk = q * g + e, col = p * nr + c;
                                        const uint8_t want =
                                            kk < k && col < width ? b[(kk * ldb + col) * esz + byte] : 0;
                                        wrong += out[size_t(((p * groups + q) * nr + c) * 4 + e * esz + byte)] != want;
                                    }
                    for (int64_t col = 0; with_sums && col < width; ++col) {
                        int32_t sum = 5;
                        for (int64_t kk = 0; kk < k; ++kk) sum += static_cast<int8_t>(b[kk * ldb + col]);
                        wrong_sums += sums[size_t(col)] != sum;
                    }
                    INFO("step " << int(step) << " k " << k << " width " << width << " ldb " << ldb);
                    CHECK(wrong == 0);
                    CHECK(wrong_sums == 0);
                }
            }
        }
    }
    // And whole calls on every tier: few rows times a wide B over a short K (s8, u8 with a zero point, bf16),
    // NN and TN, ld pads, batches and threads.
    const int64_t shapes[][3] = {{6, 2479, 42}, {18, 2588, 24}, {3, 1240, 63}, {33, 300, 13}, {12, 77, 64}, {1, 97, 5}};
    const jitmm_dtype types[][3] = {{JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                    {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                    {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32}};
    int it = 0;
    for (const Tier& tier : runnable_tiers()) {
        for (int threads : {1, 2}) {
            EngineGuard e{make_engine(tier.name, threads)};
            for (const auto& sh : shapes) {
                for (const auto& ty : types) {
                    Case c;
                    set_types(c, ty);
                    c.m = sh[0]; c.n = sh[1]; c.k = sh[2];
                    c.ta = it % 4 == 3;
                    c.ldb_pad = it % 3 == 1 ? 5 : 0;
                    c.lda_pad = it % 5 == 2 ? 7 : 0;
                    c.batch = it % 4 == 2 ? 3 : 1;
                    c.zero_point = c.a == JITMM_DTYPE_U8 && it % 2 ? 9 : 0;
                    INFO("tier " << tier.name << " threads " << threads << " case " << it);
                    ++it;
                    check_case(e.e, c, rng);
                }
            }
        }
    }
}

TEST_CASE("x86 lowp AMX: runs of panels of one row tile and one K step alternate two sets of C tiles, exactly",
          "[x86][lowp][amx]") {
    // panel_pairs: int8, up to 16 rows, K one step (short or whole), stored straight into C: 1-5 full panels (an
    // odd and an even count end in either set), column tails, ldc pads, batches (run_small) and threads.
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    std::mt19937 rng(1616);
    const int64_t ms[] = {1, 6, 13, 16};
    const int64_t ns[] = {32, 64, 96, 128, 160, 45, 77, 2479};
    const int64_t ks[] = {4, 42, 61, 64};
    int it = 0;
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("amx", threads)};
        for (int64_t m : ms)
            for (int64_t n : ns) {
                Case c;
                c.a = it % 3 == 0 ? JITMM_DTYPE_U8 : JITMM_DTYPE_S8;
                c.b = JITMM_DTYPE_S8;
                c.c = JITMM_DTYPE_S32;
                c.m = m;
                c.n = n;
                c.k = ks[it % 4];
                c.ta = it % 5 == 4;
                c.tb = it % 7 == 6;
                c.ldc_pad = it % 3 == 1 ? 3 : 0;
                c.lda_pad = it % 4 == 2 ? 5 : 0;
                c.batch = it % 6 == 5 ? 3 : 1;
                INFO("threads " << threads << " case " << it);
                ++it;
                check_case(e.e, c, rng);
            }
    }
}

TEST_CASE("x86 lowp AMX tier: a u8 A of a row tile's tail times a small B stored N x K runs on VNNI, exactly",
          "[x86][lowp][amx]") {
    // choose_step's tail_rows_u8: under 32 rows, not whole 16-row tiles, B stored N x K of at most 128 columns, M x N
    // x K up to 96 x 32 x 32 (a call of one batch only under 12 rows: the whole-call AMX function serves more);
    // whole 16-row tiles, an s8 A, B stored K x N and wide N keep AMX. (The generator is checked for one batch.)
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    struct Want {
        int64_t m, n, k;
        jitmm_dtype a;
        bool tb;
        const char* generator;
    };
    const Want wants[] = {{13, 59, 62, JITMM_DTYPE_U8, true, "x86_int8_amx"},
                          {26, 59, 62, JITMM_DTYPE_U8, true, "x86_int8_amx"},
                          {10, 59, 62, JITMM_DTYPE_U8, true, "x86_int8_vnni_avx512"},
                          {5, 120, 60, JITMM_DTYPE_U8, true, "x86_int8_vnni_avx512"},
                          {32, 64, 64, JITMM_DTYPE_U8, true, "x86_int8_amx"},
                          {13, 59, 62, JITMM_DTYPE_S8, true, "x86_int8_amx"},
                          {13, 59, 62, JITMM_DTYPE_U8, false, "x86_int8_amx"},
                          {5, 300, 60, JITMM_DTYPE_U8, true, "x86_int8_amx"},
                          {26, 118, 124, JITMM_DTYPE_U8, true, "x86_int8_amx"}};
    std::mt19937 rng(5962);
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("amx", threads)};
        int it = 0;
        for (const Want& w : wants) {
            jitmm_matmul_desc d;
            jitmm_matmul_desc_init(&d);
            d.m = w.m; d.n = w.n; d.k = w.k;
            d.a_type = w.a; d.b_type = JITMM_DTYPE_S8; d.c_type = JITMM_DTYPE_S32;
            d.trans_b = w.tb ? 1 : 0;
            d.lda = w.k; d.ldb = w.tb ? w.k : w.n; d.ldc = w.n;
            INFO(w.m << "x" << w.n << "x" << w.k << " " << jitmm_dtype_name(w.a) << (w.tb ? " NT" : " NN"));
            CHECK(generator_of(e.e, d) == w.generator);
            for (int64_t batch : {1, 9}) {
                Case c;
                c.a = w.a;
                c.m = w.m; c.n = w.n; c.k = w.k;
                c.tb = w.tb;
                c.ta = it % 3 == 2;
                c.batch = batch;
                c.ldb_pad = it % 2 ? 3 : 0;
                c.ldc_pad = it % 4 == 1 ? 5 : 0;
                c.zero_point = w.a == JITMM_DTYPE_U8 && it % 3 == 1 ? 11 : 0;
                ++it;
                check_case(e.e, c, rng);
            }
        }
    }
}

TEST_CASE("x86 lowp: an A read in place over a K tail never reads past its last byte (guard page)", "[x86][lowp]") {
    // u8 A, K not whole k groups: vpdpbusd reads each row's dwords in place, past the row's K into the next row;
    // row tiles whose reads would pass A's end come from a copy. A ends exactly at a PROT_NONE page, B and C are
    // ordinary buffers.
    std::mt19937 rng(777);
    struct Shape {
        int64_t m, n, k, lda;
    };
    // (169 = 168 + 1 and 85 = 84 + 1 rows: a last row tile of one row for every tile height, so that with lda
    // under 3 the tile before it reads past A's end too.)
    const Shape shapes[] = {{1990, 12, 6, 6}, {37, 20, 5, 5}, {702, 29, 1, 1}, {3, 40, 3, 3}, {100, 100, 7, 9},
                            {2, 300, 1, 1},   {61, 17, 2, 2}, {169, 30, 1, 1}, {169, 40, 2, 2}, {85, 48, 3, 3},
                            {81, 64, 2, 2}};
    for (const Tier& tier : runnable_tiers()) {
        EngineGuard e{make_engine(tier.name, 1)};
        for (const Shape& s : shapes) {
            INFO("tier " << tier.name << " " << s.m << "x" << s.n << "x" << s.k << " lda " << s.lda);
            const int64_t a_bytes = (s.m - 1) * s.lda + s.k;
            GuardedBytes guarded_memory(static_cast<size_t>(a_bytes));
            uint8_t* a = guarded_memory.data();
            std::uniform_int_distribution<int> byte(0, 255), sbyte(-128, 127);
            for (int64_t i = 0; i < a_bytes; ++i) a[i] = static_cast<uint8_t>(byte(rng));
            std::vector<int8_t> b(static_cast<size_t>(s.k * s.n));
            for (auto& v : b) v = static_cast<int8_t>(sbyte(rng));
            std::vector<int32_t> out(static_cast<size_t>(s.m * s.n), INT32_MIN);
            jitmm_matmul_desc d;
            REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
            d.m = s.m; d.n = s.n; d.k = s.k;
            d.a_type = JITMM_DTYPE_U8; d.b_type = JITMM_DTYPE_S8; d.c_type = JITMM_DTYPE_S32;
            d.lda = s.lda; d.ldb = s.n; d.ldc = s.n;
            jitmm_matmul_args args;
            REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
            args.a = a; args.b = b.data(); args.c = out.data();
            REQUIRE(jitmm_matmul(e.e, &d, &args) == JITMM_STATUS_SUCCESS);
            int64_t wrong = 0;
            for (int64_t i = 0; i < s.m; ++i)
                for (int64_t j = 0; j < s.n; ++j) {
                    int64_t sum = 0;
                    for (int64_t k = 0; k < s.k; ++k) sum += int64_t(a[i * s.lda + k]) * b[k * s.n + j];
                    wrong += sum != out[i * s.n + j];
                }
            CHECK(wrong == 0);
        }
    }
}

TEST_CASE("x86 lowp: K of a few values (dense A panels, gathered transposed B) over layouts, pads, batches, tiers",
          "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    // K = 1-8: A rows packed back to back (one run where lda = K), a transposed 16-bit B widened by dword gathers
    // (the last column alone at K = 1), over rows past one M block, odd columns, ld pads, batches and epilogues.
    std::mt19937 rng(4242);
    struct Shape {
        int64_t m, n, k, batch;
    };
    const Shape shapes[] = {{6, 464, 3, 1}, {2897, 2, 1, 2}, {21, 32, 3, 3}, {342, 27, 1, 1}, {5, 17, 2, 1},
                            {1990, 12, 6, 1}, {33, 70, 7, 2},   {1, 1, 1, 1},    {70, 45, 5, 1}, {130, 31, 4, 1}};
    const jitmm_dtype ins[][3] = {{JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_F16, JITMM_DTYPE_F16, JITMM_DTYPE_BF16},
                                  {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_F32}};
    for (const Tier& tier : runnable_tiers()) {
        EngineGuard e{make_engine(tier.name, 1)};
        int it = 0;
        for (const Shape& s : shapes) {
            for (const auto& in : ins) {
                for (int layout = 0; layout < 4; ++layout, ++it) {
                    INFO("tier " << tier.name << " case " << it);
                    Case c;
                    set_types(c, in);
                    c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
                    c.ta = layout & 2;
                    c.tb = layout & 1;
                    c.lda_pad = it % 5 == 0 ? 3 : 0;
                    c.ldb_pad = it % 3 == 0 ? 1 : 0;
                    c.ldc_pad = it % 2;
                    if (c.c != JITMM_DTYPE_S32) {
                        c.beta = it % 3 == 1 ? 0.5f : 0.0f;
                        // (Not on a handful of values: one output near an activation's zero makes the relative
                        // error of its approximation the whole norm.)
                        if (c.m * c.n >= 64) c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    }
                    check_case(e.e, c, rng);
                }
            }
        }
    }
}

namespace {

// The planner tests' chip: L1 and L2 as on the machines measured, AMX present.
jitmm::hw::CpuInfo amx_planner_cpu() {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    cpu.amx_tile = cpu.amx_bf16 = cpu.amx_int8 = true;
    return cpu;
}

// A problem with tight leading dimensions, both operands of type `in`.
jitmm::Problem planner_problem(int64_t m, int64_t n, int64_t k, bool ta, bool tb, jitmm_dtype in, jitmm_dtype out) {
    jitmm::Problem p;
    p.m = m; p.n = n; p.k = k;
    p.trans_a = ta; p.trans_b = tb;
    p.lda = ta ? m : k; p.ldb = tb ? k : n; p.ldc = n;
    p.a_type = p.b_type = in;
    p.c_type = out;
    return p;
}

// An int8 A (u8 or s8) times s8 B stored K x N (A stored K x M where ta), each shape once, exactly: pads on
// alternating shapes and, every fourth, a float C with alpha and the epilogue.
struct Int8KxNShape {
    int64_t m, n, k, batch;
    bool ta;
};

void check_int8_kxn_shapes(jitmm_engine* e, const std::vector<Int8KxNShape>& shapes, jitmm_dtype a, int64_t lda_pad,
                           int64_t ldb_pad, int64_t ldc_pad, float alpha, jitmm_epilogue epilogue, std::mt19937& rng) {
    int it = 0;
    for (const Int8KxNShape& sh : shapes) {
        Case c;
        c.a = a;
        c.b = JITMM_DTYPE_S8;
        c.m = sh.m; c.n = sh.n; c.k = sh.k; c.batch = sh.batch; c.ta = sh.ta;
        c.lda_pad = it % 2 ? lda_pad : 0;
        c.ldb_pad = it % 3 == 1 ? ldb_pad : 0;
        c.ldc_pad = it % 3 == 2 ? ldc_pad : 0;
        if (it % 4 == 3) {
            c.c = JITMM_DTYPE_F32;
            c.alpha = alpha;
            c.epilogue = epilogue;
        }
        INFO("case " << it);
        ++it;
        check_case(e, c, rng);
    }
}

}  // namespace

TEST_CASE("x86 lowp AMX tier: a u8 A of 1-4 rows times a small B stored K x N runs on VNNI, exactly",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    // B of at most 512 KB packed per call for a u8 A of 1-4 rows (NN, TN): the VNNI panels; 5 rows, an s8 A, a
    // larger B and B stored N x K keep their paths. K tails of a dword and of the unroll, ld pads, batches.
    std::mt19937 rng(232);
    EngineGuard e{make_engine("amx", 1)};
    const std::vector<Int8KxNShape> shapes = {{1, 232, 268, 1, false}, {2, 333, 101, 3, true},
                                              {4, 500, 300, 1, false}, {3, 700, 97, 2, true},
                                              {1, 100, 1000, 1, false}, {4, 65, 7, 1, false}};
    check_int8_kxn_shapes(e.e, shapes, JITMM_DTYPE_U8, 3, 17, 1, 0.5f, JITMM_EPILOGUE_BIAS, rng);
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    using jitmm::plan::LowpStep;
    auto step_of = [&](int64_t m, int64_t n, int64_t k, bool ta, jitmm_dtype a) {
        jitmm::Problem p = planner_problem(m, n, k, ta, false, a, JITMM_DTYPE_S32);
        p.b_type = JITMM_DTYPE_S8;
        return jitmm::plan::plan_x86_lowp(p, cpu, X86Isa::amx, 1).layout.step;
    };
    for (const Int8KxNShape& sh : shapes)
        CHECK(step_of(sh.m, sh.n, sh.k, sh.ta, JITMM_DTYPE_U8) == LowpStep::vnni_u8s8);
    CHECK(step_of(5, 500, 300, false, JITMM_DTYPE_U8) == LowpStep::amx_int8);
    CHECK(step_of(1, 1024, 1024, false, JITMM_DTYPE_U8) == LowpStep::amx_int8);
    CHECK(step_of(1, 232, 268, false, JITMM_DTYPE_S8) == LowpStep::amx_int8);
}

TEST_CASE("x86 lowp AMX tier: an s8 A of 1-16 rows over a K below 32 and a wide B stored K x N runs on VNNI, exactly",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    // The +128 shift and its column sums over K tails of a dword and of the unroll, NN and TN, ld pads, batches,
    // float epilogues; whole tiles over a small B, K = 32 and B stored N x K keep AMX.
    std::mt19937 rng(794);
    EngineGuard e{make_engine("amx", 1)};
    const std::vector<Int8KxNShape> shapes = {{4, 794, 27, 1, false}, {2, 1000, 16, 2, true},
                                              {16, 300, 1, 1, false}, {8, 512, 20, 1, true},
                                              {13, 257, 31, 3, false}, {1, 300, 30, 1, false}};
    check_int8_kxn_shapes(e.e, shapes, JITMM_DTYPE_S8, 5, 9, 2, 0.25f, JITMM_EPILOGUE_BIAS_RELU, rng);
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    using jitmm::plan::LowpStep;
    auto step_of = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
        return jitmm::plan::plan_x86_lowp(planner_problem(m, n, k, ta, tb, JITMM_DTYPE_S8, JITMM_DTYPE_S32), cpu,
                                          X86Isa::amx, 1)
            .layout.step;
    };
    for (const Int8KxNShape& sh : shapes) CHECK(step_of(sh.m, sh.n, sh.k, sh.ta, false) == LowpStep::vnni_u8s8);
    CHECK(step_of(16, 256, 16, false, false) == LowpStep::amx_int8);
    CHECK(step_of(16, 2000, 32, false, false) == LowpStep::amx_int8);
    CHECK(step_of(17, 794, 27, false, false) == LowpStep::amx_int8);
    CHECK(step_of(4, 794, 27, false, true) == LowpStep::amx_int8);
}

TEST_CASE("x86 lowp planner: threads split C's rows where its rows end inside cache lines and K is short",
          "[x86][lowp][plan]") {
    // N chunks would write the line at each chunk edge from two cores on every row: with a short K that costs
    // more than the products (2 threads, 640x250x8 NT bf16: 35 us over N chunks, 14 over M chunks). Rows of whole
    // lines keep the N split where K is more than one 64-byte step.
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    auto bf16_nt = [](int64_t m, int64_t n, int64_t k) {
        return planner_problem(m, n, k, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_F32);
    };
    // (K = 16: a K of 4 runs on converted FMAs, see below; the split is priced the same way there.)
    const auto shared = jitmm::plan::plan_x86_lowp(bf16_nt(640, 250, 16), cpu, X86Isa::amx, 2);
    INFO(shared.describe());
    CHECK(shared.m_chunks == 2);
    CHECK(shared.n_chunks == 1);
    const auto whole_lines = jitmm::plan::plan_x86_lowp(bf16_nt(640, 256, 64), cpu, X86Isa::amx, 2);
    CHECK(whole_lines.layout.step == jitmm::plan::LowpStep::amx_bf16);
    INFO(whole_lines.describe());
    CHECK(whole_lines.m_chunks == 1);
    CHECK(whole_lines.n_chunks == 2);
    // Rows of whole lines with a K of one 64-byte step: writing C is the work, and a thread's 1280-byte piece
    // of each row is shorter than a page: M chunks too (s8 1000x640x24: 30-35 us against 62-64).
    const auto c_work = jitmm::plan::plan_x86_lowp(
        planner_problem(1000, 640, 24, false, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32), cpu, X86Isa::amx, 2);
    INFO(c_work.describe());
    CHECK(c_work.m_chunks == 2);
    // K under 1 KB and a C past half of L2: the L2 streamer takes the neighbour's lines of each row, M chunks
    // (s8 784x512x128: 55 us over N chunks, 32 over M); a C that stays in L2 keeps its N chunks (256^3 s8).
    const auto streamer = jitmm::plan::plan_x86_lowp(
        planner_problem(784, 512, 128, false, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32), cpu, X86Isa::amx, 2);
    INFO(streamer.describe());
    CHECK(streamer.m_chunks == 2);
    CHECK(jitmm::plan::plan_x86_lowp(planner_problem(256, 256, 256, false, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32),
                                     cpu, X86Isa::amx, 2)
              .n_chunks == 2);
    // A long K keeps its N chunks (1024^3 bf16 at 2 threads: 1x2 800 us, 2x1 930).
    CHECK(jitmm::plan::plan_x86_lowp(planner_problem(1024, 1024, 1024, false, false, JITMM_DTYPE_BF16,
                                                     JITMM_DTYPE_F32),
                                     cpu, X86Isa::amx, 2)
              .n_chunks == 2);
}

TEST_CASE("x86 lowp planner: batches that the threads cannot share out evenly are cut", "[x86][lowp][plan]") {
    // 3 batches over 2 threads ran two whole batches on one thread (2 threads, median us, whole -> halves: s8
    // 2443x469x147 x5 3252 -> 2849, 50x971x2194 NT x5 2048 -> 1701); 4 batches stay whole.
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    for (X86Isa isa : {X86Isa::amx, X86Isa::avx512_vnni}) {
        for (int64_t batch : {3, 4, 5}) {
            jitmm::Problem p = planner_problem(2443, 469, 147, false, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32);
            p.batch = batch;
            p.stride_a = p.m * p.k;
            p.stride_b = p.k * p.n;
            p.stride_c = p.m * p.n;
            const auto plan = jitmm::plan::plan_x86_lowp(p, cpu, isa, 2);
            INFO(plan.describe() << " batch " << batch);
            REQUIRE(plan.threads == 2);
            CHECK(plan.m_chunks * plan.n_chunks == (batch % 2 ? 2 : 1));
        }
    }
}

TEST_CASE("x86 lowp planner: a second thread from fewer flops on slower steps and short K", "[x86][lowp][plan]") {
    // 2 MFLOP a thread for vpdpbusd on two zmm FMA ports; half for vdpbf16ps, half again on one port (Zen 4);
    // a K under 32 counted as 32 (writing C is most of the work).
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 32 * 1024;
    cpu.l2_bytes = 1024 * 1024;
    auto threads = [&](int64_t m, int64_t n, int64_t k, jitmm_dtype in, jitmm_dtype out, int fmas) {
        cpu.zmm_fma_per_cycle = fmas;
        const auto plan = jitmm::plan::plan_x86_lowp(planner_problem(m, n, k, false, false, in, out), cpu,
                                                     X86Isa::avx512_bf16, 2);
        INFO(plan.describe());
        return plan.threads;
    };
    CHECK(threads(100, 100, 100, JITMM_DTYPE_BF16, JITMM_DTYPE_F32, 1) == 2);  // 2 MFLOP at 0.5 MFLOP a thread
    CHECK(threads(100, 100, 100, JITMM_DTYPE_BF16, JITMM_DTYPE_F32, 2) == 2);  // 1 MFLOP a thread
    CHECK(threads(100, 100, 100, JITMM_DTYPE_S8, JITMM_DTYPE_S32, 2) == 1);    // 2 MFLOP a thread
    CHECK(threads(100, 100, 100, JITMM_DTYPE_S8, JITMM_DTYPE_S32, 1) == 2);
    CHECK(threads(64, 64, 64, JITMM_DTYPE_BF16, JITMM_DTYPE_F32, 1) == 1);     // 0.5 MFLOP
    CHECK(threads(3064, 18, 6, JITMM_DTYPE_BF16, JITMM_DTYPE_F32, 1) == 2);    // 0.66 MFLOP, counted as 3.5
    CHECK(threads(3064, 18, 6, JITMM_DTYPE_BF16, JITMM_DTYPE_F32, 2) == 2);
    // The dot products (few rows times B stored N x K) by their flops too, not only by B's bytes.
    cpu.zmm_fma_per_cycle = 1;
    const auto dot = jitmm::plan::plan_x86_lowp(planner_problem(8, 216, 668, false, true, JITMM_DTYPE_S8,
                                                                JITMM_DTYPE_S32),
                                                cpu, X86Isa::avx512_vnni, 2);
    INFO(dot.describe());
    CHECK(dot.layout.dot_nt);
    CHECK(dot.threads == 2);  // 2.3 MFLOP, 144 KB of B
}

TEST_CASE("x86 lowp planner: short K, decode rows over unaligned B rows, and threads for a large A",
          "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto problem = planner_problem;
    using jitmm::plan::LowpStep;
    // bf16 with K <= 4 runs on converted f32 FMAs, unless C is large enough for AMX to stream it out; K = 5-8
    // on AMX.
    const auto short_k = jitmm::plan::plan_x86_lowp(problem(640, 250, 4, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_F32),
                                                    cpu, X86Isa::amx, 1);
    CHECK(short_k.layout.step == LowpStep::fma_f32);
    const auto big_c = jitmm::plan::plan_x86_lowp(problem(1536, 1024, 4, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32),
                                                  cpu, X86Isa::amx, 1);
    CHECK(big_c.layout.step == LowpStep::amx_bf16);
    CHECK(jitmm::plan::plan_x86_lowp(problem(3072, 160, 6, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32), cpu,
                                     X86Isa::amx, 1)
              .layout.step == LowpStep::amx_bf16);
    CHECK(jitmm::plan::plan_x86_lowp(problem(1000, 640, 16, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32), cpu,
                                     X86Isa::amx, 1)
              .layout.step == LowpStep::amx_bf16);
    // One row times s8 weights stored N x K with rows of 2000 bytes (not whole lines): VNNI dot products read
    // them in place; rows of whole lines keep the swapped AMX path.
    const auto unaligned = jitmm::plan::plan_x86_lowp(problem(1, 1024, 2000, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32),
                                                      cpu, X86Isa::amx, 1);
    INFO(unaligned.describe());
    CHECK(unaligned.layout.step == LowpStep::vnni_u8s8);
    CHECK(unaligned.layout.dot_nt);
    const auto aligned = jitmm::plan::plan_x86_lowp(problem(1, 1024, 2048, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32),
                                                    cpu, X86Isa::amx, 1);
    CHECK(aligned.layout.step == LowpStep::amx_int8);
    CHECK(aligned.layout.swap_ab);
    // From 4 rows the swapped AMX order reads such rows in place too and beats the dot products; 3 keep them.
    for (int64_t m : {4, 5, 16}) {
        for (int64_t k : {60, 2000}) {
            const auto rows = jitmm::plan::plan_x86_lowp(
                problem(m, 3414, k, false, true, JITMM_DTYPE_U8, JITMM_DTYPE_S32), cpu, X86Isa::amx, 1);
            INFO(rows.describe());
            CHECK(rows.layout.step == LowpStep::amx_int8);
            CHECK(rows.layout.swap_ab);
        }
    }
    CHECK(jitmm::plan::plan_x86_lowp(problem(3, 3414, 300, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32), cpu,
                                     X86Isa::amx, 1)
              .layout.dot_nt);
    // Two columns over a 1.7 MB A: the A's bytes call for threads the products alone would not.
    const auto tall = jitmm::plan::plan_x86_lowp(problem(2304, 2, 768, true, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32), cpu,
                                                 X86Isa::amx, 2);
    CHECK(tall.threads == 2);
    CHECK(tall.m_chunks == 2);
}

TEST_CASE("x86 lowp: short-K bf16 on converted FMAs and unaligned decode weights on VNNI stay within bounds",
          "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    // The shapes the planner test above steers off AMX, through the C API on this CPU's best tier.
    std::mt19937 rng(9090);
    const Tier& best = runnable_tiers().back();
    EngineGuard e{make_engine(best.name, 2)};
    const jitmm_dtype bf16[3] = {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32};
    const jitmm_dtype s8[3] = {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    struct Shape {
        int64_t m, n, k;
        bool ta, tb;
        const jitmm_dtype (*types)[3];
    };
    const Shape shapes[] = {{640, 250, 4, false, true, &bf16},  {1024, 77, 2, true, false, &bf16},
                            {197, 300, 1, false, false, &bf16}, {1, 1024, 2000, false, true, &s8},
                            {3, 700, 1000, false, true, &s8},   {1024, 1, 2000, false, false, &s8},
                            {2304, 2, 768, true, true, &s8}};
    for (const Shape& s : shapes) {
        Case c;
        set_types(c, *s.types);
        c.m = s.m;
        c.n = s.n;
        c.k = s.k;
        c.ta = s.ta;
        c.tb = s.tb;
        check_case(e.e, c, rng);
    }
}

TEST_CASE("x86 lowp planner: AMX with at most four column panels runs all of K in one block", "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool tb, jitmm_dtype in, jitmm_dtype out) {
        return jitmm::plan::plan_x86_lowp(planner_problem(m, n, k, false, tb, in, out), cpu, X86Isa::amx, 1);
    };
    // Few panels: one K block (the A tile streams from L2 beside all of B).
    const auto skinny = plan(2048, 32, 1024, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32);
    INFO(skinny.describe());
    CHECK(skinny.k_blocks(1024) == 1);
    CHECK(plan(2048, 128, 4096, true, JITMM_DTYPE_BF16, JITMM_DTYPE_F32).k_blocks(4096) == 1);
    CHECK(plan(2048, 100, 8192, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32).k_blocks(8192) == 1);
    // Sixteen panels keep the A tile in L1 over K blocks; all of B past half of L2 keeps K blocks too.
    CHECK(plan(2048, 512, 1024, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32).k_blocks(1024) == 2);
    CHECK(plan(2048, 128, 8192, true, JITMM_DTYPE_BF16, JITMM_DTYPE_F32).k_blocks(8192) > 1);
}

TEST_CASE("x86 lowp AMX: few columns over one long K block, and short K steps over unaligned rows past one M block",
          "[x86][lowp][amx]") {
    // The two paths of run_chunk these shapes take: all of K in one block with the A tile read in place or
    // packed (tails, ld pads, a zero point), and a K of one short step whose 48- or 40-byte rows are read in
    // place by the tile loads (not 64-byte aligned) over several M blocks. 1 and 2 threads.
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no usable AMX on this CPU");
        return;
    }
    std::mt19937 rng(31337);
    const jitmm_dtype bf16[3] = {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32};
    const jitmm_dtype s8[3] = {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    const jitmm_dtype u8[3] = {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    struct Shape {
        int64_t m, n, k;
        bool tb;
        int64_t lda_pad, ldc_pad;
        int32_t zero_point;
        const jitmm_dtype (*types)[3];
    };
    const Shape shapes[] = {{300, 40, 2100, false, 0, 3, 0, &bf16},  {97, 128, 3000, true, 32, 0, 0, &bf16},
                            {260, 7, 4500, true, 0, 1, 0, &s8},      {130, 96, 5000, false, 64, 0, 9, &u8},
                            {3072, 2, 48, false, 0, 0, 0, &s8},      {3000, 5, 40, false, 0, 2, 0, &s8},
                            {2900, 3, 24, false, 0, 0, 0, &bf16},    {2000, 17, 20, true, 0, 0, 0, &bf16}};
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("amx", threads)};
        for (const Shape& s : shapes) {
            Case c;
            set_types(c, *s.types);
            c.m = s.m;
            c.n = s.n;
            c.k = s.k;
            c.tb = s.tb;
            c.lda_pad = s.lda_pad;
            c.ldc_pad = s.ldc_pad;
            c.zero_point = s.zero_point;
            INFO("threads " << threads);
            check_case(e.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp planner: the AMX roles swap for few rows only over a K long for the rows", "[x86][lowp][plan]") {
    // The swapped calls gather each C row out of transposed blocks: from about 3 bytes of K per row they beat
    // packing B (s8 77x256x128 NT: swapped 6.1 us, normal 3.6; bf16 16x4096x128 NT: swapped 27, normal 49).
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto swapped = [&](int64_t m, int64_t n, int64_t k, jitmm_dtype in, jitmm_dtype out) {
        return jitmm::plan::plan_x86_lowp(planner_problem(m, n, k, false, true, in, out), cpu, X86Isa::amx, 1)
            .layout.swap_ab;
    };
    CHECK_FALSE(swapped(77, 256, 128, JITMM_DTYPE_S8, JITMM_DTYPE_S32));
    CHECK_FALSE(swapped(64, 1536, 64, JITMM_DTYPE_BF16, JITMM_DTYPE_F32));
    CHECK(swapped(16, 4096, 128, JITMM_DTYPE_BF16, JITMM_DTYPE_F32));
    CHECK(swapped(128, 4096, 4096, JITMM_DTYPE_BF16, JITMM_DTYPE_F32));
    CHECK(swapped(64, 2048, 512, JITMM_DTYPE_S8, JITMM_DTYPE_S32));
}

TEST_CASE("x86 lowp planner: tiny products in batches take AMX where one tile configuration serves them all",
          "[x86][lowp][plan]") {
    // A single tiny call finishes on the vector steps before ldtilecfg would; batches of them configure the tiles
    // once per thread, which pays for an s8 A (VNNI would shift it and sum B's columns) and for bf16 from 9^3.
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    using jitmm::plan::LowpStep;
    const auto step = [&](int64_t mnk, int64_t batch, jitmm_dtype a, jitmm_dtype b, jitmm_dtype c) {
        jitmm::Problem p = planner_problem(mnk, mnk, mnk, false, false, a, c);
        p.b_type = b;
        p.batch = batch;
        p.stride_a = mnk * mnk; p.stride_b = mnk * mnk; p.stride_c = mnk * mnk;
        return jitmm::plan::plan_x86_lowp(p, cpu, X86Isa::amx, 1).layout.step;
    };
    CHECK(step(16, 1, JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32) == LowpStep::vnni_u8s8);
    CHECK(step(16, 16, JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32) == LowpStep::amx_int8);
    CHECK(step(8, 64, JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_F32) == LowpStep::amx_int8);
    CHECK(step(16, 16, JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32) == LowpStep::vnni_u8s8);
    CHECK(step(16, 1, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32) == LowpStep::dot_bf16);
    CHECK(step(16, 16, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32) == LowpStep::amx_bf16);
    CHECK(step(8, 64, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32) == LowpStep::dot_bf16);
}

TEST_CASE("x86 lowp planner: short K over tile tails and C rows off lines leaves AMX", "[x86][lowp][plan]") {
    // bf16 over a K of 6 or 8 with a row tail and C rows off 64-byte lines: the converted FMAs; batches of an s8 A
    // over a K of 3-16 with column tails past one tile, rows off lines and small C: VNNI, under 48 columns (the
    // whole-call AMX function serves more). Rows on lines, whole tiles, K outside the ranges and large C keep AMX.
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    using jitmm::plan::LowpStep;
    const auto step = [&](int64_t m, int64_t n, int64_t k, int64_t ldc, int64_t batch, jitmm_dtype in) {
        const bool int8 = in == JITMM_DTYPE_S8;
        jitmm::Problem p = planner_problem(m, n, k, false, false, in, int8 ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32);
        p.ldc = ldc;
        p.batch = batch;
        p.stride_a = m * k; p.stride_b = k * n; p.stride_c = m * ldc;
        return jitmm::plan::plan_x86_lowp(p, cpu, X86Isa::amx, 1).layout.step;
    };
    const jitmm_dtype bf16 = JITMM_DTYPE_BF16, s8 = JITMM_DTYPE_S8;
    CHECK(step(100, 300, 6, 300, 1, bf16) == LowpStep::fma_f32);
    CHECK(step(999, 999, 8, 999, 1, bf16) == LowpStep::fma_f32);
    CHECK(step(200, 2000, 8, 2000, 1, bf16) == LowpStep::amx_bf16);  // rows on lines
    CHECK(step(128, 100, 8, 100, 8, bf16) == LowpStep::amx_bf16);    // whole row tiles
    CHECK(step(300, 1000, 10, 1000, 1, bf16) == LowpStep::amx_bf16);  // K = 10
    CHECK(step(16, 36, 5, 36, 38, s8) == LowpStep::vnni_u8s8);
    CHECK(step(40, 40, 16, 40, 10, s8) == LowpStep::vnni_u8s8);
    CHECK(step(56, 57, 5, 57, 16, s8) == LowpStep::amx_int8);    // 48 columns: the whole-call function
    CHECK(step(40, 70, 16, 70, 10, s8) == LowpStep::amx_int8);
    CHECK(step(16, 32, 5, 32, 38, s8) == LowpStep::amx_int8);    // whole columns
    CHECK(step(56, 57, 5, 64, 16, s8) == LowpStep::amx_int8);    // rows on lines
    CHECK(step(56, 57, 32, 57, 16, s8) == LowpStep::amx_int8);   // K = 32
    CHECK(step(105, 34, 2, 34, 2, s8) == LowpStep::amx_int8);    // K = 2
    CHECK(step(1000, 100, 5, 100, 2, s8) == LowpStep::amx_int8);  // 100K values a batch
}

TEST_CASE("x86 lowp planner: int8 with a K of at most 32 over a large C runs on VNNI below AMX", "[x86][lowp][plan]") {
    // Writing C is the work there, and vpdpbusd's stores stream where the AMX panels drain every block (u8
    // 512x512x8, 1 thread: AMX 31 us, VNNI 19). An s8 A (shift and column sums) only at two k groups and a wide C.
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    using jitmm::plan::LowpStep;
    const auto step = [&](int64_t m, int64_t n, int64_t k, jitmm_dtype a) {
        jitmm::Problem p = planner_problem(m, n, k, false, false, a, JITMM_DTYPE_S32);
        p.b_type = JITMM_DTYPE_S8;
        return jitmm::plan::plan_x86_lowp(p, cpu, X86Isa::amx, 1).layout.step;
    };
    CHECK(step(512, 512, 8, JITMM_DTYPE_U8) == LowpStep::vnni_u8s8);
    CHECK(step(1024, 1024, 32, JITMM_DTYPE_U8) == LowpStep::vnni_u8s8);
    CHECK(step(512, 512, 8, JITMM_DTYPE_S8) == LowpStep::vnni_u8s8);
    CHECK(step(512, 512, 48, JITMM_DTYPE_U8) == LowpStep::amx_int8);     // a longer K
    CHECK(step(64, 64, 32, JITMM_DTYPE_U8) == LowpStep::amx_int8);       // a small C
    CHECK(step(1000, 48, 4, JITMM_DTYPE_S8) == LowpStep::amx_int8);      // s8 A over a narrow C
    CHECK(step(200, 1000, 12, JITMM_DTYPE_S8) == LowpStep::amx_int8);    // s8 A past two k groups
    // A smaller C with tile tails: a configuration per tail shape, and the whole-call AMX function (tails
    // overlapping) only from 20 rows over a K of 12, or 6 over 96 rows and at most 128 columns.
    CHECK(step(14, 795, 4, JITMM_DTYPE_U8) == LowpStep::vnni_u8s8);
    CHECK(step(100, 300, 6, JITMM_DTYPE_U8) == LowpStep::vnni_u8s8);
    CHECK(step(33, 100, 10, JITMM_DTYPE_U8) == LowpStep::vnni_u8s8);
    CHECK(step(100, 100, 6, JITMM_DTYPE_U8) == LowpStep::amx_int8);
    CHECK(step(48, 200, 12, JITMM_DTYPE_U8) == LowpStep::amx_int8);
    CHECK(step(14, 795, 4, JITMM_DTYPE_S8) == LowpStep::vnni_u8s8);
    CHECK(step(64, 64, 8, JITMM_DTYPE_S8) == LowpStep::amx_int8);       // whole tiles
    CHECK(step(100, 100, 6, JITMM_DTYPE_S8) == LowpStep::amx_int8);     // s8 A over a narrow C
}

TEST_CASE("x86 lowp AMX whole-call: tiles and panels overlap at the tails, and the planner's small tails fit",
          "[x86][lowp][amx][plan]") {
    using V = std::vector<int64_t>;
    CHECK(jitmm::x86::amx_whole_tiles(7) == V{0});
    CHECK(jitmm::x86::amx_whole_tiles(16) == V{0});
    CHECK(jitmm::x86::amx_whole_tiles(17) == V{0, 1});
    CHECK(jitmm::x86::amx_whole_tiles(63) == V{0, 16, 32, 47});
    CHECK(jitmm::x86::amx_whole_tiles(64) == V{0, 16, 32, 48});
    const auto panels = [](int64_t n) {
        std::vector<std::pair<int64_t, int>> out;
        for (const auto& p : jitmm::x86::amx_whole_panels(n)) out.emplace_back(p.first, p.tiles);
        return out;
    };
    using P = std::vector<std::pair<int64_t, int>>;
    CHECK(panels(5) == P{{0, 1}});
    CHECK(panels(16) == P{{0, 1}});
    CHECK(panels(20) == P{{0, 1}, {4, 1}});
    CHECK(panels(33) == P{{0, 2}, {17, 1}});
    CHECK(panels(48) == P{{0, 2}, {32, 1}});
    CHECK(panels(63) == P{{0, 2}, {31, 2}});
    CHECK(panels(64) == P{{0, 2}, {32, 2}});
    // Small products with tails plan to the whole-call function (no tile configuration per tail shape).
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto fits = [&](int64_t m, int64_t n, int64_t k, jitmm_dtype in, jitmm_dtype out) {
        const jitmm::Problem p = planner_problem(m, n, k, false, false, in, out);
        const auto plan = jitmm::plan::plan_x86_lowp(p, cpu, X86Isa::amx, 1);
        return jitmm::plan::step_is_amx(plan.layout.step) && jitmm::x86::amx_whole_call_fits(p, plan);
    };
    CHECK(fits(33, 33, 33, JITMM_DTYPE_S8, JITMM_DTYPE_S32));
    CHECK(fits(63, 63, 63, JITMM_DTYPE_S8, JITMM_DTYPE_S32));
    CHECK(fits(100, 40, 128, JITMM_DTYPE_S8, JITMM_DTYPE_S32));
    CHECK(fits(33, 33, 33, JITMM_DTYPE_BF16, JITMM_DTYPE_F32));
    CHECK(fits(63, 63, 63, JITMM_DTYPE_BF16, JITMM_DTYPE_F32));
    CHECK(fits(96, 96, 96, JITMM_DTYPE_BF16, JITMM_DTYPE_F32));           // three steps
    CHECK(fits(65, 65, 100, JITMM_DTYPE_BF16, JITMM_DTYPE_F32));          // four
    CHECK_FALSE(fits(100, 100, 100, JITMM_DTYPE_BF16, JITMM_DTYPE_F32));  // four over 49 tiles: too many products
    CHECK_FALSE(fits(64, 64, 160, JITMM_DTYPE_BF16, JITMM_DTYPE_F32));    // five steps
    CHECK_FALSE(fits(400, 20, 64, JITMM_DTYPE_S8, JITMM_DTYPE_S32));      // 25 row tiles over 20 columns
}

TEST_CASE("x86 lowp planner: dot products for a small B over a long K, vector tiles no wider than N",
          "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool tb, X86Isa isa) {
        jitmm::Problem p = planner_problem(m, n, k, false, tb, JITMM_DTYPE_U8, JITMM_DTYPE_S32);
        p.b_type = JITMM_DTYPE_S8;
        return jitmm::plan::plan_x86_lowp(p, cpu, isa, 1);
    };
    CHECK(plan(3, 10, 976, true, X86Isa::amx).layout.dot_nt);
    CHECK(plan(8, 30, 300, true, X86Isa::amx).layout.dot_nt);
    CHECK_FALSE(plan(16, 16, 256, true, X86Isa::amx).layout.dot_nt);  // more rows: a whole-call AMX function
    CHECK_FALSE(plan(4, 20, 128, true, X86Isa::amx).layout.dot_nt);   // a shorter K
    const jitmm::plan::X86LowpPlan narrow = plan(3, 10, 976, false, X86Isa::avx512_vnni);
    CHECK(narrow.layout.nv == 1);
}

TEST_CASE("x86 lowp planner: bf16 with K <= 4 or an odd K <= 7 on converted FMAs, rows packed back to back",
          "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    using jitmm::plan::LowpStep;
    const auto plan = [&](int64_t m, int64_t n, int64_t k) {
        const jitmm::Problem p = planner_problem(m, n, k, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_F32);
        return jitmm::plan::plan_x86_lowp(p, cpu, X86Isa::amx, 1);
    };
    CHECK(plan(347, 34, 3).layout.step == LowpStep::fma_f32);
    CHECK(plan(347, 34, 5).layout.step == LowpStep::fma_f32);
    CHECK(plan(512, 512, 7).layout.step == LowpStep::fma_f32);
    CHECK(plan(3072, 160, 6).layout.step == LowpStep::amx_bf16);  // an even K: short AMX steps
    CHECK(plan(256, 64, 8).layout.step == LowpStep::amx_bf16);
    CHECK(plan(512, 512, 9).layout.step == LowpStep::amx_bf16);
    // Rows of at most a line in one K block: packed A rows K values apart.
    const jitmm::plan::X86LowpPlan p3 = plan(347, 34, 3);
    CHECK(p3.pack_a);
    CHECK(p3.a_panel_ld == 3);
    CHECK(p3.layout.a_row_bytes == 12);
}

TEST_CASE("x86 lowp planner: vdpbf16ps tiles read an A stored M x K in place over an odd K", "[x86][lowp][plan]") {
    // A core of one zmm FMA per cycle (Zen 4), where vdpbf16ps runs at the f32 FMA rate and serves bf16.
    jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    cpu.amx_tile = cpu.amx_bf16 = cpu.amx_int8 = false;
    cpu.zmm_fma_per_cycle = 1;
    cpu.bf16_dot_full_rate = true;
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool ta, X86Isa isa) {
        const jitmm::Problem p = planner_problem(m, n, k, ta, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32);
        return jitmm::plan::plan_x86_lowp(p, cpu, isa, 1);
    };
    for (const int64_t k : {2971, 2970, 101}) {
        const jitmm::plan::X86LowpPlan in_place = plan(674, 16, k, false, X86Isa::avx512_bf16);
        INFO(in_place.describe());
        REQUIRE(in_place.layout.step == jitmm::plan::LowpStep::dot_bf16);
        CHECK_FALSE(in_place.pack_a);
        CHECK(in_place.layout.a_odd_k_word == (k % 2 != 0));
    }
    // An A stored K x M is still transposed into panels.
    const jitmm::plan::X86LowpPlan transposed = plan(674, 16, 2971, true, X86Isa::avx512_bf16);
    CHECK(transposed.pack_a);
    CHECK_FALSE(transposed.layout.a_odd_k_word);
}

TEST_CASE("x86 lowp planner: VNNI dot products for decode rows only where K is more than their reductions",
          "[x86][lowp][plan]") {
    // A K of one vector over 6 rows or more (half a vector over 4) is B packed; fewer rows read B in place.
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto dot = [&](int64_t m, int64_t n, int64_t k, jitmm_dtype a, X86Isa isa) {
        jitmm::Problem p = planner_problem(m, n, k, false, true, a, JITMM_DTYPE_S32);
        p.b_type = JITMM_DTYPE_S8;
        const auto plan = jitmm::plan::plan_x86_lowp(p, cpu, isa, 1);
        INFO(plan.describe());
        return plan.layout.dot_nt;
    };
    CHECK_FALSE(dot(16, 2048, 32, JITMM_DTYPE_U8, X86Isa::amx));
    CHECK_FALSE(dot(4, 4096, 16, JITMM_DTYPE_U8, X86Isa::amx));
    CHECK_FALSE(dot(12, 3000, 24, JITMM_DTYPE_S8, X86Isa::avx512_vnni));
    CHECK(dot(2, 4096, 32, JITMM_DTYPE_U8, X86Isa::amx));
    CHECK(dot(4, 4096, 64, JITMM_DTYPE_S8, X86Isa::avx512_vnni));
    CHECK(dot(16, 4096, 4096, JITMM_DTYPE_S8, X86Isa::avx512_vnni));
    // Past 16 rows only on a core of one zmm product a cycle, where the cost model prefers the dot products: a
    // long K over few columns.
    CHECK_FALSE(dot(30, 28, 3354, JITMM_DTYPE_S8, X86Isa::avx512_vnni));
    // A core of one zmm FMA per cycle (Zen 4) packs B further: 2 rows from half a vector of K, 4 from one, 8 up
    // to three.
    jitmm::hw::CpuInfo zen4 = cpu;
    zen4.amx_tile = zen4.amx_bf16 = zen4.amx_int8 = false;
    zen4.zmm_fma_per_cycle = 1;
    const auto dot_zen4 = [&](int64_t m, int64_t n, int64_t k) {
        jitmm::Problem p = planner_problem(m, n, k, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32);
        const auto plan = jitmm::plan::plan_x86_lowp(p, zen4, X86Isa::avx512_bf16, 1);
        INFO(plan.describe());
        return plan.layout.dot_nt;
    };
    CHECK_FALSE(dot_zen4(2, 4096, 32));
    CHECK(dot_zen4(2, 4096, 64));
    CHECK_FALSE(dot_zen4(4, 4096, 64));
    CHECK(dot_zen4(4, 4096, 128));
    CHECK_FALSE(dot_zen4(8, 3000, 192));
    CHECK(dot_zen4(8, 3000, 512));
    // Past 16 rows by the cost model: a long K over few columns, up to 256 rows; not a short K, many columns or
    // rows, nor 8 columns or fewer under 2 KB of K.
    CHECK(dot_zen4(30, 28, 3354));
    CHECK(dot_zen4(39, 18, 2832));
    CHECK(dot_zen4(150, 20, 1000));
    CHECK(dot_zen4(43, 7, 3379));
    CHECK_FALSE(dot_zen4(709, 106, 260));
    CHECK_FALSE(dot_zen4(33, 32, 800));
    CHECK_FALSE(dot_zen4(300, 28, 3354));
    CHECK_FALSE(dot_zen4(184, 6, 1392));
}

TEST_CASE("x86 lowp planner: the AMX roles swap only over an N wide for the rows", "[x86][lowp][plan]") {
    // The swapped order splits N over the threads: 2 columns per row at 1 thread, 4 at more (2 threads, bf16
    // 128x128x4096 NT: swapped 131 us, normal 60; 128x512x4096 NT: swapped 344, normal 392).
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto swapped = [&](int64_t m, int64_t n, int threads) {
        return jitmm::plan::plan_x86_lowp(
                   planner_problem(m, n, 4096, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_F32), cpu, X86Isa::amx,
                   threads)
            .layout.swap_ab;
    };
    CHECK_FALSE(swapped(128, 128, 1));
    CHECK(swapped(128, 256, 1));
    CHECK_FALSE(swapped(128, 256, 2));
    CHECK(swapped(128, 512, 2));
    CHECK(swapped(16, 128, 16));
}

TEST_CASE("x86 lowp planner: s8 B rows off cache lines, the swapped AMX order or the VNNI dot products by rows and K",
          "[x86][lowp][plan]") {
    // The swapped tiles pad the rows to 16: from 8 rows they win at any K, from 4 over a short K or a B past L2.
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto plan = [&](int64_t m, int64_t n, int64_t k) {
        jitmm::Problem p = planner_problem(m, n, k, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32);
        p.b_type = JITMM_DTYPE_S8;
        return jitmm::plan::plan_x86_lowp(p, cpu, X86Isa::amx, 1).layout;
    };
    CHECK(plan(5, 3414, 60).swap_ab);
    CHECK(plan(8, 282, 2306).swap_ab);
    CHECK(plan(4, 1000, 2306).swap_ab);  // 2.3 MB of B
    CHECK_FALSE(plan(4, 282, 2306).swap_ab);
    CHECK(plan(4, 282, 2306).step == jitmm::plan::LowpStep::vnni_u8s8);
    CHECK_FALSE(plan(6, 282, 1000).swap_ab);
}

TEST_CASE("x86 lowp planner: AMX int8 over one K block with a dword tail reads the rows in place",
          "[x86][lowp][plan]") {
    // plan::amx_k_reads_rows: K rounded up to whole dwords (7 -> 8, 53 -> 56, 125 -> 128), the packed side's
    // extra k rows zero. bf16 keeps its whole steps for an odd K (what lies past K could be a NaN).
    using jitmm::plan::LowpStep;
    CHECK(jitmm::plan::amx_k_step_bytes(LowpStep::amx_int8, 7) == 8);
    CHECK(jitmm::plan::amx_k_step_bytes(LowpStep::amx_int8, 53) == 56);
    CHECK(jitmm::plan::amx_k_step_bytes(LowpStep::amx_int8, 1) == 4);
    CHECK(jitmm::plan::amx_k_step_bytes(LowpStep::amx_int8, 86) == 44);   // 88 bytes: two steps of 44
    CHECK(jitmm::plan::amx_k_step_bytes(LowpStep::amx_int8, 90) == 48);   // two steps of 48, 6 bytes past K
    CHECK(jitmm::plan::amx_k_overrun_bytes(LowpStep::amx_int8, 90) == 6);
    CHECK(jitmm::plan::amx_k_step_bytes(LowpStep::amx_int8, 65) == 36);
    CHECK_FALSE(jitmm::plan::amx_k_reads_rows(LowpStep::amx_int8, 1000));  // 16 whole steps, 24 bytes past K
    CHECK(jitmm::plan::amx_k_step_bytes(LowpStep::amx_int8, 125) == 64);  // 128: two whole steps
    CHECK(jitmm::plan::amx_k_reads_rows(LowpStep::amx_int8, 125));
    CHECK(jitmm::plan::amx_k_overrun_bytes(LowpStep::amx_int8, 125) == 3);
    CHECK_FALSE(jitmm::plan::amx_k_reads_rows(LowpStep::amx_int8, 128));
    CHECK_FALSE(jitmm::plan::amx_k_reads_rows(LowpStep::amx_int8, 1886));  // 1888 bytes: no equal steps
    CHECK(jitmm::plan::amx_k_step_bytes(LowpStep::amx_bf16, 7) == 64);
    CHECK_FALSE(jitmm::plan::amx_k_reads_rows(LowpStep::amx_bf16, 7));
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool tb) {
        jitmm::Problem p = planner_problem(m, n, k, false, tb, JITMM_DTYPE_S8, JITMM_DTYPE_S32);
        return jitmm::plan::plan_x86_lowp(p, cpu, X86Isa::amx, 1);
    };
    const auto normal = plan(1316, 31, 7, false);
    INFO(normal.describe());
    CHECK(normal.layout.step == LowpStep::amx_int8);
    CHECK_FALSE(normal.pack_a);
    const auto swapped = plan(6, 2752, 53, true);
    INFO(swapped.describe());
    CHECK(swapped.layout.swap_ab);
    CHECK(swapped.k_blocks(53) == 1);
    // Few column panels: A in place over whole steps, K blocks and unaligned rows (amx_rows_any_stride); 16
    // panels keep packing it.
    const auto long_k = plan(36, 7, 1886, true);
    INFO(long_k.describe());
    CHECK(long_k.k_blocks(1886) == 2);
    CHECK_FALSE(long_k.pack_a);
    CHECK_FALSE(plan(2000, 256, 1000, false).pack_a);
    CHECK(plan(500, 500, 500, false).pack_a);
    CHECK(jitmm::plan::amx_rows_any_stride(LowpStep::amx_int8, true, 128, 2000));
    CHECK_FALSE(jitmm::plan::amx_rows_any_stride(LowpStep::amx_int8, true, 256, 1000));
    // bf16 in the normal order too (its last partial step copied, LowpLayout::a_last_step_copied), not swapped.
    CHECK(jitmm::plan::amx_rows_any_stride(LowpStep::amx_bf16, false, 36, 7));
    CHECK_FALSE(jitmm::plan::amx_rows_any_stride(LowpStep::amx_bf16, false, 36, 500));
    CHECK_FALSE(jitmm::plan::amx_rows_any_stride(LowpStep::amx_bf16, true, 36, 2000));
}

TEST_CASE("x86 lowp AMX int8: a K with a dword tail read in place, rounded up to whole dwords (exact)",
          "[x86][lowp][amx]") {
    // K of one block read in place over K rounded up to whole dwords: the bytes past K of each row are the
    // next row's (or the copied last rows' zero padding) and meet packed zeros. Normal order (A in place) and
    // swapped (B stored N x K in place), ld pads, misaligned B, batches, threads, saturation corners, dequant
    // epilogues, beta.
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    std::mt19937 rng(5353);
    EngineGuard one{make_engine("amx", 1)};
    EngineGuard two{make_engine("amx", 2)};
    struct Shape {
        int64_t m, n, k, batch;
        bool tb;
        jitmm_dtype a;
    };
    const Shape shapes[] = {{1316, 31, 7, 1, false, JITMM_DTYPE_S8}, {100, 100, 5, 2, false, JITMM_DTYPE_S8},
                            {37, 20, 1, 1, false, JITMM_DTYPE_S8},   {64, 64, 3, 3, true, JITMM_DTYPE_S8},
                            {40, 50, 53, 1, false, JITMM_DTYPE_U8},  {33, 17, 61, 2, true, JITMM_DTYPE_S8},
                            {70, 45, 125, 1, false, JITMM_DTYPE_U8}, {48, 48, 63, 1, true, JITMM_DTYPE_S8},
                            {6, 2752, 53, 1, true, JITMM_DTYPE_S8},  {12, 1500, 53, 2, true, JITMM_DTYPE_S8},
                            {20, 1000, 61, 1, true, JITMM_DTYPE_U8}, {33, 2000, 125, 1, true, JITMM_DTYPE_S8},
                            {161, 98, 5, 1, true, JITMM_DTYPE_S8},   {36, 7, 1886, 1, true, JITMM_DTYPE_S8}, {90, 70, 83, 1, false, JITMM_DTYPE_S8},
                            {200, 40, 1886, 1, false, JITMM_DTYPE_U8}, {100, 100, 100, 1, false, JITMM_DTYPE_S8},
                            {33, 40, 1, 1, false, JITMM_DTYPE_S8},   {77, 90, 65, 2, true, JITMM_DTYPE_S8},
                            {30, 1000, 90, 1, true, JITMM_DTYPE_U8}, {30, 700, 1000, 1, true, JITMM_DTYPE_S8},
                            // few panels: in place over whole steps and K blocks, any stride (amx_rows_any_stride)
                            {300, 20, 1886, 1, false, JITMM_DTYPE_S8}, {65, 256, 1000, 2, false, JITMM_DTYPE_U8},
                            {97, 64, 128, 1, true, JITMM_DTYPE_S8},  {36, 100, 1886, 1, true, JITMM_DTYPE_S8},
                            {64, 1000, 999, 1, true, JITMM_DTYPE_U8}, {100, 300, 5000, 1, false, JITMM_DTYPE_S8}};
    int it = 0;
    for (const Shape& s : shapes) {
        for (int variant = 0; variant < 4; ++variant, ++it) {
            INFO("case " << it);
            Case c;
            c.a = s.a;
            c.b = JITMM_DTYPE_S8;
            c.c = variant == 3 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
            c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
            c.tb = s.tb;
            c.lda_pad = variant == 1 ? 3 : variant == 2 ? 64 : 0;
            c.ldb_pad = variant == 1 ? 1 : variant == 3 ? 5 : 0;
            c.ldc_pad = variant % 2;
            c.b_offset = variant == 2 ? 7 : 0;
            if (variant == 1) {  // the corners: 255 (u8) or -128 (s8) times 127 and -128
                c.a_fill = c.a == JITMM_DTYPE_U8 ? 255 : -128;
                c.b_fill = it % 2 ? 127 : -128;
            }
            if (variant == 2) c.beta = 1.0f;
            if (variant == 3) {
                c.a_scale = JITMM_SCALE_PER_ROW;
                c.b_scale = JITMM_SCALE_PER_COLUMN;
                c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                c.beta = 0.5f;
            }
            check_case(one.e, c, rng);
            check_case(two.e, c, rng);
        }
    }
}

TEST_CASE("x86 lowp AMX int8: operands read in place over a dword tail never read past their last byte",
          "[x86][lowp][amx]") {
    // The last rows come from a copy (GemmLowpKernel::copy_last_rows): A (normal order) or B stored N x K
    // (swapped order) ends exactly at a PROT_NONE page.
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    std::mt19937 rng(9191);
    struct Shape {
        int64_t m, n, k, ld;  // ld: the guarded operand's row stride
        bool swapped;         // B (N x K) guarded, else A (M x K)
        jitmm_dtype a;
    };
    const Shape shapes[] = {{1316, 31, 7, 7, false, JITMM_DTYPE_S8},  {100, 100, 5, 9, false, JITMM_DTYPE_S8},
                            {37, 20, 1, 1, false, JITMM_DTYPE_S8},    {40, 50, 53, 53, false, JITMM_DTYPE_U8},
                            {70, 45, 125, 125, false, JITMM_DTYPE_U8}, {64, 16, 3, 3, false, JITMM_DTYPE_S8},
                            {6, 2752, 53, 53, true, JITMM_DTYPE_S8},  {12, 1500, 53, 55, true, JITMM_DTYPE_S8},
                            {20, 1000, 61, 61, true, JITMM_DTYPE_U8}, {33, 2017, 125, 130, true, JITMM_DTYPE_S8},
                            // the last row tile of one row: the tile before it reads past the end too
                            {33, 40, 1, 1, false, JITMM_DTYPE_S8},    {65, 30, 3, 3, false, JITMM_DTYPE_U8},
                            {100, 100, 100, 100, false, JITMM_DTYPE_S8}, {90, 70, 65, 65, false, JITMM_DTYPE_S8},
                            {30, 1000, 90, 90, true, JITMM_DTYPE_U8}, {33, 1000, 100, 101, true, JITMM_DTYPE_S8},
                            // whole steps over B's aligned rows: 24 bytes of the last step past K
                            {30, 700, 1000, 1024, true, JITMM_DTYPE_S8}, {31, 700, 1000, 1000, true, JITMM_DTYPE_S8},
                            // few panels, whole steps over K blocks (amx_rows_any_stride)
                            {36, 7, 1886, 1886, false, JITMM_DTYPE_S8}, {65, 20, 1000, 1003, false, JITMM_DTYPE_U8},
                            {33, 256, 2100, 2100, false, JITMM_DTYPE_S8}, {36, 100, 1886, 1886, true, JITMM_DTYPE_S8},
                            {100, 300, 999, 999, true, JITMM_DTYPE_U8}};
    for (int threads : {1, 2}) {
        EngineGuard e{make_engine("amx", threads)};
        for (const Shape& s : shapes) {
            INFO("threads " << threads << " " << s.m << "x" << s.n << "x" << s.k << " ld " << s.ld
                            << (s.swapped ? " B guarded" : " A guarded"));
            const int64_t rows = s.swapped ? s.n : s.m;
            const int64_t bytes = (rows - 1) * s.ld + s.k;
            GuardedBytes guarded_memory(static_cast<size_t>(bytes));
            uint8_t* guarded = guarded_memory.data();
            std::uniform_int_distribution<int> byte(0, 255);
            for (int64_t i = 0; i < bytes; ++i) guarded[i] = static_cast<uint8_t>(byte(rng));
            // The other operand: A (M x K) or B (N x K), ordinary storage.
            const int64_t other_rows = s.swapped ? s.m : s.n;
            std::vector<uint8_t> other(static_cast<size_t>(other_rows * s.k));
            for (auto& v : other) v = static_cast<uint8_t>(byte(rng));
            const uint8_t* a = s.swapped ? other.data() : guarded;
            const uint8_t* b = s.swapped ? guarded : other.data();
            const int64_t lda = s.swapped ? s.k : s.ld, ldb = s.swapped ? s.ld : s.k;
            std::vector<int32_t> out(static_cast<size_t>(s.m * s.n), INT32_MIN);
            jitmm_matmul_desc d;
            REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
            d.m = s.m; d.n = s.n; d.k = s.k;
            d.a_type = s.a; d.b_type = JITMM_DTYPE_S8; d.c_type = JITMM_DTYPE_S32;
            d.trans_b = 1;  // B stored N x K
            d.lda = lda; d.ldb = ldb; d.ldc = s.n;
            jitmm_matmul_args args;
            REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
            args.a = a; args.b = b; args.c = out.data();
            REQUIRE(jitmm_matmul(e.e, &d, &args) == JITMM_STATUS_SUCCESS);
            int64_t wrong = 0;
            for (int64_t i = 0; i < s.m; ++i)
                for (int64_t j = 0; j < s.n; ++j) {
                    int64_t sum = 0;
                    for (int64_t k = 0; k < s.k; ++k) {
                        const int64_t av = s.a == JITMM_DTYPE_U8 ? int64_t(a[i * lda + k])
                                                                 : int64_t(static_cast<int8_t>(a[i * lda + k]));
                        sum += av * static_cast<int8_t>(b[j * ldb + k]);
                    }
                    wrong += sum != out[i * s.n + j];
                }
            CHECK(wrong == 0);
        }
    }
}

// bf16 rows read in place by AMX tiles in whole 64-byte steps would multiply what lies past K (the rows'
// padding) by the packed side's zero k rows: a NaN or an Inf there would turn outputs into NaN. The rows' padding
// (and A's) here is NaN: every output must still be the exact sum. Few rows over a transposed B (the swapped
// order reads B's rows as tile rows), K not whole steps, ldb and lda past K, one and two K blocks. The vdpbf16ps
// tiles read A in place over an odd K (one row's last value alone, LowpLayout::a_odd_k_word): NaN right after
// each row, and an A ending at a guard page whose last row ends at its last byte.
TEST_CASE("x86 lowp bf16: NaN in the rows' padding past K never reaches C", "[x86][lowp]") {
    struct Shape {
        int64_t m, n, k, lda, ldb;
        bool trans_b;
    };
    const Shape shapes[] = {{8, 300, 100, 128, 128, true}, {1, 300, 33, 40, 64, true},  {2, 700, 100, 104, 128, true},
                            {4, 64, 40, 64, 64, true},     {16, 1000, 48, 64, 64, true}, {8, 300, 1000, 1024, 1024, true},
                            {300, 300, 100, 128, 320, false}, {1000, 100, 33, 64, 128, false},
                            {674, 16, 2971, 2976, 16, false}, {61, 48, 101, 104, 64, false},
                            {9, 33, 77, 78, 40, false}, {130, 70, 1233, 1240, 80, false}};
    const uint16_t kNan = 0x7fc0, kHalf = 0x3f00, kQuarter = 0x3e80;  // bf16 NaN, 0.5, 0.25
    for (const Tier& tier : runnable_tiers()) {
        EngineGuard e{make_engine(tier.name, 1)};
        for (const Shape& s : shapes) {
            INFO("tier " << tier.name << " " << s.m << "x" << s.n << "x" << s.k << (s.trans_b ? " NT" : " NN")
                          << " lda " << s.lda << " ldb " << s.ldb);
            // 64-byte aligned operands (misaligned rows are copied anyway).
            auto aligned = [](std::vector<uint16_t>& storage, int64_t count) {
                storage.assign(static_cast<size_t>(count + 32), 0);
                const uintptr_t at = (reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t(63);
                return reinterpret_cast<uint16_t*>(at);
            };
            std::vector<uint16_t> a_storage, b_storage;
            uint16_t* a = aligned(a_storage, s.m * s.lda);
            for (int64_t i = 0; i < s.m * s.lda; ++i) a[i] = i % s.lda < s.k ? kHalf : kNan;
            const int64_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
            uint16_t* b = aligned(b_storage, b_rows * s.ldb);
            for (int64_t i = 0; i < b_rows * s.ldb; ++i) b[i] = i % s.ldb < b_cols ? kQuarter : kNan;
            std::vector<float> c(static_cast<size_t>(s.m * s.n), std::numeric_limits<float>::quiet_NaN());
            jitmm_matmul_desc d;
            REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
            d.m = s.m; d.n = s.n; d.k = s.k; d.trans_b = s.trans_b;
            d.a_type = JITMM_DTYPE_BF16; d.b_type = JITMM_DTYPE_BF16; d.c_type = JITMM_DTYPE_F32;
            d.lda = s.lda; d.ldb = s.ldb; d.ldc = s.n;
            jitmm_matmul_args args;
            REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
            args.a = a; args.b = b; args.c = c.data();
            REQUIRE(jitmm_matmul(e.e, &d, &args) == JITMM_STATUS_SUCCESS);
            int64_t wrong = 0;
            for (float v : c) wrong += !(v == 0.125f * float(s.k));  // exact: sums of 0.125 in f32
            CHECK(wrong == 0);
        }
        for (const Shape& s : shapes) {
            if (s.k % 2 == 0 || s.trans_b) continue;
            INFO("tier " << tier.name << " " << s.m << "x" << s.n << "x" << s.k
                          << " lda = K, A ending at a guard page");
            GuardedBytes guarded_a(static_cast<size_t>(s.m * s.k * 2));
            uint16_t* a = reinterpret_cast<uint16_t*>(guarded_a.data());
            for (int64_t i = 0; i < s.m * s.k; ++i) a[i] = kHalf;
            std::vector<uint16_t> b(static_cast<size_t>(s.k * s.n), kQuarter);
            std::vector<float> c(static_cast<size_t>(s.m * s.n), std::numeric_limits<float>::quiet_NaN());
            jitmm_matmul_desc d;
            REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
            d.m = s.m; d.n = s.n; d.k = s.k;
            d.a_type = JITMM_DTYPE_BF16; d.b_type = JITMM_DTYPE_BF16; d.c_type = JITMM_DTYPE_F32;
            jitmm_matmul_args args;
            REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
            args.a = a; args.b = b.data(); args.c = c.data();
            REQUIRE(jitmm_matmul(e.e, &d, &args) == JITMM_STATUS_SUCCESS);
            int64_t wrong = 0;
            for (float v : c) wrong += !(v == 0.125f * float(s.k));
            CHECK(wrong == 0);
        }
    }
}

TEST_CASE("x86 lowp planner: f16 with B stored K x N over few row tiles reads B in place", "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb, X86Isa isa) {
        const jitmm::Problem p = planner_problem(m, n, k, ta, tb, JITMM_DTYPE_F16, JITMM_DTYPE_F32);
        return jitmm::plan::plan_x86_lowp(p, cpu, isa, 1);
    };
    // A B past L2 read across many column panels: 32-long K blocks, rows prefetched 32 k steps ahead.
    const jitmm::plan::X86LowpPlan decode = plan(1, 531, 2139, false, false, X86Isa::amx);
    CHECK(decode.layout.b_in_place);
    CHECK(decode.layout.b_row_bytes == 531 * 2);
    CHECK(decode.kc == 32);
    CHECK(decode.layout.b_prefetch_k == 32);
    // One column panel of dense rows, or a B within L2: long K blocks, nothing prefetched.
    const jitmm::plan::X86LowpPlan dense = plan(3, 54, 3639, false, false, X86Isa::amx);
    CHECK(dense.layout.b_in_place);
    CHECK(dense.kc > 32);
    CHECK(dense.layout.b_prefetch_k == 0);
    CHECK(plan(4, 15, 3473, true, false, X86Isa::avx512_fp16).layout.b_in_place);  // TN
    CHECK(plan(27, 1046, 241, false, false, X86Isa::avx512).layout.b_in_place);
    // Not for many row tiles (packing pays), a transposed B, or the avx2 tier (no masked widening loads).
    CHECK_FALSE(plan(1024, 1024, 1024, false, false, X86Isa::amx).layout.b_in_place);
    CHECK_FALSE(plan(9, 449, 883, false, true, X86Isa::amx).layout.b_in_place);
    CHECK_FALSE(plan(27, 1046, 241, false, false, X86Isa::avx2).layout.b_in_place);
    // bf16 on the f32 FMAs too (widened by a zero extension and a shift).
    const auto bf16 = [&](int64_t m, const jitmm::hw::CpuInfo& on) {
        const jitmm::Problem p = planner_problem(m, 1046, 241, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32);
        return jitmm::plan::plan_x86_lowp(p, on, X86Isa::avx512_bf16, 1);
    };
    CHECK(bf16(27, cpu).layout.b_in_place);
    // Where vdpbf16ps runs at the FMA rate (Zen 4), up to 4 rows leave it for the FMAs over B in place, and up
    // to 16 over a B past half of L2 (1046 x 241 bf16: 504 KB, against 1 MB).
    jitmm::hw::CpuInfo zen4 = cpu;
    zen4.amx_tile = zen4.amx_bf16 = zen4.amx_int8 = false;
    zen4.zmm_fma_per_cycle = 1;
    zen4.bf16_dot_full_rate = true;
    zen4.l2_bytes = 1024 * 1024;
    const auto zen4_step = [&](int64_t m, int64_t n, int64_t k, int64_t batch) {
        jitmm::Problem p = planner_problem(m, n, k, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32);
        p.batch = batch;
        p.stride_b = batch > 1 ? n * k : 0;
        const jitmm::plan::X86LowpPlan plan = jitmm::plan::plan_x86_lowp(p, zen4, X86Isa::avx512_bf16, 1);
        INFO(plan.describe());
        CHECK(plan.layout.b_in_place == (plan.layout.step == jitmm::plan::LowpStep::fma_f32));
        return plan.layout.step;
    };
    using jitmm::plan::LowpStep;
    CHECK(zen4_step(1, 1046, 241, 1) == LowpStep::fma_f32);
    CHECK(zen4_step(4, 1046, 241, 1) == LowpStep::fma_f32);
    CHECK(zen4_step(7, 1046, 241, 1) == LowpStep::dot_bf16);
    CHECK(zen4_step(7, 1046, 241, 3) == LowpStep::fma_f32);
    CHECK(zen4_step(16, 1000, 1000, 1) == LowpStep::fma_f32);
    CHECK(zen4_step(17, 1000, 1000, 1) == LowpStep::dot_bf16);
    CHECK(zen4_step(2, 16, 1000, 1) == LowpStep::dot_bf16);  // few columns: packing B costs little
}

TEST_CASE("x86 lowp f16 and bf16: B read in place (column tails, K blocks, streamed rows), layouts, pads, tiers",
          "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    std::mt19937 rng(1505);
    struct Shape {
        int64_t m, n, k, batch;
        bool ta, share_b;
    };
    // Few row tiles over: a column tail, one dense panel, several K blocks of a B within L2, a B past L2 (short
    // K blocks, prefetched rows: 1x1100x1000 2.2 MB; 2x300x700 x6 2.5 MB over batches), A stored K x M.
    const Shape shapes[] = {{1, 531, 300, 1, false, false}, {3, 54, 700, 1, false, false},
                            {27, 100, 241, 2, false, true}, {13, 16, 1169, 1, true, false},
                            {84, 70, 65, 1, false, false},  {1, 1100, 1000, 1, false, false},
                            {2, 300, 700, 6, true, false},  {4, 15, 347, 3, true, false}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const jitmm_dtype type : {JITMM_DTYPE_F16, JITMM_DTYPE_BF16}) {
                for (const Shape& s : shapes) {
                    if (threads > 1 && it % 2 == 1) {
                        ++it;
                        continue;
                    }
                    Case c;
                    c.a = c.b = type;
                    c.c = it % 3 == 1 ? type : JITMM_DTYPE_F32;
                    c.m = s.m;
                    c.n = s.n;
                    c.k = s.k;
                    c.batch = s.batch;
                    c.share_b = s.share_b;
                    c.ta = s.ta;
                    c.lda_pad = it % 2 ? 3 : 0;
                    c.ldb_pad = it % 3 ? 5 : 0;  // rows off whole vectors and lines
                    c.ldc_pad = it % 4 == 1 ? 2 : 0;
                    c.beta = it % 4 == 2 ? 1.0f : 0.0f;
                    c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_GELU_TANH : JITMM_EPILOGUE_NONE;
                    c.bias_layout = it % 3 ? JITMM_BIAS_PER_COLUMN : JITMM_BIAS_PER_ROW;
                    c.bias_type = JITMM_DTYPE_F32;
                    check_case(e.e, c, rng);
                    ++it;
                }
            }
        }
    }
}

TEST_CASE("x86 lowp planner: f16 with B stored N x K takes dot products where the f32 engine's dot family would",
          "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb, X86Isa isa) {
        const jitmm::Problem p = planner_problem(m, n, k, ta, tb, JITMM_DTYPE_F16, JITMM_DTYPE_F32);
        return jitmm::plan::plan_x86_lowp(p, cpu, isa, 1);
    };
    const jitmm::plan::X86LowpPlan decode = plan(1, 269, 658, false, true, X86Isa::amx);
    CHECK(decode.layout.dot_nt);
    CHECK(decode.layout.step == jitmm::plan::LowpStep::fma_f32);
    CHECK(decode.kc == 672);  // whole vectors of 16
    CHECK(decode.layout.a_row_bytes == (672 + 16) * 4);
    CHECK(plan(2, 164, 110, true, true, X86Isa::avx512).layout.dot_nt);  // TT
    const jitmm::plan::X86LowpPlan few_columns = plan(94, 2, 2631, false, true, X86Isa::amx);
    CHECK(few_columns.layout.dot_nt);  // few columns over a long K: A's many rows read in place
    CHECK(few_columns.layout.dot_a_in_place);
    CHECK_FALSE(few_columns.pack_a);
    CHECK_FALSE(decode.layout.dot_a_in_place);
    // Few rows whose one column tile is all of N read A in place too; two column tiles pack it.
    const jitmm::plan::X86LowpPlan one_tile = plan(6, 2, 2227, false, true, X86Isa::amx);
    CHECK(one_tile.layout.dot_nt);
    CHECK(one_tile.layout.dot_a_in_place);
    CHECK(one_tile.layout.a_row_bytes == 2227 * 2);
    CHECK(plan(3, 8, 500, false, true, X86Isa::amx).layout.dot_a_in_place);
    CHECK_FALSE(plan(12, 7, 600, false, true, X86Isa::amx).layout.dot_a_in_place);
    CHECK_FALSE(plan(6, 2, 2227, true, true, X86Isa::amx).layout.dot_a_in_place);  // A stored K x M: packed
    // Not where the f32 engine packs B (a short K over several rows), for B stored K x N, or at the avx2 tier.
    CHECK_FALSE(plan(10, 365, 9, false, true, X86Isa::amx).layout.dot_nt);
    // A K under a vector: the packed path, except one row from 8 values.
    CHECK_FALSE(plan(1, 3574, 2, false, true, X86Isa::amx).layout.dot_nt);
    CHECK(plan(1, 500, 8, false, true, X86Isa::amx).layout.dot_nt);
    CHECK_FALSE(plan(2, 500, 8, false, true, X86Isa::amx).layout.dot_nt);
    CHECK(plan(2, 500, 16, false, true, X86Isa::amx).layout.dot_nt);
    CHECK_FALSE(plan(9, 449, 883, false, false, X86Isa::amx).layout.dot_nt);
    CHECK_FALSE(plan(9, 449, 883, false, true, X86Isa::avx2).layout.dot_nt);
}

TEST_CASE("x86 lowp f16: dot products over B stored N x K (K tails, A stored K x M, pads, batches, tiers, threads)",
          "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    std::mt19937 rng(1506);
    struct Shape {
        int64_t m, n, k, batch;
        bool ta, share_b;
    };
    // Decode rows (1, 2-3 and 4-row tiles, row tails), a K under one vector and K tails, few columns over a long
    // K with many rows, batches.
    const Shape shapes[] = {{1, 118, 48, 2, false, false}, {1, 269, 658, 1, false, false},
                            {2, 164, 110, 1, true, false}, {5, 10, 118, 1, true, false},
                            {9, 449, 883, 1, false, false}, {3, 37, 40, 3, false, true},
                            {94, 2, 2631, 1, false, false}, {7, 33, 1000, 2, true, false},
                            {40, 5, 301, 2, false, false}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                if (threads > 1 && it % 2 == 0) {
                    ++it;
                    continue;
                }
                Case c;
                c.a = c.b = JITMM_DTYPE_F16;
                c.c = it % 3 == 2 ? JITMM_DTYPE_F16 : JITMM_DTYPE_F32;
                c.m = s.m;
                c.n = s.n;
                c.k = s.k;
                c.batch = s.batch;
                c.share_b = s.share_b;
                c.ta = s.ta;
                c.tb = true;
                c.lda_pad = it % 2 ? 0 : 5;
                c.ldb_pad = it % 3 ? 3 : 0;
                c.ldc_pad = it % 4 == 3 ? 1 : 0;
                c.alpha = it % 4 == 1 ? -0.5f : 1.0f;
                c.beta = it % 3 == 1 ? 1.0f : 0.0f;
                c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_SILU : JITMM_EPILOGUE_RELU;
                c.bias_layout = it % 4 < 2 ? JITMM_BIAS_PER_COLUMN : JITMM_BIAS_PER_ROW;
                c.bias_type = c.c;
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
}

TEST_CASE("x86 lowp planner: f16 prefetches C over a short K, takes all of K in one block over few panels, reads "
          "A in place over one panel and K <= 2 (A stored K x M: K <= 16)",
          "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb, X86Isa isa) {
        const jitmm::Problem p = planner_problem(m, n, k, ta, tb, JITMM_DTYPE_F16, JITMM_DTYPE_F32);
        return jitmm::plan::plan_x86_lowp(p, cpu, isa, 1);
    };
    // A K up to 12 over a C past L1 and a vector of columns or more: the C tile prefetched.
    CHECK(plan(407, 749, 1, false, false, X86Isa::amx).layout.c_prefetch);
    CHECK(plan(944, 1237, 11, false, true, X86Isa::amx).layout.c_prefetch);
    CHECK(plan(1059, 40, 3, true, false, X86Isa::avx512).layout.c_prefetch);
    CHECK(plan(407, 749, 2, false, false, X86Isa::avx2).layout.c_prefetch);
    CHECK_FALSE(plan(530, 2387, 25, false, false, X86Isa::amx).layout.c_prefetch);  // K past 12
    CHECK_FALSE(plan(3535, 4, 1, false, false, X86Isa::amx).layout.c_prefetch);     // under a vector of columns
    CHECK_FALSE(plan(64, 64, 4, false, false, X86Isa::amx).layout.c_prefetch);      // C within L1
    // Few column panels over an A past L2 (A stored M x K): one K block.
    const jitmm::plan::X86LowpPlan few = plan(1876, 5, 2867, false, true, X86Isa::amx);
    CHECK(few.kc >= 2867);
    CHECK(plan(1876, 5, 2867, false, false, X86Isa::avx512).kc >= 2867);
    CHECK(plan(2000, 32, 1000, false, false, X86Isa::amx).kc >= 1000);
    // Not over an A within L2, an A stored K x M, or many panels.
    CHECK(plan(300, 8, 1200, false, false, X86Isa::amx).kc < 1200);
    CHECK(plan(1876, 5, 2867, true, false, X86Isa::amx).kc < 2867);
    CHECK(plan(2000, 200, 1000, false, false, X86Isa::amx).kc < 1000);
    // One column panel over K <= 2 at the AVX512-FP16 tiers: A (M x K) read in place by vcvtph2psx.
    jitmm::hw::CpuInfo fp16_cpu = cpu;
    fp16_cpu.avx512_fp16 = true;
    const auto plan16 = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb, X86Isa isa) {
        const jitmm::Problem p = planner_problem(m, n, k, ta, tb, JITMM_DTYPE_F16, JITMM_DTYPE_F32);
        return jitmm::plan::plan_x86_lowp(p, fp16_cpu, isa, 1);
    };
    const jitmm::plan::X86LowpPlan in_place = plan16(3535, 4, 1, false, false, X86Isa::amx);
    CHECK(in_place.layout.a_f16_in_place);
    CHECK_FALSE(in_place.pack_a);
    CHECK(in_place.layout.a_row_bytes == 2);
    CHECK(plan16(668, 5, 2, false, true, X86Isa::avx512_fp16).layout.a_f16_in_place);
    CHECK_FALSE(plan16(3535, 4, 3, false, false, X86Isa::amx).layout.a_f16_in_place);   // K past 2
    const jitmm::plan::X86LowpPlan columns = plan16(3535, 4, 1, true, false, X86Isa::amx);  // A stored K x M
    CHECK(columns.layout.a_f16_in_place);
    CHECK(columns.layout.a_row_bytes == 2);
    CHECK(columns.layout.a_k_bytes == 3535 * 2);
    CHECK(plan16(500, 16, 16, true, true, X86Isa::amx).layout.a_f16_in_place);         // up to K = 16 there
    CHECK_FALSE(plan16(500, 16, 17, true, false, X86Isa::amx).layout.a_f16_in_place);
    CHECK_FALSE(plan16(500, 100, 8, true, false, X86Isa::amx).layout.a_f16_in_place);  // many panels
    CHECK_FALSE(plan16(3535, 4, 1, false, false, X86Isa::avx512).layout.a_f16_in_place);  // no AVX512-FP16
    CHECK_FALSE(plan16(407, 749, 1, false, false, X86Isa::amx).layout.a_f16_in_place);  // many panels
    CHECK_FALSE(plan(3535, 4, 1, false, false, X86Isa::amx).layout.a_f16_in_place);     // the CPU lacks it
}

TEST_CASE("x86 lowp f16: the C tile prefetched over a short K, all of K in one block over few panels, A in place "
          "over K <= 2 (layouts, pads, beta, batches, tiers, threads)",
          "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    std::mt19937 rng(1604);
    struct Shape {
        int64_t m, n, k, batch;
        bool ta, tb;
    };
    // Short K over a wide C (K 1, 2, 7, 11, 12; column tails, A stored K x M, batches); few panels over an A past
    // L2 (2.2-2.9 MB: one K block of 1,600-2,100, row tails, a column tail of 5, two panels); one column panel over
    // K 1-2 (A read in place at the AVX512-FP16 tiers, rows lda_pad apart).
    const Shape shapes[] = {{407, 749, 1, 1, false, false}, {203, 37, 2, 3, false, true},
                            {79, 143, 7, 2, false, false},  {144, 123, 11, 1, false, true},
                            {101, 40, 3, 4, true, false},   {33, 100, 12, 1, true, true},
                            {701, 5, 1601, 1, false, true}, {690, 17, 2100, 1, false, false},
                            {703, 20, 1600, 2, false, true}, {3535, 4, 1, 1, false, false},
                            {668, 5, 2, 3, false, true},    {1001, 16, 1, 2, false, false},
                            {97, 1, 2, 1, false, true}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 2}) {
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                if (threads > 1 && it % 3 != 0) {
                    ++it;
                    continue;
                }
                Case c;
                c.a = c.b = JITMM_DTYPE_F16;
                c.c = it % 3 == 1 ? JITMM_DTYPE_F16 : JITMM_DTYPE_F32;
                c.m = s.m;
                c.n = s.n;
                c.k = s.k;
                c.batch = s.batch;
                c.ta = s.ta;
                c.tb = s.tb;
                c.lda_pad = it % 2 ? 3 : 0;
                c.ldb_pad = it % 3 ? 5 : 0;
                c.ldc_pad = it % 4 == 1 ? 7 : 0;  // C rows off whole lines
                c.beta = it % 4 == 2 ? 1.0f : it % 4 == 3 ? 0.5f : 0.0f;
                c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_RELU : JITMM_EPILOGUE_NONE;
                c.bias_layout = it % 3 ? JITMM_BIAS_PER_COLUMN : JITMM_BIAS_PER_ROW;
                c.bias_type = JITMM_DTYPE_F32;
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
}

TEST_CASE("x86 lowp f16: transposed operands packed by gathers (B stored N x K at any K, A stored K x M)",
          "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    std::mt19937 rng(1507);
    struct Shape {
        int64_t m, n, k, batch;
        bool ta, tb;
    };
    // B stored N x K over short and long K (K blocks) and column tails; A stored K x M over whole and tail row
    // tiles, one row (its last value read alone), blocks of several tiles, short K (once dense panels).
    const Shape shapes[] = {{10, 365, 9, 1, false, true},  {8, 523, 25, 1, false, true},
                            {37, 45, 1000, 1, false, true}, {123, 8, 12, 1, true, false},
                            {1, 40, 33, 2, true, false},    {300, 20, 13, 3, true, false},
                            {70, 33, 500, 1, true, false},  {9, 300, 8, 1, true, true},
                            {33, 17, 65, 2, true, true}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        EngineGuard e{make_engine(tier.name, 1)};
        int it = 0;
        for (const Shape& s : shapes) {
            Case c;
            c.a = c.b = JITMM_DTYPE_F16;
            c.c = it % 3 == 1 ? JITMM_DTYPE_F16 : JITMM_DTYPE_F32;
            c.m = s.m;
            c.n = s.n;
            c.k = s.k;
            c.batch = s.batch;
            c.ta = s.ta;
            c.tb = s.tb;
            c.lda_pad = it % 2 ? 4 : 0;
            c.ldb_pad = it % 3 ? 0 : 7;
            c.beta = it % 4 == 3 ? 0.5f : 0.0f;
            c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS : JITMM_EPILOGUE_NONE;
            check_case(e.e, c, rng);
            ++it;
        }
    }
}

// bf16 AMX in the swapped order over a K that ends inside a 64-byte step: the whole steps read B's rows in place,
// the last from a zero-padded copy (plan::amx_swapped_last_step_copied). The rows' padding past K holds NaN and
// Inf (0 x Inf is a NaN), B's rows are aligned or not, K odd, one K block or several, batches, threads.
TEST_CASE("x86 lowp AMX bf16 swapped: the last partial K step from a copy; NaN and Inf past K never count",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    std::mt19937 rng(4242);
    EngineGuard one{make_engine("amx", 1)};
    EngineGuard two{make_engine("amx", 2)};
    struct Shape {
        int64_t m, n, k, ldb_pad, b_offset, batch;
    };
    // K 15 and 33: no whole step before the copied one, or one; 100 and 1000 over aligned rows (ldb 128, 1024),
    // 999 and 1000 over rows not 64-byte aligned (ldb 1000, B's base off a line); 2100 at 225 rows: two K blocks.
    // (33x70x77 and 3x130x15 take the normal order: neighbours.)
    const Shape shapes[] = {{16, 300, 1000, 24, 0, 1}, {8, 300, 100, 28, 0, 2},  {3, 700, 15, 17, 0, 3},
                            {5, 600, 33, 31, 0, 1},    {33, 70, 77, 3, 0, 2},    {7, 200, 999, 1, 3, 1},
                            {8, 4100, 4100, 60, 0, 1}, {40, 129, 1000, 24, 5, 2}, {3, 130, 15, 17, 0, 1},
                            {225, 460, 2100, 12, 0, 1}};
    for (const Shape& s : shapes)
        for (jitmm_engine* e : {one.e, two.e}) {
            Case c;
            c.a = c.b = JITMM_DTYPE_BF16;
            c.c = JITMM_DTYPE_F32;
            c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
            c.tb = true;
            c.lda_pad = 5;
            c.ldb_pad = s.ldb_pad;
            c.ldc_pad = 3;
            c.b_offset = s.b_offset;
            c.poison_pads = true;
            check_case(e, c, rng);
        }
}

TEST_CASE("x86 lowp AMX bf16: A in place at any stride over few panels, the last partial K step from a copy",
          "[x86][lowp][amx]") {
    if (jitmm::hw::cpu_info().best_isa < X86Isa::amx) {
        WARN_SKIPPED("no AMX on this CPU");
        return;
    }
    std::mt19937 rng(4343);
    EngineGuard one{make_engine("amx", 1)};
    EngineGuard two{make_engine("amx", 2)};
    struct Shape {
        int64_t m, n, k, lda_pad, batch;
        bool tb;
        jitmm_epilogue epilogue;
    };
    // Several K blocks ending inside a step (2960, 1582, 1037), one block (45: a whole step and 13 values; 15: no
    // whole step before the copied one; 33 at 40 rows), row and column tails, 1-8 column panels, K whole steps
    // over rows off cache lines (1024 with pad 3), a batch, the vector epilogue (main loop, not panel runs).
    const Shape shapes[] = {{92, 9, 2960, 0, 1, false, JITMM_EPILOGUE_NONE},
                            {92, 9, 2960, 3, 1, false, JITMM_EPILOGUE_BIAS_RELU},
                            {61, 5, 1582, 7, 1, true, JITMM_EPILOGUE_NONE},
                            {33, 40, 45, 5, 3, true, JITMM_EPILOGUE_NONE},
                            {33, 40, 45, 5, 2, false, JITMM_EPILOGUE_BIAS_GELU_TANH},
                            {17, 100, 1037, 1, 1, false, JITMM_EPILOGUE_BIAS},
                            {40, 33, 15, 2, 1, false, JITMM_EPILOGUE_NONE},
                            {40, 70, 33, 9, 1, true, JITMM_EPILOGUE_NONE},
                            {130, 250, 777, 3, 1, true, JITMM_EPILOGUE_NONE},
                            {100, 64, 1024, 3, 2, false, JITMM_EPILOGUE_NONE},
                            {192, 2, 3096, 0, 3, false, JITMM_EPILOGUE_NONE}};
    for (const Shape& s : shapes)
        for (jitmm_engine* e : {one.e, two.e}) {
            Case c;
            c.a = c.b = JITMM_DTYPE_BF16;
            c.c = JITMM_DTYPE_F32;
            c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
            c.tb = s.tb;
            c.lda_pad = s.lda_pad;
            c.ldb_pad = 3;
            c.ldc_pad = 1;
            c.epilogue = s.epilogue;
            c.poison_pads = true;
            check_case(e, c, rng);
        }
}

TEST_CASE("x86 lowp planner: bf16 AMX reads A in place over few panels, its last partial step copied",
          "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool tb) {
        return jitmm::plan::plan_x86_lowp(planner_problem(m, n, k, false, tb, JITMM_DTYPE_BF16, JITMM_DTYPE_F32),
                                          cpu, X86Isa::amx, 1);
    };
    for (const auto& p : {plan(92, 9, 2960, false), plan(1993, 5, 1582, true), plan(500, 250, 1000, false)}) {
        INFO(p.describe());
        CHECK_FALSE(p.pack_a);
        CHECK(p.layout.a_last_step_copied);
    }
    // K in whole steps: in place, nothing copied; past 8 panels A is packed for its K tail as before.
    const auto whole = plan(92, 9, 2944, false);
    CHECK_FALSE(whole.pack_a);
    CHECK_FALSE(whole.layout.a_last_step_copied);
    const auto wide = plan(500, 500, 1000, false);
    CHECK(wide.pack_a);
    CHECK_FALSE(wide.layout.a_last_step_copied);
}

TEST_CASE("x86 lowp planner: bf16 with B stored N x K over few rows takes vdpbf16ps dot products",
          "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool ta, int64_t ldb_pad, int64_t batch) {
        jitmm::Problem p = planner_problem(m, n, k, ta, true, JITMM_DTYPE_BF16, JITMM_DTYPE_F32);
        p.ldb += ldb_pad;
        p.batch = batch;
        return jitmm::plan::plan_x86_lowp(p, cpu, X86Isa::amx, 1);
    };
    using jitmm::plan::LowpStep;
    const auto few = plan(3, 34, 840, false, 0, 16);
    INFO(few.describe());
    CHECK(few.layout.dot_nt);
    CHECK(few.layout.step == LowpStep::dot_bf16);
    CHECK(few.kc == 864);  // whole vectors of 32
    CHECK(plan(1, 1000, 1000, false, 0, 1).layout.dot_nt);  // rows not whole lines: the swapped path copies them
    CHECK(plan(3, 1000, 1000, false, 0, 1).layout.dot_nt);
    CHECK(plan(1, 512, 1024, false, 0, 1).layout.dot_nt);   // whole lines, B within half of L2
    CHECK(plan(5, 40, 700, true, 0, 6).layout.dot_nt);      // 4-8 rows over one or two panels of few columns
    CHECK(plan(8, 8, 2048, false, 0, 8).layout.dot_nt);
    CHECK(plan(4, 7, 410, false, 0, 12).layout.dot_nt);     // a C of at most 32 values at any K
    CHECK(plan(8, 4, 64, true, 0, 12).layout.dot_nt);
    CHECK_FALSE(plan(8, 7, 256, false, 0, 12).layout.dot_nt);
    // AMX: the swapped path over whole-line rows (a B past half of L2 at one row), more columns per row, K 256.
    CHECK_FALSE(plan(1, 1024, 1024, false, 0, 1).layout.dot_nt);
    CHECK_FALSE(plan(2, 512, 1024, false, 0, 1).layout.dot_nt);
    CHECK_FALSE(plan(3, 64, 256, false, 0, 4).layout.dot_nt);
    CHECK_FALSE(plan(8, 32, 1024, false, 0, 4).layout.dot_nt);
    CHECK_FALSE(plan(6, 16, 256, false, 0, 16).layout.dot_nt);
    CHECK_FALSE(plan(9, 16, 1024, false, 0, 1).layout.dot_nt);
    CHECK_FALSE(plan(2, 500, 16, false, 0, 1).layout.dot_nt);  // K under a vector
    // 2-3 rows over the swapped path's copied rows: a K of 128 or more (a short one is mostly reductions).
    CHECK_FALSE(plan(3, 779, 35, false, 0, 1).layout.dot_nt);
    CHECK(plan(1, 779, 35, false, 0, 1).layout.dot_nt);
    CHECK(plan(3, 20, 70, false, 0, 8).layout.dot_nt);  // no swapped path: few columns
}

// bf16 dot products (vdpbf16ps over B's rows in place, LowpLayout::dot_nt with dot_bf16): 1, 2-3 and 4-row
// tiles with row tails, K tails (the lanes past K masked; NaN and Inf in the rows' padding), A stored K x M, B's
// rows off lines and its base off a line, epilogues and bf16 C, batches, threads.
TEST_CASE("x86 lowp bf16: dot products over B stored N x K (K tails; NaN past K; layouts; batches; threads)",
          "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    std::mt19937 rng(1507);
    struct Shape {
        int64_t m, n, k, batch;
        bool ta;
    };
    const Shape shapes[] = {{3, 34, 840, 3, false}, {1, 300, 100, 1, false}, {2, 24, 257, 2, true},
                            {5, 40, 700, 2, true},  {8, 8, 2048, 1, false},  {7, 17, 513, 2, false},
                            {1, 1000, 33, 1, false}, {4, 16, 1024, 1, true},
                            {4, 7, 410, 12, false}, {8, 4, 33, 5, true}, {6, 5, 64, 3, false}};
    for (const Tier& tier : runnable_tiers()) {
        if (std::string(tier.name) != "avx512_bf16" && std::string(tier.name) != "amx") continue;
        INFO("tier " << tier.name);
        for (int threads : {1, 2}) {
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                Case c;
                c.a = c.b = JITMM_DTYPE_BF16;
                c.c = it % 3 == 1 ? JITMM_DTYPE_BF16 : JITMM_DTYPE_F32;
                c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
                c.ta = s.ta;
                c.tb = true;
                c.lda_pad = it % 2 ? 3 : 0;
                c.ldb_pad = it % 3 ? 5 : 0;
                c.ldc_pad = it % 4 == 1 ? 2 : 0;
                c.b_offset = it % 4 == 3 ? 7 : 0;
                c.poison_pads = true;
                c.alpha = it % 5 == 2 ? 0.5f : 1.0f;
                c.beta = it % 4 == 2 ? 1.0f : 0.0f;
                c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_GELU_TANH : JITMM_EPILOGUE_NONE;
                c.bias_layout = it % 3 ? JITMM_BIAS_PER_COLUMN : JITMM_BIAS_PER_ROW;
                if (std::string(tier.name) == "amx" && threads == 1) {
                    jitmm_matmul_desc d;
                    REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
                    d.m = s.m; d.n = s.n; d.k = s.k; d.batch_count = s.batch;
                    d.trans_a = s.ta; d.trans_b = true;
                    d.a_type = d.b_type = JITMM_DTYPE_BF16; d.c_type = JITMM_DTYPE_F32;
                    d.stride_a = s.m * s.k; d.stride_b = s.n * s.k; d.stride_c = s.m * s.n;
                    CHECK(generator_of(e.e, d) == "x86_bf16_dot_avx512");
                }
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
}

// A bf16 A stored K x M over a K of 1-8 for the converted FMAs (dense panel rows, panel_ld = K): 16 stored rows'
// values widened a vector each and interleaved by permutes into the panel (pack_lowp widen_transposed_dense).
// Row tails within a 16-row block and a 28-row tile, every K up to 8 (whole and partial output vectors), lda past
// M, B stored either way, batches, every tier (the AMX tier runs these FMAs for K <= 4 and odd K <= 7).
TEST_CASE("x86 lowp bf16: A stored K x M over a short K packed by permutes (K 1-8; row tails; tiers)", "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    std::mt19937 rng(1508);
    struct Shape {
        int64_t m, n, k, batch;
        bool tb;
    };
    const Shape shapes[] = {{1686, 4, 3, 2, true}, {45, 7, 1, 1, false}, {17, 33, 5, 1, false}, {100, 3, 7, 2, true},
                            {29, 16, 8, 1, true},  {3, 20, 2, 1, false}, {60, 9, 6, 1, true},   {31, 5, 4, 3, false}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        EngineGuard e{make_engine(tier.name, 1)};
        int it = 0;
        for (const Shape& s : shapes) {
            Case c;
            c.a = c.b = JITMM_DTYPE_BF16;
            c.c = it % 3 == 2 ? JITMM_DTYPE_BF16 : JITMM_DTYPE_F32;
            c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
            c.ta = true;
            c.tb = s.tb;
            c.lda_pad = it % 2 ? 5 : 0;
            c.ldb_pad = it % 3 ? 2 : 0;
            c.ldc_pad = it % 4 == 1 ? 3 : 0;
            c.poison_pads = true;
            c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_RELU : JITMM_EPILOGUE_NONE;
            check_case(e.e, c, rng);
            ++it;
        }
    }
}

TEST_CASE("x86 lowp planner: decode rows over a B in L2 or a short K pack B in blocks that stay in L1",
          "[x86][lowp][plan]") {
    const jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    auto plan = [&](int64_t m, int64_t n, int64_t k, jitmm_dtype a, jitmm_dtype b, X86Isa isa, int64_t batch) {
        jitmm::Problem p = planner_problem(m, n, k, false, false, a, b == JITMM_DTYPE_BF16 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32);
        p.b_type = b;
        p.batch = batch;
        p.stride_a = m * k;
        p.stride_b = k * n;
        p.stride_c = m * n;
        return jitmm::plan::plan_x86_lowp(p, cpu, isa, 1);
    };
    auto block_bytes = [](const jitmm::plan::X86LowpPlan& pl) {
        const int g = jitmm::plan::step_group(pl.layout.step);
        return (pl.kc + g - 1) / g * 4 * pl.nc;
    };
    // One row tile (AMX) or VNNI decode rows: the packed K block within 16 KB, at least 64 columns.
    const auto bf16 = plan(18, 2588, 24, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, X86Isa::amx, 1);
    INFO(bf16.describe());
    CHECK(bf16.layout.step == jitmm::plan::LowpStep::amx_bf16);
    CHECK(bf16.nc == 256);
    const auto s8 = plan(6, 2479, 42, JITMM_DTYPE_S8, JITMM_DTYPE_S8, X86Isa::amx, 1);
    CHECK(s8.nc == 256);
    const auto u8 = plan(4, 2000, 100, JITMM_DTYPE_U8, JITMM_DTYPE_S8, X86Isa::amx, 1);
    CHECK(u8.layout.step == jitmm::plan::LowpStep::vnni_u8s8);
    CHECK(block_bytes(u8) <= 16 * 1024);
    CHECK(u8.nc >= 64);
    const auto vnni_tier = plan(6, 2479, 42, JITMM_DTYPE_S8, JITMM_DTYPE_S8, X86Isa::avx512_vnni, 1);
    CHECK(block_bytes(vnni_tier) <= 16 * 1024);
    // Several K blocks of a B that stays in L2 (1 MB): small blocks too.
    const auto long_k = plan(16, 2000, 512, JITMM_DTYPE_S8, JITMM_DTYPE_S8, X86Isa::amx, 1);
    INFO(long_k.describe());
    CHECK(long_k.k_blocks(512) > 1);
    CHECK(block_bytes(long_k) <= 16 * 1024);
    // A B from memory keeps the 2048-column blocks (each row read in long runs); so does one whose 64-column
    // block would pass 16 KB. A short K keeps the L1 blocks even over batches that bring their own B.
    CHECK(plan(16, 4096, 4096, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, X86Isa::amx, 1).nc == 2048);
    CHECK(plan(8, 1024, 512, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, X86Isa::amx, 8).nc == 1024);
    CHECK(plan(16, 781, 256, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, X86Isa::amx, 1).nc == 800);
    CHECK(plan(18, 2588, 24, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, X86Isa::amx, 16).nc == 256);
}

// Decode rows over several of those L1 blocks of B: the column sums (s8 below AMX) restart per block, the K
// blocks' strip, column tails, ld pads, epilogues, batches and 2 threads, at every tier.
TEST_CASE("x86 lowp: decode rows over B packed in L1 blocks (column sums, K blocks, tails, tiers, threads)",
          "[x86][lowp][amx]") {
    std::mt19937 rng(2588);
    struct Shape {
        int64_t m, n, k, batch;
        jitmm_dtype a, b;
    };
    const Shape shapes[] = {{18, 2588, 24, 1, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16},
                            {6, 2479, 42, 1, JITMM_DTYPE_S8, JITMM_DTYPE_S8},
                            {4, 2000, 100, 2, JITMM_DTYPE_U8, JITMM_DTYPE_S8},
                            {16, 2000, 512, 1, JITMM_DTYPE_S8, JITMM_DTYPE_S8},
                            {3, 1500, 130, 1, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16},
                            {32, 700, 61, 3, JITMM_DTYPE_U8, JITMM_DTYPE_S8},
                            {9, 999, 48, 1, JITMM_DTYPE_F16, JITMM_DTYPE_F16}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 2}) {
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                if (threads > 1 && s.m > 100) continue;  // (the reference's time: one thread count)
                Case c;
                c.a = s.a;
                c.b = s.b;
                c.c = is_int8(s.a) ? (it % 2 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32) : JITMM_DTYPE_F32;
                c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
                c.ta = it % 3 == 2;
                c.lda_pad = it % 2 ? 3 : 0;
                c.ldb_pad = it % 3 == 1 ? 5 : 0;
                c.ldc_pad = it % 4 == 1 ? 2 : 0;
                if (c.c != JITMM_DTYPE_S32) {
                    c.alpha = 0.5f;
                    c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                } else {
                    c.beta = it % 4 == 2 ? 1.0f : 0.0f;
                }
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
}

// f16 A read in place where few rows' one column tile is all of N (dot products, A stored M x K), and an f16 A
// stored K x M over one column panel and K <= 16 broadcast from its columns (vcvtph2psx, k lda apart): K tails of
// the dot products' vectors, row tails, lda past M or K, B either way, batches, beta, epilogues, every tier (the
// AVX512-FP16 tiers take the new paths, the others pack A as before), 1 and 2 threads.
TEST_CASE("x86 lowp f16: A in place for one dot column tile and for A stored K x M over a short K",
          "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    std::mt19937 rng(2227);
    struct Shape {
        int64_t m, n, k, batch;
        bool ta, tb;
    };
    const Shape shapes[] = {{6, 2, 2227, 1, false, true},  {4, 2, 1306, 2, false, true}, {3, 8, 45, 1, false, true},
                            {1, 16, 33, 3, false, true},   {5, 4, 100, 1, false, true},  {1059, 40, 3, 2, true, false},
                            {1686, 4, 3, 2, true, true},   {500, 16, 8, 1, true, false}, {97, 13, 16, 3, true, true},
                            {29, 1, 1, 1, true, false},    {301, 33, 12, 1, true, false}, {45, 7, 5, 2, true, true}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 2}) {
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                Case c;
                c.a = c.b = JITMM_DTYPE_F16;
                c.c = it % 4 == 3 ? JITMM_DTYPE_F16 : JITMM_DTYPE_F32;
                c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
                c.ta = s.ta;
                c.tb = s.tb;
                c.lda_pad = it % 2 ? 5 : 0;
                c.ldb_pad = it % 3 ? 3 : 0;
                c.ldc_pad = it % 4 == 1 ? 7 : 0;
                c.poison_pads = true;
                c.beta = it % 4 == 2 ? 0.5f : 0.0f;
                c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_GELU_ERF : JITMM_EPILOGUE_NONE;
                c.bias_layout = it % 3 ? JITMM_BIAS_PER_COLUMN : JITMM_BIAS_PER_ROW;
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
}

TEST_CASE("x86 lowp planner: f16 over at most 8 columns takes two k values a step from K = 8",
          "[x86][lowp][plan]") {
    jitmm::hw::CpuInfo cpu = amx_planner_cpu();
    cpu.avx512_fp16 = true;
    const auto plan = [&](int64_t m, int64_t n, int64_t k, bool ta, bool tb, X86Isa isa) {
        const jitmm::Problem p = planner_problem(m, n, k, ta, tb, JITMM_DTYPE_F16, JITMM_DTYPE_F32);
        return jitmm::plan::plan_x86_lowp(p, cpu, isa, 1);
    };
    const jitmm::plan::X86LowpPlan pairs = plan(187, 6, 68, false, false, X86Isa::amx);
    INFO(pairs.describe());
    CHECK(pairs.layout.f16_k_pairs);
    CHECK(pairs.layout.nv == 1);
    CHECK(pairs.pack_a);
    CHECK_FALSE(pairs.layout.b_in_place);
    CHECK(plan(115, 4, 707, false, false, X86Isa::avx512).layout.f16_k_pairs);
    CHECK(plan(200, 5, 32, true, false, X86Isa::amx).layout.f16_k_pairs);   // A stored K x M past K = 12
    CHECK(plan(200, 5, 12, true, false, X86Isa::avx512).layout.f16_k_pairs);  // no AVX512-FP16: no A in place
    CHECK_FALSE(plan(200, 5, 12, true, false, X86Isa::amx).layout.f16_k_pairs);  // A in place there instead
    CHECK(plan(200, 5, 12, true, false, X86Isa::amx).layout.a_f16_in_place);
    CHECK(plan(200, 5, 16, true, false, X86Isa::amx).layout.f16_k_pairs);
    CHECK_FALSE(plan(300, 8, 6, false, false, X86Isa::amx).layout.f16_k_pairs);  // K under 8
    CHECK_FALSE(plan(300, 9, 64, false, false, X86Isa::amx).layout.f16_k_pairs);  // past 8 columns
    CHECK(plan(24, 8, 29, false, true, X86Isa::amx).layout.f16_k_pairs);           // B stored N x K
    CHECK(plan(1000, 3, 16, false, true, X86Isa::amx).layout.f16_k_pairs);
    CHECK_FALSE(plan(300, 8, 64, false, false, X86Isa::avx2).layout.f16_k_pairs);
}

// The k pairs: K odd and even (the last value alone), K blocks with the strip between them, 1-8 columns, row tails,
// A stored either way (packed), B either way (rows interleaved, or stored rows' dwords gathered), ld pads, batches, beta, bias per row and column, activations, f16 C, every tier
// (below AVX-512 the one-k path), 1 and 2 threads.
TEST_CASE("x86 lowp f16: two k values a step over at most 8 columns (K odd and long, all layouts, tiers, threads)",
          "[x86][lowp]") {
    // The low-precision kernels' own short-K paths (the planner would widen some of these shapes to f32).
    EnvGuard widen("JITMM_X86_LOWP_WIDEN", "0");
    std::mt19937 rng(707);
    struct Shape {
        int64_t m, n, k, batch;
        bool ta, tb;
    };
    const Shape shapes[] = {{187, 6, 68, 1, false, false}, {115, 4, 707, 1, false, false}, {42, 8, 84, 2, false, false},
                            {91, 2, 29, 3, false, false},  {33, 1, 9, 1, false, false},    {300, 7, 8, 1, false, false},
                            {200, 5, 33, 2, true, false},  {57, 3, 1001, 1, true, false},  {29, 8, 16, 1, true, false},
                            {1000, 3, 17, 1, false, false}, {24, 8, 29, 1, false, true},   {1000, 3, 16, 2, false, true},
                            {200, 5, 33, 1, true, true},    {64, 7, 9, 4, false, true},    {45, 1, 101, 1, false, true}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 2}) {
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                Case c;
                c.a = c.b = JITMM_DTYPE_F16;
                c.c = it % 4 == 3 ? JITMM_DTYPE_F16 : JITMM_DTYPE_F32;
                c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
                c.ta = s.ta;
                c.tb = s.tb;
                c.lda_pad = it % 2 ? 3 : 0;
                c.ldb_pad = it % 3 ? 9 : 0;
                c.ldc_pad = it % 4 == 1 ? 5 : 0;
                c.poison_pads = true;
                c.beta = it % 4 == 2 ? 1.0f : 0.0f;
                c.alpha = it % 5 == 4 ? 0.5f : 1.0f;
                c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_SILU : JITMM_EPILOGUE_NONE;
                c.bias_layout = it % 3 ? JITMM_BIAS_PER_COLUMN : JITMM_BIAS_PER_ROW;
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
}

// A K of 1-3 (s8 1-2, u8 1; f16 below AVX512-FP16: up to 32 from 8 rows, any from 64 rows and 8 columns) runs in
// f32 on operands widened to f32: exactly the
// low-precision kernel's results (f32 accumulation; int8 sums exact, s32 C converted exactly before each store),
// over every layout, ld pads, a B shared by the batches, epilogues on f32 C and relu on s32, threads and tiers.
TEST_CASE("x86 lowp: a very short K widened to f32 (bf16, f16, s8, u8; f32 C and exact s32 C)", "[x86][lowp]") {
    std::mt19937 rng(5151);
    struct Shape {
        int64_t m, n, k, batch;
    };
    const Shape shapes[] = {{3942, 5, 1, 1}, {809, 32, 3, 1}, {246, 12, 1, 4}, {63, 1023, 2, 1},
                            {1, 1, 1, 1},    {7, 300, 3, 2},  {300, 7, 2, 3},  {129, 33, 24, 1},
                            {300, 40, 200, 2}, {1100, 64, 150, 1}};  // (the last: A widened in pieces over threads)
    const jitmm_dtype ins[][3] = {{JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_F16, JITMM_DTYPE_F16, JITMM_DTYPE_F32},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                  {JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                                  {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_F32}};
    for (const Tier& tier : runnable_tiers()) {
        for (int threads : {1, 3}) {
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0, widened = 0;
            for (const Shape& s : shapes) {
                for (const auto& in : ins) {
                    const bool f16_converted = in[0] == JITMM_DTYPE_F16 && tier.isa < X86Isa::avx512_fp16;
                    const int64_t max_k = in[0] == JITMM_DTYPE_U8                     ? 1
                                          : in[0] == JITMM_DTYPE_S8                   ? 2
                                          : f16_converted && s.m >= 64 && s.n >= 8 ? s.k
                                          : f16_converted && s.m >= 8              ? 32
                                                                                   : 3;
                    if (s.k > max_k) continue;  // (the widened route's bounds)
                    for (int layout = 0; layout < 4; ++layout, ++it) {
                        INFO("tier " << tier.name << " threads " << threads << " case " << it);
                        Case c;
                        set_types(c, in);
                        c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch;
                        c.ta = layout & 2;
                        c.tb = layout & 1;
                        c.lda_pad = it % 3 == 0 ? 5 : 0;
                        c.ldb_pad = it % 4 == 1 ? 2 : 0;
                        c.ldc_pad = it % 2 ? 3 : 0;
                        c.share_b = s.batch > 1 && it % 2 == 0;
                        if (c.c == JITMM_DTYPE_S32) {
                            if (it % 3 == 2) c.epilogue = JITMM_EPILOGUE_RELU;
                        } else {
                            c.alpha = it % 4 == 3 ? -0.5f : 1.0f;
                            c.beta = it % 3 == 1 ? 0.5f : 0.0f;
                            if (c.m * c.n >= 64) c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                            c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        }
                        jitmm_matmul_desc d;
                        REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
                        d.m = c.m; d.n = c.n; d.k = c.k; d.trans_a = c.ta; d.trans_b = c.tb;
                        d.lda = c.ta ? c.m : c.k; d.ldb = c.tb ? c.k : c.n; d.ldc = c.n;
                        d.a_type = c.a; d.b_type = c.b; d.c_type = c.c;
                        d.epilogue = c.epilogue;
                        const std::string generator = generator_of(e.e, d);
                        INFO("generator " << generator);
                        // (N = 1 runs as the swapped matrix-vector product, before the widening is considered.)
                        if (c.n > 1) {
                            CHECK(generator.find("_widened") != std::string::npos);
                            ++widened;
                        }
                        check_case(e.e, c, rng);
                    }
                }
            }
            CHECK(widened > 80);
        }
    }
    // Not widened: a longer K, scales, an s32 C that beta or a bias reads or adds to.
    auto plain = [](jitmm_dtype a, jitmm_dtype c_type, int64_t k) {
        jitmm::Problem p;
        p.m = 300; p.n = 40; p.k = k; p.lda = k; p.ldb = 40; p.ldc = 40;
        p.a_type = a; p.b_type = a == JITMM_DTYPE_U8 ? JITMM_DTYPE_S8 : a; p.c_type = c_type;
        return p;
    };
    const X86Isa isa = X86Isa::avx512_bf16;
    // (A core of one zmm FMA per cycle, as Zen 4; two widen a packed int8 A further, below.)
    jitmm::hw::CpuInfo cpu;
    cpu.zmm_fma_per_cycle = 1;
    auto widens = [&](const jitmm::Problem& p, X86Isa tier) { return jitmm::plan::lowp_widens_to_f32(p, tier, cpu); };
    CHECK(widens(plain(JITMM_DTYPE_S8, JITMM_DTYPE_S32, 2), isa));
    CHECK_FALSE(widens(plain(JITMM_DTYPE_S8, JITMM_DTYPE_S32, 3), isa));
    CHECK(widens(plain(JITMM_DTYPE_BF16, JITMM_DTYPE_F32, 3), isa));
    CHECK_FALSE(widens(plain(JITMM_DTYPE_BF16, JITMM_DTYPE_F32, 4), isa));
    CHECK(widens(plain(JITMM_DTYPE_U8, JITMM_DTYPE_S32, 1), isa));
    CHECK_FALSE(widens(plain(JITMM_DTYPE_U8, JITMM_DTYPE_S32, 2), isa));
    CHECK(widens(plain(JITMM_DTYPE_F16, JITMM_DTYPE_F32, 32), isa));
    CHECK_FALSE(widens(plain(JITMM_DTYPE_F16, JITMM_DTYPE_F32, 32), X86Isa::avx512_fp16));
    CHECK(widens(plain(JITMM_DTYPE_F16, JITMM_DTYPE_F32, 700), isa));  // any K from 64 rows and 8 columns
    jitmm::Problem f16_few_rows = plain(JITMM_DTYPE_F16, JITMM_DTYPE_F32, 700);
    f16_few_rows.m = 40;
    CHECK_FALSE(widens(f16_few_rows, isa));
    jitmm::Problem scaled = plain(JITMM_DTYPE_S8, JITMM_DTYPE_F32, 2);
    scaled.a_scale = jitmm::ScaleMode::per_tensor;
    CHECK_FALSE(widens(scaled, isa));
    jitmm::Problem huge = plain(JITMM_DTYPE_BF16, JITMM_DTYPE_F32, 3);  // 96 MB widened
    huge.m = 8 << 20;
    CHECK_FALSE(widens(huge, isa));
    jitmm::Problem accumulating = plain(JITMM_DTYPE_S8, JITMM_DTYPE_S32, 2);
    accumulating.beta = 1.0f;
    CHECK_FALSE(widens(accumulating, isa));
    cpu.zmm_fma_per_cycle = 2;
    CHECK(widens(plain(JITMM_DTYPE_S8, JITMM_DTYPE_S32, 4), X86Isa::amx));
    CHECK_FALSE(widens(plain(JITMM_DTYPE_S8, JITMM_DTYPE_S32, 5), X86Isa::amx));
    CHECK_FALSE(widens(plain(JITMM_DTYPE_U8, JITMM_DTYPE_S32, 2), X86Isa::amx));
    jitmm::Problem u8_transposed = plain(JITMM_DTYPE_U8, JITMM_DTYPE_S32, 4);
    u8_transposed.trans_a = true;
    u8_transposed.lda = 300;
    CHECK(widens(u8_transposed, X86Isa::amx));
}

TEST_CASE("x86 lowp planner: the calls of a block of B from memory prefetch the next block as stored",
          "[x86][lowp][plan]") {
    jitmm::hw::CpuInfo zen4 = amx_planner_cpu();
    zen4.amx_tile = zen4.amx_bf16 = zen4.amx_int8 = false;
    zen4.l1d_bytes = 32 * 1024;
    zen4.l2_bytes = 1024 * 1024;
    zen4.zmm_fma_per_cycle = 1;
    const auto plan_of = [&](int64_t m, int64_t n, int64_t k, bool tb, jitmm_dtype in, X86Isa isa) {
        const jitmm::Problem p =
            planner_problem(m, n, k, false, tb, in, in == JITMM_DTYPE_BF16 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32);
        return jitmm::plan::plan_x86_lowp(p, zen4, isa, 1);
    };
    // B stored K x N (2.4 MB): rows of the next K block, a segment of nc bytes each (whole lines).
    const auto nn = plan_of(49, 512, 4608, false, JITMM_DTYPE_S8, X86Isa::avx512_bf16);
    INFO(nn.describe());
    CHECK(nn.layout.b_src_rows >= 1);
    CHECK(nn.layout.b_src_lines >= 1);
    CHECK(nn.layout.b_src_rows * nn.layout.b_src_lines <= 24);
    CHECK(nn.layout.b_src_stride == 512);
    CHECK(nn.layout.b_src_seg % (64 * nn.layout.b_src_lines) == 0);
    CHECK(nn.layout.b_src_seg >= nn.nc);
    CHECK(nn.describe().find("prefetchNextB") != std::string::npos);
    // B stored N x K (bf16, 32 MB): stored rows of the next N block, kc values each.
    const auto nt = plan_of(33, 4096, 4096, true, JITMM_DTYPE_BF16, X86Isa::avx512_bf16);
    INFO(nt.describe());
    CHECK(nt.layout.b_src_rows >= 1);
    CHECK(nt.layout.b_src_stride == 4096 * 2);
    CHECK(nt.layout.b_src_seg >= nt.kc * 2);
    // Several M blocks: B is packed for all of K an N block at a time, and the next N block's stored rows (all
    // of K each) are prefetched over all the M blocks' calls.
    const auto m_blocks = plan_of(2000, 3000, 1000, true, JITMM_DTYPE_S8, X86Isa::avx512_bf16);
    INFO(m_blocks.describe());
    CHECK(m_blocks.mc < 2000);
    CHECK(m_blocks.layout.b_src_rows >= 1);
    CHECK(m_blocks.layout.b_src_seg >= 1000);
    // Not: a B within L2, AVX2, AMX.
    CHECK(plan_of(49, 128, 1024, false, JITMM_DTYPE_S8, X86Isa::avx512_bf16).layout.b_src_rows == 0);
    CHECK(plan_of(49, 512, 4608, false, JITMM_DTYPE_S8, X86Isa::avx2).layout.b_src_rows == 0);
    CHECK(plan_of(49, 512, 4608, false, JITMM_DTYPE_S8, X86Isa::amx).layout.b_src_rows == 0);
}

// The next block's B prefetched by the calls before it (LowpLayout::b_src_*, B past L2 on every machine: 4-8 MB):
// results as without it, exactly for int8, for both layouts of B, K and N blocks with tails, B rows off lines,
// batches, 1 and 3 threads, on the AVX-512 vector tiers.
TEST_CASE("x86 lowp: a B from memory prefetched block by block (K and N tails, layouts, pads, threads)",
          "[x86][lowp]") {
    std::mt19937 rng(4608);
    struct Shape {
        int64_t m, n, k;
        bool tb;
        jitmm_dtype a, b, c;
        int64_t batch = 0;  // 0: one or two by turns
    };
    const Shape shapes[] = {{49, 1100, 4000, false, JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                            {300, 520, 4100, true, JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},  // M blocks
                            // Few rows over batches: many lines a K-loop iteration, the next batch's first block.
                            {7, 140, 2707, false, JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_S32, 8},
                            {33, 1030, 4100, true, JITMM_DTYPE_U8, JITMM_DTYPE_S8, JITMM_DTYPE_S32},
                            {49, 600, 3500, false, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_F32},
                            {33, 700, 3333, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}};
    bool tier_ran = false;
    for (const Tier& tier : runnable_tiers()) {
        if (tier.isa < X86Isa::avx512 || tier.isa >= X86Isa::amx) continue;
        tier_ran = true;
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            INFO("threads " << threads);
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                if (threads > 1 && s.m > 100) continue;  // (the reference's time: one thread count)
                Case c;
                c.a = s.a;
                c.b = s.b;
                c.c = s.c;
                c.m = s.m;
                c.n = s.n;
                c.k = s.k;
                c.tb = s.tb;
                c.batch = s.batch > 0 ? s.batch : it % 2 == 1 ? 2 : 1;
                c.ldb_pad = it % 2 == 0 ? 5 : 0;  // rows off cache lines
                c.lda_pad = it % 3 == 1 ? 3 : 0;
                c.beta = it % 4 == 3 ? 1.0f : 0.0f;
                if (threads == 1) {  // the path under test wherever B is packed (not read in place): the recipe says so
                    jitmm_matmul_desc d;
                    jitmm_matmul_desc_init(&d);
                    d.m = c.m; d.n = c.n; d.k = c.k; d.batch_count = c.batch;
                    d.a_type = c.a; d.b_type = c.b; d.c_type = c.c;
                    d.trans_b = c.tb;
                    d.lda = c.k + c.lda_pad;
                    d.ldb = (c.tb ? c.k : c.n) + c.ldb_pad;
                    d.stride_a = c.m * d.lda;
                    d.stride_b = (c.tb ? c.n : c.k) * d.ldb;
                    d.stride_c = c.m * c.n;
                    d.beta = c.beta;
                    jitmm_kernel* kernel = nullptr;
                    REQUIRE(jitmm_kernel_create(e.e, &d, &kernel) == JITMM_STATUS_SUCCESS);
                    jitmm_kernel_info info;
                    info.struct_size = sizeof info;
                    REQUIRE(jitmm_kernel_get_info(kernel, &info) == JITMM_STATUS_SUCCESS);
                    INFO("recipe: " << info.recipe);
                    const std::string recipe = info.recipe;
                    CHECK((recipe.find("prefetchNextB") != std::string::npos ||
                           recipe.find(" directB") != std::string::npos));
                    jitmm_kernel_release(kernel);
                }
                check_case(e.e, c, rng);
                ++it;
            }
        }
    }
    if (!tier_ran) WARN_SKIPPED("no AVX-512 vector tier below AMX on this CPU");
}

// An s8 A read in place by vpdpbusd, flipped to u8 in the broadcast register (LowpLayout::a_s8_flipped):
// exact s32 against the reference with random values and the corners (-128 and 127 over a long K), K tails
// inside a dword (A's bytes past K meet B's zero rows), a zero point, both layouts of B, float C with scales,
// batches, pads, 1 and 3 threads; one-vector tiles over many panels keep the flipped copy.
TEST_CASE("x86 lowp VNNI: an s8 A flipped in the register it is broadcast to, exactly", "[x86][lowp]") {
    {
        jitmm::hw::CpuInfo zen4 = amx_planner_cpu();
        zen4.amx_tile = zen4.amx_bf16 = zen4.amx_int8 = false;
        zen4.zmm_fma_per_cycle = 1;
        const auto plan_of = [&](int64_t m, int64_t n, int64_t k, bool tb, X86Isa isa) {
            return jitmm::plan::plan_x86_lowp(planner_problem(m, n, k, false, tb, JITMM_DTYPE_S8, JITMM_DTYPE_S32),
                                              zen4, isa, 1);
        };
        const auto flipped = plan_of(454, 17, 3671, false, X86Isa::avx512_bf16);
        INFO(flipped.describe());
        CHECK(flipped.layout.a_s8_flipped);
        CHECK_FALSE(flipped.pack_a);
        CHECK(flipped.describe().find("flipA") != std::string::npos);
        const auto many_panels = plan_of(1000, 70, 1000, true, X86Isa::avx512_bf16);
        INFO(many_panels.describe());
        if (many_panels.layout.nv == 1) {
            CHECK_FALSE(many_panels.layout.a_s8_flipped);
            CHECK(many_panels.pack_a);
        }
        CHECK_FALSE(plan_of(454, 17, 3671, false, X86Isa::avx2).layout.a_s8_flipped);
    }
    std::mt19937 rng(454);
    struct Shape {
        int64_t m, n, k, batch;
        bool tb;
    };
    const Shape shapes[] = {{454, 17, 3671, 1, false}, {39, 243, 370, 1, true}, {10, 1697, 37, 3, false},
                            {158, 38, 22, 5, true},    {7, 100, 4097, 1, false}, {443, 10, 313, 1, true}};
    bool tier_ran = false;
    for (const Tier& tier : runnable_tiers()) {
        if (tier.isa < X86Isa::avx512_vnni || tier.isa >= X86Isa::amx) continue;
        tier_ran = true;
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            INFO("threads " << threads);
            EngineGuard e{make_engine(tier.name, threads)};
            int it = 0;
            for (const Shape& s : shapes) {
                for (int corner = 0; corner < 3; ++corner) {
                    Case c;
                    c.a = c.b = JITMM_DTYPE_S8;
                    c.c = corner == 2 && it % 2 == 0 ? JITMM_DTYPE_F32 : JITMM_DTYPE_S32;
                    c.m = s.m; c.n = s.n; c.k = s.k; c.batch = s.batch; c.tb = s.tb;
                    c.lda_pad = it % 2 ? 3 : 0;
                    c.ldb_pad = it % 3 ? 1 : 0;
                    c.ldc_pad = it % 4 == 1 ? 5 : 0;
                    if (corner == 0) {
                        c.a_fill = -128;
                        c.b_fill = it % 2 ? -128 : 127;
                    } else if (corner == 1) {
                        c.a_fill = 127;
                        c.b_fill = -128;
                    }
                    if (corner == 2) {
                        c.zero_point = it % 2 ? -3 : 5;
                        c.beta = 1.0f;
                        if (c.c == JITMM_DTYPE_F32) {
                            c.alpha = 0.5f;
                            c.a_scale = JITMM_SCALE_PER_ROW;
                            c.b_scale = JITMM_SCALE_PER_COLUMN;
                            c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
                        }
                    }
                    check_case(e.e, c, rng);
                    ++it;
                }
            }
        }
    }
    if (!tier_ran) WARN_SKIPPED("no AVX-512 VNNI tier below AMX on this CPU");
}
