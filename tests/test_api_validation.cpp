// The C API's argument checking, one invalid input at a time: each case asserts the specific jitmm_status
// AND that jitmm_last_error_message() names the offending field. Also the small utility entry points
// (names, versions, status strings, reports) and that an engine stays usable after any number of failures.
#include "env_guard.hpp"
#include "hw/cpu.hpp"
#include "hw/gpu.hpp"

#include <jitmm/jitmm.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

// Leaves a recognizable message behind, so a check can tell that the message it reads was written by the
// call under test and not left over from an earlier failure.
constexpr const char* kStale = "__stale_message_from_an_earlier_call__";
void plant_stale_error() {
    jitmm_dtype ignored;
    (void)jitmm_dtype_from_name(kStale, &ignored);
}

std::string status_name(jitmm_status s) { return jitmm_status_string(s); }

// Runs `call`, then asserts its status and that the fresh error message contains `field`.
#define EXPECT_FAILURE(call, want_status, field)                                                         \
    do {                                                                                                 \
        plant_stale_error();                                                                             \
        const jitmm_status got_status_ = (call);                                                         \
        const std::string got_message_ = jitmm_last_error_message();                                     \
        INFO(#call << "\n  -> " << status_name(got_status_) << ": \"" << got_message_ << "\"");          \
        CHECK(status_name(got_status_) == status_name(want_status));                                     \
        CHECK_THAT(got_message_, Catch::Contains(field));                                                \
        CHECK_THAT(got_message_, !Catch::Contains(kStale));                                              \
    } while (0)

#define EXPECT_SUCCESS(call)                                                                             \
    do {                                                                                                 \
        const jitmm_status got_status_ = (call);                                                         \
        INFO(#call << "\n  -> " << status_name(got_status_) << ": \"" << jitmm_last_error_message()      \
                   << "\"");                                                                             \
        CHECK(status_name(got_status_) == status_name(JITMM_STATUS_SUCCESS));                            \
    } while (0)

// A kernel out-pointer preset to garbage: a failing create must overwrite it with NULL.
jitmm_kernel* const kKernelSentinel = reinterpret_cast<jitmm_kernel*>(uintptr_t{0x10});
jitmm_engine* const kEngineSentinel = reinterpret_cast<jitmm_engine*>(uintptr_t{0x10});

// kernel_create must fail with `status`, name `field`, and leave *kernel NULL.
#define EXPECT_DESC_REJECTED(engine, desc, want_status, field)                                           \
    do {                                                                                                 \
        jitmm_kernel* kernel_out_ = kKernelSentinel;                                                     \
        EXPECT_FAILURE(jitmm_kernel_create((engine), &(desc), &kernel_out_), want_status, field);        \
        CHECK(kernel_out_ == nullptr);                                                                   \
        if (kernel_out_ != nullptr && kernel_out_ != kKernelSentinel) jitmm_kernel_release(kernel_out_); \
    } while (0)

// kernel_create must succeed; the kernel is released right away.
#define EXPECT_DESC_ACCEPTED(engine, desc)                                                               \
    do {                                                                                                 \
        jitmm_kernel* kernel_out_ = nullptr;                                                             \
        EXPECT_SUCCESS(jitmm_kernel_create((engine), &(desc), &kernel_out_));                            \
        CHECK(kernel_out_ != nullptr);                                                                   \
        jitmm_kernel_release(kernel_out_);                                                               \
    } while (0)

// Writes an arbitrary int into an enum field, as a C caller with garbage in its struct would.
template <typename Enum>
void set_raw(Enum& field, int value) {
    static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized on this ABI");
    std::memcpy(&field, &value, sizeof value);
}

class EngineHolder {
public:
    explicit EngineHolder(int num_threads = 2, const char* max_isa = nullptr) {
        jitmm_engine_config config;
        REQUIRE(jitmm_engine_config_init(&config) == JITMM_STATUS_SUCCESS);
        config.cache_dir = "";
        config.num_threads = num_threads;
        config.max_isa = max_isa;
        const jitmm_status s = jitmm_engine_create(&config, &engine_);
        INFO(jitmm_last_error_message());
        REQUIRE(s == JITMM_STATUS_SUCCESS);
        REQUIRE(engine_ != nullptr);
    }
    ~EngineHolder() { jitmm_engine_destroy(engine_); }
    EngineHolder(const EngineHolder&) = delete;
    EngineHolder& operator=(const EngineHolder&) = delete;
    jitmm_engine* get() const { return engine_; }

private:
    jitmm_engine* engine_ = nullptr;
};

jitmm_matmul_desc make_desc(int64_t m, int64_t n, int64_t k) {
    jitmm_matmul_desc d;
    REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
    d.m = m;
    d.n = n;
    d.k = k;
    return d;
}

jitmm_matmul_args make_args(const void* a, const void* b, void* c, const void* bias = nullptr) {
    jitmm_matmul_args args;
    REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
    args.a = a;
    args.b = b;
    args.c = c;
    args.bias = bias;
    return args;
}

bool has_bias(jitmm_epilogue e) { return e == JITMM_EPILOGUE_BIAS || e >= JITMM_EPILOGUE_BIAS_RELU; }

// The desc's geometry with ld == 0 resolved to the tight value.
struct Geometry {
    int64_t lda, ldb, ldc;
    int64_t a_rows, b_rows;
    int64_t span_a, span_b, span_c;     // elements of one matrix
    int64_t total_a, total_b, total_c;  // elements of the whole batched buffer
};

Geometry geometry(const jitmm_matmul_desc& d) {
    Geometry g;
    const int64_t a_cols = d.trans_a ? d.m : d.k, b_cols = d.trans_b ? d.k : d.n;
    g.a_rows = d.trans_a ? d.k : d.m;
    g.b_rows = d.trans_b ? d.n : d.k;
    g.lda = d.lda ? d.lda : a_cols;
    g.ldb = d.ldb ? d.ldb : b_cols;
    g.ldc = d.ldc ? d.ldc : d.n;
    g.span_a = (g.a_rows - 1) * g.lda + a_cols;
    g.span_b = (g.b_rows - 1) * g.ldb + b_cols;
    g.span_c = (d.m - 1) * g.ldc + d.n;
    const int64_t extra = d.batch_count - 1;
    g.total_a = extra * d.stride_a + g.span_a;
    g.total_b = extra * d.stride_b + g.span_b;
    g.total_c = extra * d.stride_c + g.span_c;
    return g;
}

std::vector<float> random_floats(size_t count, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(count);
    for (float& x : v) x = dist(rng);
    bool any_nonzero = false;
    for (float x : v) any_nonzero = any_nonzero || x != 0.0f;
    REQUIRE(any_nonzero);
    return v;
}

// Buffers for one desc, filled with fresh random data; C is poisoned (NaN) when beta == 0, which the
// kernel must never read.
struct Buffers {
    std::vector<float> a, b, c, c_before, bias;
};

Buffers make_buffers(const jitmm_matmul_desc& d, std::mt19937& rng) {
    const Geometry g = geometry(d);
    Buffers buf;
    buf.a = random_floats(size_t(g.total_a), rng);
    buf.b = random_floats(size_t(g.total_b), rng);
    if (d.beta == 0.0f) buf.c.assign(size_t(g.total_c), std::numeric_limits<float>::quiet_NaN());
    else buf.c = random_floats(size_t(g.total_c), rng);
    buf.c_before = buf.c;
    if (has_bias(d.epilogue))
        buf.bias = random_floats(size_t(d.bias_layout == JITMM_BIAS_PER_ROW ? d.m : d.n), rng);
    return buf;
}

// Checks buf.c against a float64 reference computed from buf.a, buf.b, buf.c_before: relative Frobenius
// error within the f32 bound over every output, and every element outside the outputs (ld padding, gaps
// between batches) left bit-for-bit untouched. Supports the none/bias/relu/bias_relu epilogues.
void check_against_reference(const jitmm_matmul_desc& d, const Buffers& buf) {
    REQUIRE((d.epilogue == JITMM_EPILOGUE_NONE || d.epilogue == JITMM_EPILOGUE_BIAS ||
             d.epilogue == JITMM_EPILOGUE_RELU || d.epilogue == JITMM_EPILOGUE_BIAS_RELU));
    const Geometry g = geometry(d);
    std::vector<char> is_output(buf.c.size(), 0);
    double err2 = 0, ref2 = 0;
    int64_t non_finite = 0;
    for (int64_t batch = 0; batch < d.batch_count; ++batch) {
        const float* a = buf.a.data() + batch * d.stride_a;
        const float* b = buf.b.data() + batch * d.stride_b;
        const int64_t c0 = batch * d.stride_c;
        for (int64_t i = 0; i < d.m; ++i) {
            for (int64_t j = 0; j < d.n; ++j) {
                double acc = 0;
                for (int64_t p = 0; p < d.k; ++p) {
                    const double av = d.trans_a ? a[p * g.lda + i] : a[i * g.lda + p];
                    const double bv = d.trans_b ? b[j * g.ldb + p] : b[p * g.ldb + j];
                    acc += av * bv;
                }
                const size_t at = size_t(c0 + i * g.ldc + j);
                double ref = double(d.alpha) * acc;
                if (d.beta != 0.0f) ref += double(d.beta) * double(buf.c_before[at]);
                if (has_bias(d.epilogue)) ref += buf.bias[size_t(d.bias_layout == JITMM_BIAS_PER_ROW ? i : j)];
                if (d.epilogue == JITMM_EPILOGUE_RELU || d.epilogue == JITMM_EPILOGUE_BIAS_RELU)
                    ref = ref > 0 ? ref : 0;
                is_output[at] = 1;
                const double got = buf.c[at];
                if (!std::isfinite(got)) ++non_finite;
                err2 += (got - ref) * (got - ref);
                ref2 += ref * ref;
            }
        }
    }
    int64_t padding_changed = 0;
    for (size_t i = 0; i < buf.c.size(); ++i)
        if (!is_output[i] && std::memcmp(&buf.c[i], &buf.c_before[i], sizeof(float)) != 0) ++padding_changed;
    const double rel = std::sqrt(err2 / (ref2 > 0 ? ref2 : 1.0));
    INFO("m=" << d.m << " n=" << d.n << " k=" << d.k << " batch=" << d.batch_count << " trans=" << d.trans_a
              << d.trans_b << " ld=" << d.lda << "," << d.ldb << "," << d.ldc << " stride=" << d.stride_a << ","
              << d.stride_b << "," << d.stride_c << " rel_err=" << rel);
    CHECK(non_finite == 0);
    CHECK(ref2 > 0);  // the check compares something that is not all zeros
    CHECK(rel <= 1e-5 * std::sqrt(double(d.k)));
    CHECK(padding_changed == 0);
}

// Creates a kernel for desc, runs it on fresh random data, and checks the result. Also runs the one-call
// jitmm_matmul on a second fresh set.
void run_and_check(jitmm_engine* engine, const jitmm_matmul_desc& d, uint32_t seed) {
    std::mt19937 rng(seed);
    {
        Buffers buf = make_buffers(d, rng);
        jitmm_kernel* kernel = nullptr;
        EXPECT_SUCCESS(jitmm_kernel_create(engine, &d, &kernel));
        REQUIRE(kernel != nullptr);
        const jitmm_matmul_args args =
            make_args(buf.a.data(), buf.b.data(), buf.c.data(), buf.bias.empty() ? nullptr : buf.bias.data());
        EXPECT_SUCCESS(jitmm_kernel_run(kernel, &args));
        jitmm_kernel_release(kernel);
        check_against_reference(d, buf);
    }
    {
        Buffers buf = make_buffers(d, rng);
        const jitmm_matmul_args args =
            make_args(buf.a.data(), buf.b.data(), buf.c.data(), buf.bias.empty() ? nullptr : buf.bias.data());
        EXPECT_SUCCESS(jitmm_matmul(engine, &d, &args));
        check_against_reference(d, buf);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Versions, status strings, names.

TEST_CASE("api: jitmm_version matches the header and the version string", "[api]") {
    CHECK(jitmm_version() == JITMM_VERSION);
    CHECK(JITMM_VERSION == JITMM_VERSION_MAJOR * 10000 + JITMM_VERSION_MINOR * 100 + JITMM_VERSION_PATCH);
    const std::string expected = std::to_string(JITMM_VERSION_MAJOR) + "." + std::to_string(JITMM_VERSION_MINOR) +
                                 "." + std::to_string(JITMM_VERSION_PATCH);
    REQUIRE(jitmm_version_string() != nullptr);
    CHECK(std::string(jitmm_version_string()) == expected);
}

TEST_CASE("api: jitmm_status_string is non-empty and distinct for every status", "[api]") {
    std::set<std::string> seen;
    for (int s = JITMM_STATUS_SUCCESS; s <= JITMM_STATUS_INTERNAL_ERROR; ++s) {
        const char* text = jitmm_status_string(static_cast<jitmm_status>(s));
        INFO("status " << s);
        REQUIRE(text != nullptr);
        CHECK(std::strlen(text) > 0);
        CHECK(seen.insert(text).second);
    }
    CHECK(seen.size() == 14);
    CHECK(std::string(jitmm_status_string(JITMM_STATUS_SUCCESS)) == "success");
    // A value past the last status (still inside the enum's range) gets its own text, not a real status's.
    const char* unknown = jitmm_status_string(static_cast<jitmm_status>(14));
    REQUIRE(unknown != nullptr);
    CHECK(std::strlen(unknown) > 0);
    CHECK(seen.count(unknown) == 0);
}

TEST_CASE("api: dtype names round trip and unknown names are rejected", "[api]") {
    const char* const kExpected[JITMM_DTYPE_COUNT] = {"f32", "f16", "bf16", "s8", "u8", "s32", "f8_e4m3", "f8_e5m2"};
    for (int i = 0; i < JITMM_DTYPE_COUNT; ++i) {
        const jitmm_dtype t = static_cast<jitmm_dtype>(i);
        const std::string name = jitmm_dtype_name(t);
        INFO("dtype " << i << " = " << name);
        CHECK(name == kExpected[i]);
        jitmm_dtype back;
        set_raw(back, -7);
        EXPECT_SUCCESS(jitmm_dtype_from_name(name.c_str(), &back));
        CHECK(back == t);
    }
    jitmm_dtype out = JITMM_DTYPE_S8;
    EXPECT_FAILURE(jitmm_dtype_from_name("f64", &out), JITMM_STATUS_INVALID_VALUE, "f64");
    EXPECT_FAILURE(jitmm_dtype_from_name("F32", &out), JITMM_STATUS_INVALID_VALUE, "F32");
    EXPECT_FAILURE(jitmm_dtype_from_name("", &out), JITMM_STATUS_INVALID_VALUE, "dtype");
    EXPECT_FAILURE(jitmm_dtype_from_name("f32 ", &out), JITMM_STATUS_INVALID_VALUE, "f32 ");
    CHECK(out == JITMM_DTYPE_S8);  // untouched by the failures
    EXPECT_FAILURE(jitmm_dtype_from_name(nullptr, &out), JITMM_STATUS_NULL_POINTER, "name");
    EXPECT_FAILURE(jitmm_dtype_from_name("f32", nullptr), JITMM_STATUS_NULL_POINTER, "dtype");
    jitmm_dtype bad;
    set_raw(bad, 99);
    CHECK(std::string(jitmm_dtype_name(bad)) == "invalid");
    set_raw(bad, -1);
    CHECK(std::string(jitmm_dtype_name(bad)) == "invalid");
}

TEST_CASE("api: epilogue names round trip and unknown names are rejected", "[api]") {
    const char* const kExpected[JITMM_EPILOGUE_COUNT] = {"none",      "bias",           "relu",          "gelu_tanh",
                                                         "gelu_erf",  "silu",           "bias_relu",     "bias_gelu_tanh",
                                                         "bias_gelu_erf", "bias_silu"};
    for (int i = 0; i < JITMM_EPILOGUE_COUNT; ++i) {
        const jitmm_epilogue e = static_cast<jitmm_epilogue>(i);
        const std::string name = jitmm_epilogue_name(e);
        INFO("epilogue " << i << " = " << name);
        CHECK(name == kExpected[i]);
        jitmm_epilogue back;
        set_raw(back, -7);
        EXPECT_SUCCESS(jitmm_epilogue_from_name(name.c_str(), &back));
        CHECK(back == e);
    }
    jitmm_epilogue out = JITMM_EPILOGUE_SILU;
    EXPECT_FAILURE(jitmm_epilogue_from_name("gelu", &out), JITMM_STATUS_INVALID_VALUE, "gelu");
    EXPECT_FAILURE(jitmm_epilogue_from_name("RELU", &out), JITMM_STATUS_INVALID_VALUE, "RELU");
    EXPECT_FAILURE(jitmm_epilogue_from_name("", &out), JITMM_STATUS_INVALID_VALUE, "epilogue");
    CHECK(out == JITMM_EPILOGUE_SILU);
    EXPECT_FAILURE(jitmm_epilogue_from_name(nullptr, &out), JITMM_STATUS_NULL_POINTER, "name");
    EXPECT_FAILURE(jitmm_epilogue_from_name("relu", nullptr), JITMM_STATUS_NULL_POINTER, "epilogue");
    jitmm_epilogue bad;
    set_raw(bad, JITMM_EPILOGUE_COUNT);
    CHECK(std::string(jitmm_epilogue_name(bad)) == "invalid");
    set_raw(bad, -1);
    CHECK(std::string(jitmm_epilogue_name(bad)) == "invalid");
}

// ---------------------------------------------------------------------------------------------------------
// NULL pointers.

TEST_CASE("api: NULL engine, desc, kernel, args and out-pointers are rejected by name", "[api]") {
    EngineHolder engine;
    jitmm_matmul_desc desc = make_desc(4, 5, 3);
    std::vector<float> a(12, 1.0f), b(15, 1.0f), c(20, 0.0f);
    const jitmm_matmul_args args = make_args(a.data(), b.data(), c.data());

    // Init functions.
    EXPECT_FAILURE(jitmm_matmul_desc_init(nullptr), JITMM_STATUS_NULL_POINTER, "desc");
    EXPECT_FAILURE(jitmm_matmul_args_init(nullptr), JITMM_STATUS_NULL_POINTER, "args");
    EXPECT_FAILURE(jitmm_engine_config_init(nullptr), JITMM_STATUS_NULL_POINTER, "config");

    // Engine creation.
    EXPECT_FAILURE(jitmm_engine_create(nullptr, nullptr), JITMM_STATUS_NULL_POINTER, "engine");

    // Kernel creation.
    EXPECT_DESC_REJECTED(nullptr, desc, JITMM_STATUS_NULL_POINTER, "engine");
    {
        jitmm_kernel* kernel = kKernelSentinel;
        EXPECT_FAILURE(jitmm_kernel_create(engine.get(), nullptr, &kernel), JITMM_STATUS_NULL_POINTER, "desc");
        CHECK(kernel == nullptr);
    }
    EXPECT_FAILURE(jitmm_kernel_create(engine.get(), &desc, nullptr), JITMM_STATUS_NULL_POINTER, "kernel");

    // Running.
    EXPECT_FAILURE(jitmm_kernel_run(nullptr, &args), JITMM_STATUS_NULL_POINTER, "kernel");
    jitmm_kernel* kernel = nullptr;
    REQUIRE(jitmm_kernel_create(engine.get(), &desc, &kernel) == JITMM_STATUS_SUCCESS);
    EXPECT_FAILURE(jitmm_kernel_run(kernel, nullptr), JITMM_STATUS_NULL_POINTER, "args");
    jitmm_matmul_args bad = args;
    bad.a = nullptr;
    EXPECT_FAILURE(jitmm_kernel_run(kernel, &bad), JITMM_STATUS_NULL_POINTER, "args.a");
    EXPECT_FAILURE(jitmm_matmul(engine.get(), &desc, &bad), JITMM_STATUS_NULL_POINTER, "args.a");
    bad = args;
    bad.b = nullptr;
    EXPECT_FAILURE(jitmm_kernel_run(kernel, &bad), JITMM_STATUS_NULL_POINTER, "args.b");
    EXPECT_FAILURE(jitmm_matmul(engine.get(), &desc, &bad), JITMM_STATUS_NULL_POINTER, "args.b");
    bad = args;
    bad.c = nullptr;
    EXPECT_FAILURE(jitmm_kernel_run(kernel, &bad), JITMM_STATUS_NULL_POINTER, "args.c");
    EXPECT_FAILURE(jitmm_matmul(engine.get(), &desc, &bad), JITMM_STATUS_NULL_POINTER, "args.c");
    CHECK(c == std::vector<float>(20, 0.0f));  // nothing ran

    // The one-call form.
    EXPECT_FAILURE(jitmm_matmul(nullptr, &desc, &args), JITMM_STATUS_NULL_POINTER, "engine");
    EXPECT_FAILURE(jitmm_matmul(engine.get(), nullptr, &args), JITMM_STATUS_NULL_POINTER, "desc");
    EXPECT_FAILURE(jitmm_matmul(engine.get(), &desc, nullptr), JITMM_STATUS_NULL_POINTER, "args");

    // Info and describe.
    jitmm_kernel_info info;
    info.struct_size = sizeof info;
    EXPECT_FAILURE(jitmm_kernel_get_info(nullptr, &info), JITMM_STATUS_NULL_POINTER, "kernel");
    EXPECT_FAILURE(jitmm_kernel_get_info(kernel, nullptr), JITMM_STATUS_NULL_POINTER, "info");
    size_t required = 0;
    EXPECT_FAILURE(jitmm_engine_describe(nullptr, JITMM_REPORT_TEXT, nullptr, 0, &required),
                   JITMM_STATUS_NULL_POINTER, "engine");

    jitmm_kernel_release(kernel);
}

TEST_CASE("api: NULL engine/kernel handles are accepted by destroy/release", "[api]") {
    EXPECT_SUCCESS(jitmm_engine_destroy(nullptr));
    EXPECT_SUCCESS(jitmm_kernel_release(nullptr));
}

TEST_CASE("api: a bias epilogue needs args.bias and without one a NULL bias is fine", "[api]") {
    EngineHolder engine;
    std::mt19937 rng(11);
    const jitmm_epilogue kBiasEpilogues[] = {JITMM_EPILOGUE_BIAS, JITMM_EPILOGUE_BIAS_RELU,
                                             JITMM_EPILOGUE_BIAS_GELU_TANH, JITMM_EPILOGUE_BIAS_GELU_ERF,
                                             JITMM_EPILOGUE_BIAS_SILU};
    for (jitmm_epilogue e : kBiasEpilogues) {
        for (jitmm_bias_layout layout : {JITMM_BIAS_PER_COLUMN, JITMM_BIAS_PER_ROW}) {
            INFO("epilogue " << jitmm_epilogue_name(e) << " layout " << layout);
            jitmm_matmul_desc desc = make_desc(6, 5, 4);
            desc.epilogue = e;
            desc.bias_layout = layout;
            Buffers buf = make_buffers(desc, rng);
            const jitmm_matmul_args args = make_args(buf.a.data(), buf.b.data(), buf.c.data(), nullptr);
            jitmm_kernel* kernel = nullptr;
            EXPECT_SUCCESS(jitmm_kernel_create(engine.get(), &desc, &kernel));
            REQUIRE(kernel != nullptr);
            EXPECT_FAILURE(jitmm_kernel_run(kernel, &args), JITMM_STATUS_NULL_POINTER, "args.bias");
            EXPECT_FAILURE(jitmm_matmul(engine.get(), &desc, &args), JITMM_STATUS_NULL_POINTER, "args.bias");
            jitmm_kernel_release(kernel);
            // C was not written (it still holds the NaN poison).
            int64_t written = 0;
            for (float v : buf.c) written += std::isnan(v) ? 0 : 1;
            CHECK(written == 0);
        }
    }
    // No bias epilogue: a NULL bias is accepted and the result is right.
    for (jitmm_epilogue e : {JITMM_EPILOGUE_NONE, JITMM_EPILOGUE_RELU}) {
        INFO("epilogue " << jitmm_epilogue_name(e));
        jitmm_matmul_desc desc = make_desc(6, 5, 4);
        desc.epilogue = e;
        run_and_check(engine.get(), desc, 12);
    }
    // And a bias epilogue with a bias computes with it.
    jitmm_matmul_desc desc = make_desc(6, 5, 4);
    desc.epilogue = JITMM_EPILOGUE_BIAS_RELU;
    desc.bias_layout = JITMM_BIAS_PER_ROW;
    run_and_check(engine.get(), desc, 13);
}

// ---------------------------------------------------------------------------------------------------------
// struct_size.

TEST_CASE("api: wrong struct_size is rejected for desc, args, engine config and kernel info", "[api]") {
    EngineHolder engine;
    const size_t kDescSizes[] = {0, sizeof(jitmm_matmul_desc) - 1, sizeof(jitmm_matmul_desc) + 8};
    const size_t kArgsSizes[] = {0, sizeof(jitmm_matmul_args) - 1, sizeof(jitmm_matmul_args) + 8};
    const size_t kConfigSizes[] = {0, sizeof(jitmm_engine_config) - 1, sizeof(jitmm_engine_config) + 8};
    const size_t kInfoSizes[] = {0, sizeof(jitmm_kernel_info) - 1, sizeof(jitmm_kernel_info) + 8};

    std::vector<float> a(12, 1.0f), b(15, 1.0f), c(20, 0.0f);
    const jitmm_matmul_desc good_desc = make_desc(4, 5, 3);
    const jitmm_matmul_args good_args = make_args(a.data(), b.data(), c.data());

    for (size_t size : kDescSizes) {
        INFO("desc.struct_size = " << size);
        jitmm_matmul_desc desc = good_desc;
        desc.struct_size = size;
        EXPECT_DESC_REJECTED(engine.get(), desc, JITMM_STATUS_INVALID_STRUCT_SIZE, "jitmm_matmul_desc.struct_size");
        EXPECT_FAILURE(jitmm_matmul(engine.get(), &desc, &good_args), JITMM_STATUS_INVALID_STRUCT_SIZE,
                       "jitmm_matmul_desc.struct_size");
    }

    jitmm_kernel* kernel = nullptr;
    REQUIRE(jitmm_kernel_create(engine.get(), &good_desc, &kernel) == JITMM_STATUS_SUCCESS);
    for (size_t size : kArgsSizes) {
        INFO("args.struct_size = " << size);
        jitmm_matmul_args args = good_args;
        args.struct_size = size;
        EXPECT_FAILURE(jitmm_kernel_run(kernel, &args), JITMM_STATUS_INVALID_STRUCT_SIZE,
                       "jitmm_matmul_args.struct_size");
        EXPECT_FAILURE(jitmm_matmul(engine.get(), &good_desc, &args), JITMM_STATUS_INVALID_STRUCT_SIZE,
                       "jitmm_matmul_args.struct_size");
    }
    CHECK(c == std::vector<float>(20, 0.0f));  // nothing ran

    for (size_t size : kInfoSizes) {
        INFO("info.struct_size = " << size);
        jitmm_kernel_info info;
        std::memset(&info, 0, sizeof info);
        info.struct_size = size;
        EXPECT_FAILURE(jitmm_kernel_get_info(kernel, &info), JITMM_STATUS_INVALID_STRUCT_SIZE,
                       "jitmm_kernel_info.struct_size");
        CHECK(info.generator == nullptr);  // nothing written
    }
    jitmm_kernel_info info;
    info.struct_size = sizeof info;
    EXPECT_SUCCESS(jitmm_kernel_get_info(kernel, &info));
    REQUIRE(info.generator != nullptr);
    CHECK(std::string(info.generator).rfind("x86_f32_", 0) == 0);
    CHECK(std::strlen(info.key_hex) == 32);
    CHECK(info.workspace_size == 0);  // the x86 kernels need no scratch from the caller
    // An info from a jitmm.h before workspace_size: filled up to its end, nothing written past it.
    jitmm_kernel_info older;
    std::memset(&older, 0xAB, sizeof older);
    older.struct_size = offsetof(jitmm_kernel_info, workspace_size);
    EXPECT_SUCCESS(jitmm_kernel_get_info(kernel, &older));
    CHECK(std::strcmp(older.key_hex, info.key_hex) == 0);
    size_t untouched;
    std::memset(&untouched, 0xAB, sizeof untouched);
    CHECK(older.workspace_size == untouched);
    jitmm_kernel_release(kernel);

    for (size_t size : kConfigSizes) {
        INFO("config.struct_size = " << size);
        jitmm_engine_config config;
        REQUIRE(jitmm_engine_config_init(&config) == JITMM_STATUS_SUCCESS);
        config.struct_size = size;
        jitmm_engine* e = kEngineSentinel;
        EXPECT_FAILURE(jitmm_engine_create(&config, &e), JITMM_STATUS_INVALID_STRUCT_SIZE,
                       "jitmm_engine_config.struct_size");
        CHECK(e == nullptr);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Dimensions, enums, scalars.

TEST_CASE("api: m, n, k and batch_count must be >= 1", "[api]") {
    EngineHolder engine;
    const int64_t kBad[] = {0, -1, std::numeric_limits<int64_t>::min()};
    for (int64_t v : kBad) {
        INFO("value " << v);
        jitmm_matmul_desc d = make_desc(4, 5, 3);
        d.m = v;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_DIMENSION, "desc.m");
        d = make_desc(4, 5, 3);
        d.n = v;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_DIMENSION, "desc.n");
        d = make_desc(4, 5, 3);
        d.k = v;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_DIMENSION, "desc.k");
        d = make_desc(4, 5, 3);
        d.batch_count = v;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_DIMENSION, "desc.batch_count");
    }
    // The one-call form checks the same (no buffer is touched).
    jitmm_matmul_desc d = make_desc(0, 5, 3);
    std::vector<float> a(12, 1.0f), b(15, 1.0f), c(20, 0.0f);
    const jitmm_matmul_args args = make_args(a.data(), b.data(), c.data());
    EXPECT_FAILURE(jitmm_matmul(engine.get(), &d, &args), JITMM_STATUS_INVALID_DIMENSION, "desc.m");
    CHECK(c == std::vector<float>(20, 0.0f));
}

TEST_CASE("api: dtype, trans, epilogue and bias_layout fields out of range", "[api]") {
    EngineHolder engine;
    for (int v : {99, -1, JITMM_DTYPE_COUNT}) {
        INFO("dtype value " << v);
        jitmm_matmul_desc d = make_desc(4, 5, 3);
        set_raw(d.a_type, v);
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.a_type");
        d = make_desc(4, 5, 3);
        set_raw(d.b_type, v);
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.b_type");
        d = make_desc(4, 5, 3);
        set_raw(d.c_type, v);
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.c_type");
        d = make_desc(4, 5, 3);
        d.epilogue = JITMM_EPILOGUE_BIAS;
        set_raw(d.bias_type, v);
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.bias_type");
    }
    for (int v : {2, -1, 255}) {
        INFO("flag value " << v);
        jitmm_matmul_desc d = make_desc(4, 5, 3);
        d.trans_a = v;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.trans_a");
        d = make_desc(4, 5, 3);
        d.trans_b = v;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.trans_b");
    }
    for (int v : {JITMM_EPILOGUE_COUNT, -1, 99}) {
        INFO("epilogue value " << v);
        jitmm_matmul_desc d = make_desc(4, 5, 3);
        set_raw(d.epilogue, v);
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.epilogue");
    }
    for (int v : {2, -1, 99}) {
        for (jitmm_epilogue e : {JITMM_EPILOGUE_BIAS, JITMM_EPILOGUE_BIAS_SILU}) {
            INFO("bias_layout value " << v << " epilogue " << jitmm_epilogue_name(e));
            jitmm_matmul_desc d = make_desc(4, 5, 3);
            d.epilogue = e;
            set_raw(d.bias_layout, v);
            EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.bias_layout");
        }
    }
}

TEST_CASE("api: non-finite alpha or beta is rejected", "[api]") {
    EngineHolder engine;
    const float kBad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
    for (float v : kBad) {
        INFO("value " << v);
        jitmm_matmul_desc d = make_desc(4, 5, 3);
        d.alpha = v;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.alpha");
        d = make_desc(4, 5, 3);
        d.beta = v;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.beta");
    }
    // Finite extremes are fine.
    jitmm_matmul_desc d = make_desc(4, 5, 3);
    d.alpha = std::numeric_limits<float>::max();
    d.beta = -std::numeric_limits<float>::denorm_min();
    EXPECT_DESC_ACCEPTED(engine.get(), d);
}

// ---------------------------------------------------------------------------------------------------------
// Leading dimensions.

TEST_CASE("api: leading dimensions: negative, and below the stored row for every transpose", "[api]") {
    EngineHolder engine;
    const int64_t M = 5, N = 7, K = 3;
    for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
            INFO("trans_a=" << ta << " trans_b=" << tb);
            jitmm_matmul_desc base = make_desc(M, N, K);
            base.trans_a = ta;
            base.trans_b = tb;
            const int64_t min_lda = ta ? M : K;  // A stored M x K, or K x M transposed
            const int64_t min_ldb = tb ? K : N;  // B stored K x N, or N x K transposed
            const int64_t min_ldc = N;

            for (int64_t v : {int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
                jitmm_matmul_desc d = base;
                d.lda = v;
                EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_LEADING_DIM, "desc.lda");
                d = base;
                d.ldb = v;
                EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_LEADING_DIM, "desc.ldb");
                d = base;
                d.ldc = v;
                EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_LEADING_DIM, "desc.ldc");
            }
            // One below the stored row, and 1.
            for (int64_t below : {int64_t{1}, int64_t{2}}) {
                jitmm_matmul_desc d = base;
                d.lda = min_lda - below;
                if (d.lda > 0) EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_LEADING_DIM, "desc.lda");
                d = base;
                d.ldb = min_ldb - below;
                if (d.ldb > 0) EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_LEADING_DIM, "desc.ldb");
                d = base;
                d.ldc = min_ldc - below;
                if (d.ldc > 0) EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_LEADING_DIM, "desc.ldc");
            }
            // The transposed minimum is what is required: the untransposed minimum is not enough when it is
            // smaller (trans_a needs M=5 while K=3; trans_b needs K=3 while N=7 is what a plain B needs).
            if (ta) {
                jitmm_matmul_desc d = base;
                d.lda = K;
                EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_LEADING_DIM, "desc.lda");
            }
            if (!tb) {
                jitmm_matmul_desc d = base;
                d.ldb = K;
                EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_LEADING_DIM, "desc.ldb");
            }
            // Exactly the minimum is accepted, as is 0 (tight).
            jitmm_matmul_desc d = base;
            d.lda = min_lda;
            d.ldb = min_ldb;
            d.ldc = min_ldc;
            EXPECT_DESC_ACCEPTED(engine.get(), d);
            EXPECT_DESC_ACCEPTED(engine.get(), base);
        }
    }
}

TEST_CASE("api: ld == 0 means tight, padded ld works, for every transpose", "[api]") {
    EngineHolder engine;
    uint32_t seed = 100;
    for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
            INFO("trans_a=" << ta << " trans_b=" << tb);
            jitmm_matmul_desc d = make_desc(9, 13, 6);
            d.trans_a = ta;
            d.trans_b = tb;
            run_and_check(engine.get(), d, seed++);  // tight (ld 0)
            d.lda = (ta ? 9 : 6) + 3;
            d.ldb = (tb ? 6 : 13) + 5;
            d.ldc = 13 + 2;
            d.beta = 0.5f;
            d.alpha = -1.5f;
            run_and_check(engine.get(), d, seed++);  // padded, padding must stay untouched
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Batch strides.

TEST_CASE("api: batch strides: overlap, negative, broadcast, ignored for one batch", "[api]") {
    EngineHolder engine;
    const int64_t M = 4, N = 5, K = 3;
    jitmm_matmul_desc base = make_desc(M, N, K);
    base.batch_count = 3;
    base.stride_a = M * K;  // 12
    base.stride_b = K * N;  // 15
    base.stride_c = M * N;  // 20
    EXPECT_DESC_ACCEPTED(engine.get(), base);

    SECTION("overlapping batches") {
        jitmm_matmul_desc d = base;
        d.stride_c = M * N - 1;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_c");
        d.stride_c = 1;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_c");
        d.stride_c = 0;  // C cannot be shared: batches would write over each other
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_c");
        d = base;
        d.stride_a = M * K - 1;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_a");
        d.stride_a = 1;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_a");
        d = base;
        d.stride_b = K * N - 1;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_b");
        d.stride_b = 1;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_b");
        // With a padded ldc one C spans (M-1)*ldc + N elements: that, not M*ldc, is the minimum.
        d = base;
        d.ldc = 8;
        d.stride_c = (M - 1) * 8 + N;  // 29
        EXPECT_DESC_ACCEPTED(engine.get(), d);
        d.stride_c = (M - 1) * 8 + N - 1;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_c");
        // Transposed A: one A spans (K-1)*lda + M with lda >= M.
        d = base;
        d.trans_a = 1;
        d.stride_a = K * M - 1;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_a");
    }
    SECTION("negative strides") {
        for (int64_t v : {int64_t{-1}, -M * N, std::numeric_limits<int64_t>::min()}) {
            INFO("stride " << v);
            jitmm_matmul_desc d = base;
            d.stride_a = v;
            EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_a");
            d = base;
            d.stride_b = v;
            EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_b");
            d = base;
            d.stride_c = v;
            EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_STRIDE, "desc.stride_c");
        }
    }
    SECTION("stride 0 broadcasts A or B to every batch") {
        jitmm_matmul_desc d = base;
        d.stride_a = 0;
        run_and_check(engine.get(), d, 200);
        d = base;
        d.stride_b = 0;
        run_and_check(engine.get(), d, 201);
        d = base;
        d.stride_a = 0;
        d.stride_b = 0;
        run_and_check(engine.get(), d, 202);
        // Strides with gaps between batches: the gaps in C stay untouched.
        d = base;
        d.stride_a = M * K + 7;
        d.stride_b = K * N + 1;
        d.stride_c = M * N + 9;
        d.beta = 1.0f;
        run_and_check(engine.get(), d, 203);
    }
    SECTION("strides are ignored when batch_count == 1") {
        jitmm_matmul_desc d = make_desc(M, N, K);
        d.stride_a = 1;
        d.stride_b = 2;
        d.stride_c = 3;  // all smaller than one matrix: would overlap, but there is only one batch
        EXPECT_DESC_ACCEPTED(engine.get(), d);
        run_and_check(engine.get(), d, 204);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Overflow.

TEST_CASE("api: extents that overflow 64-bit addressing are rejected", "[api]") {
    EngineHolder engine;
    const int64_t kHuge = int64_t{1} << 40;
    {
        jitmm_matmul_desc d = make_desc(kHuge, 1, kHuge);  // A alone is 2^80 elements
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "A (");
    }
    {
        jitmm_matmul_desc d = make_desc(1, kHuge, kHuge);  // B
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "B (");
    }
    {
        jitmm_matmul_desc d = make_desc(kHuge, kHuge, 1);  // C
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "C (");
    }
    {
        // Elements fit in int64 but bytes do not: 2^62 f32 elements = 2^64 bytes.
        jitmm_matmul_desc d = make_desc(int64_t{1} << 31, 1, int64_t{1} << 31);
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "A (");
    }
    {
        // A huge leading dimension.
        jitmm_matmul_desc d = make_desc(4, 5, 3);
        d.lda = std::numeric_limits<int64_t>::max();
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "A (");
    }
    // Batch extents: each matrix is small, but batch_count * stride is not.
    {
        jitmm_matmul_desc d = make_desc(2, 2, 2);
        d.batch_count = kHuge;
        d.stride_a = kHuge;
        d.stride_b = 4;
        d.stride_c = 4;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "A batches");
    }
    {
        jitmm_matmul_desc d = make_desc(2, 2, 2);
        d.batch_count = kHuge;
        d.stride_a = 4;
        d.stride_b = kHuge;
        d.stride_c = 4;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "B batches");
    }
    {
        jitmm_matmul_desc d = make_desc(2, 2, 2);
        d.batch_count = kHuge;
        d.stride_a = 0;
        d.stride_b = 0;
        d.stride_c = kHuge;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "C batches");
    }
    {
        // Element count fits (about 2^62) but the byte count (x4) does not.
        jitmm_matmul_desc d = make_desc(2, 2, 2);
        d.batch_count = int64_t{1} << 31;
        d.stride_a = 4;
        d.stride_b = 4;
        d.stride_c = int64_t{1} << 31;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "C batches");
    }
}

// ---------------------------------------------------------------------------------------------------------
// Valid but unsupported on the CPU.

TEST_CASE("api: dtype combinations the CPU has no kernel for are UNSUPPORTED, naming the dtypes", "[api]") {
    EngineHolder engine;
    struct Combo {
        jitmm_dtype a, b, c;
        const char* expect1;
        const char* expect2;
    };
    const Combo kCombos[] = {
        {JITMM_DTYPE_F16, JITMM_DTYPE_F16, JITMM_DTYPE_S32, "a_type=f16", "c_type=s32"},
        {JITMM_DTYPE_BF16, JITMM_DTYPE_F16, JITMM_DTYPE_BF16, "a_type=bf16", "b_type=f16"},
        {JITMM_DTYPE_S8, JITMM_DTYPE_S8, JITMM_DTYPE_F8_E4M3, "a_type=s8", "c_type=f8_e4m3"},
        {JITMM_DTYPE_U8, JITMM_DTYPE_F16, JITMM_DTYPE_F32, "a_type=u8", "b_type=f16"},
        {JITMM_DTYPE_F32, JITMM_DTYPE_F32, JITMM_DTYPE_S32, "c_type=s32", "a_type=f32"},
        {JITMM_DTYPE_F32, JITMM_DTYPE_F32, JITMM_DTYPE_F16, "c_type=f16", "b_type=f32"},
        {JITMM_DTYPE_F16, JITMM_DTYPE_F32, JITMM_DTYPE_F32, "a_type=f16", "b_type=f32"},
        {JITMM_DTYPE_F8_E4M3, JITMM_DTYPE_F8_E5M2, JITMM_DTYPE_BF16, "a_type=f8_e4m3", "b_type=f8_e5m2"},
    };
    std::vector<float> scratch(64, 0.0f);
    for (const Combo& combo : kCombos) {
        INFO(jitmm_dtype_name(combo.a) << " * " << jitmm_dtype_name(combo.b) << " -> " << jitmm_dtype_name(combo.c));
        jitmm_matmul_desc d = make_desc(4, 4, 4);
        d.a_type = combo.a;
        d.b_type = combo.b;
        d.c_type = combo.c;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_UNSUPPORTED, combo.expect1);
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_UNSUPPORTED, combo.expect2);
        const jitmm_matmul_args args = make_args(scratch.data(), scratch.data(), scratch.data());
        EXPECT_FAILURE(jitmm_matmul(engine.get(), &d, &args), JITMM_STATUS_UNSUPPORTED, combo.expect1);
    }
    // An f32 matmul with a non-f32 bias.
    jitmm_matmul_desc d = make_desc(4, 4, 4);
    d.epilogue = JITMM_EPILOGUE_BIAS;
    d.bias_type = JITMM_DTYPE_BF16;
    EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_UNSUPPORTED, "bias_type=bf16");
    CHECK(scratch == std::vector<float>(64, 0.0f));
}

// ---------------------------------------------------------------------------------------------------------
// Engine configuration.

TEST_CASE("api: engine config: device, max_isa, num_threads, cache capacity", "[api]") {
    auto expect_config_rejected = [](const jitmm_engine_config& config, jitmm_status status, const char* field) {
        jitmm_engine* e = kEngineSentinel;
        EXPECT_FAILURE(jitmm_engine_create(&config, &e), status, field);
        CHECK(e == nullptr);
        if (e != nullptr && e != kEngineSentinel) jitmm_engine_destroy(e);
    };
    jitmm_engine_config base;
    REQUIRE(jitmm_engine_config_init(&base) == JITMM_STATUS_SUCCESS);
    CHECK(base.struct_size == sizeof(jitmm_engine_config));
    REQUIRE(base.device != nullptr);
    CHECK(std::string(base.device) == "cpu");
    base.cache_dir = "";

    for (const char* device : {"gpu", "cuda:x", "cuda:", "cuda:-1", "CPU", "", "cpu:0", "cuda0"}) {
        INFO("device \"" << device << "\"");
        jitmm_engine_config c = base;
        c.device = device;
        expect_config_rejected(c, JITMM_STATUS_INVALID_VALUE, "config.device");
    }
    for (const char* isa : {"avx1024", "AVX2", "", "sse4"}) {
        INFO("max_isa \"" << isa << "\"");
        jitmm_engine_config c = base;
        c.max_isa = isa;
        expect_config_rejected(c, JITMM_STATUS_INVALID_VALUE, "config.max_isa");
    }
    for (int32_t v : {-1, std::numeric_limits<int32_t>::min()}) {
        INFO("value " << v);
        jitmm_engine_config c = base;
        c.num_threads = v;
        expect_config_rejected(c, JITMM_STATUS_INVALID_VALUE, "config.num_threads");
        c = base;
        c.kernel_cache_capacity = v;
        expect_config_rejected(c, JITMM_STATUS_INVALID_VALUE, "config.kernel_cache_capacity");
    }

    // The valid forms work: NULL config, "cpu", every known max_isa name, explicit threads and capacity.
    jitmm_engine* e = nullptr;
    EXPECT_SUCCESS(jitmm_engine_create(nullptr, &e));
    CHECK(e != nullptr);
    jitmm_engine_destroy(e);
    for (const char* isa : {"avx2", "avx512", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx"}) {
        INFO("max_isa " << isa);
        jitmm_engine_config c = base;
        c.max_isa = isa;
        c.num_threads = 3;
        c.kernel_cache_capacity = 7;
        e = nullptr;
        EXPECT_SUCCESS(jitmm_engine_create(&c, &e));
        CHECK(e != nullptr);
        jitmm_engine_destroy(e);
    }
}

TEST_CASE("api: a CUDA device without a driver (or past the device count) is NO_DEVICE", "[api]") {
    jitmm_engine_config config;
    REQUIRE(jitmm_engine_config_init(&config) == JITMM_STATUS_SUCCESS);
    config.cache_dir = "";
    const jitmm::hw::GpuProbe& probe = jitmm::hw::gpu_probe();
    jitmm_engine* e = kEngineSentinel;
    if (!probe.driver_loaded) {
        INFO("no CUDA driver here: " << probe.driver_note);
        for (const char* device : {"cuda:0", "cuda", "cuda:3"}) {
            config.device = device;
            e = kEngineSentinel;
            EXPECT_FAILURE(jitmm_engine_create(&config, &e), JITMM_STATUS_NO_DEVICE, "driver");
            CHECK(e == nullptr);
            CHECK_THAT(std::string(jitmm_last_error_message()), Catch::Contains(device));
        }
    } else {
        INFO("CUDA driver present with " << probe.devices.size() << " device(s)");
        config.device = "cuda:999";
        EXPECT_FAILURE(jitmm_engine_create(&config, &e), JITMM_STATUS_NO_DEVICE, "cuda:999");
        CHECK(e == nullptr);
    }
}

TEST_CASE("api: bad JITMM_MAX_ISA / JITMM_NUM_THREADS in the environment are INVALID_VALUE", "[api]") {
    {
        EnvGuard isa("JITMM_MAX_ISA", "bogus");
        jitmm_engine* e = kEngineSentinel;
        EXPECT_FAILURE(jitmm_engine_create(nullptr, &e), JITMM_STATUS_INVALID_VALUE, "JITMM_MAX_ISA");
        CHECK(e == nullptr);
        CHECK_THAT(std::string(jitmm_last_error_message()), Catch::Contains("bogus"));

        jitmm_engine_config config;
        REQUIRE(jitmm_engine_config_init(&config) == JITMM_STATUS_SUCCESS);
        config.cache_dir = "";
        e = kEngineSentinel;
        EXPECT_FAILURE(jitmm_engine_create(&config, &e), JITMM_STATUS_INVALID_VALUE, "JITMM_MAX_ISA");
        CHECK(e == nullptr);
        // An explicit config.max_isa wins over the environment.
        config.max_isa = "avx2";
        e = nullptr;
        EXPECT_SUCCESS(jitmm_engine_create(&config, &e));
        CHECK(e != nullptr);
        jitmm_engine_destroy(e);
    }
    {
        EnvGuard isa("JITMM_MAX_ISA", nullptr);
        for (const char* bad : {"zero", "-2", "0", "4x"}) {
            INFO("JITMM_NUM_THREADS=" << bad);
            EnvGuard threads("JITMM_NUM_THREADS", bad);
            jitmm_engine* e = kEngineSentinel;
            EXPECT_FAILURE(jitmm_engine_create(nullptr, &e), JITMM_STATUS_INVALID_VALUE, "JITMM_NUM_THREADS");
            CHECK(e == nullptr);
        }
    }
    // Restored: the default engine works again.
    jitmm_engine* e = nullptr;
    EXPECT_SUCCESS(jitmm_engine_create(nullptr, &e));
    CHECK(e != nullptr);
    jitmm_engine_destroy(e);
}

// ---------------------------------------------------------------------------------------------------------
// Reports.

TEST_CASE("api: jitmm_probe_report size query, full call, truncation", "[api]") {
    for (jitmm_report_format format : {JITMM_REPORT_TEXT, JITMM_REPORT_JSON}) {
        INFO("format " << format);
        size_t required = 0;
        EXPECT_SUCCESS(jitmm_probe_report(format, nullptr, 0, &required));
        REQUIRE(required > 1);

        std::vector<char> full(required + 16, 'X');
        size_t required2 = 0;
        EXPECT_SUCCESS(jitmm_probe_report(format, full.data(), required, &required2));
        CHECK(required2 == required);
        CHECK(std::strlen(full.data()) == required - 1);
        CHECK(full[required] == 'X');  // nothing written past buffer_size
        const std::string text(full.data());
        if (format == JITMM_REPORT_JSON) {
            CHECK(text.front() == '{');
            CHECK(text.back() == '}');
            CHECK_THAT(text, Catch::Contains("\"cpu\"") && Catch::Contains("\"cuda\""));
        } else {
            CHECK_THAT(text, Catch::Contains("CPU") && Catch::Contains("CUDA"));
        }

        // A small buffer: truncated, NUL-terminated, a prefix of the full text; nothing past its end.
        std::vector<char> small(16, 'X');
        size_t required3 = 0;
        EXPECT_SUCCESS(jitmm_probe_report(format, small.data(), 8, &required3));
        CHECK(required3 == required);
        CHECK(small[7] == '\0');
        CHECK(std::string(small.data()) == text.substr(0, 7));
        CHECK(small[8] == 'X');
        // One byte: just the NUL. required may be NULL.
        small.assign(16, 'X');
        EXPECT_SUCCESS(jitmm_probe_report(format, small.data(), 1, nullptr));
        CHECK(small[0] == '\0');
        CHECK(small[1] == 'X');
    }
    size_t required = 0;
    EXPECT_FAILURE(jitmm_probe_report(JITMM_REPORT_TEXT, nullptr, 0, nullptr), JITMM_STATUS_NULL_POINTER, "buffer");
    EXPECT_FAILURE(jitmm_probe_report(JITMM_REPORT_TEXT, nullptr, 64, &required), JITMM_STATUS_NULL_POINTER,
                   "buffer");
    jitmm_report_format bad;
    set_raw(bad, 7);
    char buf[64];
    EXPECT_FAILURE(jitmm_probe_report(bad, buf, sizeof buf, &required), JITMM_STATUS_INVALID_VALUE, "format");
}

TEST_CASE("api: jitmm_engine_describe reports the engine's device and capped ISA", "[api]") {
    EngineHolder engine(2, "avx2");
    for (jitmm_report_format format : {JITMM_REPORT_TEXT, JITMM_REPORT_JSON}) {
        INFO("format " << format);
        size_t required = 0;
        EXPECT_SUCCESS(jitmm_engine_describe(engine.get(), format, nullptr, 0, &required));
        REQUIRE(required > 1);
        std::vector<char> buf(required);
        EXPECT_SUCCESS(jitmm_engine_describe(engine.get(), format, buf.data(), buf.size(), nullptr));
        const std::string text(buf.data());
        CHECK(text.size() == required - 1);
        CHECK_THAT(text, Catch::Contains("cpu"));
        if (jitmm::hw::cpu_info().best_isa >= jitmm::hw::X86Isa::avx2) CHECK_THAT(text, Catch::Contains("avx2"));
        if (format == JITMM_REPORT_JSON) {
            CHECK(text.front() == '{');
            CHECK(text.back() == '}');
            CHECK_THAT(text, Catch::Contains("\"device\": \"cpu\""));
        }
        std::vector<char> small(8, 'X');
        EXPECT_SUCCESS(jitmm_engine_describe(engine.get(), format, small.data(), 4, nullptr));
        CHECK(small[3] == '\0');
        CHECK(std::string(small.data()) == text.substr(0, 3));
        CHECK(small[4] == 'X');
    }
    jitmm_report_format bad;
    set_raw(bad, -1);
    char buf[64];
    EXPECT_FAILURE(jitmm_engine_describe(engine.get(), bad, buf, sizeof buf, nullptr), JITMM_STATUS_INVALID_VALUE,
                   "format");
    EXPECT_FAILURE(jitmm_engine_describe(engine.get(), JITMM_REPORT_TEXT, nullptr, 0, nullptr),
                   JITMM_STATUS_NULL_POINTER, "buffer");
}

// ---------------------------------------------------------------------------------------------------------
// Error state and recovery.

TEST_CASE("api: the last error message is per thread", "[api]") {
    jitmm_dtype out;
    REQUIRE(jitmm_dtype_from_name("main-thread-name", &out) == JITMM_STATUS_INVALID_VALUE);
    std::string other_before, other_after;
    std::thread t([&] {
        other_before = jitmm_last_error_message();
        jitmm_epilogue e;
        (void)jitmm_epilogue_from_name("other-thread-name", &e);
        other_after = jitmm_last_error_message();
    });
    t.join();
    CHECK(other_before.empty());
    CHECK_THAT(other_after, Catch::Contains("other-thread-name"));
    CHECK_THAT(std::string(jitmm_last_error_message()), Catch::Contains("main-thread-name"));
}

TEST_CASE("api: the engine stays usable after many failed calls", "[api]") {
    EngineHolder engine(2);
    const jitmm_matmul_desc good = make_desc(37, 29, 23);
    // A varied run of failures on the same engine.
    for (int round = 0; round < 3; ++round) {
        jitmm_matmul_desc d = good;
        d.m = 0;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_DIMENSION, "desc.m");
        d = good;
        d.lda = 1;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_LEADING_DIM, "desc.lda");
        d = good;
        d.a_type = JITMM_DTYPE_BF16;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_UNSUPPORTED, "bf16");
        d = good;
        d.k = int64_t{1} << 40;
        d.m = int64_t{1} << 40;
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_OVERFLOW, "A (");
        d = good;
        d.beta = std::numeric_limits<float>::quiet_NaN();
        EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.beta");
        jitmm_kernel* kernel = nullptr;
        REQUIRE(jitmm_kernel_create(engine.get(), &good, &kernel) == JITMM_STATUS_SUCCESS);
        EXPECT_FAILURE(jitmm_kernel_run(kernel, nullptr), JITMM_STATUS_NULL_POINTER, "args");
        jitmm_kernel_release(kernel);
    }
    // Then a valid call computes the right thing, through both entry points, with alpha/beta in play.
    jitmm_matmul_desc d = good;
    run_and_check(engine.get(), d, 300);
    d.alpha = 0.75f;
    d.beta = -2.0f;
    d.trans_b = 1;
    run_and_check(engine.get(), d, 301);
}

TEST_CASE("api: a kernel stays valid and correct after its engine is destroyed", "[api]") {
    jitmm_engine_config config;
    REQUIRE(jitmm_engine_config_init(&config) == JITMM_STATUS_SUCCESS);
    config.cache_dir = "";
    config.num_threads = 2;
    jitmm_engine* engine = nullptr;
    REQUIRE(jitmm_engine_create(&config, &engine) == JITMM_STATUS_SUCCESS);
    jitmm_matmul_desc d = make_desc(64, 48, 40);  // big enough to fan out over the engine's threads
    d.beta = 1.0f;
    jitmm_kernel* kernel = nullptr;
    REQUIRE(jitmm_kernel_create(engine, &d, &kernel) == JITMM_STATUS_SUCCESS);
    EXPECT_SUCCESS(jitmm_engine_destroy(engine));

    std::mt19937 rng(400);
    Buffers buf = make_buffers(d, rng);
    const jitmm_matmul_args args = make_args(buf.a.data(), buf.b.data(), buf.c.data());
    EXPECT_SUCCESS(jitmm_kernel_run(kernel, &args));
    check_against_reference(d, buf);
    jitmm_kernel_info info;
    info.struct_size = sizeof info;
    EXPECT_SUCCESS(jitmm_kernel_get_info(kernel, &info));
    CHECK(std::strlen(info.key_hex) == 32);
    EXPECT_SUCCESS(jitmm_kernel_release(kernel));
}

// Per-block fp8 scales (A 1x128, B 128x128): both sides or neither, fp8 inputs only; the CPU has no fp8
// kernel and says so (the GPU cases are in test_cuda.cpp).
TEST_CASE("api: per-block scales come in pairs on fp8 inputs", "[api]") {
    EngineHolder engine(1);
    jitmm_matmul_desc d = make_desc(64, 64, 256);
    d.a_type = d.b_type = JITMM_DTYPE_F8_E4M3;
    d.c_type = JITMM_DTYPE_BF16;
    d.a_scale_mode = JITMM_SCALE_PER_BLOCK_128;
    EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "come in pairs");
    d.b_scale_mode = JITMM_SCALE_PER_COLUMN;
    EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.b_scale_mode");
    d.a_scale_mode = JITMM_SCALE_PER_ROW;
    d.b_scale_mode = JITMM_SCALE_PER_BLOCK_128;
    EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_INVALID_VALUE, "desc.a_scale_mode");
    d.a_scale_mode = JITMM_SCALE_PER_BLOCK_128;
    EXPECT_DESC_REJECTED(engine.get(), d, JITMM_STATUS_UNSUPPORTED, "f8_e4m3");  // valid, but not on this CPU
    jitmm_matmul_desc s8 = d;
    s8.a_type = s8.b_type = JITMM_DTYPE_S8;
    s8.c_type = JITMM_DTYPE_F32;
    EXPECT_DESC_REJECTED(engine.get(), s8, JITMM_STATUS_INVALID_VALUE, "for fp8 inputs");
}
