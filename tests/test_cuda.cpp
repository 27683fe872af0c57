// The CUDA backend. CI part (no GPU needed): the SM80 generator's source compiles with NVRTC for sm_80,
// sm_90a and sm_100a for every supported dtype and a spread of shapes; the planner's choices; clean errors
// without a driver. GPU part ([cuda], skipped with a message when there is no device): results against a
// float64 host reference for every dtype, layout, odd shapes, batches, epilogues, alpha/beta, padded and
// misaligned leading dimensions, misaligned pointers and a non-default stream; outputs poisoned first.
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/problem.hpp"
#include "cuda/backend_cuda.hpp"
#include "cuda/codegen/sm80_mma.hpp"
#include "cuda/codegen/sm90_wgmma.hpp"
#include "cuda/driver.hpp"
#include "cuda/nvrtc.hpp"
#include "plan/cuda_gemm_plan.hpp"
#include "plan/cuda_sm90_plan.hpp"
#include "skip.hpp"

#include <catch2/catch.hpp>
#include <unistd.h>
#include <jitmm/jitmm.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using jitmm::Activation;
using jitmm::BiasKind;
using jitmm::Problem;

// ---------------------------------------------------------------------------------------------------
// Host-side element encoding.

int64_t elem_size(jitmm_dtype t) {
    switch (t) {
        case JITMM_DTYPE_F32: case JITMM_DTYPE_S32: return 4;
        case JITMM_DTYPE_F16: case JITMM_DTYPE_BF16: return 2;
        default: return 1;
    }
}

uint16_t float_to_half(float f) {  // round to nearest even
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffffu;
    if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
    if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return static_cast<uint16_t>(sign);
        mant |= 0x800000u;
        const int shift = 14 - exp;
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) ++h;
        return static_cast<uint16_t>(sign | h);
    }
    uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {
            int e = -1;
            uint32_t m = mant;
            do { ++e; m <<= 1; } while ((m & 0x400u) == 0);
            x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7f800000u | (mant << 13);
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

// fp8 with `mbits` mantissa bits and exponent bias `bias` (e4m3: 3, 7; e5m2: 2, 15), for values it represents
// exactly (normal numbers and zero: the inputs drawn).
uint8_t float_to_fp8(double v, int mbits, int bias) {
    if (v == 0) return 0;
    const uint8_t sign = v < 0 ? 0x80 : 0;
    int exp = 0;
    const double frac = std::frexp(std::fabs(v), &exp);  // |v| = frac * 2^exp, frac in [0.5, 1)
    const int biased = exp - 1 + bias;
    const int mant = static_cast<int>(std::lround((frac * 2 - 1) * (1 << mbits)));
    return static_cast<uint8_t>(sign | (biased << mbits) | mant);
}

double fp8_to_double(uint8_t x, int mbits, int bias) {
    const int exp_field = (x & 0x7f) >> mbits, mant = x & ((1 << mbits) - 1);
    const double mag = exp_field == 0 ? std::ldexp(mant, 1 - bias - mbits)
                                      : std::ldexp(1.0 + double(mant) / (1 << mbits), exp_field - bias);
    return x & 0x80 ? -mag : mag;
}

// value must be representable (inputs are drawn so that they are); writes element i of buffer.
void encode(jitmm_dtype t, void* buffer, int64_t i, double value) {
    char* p = static_cast<char*>(buffer) + i * elem_size(t);
    const float f = static_cast<float>(value);
    switch (t) {
        case JITMM_DTYPE_F32: std::memcpy(p, &f, 4); break;
        case JITMM_DTYPE_F16: { const uint16_t h = float_to_half(f); std::memcpy(p, &h, 2); break; }
        case JITMM_DTYPE_BF16: {
            uint32_t x;
            std::memcpy(&x, &f, 4);
            const uint16_t h = static_cast<uint16_t>(x >> 16);  // exact for the values drawn
            std::memcpy(p, &h, 2);
            break;
        }
        case JITMM_DTYPE_S8: { const int8_t v = static_cast<int8_t>(value); std::memcpy(p, &v, 1); break; }
        case JITMM_DTYPE_S32: { const int32_t v = static_cast<int32_t>(value); std::memcpy(p, &v, 4); break; }
        case JITMM_DTYPE_F8_E4M3: *reinterpret_cast<uint8_t*>(p) = float_to_fp8(value, 3, 7); break;
        case JITMM_DTYPE_F8_E5M2: *reinterpret_cast<uint8_t*>(p) = float_to_fp8(value, 2, 15); break;
        default: FAIL("no encoding");
    }
}

double decode(jitmm_dtype t, const void* buffer, int64_t i) {
    const char* p = static_cast<const char*>(buffer) + i * elem_size(t);
    switch (t) {
        case JITMM_DTYPE_F32: { float f; std::memcpy(&f, p, 4); return f; }
        case JITMM_DTYPE_F16: { uint16_t h; std::memcpy(&h, p, 2); return half_to_float(h); }
        case JITMM_DTYPE_BF16: {
            uint16_t h;
            std::memcpy(&h, p, 2);
            const uint32_t x = static_cast<uint32_t>(h) << 16;
            float f;
            std::memcpy(&f, &x, 4);
            return f;
        }
        case JITMM_DTYPE_S8: { int8_t v; std::memcpy(&v, p, 1); return v; }
        case JITMM_DTYPE_S32: { int32_t v; std::memcpy(&v, p, 4); return v; }
        case JITMM_DTYPE_F8_E4M3: return fp8_to_double(*reinterpret_cast<const uint8_t*>(p), 3, 7);
        case JITMM_DTYPE_F8_E5M2: return fp8_to_double(*reinterpret_cast<const uint8_t*>(p), 2, 15);
        default: return NAN;
    }
}

// Random inputs: multiples of 1/64 in [-1, 1] (exact in f16, bf16 and tf32), full-precision floats for f32
// (so that tf32 rounding is exercised), integers in [-64, 64] for s8/s32.
double draw(jitmm_dtype t, std::mt19937& rng) {
    if (t == JITMM_DTYPE_S8 || t == JITMM_DTYPE_S32) return std::uniform_int_distribution<int>(-64, 64)(rng);
    if (t == JITMM_DTYPE_F32) return std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    if (t == JITMM_DTYPE_F8_E4M3 || t == JITMM_DTYPE_F8_E5M2)  // j/4, |j| <= 8: two mantissa bits at most
        return std::uniform_int_distribution<int>(-8, 8)(rng) / 4.0;
    return std::uniform_int_distribution<int>(-64, 64)(rng) / 64.0;
}

double activate(Activation a, double x) {
    switch (a) {
        case Activation::relu: return x > 0 ? x : 0;
        // 0.5 x (1 + tanh(u)) as x / (1 + exp(-2u)): 1 + tanh(u) cancels to nothing in double once u < -18.
        case Activation::gelu_tanh: return x / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        case Activation::gelu_erf: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));  // = 1 + erf(z): no cancellation
        case Activation::silu: return x / (1 + std::exp(-x));
        case Activation::none: break;
    }
    return x;
}

jitmm_epilogue epilogue_of(BiasKind bias, Activation act) {
    const bool b = bias != BiasKind::none;
    switch (act) {
        case Activation::none: return b ? JITMM_EPILOGUE_BIAS : JITMM_EPILOGUE_NONE;
        case Activation::relu: return b ? JITMM_EPILOGUE_BIAS_RELU : JITMM_EPILOGUE_RELU;
        case Activation::gelu_tanh: return b ? JITMM_EPILOGUE_BIAS_GELU_TANH : JITMM_EPILOGUE_GELU_TANH;
        case Activation::gelu_erf: return b ? JITMM_EPILOGUE_BIAS_GELU_ERF : JITMM_EPILOGUE_GELU_ERF;
        case Activation::silu: return b ? JITMM_EPILOGUE_BIAS_SILU : JITMM_EPILOGUE_SILU;
    }
    return JITMM_EPILOGUE_NONE;
}

// ---------------------------------------------------------------------------------------------------
// One GPU case.

struct Case {
    int64_t m, n, k, batch = 1;
    bool ta = false, tb = false;
    jitmm_dtype in = JITMM_DTYPE_F16, out = JITMM_DTYPE_F16;
    int64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;
    float alpha = 1, beta = 0;
    BiasKind bias = BiasKind::none;
    Activation act = Activation::none;
    bool bias_f32 = false;     // bias in f32 instead of C's type
    bool share_b = false;      // stride_b = 0
    int64_t ptr_offset = 0;    // elements: misaligned base pointers (the fallback kernel)
    bool own_stream = false;   // run on a stream created here, not the legacy default stream
    int in_b = -1;  // B's type (a jitmm_dtype) when it differs from A's (fp8 mixes)
    jitmm::ScaleMode a_scale = jitmm::ScaleMode::none, b_scale = jitmm::ScaleMode::none;  // fp8 dequantization
    const char* want_generator = nullptr;  // on an sm_90 device: the generator this case must get
    bool caller_workspace = false;  // hand in a poisoned workspace of the kernel's workspace_size (split K)
    bool run_twice = false;         // run again (C restored) and require the same bytes: fixed summation order
    jitmm_dtype b_type() const { return in_b < 0 ? in : static_cast<jitmm_dtype>(in_b); }
};

jitmm_scale_mode scale_mode_of(jitmm::ScaleMode m) {
    switch (m) {
        case jitmm::ScaleMode::per_tensor: return JITMM_SCALE_PER_TENSOR;
        case jitmm::ScaleMode::per_row: return JITMM_SCALE_PER_ROW;
        case jitmm::ScaleMode::per_column: return JITMM_SCALE_PER_COLUMN;
        case jitmm::ScaleMode::per_block: return JITMM_SCALE_PER_BLOCK_128;
        case jitmm::ScaleMode::none: break;
    }
    return JITMM_SCALE_NONE;
}

const char* scale_name(jitmm::ScaleMode m) {
    switch (m) {
        case jitmm::ScaleMode::per_tensor: return "tensor";
        case jitmm::ScaleMode::per_row: return "row";
        case jitmm::ScaleMode::per_column: return "column";
        case jitmm::ScaleMode::per_block: return "block";
        case jitmm::ScaleMode::none: break;
    }
    return "none";
}

std::string describe(const Case& c) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "%lldx%lldx%lld batch=%lld %c%c %s*%s->%s pads=%lld/%lld/%lld alpha=%g beta=%g bias=%s%s act=%s%s "
                  "offset=%lld%s scales=%s/%s",
                  (long long)c.m, (long long)c.n, (long long)c.k, (long long)c.batch, c.ta ? 'T' : 'N', c.tb ? 'T' : 'N',
                  jitmm_dtype_name(c.in), jitmm_dtype_name(c.b_type()), jitmm_dtype_name(c.out), (long long)c.lda_pad, (long long)c.ldb_pad,
                  (long long)c.ldc_pad, c.alpha, c.beta,
                  c.bias == BiasKind::none ? "none" : c.bias == BiasKind::per_row ? "row" : "col",
                  c.bias_f32 ? "(f32)" : "", jitmm::activation_name(c.act), c.share_b ? " shared-B" : "",
                  (long long)c.ptr_offset, c.own_stream ? " own-stream" : "", scale_name(c.a_scale),
                  scale_name(c.b_scale));
    return buf;
}

struct Layout {
    int64_t a_rows, a_cols, b_rows, b_cols, lda, ldb, ldc, stride_a, stride_b, stride_c;
};

Layout layout_of(const Case& c) {
    Layout l;
    l.a_rows = c.ta ? c.k : c.m;
    l.a_cols = c.ta ? c.m : c.k;
    l.b_rows = c.tb ? c.n : c.k;
    l.b_cols = c.tb ? c.k : c.n;
    l.lda = l.a_cols + c.lda_pad;
    l.ldb = l.b_cols + c.ldb_pad;
    l.ldc = c.n + c.ldc_pad;
    l.stride_a = l.a_rows * l.lda;
    l.stride_b = c.share_b ? 0 : l.b_rows * l.ldb;
    l.stride_c = c.m * l.ldc;
    return l;
}

jitmm_matmul_desc desc_of(const Case& c) {
    const Layout l = layout_of(c);
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = c.m; d.n = c.n; d.k = c.k; d.batch_count = c.batch;
    d.a_type = c.in;
    d.b_type = c.b_type();
    d.c_type = c.out;
    d.a_scale_mode = scale_mode_of(c.a_scale);
    d.b_scale_mode = scale_mode_of(c.b_scale);
    d.trans_a = c.ta; d.trans_b = c.tb;
    d.lda = l.lda; d.ldb = l.ldb; d.ldc = l.ldc;
    d.stride_a = l.stride_a; d.stride_b = l.stride_b; d.stride_c = l.stride_c;
    d.alpha = c.alpha; d.beta = c.beta;
    d.epilogue = epilogue_of(c.bias, c.act);
    d.bias_layout = c.bias == BiasKind::per_row ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
    d.bias_type = c.bias_f32 ? JITMM_DTYPE_F32 : c.out;
    return d;
}

// The primary context of device 0, current on this thread for the scope; device buffers from it.
class TestDevice {
public:
    explicit TestDevice(const jitmm::cuda::DriverApi& drv) : drv_(drv) {
        REQUIRE(drv_.cuDeviceGet(&dev_, 0) == CUDA_SUCCESS);
        REQUIRE(drv_.cuDevicePrimaryCtxRetain(&ctx_, dev_) == CUDA_SUCCESS);
        REQUIRE(drv_.cuCtxPushCurrent(ctx_) == CUDA_SUCCESS);
    }
    ~TestDevice() {
        CUcontext popped;
        drv_.cuCtxPopCurrent(&popped);
        drv_.cuDevicePrimaryCtxRelease(dev_);
    }
    const jitmm::cuda::DriverApi& drv() const { return drv_; }

private:
    const jitmm::cuda::DriverApi& drv_;
    CUdevice dev_ = 0;
    CUcontext ctx_ = nullptr;
};

class DeviceBuffer {
public:
    DeviceBuffer(const jitmm::cuda::DriverApi& drv, size_t bytes) : drv_(drv) {
        REQUIRE(drv_.cuMemAlloc(&ptr_, std::max<size_t>(bytes, 16)) == CUDA_SUCCESS);
    }
    ~DeviceBuffer() { drv_.cuMemFree(ptr_); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    CUdeviceptr ptr() const { return ptr_; }
    void* at(size_t offset) const { return reinterpret_cast<void*>(ptr_ + offset); }

private:
    const jitmm::cuda::DriverApi& drv_;
    CUdeviceptr ptr_ = 0;
};

double bound_for(const Case& c, bool exact_int) {
    if (exact_int) return 0.0;
    if (c.out == JITMM_DTYPE_S32) return 1e-3;  // float epilogue, rounded to integers
    if (c.in == JITMM_DTYPE_F32) return 5e-3;     // tf32
    if (c.in == JITMM_DTYPE_F8_E4M3 || c.in == JITMM_DTYPE_F8_E5M2) return 6e-2;
    return 1e-2;
}

// Runs one case with kernel (created beforehand) and checks every batch against float64.
void run_and_check(const TestDevice& dev, jitmm_kernel* kernel, const Case& c, std::mt19937& rng) {
    const auto& drv = dev.drv();
    INFO("case: " << describe(c));
    const Layout l = layout_of(c);
    const int64_t ea = elem_size(c.in), eb = elem_size(c.b_type()), ec = elem_size(c.out);
    const int64_t a_elems = l.stride_a * (c.batch - 1) + l.a_rows * l.lda;
    const int64_t b_elems = (c.share_b ? 0 : l.stride_b * (c.batch - 1)) + l.b_rows * l.ldb;
    const int64_t c_elems = l.stride_c * c.batch;
    const int64_t bias_elems = c.bias == BiasKind::per_row ? c.m : c.n;
    const jitmm_dtype bias_t = c.bias_f32 ? JITMM_DTYPE_F32 : c.out;

    // Host data: exact input values, encoded.
    std::vector<double> av(a_elems), bv(b_elems), cv(c_elems, 0.0), biasv(bias_elems);
    std::vector<char> ah(a_elems * ea), bh(b_elems * eb), ch(c_elems * ec), biash(bias_elems * elem_size(bias_t));
    for (int64_t i = 0; i < a_elems; ++i) { encode(c.in, ah.data(), i, draw(c.in, rng)); av[i] = decode(c.in, ah.data(), i); }
    for (int64_t i = 0; i < b_elems; ++i) {
        encode(c.b_type(), bh.data(), i, draw(c.b_type(), rng));
        bv[i] = decode(c.b_type(), bh.data(), i);
    }
    // Dequantization scales: powers of two and halves in [0.25, 3], one per tensor, row or column.
    auto scales_of = [&](jitmm::ScaleMode mode, int64_t per_index) {
        std::vector<float> v(mode == jitmm::ScaleMode::none ? 0 : mode == jitmm::ScaleMode::per_tensor ? 1 : per_index);
        for (float& x : v) x = std::uniform_int_distribution<int>(1, 12)(rng) / 4.0f;
        return v;
    };
    // Per-block scales: A per row and 128-wide K block, B per 128 x 128 block (both or neither).
    const bool block_scales = c.a_scale == jitmm::ScaleMode::per_block;
    const int64_t k_blocks = (c.k + 127) / 128;
    const std::vector<float> sa = scales_of(c.a_scale, block_scales ? c.m * k_blocks : c.m),
                             sb = scales_of(c.b_scale, block_scales ? (c.n + 127) / 128 * k_blocks : c.n);
    for (int64_t i = 0; i < bias_elems; ++i) {
        encode(bias_t, biash.data(), i, draw(bias_t == JITMM_DTYPE_F32 ? JITMM_DTYPE_F16 : bias_t, rng));
        biasv[i] = decode(bias_t, biash.data(), i);
    }
    // C: random where beta reads it, 0xFF bytes (NaN, or -1 for s32) everywhere else, padding included.
    std::memset(ch.data(), 0xFF, ch.size());
    if (c.beta != 0)
        for (int64_t i = 0; i < c_elems; ++i)
            if (i % l.ldc < c.n) {
                encode(c.out, ch.data(), i, draw(c.out == JITMM_DTYPE_F32 ? JITMM_DTYPE_F16 : c.out, rng));
                cv[i] = decode(c.out, ch.data(), i);
            }

    const size_t off_a = c.ptr_offset * ea, off_c = c.ptr_offset * ec;
    const size_t off_b = c.ptr_offset * eb;
    DeviceBuffer da(drv, ah.size() + off_a), db(drv, bh.size() + off_b), dc(drv, ch.size() + off_c),
        dbias(drv, biash.size() + 16), dsa(drv, sa.size() * 4), dsb(drv, sb.size() * 4);
    REQUIRE(drv.cuMemcpyHtoD(da.ptr() + off_a, ah.data(), ah.size()) == CUDA_SUCCESS);
    REQUIRE(drv.cuMemcpyHtoD(db.ptr() + off_b, bh.data(), bh.size()) == CUDA_SUCCESS);
    if (!sa.empty()) REQUIRE(drv.cuMemcpyHtoD(dsa.ptr(), sa.data(), sa.size() * 4) == CUDA_SUCCESS);
    if (!sb.empty()) REQUIRE(drv.cuMemcpyHtoD(dsb.ptr(), sb.data(), sb.size() * 4) == CUDA_SUCCESS);
    if (!biash.empty()) REQUIRE(drv.cuMemcpyHtoD(dbias.ptr(), biash.data(), biash.size()) == CUDA_SUCCESS);
    if (c.beta != 0) REQUIRE(drv.cuMemcpyHtoD(dc.ptr() + off_c, ch.data(), ch.size()) == CUDA_SUCCESS);
    else REQUIRE(drv.cuMemsetD8(dc.ptr(), 0xFF, ch.size() + off_c) == CUDA_SUCCESS);

    // The copies and the poisoning memset above run on the legacy stream, which a non-blocking stream does not
    // wait for (cuMemsetD8 and pageable cuMemcpyHtoD may return before the device has done them): a kernel on
    // its own stream then raced the memset, which overwrote parts of its C with the poison afterwards.
    REQUIRE(drv.cuCtxSynchronize() == CUDA_SUCCESS);
    CUstream stream = nullptr;
    if (c.own_stream) REQUIRE(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    jitmm_kernel_info info;
    info.struct_size = sizeof info;
    REQUIRE(jitmm_kernel_get_info(kernel, &info) == JITMM_STATUS_SUCCESS);
    std::unique_ptr<DeviceBuffer> workspace;
    if (c.caller_workspace) {
        REQUIRE(info.workspace_size > 0);
        workspace = std::make_unique<DeviceBuffer>(drv, info.workspace_size);
        REQUIRE(drv.cuMemsetD8(workspace->ptr(), 0xFF, info.workspace_size) == CUDA_SUCCESS);
    }
    jitmm_matmul_args args;
    jitmm_matmul_args_init(&args);
    args.a = da.at(off_a);
    args.b = db.at(off_b);
    args.a_scales = sa.empty() ? nullptr : static_cast<const float*>(dsa.at(0));
    args.b_scales = sb.empty() ? nullptr : static_cast<const float*>(dsb.at(0));
    args.c = dc.at(off_c);
    args.bias = c.bias != BiasKind::none ? dbias.at(0) : nullptr;
    args.stream = stream;
    if (workspace) {
        args.workspace = workspace->at(0);
        args.workspace_size = info.workspace_size;
    }
    auto run_once = [&] {
        const jitmm_status st = jitmm_kernel_run(kernel, &args);
        INFO("run: " << jitmm_status_string(st) << " " << jitmm_last_error_message());
        REQUIRE(st == JITMM_STATUS_SUCCESS);
        if (stream != nullptr) REQUIRE(drv.cuStreamSynchronize(stream) == CUDA_SUCCESS);
        else REQUIRE(drv.cuCtxSynchronize() == CUDA_SUCCESS);
        std::vector<char> result(ch.size());
        REQUIRE(drv.cuMemcpyDtoH(result.data(), dc.ptr() + off_c, result.size()) == CUDA_SUCCESS);
        return result;
    };
    const std::vector<char> out = run_once();
    if (workspace) {
        // The caller's workspace was the one used: split K's first arrival counter (tile 0, first consumer)
        // counted every K range there; a staged copy overwrote the poison.
        std::vector<uint32_t> head(64);
        REQUIRE(drv.cuMemcpyDtoH(head.data(), workspace->ptr(), std::min<size_t>(256, info.workspace_size)) ==
                CUDA_SUCCESS);
        if (std::string(info.recipe).find("split_k=1 ") == std::string::npos) {
            CHECK(head[0] >= 2);
            CHECK(head[0] <= 16);
        } else {
            CHECK(std::count(head.begin(), head.end(), 0xFFFFFFFFu) < 64);
        }
    }
    if (c.run_twice) {
        if (c.beta != 0) REQUIRE(drv.cuMemcpyHtoD(dc.ptr() + off_c, ch.data(), ch.size()) == CUDA_SUCCESS);
        CHECK(run_once() == out);
    }
    if (stream != nullptr) drv.cuStreamDestroy(stream);

    // float64 reference: op(A) and op(B)^T gathered contiguous per row, then dot products.
    const bool exact_int = c.out == JITMM_DTYPE_S32 && c.alpha == 1.0f && (c.beta == 0.0f || c.beta == 1.0f) &&
                           (c.bias == BiasKind::none || !c.bias_f32) &&
                           (c.act == Activation::none || c.act == Activation::relu);
    const double bound = bound_for(c, exact_int);
    std::vector<double> arow(c.k), bcol(c.n * c.k);
    for (int64_t bt = 0; bt < c.batch; ++bt) {
        const double* A = av.data() + bt * l.stride_a;
        const double* B = bv.data() + bt * l.stride_b;
        for (int64_t j = 0; j < c.n; ++j)
            for (int64_t p = 0; p < c.k; ++p) bcol[j * c.k + p] = c.tb ? B[j * l.ldb + p] : B[p * l.ldb + j];
        double err2 = 0, ref2 = 0;
        int64_t non_finite = 0, bad_pad = 0, first_bad_i = -1, first_bad_j = -1;
        double first_got = 0, first_ref = 0;
        for (int64_t i = 0; i < c.m; ++i) {
            for (int64_t p = 0; p < c.k; ++p) arow[p] = c.ta ? A[p * l.lda + i] : A[i * l.lda + p];
            for (int64_t j = 0; j < l.ldc; ++j) {
                const int64_t idx = bt * l.stride_c + i * l.ldc + j;
                if (j >= c.n) {
                    for (int64_t q = 0; q < ec; ++q) bad_pad += out[idx * ec + q] != static_cast<char>(0xFF);
                    continue;
                }
                double acc = 0;
                const double* bc = bcol.data() + j * c.k;
                double scale = 1.0;
                if (block_scales) {
                    for (int64_t p = 0; p < c.k; ++p)
                        acc += arow[p] * bc[p] * double(sa[i * k_blocks + p / 128]) *
                               double(sb[(j / 128) * k_blocks + p / 128]);
                } else {
                    for (int64_t p = 0; p < c.k; ++p) acc += arow[p] * bc[p];
                    scale = (sa.empty() ? 1.0 : sa[sa.size() == 1 ? 0 : i]) * (sb.empty() ? 1.0 : sb[sb.size() == 1 ? 0 : j]);
                }
                double ref = c.alpha * scale * acc;
                if (c.beta != 0) ref += double(c.beta) * cv[idx];
                if (c.bias != BiasKind::none) ref += biasv[c.bias == BiasKind::per_row ? i : j];
                ref = activate(c.act, ref);
                if (c.out == JITMM_DTYPE_S32 && !exact_int) ref = std::nearbyint(ref);
                const double got = decode(c.out, out.data(), idx);
                if (!std::isfinite(got)) ++non_finite;
                const double d = got - ref;
                if (first_bad_i < 0 && (std::isnan(got) || std::fabs(d) > 0.05 * (1 + std::fabs(ref)) ||
                                        (exact_int && d != 0))) {
                    first_bad_i = i, first_bad_j = j, first_got = got, first_ref = ref;
                }
                err2 += d * d;
                ref2 += ref * ref;
            }
        }
        const double rel = std::sqrt(err2) / std::max(std::sqrt(ref2), 1e-30);
        INFO("batch " << bt << ": rel err " << rel << " (bound " << bound << "), non-finite " << non_finite
                      << ", first bad (" << first_bad_i << "," << first_bad_j << ") got " << first_got << " want "
                      << first_ref);
        CHECK(non_finite == 0);
        CHECK(bad_pad == 0);
        CHECK(rel <= bound);
    }
}

// Whether device 0 is an sm_90 (Hopper) GPU: the Hopper generator's cases check that they got it there.
// A Hopper GPU with the Hopper generator on: JITMM_CUDA_SM90=0 turns it off, and the SM80 family then serves
// every case (tools/gpu_run.sh runs the main GPU cases that way too).
bool sm90_device() {
    if (const char* off = std::getenv("JITMM_CUDA_SM90"); off != nullptr && std::string(off) == "0") return false;
    const jitmm::cuda::DriverApi* drv = jitmm::cuda::driver();
    if (drv == nullptr) return false;
    CUdevice dev = 0;
    int major = 0, minor = 0;
    if (drv->cuDeviceGet(&dev, 0) != CUDA_SUCCESS) return false;
    drv->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    drv->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    return major == 9 && minor == 0;
}

// Runs fn(0 .. n-1) on up to 8 threads (kernel creation and NVRTC compiles, which dominate these tests).
void for_each_index_in_parallel(size_t n, const std::function<void(size_t)>& fn) {
    std::atomic<size_t> next{0};
    std::vector<std::thread> workers;
    const unsigned n_threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
    for (unsigned t = 0; t < n_threads; ++t)
        workers.emplace_back([&] {
            for (size_t i = next++; i < n; i = next++) fn(i);
        });
    for (std::thread& w : workers) w.join();
}

// An engine on "cuda:0" without a disk cache; null, with a SKIPPED warning, where the machine has no device.
jitmm_engine* make_gpu_engine_or_skip() {
    jitmm_engine_config config;
    jitmm_engine_config_init(&config);
    config.device = "cuda:0";
    config.cache_dir = "";
    jitmm_engine* engine = nullptr;
    const jitmm_status created = jitmm_engine_create(&config, &engine);
    if (created == JITMM_STATUS_NO_DEVICE) {
        WARN_SKIPPED("no CUDA device: " << jitmm_last_error_message());
        return nullptr;
    }
    INFO(jitmm_last_error_message());
    REQUIRE(created == JITMM_STATUS_SUCCESS);
    return engine;
}

// The whole list: kernels are created in parallel (NVRTC time dominates), then run one by one.
void run_cases(const std::vector<Case>& cases) {
    const jitmm::cuda::DriverApi* drv = jitmm::cuda::driver();
    if (drv == nullptr) {
        WARN_SKIPPED("no CUDA device: " << jitmm::cuda::driver_unavailable_reason());
        return;
    }
    jitmm_engine* engine = make_gpu_engine_or_skip();
    if (engine == nullptr) return;

    std::vector<jitmm_kernel*> kernels(cases.size(), nullptr);
    std::vector<jitmm_status> status(cases.size(), JITMM_STATUS_SUCCESS);
    std::vector<std::string> messages(cases.size());
    for_each_index_in_parallel(cases.size(), [&](size_t i) {
        const jitmm_matmul_desc d = desc_of(cases[i]);
        status[i] = jitmm_kernel_create(engine, &d, &kernels[i]);
        if (status[i] != JITMM_STATUS_SUCCESS) messages[i] = jitmm_last_error_message();
    });

    {
        TestDevice dev(*drv);
        std::mt19937 rng(1234);
        for (size_t i = 0; i < cases.size(); ++i) {
            INFO("case: " << describe(cases[i]) << "; create: " << messages[i]);
            CHECK(status[i] == JITMM_STATUS_SUCCESS);
            if (status[i] != JITMM_STATUS_SUCCESS) continue;
            jitmm_kernel_info info;
            info.struct_size = sizeof info;
            REQUIRE(jitmm_kernel_get_info(kernels[i], &info) == JITMM_STATUS_SUCCESS);
            INFO("generator " << info.generator << ": " << info.recipe);
            if (cases[i].want_generator != nullptr && sm90_device())
                CHECK(std::string(info.generator) == cases[i].want_generator);
            run_and_check(dev, kernels[i], cases[i], rng);
        }
    }
    for (jitmm_kernel* k : kernels) jitmm_kernel_release(k);
    jitmm_engine_destroy(engine);
}

struct DtypePair {
    jitmm_dtype in, out;
};
constexpr DtypePair kDtypes[] = {{JITMM_DTYPE_F16, JITMM_DTYPE_F16},  {JITMM_DTYPE_F16, JITMM_DTYPE_F32},
                                 {JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}, {JITMM_DTYPE_BF16, JITMM_DTYPE_F32},
                                 {JITMM_DTYPE_F32, JITMM_DTYPE_F32},  {JITMM_DTYPE_S8, JITMM_DTYPE_S32}};

Problem problem_of(const Case& c) {
    const Layout l = layout_of(c);
    Problem p;
    p.m = c.m; p.n = c.n; p.k = c.k; p.batch = c.batch;
    p.trans_a = c.ta; p.trans_b = c.tb;
    p.lda = l.lda; p.ldb = l.ldb; p.ldc = l.ldc;
    p.stride_a = l.stride_a; p.stride_b = l.stride_b; p.stride_c = l.stride_c;
    p.a_type = c.in;
    p.b_type = c.b_type();
    p.c_type = c.out;
    p.a_scale = c.a_scale;
    p.b_scale = c.b_scale;
    p.alpha = c.alpha; p.beta = c.beta;
    p.bias = c.bias;
    p.bias_type = c.bias_f32 ? JITMM_DTYPE_F32 : c.out;
    p.activation = c.act;
    return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// CI: no GPU needed.

TEST_CASE("cuda: generated kernels compile with NVRTC for sm_80, sm_90a and sm_100a", "[cuda-compile]") {
    if (jitmm::cuda::nvrtc() == nullptr) {
        WARN_SKIPPED(jitmm::cuda::nvrtc_unavailable_reason());
        return;
    }
    // Shapes that reach each family and operand path: big aligned (cp.async both), decode (gemv, and skinny
    // when rows break 16 bytes), odd tails with 4-/1-byte M/N-major operands (vector), misaligned leading
    // dimensions (scalar), batches.
    std::vector<Case> shapes;
    shapes.push_back({4096, 4096, 4096});
    shapes.push_back({1, 4096, 4096, 1, false, true});
    shapes.push_back({16, 11008, 4096, 1, false, true});
    shapes.push_back({5, 300, 257, 1, false, true, JITMM_DTYPE_F16, JITMM_DTYPE_F16, 1, 1, 0});  // decode, rows off 16 B
    shapes.push_back({9, 1000, 777, 1, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F16, 7, 0, 0});  // decode, B K x N
    shapes.push_back({1000, 33, 4097, 1, true, false});
    shapes.push_back({7, 1000, 33, 1, true, true, JITMM_DTYPE_F16, JITMM_DTYPE_F16, 1, 1, 1});
    Case epi{256, 256, 256, 3, false, false};
    epi.bias = BiasKind::per_column, epi.act = Activation::gelu_tanh, epi.beta = 0.5f, epi.share_b = true;
    shapes.push_back(epi);

    struct Job {
        std::string arch;
        Case c;
    };
    std::vector<Job> jobs;
    const char* arches[] = {"sm_80", "sm_90a", "sm_100a"};
    for (int a = 0; a < 3; ++a)
        for (size_t d = 0; d < std::size(kDtypes); ++d)
            for (size_t s = 0; s < shapes.size(); ++s) {
                if ((s + d + a) % 2 != 0) continue;  // half of the grid per arch; every pair over the three
                Case c = shapes[s];
                c.in = kDtypes[d].in;
                c.out = kDtypes[d].out;
                jobs.push_back({arches[a], c});
            }

    std::vector<std::string> errors(jobs.size());
    std::vector<double> ms(jobs.size(), 0.0);
    std::vector<size_t> sizes(jobs.size(), 0);
    for_each_index_in_parallel(jobs.size(), [&](size_t i) {
        try {
            auto backend = jitmm::cuda::make_cuda_compile_only_backend(jobs[i].arch);
            const auto start = std::chrono::steady_clock::now();
            const jitmm::Artifact art = backend->plan(problem_of(jobs[i].c))->compile();
            ms[i] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            sizes[i] = art.payload.size();
            if (art.kind != "cubin" || art.payload.empty() || art.text.empty()) errors[i] = "bad artifact";
        } catch (const std::exception& e) {
            errors[i] = e.what();
        }
    });
    double worst = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
        INFO(jobs[i].arch << " " << describe(jobs[i].c) << ": " << errors[i]);
        CHECK(errors[i].empty());
        CHECK(sizes[i] > 0);
        worst = std::max(worst, ms[i]);
    }
    INFO("slowest NVRTC compile: " << worst << " ms over " << jobs.size() << " kernels");
    CHECK(worst < 10000.0);  // the target is <= 1 s per kernel; this only catches pathologies on slow CI
}

TEST_CASE("cuda sm90: the Hopper generator compiles for sm_90a, with wgmma and TMA in its PTX", "[cuda-compile]") {
    if (jitmm::cuda::nvrtc() == nullptr) {
        WARN_SKIPPED(jitmm::cuda::nvrtc_unavailable_reason());
        return;
    }
    const auto h100 = jitmm::plan::cuda_target_from_arch("sm_90a");
    struct Sm90Case {
        Case c;
        jitmm_dtype a, b;
        jitmm::ScaleMode sa = jitmm::ScaleMode::none, sb = jitmm::ScaleMode::none;
        std::string recipe = "";  // a tuned choice instead of the heuristic's
    };
    std::vector<Sm90Case> cases;
    // 16-bit types in all four layouts (wgmma transposes M/N-major tiles), the others K-major only.
    for (int layout = 0; layout < 4; ++layout) {
        Case c{4096, 4096, 4096, 1, (layout & 2) != 0, (layout & 1) != 0, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
        cases.push_back({c, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16});
        Case odd{1000, 328, 4000, 2, (layout & 2) != 0, (layout & 1) != 0, JITMM_DTYPE_F16, JITMM_DTYPE_F32};
        odd.bias = BiasKind::per_column, odd.act = Activation::gelu_tanh, odd.beta = 0.5f;
        cases.push_back({odd, JITMM_DTYPE_F16, JITMM_DTYPE_F16});
    }
    cases.push_back({Case{2047, 1000, 1000, 1, false, true, JITMM_DTYPE_F32, JITMM_DTYPE_F32}, JITMM_DTYPE_F32,
                     JITMM_DTYPE_F32});
    cases.push_back({Case{4096, 4096, 4096, 1, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32}, JITMM_DTYPE_S8,
                     JITMM_DTYPE_S8});
    cases.push_back({Case{128, 11008, 4096, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16},
                     JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_F8_E4M3, jitmm::ScaleMode::per_tensor,
                     jitmm::ScaleMode::per_tensor});
    cases.push_back({Case{77, 333, 160, 3, false, true, JITMM_DTYPE_F8_E5M2, JITMM_DTYPE_F32}, JITMM_DTYPE_F8_E5M2,
                     JITMM_DTYPE_F8_E4M3, jitmm::ScaleMode::per_row, jitmm::ScaleMode::per_column});
    // Staged operands: tf32 NN, s8 with A transposed, both s8 operands M/N-major with a batch, fp8 NN.
    cases.push_back({Case{2048, 1000, 1000, 1, false, false, JITMM_DTYPE_F32, JITMM_DTYPE_F32}, JITMM_DTYPE_F32,
                     JITMM_DTYPE_F32});
    cases.push_back({Case{300, 4096, 512, 1, true, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32}, JITMM_DTYPE_S8,
                     JITMM_DTYPE_S8});
    cases.push_back({Case{300, 200, 100, 3, true, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32}, JITMM_DTYPE_S8,
                     JITMM_DTYPE_S8});
    cases.push_back({Case{16, 4096, 4096, 1, false, false, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16},
                     JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_F8_E4M3, jitmm::ScaleMode::per_tensor,
                     jitmm::ScaleMode::per_column});
    // Per-block fp8 scales, K-major and staged B.
    cases.push_back({Case{4096, 4096, 4096, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16}, JITMM_DTYPE_F8_E4M3,
                     JITMM_DTYPE_F8_E4M3, jitmm::ScaleMode::per_block, jitmm::ScaleMode::per_block});
    cases.push_back({Case{100, 300, 1008, 2, false, false, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_F32}, JITMM_DTYPE_F8_E4M3,
                     JITMM_DTYPE_F8_E5M2, jitmm::ScaleMode::per_block, jitmm::ScaleMode::per_block});
    // Split K (float and integer partial sums, with scales) and a 4-stage 128x256 pipeline (narrower C tile).
    Case split_bf16{128, 4096, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    split_bf16.bias = BiasKind::per_column, split_bf16.act = Activation::gelu_tanh;
    cases.push_back({split_bf16, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, jitmm::ScaleMode::none, jitmm::ScaleMode::none,
                     "sm90:128x128x6x1x4"});
    cases.push_back({Case{96, 512, 8192, 1, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32}, JITMM_DTYPE_S8,
                     JITMM_DTYPE_S8, jitmm::ScaleMode::none, jitmm::ScaleMode::none, "sm90:64x128x6x1x3"});
    cases.push_back({Case{130, 640, 4096, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_F32}, JITMM_DTYPE_F8_E4M3,
                     JITMM_DTYPE_F8_E5M2, jitmm::ScaleMode::per_row, jitmm::ScaleMode::per_column,
                     "sm90:128x128x6x1x2"});
    cases.push_back({Case{8192, 8192, 8192, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}, JITMM_DTYPE_BF16,
                     JITMM_DTYPE_BF16, jitmm::ScaleMode::none, jitmm::ScaleMode::none, "sm90:128x256x4"});
    cases.push_back({Case{2048, 11008, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}, JITMM_DTYPE_BF16,
                     JITMM_DTYPE_BF16, jitmm::ScaleMode::none, jitmm::ScaleMode::none, "sm90:128x256x3x1x4x1"});
    // Ping-pong consumers (each on a whole tile, taking turns): 16-bit both layouts, fp8 with scales, s8.
    Case pp_gelu{4096, 4096, 1024, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    pp_gelu.bias = BiasKind::per_column, pp_gelu.act = Activation::gelu_tanh;
    cases.push_back({pp_gelu, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16, jitmm::ScaleMode::none, jitmm::ScaleMode::none,
                     "sm90p:128x128x4"});
    cases.push_back({Case{1000, 300, 1000, 1, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F32}, JITMM_DTYPE_F16,
                     JITMM_DTYPE_F16, jitmm::ScaleMode::none, jitmm::ScaleMode::none, "sm90p:64x128x6"});
    cases.push_back({Case{512, 512, 512, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16}, JITMM_DTYPE_F8_E4M3,
                     JITMM_DTYPE_F8_E4M3, jitmm::ScaleMode::per_tensor, jitmm::ScaleMode::per_column,
                     "sm90p:128x128x4"});
    cases.push_back({Case{600, 700, 800, 1, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32}, JITMM_DTYPE_S8,
                     JITMM_DTYPE_S8, jitmm::ScaleMode::none, jitmm::ScaleMode::none, "sm90p:128x64x6"});

    std::vector<std::string> errors(cases.size());
    std::vector<double> ms(cases.size(), 0.0);
    for_each_index_in_parallel(cases.size(), [&](size_t i) {
        try {
            Problem p = problem_of(cases[i].c);
            p.a_type = cases[i].a;
            p.b_type = cases[i].b;
            p.a_scale = cases[i].sa;
            p.b_scale = cases[i].sb;
            std::string why;
            if (!jitmm::plan::sm90_applies(p, h100, &why)) {
                errors[i] = "not taken by the sm90 planner: " + why;
                return;
            }
            const auto plan = jitmm::plan::plan_sm90_gemm(p, h100, cases[i].recipe);
            if (!cases[i].recipe.empty() && plan.smem_bytes() > h100.smem_per_block_optin)
                errors[i] += "the recipe does not fit shared memory; ";
            const auto g = jitmm::cuda::generate_sm90_gemm(p, plan);
            const auto r = jitmm::cuda::compile_to_cubin(g.source, g.name, "sm_90a", {}, true);
            ms[i] = r.compile_ms;
            if (r.cubin.empty()) errors[i] += "no cubin; ";
            if (r.ptx.find("wgmma.mma_async") == std::string::npos) errors[i] += "no wgmma in the PTX; ";
            if (r.ptx.find("cp.async.bulk.tensor") == std::string::npos) errors[i] += "no TMA in the PTX; ";
            if (r.ptx.find("setmaxnreg") == std::string::npos) errors[i] += "no setmaxnreg in the PTX; ";
            if (p.a_scale == jitmm::ScaleMode::per_block && plan.bn != 128 && plan.bn != 64)
                errors[i] += "per-block scales on a tile wider than one scale block; ";
            if (cases[i].recipe.rfind("sm90p:", 0) == 0 && (!plan.pingpong || r.ptx.find("bar.arrive") == std::string::npos))
                errors[i] += "ping-pong recipe without the consumers' turn handoff; ";
            if (plan.split_k > 1 && r.ptx.find("atom.global.add") == std::string::npos)
                errors[i] += "split K without its arrival counter; ";
            if (plan.stage_a != (r.ptx.find("jitmm_sm90_stage_a") != std::string::npos) ||
                plan.stage_b != (r.ptx.find("jitmm_sm90_stage_b") != std::string::npos))
                errors[i] += "staging copies do not match the plan; ";
            // Through the backend too: the compile-only engine path picks the same generator.
            auto backend = jitmm::cuda::make_cuda_compile_only_backend("sm_90a");
            if (cases[i].recipe.empty() && std::string(backend->plan(p)->generator()) != "cuda_sm90_wgmma")
                errors[i] += "the backend chose another generator; ";
        } catch (const std::exception& e) {
            errors[i] += e.what();
        }
    });
    double worst = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        INFO(describe(cases[i].c) << " a=" << jitmm_dtype_name(cases[i].a) << " b=" << jitmm_dtype_name(cases[i].b)
                                  << ": " << errors[i]);
        CHECK(errors[i].empty());
        worst = std::max(worst, ms[i]);
    }
    INFO("slowest sm_90a compile: " << worst << " ms");
    CHECK(worst < 20000.0);  // the target is <= 2 s per Hopper kernel; this only catches pathologies on slow CI

    // What the Hopper path leaves to the SM80 kernels: decode, and operands it would have to stage (M/N-major
    // 4- and 1-byte types, rows TMA cannot address) with few rows on the other side; sm_100a has no wgmma.
    // Larger ones are staged: copied K-major and packed into the workspace.
    Case dec{1, 4096, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    CHECK_FALSE(jitmm::plan::sm90_applies(problem_of(dec), h100));
    dec.m = 32;  // still the gemv kernel's; one more row is the Hopper kernel's
    CHECK_FALSE(jitmm::plan::sm90_applies(problem_of(dec), h100));
    CHECK(jitmm::plan::plan_cuda_gemm(problem_of(dec), h100).family == jitmm::plan::CudaKernelFamily::gemv);
    dec.m = 33;
    CHECK(jitmm::plan::sm90_applies(problem_of(dec), h100));
    Case pad{256, 256, 256, 1, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    pad.lda_pad = 1;  // 514-byte rows
    CHECK(jitmm::plan::sm90_applies(problem_of(pad), h100));
    const auto padded = jitmm::plan::plan_sm90_gemm(problem_of(pad), h100);
    CHECK((padded.stage_a && !padded.stage_b && padded.a_k_major && !padded.b_k_major));
    Case pad_few{48, 256, 256, 1, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    pad_few.ldb_pad = 1;
    CHECK_FALSE(jitmm::plan::sm90_applies(problem_of(pad_few), h100));
    Case tf32_nn{256, 256, 256, 1, false, false, JITMM_DTYPE_F32, JITMM_DTYPE_F32};
    CHECK(jitmm::plan::sm90_applies(problem_of(tf32_nn), h100));
    const auto staged = jitmm::plan::plan_sm90_gemm(problem_of(tf32_nn), h100);
    CHECK((staged.stage_b && !staged.stage_a && staged.b_k_major));
    CHECK(staged.staged_ld(problem_of(tf32_nn)) == 256);
    CHECK(staged.workspace_bytes(problem_of(tf32_nn)) == 256 * 256 * 4);
    Case tf32_few{64, 4096, 4096, 1, false, false, JITMM_DTYPE_F32, JITMM_DTYPE_F32};
    CHECK_FALSE(jitmm::plan::sm90_applies(problem_of(tf32_few), h100));
    Case s8_tt{100, 200, 33, 1, true, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    s8_tt.lda_pad = 1, s8_tt.ldb_pad = 3;  // unaligned rows: the staged copies are packed and aligned
    const auto both = jitmm::plan::plan_sm90_gemm(problem_of(s8_tt), h100);
    CHECK((both.stage_a && both.stage_b));
    CHECK(both.staged_ld(problem_of(s8_tt)) == 48);
    CHECK(both.staged_offset(problem_of(s8_tt), false) == 4864);  // 100 x 48 bytes, rounded up to 256
    Case big{4096, 4096, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    CHECK(jitmm::plan::sm90_applies(problem_of(big), h100));
    CHECK_FALSE(jitmm::plan::sm90_applies(problem_of(big), jitmm::plan::cuda_target_from_arch("sm_100a")));
    CHECK_FALSE(jitmm::plan::sm90_applies(problem_of(big), jitmm::plan::cuda_target_from_arch("sm_80")));
    // The big square gets the 128x256 tile; a 128-row LLM shape a narrower one that fills more SMs.
    const auto pbig = jitmm::plan::plan_sm90_gemm(problem_of(big), h100);
    CHECK(pbig.bm * pbig.bn == 128 * 256);
    CHECK(pbig.ctas == 132);
    Case llm{128, 4096, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(llm), h100).cluster_m == 1);  // one tile row: nothing to pair
    CHECK(pbig.smem_bytes() <= h100.smem_per_block_optin);
    // Shared weights (B's batch stride 0): read in place at batch 0 by every batch, and a staged copy holds one.
    Case shared_nt{512, 1024, 256, 4, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    shared_nt.share_b = true;
    const auto shared_plan = jitmm::plan::plan_sm90_gemm(problem_of(shared_nt), h100);
    CHECK((shared_plan.b_shared && !shared_plan.a_shared && !shared_plan.stage_b));
    Case shared_tf32{512, 1024, 256, 4, false, false, JITMM_DTYPE_F32, JITMM_DTYPE_F32};
    shared_tf32.share_b = true;
    const auto shared_staged = jitmm::plan::plan_sm90_gemm(problem_of(shared_tf32), h100);
    CHECK((shared_staged.b_shared && shared_staged.stage_b));
    CHECK(shared_staged.staged_bytes(problem_of(shared_tf32), false) == 1024 * 256 * 4);
    // A recipe cannot split K into more ranges than it has k-blocks (K = 200 bf16: 4 of 64).
    Case short_k{256, 256, 200, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    try {
        jitmm::plan::plan_sm90_gemm(problem_of(short_k), h100, "sm90:128x128x4x1x8");
        FAIL("a split into 8 ranges of 4 k-blocks was accepted");
    } catch (const jitmm::Error& e) {
        CHECK(e.status() == JITMM_STATUS_INVALID_VALUE);
        CHECK(std::string(e.what()).find("more K ranges") != std::string::npos);
    }
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(short_k), h100, "sm90:128x128x4x1x4").split_k == 4);
    // B stored K x N comes in 64-column boxes: narrower tiles are refused (they would wait forever), a K-major
    // B takes them.
    Case narrow{8192, 8, 8192, 1, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    CHECK_THROWS_AS(jitmm::plan::plan_sm90_gemm(problem_of(narrow), h100, "sm90:64x16x12"), jitmm::Error);
    narrow.tb = true;
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(narrow), h100, "sm90:64x16x12").bn == 16);
    // A long K with B stored K x N: a fourth stage, paid for with a narrower shared C tile.
    Case long_nn{8192, 8192, 8192, 1, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    // bias+GELU over a short K: ping-pong consumers (the epilogue under the other's main loop); over a long K
    // or without the activation, the shared 128x256 tile.
    Case ffn{8192, 3072, 768, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    ffn.bias = BiasKind::per_column, ffn.act = Activation::gelu_tanh;
    const auto pffn = jitmm::plan::plan_sm90_gemm(problem_of(ffn), h100);
    CHECK(pffn.pingpong);
    CHECK(pffn.smem_bytes() <= h100.smem_per_block_optin);
    ffn.k = 4096;
    CHECK_FALSE(jitmm::plan::plan_sm90_gemm(problem_of(ffn), h100).pingpong);
    ffn.k = 768, ffn.act = Activation::none;
    CHECK_FALSE(jitmm::plan::plan_sm90_gemm(problem_of(ffn), h100).pingpong);
    // Tuning offers ping-pong recipes too, and every candidate is a recipe the planner takes.
    bool pingpong_offered = false;
    for (const std::string& c : jitmm::plan::sm90_tune_candidates(problem_of(ffn), h100)) {
        pingpong_offered = pingpong_offered || c.rfind("sm90p:", 0) == 0;
        CHECK_NOTHROW(jitmm::plan::plan_sm90_gemm(problem_of(ffn), h100, c));
        CHECK(jitmm::plan::plan_sm90_gemm(problem_of(ffn), h100, c).smem_bytes() <= h100.smem_per_block_optin);
    }
    CHECK(pingpong_offered);
    const auto pdeep = jitmm::plan::plan_sm90_gemm(problem_of(long_nn), h100);
    CHECK(pdeep.stages == 4);
    CHECK(pdeep.c_cols() < pdeep.bn);
    CHECK(pdeep.smem_bytes() <= h100.smem_per_block_optin);
    CHECK(pbig.stages == 3);
    CHECK(pbig.c_cols() == pbig.bn);
    // Ragged waves: 128x192 tiles fill one wave where 128x256 leaves 60 SMs idle (72 tiles) and 128x128 makes
    // two (144), with a 16-bit or an f32 C; not with a GELU epilogue (measured slower).
    Case ragged{384, 6144, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    const auto pragged = jitmm::plan::plan_sm90_gemm(problem_of(ragged), h100);
    CHECK((pragged.bm == 128 && pragged.bn == 192));
    ragged.out = JITMM_DTYPE_F32;
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(ragged), h100).bn == 192);
    // fp8: the single-consumer 64x192 only (its 128x192 measured poor), where 128x256 would leave 60 SMs idle.
    ragged.in = JITMM_DTYPE_F8_E4M3, ragged.out = JITMM_DTYPE_BF16;
    const auto pfp8 = jitmm::plan::plan_sm90_gemm(problem_of(ragged), h100);
    CHECK((pfp8.bm == 64 && pfp8.bn == 192));
    ragged.m = 1536;
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(ragged), h100).bm == 128);
    ragged.m = 384;
    ragged.in = JITMM_DTYPE_BF16, ragged.bias = BiasKind::per_column, ragged.act = Activation::gelu_tanh;
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(ragged), h100).bn != 192);
    // Three waves of 64x192 over two of 128x192 (768x6144x4096); under one wave the 192-wide single-consumer
    // tile keeps its table rate, so 48 rows keep more, narrower CTAs.
    Case waves{768, 6144, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    const auto pwaves = jitmm::plan::plan_sm90_gemm(problem_of(waves), h100);
    CHECK((pwaves.bm == 64 && pwaves.bn == 192));
    waves.m = 48, waves.n = 12288;
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(waves), h100).bn == 128);
    // 128x256 over at most two waves: the fourth stage (112 tiles of 256x14336x4096).
    Case few_waves{256, 14336, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    const auto pfew = jitmm::plan::plan_sm90_gemm(problem_of(few_waves), h100);
    CHECK((pfew.bn == 256 && pfew.stages == 4 && pfew.smem_bytes() <= h100.smem_per_block_optin));
}

TEST_CASE("cuda: planner picks the family and operand paths the shape calls for", "[cuda-compile]") {
    const auto h100 = jitmm::plan::cuda_target_from_arch("sm_90a");
    using jitmm::plan::CudaKernelFamily;
    using jitmm::plan::OperandPath;

    Case decode{1, 4096, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    const auto pg = jitmm::plan::plan_cuda_gemm(problem_of(decode), h100);
    CHECK(pg.family == CudaKernelFamily::gemv);
    CHECK(pg.gemv_smem_bytes(decode.m) <= h100.smem_per_block_optin);
    // An sm_86 block has ~99 KB of shared memory: the ring gets shallower, never past the limit.
    const auto a10 = jitmm::plan::cuda_target_from_arch("sm_86");
    const auto pg86 = jitmm::plan::plan_cuda_gemm(problem_of(decode), a10);
    CHECK(pg86.family == CudaKernelFamily::gemv);
    CHECK(pg86.gemv_smem_bytes(decode.m) <= a10.smem_per_block_optin);
    Case decode_odd = decode;
    decode_odd.ldb_pad = 1;  // rows off 16 bytes: element loads
    CHECK(jitmm::plan::plan_cuda_gemm(problem_of(decode_odd), h100).family == CudaKernelFamily::skinny);
    CHECK(jitmm::plan::plan_cuda_gemm(problem_of(decode), h100, false).family == CudaKernelFamily::skinny);
    decode.tb = false;  // B stored K x N: the gemv kernel's k-row variant for 16-bit types, else the tiled kernel
    const auto pnn = jitmm::plan::plan_cuda_gemm(problem_of(decode), h100);
    CHECK((pnn.family == CudaKernelFamily::gemv && pnn.gemv_n_major));
    CHECK(pnn.gemv_smem_bytes(decode.m) <= h100.smem_per_block_optin);
    CHECK_FALSE(jitmm::plan::sm90_applies(problem_of(decode), h100));
    setenv("JITMM_CUDA_TILE", "skinny:1x8x2", 1);  // the skinny kernel reads B stored N x K only
    CHECK(jitmm::plan::plan_cuda_gemm(problem_of(decode), h100).family == CudaKernelFamily::gemv);
    unsetenv("JITMM_CUDA_TILE");
    decode.in = decode.out = JITMM_DTYPE_F32;
    CHECK(jitmm::plan::plan_cuda_gemm(problem_of(decode), h100).family == CudaKernelFamily::tiled);
    // The recipe's fifth field: 16-row weight groups per CTA (B stored N x K only). Past 16 rows of A the
    // planner takes two where their rings fit (an H100 block: yes; an sm_86 block of ~99 KB: no). The groups
    // name themselves into the key, their rings fit, and the kernel compiles.
    {
        Case wide{24, 999, 1000, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
        CHECK(jitmm::plan::plan_cuda_gemm(problem_of(wide), h100).gemv_groups == 2);
        const auto on86 = jitmm::plan::plan_cuda_gemm(problem_of(wide), a10);
        CHECK((on86.gemv_groups == 1 && on86.gemv_smem_bytes(wide.m) <= a10.smem_per_block_optin));
        Case sixteen = wide;
        sixteen.m = 16;
        CHECK(jitmm::plan::plan_cuda_gemm(problem_of(sixteen), h100).gemv_groups == 1);
        setenv("JITMM_CUDA_TILE", "gemv:4x4x128x2", 1);
        const auto one = jitmm::plan::plan_cuda_gemm(problem_of(wide), h100);
        setenv("JITMM_CUDA_TILE", "gemv:4x3x256x1x2", 1);
        const auto two = jitmm::plan::plan_cuda_gemm(problem_of(wide), h100);
        CHECK(one.gemv_groups == 1);
        CHECK((two.family == CudaKernelFamily::gemv && two.gemv_groups == 2));
        CHECK(two.gemv_smem_bytes(wide.m) <= h100.smem_per_block_optin);
        jitmm::KeyWriter ka, kb;
        one.append_key(ka);
        two.append_key(kb);
        CHECK_FALSE(ka.finish() == kb.finish());
        const auto generated = jitmm::cuda::generate_sm80_gemm(problem_of(wide), two);
        CHECK(generated.source.find("G = 2, W_ROWS = 16 * G") != std::string::npos);
        CHECK(generated.grid[0] == (wide.n + 31) / 32);
        if (jitmm::cuda::nvrtc() != nullptr) {
            auto backend = jitmm::cuda::make_cuda_compile_only_backend("sm_90a");
            const jitmm::Artifact art = backend->plan(problem_of(wide))->compile();
            CHECK((art.kind == "cubin" && !art.payload.empty()));
        }
        setenv("JITMM_CUDA_TILE", "gemv:4x3x256x1x3", 1);  // three groups: refused
        CHECK_THROWS(jitmm::plan::plan_cuda_gemm(problem_of(wide), h100));
        unsetenv("JITMM_CUDA_TILE");
    }

    // Few column tiles over a long K: CTAs split K too (a workspace with a counter per tile, compiled in),
    // both layouts of B; the decode shapes with tens of column tiles stream unsplit, without a workspace.
    {
        for (const bool tb : {false, true}) {
            const Case tall{8, 8, 65536, 1, false, tb, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
            const auto split = jitmm::plan::plan_cuda_gemm(problem_of(tall), h100);
            CHECK((split.family == CudaKernelFamily::gemv && split.gemv_n_major == !tb));
            CHECK((split.gemv_ctas_k >= 8 && split.gemv_ctas_k <= h100.sm_count));
            CHECK(split.workspace_counter_bytes(problem_of(tall)) == 256);
            CHECK(split.workspace_bytes(problem_of(tall)) == 256 + split.gemv_ctas_k * 8 * split.gemv_columns() * 4);
            const auto generated = jitmm::cuda::generate_sm80_gemm(problem_of(tall), split);
            CHECK(generated.grid[0] == split.gemv_ctas_k);
            CHECK(generated.source.find("constexpr int CTAS_K = " + std::to_string(split.gemv_ctas_k)) != std::string::npos);
            if (jitmm::cuda::nvrtc() != nullptr) {
                auto backend = jitmm::cuda::make_cuda_compile_only_backend("sm_90a");
                const jitmm::Artifact art = backend->plan(problem_of(tall))->compile();
                CHECK((art.kind == "cubin" && !art.payload.empty()));
            }
            const Case decode_wide{16, 4096, 4096, 1, false, tb, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
            const auto whole = jitmm::plan::plan_cuda_gemm(problem_of(decode_wide), h100);
            CHECK((whole.gemv_ctas_k == 1 && whole.workspace_bytes(problem_of(decode_wide)) == 0));
        }
        const Case short_k{8, 8, 512, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};  // too short to split
        CHECK(jitmm::plan::plan_cuda_gemm(problem_of(short_k), h100).gemv_ctas_k == 1);
    }
    // Thin shapes whose rows break 16 bytes: element loads, latency-bound, so four warps on 32 x 32 tiles with
    // 128-byte K rows, each thread's next k-tile held in registers; aligned thin shapes keep 32 x 64.
    {
        const Case odd{17, 1023, 511, 1, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
        const auto pe = jitmm::plan::plan_cuda_gemm(problem_of(odd), h100);
        CHECK((pe.family == CudaKernelFamily::tiled && pe.a_path == OperandPath::scalar));
        CHECK((pe.bm == 32 && pe.bn == 32 && pe.threads() == 128 && pe.bk * 2 == 128));
        CHECK(jitmm::cuda::generate_sm80_gemm(problem_of(odd), pe).source.find("element loads through registers") !=
              std::string::npos);
        Case even = odd;
        even.n = 1024, even.k = 512;
        const auto pa = jitmm::plan::plan_cuda_gemm(problem_of(even), h100);
        CHECK((pa.a_path == OperandPath::cp_async && pa.bm == 32 && pa.bn == 64));
    }

    const Case big{4096, 4096, 4096, 1, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F16};
    const auto pb = jitmm::plan::plan_cuda_gemm(problem_of(big), h100);
    CHECK(pb.family == CudaKernelFamily::tiled);
    CHECK(pb.bm * pb.bn >= 128 * 128);
    CHECK(pb.a_path == OperandPath::cp_async);
    CHECK(pb.b_path == OperandPath::cp_async);  // 16-bit N-major: ldmatrix.trans
    // Whole waves of 256x128 (4096^3: 3.9 waves): 256x128 with 128-byte K rows. Fewer tiles than SMs
    // (2048^3), or a small partial last wave (2048 x 11008: 5.2 waves): 128x128, two CTAs per SM.
    CHECK((pb.bm == 256 && pb.bn == 128 && pb.bk * 2 == 128));
    const Case mid{2048, 2048, 2048, 1, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    const auto pm = jitmm::plan::plan_cuda_gemm(problem_of(mid), h100);
    CHECK((pm.bm == 128 && pm.bn == 128));
    const Case ffn{2048, 11008, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    const auto pw = jitmm::plan::plan_cuda_gemm(problem_of(ffn), h100);
    CHECK((pw.bm == 128 && pw.bn == 128 && pw.bk * 2 == 128));
    // The tuning knob gives K rows in bytes, whatever the planner's own choice was.
    setenv("JITMM_CUDA_TILE", "tiled:128x128x2x2x4x64", 1);
    const auto pk = jitmm::plan::plan_cuda_gemm(problem_of(big), h100);
    unsetenv("JITMM_CUDA_TILE");
    CHECK((pk.bm == 128 && pk.bk * 2 == 64 && pk.stages == 4));
    // No tails and 16-byte C rows: C through shared memory; a tail of N: stored from the registers.
    CHECK(pb.c_staged);
    Case ragged = big;
    ragged.n = 4000;
    CHECK_FALSE(jitmm::plan::plan_cuda_gemm(problem_of(ragged), h100).c_staged);
    const auto p86 = jitmm::plan::plan_cuda_gemm(problem_of(big), a10);
    CHECK(p86.smem_bytes(2) <= a10.smem_per_block_optin);
    CHECK(p86.bm * p86.bn <= 128 * 128);

    Case tf32 = big;
    tf32.in = tf32.out = JITMM_DTYPE_F32;
    CHECK(jitmm::plan::plan_cuda_gemm(problem_of(tf32), h100).b_path == OperandPath::vector);

    Case odd = big;
    odd.lda_pad = 1;  // lda * 2 bytes is not a multiple of 16
    const auto po = jitmm::plan::plan_cuda_gemm(problem_of(odd), h100);
    CHECK(po.a_path == OperandPath::scalar);
    CHECK(po.b_path == OperandPath::cp_async);

    // Misaligned pointers (the run-time fallback) plan element loads and single stores everywhere.
    const auto pf = jitmm::plan::plan_cuda_gemm(problem_of(big), h100, false);
    CHECK(pf.a_path == OperandPath::scalar);
    CHECK(pf.b_path == OperandPath::scalar);
    CHECK_FALSE(pf.c_pairs);

    // Recipes name themselves into the key: different plans, different bytes.
    jitmm::KeyWriter k1, k2;
    pb.append_key(k1);
    po.append_key(k2);
    CHECK_FALSE(k1.finish() == k2.finish());
}

TEST_CASE("cuda: unsupported dtype combinations and unknown arches are refused clearly", "[cuda-compile]") {
    auto backend = jitmm::cuda::make_cuda_compile_only_backend("sm_90a");
    Case c{64, 64, 64};
    Problem p = problem_of(c);
    p.b_type = JITMM_DTYPE_BF16;  // f16 x bf16
    try {
        backend->plan(p);
        FAIL("mixed f16 x bf16 was accepted");
    } catch (const jitmm::Error& e) {
        CHECK(e.status() == JITMM_STATUS_UNSUPPORTED);
        CHECK(std::string(e.what()).find("f16*bf16") != std::string::npos);
    }
    p = problem_of(c);
    p.a_type = JITMM_DTYPE_F8_E4M3;  // fp8 x f16
    CHECK_THROWS_AS(backend->plan(p), jitmm::Error);
    // fp8 with 100-byte rows: staged (copied into aligned rows) on the Hopper kernel; with that kernel turned
    // off there is no other, and the error says why.
    Case fp8_rows{128, 128, 100, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16};
    p = problem_of(fp8_rows);
    CHECK(std::string(backend->plan(p)->generator()) == "cuda_sm90_wgmma");
    setenv("JITMM_CUDA_SM90", "0", 1);
    try {
        backend->plan(p);
        FAIL("fp8 without the Hopper kernel was accepted");
    } catch (const jitmm::Error& e) {
        CHECK(e.status() == JITMM_STATUS_UNSUPPORTED);
        CHECK(std::string(e.what()).find("fp8 runs on the Hopper") != std::string::npos);
        CHECK(std::string(e.what()).find("JITMM_CUDA_SM90=0") != std::string::npos);
    }
    unsetenv("JITMM_CUDA_SM90");
    p = problem_of(c);
    p.c_type = JITMM_DTYPE_BF16;  // f16 in, bf16 out
    CHECK_THROWS_AS(backend->plan(p), jitmm::Error);
    CHECK_THROWS_AS(jitmm::cuda::make_cuda_compile_only_backend("sm_70"), jitmm::Error);
}

TEST_CASE("cuda: compile-only backend builds cubins but cannot load them", "[cuda-compile]") {
    if (jitmm::cuda::nvrtc() == nullptr) {
        WARN_SKIPPED(jitmm::cuda::nvrtc_unavailable_reason());
        return;
    }
    auto backend = jitmm::cuda::make_cuda_compile_only_backend("sm_80");
    CHECK(backend->fingerprint().find("arch=sm_80") != std::string::npos);
    auto plan = backend->plan(problem_of(Case{64, 64, 64}));
    const jitmm::Artifact art = plan->compile();
    CHECK(art.kind == "cubin");
    try {
        plan->load(art, jitmm::KernelMeta{});
        FAIL("load succeeded without a device");
    } catch (const jitmm::Error& e) {
        CHECK(e.status() == JITMM_STATUS_NO_DEVICE);
    }
}

TEST_CASE("cuda: engines for missing devices report no device", "[cuda-compile]") {
    jitmm_engine_config config;
    jitmm_engine_config_init(&config);
    config.cache_dir = "";
    jitmm_engine* engine = nullptr;
    config.device = "cuda:999";
    CHECK(jitmm_engine_create(&config, &engine) == JITMM_STATUS_NO_DEVICE);
    CHECK(std::string(jitmm_last_error_message()).find("cuda:999") != std::string::npos);
    CHECK(engine == nullptr);
    if (jitmm::cuda::driver() == nullptr) {
        // The CI case: no libcuda at all. The message says why.
        config.device = "cuda:0";
        CHECK(jitmm_engine_create(&config, &engine) == JITMM_STATUS_NO_DEVICE);
        CHECK(std::string(jitmm_last_error_message()).find(jitmm::cuda::driver_unavailable_reason()) !=
              std::string::npos);
    }
}

// ---------------------------------------------------------------------------------------------------
// GPU.

TEST_CASE("cuda: every dtype and layout, odd shapes, against float64", "[cuda]") {
    std::vector<Case> cases;
    struct Shape {
        int64_t m, n, k;
    };
    // Odd sizes in every dimension: tails of M, N and K; 1000 x 1000 x 7 has one K tile; 1 x 4097 is decode.
    const Shape shapes[] = {{33, 1000, 4097}, {1000, 33, 1000}, {1, 4097, 1000}, {7, 4097, 33},
                            {1000, 1000, 7},  {256, 512, 1024}, {16, 1024, 4096}, {4097, 7, 33}};
    size_t rot = 0;
    for (const DtypePair& d : kDtypes)
        for (int layout = 0; layout < 4; ++layout)
            for (int s = 0; s < 2; ++s) {
                const Shape& sh = shapes[rot++ % std::size(shapes)];
                Case c{sh.m, sh.n, sh.k, 1, (layout & 2) != 0, (layout & 1) != 0, d.in, d.out};
                cases.push_back(c);
            }
    run_cases(cases);
}

TEST_CASE("cuda: epilogues, alpha/beta, bias layouts and types", "[cuda]") {
    std::vector<Case> cases;
    const Activation acts[] = {Activation::none, Activation::relu, Activation::gelu_tanh, Activation::gelu_erf,
                               Activation::silu};
    size_t i = 0;
    for (const DtypePair& d : kDtypes)
        for (Activation act : acts) {
            Case c{96 + (int64_t)i % 3 * 17, 136, 200, 1, i % 2 == 1, i % 3 == 1, d.in, d.out};
            c.act = act;
            c.bias = i % 3 == 0 ? BiasKind::none : i % 3 == 1 ? BiasKind::per_column : BiasKind::per_row;
            c.bias_f32 = c.bias != BiasKind::none && i % 2 == 0;
            c.alpha = i % 4 == 0 ? 1.0f : 0.75f;
            c.beta = i % 5 == 0 ? 0.0f : i % 5 == 1 ? 1.0f : -0.5f;
            cases.push_back(c);
            ++i;
        }
    // The exact s32 path: alpha 1, beta 1, integer bias, relu.
    Case exact{64, 64, 300, 1, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    exact.beta = 1.0f, exact.bias = BiasKind::per_column, exact.act = Activation::relu;
    cases.push_back(exact);
    // Decode with every epilogue part at once.
    Case dec{16, 1000, 512, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    dec.alpha = 0.5f, dec.beta = 0.25f, dec.bias = BiasKind::per_row, dec.act = Activation::silu;
    cases.push_back(dec);
    run_cases(cases);
}

TEST_CASE("cuda: batches, broadcast B, padded and misaligned leading dims, misaligned pointers, streams", "[cuda]") {
    std::vector<Case> cases;
    for (const DtypePair& d : kDtypes) {
        Case batched{65, 80, 96, 3, false, false, d.in, d.out};
        cases.push_back(batched);
        Case shared{48, 70, 130, 4, true, true, d.in, d.out};
        shared.share_b = true;
        cases.push_back(shared);
        Case padded{100, 120, 140, 2, false, true, d.in, d.out};
        padded.lda_pad = 16, padded.ldb_pad = 32, padded.ldc_pad = 8;  // ld > width, still 16-byte aligned
        cases.push_back(padded);
        Case odd{100, 120, 140, 1, true, false, d.in, d.out};
        odd.lda_pad = 1, odd.ldb_pad = 3, odd.ldc_pad = 1;  // breaks 16-byte alignment: the element paths
        cases.push_back(odd);
        // Thin shapes with rows off 16 bytes: the tiled kernel's element loads held in registers, every layout
        // of A and B, N and K tails, batches, an epilogue.
        Case thin_odd{17, 1023, 511, 2, false, false, d.in, d.out};
        thin_odd.ldc_pad = 3;
        cases.push_back(thin_odd);
        Case thin_odd_t{30, 99, 1001, 1, true, true, d.in, d.out};
        thin_odd_t.lda_pad = 1, thin_odd_t.ldb_pad = 5;
        if (d.out != JITMM_DTYPE_S32)
            thin_odd_t.bias = BiasKind::per_column, thin_odd_t.act = Activation::gelu_tanh, thin_odd_t.beta = 0.5f;
        cases.push_back(thin_odd_t);
        Case thin_odd_nt{25, 333, 77, 1, false, true, d.in, d.out};
        thin_odd_nt.lda_pad = 3, thin_odd_nt.ldb_pad = 1;
        cases.push_back(thin_odd_nt);
        Case skinny_odd{5, 300, 257, 2, false, true, d.in, d.out};
        skinny_odd.lda_pad = 1, skinny_odd.ldb_pad = 1;  // decode with misaligned rows
        cases.push_back(skinny_odd);
        Case offset{64, 64, 64, 1, false, false, d.in, d.out};
        offset.ptr_offset = 1;  // base pointers off 16 bytes: the fallback kernel
        cases.push_back(offset);
        Case stream{200, 300, 400, 2, false, true, d.in, d.out};
        stream.own_stream = true;
        cases.push_back(stream);
        Case decode_stream{1, 512, 1024, 1, false, true, d.in, d.out};
        decode_stream.own_stream = true;
        decode_stream.ptr_offset = 1;
        cases.push_back(decode_stream);
    }
    run_cases(cases);
}

namespace {

struct GemvShape {
    int64_t m, n, k, batch;
};

// The gemv kernel's cases: every shape with every dtype pair, B stored N x K (b_n_by_k) or K x N. Rows of A
// and B padded to whole 16 bytes where the width alone would not be, and sometimes beyond; ldc > N every other
// case; an epilogue with every part every fifth; a non-default stream every seventh.
std::vector<Case> gemv_cases(const std::vector<GemvShape>& shapes, const std::vector<DtypePair>& dtypes, bool b_n_by_k) {
    std::vector<Case> cases;
    size_t i = 0;
    for (const DtypePair& d : dtypes)
        for (const GemvShape& sh : shapes) {
            Case c{sh.m, sh.n, sh.k, sh.batch, false, b_n_by_k, d.in, d.out};
            const int64_t per16 = 16 / static_cast<int64_t>(jitmm::dtype_size(d.in));
            auto fill = [&](int64_t width) { return (per16 - width % per16) % per16; };
            c.lda_pad = fill(sh.k) + (i % 3 == 0 ? per16 : 0);
            c.ldb_pad = fill(b_n_by_k ? sh.k : sh.n) + (i % 4 == 1 ? 2 * per16 : 0);
            c.ldc_pad = i % 2;
            if (i % 5 == 2) {
                c.bias = i % 2 ? BiasKind::per_column : BiasKind::per_row;
                c.act = i % 3 ? Activation::gelu_tanh : Activation::silu;
                c.alpha = 0.5f, c.beta = -1.0f;
            }
            c.own_stream = i % 7 == 3;
            c.want_generator = "cuda_sm80_gemv";
            cases.push_back(c);
            ++i;
        }
    return cases;
}

}  // namespace

// The decode kernel (M <= 32, B stored N x K with 16-byte rows): weight rows through a cp.async ring. Every
// input type, M across one to four 8-row tiles of A, N and K tails (K * element bytes not a multiple of the
// 128-256-byte segments, nor of 16 with padded rows), fewer segments than warps, batches, ld > width,
// every epilogue part, a non-default stream.
TEST_CASE("cuda: decode gemv kernel, tails of M, N and K, batches, epilogues", "[cuda]") {
    const std::vector<GemvShape> shapes = {{1, 4096, 4096, 1}, {3, 1000, 1001, 1}, {8, 33, 2048, 2},
                                           {9, 515, 777, 1},   {16, 1024, 4104, 1}, {16, 17, 40, 3},
                                           {1, 7, 8, 1},       {12, 4097, 11008, 1}, {17, 300, 500, 1},
                                           {32, 1280, 8192, 1}, {24, 999, 1000, 2}, {31, 512, 2056, 1}};
    run_cases(gemv_cases(shapes, std::vector<DtypePair>(std::begin(kDtypes), std::end(kDtypes)), true));
}

// Two 16-row weight groups a CTA (the gemv recipe's fifth field), one copy of the A rows for both: the same
// tails of M, N (N not a multiple of 32 columns: the second group partly or wholly past N) and K, batches,
// ld > width, epilogues and streams as the default kernel.
TEST_CASE("cuda: decode gemv kernel with two weight groups per CTA", "[cuda]") {
    const std::vector<GemvShape> shapes = {{1, 4096, 4096, 1}, {3, 1000, 1001, 1}, {8, 33, 2048, 2},
                                           {9, 515, 777, 1},   {16, 1024, 4104, 1}, {16, 17, 40, 3},
                                           {12, 4097, 11008, 1}, {32, 1280, 8192, 1}, {24, 999, 1000, 2}};
    setenv("JITMM_CUDA_TILE", "gemv:4x3x256x1x2", 1);
    run_cases(gemv_cases(shapes, std::vector<DtypePair>(std::begin(kDtypes), std::end(kDtypes)), true));
    unsetenv("JITMM_CUDA_TILE");
}

// Few column tiles over a long K: the CTAs of a column tile split K as well as their warps, and the last
// to arrive adds the others' partial sums from the workspace. Both layouts of B, tails of M, N and K, M past
// 16 (two weight groups), batches (a counter per tile and batch), epilogues; the planner's split and a
// forced one (the recipe's sixth field) on a shape it would not split.
TEST_CASE("cuda: decode gemv kernel with K split over CTAs", "[cuda]") {
    const std::vector<DtypePair> dtypes(std::begin(kDtypes), std::end(kDtypes));
    run_cases(gemv_cases({{8, 8, 65536, 1}, {1, 16, 40000, 1}, {5, 40, 30001, 2}, {24, 20, 20000, 1}}, dtypes, true));
    const std::vector<DtypePair> sixteen = {{JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}, {JITMM_DTYPE_F16, JITMM_DTYPE_F32}};
    run_cases(gemv_cases({{8, 8, 65536, 1}, {3, 70, 20001, 2}, {16, 100, 33333, 1}}, sixteen, false));
    setenv("JITMM_CUDA_TILE", "gemv:4x4x256x2x1x3", 1);
    run_cases(gemv_cases({{9, 515, 777, 1}, {3, 1000, 1001, 2}}, sixteen, true));
    unsetenv("JITMM_CUDA_TILE");
}

// Kernels run back to back where each one's input is the previous one's output, as a model's layers do: on
// sm_90 they are launched before the previous kernel has ended (griddepcontrol), so a kernel that read A or
// wrote C too early would see the previous layer's input or overwrite what it still reads. B is a signed
// permutation (each output row is one input row, maybe negated), so every step is exact and the chain's end
// is known exactly; the two buffers alternate as A and C (write after read and read after write). 1 and 16
// rows run the decode kernel, 128 and 300 the tiled one (the Hopper kernel on sm_90).
TEST_CASE("cuda: chained kernels on one stream see each other's results", "[cuda]") {
    const jitmm::cuda::DriverApi* drv = jitmm::cuda::driver();
    if (drv == nullptr) {
        WARN_SKIPPED("no CUDA device: " << jitmm::cuda::driver_unavailable_reason());
        return;
    }
    for (const int64_t rows : {int64_t{1}, int64_t{16}, int64_t{128}, int64_t{300}}) {
        INFO("rows " << rows);
        constexpr int64_t kWidth = 4096, kSteps = 24;
        Case c{rows, kWidth, kWidth, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
        const jitmm_matmul_desc d = desc_of(c);
        jitmm_engine* engine = make_gpu_engine_or_skip();
        if (engine == nullptr) return;
        jitmm_kernel* kernel = nullptr;
        REQUIRE(jitmm_kernel_create(engine, &d, &kernel) == JITMM_STATUS_SUCCESS);
        jitmm_kernel_info info;
        info.struct_size = sizeof info;
        REQUIRE(jitmm_kernel_get_info(kernel, &info) == JITMM_STATUS_SUCCESS);
        if (rows <= 16) CHECK(std::string(info.generator) == "cuda_sm80_gemv");

        std::mt19937 rng(123);
        std::vector<int64_t> source(kWidth);  // output column n takes input column source[n]
        std::iota(source.begin(), source.end(), int64_t{0});
        std::shuffle(source.begin(), source.end(), rng);
        std::vector<uint16_t> b(kWidth * kWidth, 0), x(rows * kWidth);
        std::vector<int> sign(kWidth);
        for (int64_t n = 0; n < kWidth; ++n) {
            sign[n] = rng() % 2 ? 1 : -1;
            b[n * kWidth + source[n]] = sign[n] > 0 ? 0x3f80 : 0xbf80;  // +-1 in bf16
        }
        for (auto& v : x) v = static_cast<uint16_t>(0x3c00 + rng() % 0x0800);  // 2^-7 .. 2^9, never zero
        std::vector<uint16_t> expect = x;
        for (int64_t step = 0; step < kSteps; ++step) {
            std::vector<uint16_t> next(expect.size());
            for (int64_t m = 0; m < rows; ++m)
                for (int64_t n = 0; n < kWidth; ++n) {
                    const uint16_t v = expect[m * kWidth + source[n]];
                    next[m * kWidth + n] = sign[n] > 0 ? v : static_cast<uint16_t>(v ^ 0x8000);
                }
            expect.swap(next);
        }

        TestDevice dev(*drv);
        const size_t xbytes = x.size() * 2;
        DeviceBuffer db(*drv, b.size() * 2), dx(*drv, xbytes), dy(*drv, xbytes);
        REQUIRE(drv->cuMemcpyHtoD(db.ptr(), b.data(), b.size() * 2) == CUDA_SUCCESS);
        REQUIRE(drv->cuMemcpyHtoD(dx.ptr(), x.data(), xbytes) == CUDA_SUCCESS);
        REQUIRE(drv->cuMemsetD8(dy.ptr(), 0xff, xbytes) == CUDA_SUCCESS);  // poison (NaN)
        REQUIRE(drv->cuCtxSynchronize() == CUDA_SUCCESS);  // (the legacy stream's work, before a non-blocking one)
        CUstream stream = nullptr;
        REQUIRE(drv->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
        for (int64_t step = 0; step < kSteps; ++step) {
            jitmm_matmul_args args;
            jitmm_matmul_args_init(&args);
            args.a = step % 2 ? dy.at(0) : dx.at(0);
            args.b = db.at(0);
            args.c = step % 2 ? dx.at(0) : dy.at(0);
            args.stream = stream;
            REQUIRE(jitmm_kernel_run(kernel, &args) == JITMM_STATUS_SUCCESS);
        }
        REQUIRE(drv->cuStreamSynchronize(stream) == CUDA_SUCCESS);
        std::vector<uint16_t> got(x.size());
        REQUIRE(drv->cuMemcpyDtoH(got.data(), kSteps % 2 ? dy.ptr() : dx.ptr(), xbytes) == CUDA_SUCCESS);
        int64_t wrong = 0;
        for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != expect[i];
        CHECK(wrong == 0);
        drv->cuStreamDestroy(stream);
        jitmm_kernel_release(kernel);
        jitmm_engine_destroy(engine);
    }
}

// The SM80 family's large-shape recipes (256x128 with 8 warps and 128-byte K rows, 128x128 with 128-byte and
// with 64-byte K rows), forced by the tuning knob onto shapes with tails of M, N and K in every operand
// layout, every input type, batches, padded rows and an epilogue. With JITMM_CUDA_SM90=0 so that a Hopper GPU
// runs them too (it would take the wgmma kernel); on an SM80-family GPU that is the default anyway.
TEST_CASE("cuda: SM80 large-shape tile recipes on tails, layouts and types", "[cuda]") {
    const char* recipes[] = {"tiled:256x128x4x2x3x128", "tiled:128x128x2x2x3x128x2", "tiled:128x128x2x2x4x64x2"};
    struct Shape {
        int64_t m, n, k, batch;
    };
    // The last two have no M/N tails: with 16-byte C rows (even cases) C goes through shared memory.
    const Shape shapes[] = {{300, 270, 333, 1}, {257, 129, 1000, 2}, {513, 300, 700, 1},
                            {64, 520, 4104, 1},  {512, 256, 200, 1},  {256, 384, 96, 2}};
    setenv("JITMM_CUDA_SM90", "0", 1);
    for (const char* recipe : recipes) {
        INFO("recipe " << recipe);
        setenv("JITMM_CUDA_TILE", recipe, 1);
        std::vector<Case> cases;
        size_t i = 0;
        for (const DtypePair& d : kDtypes)
            for (int layout = 0; layout < 4; ++layout, ++i) {
                const Shape& sh = shapes[i % std::size(shapes)];
                Case c{sh.m, sh.n, sh.k, sh.batch, (layout & 2) != 0, (layout & 1) != 0, d.in, d.out};
                c.lda_pad = i % 3 == 1 ? 16 : 0;  // rows still 16-byte aligned: the cp.async path
                c.ldc_pad = i % 2;
                if (i % 5 == 3) {
                    c.bias = BiasKind::per_column;
                    c.act = Activation::gelu_tanh;
                    c.alpha = 0.5f, c.beta = -1.0f;
                }
                cases.push_back(c);
            }
        run_cases(cases);
    }
    unsetenv("JITMM_CUDA_TILE");
    unsetenv("JITMM_CUDA_SM90");
}

// The decode kernel's variant for a 16-bit B stored K x N (64 columns a CTA, k-rows through the ring,
// ldmatrix.trans): both 16-bit types and outputs, M across one and two 8-row tiles, N and K tails (N not a
// multiple of 8 columns: a partial last chunk per row), fewer stages than warps, batches, ld > width,
// epilogues, a non-default stream.
TEST_CASE("cuda: decode gemv kernel with B stored K x N", "[cuda]") {
    const std::vector<GemvShape> shapes = {{1, 4096, 4096, 1}, {3, 1000, 1001, 1}, {8, 33, 2048, 2},
                                           {9, 515, 777, 1},   {16, 1024, 4104, 1}, {16, 17, 40, 3},
                                           {1, 7, 8, 1},       {12, 4097, 1000, 1}, {2, 70, 5000, 1}};
    const std::vector<DtypePair> sixteen = {{JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}, {JITMM_DTYPE_F16, JITMM_DTYPE_F16},
                                            {JITMM_DTYPE_BF16, JITMM_DTYPE_F32}, {JITMM_DTYPE_F16, JITMM_DTYPE_F32}};
    run_cases(gemv_cases(shapes, sixteen, false));
}

// The Hopper kernel (wgmma + TMA) on an sm_90 device: every dtype it takes, all four layouts for the 16-bit
// types, tails in M, N and K, batches, ld > width, every epilogue part, fp8 with each scale granularity, and
// misaligned pointers (which fall back to the SM80 kernel, or are refused for fp8).
TEST_CASE("cuda sm90: wgmma kernels against float64", "[cuda]") {
    constexpr const char* kSm90 = "cuda_sm90_wgmma";
    std::vector<Case> cases;
    const DtypePair sixteen[] = {{JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}, {JITMM_DTYPE_F16, JITMM_DTYPE_F16},
                                 {JITMM_DTYPE_BF16, JITMM_DTYPE_F32}, {JITMM_DTYPE_F16, JITMM_DTYPE_F32}};
    int i = 0;
    for (const DtypePair& d : sixteen)
        for (int layout = 0; layout < 4; ++layout, ++i) {
            // Odd M, N not a multiple of the tile, K with a partial k-block (4000 = 62.5 blocks of 64).
            Case c{1000 + 8 * i, 328 + 64 * (i % 3), 4000 - 16 * (i % 2), 1, (layout & 2) != 0, (layout & 1) != 0,
                   d.in, d.out};
            c.want_generator = kSm90;
            cases.push_back(c);
        }
    // Big enough for the 128x256 tile and many persistent rounds, with every epilogue part.
    Case big{2048, 2048, 1024, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    big.alpha = 0.5f, big.beta = -0.5f, big.bias = BiasKind::per_column, big.act = Activation::gelu_tanh;
    big.want_generator = kSm90;
    cases.push_back(big);
    Case batched{300, 520, 264, 3, true, false, JITMM_DTYPE_F16, JITMM_DTYPE_F32};
    batched.bias = BiasKind::per_row, batched.bias_f32 = true, batched.act = Activation::silu;
    batched.lda_pad = 4, batched.ldb_pad = 16, batched.ldc_pad = 3;  // ld > width, 16-byte aligned rows
    batched.want_generator = kSm90;
    cases.push_back(batched);
    Case erf{64, 1000, 72, 2, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    erf.act = Activation::gelu_erf, erf.beta = 1.0f, erf.bias = BiasKind::per_column;
    erf.want_generator = kSm90;
    cases.push_back(erf);
    // tf32 and s8: K-major operands only.
    Case tf32{777, 1000, 1000, 1, false, true, JITMM_DTYPE_F32, JITMM_DTYPE_F32};
    tf32.want_generator = kSm90;
    cases.push_back(tf32);
    Case s8{513, 1024, 4096, 2, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    s8.want_generator = kSm90;
    cases.push_back(s8);
    Case s8_exact{100, 200, 4000, 1, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    s8_exact.beta = 1.0f, s8_exact.bias = BiasKind::per_column, s8_exact.act = Activation::relu;
    s8_exact.want_generator = kSm90;
    cases.push_back(s8_exact);
    // fp8: e4m3 and e5m2 mixes, every output type, per-tensor / per-row / per-column scales.
    const jitmm::ScaleMode a_modes[] = {jitmm::ScaleMode::none, jitmm::ScaleMode::per_tensor, jitmm::ScaleMode::per_row};
    const jitmm::ScaleMode b_modes[] = {jitmm::ScaleMode::per_tensor, jitmm::ScaleMode::per_column,
                                        jitmm::ScaleMode::none};
    const jitmm_dtype outs[] = {JITMM_DTYPE_BF16, JITMM_DTYPE_F32, JITMM_DTYPE_F16};
    for (int j = 0; j < 3; ++j) {
        Case f{130 + 100 * j, 512 - 48 * j, 1024 + 160 * j, 1 + j % 2, false, true,
               j == 2 ? JITMM_DTYPE_F8_E5M2 : JITMM_DTYPE_F8_E4M3, outs[j]};
        f.in_b = j == 1 ? JITMM_DTYPE_F8_E5M2 : JITMM_DTYPE_F8_E4M3;
        f.a_scale = a_modes[j], f.b_scale = b_modes[j];
        f.bias = j == 1 ? BiasKind::per_column : BiasKind::none, f.act = j == 1 ? Activation::relu : Activation::none;
        f.want_generator = kSm90;
        cases.push_back(f);
    }
    // Staged operands (tf32, s8, fp8 stored M/N-major: copied K-major first): odd shapes, every layout,
    // unaligned leading dimensions, batches with a broadcast B, fp8 decode with B stored K x N, the
    // workspace from the caller.
    Case tf32_nn{1000, 999, 780, 1, false, false, JITMM_DTYPE_F32, JITMM_DTYPE_F32};  // ldb 999: staged
    tf32_nn.beta = 0.5f, tf32_nn.bias = BiasKind::per_column, tf32_nn.act = Activation::relu;
    tf32_nn.want_generator = kSm90;
    cases.push_back(tf32_nn);
    Case tf32_tt{257, 130, 65, 2, true, false, JITMM_DTYPE_F32, JITMM_DTYPE_F32};
    tf32_tt.want_generator = kSm90;
    tf32_tt.caller_workspace = true;
    cases.push_back(tf32_tt);
    Case s8_tn{300, 4096, 512, 1, true, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    s8_tn.want_generator = kSm90;
    cases.push_back(s8_tn);
    Case s8_tt{300, 200, 100, 3, true, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    s8_tt.lda_pad = 1, s8_tt.ldb_pad = 3, s8_tt.beta = 1.0f;
    s8_tt.want_generator = kSm90;
    cases.push_back(s8_tt);
    Case s8_shared{130, 70, 96, 2, false, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    s8_shared.share_b = true;
    s8_shared.want_generator = kSm90;
    cases.push_back(s8_shared);
    Case fp8_decode{16, 1024, 2048, 1, false, false, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16};
    fp8_decode.a_scale = jitmm::ScaleMode::per_tensor, fp8_decode.b_scale = jitmm::ScaleMode::per_column;
    fp8_decode.want_generator = kSm90;
    if (sm90_device()) cases.push_back(fp8_decode);
    Case fp8_tn{130, 260, 304, 1, true, true, JITMM_DTYPE_F8_E5M2, JITMM_DTYPE_F32};
    fp8_tn.in_b = JITMM_DTYPE_F8_E4M3;
    fp8_tn.bias = BiasKind::per_row, fp8_tn.act = Activation::gelu_erf;
    fp8_tn.want_generator = kSm90;
    if (sm90_device()) cases.push_back(fp8_tn);
    // Per-block fp8 scales (A 1x128, B 128x128): a partial last K block, 128- and 64-wide tiles, batches with
    // the epilogue, B stored K x N (staged).
    Case blk{256, 384, 1008, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16};  // 7 blocks and 112
    blk.a_scale = blk.b_scale = jitmm::ScaleMode::per_block;
    blk.want_generator = kSm90;
    if (sm90_device()) cases.push_back(blk);
    Case blk_batch{130, 200, 512, 2, false, true, JITMM_DTYPE_F8_E5M2, JITMM_DTYPE_F32};
    blk_batch.in_b = JITMM_DTYPE_F8_E4M3;
    blk_batch.a_scale = blk_batch.b_scale = jitmm::ScaleMode::per_block;
    blk_batch.alpha = 0.5f, blk_batch.beta = 1.0f, blk_batch.bias = BiasKind::per_column, blk_batch.act = Activation::gelu_tanh;
    blk_batch.want_generator = kSm90;
    if (sm90_device()) cases.push_back(blk_batch);
    Case blk_nn{200, 256, 640, 1, false, false, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_F16};
    blk_nn.a_scale = blk_nn.b_scale = jitmm::ScaleMode::per_block;
    blk_nn.want_generator = kSm90;
    if (sm90_device()) cases.push_back(blk_nn);
    // 16-bit operands with rows TMA cannot address (staged copies, K-major and transposed) and a broadcast B.
    Case bf16_rows{300, 520, 333, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};  // 666-byte rows of A and B
    bf16_rows.bias = BiasKind::per_column, bf16_rows.act = Activation::silu;
    bf16_rows.want_generator = kSm90;
    cases.push_back(bf16_rows);
    Case f16_nn_pad{257, 200, 128, 2, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F32};
    f16_nn_pad.ldb_pad = 1, f16_nn_pad.share_b = true;  // B stored K x N, 201-element rows, one for both batches
    f16_nn_pad.want_generator = kSm90;
    cases.push_back(f16_nn_pad);
    // Shared weights read in place (B's batch stride 0, K-major) with a batched epilogue.
    Case shared_w{300, 640, 384, 3, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_F32};
    shared_w.share_b = true, shared_w.bias = BiasKind::per_column, shared_w.act = Activation::relu;
    shared_w.want_generator = kSm90;
    cases.push_back(shared_w);
    // Misaligned base pointers: the SM80 fallback for 16-bit types.
    Case offset{256, 256, 256, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    offset.ptr_offset = 1;
    cases.push_back(offset);
    Case stream{512, 768, 512, 2, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F16};
    stream.own_stream = true;
    stream.want_generator = kSm90;
    cases.push_back(stream);
    run_cases(cases);
}

// Split K (each K range's partial sums in a workspace slot, the tile's last range adds them in range order
// and runs the epilogue): forced with the knob here on tails, batches, every epilogue part, s8 (exact sums)
// and fp8 with scales; the workspace comes from the stream-ordered pool or from the caller.
TEST_CASE("cuda sm90: split K against float64", "[cuda]") {
    constexpr const char* kSm90 = "cuda_sm90_wgmma";
    // The cost model splits a few-tile shape when allowed (not by default), and tuning offers the splits.
    Case llm{128, 4096, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    const auto h100 = jitmm::plan::cuda_target_from_arch("sm_90a");
    const auto split_plan = jitmm::plan::plan_sm90_gemm(problem_of(llm), h100, "", true);
    CHECK(split_plan.split_k > 1);
    CHECK(split_plan.workspace_bytes(problem_of(llm)) >= int64_t{4} * 128 * 4096 * split_plan.split_k);
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(llm), h100).split_k == 1);
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(llm), h100).workspace_bytes(problem_of(llm)) == 0);
    bool offered = false;
    for (const std::string& c : jitmm::plan::sm90_tune_candidates(problem_of(llm), h100))
        offered = offered || std::count(c.begin(), c.end(), 'x') == 4;
    CHECK(offered);
    // By default only where even 64 x 64 tiles leave three quarters of the SMs idle over at least 64 k-blocks.
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(Case{64, 64, 4096, 1, false, false, JITMM_DTYPE_BF16,
                                                      JITMM_DTYPE_BF16}), h100).split_k > 1);
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(Case{49, 512, 4608, 1, false, false, JITMM_DTYPE_BF16,
                                                      JITMM_DTYPE_BF16}), h100).split_k > 1);
    CHECK(jitmm::plan::plan_sm90_gemm(problem_of(Case{196, 256, 2304, 1, false, false, JITMM_DTYPE_BF16,
                                                      JITMM_DTYPE_BF16}), h100).split_k == 1);
    {
        // The planner's own splits, run: few tiles, tails, an epilogue, the caller's workspace.
        std::vector<Case> planned;
        Case square{64, 64, 4096, 1, false, false, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
        square.want_generator = kSm90;
        square.run_twice = true;
        planned.push_back(square);
        Case few_rows{49, 512, 4608, 1, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F32};
        few_rows.beta = 0.5f, few_rows.bias = BiasKind::per_column, few_rows.act = Activation::gelu_erf;
        few_rows.want_generator = kSm90;
        few_rows.caller_workspace = true;
        planned.push_back(few_rows);
        Case tails_t{70, 100, 5000, 2, true, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
        tails_t.lda_pad = 2, tails_t.ldb_pad = 4;
        tails_t.want_generator = kSm90;
        planned.push_back(tails_t);
        run_cases(planned);
    }
    std::vector<Case> cases;
    Case tails{100, 1000, 3000, 2, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    tails.alpha = 0.5f, tails.beta = 1.0f, tails.bias = BiasKind::per_column, tails.act = Activation::gelu_tanh;
    tails.want_generator = kSm90;
    tails.run_twice = true;
    cases.push_back(tails);
    Case odd_n{77, 333, 2048, 1, true, false, JITMM_DTYPE_F16, JITMM_DTYPE_F32};
    odd_n.bias = BiasKind::per_row, odd_n.bias_f32 = true, odd_n.act = Activation::silu;
    odd_n.lda_pad = 3, odd_n.ldb_pad = 3;  // 80- and 336-element rows: 16-byte aligned
    odd_n.want_generator = kSm90;
    odd_n.caller_workspace = true;
    odd_n.run_twice = true;
    cases.push_back(odd_n);
    Case s8{96, 512, 8192, 1, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    s8.beta = 1.0f, s8.bias = BiasKind::per_column, s8.act = Activation::relu;
    s8.want_generator = kSm90;
    cases.push_back(s8);
    Case fp8{130, 640, 4096, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16};
    fp8.in_b = JITMM_DTYPE_F8_E5M2;
    fp8.a_scale = jitmm::ScaleMode::per_row, fp8.b_scale = jitmm::ScaleMode::per_column;
    fp8.want_generator = kSm90;
    if (sm90_device()) cases.push_back(fp8);
    Case fp8_blocks{128, 512, 3008, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16};
    fp8_blocks.a_scale = fp8_blocks.b_scale = jitmm::ScaleMode::per_block;
    fp8_blocks.want_generator = kSm90;
    fp8_blocks.run_twice = true;
    if (sm90_device()) cases.push_back(fp8_blocks);
    setenv("JITMM_CUDA_TILE", "sm90:128x128x6x1x3", 1);
    run_cases(cases);
    unsetenv("JITMM_CUDA_TILE");

    // Only the last partial wave split (whole tiles first, then the tail's K ranges on every SM): 160 tiles
    // of 128x128 over 132 SMs leave 28, split 4 ways; with batches, tails and the epilogue. The planner,
    // allowed to split, takes it for 2048x11008x4096 (688 tiles of 128x256: 5 waves and 28).
    const auto tail_plan = jitmm::plan::plan_sm90_gemm(
        problem_of(Case{2048, 11008, 4096, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}), h100, "", true);
    CHECK(tail_plan.split_k > 1);
    CHECK(tail_plan.split_tiles == 688 % 132);
    std::vector<Case> tail_cases;
    Case tail_bf16{600, 2000, 1000, 2, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    tail_bf16.beta = 1.0f, tail_bf16.bias = BiasKind::per_column, tail_bf16.act = Activation::gelu_tanh;
    tail_bf16.want_generator = kSm90;
    tail_bf16.run_twice = true;
    tail_bf16.caller_workspace = true;
    tail_cases.push_back(tail_bf16);
    Case tail_s8{1270, 2040, 640, 1, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    tail_s8.want_generator = kSm90;
    tail_cases.push_back(tail_s8);
    Case tail_tf32{1280, 2048, 768, 1, false, false, JITMM_DTYPE_F32, JITMM_DTYPE_F32};  // staged B as well
    tail_tf32.want_generator = kSm90;
    tail_cases.push_back(tail_tf32);
    setenv("JITMM_CUDA_TILE", "sm90:128x128x6x1x4x1", 1);
    run_cases(tail_cases);
    unsetenv("JITMM_CUDA_TILE");
}

// Ping-pong consumers (each on a whole tile, the two taking turns so that one's epilogue runs under the
// other's main loop), forced with the tuning knob: tails in every dimension, both 16-bit layouts, batches,
// epilogues, s8, fp8 with scales, a staged tf32 operand, CTAs with one unit and with an odd number of units
// (the turn handoff), run twice for identical bytes.
TEST_CASE("cuda sm90: ping-pong consumers against float64", "[cuda]") {
    constexpr const char* kSm90 = "cuda_sm90_wgmma";
    std::vector<Case> cases;
    Case nt{3900, 2200, 200, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    nt.bias = BiasKind::per_column, nt.beta = 0.5f, nt.act = Activation::gelu_tanh;
    cases.push_back(nt);
    Case nn{4000, 2304, 136, 1, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F32};
    nn.bias = BiasKind::per_row, nn.bias_f32 = true, nn.act = Activation::silu;
    cases.push_back(nn);
    Case tn{2048, 4096, 72, 2, true, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32};
    tn.act = Activation::relu, tn.alpha = 0.75f;
    cases.push_back(tn);
    Case few{130, 600, 1000, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};  // 10 tiles: one unit per CTA
    cases.push_back(few);
    Case s8{1000, 1000, 1000, 1, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    s8.beta = 1.0f, s8.bias = BiasKind::per_column;
    cases.push_back(s8);
    Case fp8{777, 333, 1600, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16};
    fp8.in_b = JITMM_DTYPE_F8_E5M2;
    fp8.a_scale = jitmm::ScaleMode::per_row, fp8.b_scale = jitmm::ScaleMode::per_column;
    if (sm90_device()) cases.push_back(fp8);
    Case tf32{1280, 2048, 768, 1, false, false, JITMM_DTYPE_F32, JITMM_DTYPE_F32};  // staged B
    cases.push_back(tf32);
    for (Case& c : cases) c.want_generator = kSm90, c.run_twice = true;
    setenv("JITMM_CUDA_TILE", "sm90p:128x128x4", 1);
    run_cases(cases);
    unsetenv("JITMM_CUDA_TILE");
    // 64-row tiles: one slice per consumer.
    std::vector<Case> narrow{Case{1000, 3000, 500, 3, false, true, JITMM_DTYPE_F16, JITMM_DTYPE_F16}};
    narrow[0].want_generator = kSm90, narrow[0].run_twice = true;
    setenv("JITMM_CUDA_TILE", "sm90p:64x128x8", 1);
    run_cases(narrow);
    unsetenv("JITMM_CUDA_TILE");
}

// CTA pairs sharing B (cluster 2x1, multicast TMA): not the planner's choice yet (slower), so forced with the
// tuning knob; they must be right all the same.
TEST_CASE("cuda sm90: CTA pairs sharing B against float64", "[cuda]") {
    constexpr const char* kSm90 = "cuda_sm90_wgmma";
    std::vector<Case> cases;
    // An odd number of tile rows (the last pair's second
    // tile lies past M), K-major and N-major B, a partial last tile column.
    Case pair_nt{3900, 2200, 200, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    pair_nt.bias = BiasKind::per_column, pair_nt.beta = 0.5f;
    pair_nt.want_generator = kSm90;
    cases.push_back(pair_nt);
    Case pair_nn{4000, 2304, 136, 1, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F32};
    pair_nn.want_generator = kSm90;
    cases.push_back(pair_nn);
    Case pair_tn{2048, 4096, 72, 2, true, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32};
    pair_tn.act = Activation::relu;
    pair_tn.want_generator = kSm90;
    cases.push_back(pair_tn);
    setenv("JITMM_CUDA_TILE", "sm90:128x256x3x2", 1);
    run_cases(cases);
    unsetenv("JITMM_CUDA_TILE");
}

// A partial last tile row (column) reads only the rows of A (B) inside the matrix: K-major operands through a
// second tensor map whose box is exactly the tail's height, M/N-major ones by skipping 64-element boxes past
// the edge; the stage rows left stale reach only C rows and columns that are never stored. Tails of one row
// and column, of 63, and of a whole 64-row half, in every layout, with batches, epilogues, s8 and fp8, on
// 64-, 128- and 192-wide tiles.
TEST_CASE("cuda sm90: partial last tiles read only what lies inside the operands", "[cuda]") {
    constexpr const char* kSm90 = "cuda_sm90_wgmma";
    std::vector<Case> cases;
    for (int layout = 0; layout < 4; ++layout) {
        Case one{129, 193, 200, 1 + layout % 2, (layout & 2) != 0, (layout & 1) != 0, JITMM_DTYPE_BF16,
                 layout < 2 ? JITMM_DTYPE_BF16 : JITMM_DTYPE_F32};
        one.beta = 0.5f, one.bias = BiasKind::per_column, one.act = Activation::gelu_tanh;
        cases.push_back(one);
        Case half{192, 127, 320, 1, (layout & 2) != 0, (layout & 1) != 0, JITMM_DTYPE_F16, JITMM_DTYPE_F16};
        half.bias = BiasKind::per_row;
        cases.push_back(half);
    }
    Case s8{191, 65, 512, 2, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32};
    s8.beta = 1.0f;
    cases.push_back(s8);
    Case fp8{130, 260, 256, 1, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16};
    fp8.a_scale = jitmm::ScaleMode::per_row, fp8.b_scale = jitmm::ScaleMode::per_column;
    if (sm90_device()) cases.push_back(fp8);
    for (Case& c : cases) c.want_generator = kSm90, c.run_twice = true;
    setenv("JITMM_CUDA_TILE", "sm90:128x64x8", 1);
    run_cases(cases);
    // The same tails split along K, and with ping-pong consumers.
    setenv("JITMM_CUDA_TILE", "sm90:128x64x8x1x2", 1);
    run_cases(cases);
    setenv("JITMM_CUDA_TILE", "sm90p:128x64x6", 1);
    run_cases(cases);
    // 192-wide tiles (three 64-column boxes of an N-major B, C stored in one or two passes).
    setenv("JITMM_CUDA_TILE", "sm90:128x192x4", 1);
    run_cases(cases);
    setenv("JITMM_CUDA_TILE", "sm90:64x192x6", 1);
    run_cases(cases);
    unsetenv("JITMM_CUDA_TILE");
}

// jitmm_tune on the GPU: every candidate timed, the winner persisted beside the kernel cache, and a later
// engine on the same folder plans the problem with it (and computes it right).
TEST_CASE("cuda sm90: jitmm_tune persists the fastest recipe for later engines", "[cuda]") {
    const jitmm::cuda::DriverApi* drv = jitmm::cuda::driver();
    if (drv == nullptr || !sm90_device()) {
        WARN_SKIPPED("needs an sm_90 GPU" << (drv ? "" : std::string(": ") + jitmm::cuda::driver_unavailable_reason()));
        return;
    }
    char dir_name[] = "/tmp/jitmm-tune-gpu-XXXXXX";
    REQUIRE(::mkdtemp(dir_name) != nullptr);
    const Case c{1000, 2048, 512, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};
    const jitmm_matmul_desc d = desc_of(c);
    jitmm_engine_config config;
    jitmm_engine_config_init(&config);
    config.device = "cuda:0";
    config.cache_dir = dir_name;
    std::string winner;
    {
        TestDevice dev(*drv);
        const Layout l = layout_of(c);
        DeviceBuffer da(*drv, l.a_rows * l.lda * 2), db(*drv, l.b_rows * l.ldb * 2), dc(*drv, c.m * l.ldc * 2);
        REQUIRE(drv->cuMemsetD8(da.ptr(), 0x3c, l.a_rows * l.lda * 2) == CUDA_SUCCESS);  // 1.17 in bf16 pairs
        REQUIRE(drv->cuMemsetD8(db.ptr(), 0x3c, l.b_rows * l.ldb * 2) == CUDA_SUCCESS);
        jitmm_engine* engine = nullptr;
        REQUIRE(jitmm_engine_create(&config, &engine) == JITMM_STATUS_SUCCESS);
        jitmm_matmul_args args;
        jitmm_matmul_args_init(&args);
        args.a = da.at(0);
        args.b = db.at(0);
        args.c = dc.at(0);
        size_t required = 0;
        REQUIRE(jitmm_tune(engine, &d, &args, nullptr, 0, &required) == JITMM_STATUS_SUCCESS);
        std::string log(required, '\0');
        const jitmm_status st = jitmm_tune(engine, &d, &args, log.data(), log.size(), &required);
        INFO(jitmm_last_error_message() << "\n" << log);
        REQUIRE(st == JITMM_STATUS_SUCCESS);
        winner = log.substr(0, log.find('\n'));
        CHECK(winner.rfind("sm90:", 0) == 0);
        CHECK(std::count(log.begin(), log.end(), '\n') >= 3);  // the winner and at least two candidates
        jitmm_engine_destroy(engine);
    }
    // A later engine (another process would do the same): the tuned tile is the plan.
    jitmm_engine* later = nullptr;
    REQUIRE(jitmm_engine_create(&config, &later) == JITMM_STATUS_SUCCESS);
    jitmm_kernel* kernel = nullptr;
    REQUIRE(jitmm_kernel_create(later, &d, &kernel) == JITMM_STATUS_SUCCESS);
    jitmm_kernel_info info;
    info.struct_size = sizeof info;
    REQUIRE(jitmm_kernel_get_info(kernel, &info) == JITMM_STATUS_SUCCESS);
    int bm = 0, bn = 0, stages = 0;
    REQUIRE(std::sscanf(winner.c_str(), "sm90:%dx%dx%d", &bm, &bn, &stages) == 3);
    INFO("winner " << winner << ", recipe " << info.recipe);
    CHECK(std::string(info.recipe).find(std::to_string(bm) + "x" + std::to_string(bn) + "x") != std::string::npos);
    CHECK(std::string(info.recipe).find("stages=" + std::to_string(stages)) != std::string::npos);
    {
        TestDevice dev(*drv);
        std::mt19937 rng(77);
        run_and_check(dev, kernel, c, rng);
    }
    jitmm_kernel_release(kernel);
    jitmm_engine_destroy(later);
    std::filesystem::remove_all(dir_name);
}

// A small set for compute-sanitizer (memcheck, racecheck): each family and operand path once, with tails.
TEST_CASE("cuda: sanitizer subset", "[cuda-sanitize]") {
    std::vector<Case> cases;
    cases.push_back({40, 72, 200, 1, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F16});   // cp.async + trans
    cases.push_back({40, 72, 200, 2, true, true, JITMM_DTYPE_F32, JITMM_DTYPE_F32});     // vector (tf32)
    cases.push_back({40, 72, 200, 1, false, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32});    // vector (s8)
    Case odd{40, 72, 200, 1, true, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32};
    odd.lda_pad = 1, odd.ldb_pad = 1, odd.beta = 0.5f;                                    // scalar
    cases.push_back(odd);
    cases.push_back({3, 200, 300, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16});  // gemv
    Case skinny{3, 200, 300, 1, false, true, JITMM_DTYPE_F16, JITMM_DTYPE_F32};
    skinny.lda_pad = 1, skinny.ldb_pad = 1;                                               // skinny (rows off 16 B)
    cases.push_back(skinny);
    cases.push_back({7, 100, 300, 1, false, false, JITMM_DTYPE_F16, JITMM_DTYPE_F16});   // thin tiled (16x32)
    // On an sm_90 GPU the aligned cases above run the Hopper kernel; fp8 with scales and an M/N-major pair too.
    Case fp8{130, 200, 256, 2, false, true, JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_BF16};
    fp8.a_scale = jitmm::ScaleMode::per_row, fp8.b_scale = jitmm::ScaleMode::per_tensor;
    fp8.bias = BiasKind::per_column, fp8.act = Activation::gelu_tanh;
    if (sm90_device()) cases.push_back(fp8);  // fp8 has no kernel before Hopper
    cases.push_back({136, 264, 200, 1, true, false, JITMM_DTYPE_BF16, JITMM_DTYPE_F32});  // wgmma transposed A and B
    run_cases(cases);
    if (!sm90_device()) return;
    // Ping-pong consumers: several tiles per CTA, so that the turn handoff runs.
    Case pingpong{1000, 1100, 136, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16};  // 288 tiles of 64x64
    pingpong.bias = BiasKind::per_column, pingpong.act = Activation::gelu_tanh;
    setenv("JITMM_CUDA_TILE", "sm90p:64x64x4", 1);
    run_cases({pingpong});
    // Partial last tiles through the tail maps (one row of A, 8 rows of B): the stale stage rows.
    setenv("JITMM_CUDA_TILE", "sm90:128x64x4", 1);
    run_cases({Case{129, 200, 256, 1, false, true, JITMM_DTYPE_BF16, JITMM_DTYPE_BF16}});
    unsetenv("JITMM_CUDA_TILE");
}

// ---------------------------------------------------------------------------------------------------
// Timing for the GPU run (hidden: tools/gpu_run.sh runs it by tag), until jitmm-bench times CUDA devices.
// Per shape: NVRTC compile (kernel info), cache-hit create, and the median of 100+ runs, each bracketed by
// CUDA events on a non-default stream, rotating over copies of A and B that together exceed 2x the L2.
// Writes CSV to $JITMM_CUDA_BENCH_CSV (default stdout). JITMM_CUDA_BENCH_SHAPES="m,n,k,ta,tb,in,out;..."
// replaces the default list.

namespace {

struct BenchShape {
    int64_t m, n, k;
    bool ta, tb;
    jitmm_dtype in, out;
};

std::vector<BenchShape> bench_shapes() {
    std::vector<BenchShape> shapes;
    if (const char* env = std::getenv("JITMM_CUDA_BENCH_SHAPES"); env != nullptr && *env != '\0') {
        std::string text = env;
        size_t pos = 0;
        while (pos < text.size()) {
            const size_t end = std::min(text.find(';', pos), text.size());
            const std::string item = text.substr(pos, end - pos);
            long long m, n, k;
            int ta, tb;
            char in[16], out[16];
            if (std::sscanf(item.c_str(), "%lld,%lld,%lld,%d,%d,%15[^,],%15s", &m, &n, &k, &ta, &tb, in, out) == 7) {
                jitmm_dtype ti, to;
                if (jitmm_dtype_from_name(in, &ti) == JITMM_STATUS_SUCCESS &&
                    jitmm_dtype_from_name(out, &to) == JITMM_STATUS_SUCCESS)
                    shapes.push_back({m, n, k, ta != 0, tb != 0, ti, to});
            }
            pos = end + 1;
        }
        return shapes;
    }
    const jitmm_dtype bf = JITMM_DTYPE_BF16, f16 = JITMM_DTYPE_F16;
    for (int64_t s : {2048, 4096, 8192}) shapes.push_back({s, s, s, false, false, bf, bf});
    shapes.push_back({4096, 4096, 4096, false, true, bf, bf});
    shapes.push_back({4096, 4096, 4096, false, false, f16, f16});
    shapes.push_back({4096, 4096, 4096, false, true, f16, JITMM_DTYPE_F32});
    shapes.push_back({4096, 4096, 4096, false, false, JITMM_DTYPE_F32, JITMM_DTYPE_F32});
    shapes.push_back({4096, 4096, 4096, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32});
    shapes.push_back({4096, 4096, 4096, false, false, JITMM_DTYPE_S8, JITMM_DTYPE_S32});
    for (int64_t m : {1, 16})
        for (auto nk : {std::pair<int64_t, int64_t>{4096, 4096}, {11008, 4096}, {4096, 11008}})
            shapes.push_back({m, nk.first, nk.second, false, true, bf, bf});
    shapes.push_back({16, 4096, 4096, false, false, bf, bf});
    shapes.push_back({16, 4096, 4096, false, true, JITMM_DTYPE_S8, JITMM_DTYPE_S32});
    return shapes;
}

}  // namespace

TEST_CASE("cuda: timing of a shape list (CSV)", "[.cuda-bench]") {
    const jitmm::cuda::DriverApi* drv = jitmm::cuda::driver();
    if (drv == nullptr) {
        WARN_SKIPPED("no CUDA device: " << jitmm::cuda::driver_unavailable_reason());
        return;
    }
    jitmm_engine_config config;
    jitmm_engine_config_init(&config);
    config.device = "cuda:0";
    config.cache_dir = "";
    jitmm_engine* engine = nullptr;
    REQUIRE(jitmm_engine_create(&config, &engine) == JITMM_STATUS_SUCCESS);
    TestDevice dev(*drv);
    FILE* csv = stdout;
    if (const char* path = std::getenv("JITMM_CUDA_BENCH_CSV"); path != nullptr && *path != '\0')
        csv = std::fopen(path, "w");
    REQUIRE(csv != nullptr);
    std::fprintf(csv, "m,n,k,layout,in,out,generator,recipe,compile_ms,hit_us,median_us,tflops,gbps\n");
    CUstream stream = nullptr;
    REQUIRE(drv->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    constexpr int64_t kL2Bytes = 50ll << 20;
    std::mt19937 rng(7);

    for (const BenchShape& s : bench_shapes()) {
        Case c{s.m, s.n, s.k, 1, s.ta, s.tb, s.in, s.out};
        const jitmm_matmul_desc d = desc_of(c);
        jitmm_kernel* kernel = nullptr;
        const jitmm_status st = jitmm_kernel_create(engine, &d, &kernel);
        if (st != JITMM_STATUS_SUCCESS) {
            std::fprintf(csv, "%lld,%lld,%lld,%c%c,%s,%s,error,%s,,,,,\n", (long long)s.m, (long long)s.n,
                         (long long)s.k, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', jitmm_dtype_name(s.in),
                         jitmm_dtype_name(s.out), jitmm_last_error_message());
            continue;
        }
        jitmm_kernel_info info;
        std::memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        REQUIRE(jitmm_kernel_get_info(kernel, &info) == JITMM_STATUS_SUCCESS);
        const std::string generator = info.generator, recipe = info.recipe;
        const double compile_ms = info.jit_time_us / 1000.0;

        // Cache hit: create + release of the same desc.
        constexpr int kHits = 2000;
        const auto h0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kHits; ++i) {
            jitmm_kernel* again = nullptr;
            REQUIRE(jitmm_kernel_create(engine, &d, &again) == JITMM_STATUS_SUCCESS);
            jitmm_kernel_release(again);
        }
        const double hit_us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count() / kHits;

        // Buffers: copies of A and B past 2x L2, filled with random bytes of small magnitude.
        const Layout l = layout_of(c);
        const int64_t ea = elem_size(s.in), ec = elem_size(s.out);
        const size_t a_bytes = size_t(l.a_rows * l.lda * ea), b_bytes = size_t(l.b_rows * l.ldb * ea);
        const size_t pitch = (a_bytes + b_bytes + 255) / 256 * 256;
        const int64_t copies = std::clamp<int64_t>((2 * kL2Bytes + pitch - 1) / pitch, 1, 16);
        DeviceBuffer ab(*drv, pitch * copies), cbuf(*drv, size_t(s.m * l.ldc * ec));
        std::vector<char> host(pitch);
        for (size_t i = 0; i < a_bytes / ea; ++i) encode(s.in, host.data(), int64_t(i), draw(s.in, rng));
        for (size_t i = 0; i < b_bytes / ea; ++i) encode(s.in, host.data() + a_bytes, int64_t(i), draw(s.in, rng));
        for (int64_t i = 0; i < copies; ++i)
            REQUIRE(drv->cuMemcpyHtoD(ab.ptr() + pitch * i, host.data(), pitch) == CUDA_SUCCESS);

        jitmm_matmul_args args;
        jitmm_matmul_args_init(&args);
        args.c = cbuf.at(0);
        args.stream = stream;
        auto run = [&](int64_t i) {
            args.a = ab.at(pitch * (i % copies));
            args.b = ab.at(pitch * (i % copies) + a_bytes);
            REQUIRE(jitmm_kernel_run(kernel, &args) == JITMM_STATUS_SUCCESS);
        };
        for (int i = 0; i < 10; ++i) run(i);
        const int runs = s.m <= 16 ? 400 : 100;
        std::vector<CUevent> ev(2 * runs);
        for (CUevent& e : ev) REQUIRE(drv->cuEventCreate(&e, CU_EVENT_DEFAULT) == CUDA_SUCCESS);
        for (int i = 0; i < runs; ++i) {
            drv->cuEventRecord(ev[2 * i], stream);
            run(i);
            drv->cuEventRecord(ev[2 * i + 1], stream);
        }
        REQUIRE(drv->cuStreamSynchronize(stream) == CUDA_SUCCESS);
        std::vector<double> us(runs);
        for (int i = 0; i < runs; ++i) {
            float ms = 0;
            REQUIRE(drv->cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) == CUDA_SUCCESS);
            us[i] = ms * 1000.0;
        }
        for (CUevent e : ev) drv->cuEventDestroy(e);
        std::sort(us.begin(), us.end());
        const double med = us[us.size() / 2];
        const double flop = 2.0 * double(s.m) * double(s.n) * double(s.k);
        const double bytes = double(a_bytes + b_bytes) + double(s.m * s.n * ec);
        std::fprintf(csv, "%lld,%lld,%lld,%c%c,%s,%s,%s,\"%s\",%.1f,%.2f,%.2f,%.1f,%.0f\n", (long long)s.m,
                     (long long)s.n, (long long)s.k, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', jitmm_dtype_name(s.in),
                     jitmm_dtype_name(s.out), generator.c_str(), recipe.c_str(), compile_ms, hit_us, med,
                     flop / med * 1e-6, bytes / med * 1e-3);
        std::fflush(csv);
        jitmm_kernel_release(kernel);
    }
    drv->cuStreamDestroy(stream);
    if (csv != stdout) std::fclose(csv);
    jitmm_engine_destroy(engine);
}
