// x86 f32 matmul correctness: JIT kernels against a float64 reference over randomized shapes, every
// layout, ld > width, batches, epilogues, alpha/beta edge values and thread counts, at each ISA tier this
// machine can be capped to. Outputs are poisoned before every run; padding between rows must stay intact.
#include "env_guard.hpp"
#include "guard_page.hpp"
#include "hw/cpu.hpp"
#include "plan/x86_dot_plan.hpp"
#include "plan/x86_gemm_partition.hpp"
#include "plan/x86_gemm_plan.hpp"
#include "plan/x86_gemv_plan.hpp"
#include "plan/x86_kgroup_plan.hpp"
#include "skip.hpp"
#include "x86/gemm_f32_kgroup_kernel.hpp"
#include "x86/gemm_f32_split_finish.hpp"
#include "x86/pack.hpp"
#include "x86/transpose_a_rows.hpp"

#include <catch2/catch.hpp>
#include <jitmm/jitmm.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sys/mman.h>
#include <unistd.h>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr float kPadSentinel = 12345.0f;

struct Case {
    int64_t m, n, k, batch = 1;
    bool ta = false, tb = false;
    int64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;  // ld = tight + pad
    float alpha = 1, beta = 0;
    jitmm_epilogue epilogue = JITMM_EPILOGUE_NONE;
    jitmm_bias_layout bias_layout = JITMM_BIAS_PER_COLUMN;
    bool share_b = false;  // stride_b = 0: one B for every batch
    bool share_a = false;  // stride_a = 0: one A for every batch
};

std::string describe(const Case& c) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%lldx%lldx%lld batch=%lld %c%c pads=%lld/%lld/%lld alpha=%g beta=%g %s %s%s%s",
                  (long long)c.m, (long long)c.n, (long long)c.k, (long long)c.batch, c.ta ? 'T' : 'N',
                  c.tb ? 'T' : 'N', (long long)c.lda_pad, (long long)c.ldb_pad, (long long)c.ldc_pad, c.alpha, c.beta,
                  jitmm_epilogue_name(c.epilogue), c.bias_layout == JITMM_BIAS_PER_ROW ? "row-bias" : "col-bias",
                  c.share_b ? " shared-B" : "", c.share_a ? " shared-A" : "");
    return buf;
}

double activate(jitmm_epilogue e, double x) {
    switch (e) {
        case JITMM_EPILOGUE_RELU: case JITMM_EPILOGUE_BIAS_RELU: return x > 0 ? x : 0;
        case JITMM_EPILOGUE_GELU_TANH: case JITMM_EPILOGUE_BIAS_GELU_TANH:
            // 0.5 x (1 + tanh(u)) as x / (1 + exp(-2u)): 1 + tanh(u) cancels to nothing in double once u < -18.
            return x / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        case JITMM_EPILOGUE_GELU_ERF: case JITMM_EPILOGUE_BIAS_GELU_ERF: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));  // = 1 + erf(z): no cancellation
        case JITMM_EPILOGUE_SILU: case JITMM_EPILOGUE_BIAS_SILU: return x / (1 + std::exp(-x));
        default: return x;
    }
}

bool has_bias(jitmm_epilogue e) { return e == JITMM_EPILOGUE_BIAS || e >= JITMM_EPILOGUE_BIAS_RELU; }

// Runs one case on the engine and checks it; returns the relative Frobenius error of the worst batch.
void check_case(jitmm_engine* engine, const Case& c, std::mt19937& rng) {
    INFO("case: " << describe(c));
    const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
    const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
    const int64_t lda = a_cols + c.lda_pad, ldb = b_cols + c.ldb_pad, ldc = c.n + c.ldc_pad;
    const int64_t stride_a = c.share_a ? 0 : a_rows * lda, stride_b = c.share_b ? 0 : b_rows * ldb, stride_c = c.m * ldc;

    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::vector<float> a(std::max<int64_t>(stride_a, a_rows * lda) * c.batch), b(std::max<int64_t>(stride_b, b_rows * ldb) * c.batch);
    std::vector<float> bias(has_bias(c.epilogue) ? (c.bias_layout == JITMM_BIAS_PER_ROW ? c.m : c.n) : 1);
    for (auto& x : a) x = uni(rng);
    for (auto& x : b) x = uni(rng);
    for (auto& x : bias) x = uni(rng);
    // C: random where beta reads it, NaN where it must not be read; padding holds a sentinel.
    std::vector<float> c0(stride_c * c.batch);
    for (int64_t i = 0; i < (int64_t)c0.size(); ++i) {
        const bool pad = (i % ldc) >= c.n;
        c0[i] = pad ? kPadSentinel : (c.beta != 0 ? uni(rng) : std::numeric_limits<float>::quiet_NaN());
    }
    std::vector<float> out = c0;

    jitmm_matmul_desc d;
    REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
    d.m = c.m; d.n = c.n; d.k = c.k; d.batch_count = c.batch;
    d.trans_a = c.ta; d.trans_b = c.tb;
    d.lda = lda; d.ldb = ldb; d.ldc = ldc;
    d.stride_a = stride_a; d.stride_b = stride_b; d.stride_c = stride_c;
    d.alpha = c.alpha; d.beta = c.beta;
    d.epilogue = c.epilogue;
    d.bias_layout = c.bias_layout;
    jitmm_matmul_args args;
    REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
    args.a = a.data(); args.b = b.data(); args.c = out.data(); args.bias = bias.data();
    const jitmm_status st = jitmm_matmul(engine, &d, &args);
    INFO("status: " << jitmm_status_string(st) << " " << jitmm_last_error_message());
    REQUIRE(st == JITMM_STATUS_SUCCESS);

    const double bound = 1e-5 * std::sqrt(double(c.k)) + 1e-6;
    for (int64_t bt = 0; bt < c.batch; ++bt) {
        double err2 = 0, ref2 = 0;
        int64_t bad_pad = 0, non_finite = 0;
        for (int64_t i = 0; i < c.m; ++i) {
            for (int64_t j = 0; j < ldc; ++j) {
                const float got = out[bt * stride_c + i * ldc + j];
                if (j >= c.n) {
                    bad_pad += got != kPadSentinel;
                    continue;
                }
                double acc = 0;
                for (int64_t p = 0; p < c.k; ++p) {
                    const double av = c.ta ? a[bt * stride_a + p * lda + i] : a[bt * stride_a + i * lda + p];
                    const double bv = c.tb ? b[bt * stride_b + j * ldb + p] : b[bt * stride_b + p * ldb + j];
                    acc += av * bv;
                }
                double ref = c.alpha * acc;
                if (c.beta != 0) ref += double(c.beta) * c0[bt * stride_c + i * ldc + j];
                if (has_bias(c.epilogue)) ref += bias[c.bias_layout == JITMM_BIAS_PER_ROW ? i : j];
                ref = activate(c.epilogue, ref);
                if (!std::isfinite(got)) ++non_finite;
                err2 += (got - ref) * (got - ref);
                ref2 += ref * ref;
            }
        }
        INFO("batch " << bt);
        REQUIRE(non_finite == 0);
        REQUIRE(bad_pad == 0);
        const double rel = std::sqrt(err2) / std::max(std::sqrt(ref2), 1e-30);
        INFO("relative Frobenius error " << rel << " bound " << bound);
        REQUIRE(rel <= bound);
    }
}

struct Tier {
    const char* name;
    jitmm::hw::X86Isa isa;
};

// The tiers this machine can run; a tier it lacks is reported, never silently passed.
std::vector<Tier> runnable_tiers() {
    std::vector<Tier> tiers;
    const auto best = jitmm::hw::cpu_info().best_isa;
    for (Tier t : {Tier{"avx2", jitmm::hw::X86Isa::avx2}, Tier{"avx512", jitmm::hw::X86Isa::avx512}}) {
        if (best >= t.isa) tiers.push_back(t);
        else
            WARN_SKIPPED("tier " << t.name << " not available on this CPU (best: " << jitmm::hw::isa_name(best) << ")");
    }
    return tiers;
}

jitmm_engine* make_engine(const char* max_isa, int threads) {
    jitmm_engine_config cfg;
    REQUIRE(jitmm_engine_config_init(&cfg) == JITMM_STATUS_SUCCESS);
    cfg.max_isa = max_isa;
    cfg.num_threads = threads;
    cfg.cache_dir = "";
    jitmm_engine* e = nullptr;
    REQUIRE(jitmm_engine_create(&cfg, &e) == JITMM_STATUS_SUCCESS);
    return e;
}

const int64_t kOddSizes[] = {1, 3, 7, 17, 33, 63, 65, 127};

// The generator (or, with recipe, the recipe) that serves case c (its leading dimensions as check_case sets them).
std::string generator_name(jitmm_engine* e, const Case& c, bool recipe = false) {
    jitmm_matmul_desc d;
    REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
    d.m = c.m; d.n = c.n; d.k = c.k; d.trans_a = c.ta; d.trans_b = c.tb;
    d.lda = (c.ta ? c.m : c.k) + c.lda_pad; d.ldb = (c.tb ? c.k : c.n) + c.ldb_pad; d.ldc = c.n + c.ldc_pad;
    jitmm_kernel* kernel = nullptr;
    REQUIRE(jitmm_kernel_create(e, &d, &kernel) == JITMM_STATUS_SUCCESS);
    jitmm_kernel_info info;
    info.struct_size = sizeof info;
    REQUIRE(jitmm_kernel_get_info(kernel, &info) == JITMM_STATUS_SUCCESS);
    const std::string name = recipe ? info.recipe : info.generator;
    jitmm_kernel_release(kernel);
    return name;
}

}  // namespace

TEST_CASE("x86 f32: odd sizes, every layout", "[x86][matmul]") {
    std::mt19937 rng(1234);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 1);
        for (int layout = 0; layout < 4; ++layout) {
            for (int64_t m : kOddSizes) {
                Case c;
                c.m = m;
                c.n = kOddSizes[(m * 3 + layout) % 8];
                c.k = kOddSizes[(m * 5 + layout + 1) % 8];
                c.ta = layout & 1;
                c.tb = layout & 2;
                check_case(e, c, rng);
            }
        }
        jitmm_engine_destroy(e);
    }
}

TEST_CASE("x86 f32: randomized sweep of shapes, layouts, ld padding, batches, alpha/beta, epilogues", "[x86][matmul]") {
    std::mt19937 rng(987);
    const float alphas[] = {1.0f, -1.0f, 0.5f, 0.0f};
    const float betas[] = {0.0f, 1.0f, -1.0f, 0.5f};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 2, 3, 4}) {
            jitmm_engine* e = make_engine(tier.name, threads);
            std::uniform_int_distribution<int> pick(0, 1 << 20);
            for (int it = 0; it < 14; ++it) {
                Case c;
                c.m = 1 + pick(rng) % 150;
                c.n = 1 + pick(rng) % 150;
                c.k = 1 + pick(rng) % 300;
                c.batch = 1 + pick(rng) % 3;
                c.ta = pick(rng) & 1;
                c.tb = pick(rng) & 1;
                c.lda_pad = (pick(rng) & 1) ? pick(rng) % 9 : 0;
                c.ldb_pad = (pick(rng) & 1) ? pick(rng) % 9 : 0;
                c.ldc_pad = (pick(rng) & 1) ? pick(rng) % 9 : 0;
                c.alpha = alphas[pick(rng) % 4];
                c.beta = betas[pick(rng) % 4];
                c.epilogue = static_cast<jitmm_epilogue>(pick(rng) % JITMM_EPILOGUE_COUNT);
                c.bias_layout = (pick(rng) & 1) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                c.share_b = c.batch > 1 && (pick(rng) % 3 == 0);
                check_case(e, c, rng);
            }
            jitmm_engine_destroy(e);
        }
    }
}

TEST_CASE("x86 f32: every epilogue on values spanning the activations' ranges", "[x86][matmul]") {
    std::mt19937 rng(55);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 2);
        for (int ep = 0; ep < JITMM_EPILOGUE_COUNT; ++ep) {
            for (auto layout : {JITMM_BIAS_PER_COLUMN, JITMM_BIAS_PER_ROW}) {
                Case c;
                c.m = 37;
                c.n = 45;
                c.k = 300;  // sums of 300 products of [-1,1] values reach |x| ~ 10: past the activations' knees
                c.alpha = 1.5f;
                c.beta = 0.5f;
                c.epilogue = static_cast<jitmm_epilogue>(ep);
                c.bias_layout = layout;
                check_case(e, c, rng);
            }
        }
        jitmm_engine_destroy(e);
    }
}

// Each output of the activations to f32 rounding, not only in the Frobenius norm: the erf-GELU's negative tail
// is its erfc, a value much smaller than x (an approximation accurate only in absolute terms was off by 3% at
// x = -12 there, invisible in a norm). Outer products (K = 1) put x = a * b exactly into C's pre-activation,
// from -12.5 to 4; the float64 reference per element, relative error under 2e-5 (measured: erf-GELU 3.7e-6 and
// tanh-GELU 7.3e-6 in their tails, from the rounding of their exp arguments; SiLU 2.2e-7).
TEST_CASE("x86 f32: every activation accurate per output across its range", "[x86][matmul]") {
    const int64_t n = 331;
    std::vector<float> a(1, 1.0f), b(n);
    for (int64_t j = 0; j < n; ++j) b[j] = -12.5f + 16.5f * float(j) / float(n - 1);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 1);
        for (jitmm_epilogue ep : {JITMM_EPILOGUE_GELU_ERF, JITMM_EPILOGUE_GELU_TANH, JITMM_EPILOGUE_SILU,
                                  JITMM_EPILOGUE_RELU}) {
            INFO("epilogue " << jitmm_epilogue_name(ep));
            jitmm_matmul_desc d;
            REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
            d.m = 1; d.n = n; d.k = 1; d.lda = 1; d.ldb = n; d.ldc = n;
            d.epilogue = ep;
            std::vector<float> c(n, std::numeric_limits<float>::quiet_NaN());
            jitmm_matmul_args args;
            REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
            args.a = a.data(); args.b = b.data(); args.c = c.data();
            REQUIRE(jitmm_matmul(e, &d, &args) == JITMM_STATUS_SUCCESS);
            double worst = 0;
            float worst_x = 0;
            for (int64_t j = 0; j < n; ++j) {
                const double ref = activate(ep, double(b[j]));
                // Past 1e-30 the output need only be negligible: the sigmoids saturate there (exp's argument is
                // clamped to 80 so that nothing turns denormal: tanh-GELU at -12.5 gives -2e-34 for 1e-68).
                const double err = std::abs(ref) < 1e-30 ? (std::abs(double(c[j])) < 1e-30 ? 0.0 : 1.0)
                                       : std::abs(double(c[j]) - ref) / std::abs(ref);
                if (!(err <= worst)) {
                    worst = err;
                    worst_x = b[j];
                }
            }
            INFO("worst relative error " << worst << " at x = " << worst_x);
            CHECK(worst < 2e-5);
        }
        jitmm_engine_destroy(e);
    }
}

TEST_CASE("x86 f32: larger shapes cross the cache blocks (several K, M and N blocks)", "[x86][matmul]") {
    std::mt19937 rng(77);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 2);
        const Case cases[] = {
            {1000, 300, 1023, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_ERF},
            {257, 1100, 600, 1, true, true, 3, 5, 7, 0.5f, 1.0f, JITMM_EPILOGUE_BIAS_SILU},
            {1, 4097, 1500, 1, false, true, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS},
            {33, 2000, 513, 2, true, false, 1, 0, 2, -1.0f, 0.5f, JITMM_EPILOGUE_RELU},
            // A transposed B under few row tiles: small B blocks (several N blocks, an N tail, two K blocks).
            {100, 1000, 700, 1, false, true, 0, 3, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_TANH},
            // Column tails of as many vectors as the full tile over a packed B: one body, a mask per entry.
            {200, 1020, 600, 1, false, false, 0, 0, 5, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_GELU_ERF},
            {130, 570, 300, 2, false, true, 2, 1, 3, -0.5f, 0.0f, JITMM_EPILOGUE_RELU},
        };
        for (const Case& c : cases) check_case(e, c, rng);
        jitmm_engine_destroy(e);
    }
}

TEST_CASE("x86 f32: same thread count gives bit-identical results", "[x86][matmul]") {
    jitmm_engine* e1 = make_engine(nullptr, 3);
    jitmm_engine* e2 = make_engine(nullptr, 3);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uni(-1, 1);
    const int64_t m = 300, n = 500, k = 700;
    std::vector<float> a(m * k), b(k * n), c1(m * n, 1.0f), c2(m * n, 2.0f);
    for (auto& x : a) x = uni(rng);
    for (auto& x : b) x = uni(rng);
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = m; d.n = n; d.k = k;
    jitmm_matmul_args args;
    jitmm_matmul_args_init(&args);
    args.a = a.data(); args.b = b.data();
    args.c = c1.data();
    REQUIRE(jitmm_matmul(e1, &d, &args) == JITMM_STATUS_SUCCESS);
    args.c = c2.data();
    REQUIRE(jitmm_matmul(e2, &d, &args) == JITMM_STATUS_SUCCESS);
    REQUIRE(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
    jitmm_engine_destroy(e1);
    jitmm_engine_destroy(e2);
}

TEST_CASE("x86 f32: kernels run from the memfd double mapping too (W^X fallback)", "[x86][matmul]") {
    setenv("JITMM_EXEC_MEMORY", "memfd", 1);
    std::mt19937 rng(8);
    jitmm_engine* e = make_engine(nullptr, 1);
    Case c;
    c.m = 19; c.n = 23; c.k = 29; c.epilogue = JITMM_EPILOGUE_BIAS_GELU_TANH;
    check_case(e, c, rng);
    jitmm_engine_destroy(e);
    unsetenv("JITMM_EXEC_MEMORY");
}

TEST_CASE("x86 f32: few rows times a transposed B (the dot-product family)", "[x86][matmul]") {
    std::mt19937 rng(4242);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 2);
        int it = 0;
        for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 9, 16}) {
            for (int64_t k : {1, 7, 16, 33, 200}) {
                Case c;
                c.m = m;
                c.n = kOddSizes[(m + k) % 8] + 20;
                c.k = k;
                c.tb = true;
                c.lda_pad = (it % 3 == 0) ? 5 : 0;
                c.ldb_pad = (it % 2 == 0) ? 3 : 0;
                c.ldc_pad = (it % 4 == 1) ? 2 : 0;
                c.alpha = (it % 5 == 0) ? 0.5f : 1.0f;
                c.beta = (it % 3 == 1) ? -1.0f : 0.0f;
                c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                c.bias_layout = (it % 2) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                c.batch = (it % 7 == 3) ? 2 : 1;
                check_case(e, c, rng);
                ++it;
            }
        }
        // Bt larger than L2 (its rows prefetched ahead), read by one tile as tall as M (5 to 7 rows).
        for (int64_t m : {5, 6, 7}) {
            Case c;
            c.m = m;
            c.n = 700 + m;
            c.k = 1031;
            c.tb = true;
            c.ldb_pad = 5;
            c.ldc_pad = m;
            c.beta = 0.5f;
            c.epilogue = m == 6 ? JITMM_EPILOGUE_BIAS_GELU_ERF : JITMM_EPILOGUE_BIAS;
            check_case(e, c, rng);
        }
        jitmm_engine_destroy(e);
    }
    // Many threads: a narrower tile of the same rows evens out the columns per thread (1x1000 on 16 threads:
    // 42 tiles of 24 leave some threads 72 columns, 48 of 21 leave 63), with its own tail tile.
    if (jitmm::hw::cpu_info().best_isa < jitmm::hw::X86Isa::avx512) {
        WARN_SKIPPED("16-thread dot run at the avx512 tier (not available on this CPU)");
    } else {
        jitmm_engine* e16 = make_engine("avx512", 16);
        for (int64_t m : {1, 2}) {
            Case c;
            c.m = m;
            c.n = 1000;
            c.k = 2048;
            c.tb = true;
            c.ldb_pad = 3;
            c.beta = 0.5f;
            c.epilogue = JITMM_EPILOGUE_BIAS_RELU;
            check_case(e16, c, rng);
        }
        jitmm_engine_destroy(e16);
    }
    {
        CHECK(jitmm::plan::balanced_tile_width(1000, 24, 16) == 21);
        CHECK(jitmm::plan::balanced_tile_width(1000, 24, 2) == 24);     // 500 columns each already
        CHECK(jitmm::plan::balanced_tile_width(4096, 3, 16) == 3);      // 1% is not worth a narrower tile
        CHECK(jitmm::plan::balanced_tile_width(100, 24, 16) == 12);     // 5 tiles -> 9 tiles on 9 threads
        CHECK(jitmm::plan::balanced_tile_width(3, 24, 2) == 24);        // one tile of 3 columns either way
        CHECK(jitmm::plan::balanced_tile_width(8, 8, 2) == 4);          // one tile of 8 -> two of 4
        jitmm::Problem q;
        q.m = 1; q.n = 1000; q.k = 2048; q.trans_b = true; q.lda = 2048; q.ldb = 2048; q.ldc = 1000;
        const auto dot16 = jitmm::plan::plan_x86_gemm_f32_dot(q, jitmm::hw::cpu_info(), jitmm::hw::X86Isa::avx512, 16);
        CHECK(dot16.layout.nj == 21);
        CHECK(dot16.n_chunks == 16);
    }
    // The plan: one tile as tall as M up to 7 rows (AVX-512), the least-waste tile past that.
    jitmm::Problem p;
    p.n = 4096; p.k = 4096; p.trans_b = true; p.lda = 4096; p.ldb = 4096; p.ldc = 4096;
    jitmm::hw::CpuInfo cpu = jitmm::hw::cpu_info();
    cpu.few_streams_from_memory = false;  // (as on the Intel cores measured; the other kind below)
    for (int64_t m : {1, 3, 5, 6, 7, 8, 12}) {
        p.m = m;
        const auto dot = jitmm::plan::plan_x86_gemm_f32_dot(p, cpu, jitmm::hw::X86Isa::avx512, 1);
        if (m <= 7) CHECK(dot.layout.mr == m);
        else CHECK(dot.layout.mr == 4);
        // One row tile: each iteration prefetches the next column tile's Bt rows at the same K offset where
        // they are within a quarter of L2, else 2 KiB along its own rows.
        const int64_t l2 = jitmm::hw::cpu_info().l2_bytes > 0 ? jitmm::hw::cpu_info().l2_bytes : 1024 * 1024;
        const int64_t next_tile = int64_t(dot.layout.nj) * p.ldb * 4;
        CHECK(dot.layout.b_prefetch_bytes == (m <= 7 ? (next_tile <= l2 / 4 ? next_tile : 2048) : 0));
    }
    // Batches with their own Bt, each within L2 but past it together, prefetch too (2x2140x68 x5: 2.9 MB).
    {
        jitmm::Problem q;
        q.m = 2; q.n = 2140; q.k = 68; q.trans_b = true; q.lda = 68; q.ldb = 68; q.ldc = 2140;
        q.batch = 5; q.stride_a = 2 * 68; q.stride_b = 2140 * 68; q.stride_c = 2 * 2140;
        jitmm::hw::CpuInfo small_l2 = cpu;
        small_l2.l2_bytes = 1024 * 1024;
        auto prefetch_bytes = [&] {
            const auto plan = jitmm::plan::plan_x86_gemm_f32_dot(q, small_l2, jitmm::hw::X86Isa::avx512, 1);
            return plan.layout.b_prefetch_bytes;
        };
        CHECK(prefetch_bytes() > 0);
        q.stride_b = 0;  // one Bt for all: it stays in L2
        CHECK(prefetch_bytes() == 0);
        q.stride_b = 2140 * 68;
        q.m = 1; q.stride_a = 68; q.stride_c = 2140;  // one row where the prefetchers take few streams: none
        small_l2.few_streams_from_memory = true;
        CHECK(prefetch_bytes() == 0);
    }
    // A chip whose prefetchers take few streams: one row reads 8 Bt rows at once, without software prefetches,
    // where Bt passes L2 (64 MB here); a Bt within L2 keeps the wide tile.
    cpu.few_streams_from_memory = true;
    p.m = 1;
    const auto few = jitmm::plan::plan_x86_gemm_f32_dot(p, cpu, jitmm::hw::X86Isa::avx512, 1);
    CHECK(few.layout.mr == 1);
    CHECK(few.layout.nj == 8);
    CHECK(few.layout.b_prefetch_bytes == 0);
    p.n = 64; p.k = 256; p.ldb = 256; p.lda = 256; p.ldc = 64;
    CHECK(jitmm::plan::plan_x86_gemm_f32_dot(p, cpu, jitmm::hw::X86Isa::avx512, 1).layout.nj == 24);
}

TEST_CASE("x86 f32: small problems with a transposed B in one call over B transposed whole", "[x86][matmul]") {
    // What the planner does with them: one generated call, B packed whole, and the dot family left to fewer
    // rows or a longer K.
    {
        jitmm::Problem p;
        p.m = 16; p.n = 16; p.k = 16;
        p.trans_b = true;
        p.lda = 16; p.ldb = 16; p.ldc = 16;
        const auto isa = jitmm::hw::X86Isa::avx512;
        const auto plan = jitmm::plan::plan_x86_gemm_f32(p, jitmm::hw::cpu_info(), isa, 1);
        CHECK(plan.single_call);
        CHECK(plan.pack_b);
        CHECK(plan.layout.b_prefetch_runs == 0);
        CHECK_FALSE(jitmm::plan::dot_family_serves(p, isa));
        p.m = 2;
        CHECK(jitmm::plan::dot_family_serves(p, isa));
        // From 8 rows a K under 10 per row goes to the broadcast family too where B is small (16x128x128 even,
        // 16x1024x100 dot 41 us, broadcast tiles 30); a longer K keeps the dot kernel.
        p.m = 16; p.n = 128; p.k = 128; p.lda = 128; p.ldb = 128; p.ldc = 128;
        CHECK_FALSE(jitmm::plan::dot_family_serves(p, isa));
        p.k = 160; p.lda = 160; p.ldb = 160;
        CHECK(jitmm::plan::dot_family_serves(p, isa));
        // A short K over 6 or more rows goes to the broadcast family at any N (8x1536x24: 19 -> 10 us).
        p.m = 8; p.n = 1536; p.k = 24; p.lda = 24; p.ldb = 24; p.ldc = 1536;
        CHECK_FALSE(jitmm::plan::dot_family_serves(p, isa));
        p.m = 5;
        CHECK(jitmm::plan::dot_family_serves(p, isa));
        p.k = 16; p.lda = 16; p.ldb = 16;  // one vector of K: from 3 rows
        CHECK_FALSE(jitmm::plan::dot_family_serves(p, isa));
        p.m = 2;
        CHECK(jitmm::plan::dot_family_serves(p, isa));
        // Many tiles: the single call's inline code would cost JIT time; the driver's variants serve it.
        p.m = 64; p.n = 64; p.k = 64; p.lda = 64; p.ldb = 64; p.ldc = 64;
        CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(p, jitmm::hw::cpu_info(), isa, 1).single_call);
    }
    std::mt19937 rng(8080);
    const float alphas[] = {1.0f, -1.0f, 0.5f, 0.0f};
    const float betas[] = {0.0f, 1.0f, -1.0f, 0.5f};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 2, 3, 4}) {
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (int64_t m : {8, 9, 16, 17, 23, 33, 64}) {
                for (int64_t k : {1, 7, 16, 23, 64}) {
                    Case c;
                    c.m = m;
                    c.n = kOddSizes[(m + k + threads) % 8] + (it % 3 == 0 ? 16 : 0);
                    c.k = k;
                    c.tb = true;
                    c.ta = it % 5 == 4;
                    c.lda_pad = (it % 3 == 0) ? 5 : 0;
                    c.ldb_pad = (it % 2 == 0) ? 3 : 0;
                    c.ldc_pad = (it % 4 == 1) ? 2 : 0;
                    c.alpha = alphas[(it + threads) % 4];
                    c.beta = betas[(it / 2 + threads) % 4];
                    c.epilogue = static_cast<jitmm_epilogue>((it + threads) % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = (it % 2) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    c.batch = (it % 3 == 1) ? 1 + it % 5 : 1;  // batches run on threads, each packing its own B
                    c.share_b = c.batch > 1 && it % 2 == 0;
                    check_case(e, c, rng);
                    ++it;
                }
            }
            jitmm_engine_destroy(e);
        }
    }
}

namespace {

// One problem run on two engines of `threads` threads, and again on the first: all three results bit-identical.
void check_bit_identical(int64_t m, int64_t n, int64_t k, int64_t batch, bool trans_b, int threads) {
    INFO(m << "x" << n << "x" << k << " batch " << batch << (trans_b ? " NT" : " NN") << " threads " << threads);
    std::mt19937 rng(77);
    std::uniform_real_distribution<float> uni(-1, 1);
    std::vector<float> a(batch * m * k), b(batch * n * k), c1(batch * m * n), c2(batch * m * n), c3(batch * m * n);
    for (auto& x : a) x = uni(rng);
    for (auto& x : b) x = uni(rng);
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = m; d.n = n; d.k = k; d.batch_count = batch;
    d.trans_b = trans_b;
    d.lda = k; d.ldb = trans_b ? k : n; d.ldc = n;
    d.stride_a = m * k; d.stride_b = n * k; d.stride_c = m * n;
    jitmm_matmul_args args;
    jitmm_matmul_args_init(&args);
    args.a = a.data(); args.b = b.data();
    jitmm_engine* e1 = make_engine(nullptr, threads);
    jitmm_engine* e2 = make_engine(nullptr, threads);
    args.c = c1.data();
    REQUIRE(jitmm_matmul(e1, &d, &args) == JITMM_STATUS_SUCCESS);
    args.c = c2.data();
    REQUIRE(jitmm_matmul(e2, &d, &args) == JITMM_STATUS_SUCCESS);
    args.c = c3.data();
    REQUIRE(jitmm_matmul(e1, &d, &args) == JITMM_STATUS_SUCCESS);
    REQUIRE(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
    REQUIRE(std::memcmp(c1.data(), c3.data(), c1.size() * sizeof(float)) == 0);
    jitmm_engine_destroy(e1);
    jitmm_engine_destroy(e2);
}

}  // namespace

TEST_CASE("x86 f32: small NT single calls and small in-place B are bit-identical for a thread count", "[x86][matmul]") {
    for (int threads : {1, 2, 3, 4}) {
        check_bit_identical(16, 21, 19, 6, true, threads);   // transposed B, one call per batch
        check_bit_identical(200, 129, 200, 2, false, threads);  // B read in place, M x N partition
    }
}

TEST_CASE("x86 f32: more batches than threads, a contiguous run of batches per thread", "[x86][matmul]") {
    // Attention-sized and odd batches at 2-4 threads: one generated call per batch (small, transposed B) and the
    // chunked driver, shared B, every layout; against the reference and bit-identical run to run.
    std::mt19937 rng(7010);
    struct Shape {
        int64_t m, n, k, batch;
        bool ta, tb;
    };
    const Shape shapes[] = {{128, 64, 128, 12, false, false}, {128, 128, 64, 12, false, true},
                            {16, 21, 19, 7, false, true},     {33, 17, 65, 9, true, false},
                            {70, 45, 100, 5, true, true},     {32, 32, 64, 33, false, true}};
    for (const Tier& tier : runnable_tiers()) {
        for (int threads : {2, 3, 4}) {
            INFO("tier " << tier.name << " threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (const Shape& s : shapes) {
                Case c;
                c.m = s.m;
                c.n = s.n;
                c.k = s.k;
                c.batch = s.batch;
                c.ta = s.ta;
                c.tb = s.tb;
                c.share_b = it % 3 == 1;
                c.ldc_pad = it % 2;
                check_case(e, c, rng);
                ++it;
            }
            jitmm_engine_destroy(e);
        }
    }
    for (int threads : {2, 3}) {
        check_bit_identical(128, 64, 128, 12, false, threads);
        check_bit_identical(128, 128, 64, 12, true, threads);
    }
}

TEST_CASE("x86 f32: a small B as stored read in place beside an A in place", "[x86][matmul]") {
    {
        jitmm::hw::CpuInfo cpu;
        cpu.l1d_bytes = 48 * 1024;
        cpu.l2_bytes = 2048 * 1024;
        jitmm::Problem p;
        p.m = 128; p.n = 128; p.k = 128;
        p.lda = 128; p.ldb = 128; p.ldc = 128;
        const auto isa = jitmm::hw::X86Isa::avx512;
        auto plan = jitmm::plan::plan_x86_gemm_f32(p, cpu, isa, 1);
        CHECK_FALSE(plan.pack_b);
        CHECK_FALSE(plan.pack_a);
        CHECK_FALSE(plan.single_call);
        CHECK(plan.kc == 128);  // one K block, as when B was packed
        p.trans_b = true;       // a transposed B is still packed
        CHECK(jitmm::plan::plan_x86_gemm_f32(p, cpu, isa, 1).pack_b);
        p.trans_b = false;
        p.n = p.ldb = p.ldc = 2048;  // B of 1 MB: more than a quarter of L2, packed
        CHECK(jitmm::plan::plan_x86_gemm_f32(p, cpu, isa, 1).pack_b);
    }
    std::mt19937 rng(5150);
    const float alphas[] = {1.0f, -1.0f, 0.5f, 0.0f};
    const float betas[] = {0.0f, 1.0f, -1.0f, 0.5f};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 2, 3, 4}) {
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (int64_t m : {65, 127, 200}) {
                for (int64_t n : {63, 129, 300}) {
                    Case c;
                    c.m = m;
                    c.n = n;
                    c.k = it % 2 ? 129 : 200;
                    c.ta = it % 4 == 3;
                    c.lda_pad = (it % 3 == 0) ? 7 : 0;
                    c.ldb_pad = (it % 2 == 0) ? 5 : 0;
                    c.ldc_pad = (it % 4 == 1) ? 3 : 0;
                    c.alpha = alphas[(it + threads) % 4];
                    c.beta = betas[(it / 2 + threads) % 4];
                    c.epilogue = static_cast<jitmm_epilogue>((it * 3 + threads) % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = (it % 2) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    c.batch = (it % 3 == 1) ? 3 : 1;
                    c.share_b = c.batch > 1 && it % 2 == 0;
                    check_case(e, c, rng);
                    ++it;
                }
            }
            jitmm_engine_destroy(e);
        }
    }
}

namespace {

// A plain problem as the planners see it (tight leading dimensions).
jitmm::Problem plain_problem(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
    jitmm::Problem p;
    p.m = m; p.n = n; p.k = k;
    p.trans_a = ta; p.trans_b = tb;
    p.lda = ta ? m : k; p.ldb = tb ? k : n; p.ldc = n;
    return p;
}

// The same over `batch` tightly packed batches.
jitmm::Problem batched_problem(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int64_t batch) {
    jitmm::Problem p = plain_problem(m, n, k, ta, tb);
    p.batch = batch;
    p.stride_a = m * k;
    p.stride_b = k * n;
    p.stride_c = m * n;
    return p;
}

// The number of K parts the planner picks for this shape and thread count, whichever family serves it.
int planned_k_splits(int64_t m, int64_t n, int64_t k, bool ta, bool tb, jitmm::hw::X86Isa isa, int threads) {
    const jitmm::Problem p = plain_problem(m, n, k, ta, tb);
    const auto gemm = jitmm::plan::plan_x86_gemm_f32(p, jitmm::hw::cpu_info(), isa, threads);
    if (jitmm::plan::dot_family_serves(p, isa)) return jitmm::plan::plan_x86_gemm_f32_dot(p, jitmm::hw::cpu_info(), isa, threads).k_splits;
    return gemm.k_splits;
}

}  // namespace

TEST_CASE("x86 f32: K split partition", "[x86][matmul][ksplit]") {
    using jitmm::plan::choose_k_splits;
    CHECK(choose_k_splits(1, 1, 1, 8) == 1);    // one thread: never
    CHECK(choose_k_splits(4, 1, 2, 8) == 1);    // the tiles already balance
    CHECK(choose_k_splits(1, 1, 2, 8) == 2);
    CHECK(choose_k_splits(3, 1, 2, 8) == 2);    // 3 tiles on 2 threads: 2 tasks of 3 half tiles
    CHECK(choose_k_splits(3, 1, 4, 8) == 4);    // one task per thread, never more
    CHECK(choose_k_splits(1, 1, 4, 3) == 3);    // K allows only 3 parts
    CHECK(choose_k_splits(1, 1, 2, 1) == 1);
    CHECK(choose_k_splits(9, 1, 2, 8) == 1);    // enough tiles to share out
    CHECK(choose_k_splits(11, 1, 16, 32) == 16);  // 64x64 in 6x64 tiles on 16 threads
    CHECK(choose_k_splits(15, 1, 16, 32) == 1);   // 15 of 16 threads busy already: not worth a finish
    CHECK(choose_k_splits(3, 1, 8, 32) == 8);     // 16x16 NT (dot tiles 4x6) on 8 threads: 8 tasks, not 24
    CHECK(choose_k_splits(2, 2, 8, 8) == 4);      // two batches of one tile: 2 x 4 tasks
    CHECK(choose_k_splits(3, 3, 4, 8) == 1);      // three batches on four threads: a part each is too few
    for (const jitmm::hw::X86Isa isa : {jitmm::hw::X86Isa::avx2, jitmm::hw::X86Isa::avx512}) {
        if (jitmm::hw::cpu_info().best_isa < isa) continue;
        CHECK(planned_k_splits(3, 16, 8192, false, false, isa, 2) > 1);
        CHECK(planned_k_splits(1, 4, 32768, false, true, isa, 2) > 1);    // dot family, one tile
        // Tiles narrowed to even out the columns instead: N halves (2 threads, 1x64x16384 NT: 119-123 us against
        // 128-129 for K halves of 24-wide tiles; 3x8x16384 4.2-4.5 against 4.7-4.9).
        CHECK(planned_k_splits(1, 64, 16384, false, true, isa, 2) == 1);
        // An A stored K x M takes the dot family too (its rows copied first): N halves as NT.
        CHECK(planned_k_splits(3, 8, 16384, true, true, isa, 2) == 1);
        CHECK(planned_k_splits(3, 8, 16384, true, false, isa, 2) > 1);
        CHECK(planned_k_splits(16, 16, 8192, false, false, isa, 1) == 1);
        CHECK(planned_k_splits(16, 16, 64, false, false, isa, 2) == 1);   // short K: no split
    }
}

// Tiny M and N, long and odd K, 1 to 4 threads: the K-split path (parts into scratch, finish pass) against
// the float64 reference for every layout and epilogue; beta * C must be applied exactly once, C is NaN
// where beta is 0 (a stray read shows), padding must stay intact, |x| reaches ~40 (past every knee).
TEST_CASE("x86 f32: K split over threads: layouts, epilogues, beta, odd K", "[x86][matmul][ksplit]") {
    std::mt19937 rng(2024);
    const float betas[] = {0.0f, 1.0f, -1.0f, 0.5f};
    const int64_t ks[] = {8195, 12289, 16387};
    const int64_t sizes[][2] = {{1, 17}, {3, 33}, {16, 16}, {17, 5}, {33, 40}, {2, 64}};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads = 1; threads <= 4; ++threads) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0, split_cases = 0;
            for (int layout = 0; layout < 4; ++layout) {
                for (const auto& mn : sizes) {
                    Case c;
                    c.m = mn[0];
                    c.n = mn[1];
                    c.k = ks[it % 3];
                    c.ta = layout & 1;
                    c.tb = layout & 2;
                    c.lda_pad = (it % 3 == 0) ? 3 : 0;
                    c.ldb_pad = (it % 4 == 1) ? 5 : 0;
                    c.ldc_pad = (it % 2 == 0) ? 2 : 0;
                    c.alpha = (it % 5 == 2) ? 0.5f : (it % 5 == 4 ? 1.5f : 1.0f);
                    c.beta = betas[it % 4];
                    c.epilogue = static_cast<jitmm_epilogue>((it + threads) % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = (it % 3 == 1) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    c.batch = (it % 7 == 5) ? 2 : 1;
                    if (c.batch == 1 && planned_k_splits(c.m, c.n, c.k, c.ta, c.tb, tier.isa, threads) > 1) ++split_cases;
                    check_case(e, c, rng);
                    ++it;
                }
            }
            INFO("cases that split K: " << split_cases << " of " << it);
            if (threads > 1) CHECK(split_cases >= it / 4);
            jitmm_engine_destroy(e);
        }
    }
}

TEST_CASE("x86 f32: K split results are bit-identical run to run for a thread count", "[x86][matmul][ksplit]") {
    std::mt19937 rng(99);
    std::uniform_real_distribution<float> uni(-1, 1);
    for (int threads = 2; threads <= 4; ++threads) {
        for (bool tb : {false, true}) {
            INFO("threads " << threads << (tb ? " NT" : " NN"));
            const int64_t m = 1, n = 9, k = 24011;
            REQUIRE(planned_k_splits(m, n, k, false, tb, jitmm::hw::cpu_info().best_isa, threads) > 1);
            jitmm_engine* e1 = make_engine(nullptr, threads);
            jitmm_engine* e2 = make_engine(nullptr, threads);
            std::vector<float> a(m * k), b(k * n), bias(n), c0(m * n);
            for (auto& x : a) x = uni(rng);
            for (auto& x : b) x = uni(rng);
            for (auto& x : bias) x = uni(rng);
            for (auto& x : c0) x = uni(rng);
            jitmm_matmul_desc d;
            jitmm_matmul_desc_init(&d);
            d.m = m; d.n = n; d.k = k;
            d.trans_b = tb;
            d.beta = 0.75f;
            d.epilogue = JITMM_EPILOGUE_BIAS_GELU_ERF;
            jitmm_matmul_args args;
            jitmm_matmul_args_init(&args);
            args.a = a.data(); args.b = b.data(); args.bias = bias.data();
            std::vector<float> first;
            for (int run = 0; run < 6; ++run) {
                std::vector<float> c = c0;
                args.c = c.data();
                REQUIRE(jitmm_matmul(run % 2 ? e2 : e1, &d, &args) == JITMM_STATUS_SUCCESS);
                if (run == 0) first = c;
                else REQUIRE(std::memcmp(first.data(), c.data(), c.size() * sizeof(float)) == 0);
            }
            jitmm_engine_destroy(e1);
            jitmm_engine_destroy(e2);
        }
    }
}

// Larger K-split reductions (parts x M x N past kSplitFusedFinishMax) run a separate parallel finish pass;
// smaller ones are finished by the task that completes the last part. The limit forced to 0 here sends
// every split through the separate pass.
TEST_CASE("x86 f32: K split with the separate finish pass", "[x86][matmul][ksplit]") {
    std::mt19937 rng(4242);
    const int64_t sizes[][2] = {{1, 17}, {3, 33}, {16, 16}, {17, 5}, {33, 40}, {2, 64}};
    const int64_t old_limit = jitmm::x86::set_split_fused_finish_max(0);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {2, 3, 4}) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int split = 0, it = 0;
            for (const auto& mn : sizes) {
                for (int layout = 0; layout < 4; ++layout, ++it) {
                    Case c;
                    c.m = mn[0];
                    c.n = mn[1];
                    c.k = 8195 + 4 * it;
                    c.ta = layout & 1;
                    c.tb = layout & 2;
                    c.ldc_pad = it % 2;
                    c.beta = (it % 3 == 1) ? 0.5f : 0.0f;
                    c.epilogue = (it % 2) ? JITMM_EPILOGUE_BIAS_GELU_TANH : JITMM_EPILOGUE_BIAS_RELU;
                    c.bias_layout = (it % 5 == 2) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    c.batch = (it % 7 == 3) ? 2 : 1;
                    if (c.batch == 1 && planned_k_splits(c.m, c.n, c.k, c.ta, c.tb, tier.isa, threads) > 1) ++split;
                    check_case(e, c, rng);
                }
            }
            CHECK(split >= 3);
            jitmm_engine_destroy(e);
        }
    }
    jitmm::x86::set_split_fused_finish_max(old_limit);
}

// A few row tiles over a long K, on 4 threads: the partition may cut K into parts and each part's columns
// into chunks (K parts x N chunks, each task packing only its columns of its part of B); both finishes (the
// fused one and the separate pass), every layout, epilogues with a per-row or per-column bias, beta, ldc > n.
TEST_CASE("x86 f32: K parts x N chunks over threads", "[x86][matmul][ksplit]") {
    std::mt19937 rng(777);
    const int64_t shapes[][3] = {{49, 512, 4608}, {33, 700, 4100}, {20, 300, 5000}, {60, 256, 3000}};
    const int threads = 4;
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, threads);
        int k_by_n = 0, it = 0;
        for (const bool separate_pass : {false, true}) {
            // The separate pass forced by a fused-finish limit of 0, restored after.
            const int64_t saved = separate_pass ? jitmm::x86::set_split_fused_finish_max(0) : -1;
            for (const auto& s : shapes) {
                for (int layout = 0; layout < 4; ++layout, ++it) {
                    Case c;
                    c.m = s[0];
                    c.n = s[1];
                    c.k = s[2];
                    c.ta = layout & 1;
                    c.tb = layout & 2;
                    c.ldc_pad = it % 3;
                    c.beta = (it % 4 == 1) ? -1.0f : (it % 4 == 3 ? 0.5f : 0.0f);
                    c.alpha = (it % 5 == 2) ? 1.5f : 1.0f;
                    c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = (it % 3 == 1) ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    const jitmm::Problem p = plain_problem(c.m, c.n, c.k, c.ta, c.tb);
                    const auto plan = jitmm::plan::plan_x86_gemm_f32(p, jitmm::hw::cpu_info(), tier.isa, threads);
                    if (!jitmm::plan::dot_family_serves(p, tier.isa) && plan.k_splits > 1 && plan.n_chunks > 1) ++k_by_n;
                    check_case(e, c, rng);
                }
            }
            if (separate_pass) jitmm::x86::set_split_fused_finish_max(saved);
        }
        INFO("cases planned as K parts x N chunks: " << k_by_n << " of " << it);
        CHECK(k_by_n >= 2);
        jitmm_engine_destroy(e);
    }
}

// The register tiles the planner may pick (forced through JITMM_X86_TILE) and the prefetch knobs
// (JITMM_X86_PF: B rows ahead, JITMM_X86_CPF: C tile, JITMM_X86_APF: the next A tile) on tails, epilogues,
// beta and several K blocks.
TEST_CASE("x86 f32: every register tile, with and without prefetches", "[x86][matmul]") {
    // Prefetches read no data, but the kernels take their addresses as arguments (the C tile of the next call
    // from the stack) and walk them in registers the K loop shares.
    std::mt19937 rng(31);
    struct Knobs { const char* tile; const char* pf; const char* cpf; };
    const Knobs avx512_knobs[] = {{"14x2", "0", "0"}, {"12x2", "8", "1"}, {"8x3", "16", "0"}, {"6x4", "4", "1"},
                                  {"28x1", "0", "1"}, {"2x8", "8", "0"}, {"1x28", "3", "1"}, {"4x6", "0", "0"},
                                  {"12x1", "8", "0"}};  // (12 x 1: where the prefetchers take few streams)
    const Knobs avx2_knobs[] = {{"6x2", "8", "1"}, {"3x3", "0", "0"}, {"2x4", "16", "1"}, {"12x1", "5", "0"}};
    for (const Tier& tier : runnable_tiers()) {
        const bool avx512 = tier.isa >= jitmm::hw::X86Isa::avx512;
        const Knobs* knobs = avx512 ? avx512_knobs : avx2_knobs;
        const int count = avx512 ? 9 : 4;
        for (int ki = 0; ki < count; ++ki) {
            INFO("tier " << tier.name << " tile " << knobs[ki].tile << " pf " << knobs[ki].pf << " cpf " << knobs[ki].cpf);
            setenv("JITMM_X86_TILE", knobs[ki].tile, 1);
            setenv("JITMM_X86_PF", knobs[ki].pf, 1);
            setenv("JITMM_X86_CPF", knobs[ki].cpf, 1);
            setenv("JITMM_X86_APF", ki % 3 == 2 ? "0" : "1", 1);
            setenv("JITMM_X86_CNPF", ki % 2 == 1 ? "0" : "1", 1);  // the next call's C tile prefetched or not
            jitmm_engine* e = make_engine(tier.name, 1 + ki % 2);
            const Case cases[] = {
                {131, 77, 1100, 1, false, false, 0, 0, 3, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_ERF},
                {45, 130, 600, 1, true, true, 2, 1, 0, 0.5f, 1.0f, JITMM_EPILOGUE_SILU, JITMM_BIAS_PER_ROW},
                {29, 33, 70, 2, false, true, 0, 0, 0, -1.0f, 0.5f, JITMM_EPILOGUE_BIAS_RELU},
                {7, 300, 513, 1, true, false, 0, 3, 1, 1.0f, -1.0f, JITMM_EPILOGUE_BIAS},
            };
            for (const Case& c : cases) check_case(e, c, rng);
            jitmm_engine_destroy(e);
        }
    }
    unsetenv("JITMM_X86_TILE");
    unsetenv("JITMM_X86_PF");
    unsetenv("JITMM_X86_CPF");
    unsetenv("JITMM_X86_APF");
    unsetenv("JITMM_X86_CNPF");
}

// A K of a few steps: the planner prefetches the C tile before the K loop (from K 12 down, C over L1). Every
// layout, odd sizes around the tiles, ld > width, beta and a batch, each tier.
TEST_CASE("x86 f32: short K with the C tile prefetched", "[x86][matmul]") {
    std::mt19937 rng(1212);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 2);
        const Case cases[] = {
            {31, 1237, 5, 1, false, true, 0, 0, 0},
            {107, 321, 2, 1, false, true, 1, 3, 5, 1.0f, 0.5f},
            {34, 2335, 3, 1, true, true, 2, 0, 1},
            {84, 423, 5, 3, true, false, 0, 1, 0, -1.0f, 1.0f, JITMM_EPILOGUE_BIAS_RELU},
            {33, 650, 12, 2, false, false, 3, 2, 7, 0.5f, -1.0f, JITMM_EPILOGUE_BIAS_GELU_TANH, JITMM_BIAS_PER_ROW},
            {7, 2000, 1, 1, false, false, 0, 0, 3},
            {63, 217, 9, 1, true, true, 1, 1, 1, 1.0f, 0.0f, JITMM_EPILOGUE_SILU},
            // A transposed B of one or two values per stored row, dense (split by permutes) or not, and a last
            // unit of fewer than 16 stored rows (a masked transpose writing the padding as zeros).
            {5, 2280, 2, 1, true, true, 0, 0, 0},
            {5, 2283, 2, 2, true, true, 0, 0, 3, 1.0f, 0.5f},
            {9, 96, 1, 3, false, true, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS},
            {6, 100, 2, 1, false, true, 1, 2, 0},
            {15, 10, 50, 38, false, true, 0, 0, 0},
            {17, 5, 114, 4, false, true, 3, 1, 2, 0.5f, 1.0f, JITMM_EPILOGUE_BIAS_RELU, JITMM_BIAS_PER_ROW},
            {196, 5, 14, 14, false, true, 0, 0, 0},
            {40, 77, 37, 2, true, true, 0, 5, 1},
            // Up to 16 rows over fewer columns than a vector (the dot family from a K of 32).
            {12, 5, 64, 16, false, true, 2, 3, 1, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_GELU_TANH},
            {6, 12, 48, 3, false, true, 0, 0, 2},
            {16, 8, 64, 5, false, true, 1, 0, 0, -1.0f, 0.0f, JITMM_EPILOGUE_SILU, JITMM_BIAS_PER_ROW},
            {11, 6, 100, 8, false, true, 0, 16, 0},
            {16, 5, 32, 1, false, true, 0, 0, 0, 1.0f, 1.0f, JITMM_EPILOGUE_BIAS},
        };
        for (const Case& c : cases) check_case(e, c, rng);
        jitmm_engine_destroy(e);
    }
}

// A short K over many row tiles runs as one generated sweep down M per (batch, row chunk): full row tiles in
// its loop, the row tail after it, B read in place or packed whole by the task.
TEST_CASE("x86 f32: short K swept down M in one generated call", "[x86][matmul]") {
    std::mt19937 rng(1313);
    const Case cases[] = {
        {809, 32, 4, 1, false, false, 0, 0, 0},
        {114, 610, 9, 1, false, false, 3, 1, 2, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_RELU},
        {2080, 58, 6, 1, false, true, 1, 0, 5},
        {73, 970, 9, 1, false, true, 0, 2, 0, -1.0f, 1.0f, JITMM_EPILOGUE_BIAS_GELU_ERF, JITMM_BIAS_PER_ROW},
        {300, 100, 3, 3, true, false, 2, 0, 1, 0.5f, -1.0f, JITMM_EPILOGUE_SILU},
        {127, 65, 16, 2, true, true, 0, 3, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS, JITMM_BIAS_PER_ROW},
        {1000, 17, 1, 1, false, false, 0, 0, 7},
        {63, 1023, 2, 5, false, false, 1, 1, 1, 1.0f, 1.0f, JITMM_EPILOGUE_BIAS_GELU_TANH},
        {336, 48, 7, 4, false, true, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_RELU},  // rows a multiple of 12 and 14
        {640, 129, 5, 1, true, true, 5, 5, 5, 0.5f, 0.5f, JITMM_EPILOGUE_BIAS_SILU},
        {300, 4000, 2, 1, false, false, 0, 0, 3, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS},  // 125 column panels
    };
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 2, 3}) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int swept = 0;
            for (const Case& c : cases) {
                swept += generator_name(e, c, true).find("row-sweep") != std::string::npos;
                check_case(e, c, rng);
            }
            // (Some cases go elsewhere at some tiers; over several threads only batches that share them out
            // evenly are swept.)
            CHECK(swept >= (threads == 1 ? 6 : 1));
            jitmm_engine_destroy(e);
        }
    }
    // The planner's bounds: K of 16 at most, a B packed whole only where a batch is one task.
    jitmm::Problem p;
    p.m = 809; p.n = 32; p.k = 4; p.lda = 4; p.ldb = 32; p.ldc = 32;
    const auto& cpu = jitmm::hw::cpu_info();
    if (cpu.best_isa >= jitmm::hw::X86Isa::avx512) {
        CHECK(jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 1).row_sweep);
        p.k = 17; p.lda = 17;
        CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 1).row_sweep);
        p.m = 74; p.n = 1910; p.k = 7; p.trans_b = true; p.lda = 7; p.ldb = 7; p.ldc = 1910;
        CHECK(jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 1).row_sweep);
        CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 2).row_sweep);
        p.batch = 4; p.stride_a = 74 * 7; p.stride_b = 1910 * 7; p.stride_c = 74 * 1910;
        CHECK(jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 2).row_sweep);
        CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 3).row_sweep);
    }
}

// The tiles of a transposed A (stored K x M) packed a vector per tile and stored row (AVX-512) hold exactly what
// the element-by-element packer writes, for every tile height, a cut last tile and short K blocks; nothing past a
// tile's k_len x mr values is written (its vector stores end inside the panel), and nothing past A's last value is
// read (A ends at a PROT_NONE page).
TEST_CASE("x86 f32: transposed A tiles packed by vectors match the element packer", "[x86][pack]") {
    if (jitmm::hw::cpu_info().best_isa < jitmm::hw::X86Isa::avx512) {
        WARN_SKIPPED("no AVX-512 on this CPU (the element packer is the only one)");
        return;
    }
    std::mt19937 rng(4242);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (int mr : {1, 2, 4, 6, 8, 12, 14, 16}) {
        for (int64_t k_len : {1, 2, 3, 7, 33}) {
            for (int64_t m : {int64_t(mr), int64_t(3 * mr + 1), int64_t(37)}) {
                INFO("mr " << mr << " k_len " << k_len << " m " << m);
                const int64_t lda = m, k0 = 2, k_total = k0 + k_len;
                const size_t a_bytes = static_cast<size_t>(k_total * lda) * sizeof(float);
                GuardedBytes guarded_memory(static_cast<size_t>(a_bytes));
                float* a = reinterpret_cast<float*>(guarded_memory.data());
                for (int64_t i = 0; i < k_total * lda; ++i) a[i] = uni(rng);
                const int64_t tiles = (m + mr - 1) / mr;
                const int64_t panel_floats = (k_len * mr + 15) / 16 * 16;
                const float sentinel = -777.0f;
                std::vector<float> by_vectors(static_cast<size_t>(tiles * panel_floats + 16), sentinel);
                std::vector<float> by_elements = by_vectors;
                jitmm::x86::pack_a_f32_transposed_tiles(a, lda, 0, m, mr, k0, k_len, panel_floats, by_vectors.data(),
                                                        true);
                jitmm::x86::pack_a_f32_transposed_tiles(a, lda, 0, m, mr, k0, k_len, panel_floats,
                                                        by_elements.data(), false);
                for (int64_t t = 0; t < tiles; ++t) {
                    const int64_t rows = std::min<int64_t>(mr, m - t * mr);
                    for (int64_t k = 0; k < k_len; ++k)
                        for (int64_t r = 0; r < rows; ++r) {
                            const size_t at = static_cast<size_t>(t * panel_floats + k * mr + r);
                            CHECK(by_vectors[at] == a[(k0 + k) * lda + t * mr + r]);
                            CHECK(by_vectors[at] == by_elements[at]);
                        }
                    for (int64_t x = k_len * mr; x < panel_floats; ++x)
                        CHECK(by_vectors[static_cast<size_t>(t * panel_floats + x)] == sentinel);
                }
                for (size_t x = static_cast<size_t>(tiles * panel_floats); x < by_vectors.size(); ++x)
                    CHECK(by_vectors[x] == sentinel);
            }
        }
    }
}

// A transposed B's K tail (K under 8, or past whole 8 x 8 blocks) is packed by masked loads of each stored row:
// nothing past K is read. B ends exactly at a PROT_NONE page with tight rows (ldb = K), so a read of one value
// past the last row's K faults.
TEST_CASE("x86 f32: a transposed B's K tail is packed without reading past its last value (guard page)",
          "[x86][matmul]") {
    std::mt19937 rng(909);
    struct Shape {
        int64_t m, n, k;
    };
    const Shape shapes[] = {{31, 1237, 5}, {64, 48, 1}, {40, 333, 7}, {100, 32, 3}, {33, 100, 13}, {20, 65, 23},
                            {50, 77, 2}, {30, 90, 6}, {9, 40, 14}, {15, 10, 50}, {17, 5, 114}, {5, 2280, 2},
                            {5, 2283, 2}, {4, 64, 1}, {6, 41, 37}, {7, 64, 29}, {5, 160, 9}, {8, 96, 12},
                            // a last unit of fewer than 16 columns over long K: several register blocks
                            {17, 55, 618}, {6, 7, 33}, {12, 71, 40}};
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (const Tier& tier : runnable_tiers()) {
        jitmm_engine* e = make_engine(tier.name, 1);
        for (const Shape& s : shapes) {
            INFO("tier " << tier.name << " " << s.m << "x" << s.n << "x" << s.k << " NT");
            const size_t b_bytes = static_cast<size_t>(s.n * s.k) * sizeof(float);
            GuardedBytes guarded_memory(static_cast<size_t>(b_bytes));
            float* b = reinterpret_cast<float*>(guarded_memory.data());
            for (int64_t i = 0; i < s.n * s.k; ++i) b[i] = uni(rng);
            std::vector<float> a(static_cast<size_t>(s.m * s.k)), out(static_cast<size_t>(s.m * s.n),
                                                                       std::numeric_limits<float>::quiet_NaN());
            for (auto& v : a) v = uni(rng);
            jitmm_matmul_desc d;
            REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
            d.m = s.m; d.n = s.n; d.k = s.k;
            d.trans_b = 1;
            d.lda = s.k; d.ldb = s.k; d.ldc = s.n;
            jitmm_matmul_args args;
            REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
            args.a = a.data(); args.b = b; args.c = out.data();
            REQUIRE(jitmm_matmul(e, &d, &args) == JITMM_STATUS_SUCCESS);
            double worst = 0;
            for (int64_t i = 0; i < s.m; ++i)
                for (int64_t j = 0; j < s.n; ++j) {
                    double ref = 0, mag = 0;
                    for (int64_t k = 0; k < s.k; ++k) {
                        ref += double(a[i * s.k + k]) * b[j * s.k + k];
                        mag += std::fabs(double(a[i * s.k + k]) * b[j * s.k + k]);
                    }
                    const double err = std::fabs(out[i * s.n + j] - ref) / (mag + 1e-30);
                    worst = std::isfinite(out[i * s.n + j]) ? std::max(worst, err) : 1e30;
                }
            CHECK(worst <= 1e-6);
        }
        jitmm_engine_destroy(e);
    }
}

// One row of A stored K x 1 (lda 1) is planned as the same K values stored 1 x K: a transposed B then takes the
// dot family. Against the reference with every epilogue, batches, a strided C and lda 1 or not (a strided
// column keeps the transposed layout).
TEST_CASE("x86 f32: one row of A stored K x 1 runs as a row", "[x86][matmul]") {
    std::mt19937 rng(4141);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 2);
        int it = 0;
        for (int64_t n : {1, 7, 300, 1200}) {
            for (int64_t k : {1, 33, 1000}) {
                for (bool tb : {false, true}) {
                    Case c{1, n, k, it % 3 == 1 ? 3 : 1, true, tb, it % 4 == 3 ? 2 : 0, tb ? 1 : 3, it % 2,
                           it % 5 == 0 ? -0.5f : 1.0f, it % 3 == 2 ? 0.5f : 0.0f,
                           static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT)};
                    c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    // One output value: an activation's tail (gelu of a sum of -10) would make the relative
                    // error meaningless.
                    if (n == 1) c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS : JITMM_EPILOGUE_NONE;
                    check_case(e, c, rng);
                    ++it;
                }
            }
        }
        jitmm_engine_destroy(e);
    }
    Case row{1, 4096, 512, 1, true, true};  // lda 1: one row of A stored K x 1
    jitmm_engine* e = make_engine("avx512", 1);
    if (jitmm::hw::cpu_info().best_isa >= jitmm::hw::X86Isa::avx512)
        CHECK(generator_name(e, row).find("dot") != std::string::npos);
    else
        WARN("SKIPPED the dot-family check: no AVX-512 on this CPU (the results above are checked at every tier)");
    jitmm_engine_destroy(e);
}


// Outer products (K = 1): an A stored 1 x M is planned as an M x 1 column, a B stored N x 1 with ldb 1 as a
// 1 x N row (no transposing packs). Every layout, ldb 1 and past it, lda past M, batches with a shared A or B,
// every epilogue, 1 and 3 threads, against the reference.
TEST_CASE("x86 f32: outer products (K = 1) in every layout", "[x86][matmul]") {
    std::mt19937 rng(5252);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (int64_t m : {2, 17, 424}) {
                for (int64_t n : {5, 24, 146}) {
                    for (int layout = 0; layout < 4; ++layout) {
                        Case c;
                        c.m = m; c.n = n; c.k = 1;
                        c.ta = layout & 1;
                        c.tb = layout & 2;
                        c.lda_pad = it % 3 == 2 ? 3 : 0;
                        c.ldb_pad = it % 4 == 1 ? 2 : 0;  // ldb 1 (a row in disguise) or past it
                        c.ldc_pad = it % 5 == 3 ? 1 : 0;
                        c.alpha = it % 6 == 4 ? -1.0f : 1.0f;
                        c.beta = it % 3 == 1 ? 0.5f : 0.0f;
                        c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = (it / 2) % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        c.batch = it % 4 == 2 ? 6 : 1;
                        c.share_a = c.batch > 1 && it % 8 == 2;
                        check_case(e, c, rng);
                        ++it;
                    }
                }
            }
            jitmm_engine_destroy(e);
        }
    }
}

// Few rows of an A stored K x M (trans_a) times a B stored N x K: the dot family, with op(A) copied into rows
// once per call (every batch, before the threads split N or K). Against the reference with every epilogue,
// alpha/beta edge values, lda > M, batch strides with a shared A or B, 1 and 3 threads.
namespace {

jitmm::Problem dot_problem(const Case& c) {
    jitmm::Problem p;
    p.m = c.m; p.n = c.n; p.k = c.k; p.batch = c.batch; p.trans_a = c.ta; p.trans_b = c.tb;
    p.lda = (c.ta ? c.m : c.k) + c.lda_pad; p.ldb = (c.tb ? c.k : c.n) + c.ldb_pad; p.ldc = c.n + c.ldc_pad;
    return p;
}

// C of op(A) * B^T with A given as rows (M x K, stored as is) or as their transpose (K x M): same values.
std::vector<float> run_rows_or_transposed(jitmm_engine* e, int64_t m, int64_t n, int64_t k, bool ta,
                                          const std::vector<float>& a_rows, const std::vector<float>& bt) {
    std::vector<float> a(a_rows.size());
    for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < k; ++p) (ta ? a[p * m + i] : a[i * k + p]) = a_rows[i * k + p];
    std::vector<float> c(m * n, std::numeric_limits<float>::quiet_NaN());
    jitmm_matmul_desc d;
    REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
    d.m = m; d.n = n; d.k = k; d.trans_a = ta; d.trans_b = 1;
    d.lda = ta ? m : k; d.ldb = k; d.ldc = n;
    d.epilogue = JITMM_EPILOGUE_BIAS_GELU_ERF;
    std::vector<float> bias(n, 0.25f);
    jitmm_matmul_args args;
    REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
    args.a = a.data(); args.b = bt.data(); args.c = c.data(); args.bias = bias.data();
    REQUIRE(jitmm_matmul(e, &d, &args) == JITMM_STATUS_SUCCESS);
    return c;
}

}  // namespace

TEST_CASE("x86 f32: few rows of an A stored K x M times a transposed B (dot family with A copied to rows)",
          "[x86][matmul]") {
    std::mt19937 rng(6161);
    const float alphas[] = {1.0f, -1.0f, 0.5f, 0.0f};
    const float betas[] = {0.0f, 1.0f, -0.5f};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (int64_t m : {2, 3, 7, 16}) {
                for (int64_t k : {1, 7, 33, 1000}) {
                    for (int64_t n : {1, 7, 33, 1000}) {
                        Case c;
                        c.m = m; c.n = n; c.k = k;
                        c.ta = true; c.tb = true;
                        c.lda_pad = it % 3 == 0 ? 0 : it % 3 == 1 ? 3 : 17;  // lda > M, up to past a line
                        c.ldb_pad = it % 4 == 1 ? 5 : 0;
                        // N = 1 with a dense C is a matrix times a vector (the swapped path): a strided C keeps
                        // it here.
                        c.ldc_pad = n == 1 ? 2 : it % 5 == 2 ? 3 : 0;
                        c.alpha = alphas[it % 4];
                        c.beta = betas[it % 3];
                        c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = (it / 2) % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        c.batch = it % 4 == 3 ? 3 : 1;
                        c.share_b = c.batch > 1 && it % 8 == 3;
                        c.share_a = c.batch > 1 && it % 8 == 7;
                        // A lone output value under an activation's tail makes the relative error meaningless.
                        if (n == 1 && m <= 3) c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS : JITMM_EPILOGUE_NONE;
                        // (K = 1 is planned as an outer product of untransposed operands: no dot family; a short
                        // K over many columns takes the swapped k-group kernel.)
                        if (k > 1 && jitmm::plan::dot_family_serves(dot_problem(c), tier.isa) &&
                            !jitmm::plan::kgroup_serves_swapped(dot_problem(c), tier.isa))
                            CHECK(generator_name(e, c).find("_dot_") != std::string::npos);
                        check_case(e, c, rng);
                        ++it;
                    }
                }
            }
            // Where the threads split the work (3 threads), each task must see the copied rows: K parts of one
            // column tile and N chunks (rows copied once per call), one batch per task (copied in the task).
            const Case split_cases[] = {
                {3, 4, 65536, 1, true, true, 1, 0, 1, 0.5f, 1.0f, JITMM_EPILOGUE_BIAS_SILU},    // K in 3 parts
                {2, 5, 60013, 2, true, true, 0, 3, 0, -1.0f, 0.0f, JITMM_EPILOGUE_BIAS},        // 2 batches
                {3, 1000, 1000, 2, true, true, 2, 0, 0, 1.0f, 0.5f, JITMM_EPILOGUE_GELU_TANH},  // N chunks
                {16, 1000, 1000, 3, true, true, 5, 1, 3, 1.0f, 0.0f, JITMM_EPILOGUE_RELU},      // batch tasks
            };
            for (Case c : split_cases) {
                c.share_b = c.m == 2;
                c.share_a = c.m == 16;
                check_case(e, c, rng);
            }
            jitmm_engine_destroy(e);
        }
    }
    // The shapes this was made for take the dot family (16x4096x4096 TT was on the broadcast tiles; 2x702x11 x16,
    // a short K over many columns, now takes the swapped k-group kernel, and a K of 64 stays here).
    if (jitmm::hw::cpu_info().best_isa >= jitmm::hw::X86Isa::avx512) {
        jitmm_engine* e = make_engine("avx512", 1);
        CHECK(generator_name(e, Case{2, 702, 11, 16, true, true}) == "x86_f32_kgroup_avx512_swapped");
        for (const Case& c : {Case{2, 702, 64, 16, true, true}, Case{16, 4096, 4096, 1, true, true},
                              Case{7, 1000, 65, 1, true, true, 5}, Case{3, 1000, 300, 8, true, true}})
            CHECK(generator_name(e, c) == "x86_f32_dot_avx512");
        jitmm_engine_destroy(e);
    } else {
        WARN("SKIPPED the dot-family generator check: no AVX-512 on this CPU (results above checked at every tier)");
    }
    // The copied rows are read exactly as rows given in place: the same tile and sums, so bit-identical C, on
    // one thread and on three (N split, and K split for the long K). (The C-transposed path is kept off: where
    // A passes L2, 5x4x65536 TT on a 1 MiB L2 (Zen 4), it serves the transposed A instead, and faster.)
    const EnvGuard dot_not_transposed_c("JITMM_X86_CT", "0");
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (int threads : {1, 3}) {
        jitmm_engine* e = make_engine(nullptr, threads);
        for (int64_t k : {33, 1000, 65536}) {
            const int64_t m = 5, n = k == 65536 ? 4 : 300;  // 3 threads: K parts, N chunks
            std::vector<float> a_rows(m * k), bt(n * k);
            for (auto& x : a_rows) x = uni(rng);
            for (auto& x : bt) x = uni(rng);
            const std::vector<float> as_rows = run_rows_or_transposed(e, m, n, k, false, a_rows, bt);
            const std::vector<float> copied = run_rows_or_transposed(e, m, n, k, true, a_rows, bt);
            INFO("threads " << threads << " k " << k);
            CHECK(std::memcmp(as_rows.data(), copied.data(), as_rows.size() * sizeof(float)) == 0);
        }
        jitmm_engine_destroy(e);
    }
    // The plan: rows of whole lines, never a multiple of 1 KiB apart (those share L1 sets), in the key.
    CHECK(jitmm::x86::transposed_a_row_stride(1) == 16);
    CHECK(jitmm::x86::transposed_a_row_stride(11) == 16);
    CHECK(jitmm::x86::transposed_a_row_stride(1000) == 1008);
    CHECK(jitmm::x86::transposed_a_row_stride(256) == 272);
    CHECK(jitmm::x86::transposed_a_row_stride(4096) == 4112);
    const jitmm::Problem p = dot_problem(Case{16, 4096, 4096, 1, true, true});
    const auto dot = jitmm::plan::plan_x86_gemm_f32_dot(p, jitmm::hw::cpu_info(), jitmm::hw::X86Isa::avx512, 1);
    CHECK(dot.a_transposed);
    CHECK(dot.layout.lda == 4112);
    // The thread splits the cases above rely on (avx512 tiles; the split itself is the same at avx2).
    const auto k_parts = jitmm::plan::plan_x86_gemm_f32_dot(dot_problem(Case{3, 4, 65536, 1, true, true}),
                                                            jitmm::hw::cpu_info(), jitmm::hw::X86Isa::avx512, 3);
    CHECK(k_parts.k_splits == 3);
    const auto n_chunks = jitmm::plan::plan_x86_gemm_f32_dot(dot_problem(Case{3, 1000, 1000, 2, true, true}),
                                                             jitmm::hw::cpu_info(), jitmm::hw::X86Isa::avx512, 3);
    CHECK(n_chunks.n_chunks == 3);  // 2 batches x 3 chunks: two rounds of 3 tasks (2 x 2 left a thread idle)
}

// Many rows over fewer columns than a vector and a long K, B stored N x K: the dot family (vectors along K)
// instead of broadcast tiles whose vectors along N would be mostly padding. Row tiles of several sizes (the
// tile fits N's width, rows run in chunks over the threads), every epilogue, alpha/beta edge values, ld > width,
// batches with a shared A or B, 1 and 3 threads, against the float64 reference.
TEST_CASE("x86 f32: many rows over few columns of a transposed B on the dot family", "[x86][matmul]") {
    // Which shapes the rule takes (AVX-512: up to 8 columns from K = 128, up to 15 from K = 512).
    {
        const auto avx512 = jitmm::hw::X86Isa::avx512, avx2 = jitmm::hw::X86Isa::avx2;
        auto nt = [](int64_t m, int64_t n, int64_t k) { return dot_problem(Case{m, n, k, 1, false, true}); };
        CHECK(jitmm::plan::dot_family_serves(nt(23, 7, 1892), avx512));
        CHECK(jitmm::plan::dot_family_serves(nt(300, 8, 128), avx512));
        CHECK(jitmm::plan::dot_family_serves(nt(256, 15, 1024), avx512));
        // Over half a vector, batches of As past L2 between them keep the broadcast tiles; half a vector does not.
        auto batched_nt = [](int64_t m, int64_t n, int64_t k, int64_t batch) {
            jitmm::Problem p = dot_problem(Case{m, n, k, batch, false, true});
            p.stride_a = m * k;  // an A per batch
            return p;
        };
        CHECK_FALSE(jitmm::plan::dot_family_serves(batched_nt(65, 14, 2000, 24), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(batched_nt(256, 13, 1024, 4), avx512));
        CHECK(jitmm::plan::dot_family_serves(batched_nt(64, 4, 1024, 32), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(300, 12, 128), avx512));    // short K, over half a vector
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(300, 7, 32), avx512));      // K of two vectors
        CHECK(jitmm::plan::dot_family_serves(nt(17, 5, 114), avx512));            // from a K of 64
        CHECK(jitmm::plan::dot_family_serves(nt(2000, 5, 64), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(17, 5, 48), avx512));
        // Up to 16 rows over fewer columns than a vector, from a K of 32: up to 5 columns, up to 8 from a K of
        // 64, fewer than 16 over up to 6 rows.
        CHECK(jitmm::plan::dot_family_serves(nt(12, 5, 64), avx512));
        CHECK(jitmm::plan::dot_family_serves(nt(16, 5, 32), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(16, 5, 24), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(16, 8, 32), avx512));
        CHECK(jitmm::plan::dot_family_serves(nt(16, 8, 64), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(16, 10, 64), avx512));
        CHECK(jitmm::plan::dot_family_serves(nt(6, 12, 48), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(7, 12, 32), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(15, 10, 50), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(12, 5, 64), avx2));  // measured on AVX-512 only
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(2, 2998, 5), avx512));      // two rows, K under 8
        CHECK(jitmm::plan::dot_family_serves(nt(1, 2998, 5), avx512));
        CHECK(jitmm::plan::dot_family_serves(nt(2, 2998, 8), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(1000, 16, 512), avx512));   // a full vector of columns
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(1000, 10, 1000), avx512));  // A of 4 MB, from memory
        CHECK(jitmm::plan::dot_family_serves(nt(300, 4, 128), avx2));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nt(300, 7, 128), avx2));  // over half an AVX2 vector
        jitmm::Problem tt = nt(23, 7, 1892);
        tt.trans_a = true;
        tt.lda = 23;
        CHECK_FALSE(jitmm::plan::dot_family_serves(tt, avx512));  // the dot family would copy A into rows
        // Three threads take row chunks of one batch.
        const auto plan = jitmm::plan::plan_x86_gemm_f32_dot(nt(300, 7, 1000), jitmm::hw::cpu_info(), avx512, 3);
        CHECK(plan.m_chunks == 3);
        CHECK(plan.n_chunks == 1);
        // Rows over several tiles (8 to 16): the fewest vector loads per output column (13 rows: 4x6, not the
        // unpadded 1x24 that streams Bt once per row).
        const auto thirteen = jitmm::plan::plan_x86_gemm_f32_dot(nt(13, 106, 631), jitmm::hw::cpu_info(), avx512, 1);
        CHECK(thirteen.layout.mr == 4);
        CHECK(thirteen.layout.nj == 6);
        // Batches whose A together pass L2 run every column tile of a row tile before the next row tile.
        jitmm::hw::CpuInfo cpu;
        cpu.l1d_bytes = 48 * 1024;
        cpu.l2_bytes = 2048 * 1024;
        jitmm::Problem batched = nt(140, 13, 1315);
        CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32_dot(batched, cpu, avx512, 1).rows_outer);
        batched.batch = 10;
        batched.stride_a = 140 * 1315; batched.stride_b = 13 * 1315; batched.stride_c = 140 * 13;
        CHECK(jitmm::plan::plan_x86_gemm_f32_dot(batched, cpu, avx512, 1).rows_outer);
        CHECK(jitmm::plan::plan_x86_gemm_f32_dot(batched, cpu, avx512, 1).layout.a_prefetch_bytes > 0);
    }
    std::mt19937 rng(7373);
    const float alphas[] = {1.0f, -1.0f, 0.5f, 0.0f};
    const float betas[] = {0.0f, 1.0f, -0.5f};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (int64_t m : {17, 33, 127}) {
                for (int64_t k : {64, 114, 128, 1000}) {
                    for (int64_t n : {1, 3, 7, 15}) {
                        Case c;
                        c.m = m; c.n = n; c.k = k;
                        c.tb = true;
                        c.lda_pad = it % 3 == 1 ? 5 : 0;
                        c.ldb_pad = it % 4 == 1 ? 16 : it % 4 == 2 ? 3 : 0;
                        c.ldc_pad = n == 1 ? 2 : it % 5 == 2 ? 3 : 0;  // N = 1 dense would take the swapped path
                        c.alpha = alphas[it % 4];
                        c.beta = betas[it % 3];
                        c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = (it / 2) % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        c.batch = it % 4 == 3 ? 3 : 1;
                        c.share_b = c.batch > 1 && it % 8 == 3;
                        c.share_a = c.batch > 1 && it % 8 == 7;
                        if (jitmm::plan::dot_family_serves(dot_problem(c), tier.isa))
                            CHECK(generator_name(e, c).find("_dot_") != std::string::npos);
                        check_case(e, c, rng);
                        ++it;
                    }
                }
            }
            jitmm_engine_destroy(e);
        }
    }
    if (jitmm::hw::cpu_info().best_isa >= jitmm::hw::X86Isa::avx512) {
        jitmm_engine* e = make_engine("avx512", 1);
        for (const Case& c : {Case{23, 7, 1892, 7, false, true}, Case{52, 5, 784, 1, false, true},
                              Case{256, 15, 1024, 1, false, true}})
            CHECK(generator_name(e, c) == "x86_f32_dot_avx512");
        // Row tiles outer (A of all batches past L2), two column tiles, a bias per row and beta.
        std::mt19937 rng2(1315);
        Case many{140, 13, 1315, 8, false, true, 3, 1, 2, 0.5f, 1.0f, JITMM_EPILOGUE_BIAS_RELU, JITMM_BIAS_PER_ROW};
        CHECK(generator_name(e, many) == "x86_f32_dot_avx512");
        check_case(e, many, rng2);
        jitmm_engine_destroy(e);
    } else {
        WARN("SKIPPED the dot-family generator check: no AVX-512 on this CPU (results above checked at every tier)");
    }
}

// Many rows over few columns of a B stored K x N (NN): the dot family reads A's rows whole after copying B^T into
// rows (plan.b_transposed). Which shapes the rule takes, then against the float64 reference: row and column tails,
// every epilogue and bias layout, alpha/beta edge values, ld > width on A, B and C, batches with their own, a
// shared A or a shared B, 1 and 3 threads, each tier; and an A past L2 streamed with the far L2 prefetch.
TEST_CASE("x86 f32: many rows over few columns of a B stored K x N on the dot family", "[x86][matmul]") {
    {
        const auto avx512 = jitmm::hw::X86Isa::avx512, avx2 = jitmm::hw::X86Isa::avx2;
        auto nn = [](int64_t m, int64_t n, int64_t k) { return dot_problem(Case{m, n, k, 1, false, false}); };
        CHECK(jitmm::plan::dot_family_serves(nn(3050, 2, 30), avx512));
        CHECK(jitmm::plan::dot_family_serves(nn(2939, 7, 230), avx512));
        CHECK(jitmm::plan::dot_family_serves(nn(300, 2, 16), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(300, 2, 12), avx512));   // K under 4 (N + 2)
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(2477, 3, 12), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(300, 7, 32), avx512));
        CHECK(jitmm::plan::dot_family_serves(nn(300, 8, 48), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(300, 8, 40), avx512));   // 8 columns: whole vectors of K
        CHECK(jitmm::plan::dot_family_serves(nn(300, 8, 100), avx512));        // or a K from 64
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(300, 5, 33), avx512));   // 5 columns: a K from 40
        CHECK(jitmm::plan::dot_family_serves(nn(300, 5, 40), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(300, 12, 128), avx512));  // over half a vector
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(21, 8, 64), avx512));     // under 32 rows: K >= 16 N
        CHECK(jitmm::plan::dot_family_serves(nn(21, 3, 100), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(690, 15, 3097), avx512));
        CHECK(jitmm::plan::dot_family_serves(nn(16, 4, 512), avx512));          // few rows: up to 5 columns
        CHECK(jitmm::plan::dot_family_serves(nn(2, 2, 1000), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(16, 6, 512), avx512));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(16, 4, 512), avx2));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(300, 1, 512), avx512));
        CHECK(jitmm::plan::dot_family_serves(nn(300, 4, 64), avx2));
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(300, 4, 32), avx2));     // AVX2: from a K of 16 N
        CHECK_FALSE(jitmm::plan::dot_family_serves(nn(300, 5, 512), avx2));
        jitmm::Problem tn = nn(300, 4, 64);
        tn.trans_a = true;
        tn.lda = 300;
        CHECK_FALSE(jitmm::plan::dot_family_serves(tn, avx512));
        // The copies of B^T stay small: 64 batches of 8 x 1024 with their own B (2 MB) keep the broadcast tiles.
        jitmm::Problem batched = nn(300, 8, 1024);
        batched.batch = 64;
        batched.stride_b = 8 * 1024;
        CHECK_FALSE(jitmm::plan::dot_family_serves(batched, avx512));
        batched.stride_b = 0;
        CHECK(jitmm::plan::dot_family_serves(batched, avx512));
        // B^T rows of whole lines; an A past L2 read once (one column tile) is prefetched far ahead into L2, one
        // read by two column tiles near into L1.
        jitmm::hw::CpuInfo cpu;
        cpu.l1d_bytes = 48 * 1024;
        cpu.l2_bytes = 2048 * 1024;
        const auto once = jitmm::plan::plan_x86_gemm_f32_dot(nn(2939, 7, 230), cpu, avx512, 1);
        CHECK(once.b_transposed);
        CHECK(once.layout.ldb == 240);
        CHECK(once.rows_outer);
        CHECK(once.layout.a_prefetch_to_l2);
        CHECK(once.layout.a_prefetch_bytes == 32 * 1024);
        const auto twice = jitmm::plan::plan_x86_gemm_f32_dot(dot_problem(Case{2939, 15, 600, 1, false, true}), cpu, avx512, 1);
        CHECK(twice.rows_outer);
        CHECK_FALSE(twice.layout.a_prefetch_to_l2);
        CHECK(twice.layout.a_prefetch_bytes == 1024);
        CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32_dot(nn(300, 7, 230), cpu, avx512, 1).rows_outer);
    }
    std::mt19937 rng(3050);
    const float alphas[] = {1.0f, -1.0f, 0.5f, 0.0f};
    const float betas[] = {0.0f, 1.0f, -0.5f};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (int64_t m : {1, 7, 16, 17, 33, 127}) {
                for (int64_t n : {2, 3, 5, 7, 15}) {
                    for (int64_t k : {17, 33, 65, 230, 513}) {
                        if (m <= 16 && (n == 3 || n == 7 || k == 33 || k == 230)) continue;  // (few rows: a sample)
                        Case c;
                        c.m = m; c.n = n; c.k = k;
                        c.lda_pad = it % 3 == 1 ? 5 : 0;
                        c.ldb_pad = it % 4 == 1 ? 16 : it % 4 == 2 ? 3 : 0;
                        c.ldc_pad = it % 5 == 2 ? 3 : 0;
                        c.alpha = alphas[it % 4];
                        c.beta = betas[it % 3];
                        c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = (it / 2) % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        c.batch = it % 4 == 3 ? 3 : 1;
                        c.share_b = c.batch > 1 && it % 8 == 3;
                        c.share_a = c.batch > 1 && it % 8 == 7;
                        // (The k-group kernel takes the shortest K first.)
                        if (jitmm::plan::dot_family_serves(dot_problem(c), tier.isa) &&
                            !jitmm::plan::kgroup_serves(dot_problem(c), tier.isa))
                            CHECK(generator_name(e, c).find("_dot_") != std::string::npos);
                        check_case(e, c, rng);
                        ++it;
                    }
                }
            }
            jitmm_engine_destroy(e);
        }
    }
    if (jitmm::hw::cpu_info().best_isa >= jitmm::hw::X86Isa::avx512) {
        jitmm_engine* e = make_engine("avx512", 1);
        for (const Case& c : {Case{1000, 3, 100}, Case{2939, 7, 230}, Case{500, 8, 512}})
            CHECK(generator_name(e, c) == "x86_f32_dot_avx512");
        // A past L2 (2.7 MB, 4.5 MB over two batches): rows outer, the far prefetch; beta, a bias per column.
        std::mt19937 rng2(2939);
        Case far{2939, 7, 230, 2, false, false, 0, 2, 1, 0.5f, 1.0f, JITMM_EPILOGUE_BIAS_GELU_TANH};
        check_case(e, far, rng2);
        jitmm_engine_destroy(e);
        // One column tile over a long K on 3 threads: K parts, each reading the copied B^T rows.
        const Case long_k{100, 4, 4096, 1, false, false, 3, 1, 0, -1.0f, 0.5f, JITMM_EPILOGUE_BIAS_SILU};
        CHECK(jitmm::plan::plan_x86_gemm_f32_dot(dot_problem(long_k), jitmm::hw::cpu_info(),
                                                 jitmm::hw::X86Isa::avx512, 3).k_splits > 1);
        jitmm_engine* e3 = make_engine("avx512", 3);
        CHECK(generator_name(e3, long_k) == "x86_f32_dot_avx512");
        check_case(e3, long_k, rng2);
        jitmm_engine_destroy(e3);
    } else {
        WARN("SKIPPED the dot-family generator check: no AVX-512 on this CPU (results above checked at every tier)");
    }
}

// Many rows over 2 to 8 columns and a short K: the k-group kernel (g K values per FMA into 16 / g column slots).
// Which shapes the rule takes; then against the float64 reference every group size (g = 8, 4, 2) with K tails,
// row tails (fewer rows than a group, a tile and a group), NN and NT, every epilogue and bias layout, alpha/beta
// edge values, ld > width, batches with a shared A or B, 1 and 3 threads, each tier (AVX2 takes other families);
// and NaN in A's row padding, which a K tail must not read.
TEST_CASE("x86 f32: many rows over few columns and a short K on the k-group kernel", "[x86][matmul]") {
    const auto avx512 = jitmm::hw::X86Isa::avx512;
    {
        auto shape = [](int64_t m, int64_t n, int64_t k, bool tb) { return dot_problem(Case{m, n, k, 1, false, tb}); };
        CHECK(jitmm::plan::kgroup_serves(shape(2477, 3, 12, false), avx512));
        CHECK(jitmm::plan::kgroup_serves(shape(3050, 2, 30, false), avx512));
        CHECK(jitmm::plan::kgroup_serves(shape(196, 5, 14, true), avx512));
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(64, 5, 14, false), avx512));  // g = 2 from 96 rows
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(32, 3, 12, false), avx512));  // g = 4 from 48 rows
        CHECK(jitmm::plan::kgroup_serves(shape(17, 2, 30, false), avx512));
        CHECK(jitmm::plan::kgroup_serves(shape(300, 4, 64, false), avx512));
        CHECK(jitmm::plan::kgroup_serves(shape(3000, 2, 4, false), avx512));    // a K of 4 from 1000 rows
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(300, 2, 4, false), avx512));
        CHECK(jitmm::plan::kgroup_serves(shape(300, 2, 4, true), avx512));
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(300, 2, 128, false), avx512));
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(300, 5, 48, false), avx512));  // 5 to 8 columns: K <= 32
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(300, 3, 64, true), avx512));   // NT: K <= 32
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(300, 1, 12, false), avx512));
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(300, 9, 12, false), avx512));
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(16, 3, 12, false), avx512));
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(2477, 3, 12, false), jitmm::hw::X86Isa::avx2));
        CHECK_FALSE(jitmm::plan::kgroup_serves(shape(20000, 4, 64, false), avx512));  // A from memory: dot kernel
        jitmm::Problem tn = shape(300, 3, 12, false);
        tn.trans_a = true;
        tn.lda = 300;
        CHECK_FALSE(jitmm::plan::kgroup_serves(tn, avx512));
        jitmm::hw::CpuInfo cpu;
        cpu.l1d_bytes = 48 * 1024;
        cpu.l2_bytes = 2048 * 1024;
        const auto plan = jitmm::plan::plan_x86_gemm_f32_kgroup(shape(2477, 3, 12, false), cpu, avx512, 1);
        CHECK(plan.layout.g == 4);
        CHECK(plan.layout.mr == 24);
        CHECK(plan.layout.a_prefetch_bytes == 0);
        CHECK(jitmm::plan::plan_x86_gemm_f32_kgroup(shape(50000, 2, 12, false), cpu, avx512, 1).layout.a_prefetch_bytes > 0);
        CHECK(jitmm::plan::plan_x86_gemm_f32_kgroup(shape(17, 2, 12, false), cpu, avx512, 1).layout.mr == 24);
        CHECK(jitmm::plan::plan_x86_gemm_f32_kgroup(shape(17, 7, 12, false), cpu, avx512, 1).layout.mr == 18);
        CHECK(jitmm::plan::plan_x86_gemm_f32_kgroup(shape(300, 7, 12, false), cpu, avx512, 1).layout.g == 2);
        // B's group vectors: slot c of vector j holds op(B)[j g .. j g + g)[c], zeros past K and N.
        const float b[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 5 x 2 as stored (NN, ldb 2)
        std::vector<float> bp(2 * 16, -1.0f);
        jitmm::x86::pack_kgroup_b(b, 2, false, 5, 2, 4, bp.data());
        const std::vector<float> expect = {1, 3, 5, 7, 2, 4, 6, 8, 0, 0, 0, 0, 0, 0, 0, 0,
                                           9, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        CHECK(bp == expect);
    }
    std::mt19937 rng(2477);
    const float alphas[] = {1.0f, -1.0f, 0.5f, 0.0f};
    const float betas[] = {0.0f, 1.0f, -0.5f};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (int64_t m : {17, 25, 53, 100, 130}) {
                for (int64_t n : {2, 3, 4, 5, 8}) {
                    for (int64_t k : {8, 9, 13, 30, 33}) {
                        Case c;
                        c.m = m; c.n = n; c.k = k;
                        c.tb = it % 3 == 2;
                        c.lda_pad = it % 3 == 1 ? 5 : 0;
                        c.ldb_pad = it % 4 == 1 ? 16 : it % 4 == 2 ? 3 : 0;
                        c.ldc_pad = it % 5 == 2 ? 3 : 0;
                        c.alpha = alphas[it % 4];
                        c.beta = betas[it % 3];
                        c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = (it / 2) % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        c.batch = it % 4 == 3 ? 3 : 1;
                        c.share_b = c.batch > 1 && it % 8 == 3;
                        c.share_a = c.batch > 1 && it % 8 == 7;
                        if (jitmm::plan::kgroup_serves(dot_problem(c), tier.isa))
                            CHECK(generator_name(e, c) == "x86_f32_kgroup_avx512");
                        check_case(e, c, rng);
                        ++it;
                    }
                }
            }
            jitmm_engine_destroy(e);
        }
    }
    if (jitmm::hw::cpu_info().best_isa < avx512) {
        WARN("SKIPPED the k-group generator checks: no AVX-512 on this CPU (results above checked at every tier)");
        return;
    }
    jitmm_engine* e = make_engine("avx512", 1);
    // The shapes this was made for, a K of 4 to 7 over many rows, and A streaming from memory (prefetched).
    std::mt19937 rng2(196);
    for (const Case& c : {Case{2477, 3, 12, 10}, Case{3050, 2, 30}, Case{196, 5, 14, 14, false, true},
                          Case{1001, 7, 5, 1, false, false, 0, 0, 0, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_RELU},
                          Case{1003, 2, 7, 2, false, true, 2, 1, 1, -0.5f, 0.0f, JITMM_EPILOGUE_GELU_ERF},
                          Case{1000, 4, 6, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_SILU,
                               JITMM_BIAS_PER_ROW},
                          Case{50000, 2, 12, 1, false, false, 3, 0, 0, 1.0f, 1.0f, JITMM_EPILOGUE_BIAS}}) {
        CHECK(generator_name(e, c) == "x86_f32_kgroup_avx512");
        check_case(e, c, rng2);
    }
    // NaN in the padding past each A row (and past B's columns): the K tail's masked loads and the zero slots
    // keep it out of every output.
    for (const int64_t k : {9, 13, 30}) {
        for (const int64_t n : {2, 3, 6}) {
            const int64_t m = 101, lda = k + 3, ldb = n + 2, ldc = n;
            INFO("m " << m << " n " << n << " k " << k);
            std::vector<float> a(m * lda, std::numeric_limits<float>::quiet_NaN()), b(k * ldb, std::numeric_limits<float>::quiet_NaN());
            std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
            for (int64_t i = 0; i < m; ++i)
                for (int64_t p = 0; p < k; ++p) a[i * lda + p] = uni(rng2);
            for (int64_t p = 0; p < k; ++p)
                for (int64_t j = 0; j < n; ++j) b[p * ldb + j] = uni(rng2);
            std::vector<float> out(m * ldc, std::numeric_limits<float>::quiet_NaN());
            jitmm_matmul_desc d;
            REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
            d.m = m; d.n = n; d.k = k; d.lda = lda; d.ldb = ldb; d.ldc = ldc;
            jitmm_matmul_args args;
            REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
            args.a = a.data(); args.b = b.data(); args.c = out.data();
            REQUIRE(jitmm_matmul(e, &d, &args) == JITMM_STATUS_SUCCESS);
            Case c{m, n, k, 1, false, false, 3, 2, 0};
            CHECK(generator_name(e, c) == "x86_f32_kgroup_avx512");
            double err2 = 0, ref2 = 0;
            for (int64_t i = 0; i < m; ++i) {
                for (int64_t j = 0; j < n; ++j) {
                    double ref = 0;
                    for (int64_t p = 0; p < k; ++p) ref += double(a[i * lda + p]) * b[p * ldb + j];
                    REQUIRE(std::isfinite(out[i * ldc + j]));
                    err2 += (out[i * ldc + j] - ref) * (out[i * ldc + j] - ref);
                    ref2 += ref * ref;
                }
            }
            CHECK(std::sqrt(err2 / ref2) <= 1e-5 * std::sqrt(double(k)));
        }
    }
    jitmm_engine_destroy(e);
}

// The tile choice on a core with 48 KiB L1 and 2 MiB L2: where B streams from L2 the narrower 2-vector tiles
// (fewer B lines per FMA) win with long K blocks; with few rows and B from memory the 3-vector tile stays.
// The correctness sweeps above run the in-place A of small shapes with several row tiles and panels.
// A matrix times a vector (N = 1, b and C dense) runs as C^T = b^T A^T, A and B exchanged: on the dot kernel, or
// for an A stored K x M on the broadcast tiles' one-row decode; a strided b or C keeps the broadcast tiles. Both
// against the reference, every epilogue and bias layout.
TEST_CASE("x86 f32: a matrix times a vector runs as the swapped dot product", "[x86][matmul]") {
    std::mt19937 rng(9090);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (int64_t m : {2, 7, 33, 300, 1023}) {
                for (int64_t k : {1, 17, 200, 1500}) {
                    Case c;
                    c.m = m;
                    c.n = 1;
                    c.k = k;
                    c.tb = it % 2 == 1;
                    c.ta = it % 3 == 2;  // A stored K x M: one row times a B stored K x N once swapped
                    c.lda_pad = it % 3 == 0 ? 5 : 0;
                    c.ldb_pad = c.tb && it % 4 == 1 ? 3 : 0;  // a transposed b is one row: any ldb
                    c.alpha = it % 5 == 0 ? -0.5f : 1.0f;
                    c.beta = it % 3 == 1 ? 0.5f : 0.0f;
                    c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                    c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    c.batch = it % 4 == 2 ? 3 : 1;
                    c.share_b = c.batch > 1 && it % 8 == 2;
                    CHECK(generator_name(e, c).find("swapped") != std::string::npos);
                    check_case(e, c, rng);
                    ++it;
                }
            }
            // A strided b column or a strided C keeps the broadcast tiles; still correct.
            Case strided_b{300, 1, 200, 1, false, false, 0, 3, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_RELU};
            Case strided_c{300, 1, 200, 1, false, false, 0, 0, 2, 1.0f, 1.0f, JITMM_EPILOGUE_BIAS, JITMM_BIAS_PER_ROW};
            for (const Case& c : {strided_b, strided_c}) {
                CHECK(generator_name(e, c).find("swapped") == std::string::npos);
                check_case(e, c, rng);
            }
            // One row times one column of ldb 1 (a dot product, batched too): planned as NT, summed along K in
            // vectors by the dot family at AVX-512, not by one serial FMA chain.
            for (int64_t k : {2, 17, 3664}) {
                for (int64_t batch : {1, 5}) {
                    Case dot{1, 1, k, batch};
                    dot.beta = batch > 1 ? 0.5f : 0.0f;
                    dot.epilogue = batch > 1 ? JITMM_EPILOGUE_BIAS : JITMM_EPILOGUE_NONE;
                    if (tier.isa >= jitmm::hw::X86Isa::avx512)
                        CHECK(generator_name(e, dot).find("dot") != std::string::npos);
                    check_case(e, dot, rng);
                }
            }
            jitmm_engine_destroy(e);
        }
    }
}

// Few rows of A over many columns of a transposed B and a short K: C^T = B A^T on the k-group kernel, its rows
// stored as C's columns. Which shapes the rule takes; then against the float64 reference every group size (2, 3-4,
// 5-8 rows), NT and TT, K tails, column tails (C^T's row tails), every epilogue with the bias per row and per
// column, alpha/beta, ld > width, batches with a shared A or B, 1 and 3 threads, each tier.
TEST_CASE("x86 f32: few rows over many columns of a transposed B on the swapped k-group kernel", "[x86][matmul]") {
    const auto avx512 = jitmm::hw::X86Isa::avx512;
    {
        auto nt = [](int64_t m, int64_t n, int64_t k) { return dot_problem(Case{m, n, k, 1, false, true}); };
        CHECK(jitmm::plan::kgroup_serves_swapped(nt(5, 3955, 14), avx512));
        CHECK(jitmm::plan::kgroup_serves_swapped(nt(2, 64, 8), avx512));
        CHECK(jitmm::plan::kgroup_serves_swapped(nt(3, 200, 4), avx512));
        CHECK(jitmm::plan::kgroup_serves_swapped(nt(8, 200, 24), avx512));
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(nt(2, 1000, 4), avx512));   // g = 8: from a K of 8
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(nt(3, 64, 8), avx512));     // g = 4: from 200 columns
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(nt(8, 4000, 16), avx512));  // g = 2: 7-8 rows from K = 24
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(nt(5, 200, 16), avx512));   // and 5-6 from 1000 columns
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(nt(5, 2069, 13), avx512));  // over a K of 14
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(nt(5, 3955, 64), avx512));  // K past the NT rule's 32
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(nt(9, 3955, 14), avx512));
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(dot_problem(Case{5, 3955, 14}), avx512));  // NN
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(nt(5, 3955, 14), jitmm::hw::X86Isa::avx2));
        jitmm::Problem tt = nt(3, 2000, 12);
        tt.trans_a = true;
        tt.lda = 3;
        CHECK(jitmm::plan::kgroup_serves_swapped(tt, avx512));
        tt.k = 64;
        CHECK_FALSE(jitmm::plan::kgroup_serves_swapped(tt, avx512));  // up to a K of 48
        // The swapped problem: B's rows as A's, A as a B (transposed as stored), C's own ldc, the bias flipped.
        jitmm::Problem p = nt(5, 3955, 14);
        p.ldc = 4000;
        p.bias = jitmm::BiasKind::per_column;
        const jitmm::Problem s = jitmm::plan::transposed_product_problem(p);
        CHECK(s.m == 3955);
        CHECK(s.n == 5);
        CHECK_FALSE(s.trans_a);
        CHECK(s.lda == 14);
        CHECK(s.trans_b);
        CHECK(s.ldc == 4000);
        CHECK(s.bias == jitmm::BiasKind::per_row);
    }
    std::mt19937 rng(3955);
    const float alphas[] = {1.0f, -1.0f, 0.5f, 0.0f};
    const float betas[] = {0.0f, 1.0f, -0.5f};
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        for (int threads : {1, 3}) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (int64_t m : {2, 3, 4, 5, 8}) {
                for (int64_t n : {217, 1001}) {
                    for (int64_t k : {9, 13, 24, 30}) {
                        Case c;
                        c.m = m; c.n = n; c.k = k;
                        c.tb = true;
                        c.ta = it % 3 == 1;
                        c.lda_pad = it % 3 == 2 ? 5 : 0;
                        c.ldb_pad = it % 4 == 1 ? 16 : it % 4 == 2 ? 3 : 0;
                        c.ldc_pad = it % 5 == 2 ? 3 : 0;
                        c.alpha = alphas[it % 4];
                        c.beta = betas[it % 3];
                        c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = (it / 2) % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        c.batch = it % 4 == 3 ? 3 : 1;
                        c.share_b = c.batch > 1 && it % 8 == 3;
                        c.share_a = c.batch > 1 && it % 8 == 7;
                        if (jitmm::plan::kgroup_serves_swapped(dot_problem(c), tier.isa))
                            CHECK(generator_name(e, c) == "x86_f32_kgroup_avx512_swapped");
                        check_case(e, c, rng);
                        ++it;
                    }
                }
            }
            jitmm_engine_destroy(e);
        }
    }
    if (jitmm::hw::cpu_info().best_isa >= avx512) {
        jitmm_engine* e = make_engine("avx512", 1);
        std::mt19937 rng2(14);
        for (const Case& c : {Case{5, 3955, 14, 1, false, true},
                              Case{2, 4099, 8, 2, false, true, 0, 0, 9, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_GELU_ERF,
                                   JITMM_BIAS_PER_ROW},
                              Case{3, 2000, 12, 1, true, true, 0, 0, 0, 2.0f, 0.0f, JITMM_EPILOGUE_BIAS_RELU}}) {
            CHECK(generator_name(e, c) == "x86_f32_kgroup_avx512_swapped");
            check_case(e, c, rng2);
        }
        jitmm_engine_destroy(e);
    }
}

// One row over 65 to 224 columns takes the one-row tile (1 x 14 vectors, one pass over K; see choose_tile): its
// column tail, every epilogue and bias layout, alpha/beta, ld > width, batches, against the reference at each tier.
TEST_CASE("x86 f32: one row over a few vectors of columns on the one-row tile", "[x86][matmul]") {
    std::mt19937 rng(107);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 1);
        int it = 0;
        for (int64_t n : {97, 100, 107, 223}) {
            for (int64_t k : {33, 400, 1711}) {
                Case c{1, n, k, it % 3 == 2 ? 3 : 1, false, false, it % 2 ? 7 : 0, it % 3 == 1 ? 5 : 0, it % 4 == 3 ? 2 : 0,
                       it % 5 == 1 ? -0.5f : 1.0f, it % 3 == 0 ? 0.5f : 0.0f,
                       static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT)};
                c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                if (tier.isa >= jitmm::hw::X86Isa::avx512 && n <= 107)
                    CHECK(generator_name(e, c, true).find("tile 1x224") != std::string::npos);
                check_case(e, c, rng);
                ++it;
            }
        }
        jitmm_engine_destroy(e);
    }
}

// A core that issues one zmm FMA per cycle (Zen 4) spends twice as long on the same flops: a second thread pays
// from half the work, and a call that threads share is no single call; at two per cycle 64^3 stays one call.
TEST_CASE("x86 f32 planner: threads from the core's zmm FMA rate", "[x86][plan]") {
    jitmm::hw::CpuInfo cpu = jitmm::hw::cpu_info();
    const jitmm::Problem p = dot_problem(Case{64, 64, 64});
    cpu.zmm_fma_per_cycle = 2;
    const auto two = jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 2);
    CHECK(two.threads == 1);
    CHECK(two.single_call);
    cpu.zmm_fma_per_cycle = 1;
    const auto one = jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 2);
    CHECK(one.threads == 2);
    CHECK_FALSE(one.single_call);
    // (One thread: the single call either way; the avx2 tier's ymm FMAs are not halved.)
    CHECK(jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 1).single_call);
    CHECK(jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx2, 2).threads == 1);
}

TEST_CASE("x86 f32 planner: register tiles and K blocks and A packing", "[x86][plan]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    const auto isa = jitmm::hw::X86Isa::avx512;
    const auto big = jitmm::plan::plan_x86_gemm_f32(plain_problem(1024, 1024, 1024, false, false), cpu, isa, 1);
    CHECK(big.layout.nv == 2);
    CHECK(big.kc == 512);
    const auto llm = jitmm::plan::plan_x86_gemm_f32(plain_problem(128, 4096, 4096, false, true), cpu, isa, 1);
    CHECK(llm.layout.mr == 8);
    CHECK(llm.layout.nv == 3);
    // A packed A past a quarter of L3 (32 MB of 2048 x 4096, 16 MB of 2048^2, against 32 MB) takes N blocks of
    // 2048 columns, packed fewer times; one that L3 holds (8 MB) keeps the N blocks of half of L2.
    cpu.l3_bytes = 32 * 1024 * 1024;
    const auto prefill = jitmm::plan::plan_x86_gemm_f32(plain_problem(2048, 4096, 4096, false, false), cpu, isa, 1);
    CHECK(prefill.pack_a);
    CHECK(prefill.nc == 2048);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(2048, 2048, 2048, false, false), cpu, isa, 1).nc == 2048);
    const auto held = jitmm::plan::plan_x86_gemm_f32(plain_problem(512, 4096, 4096, false, false), cpu, isa, 1);
    CHECK(held.nc < 1024);
    cpu.l3_bytes = 0;
    // A small A is read in place unless its tile rows crowd the L1 sets; a large one is packed.
    CHECK(big.pack_a);
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(128, 128, 128, false, false), cpu, isa, 1).pack_a);
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(200, 300, 150, true, false), cpu, isa, 1).pack_a);
    jitmm::Problem aliased = plain_problem(128, 128, 128, false, false);
    aliased.lda = 1024;  // rows 4 KiB apart: every row of the tile in the same L1 sets
    CHECK(jitmm::plan::plan_x86_gemm_f32(aliased, cpu, isa, 1).pack_a);
    jitmm::Problem aliased_t = plain_problem(128, 128, 128, true, false);
    aliased_t.lda = 2048;  // A transposed: successive k 8 KiB apart
    CHECK(jitmm::plan::plan_x86_gemm_f32(aliased_t, cpu, isa, 1).pack_a);
    // Two B blocks share L2 (one in use, one packed ahead): an eighth of L2 each for a transposed B with few
    // row tiles, half for the rest.
    CHECK(llm.nc * llm.kc * 4 <= 256 * 1024);
    CHECK(big.nc * big.kc * 4 > 512 * 1024);
    // B read in place from memory prefetches its rows ahead; packed or small B does not.
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(1, 4096, 4096, false, false), cpu, isa, 1).layout.b_prefetch_k > 0);
    CHECK(big.layout.b_prefetch_k == 0);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(16, 64, 64, false, false), cpu, isa, 1).layout.b_prefetch_k == 0);
    // Two rows load B into registers (2 x 8; from memory each vector was loaded once per row); one row reads it
    // from memory in its FMAs, 14 vectors wide, or (a long GEMV) takes a taller tile's row tail.
    const auto two_rows = jitmm::plan::plan_x86_gemm_f32(plain_problem(2, 3295, 76, false, false), cpu, isa, 1);
    CHECK(two_rows.layout.mr == 2);
    CHECK(two_rows.layout.nv == 8);
    CHECK_FALSE(two_rows.layout.b_from_memory);
    const auto one_row = jitmm::plan::plan_x86_gemm_f32(plain_problem(1, 2155, 41, false, false), cpu, isa, 1);
    CHECK(one_row.layout.mr == 1);
    CHECK(one_row.layout.nv == 14);
    CHECK(one_row.layout.b_from_memory);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(1, 4096, 4096, false, false), cpu, isa, 1).layout.mr == 4);
    // One row over an N that the one-row tile covers in one pass where taller tiles take two: the one-row tile
    // (1x107x1711); an N that one taller tile covers keeps it (1x64x1711: 6 x 4, one call).
    for (const int64_t n : {100, 107}) {
        const auto decode = jitmm::plan::plan_x86_gemm_f32(plain_problem(1, n, 1711, false, false), cpu, isa, 1);
        CHECK(decode.layout.mr == 1);
        CHECK(decode.layout.nv == 14);
    }
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(1, 64, 1711, false, false), cpu, isa, 1).layout.mr == 6);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(2, 107, 1711, false, false), cpu, isa, 1).layout.mr != 1);
    // A K of a few steps prefetches the C tile before its K loop; a longer K hides C's misses behind its FMAs.
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(31, 1237, 5, false, true), cpu, isa, 1).layout.c_prefetch);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(300, 700, 12, false, false), cpu, isa, 1).layout.c_prefetch);
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(300, 700, 16, false, false), cpu, isa, 1).layout.c_prefetch);
    CHECK_FALSE(big.layout.c_prefetch);
    // Batches that each read their own B stream it together: prefetched 32 rows ahead where 32 rows take at most
    // a quarter of L2 and their stride is off 4 KiB multiples, else 16; one B shared by every batch stays in L2.
    jitmm::Problem batched = plain_problem(19, 263, 924, false, false);
    batched.batch = 34;
    batched.stride_a = 19 * 924; batched.stride_b = 924 * 263; batched.stride_c = 19 * 263;
    CHECK(jitmm::plan::plan_x86_gemm_f32(batched, cpu, isa, 1).layout.b_prefetch_k == 32);
    batched.stride_b = 0;
    CHECK(jitmm::plan::plan_x86_gemm_f32(batched, cpu, isa, 1).layout.b_prefetch_k == 0);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(16, 11008, 4096, false, false), cpu, isa, 1).layout.b_prefetch_k == 16);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(16, 4096, 4096, false, false), cpu, isa, 1).layout.b_prefetch_k == 16);
    // A B in L2 read in place with rows off 64-byte lines (split loads) prefetches its rows 2 k steps ahead.
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(1, 2155, 41, false, false), cpu, isa, 1).layout.b_prefetch_k == 2);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(1, 512, 512, false, false), cpu, isa, 1).layout.b_prefetch_k == 0);
    // Batches whose A, B and C together pass L2 stream their own small Bs from memory too, where B is a quarter
    // or more of each batch's bytes.
    auto batches = [](int64_t m, int64_t n, int64_t k, int64_t count) {
        jitmm::Problem q = plain_problem(m, n, k, false, false);
        q.batch = count;
        q.stride_a = m * k; q.stride_b = k * n; q.stride_c = m * n;
        return q;
    };
    CHECK(jitmm::plan::plan_x86_gemm_f32(batches(100, 500, 64, 16), cpu, isa, 1).layout.b_prefetch_k > 0);
    CHECK(jitmm::plan::plan_x86_gemm_f32(batches(100, 500, 64, 2), cpu, isa, 1).layout.b_prefetch_k == 0);
    CHECK(jitmm::plan::plan_x86_gemm_f32(batches(328, 165, 34, 15), cpu, isa, 1).layout.b_prefetch_k == 0);
    // A tile as wide as N reads A once in place (no packing) where a narrower one would pack a large A,
    // and then takes K in one block while B's kc x N fits half of L2.
    for (const auto& shape : {plain_problem(3136, 64, 576, false, false), plain_problem(64, 64, 4096, false, false),
                              plain_problem(4096, 16, 4096, false, false)}) {
        const auto wide = jitmm::plan::plan_x86_gemm_f32(shape, cpu, isa, 1);
        INFO(wide.describe());
        CHECK(wide.nr() >= shape.n);
        CHECK_FALSE(wide.pack_a);
        CHECK(wide.kc >= shape.k);
    }
    // A large A crossed by a few panels is read in place, not packed.
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(784, 128, 1152, false, false), cpu, isa, 1).pack_a);
    // 25-56 rows: a tile tall enough to read a large B in place beats a shorter one that must pack it.
    for (const auto& shape : {plain_problem(49, 512, 4608, false, false), plain_problem(40, 4096, 4096, false, false)}) {
        const auto few_rows = jitmm::plan::plan_x86_gemm_f32(shape, cpu, isa, 1);
        INFO(few_rows.describe());
        CHECK_FALSE(few_rows.pack_b);
    }
    // Up to ~1 MFLOP one generated call; past it the driver, which fans 2 MFLOP out to two threads.
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(64, 64, 64, false, false), cpu, isa, 2).single_call);
    const auto hundred = jitmm::plan::plan_x86_gemm_f32(plain_problem(100, 100, 100, false, false), cpu, isa, 2);
    CHECK_FALSE(hundred.single_call);
    CHECK(hundred.threads == 2);
    // At several threads a few row tiles keep K blocks (K split can then feed the threads).
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(64, 64, 4096, false, false), cpu, isa, 4).kc < 4096);
    // Both still fit the register file with the epilogue's temporaries.
    for (const auto& plan : {big, llm})
        CHECK(plan.layout.mr * plan.layout.nv + jitmm::x86::kEpilogueTemps <= 32);
    // A stored K x M packs by copying runs of mr values per k, cheap enough for tiles narrower than N
    // (3072x77x160 TT: 14x32 with A packed 560-600 us, 4x96 reading A in place 670-770).
    // Few rows over a large B: in place where each thread's rows of B are long pieces (2 threads, 48x2304x577:
    // 1152 columns each), packed where they are short (49x512x4608: 256 columns each).
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(48, 2304, 577, false, false), cpu, isa, 2).pack_b);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(49, 512, 4608, false, false), cpu, isa, 2).pack_b);
    const auto tt = jitmm::plan::plan_x86_gemm_f32(plain_problem(3072, 77, 160, true, true), cpu, isa, 1);
    INFO(tt.describe());
    CHECK(tt.pack_a);
    CHECK(tt.layout.mr >= 8);
}

// One column panel of dense B rows (NN) is read in place, with full-length K blocks, however many row tiles
// share it; a strided B (a submatrix) is still packed. A read in place with aliasing rows gets short tiles.
TEST_CASE("x86 f32: one B panel read in place", "[x86][matmul]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    const auto isa = jitmm::hw::X86Isa::avx512;
    const auto in_place = jitmm::plan::plan_x86_gemm_f32(plain_problem(64, 64, 16384, false, false), cpu, isa, 1);
    CHECK_FALSE(in_place.pack_b);
    CHECK(in_place.kc > 32);
    jitmm::Problem strided = plain_problem(64, 64, 16384, false, false);
    strided.ldb = 4096;
    CHECK(jitmm::plan::plan_x86_gemm_f32(strided, cpu, isa, 1).pack_b);
    // A read in place with rows 4 KiB apart (lda 8192): no more rows per tile than the L1 sets hold; a
    // padded lda keeps the taller tile.
    for (const auto tier_isa : {jitmm::hw::X86Isa::avx2, jitmm::hw::X86Isa::avx512}) {
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(16, 16, 8192, false, false), cpu, tier_isa, 1).layout.mr <= 8);
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(100, 16, 4096, false, true), cpu, tier_isa, 1).layout.mr <= 8);
    }
    jitmm::Problem padded = plain_problem(16, 16, 8192, false, false);
    padded.lda = 8208;
    CHECK(jitmm::plan::plan_x86_gemm_f32(padded, cpu, isa, 1).layout.mr > 8);

    std::mt19937 rng(515);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 2);
        const Case cases[] = {
            {150, 60, 1300, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_TANH},
            {97, 16, 3000, 1, true, false, 2, 3, 1, 0.5f, 1.0f, JITMM_EPILOGUE_RELU},
            {300, 33, 700, 2, false, false, 0, 5, 0, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_SILU, JITMM_BIAS_PER_ROW},
            {40, 30, 500, 1, false, false, 0, 0, 2, -1.0f, 0.0f, JITMM_EPILOGUE_BIAS},
            {100, 16, 4096, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_ERF},  // aliased A rows
            {19, 13, 2048, 1, false, true, 0, 0, 0, 1.0f, 1.0f, JITMM_EPILOGUE_RELU, JITMM_BIAS_PER_ROW},
            // A large A read in place across two to four panels (K blocks, row and column tails).
            {701, 100, 1100, 1, false, false, 3, 0, 1, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_GELU_TANH},
            {333, 128, 1200, 1, true, true, 0, 2, 0, -1.0f, 0.0f, JITMM_EPILOGUE_BIAS, JITMM_BIAS_PER_ROW},
        };
        for (const Case& c : cases) check_case(e, c, rng);
        jitmm_engine_destroy(e);
    }
}

// An A read in place that L2 cannot keep, by row tiles over one or two column panels: each call prefetches the
// next row tile's rows (the prefetches run past A's end at the last tile, and the row-tail tile runs the same
// loop). A smaller A, or more panels per block, plan without it.
TEST_CASE("x86 f32: an A streamed in place prefetches the next row tile", "[x86][matmul]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    const auto isa = jitmm::hw::X86Isa::avx512;
    jitmm::Problem attention = plain_problem(4096, 40, 77, false, false);
    attention.batch = 8;
    CHECK(jitmm::plan::plan_x86_gemm_f32(attention, cpu, isa, 1).layout.a_next_tile_prefetch);
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(12544, 64, 147, false, false), cpu, isa, 1)
              .layout.a_next_tile_prefetch);
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(196, 64, 384, false, false), cpu, isa, 1)
                    .layout.a_next_tile_prefetch);  // A stays in L2
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(12544, 64, 147, true, false), cpu, isa, 1)
                    .layout.a_next_tile_prefetch);  // A stored K x M

    // Shapes whose A exceeds this machine's L2 (at least 2 MiB) on the plan of this machine.
    const int64_t l2 = std::max<int64_t>(jitmm::hw::cpu_info().l2_bytes, 2048 * 1024);
    const int64_t rows = l2 / (4 * 150) + 37;  // K 150: A just past L2, a row tail on most tiles
    std::mt19937 rng(1731);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        jitmm_engine* e = make_engine(tier.name, 1 + (tier.isa >= jitmm::hw::X86Isa::avx512 ? 1 : 0));
        const Case cases[] = {
            {rows, 40, 150, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_TANH},
            {rows / 4 + 3, 77, 150, 5, false, true, 3, 1, 2, 0.5f, 1.0f, JITMM_EPILOGUE_SILU, JITMM_BIAS_PER_ROW},
            {rows, 17, 150, 1, false, false, 9, 0, 0, -1.0f, 0.5f, JITMM_EPILOGUE_BIAS_RELU},
        };
        int prefetching = 0;  // cases this machine's plan runs with the prefetch (its tile and blocks decide)
        for (const Case& c : cases) {
            jitmm::Problem p = plain_problem(c.m, c.n, c.k, c.ta, c.tb);
            p.batch = c.batch;
            p.lda = c.k + c.lda_pad;
            prefetching += jitmm::plan::plan_x86_gemm_f32(p, jitmm::hw::cpu_info(), tier.isa, 1).layout.a_next_tile_prefetch;
            check_case(e, c, rng);
        }
        CHECK(prefetching >= 1);
        jitmm_engine_destroy(e);
    }
}

// Batches of a small A stored K x M read in place that together exceed L2: each k step prefetches the stored row
// 16 steps on (past the K block's end too: harmless lines).
TEST_CASE("x86 f32: batched transposed A read in place prefetches its rows ahead", "[x86][matmul]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    jitmm::Problem p = plain_problem(148, 2, 85, true, true);
    p.batch = 64;
    const auto plan = jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 1);
    CHECK_FALSE(plan.pack_a);
    CHECK(plan.layout.a_prefetch_k > 0);
    p.batch = 2;  // 100 KB of A: L2 keeps it
    CHECK(jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 1).layout.a_prefetch_k == 0);

    // Batches enough for this machine's L2 (at least 2 MiB), odd rows and K, ld pads, epilogues, 1 and 2 threads.
    const int64_t l2 = std::max<int64_t>(jitmm::hw::cpu_info().l2_bytes, 2048 * 1024);
    std::mt19937 rng(1613);
    for (const Tier& tier : runnable_tiers()) {
        for (int threads : {1, 2}) {
            INFO("tier " << tier.name << " threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            const Case cases[] = {
                {148, 2, 85, l2 / (148 * 85 * 4) + 3, true, true, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS},
                {100, 30, 101, l2 / (100 * 101 * 4) + 5, true, false, 3, 1, 2, 0.5f, 1.0f, JITMM_EPILOGUE_BIAS_GELU_ERF,
                 JITMM_BIAS_PER_ROW},
                {33, 17, 300, l2 / (33 * 300 * 4) + 1, true, false, 5, 0, 0, -1.0f, 0.0f, JITMM_EPILOGUE_RELU},
            };
            for (const Case& c : cases) check_case(e, c, rng);
            jitmm_engine_destroy(e);
        }
    }
}

// B blocks are double buffered: each block's microkernel calls prefetch the next block's source and the driver
// packs it between calls (whatever the calls did not cover, after the block). Small forced K and N blocks make
// many blocks of odd sizes (short last blocks, panels with padding columns, 16-column transposed units cut by
// the block edge), with few and many calls per block (prefetch groups of several rows), NN and NT, prefetch on
// and off, over thread partitions; the results must not depend on the prefetch.
TEST_CASE("x86 f32: double-buffered B blocks packed between the calls", "[x86][matmul]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    const auto isa = jitmm::hw::X86Isa::avx512;
    // Several blocks and packed B: the calls prefetch, one row or a group of rows per call.
    const auto square = jitmm::plan::plan_x86_gemm_f32(plain_problem(1024, 1024, 1024, false, false), cpu, isa, 1);
    CHECK(square.layout.b_prefetch_runs == 1);
    const auto few_rows = jitmm::plan::plan_x86_gemm_f32(plain_problem(128, 4096, 4096, false, true), cpu, isa, 1);
    CHECK(few_rows.layout.b_prefetch_runs > 1);
    // One block: nothing to prefetch.
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(256, 256, 256, false, false), cpu, isa, 1).layout.b_prefetch_runs == 0);

    std::mt19937 rng(2611);
    struct Knobs { const char* kc; const char* nc; const char* bpf; const char* tile; };
    // 3x3: AVX2 panels 24 wide, so that 16-column units of a transposed B straddle two panels.
    const Knobs knobs[] = {{"40", "64", "1", ""}, {"64", "100", "1", "3x3"}, {"37", "48", "0", ""}, {"128", "200", "1", "3x3"}};
    for (const Tier& tier : runnable_tiers()) {
        for (int ki = 0; ki < 4; ++ki) {
            INFO("tier " << tier.name << " kc " << knobs[ki].kc << " nc " << knobs[ki].nc << " bpf " << knobs[ki].bpf
                          << " tile " << knobs[ki].tile);
            setenv("JITMM_X86_TILE", knobs[ki].tile, 1);
            setenv("JITMM_X86_KC", knobs[ki].kc, 1);
            setenv("JITMM_X86_NC", knobs[ki].nc, 1);
            setenv("JITMM_X86_BPF", knobs[ki].bpf, 1);
            jitmm_engine* e = make_engine(tier.name, 1 + ki % 3);
            const Case cases[] = {
                {150, 333, 301, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_TANH},
                {97, 250, 263, 1, false, true, 3, 5, 1, 0.5f, 1.0f, JITMM_EPILOGUE_RELU},
                {64, 161, 200, 2, true, true, 0, 2, 0, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_SILU, JITMM_BIAS_PER_ROW},
                {300, 77, 129, 1, false, true, 0, 0, 3, -1.0f, 0.0f, JITMM_EPILOGUE_BIAS},
                {45, 517, 90, 1, true, false, 1, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_NONE},
            };
            for (const Case& c : cases) check_case(e, c, rng);
            jitmm_engine_destroy(e);
        }
    }
    unsetenv("JITMM_X86_TILE");
    unsetenv("JITMM_X86_KC");
    unsetenv("JITMM_X86_NC");
    unsetenv("JITMM_X86_BPF");
}

// The partition: where a 1-D split over N would make every task pack all of A for a few panels, either A is
// packed once for all threads or the split is 2-D; the 2-thread plans of the benchmark shapes stay 1-D over
// N; every choice fits the threads and is no slower, by its own estimate, than the 1-D split.
TEST_CASE("x86 f32 planner: M x N partition", "[x86][plan][partition]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    const auto isa = jitmm::hw::X86Isa::avx512;
    for (int64_t s : {512, 1024}) {
        const auto plan = jitmm::plan::plan_x86_gemm_f32(plain_problem(s, s, s, false, false), cpu, isa, 16);
        INFO(plan.describe());
        CHECK((plan.share_a || plan.m_chunks > 1));
        CHECK(plan.m_chunks * plan.n_chunks <= 16);
        // One thread shares A between its N blocks where it has more than two: 512^3 has one of 512 columns,
        // 1024^3 two (2048^3, four, below).
        CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(s, s, s, false, false), cpu, isa, 1).share_a);
    }
    {
        // With a large L3, one thread keeps even 4096^3's packed A (69 MB) for all its N blocks; several threads
        // share at most 48 MB of it.
        jitmm::hw::CpuInfo big_l3 = cpu;
        big_l3.l3_bytes = 480ll << 20;
        const jitmm::Problem big = plain_problem(4096, 4096, 4096, false, false);
        CHECK(jitmm::plan::plan_x86_gemm_f32(big, big_l3, isa, 1).share_a);
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(2048, 2048, 2048, false, false), big_l3, isa, 1).share_a);
        CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(big, big_l3, isa, 2).share_a);
        CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(big, cpu, isa, 1).share_a);  // 32 MB L3 assumed: too small
    }
    // Decode-like rows stream B: split over N only.
    CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(16, 4096, 11008, false, false), cpu, isa, 16).m_chunks == 1);
    {
        // A large A read in place (four column panels, not packed) is streamed once per task: N chunks read it
        // again each, so many threads cut M more than N (784x128x1152 on 16 threads: 8x2, not 4x4).
        const auto plan = jitmm::plan::plan_x86_gemm_f32(plain_problem(784, 128, 1152, false, false), cpu, isa, 16);
        INFO(plan.describe());
        REQUIRE_FALSE(plan.pack_a);
        CHECK(plan.m_chunks > plan.n_chunks);
        CHECK(plan.m_chunks * plan.n_chunks <= 16);
    }
    {
        // A K of a few values makes writing C the work: two threads split its rows, not its columns, which would
        // have both cores' stores meet along every row (2048x4096x16 NT: 1192 us over N chunks, 866-925 over M).
        for (int64_t k : {16, 32}) {
            const auto plan = jitmm::plan::plan_x86_gemm_f32(plain_problem(2048, 4096, k, false, true), cpu, isa, 2);
            INFO(plan.describe());
            CHECK(plan.m_chunks == 2);
            CHECK(plan.n_chunks == 1);
        }
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(256, 1024, 64, false, true), cpu, isa, 2).n_chunks == 2);
    }
    const int64_t shapes[][3] = {{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048},
                                 {128, 4096, 4096}, {128, 11008, 4096}, {2048, 4096, 4096}, {16, 4096, 4096}};
    for (const auto& s : shapes) {
        for (bool tb : {false, true}) {
            const auto two = jitmm::plan::plan_x86_gemm_f32(plain_problem(s[0], s[1], s[2], false, tb), cpu, isa, 2);
            INFO(two.describe());
            CHECK(two.m_chunks == 1);
            CHECK(two.n_chunks == 2);
        }
    }
    for (int threads = 2; threads <= 16; ++threads) {
        for (const auto& s : shapes) {
            for (int64_t batch : {1, 3}) {
                const auto plan = jitmm::plan::plan_x86_gemm_f32(
                    batched_problem(s[0], s[1], s[2], false, false, batch), cpu, isa, threads);
                INFO(plan.describe() << " batch " << batch);
                // At most a thread's share of the batches' tasks; more chunks than that only where the batches'
                // tasks then keep the threads busier in their rounds (3 batches over 16 threads: 6 chunks each
                // leave 14 threads idle in the second round).
                const int64_t chunks = int64_t(plan.m_chunks) * plan.n_chunks;
                const int64_t even_share = std::max<int64_t>(1, (threads + batch - 1) / batch);
                CHECK(chunks <= threads);
                auto busy = [&](int64_t c) {
                    const int64_t tasks = batch * c, rounds = (tasks + threads - 1) / threads;
                    return double(tasks) / double(rounds * threads);
                };
                if (chunks > even_share) CHECK(busy(chunks) > busy(even_share));
            }
        }
    }
    // Batches that the threads cannot share out evenly are cut where the rounds make it a clear win (2 threads,
    // 3290x333x37 x3: one thread ran two whole batches, 1704 us; halves 1231), not where one batch in 25 is left
    // over (361x32x653 TN x25: halves of A's rows of a batch read by two threads, 2672 -> 3575 us).
    {
        const auto cut = jitmm::plan::plan_x86_gemm_f32(batched_problem(3290, 333, 37, false, false, 3), cpu, isa, 2);
        INFO(cut.describe());
        CHECK(cut.m_chunks * cut.n_chunks == 2);
        const auto whole =
            jitmm::plan::plan_x86_gemm_f32(batched_problem(361, 32, 653, true, false, 25), cpu, isa, 2);
        INFO(whole.describe());
        CHECK(whole.m_chunks * whole.n_chunks == 1);
    }
    // Planners without a cost model take the fewest chunks per batch that keep the threads busy 85% of the rounds.
    CHECK(jitmm::plan::balanced_chunks_per_batch(1, 16) == 16);
    CHECK(jitmm::plan::balanced_chunks_per_batch(4, 16) == 4);
    CHECK(jitmm::plan::balanced_chunks_per_batch(3, 2) == 2);   // 6 halves, 3 a thread
    CHECK(jitmm::plan::balanced_chunks_per_batch(7, 2) == 1);   // 4 + 3 whole batches: 88% busy
    CHECK(jitmm::plan::balanced_chunks_per_batch(20, 16) == 3);  // 60 tasks in 4 rounds of 16
    CHECK(jitmm::plan::balanced_chunks_per_batch(48, 2) == 1);
    CHECK(jitmm::plan::balanced_chunks_per_batch(5, 1) == 1);
    jitmm::plan::PartitionInput in;
    in.m_tiles = 37;  // 512^3 in 14x32 tiles
    in.n_tiles = 16;
    in.mr = 14;
    in.nr = 32;
    in.nv = 2;
    in.k = 512;
    in.kc = 512;
    in.nc = 512;
    in.pack_a = in.pack_b = true;
    for (bool shareable : {false, true}) {
        in.a_shareable = shareable;
        for (int threads = 1; threads <= 16; ++threads) {
            in.threads = threads;
            const auto part = jitmm::plan::choose_partition(in);
            INFO("threads " << threads << ": " << part.m_chunks << "x" << part.n_chunks
                            << (part.share_a ? " shared A" : ""));
            CHECK(part.m_chunks * part.n_chunks <= threads);
            CHECK(part.cycles <= jitmm::plan::partition_cycles(in, 1, std::min(threads, 16)));
            CHECK((shareable || !part.share_a));
            // 16 threads: without a shared A, 2-D (1-D packs all of A in each task for one panel).
            if (threads == 16 && !shareable) CHECK(part.m_chunks > 1);
        }
    }
}

// 2-D partitions (planned at 16 threads, forced at 3 and 5 through JITMM_X86_SPLIT, more chunks than threads
// included), A packed once for all threads or in each task, against the float64 reference, and bit-identical
// from run to run and engine to engine.
TEST_CASE("x86 f32: M x N partitions at 3, 5 and 16 threads, shared A", "[x86][matmul][partition]") {
    std::mt19937 rng(1605);
    const Case cases[] = {
        {300, 500, 700, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_TANH},
        {257, 1100, 600, 1, true, true, 3, 5, 7, 0.5f, 1.0f, JITMM_EPILOGUE_BIAS_SILU},
        {500, 300, 513, 2, false, true, 0, 0, 3, -1.0f, 0.5f, JITMM_EPILOGUE_BIAS, JITMM_BIAS_PER_ROW},
        {450, 450, 450, 1, true, false, 1, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_RELU},
    };
    // share: JITMM_X86_SHARE_A (A packed once for all threads, or in each task), null: as planned.
    struct Run { int threads; const char* split; const char* share; };
    const Run runs[] = {{16, nullptr, nullptr}, {16, nullptr, "0"}, {3, "3x2", "1"}, {5, "2x3", "0"},
                        {5, "5x4", "1"}, {16, "4x4", "1"}, {2, nullptr, "1"}, {1, nullptr, "1"}};
    for (const Tier& tier : runnable_tiers()) {
        for (const Run& run : runs) {
            INFO("tier " << tier.name << " threads " << run.threads << " split " << (run.split ? run.split : "planned")
                          << " shared A " << (run.share ? run.share : "planned"));
            if (run.split) setenv("JITMM_X86_SPLIT", run.split, 1);
            if (run.share) setenv("JITMM_X86_SHARE_A", run.share, 1);
            jitmm_engine* e = make_engine(tier.name, run.threads);
            for (const Case& c : cases) check_case(e, c, rng);
            jitmm_engine_destroy(e);
            unsetenv("JITMM_X86_SPLIT");
            unsetenv("JITMM_X86_SHARE_A");
        }
    }
    const int64_t m = 640, n = 480, k = 512;
    const auto planned = jitmm::plan::plan_x86_gemm_f32(plain_problem(m, n, k, false, false), jitmm::hw::cpu_info(),
                                                        jitmm::hw::X86Isa::avx512, 16);
    REQUIRE((planned.m_chunks > 1 || planned.share_a));
    std::uniform_real_distribution<float> uni(-1, 1);
    std::vector<float> a(m * k), b(k * n), first(m * n), again(m * n, 1.0f);
    for (auto& x : a) x = uni(rng);
    for (auto& x : b) x = uni(rng);
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = m; d.n = n; d.k = k;
    jitmm_matmul_args args;
    jitmm_matmul_args_init(&args);
    args.a = a.data(); args.b = b.data();
    jitmm_engine* e1 = make_engine(nullptr, 16);
    jitmm_engine* e2 = make_engine(nullptr, 16);
    args.c = first.data();
    REQUIRE(jitmm_matmul(e1, &d, &args) == JITMM_STATUS_SUCCESS);
    for (int rep = 0; rep < 3; ++rep) {
        std::fill(again.begin(), again.end(), float(rep));
        args.c = again.data();
        REQUIRE(jitmm_matmul(rep % 2 ? e1 : e2, &d, &args) == JITMM_STATUS_SUCCESS);
        REQUIRE(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)) == 0);
    }
    jitmm_engine_destroy(e1);
    jitmm_engine_destroy(e2);
}

namespace {
// A framework's parallel_for that runs the tasks last to first on the calling thread (a task then meets row
// tiles that no earlier task packed), or on one std::thread per task, all at once.
void reversed_parallel_for(void*, int64_t n, jitmm_task_fn fn, void* fn_ctx) {
    for (int64_t i = n - 1; i >= 0; --i) fn(fn_ctx, i);
}
void thread_per_task_parallel_for(void*, int64_t n, jitmm_task_fn fn, void* fn_ctx) {
    std::vector<std::thread> threads;
    for (int64_t i = 0; i < n; ++i) threads.emplace_back([=] { fn(fn_ctx, i); });
    for (auto& t : threads) t.join();
}
}  // namespace

// Shared A tiles under a framework's parallel_for: tasks one after another in reverse order, or all at once.
TEST_CASE("x86 f32: shared A under an external parallel_for", "[x86][matmul][partition]") {
    std::mt19937 rng(2311);
    const Case cases[] = {
        {640, 480, 512, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_RELU},
        {300, 700, 600, 2, true, true, 2, 0, 1, 0.5f, 1.0f, JITMM_EPILOGUE_GELU_ERF},
    };
    for (jitmm_parallel_for_fn fn : {&reversed_parallel_for, &thread_per_task_parallel_for}) {
        jitmm_engine_config cfg;
        REQUIRE(jitmm_engine_config_init(&cfg) == JITMM_STATUS_SUCCESS);
        cfg.num_threads = 16;
        cfg.cache_dir = "";
        cfg.parallel_for = fn;
        jitmm_engine* e = nullptr;
        REQUIRE(jitmm_engine_create(&cfg, &e) == JITMM_STATUS_SUCCESS);
        setenv("JITMM_X86_SHARE_A", "1", 1);
        for (const Case& c : cases) check_case(e, c, rng);
        unsetenv("JITMM_X86_SHARE_A");
        jitmm_engine_destroy(e);
    }
}

// A large A stored K x M is packed by groups of row tiles walking its stored rows (even where one tile is as
// wide as N): several groups and a short last one, row and K tails, ld pads, both B layouts, 1 and 3 threads,
// every tier.
TEST_CASE("x86 f32: a transposed A packed by groups of row tiles", "[x86][matmul]") {
    std::mt19937 rng(5150);
    struct Shape {
        int64_t m, n, k;
        bool tb;
    };
    // One column panel packs A only past L2 (read once from L2, the copy would be an extra pass): the second
    // shape's A is just past this machine's L2.
    const int64_t l2 = jitmm::hw::cpu_info().l2_bytes > 0 ? jitmm::hw::cpu_info().l2_bytes : 1024 * 1024;
    const Shape shapes[] = {{1000, 50, 500, true}, {l2 / (4 * 333) + 77, 37, 333, false}, {3072, 77, 160, true},
                            {1030, 100, 257, false}};
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(l2 / (4 * 333 * 2), 16, 333, true, false),
                                               jitmm::hw::cpu_info(), jitmm::hw::X86Isa::avx512, 1).pack_a);
    for (const Tier& tier : runnable_tiers()) {
        for (int threads : {1, 3}) {
            INFO("tier " << tier.name << " threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0;
            for (const Shape& s : shapes) {
                const jitmm::Problem p = plain_problem(s.m, s.n, s.k, true, s.tb);
                CHECK(jitmm::plan::plan_x86_gemm_f32(p, jitmm::hw::cpu_info(), tier.isa, threads).pack_a);
                Case c;
                c.m = s.m;
                c.n = s.n;
                c.k = s.k;
                c.ta = true;
                c.tb = s.tb;
                c.lda_pad = it % 2 ? 5 : 0;
                c.ldc_pad = it % 3 == 1 ? 3 : 0;
                c.beta = it % 2 ? 0.5f : 0.0f;
                c.epilogue = it % 2 ? JITMM_EPILOGUE_BIAS_GELU_TANH : JITMM_EPILOGUE_NONE;
                check_case(e, c, rng);
                ++it;
            }
            jitmm_engine_destroy(e);
        }
    }
}

// B as stored packed by each block's first row tile as its FMAs read it (plan.pack_b_fused): few rows, a long
// K, and rows of B that spread over the cache sets. Checked against the reference over row, column and K
// tails, several K and N blocks, ld > width, batches, epilogues and thread counts (the chunks of several
// threads may start on the row tail, which then packs its blocks before its calls), and bit for bit against
// the same blocking packed between the blocks.
TEST_CASE("x86 f32: B packed by the first row tile as it goes", "[x86][matmul]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    const auto isa = jitmm::hw::X86Isa::avx512;
    const auto fused = jitmm::plan::plan_x86_gemm_f32(plain_problem(70, 855, 3712, false, false), cpu, isa, 1);
    CHECK(fused.pack_b_fused);
    CHECK(fused.kc <= 256);
    CHECK(fused.layout.b_pack_prefetch_k == 32);
    // A K that fits one block stays in one.
    const auto one_block = jitmm::plan::plan_x86_gemm_f32(plain_problem(71, 630, 378, false, false), cpu, isa, 1);
    CHECK(one_block.pack_b_fused);
    CHECK(one_block.kc >= 378);
    // Rows 11008 floats apart start in 4 L1 sets: a short prefetch distance.
    const auto strided = jitmm::plan::plan_x86_gemm_f32(plain_problem(128, 11008, 4096, false, false), cpu, isa, 1);
    CHECK(strided.pack_b_fused);
    CHECK(strided.layout.b_pack_prefetch_k == 5);
    // Rows 16 KiB apart alias in L1 and L2; a transposed B, many rows and a short K keep the copy pass.
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(128, 4096, 4096, false, false), cpu, isa, 1).pack_b_fused);
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(70, 855, 3712, false, true), cpu, isa, 1).pack_b_fused);
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(1000, 855, 3712, false, false), cpu, isa, 1).pack_b_fused);
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(70, 855, 32, false, false), cpu, isa, 1).pack_b_fused);
    // A chip whose caches take rows 4 KiB apart as well as others fuses them too (Zen 4: 128x4096x4096 85% -> 94%
    // of peak), prefetching 4 steps ahead.
    cpu.few_streams_from_memory = true;
    const auto aliasing = jitmm::plan::plan_x86_gemm_f32(plain_problem(128, 4096, 4096, false, false), cpu, isa, 1);
    CHECK(aliasing.pack_b_fused);
    CHECK(aliasing.layout.b_pack_prefetch_k == 4);
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(70, 855, 3712, false, true), cpu, isa, 1).pack_b_fused);
    CHECK_FALSE(jitmm::plan::plan_x86_gemm_f32(plain_problem(1000, 855, 3712, false, false), cpu, isa, 1).pack_b_fused);
    cpu.few_streams_from_memory = false;

    std::mt19937 rng(2024);
    struct Knobs { const char* kc; const char* nc; };
    const Knobs knobs[] = {{"", ""}, {"37", "96"}, {"64", "200"}};
    for (const Tier& tier : runnable_tiers()) {
        for (int ki = 0; ki < 3; ++ki) {
            const int threads = 1 + ki;
            INFO("tier " << tier.name << " kc " << knobs[ki].kc << " nc " << knobs[ki].nc << " threads " << threads);
            setenv("JITMM_X86_KC", knobs[ki].kc, 1);
            setenv("JITMM_X86_NC", knobs[ki].nc, 1);
            jitmm_engine* e = make_engine(tier.name, threads);
            const Case cases[] = {
                {70, 855, 371, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_NONE},
                {97, 650, 263, 1, false, false, 3, 5, 1, 0.5f, 1.0f, JITMM_EPILOGUE_RELU},
                {64, 611, 300, 2, true, false, 0, 2, 0, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_SILU, JITMM_BIAS_PER_ROW},
                {77, 1517, 190, 2, false, false, 1, 7, 0, -1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_TANH},
                {255, 700, 229, 1, true, false, 2, 1, 3, 1.0f, -1.0f, JITMM_EPILOGUE_BIAS},
            };
            for (const Case& c : cases) {
                INFO(describe(c));
                CHECK(generator_name(e, c, true).find("packB(fused)") != std::string::npos);
                check_case(e, c, rng);
            }
            // Rows of B 4 KiB apart (ldb 1024): fused where this chip's caches take them (few-stream chips).
            const Case aliasing{100, 1000, 300, 1, false, false, 0, 24, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_RELU};
            INFO(describe(aliasing));
            const bool aliasing_fused = generator_name(e, aliasing, true).find("packB(fused)") != std::string::npos;
            CHECK(aliasing_fused == jitmm::hw::cpu_info().few_streams_from_memory);
            check_case(e, aliasing, rng);
            jitmm_engine_destroy(e);
        }
    }
    unsetenv("JITMM_X86_KC");
    unsetenv("JITMM_X86_NC");

    // The same blocking and arithmetic with the copy pass: the same bits.
    const int64_t m = 83, n = 154, k = 1415;
    std::uniform_real_distribution<float> uni(-1, 1);
    std::vector<float> a(m * k), b(k * n), c_fused(m * n, 1.0f), c_copied(m * n, 2.0f);
    for (auto& x : a) x = uni(rng);
    for (auto& x : b) x = uni(rng);
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = m; d.n = n; d.k = k;
    jitmm_matmul_args args;
    jitmm_matmul_args_init(&args);
    args.a = a.data(); args.b = b.data();
    for (int copied = 0; copied < 2; ++copied) {
        if (copied) setenv("JITMM_X86_FUSED_PACK", "0", 1);
        jitmm_engine* e = make_engine(nullptr, 1);
        CHECK((generator_name(e, Case{m, n, k}, true).find("packB(fused)") != std::string::npos) == !copied);
        args.c = copied ? c_copied.data() : c_fused.data();
        REQUIRE(jitmm_matmul(e, &d, &args) == JITMM_STATUS_SUCCESS);
        jitmm_engine_destroy(e);
    }
    unsetenv("JITMM_X86_FUSED_PACK");
    CHECK(std::memcmp(c_fused.data(), c_copied.data(), c_fused.size() * sizeof(float)) == 0);
}

TEST_CASE("x86 f32: transpose_f32 writes exactly rows x cols, odd sizes and strides", "[x86][matmul]") {
    std::mt19937 rng(4711);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    const bool avx512 = jitmm::hw::cpu_info().best_isa >= jitmm::hw::X86Isa::avx512;
    for (bool use_avx512 : {false, avx512}) {
        for (int64_t rows : {1, 2, 5, 16, 17, 33, 300}) {
            for (int64_t cols : {1, 3, 16, 23, 40}) {
                INFO("rows " << rows << " cols " << cols << " avx512 " << use_avx512);
                const int64_t src_ld = cols + (rows % 3), dst_ld = rows + (cols % 5);
                std::vector<float> src(static_cast<size_t>(rows * src_ld));
                for (auto& x : src) x = uni(rng);
                std::vector<float> dst(static_cast<size_t>(cols * dst_ld), kPadSentinel);
                jitmm::x86::transpose_f32(src.data(), src_ld, rows, cols, dst.data(), dst_ld, use_avx512);
                int64_t wrong = 0, bad_pad = 0;
                for (int64_t c = 0; c < cols; ++c)
                    for (int64_t r = 0; r < dst_ld; ++r) {
                        const float got = dst[static_cast<size_t>(c * dst_ld + r)];
                        if (r >= rows) bad_pad += got != kPadSentinel;
                        else wrong += got != src[static_cast<size_t>(r * src_ld + c)];
                    }
                CHECK(wrong == 0);
                CHECK(bad_pad == 0);
            }
        }
    }
}

TEST_CASE("x86 f32 planner: few columns of an A stored K x M are computed as C transposed", "[x86][plan]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    auto serves_with_c_transposed = [&](const jitmm::Problem& p, jitmm::hw::X86Isa isa, int threads = 1) {
        return jitmm::plan::serves_with_c_transposed(p, cpu, isa, threads);
    };
    const auto avx512 = jitmm::hw::X86Isa::avx512, avx2 = jitmm::hw::X86Isa::avx2;
    CHECK(serves_with_c_transposed(plain_problem(2523, 4, 164, true, false), avx512));
    CHECK(serves_with_c_transposed(plain_problem(2508, 17, 180, true, true), avx512));
    CHECK(serves_with_c_transposed(plain_problem(64, 4, 32, true, false), avx512));
    CHECK_FALSE(serves_with_c_transposed(plain_problem(2523, 4, 164, true, false), avx2));   // no AVX-512 transpose
    CHECK_FALSE(serves_with_c_transposed(plain_problem(2508, 17, 12, true, false), avx512));  // short K
    CHECK_FALSE(serves_with_c_transposed(plain_problem(2508, 24, 90, true, true), avx512));   // columns enough
    CHECK_FALSE(serves_with_c_transposed(plain_problem(2477, 3, 96, false, false), avx512));  // A stored M x K
    CHECK_FALSE(serves_with_c_transposed(plain_problem(40, 4, 164, true, false), avx512));    // few rows
    CHECK_FALSE(serves_with_c_transposed(plain_problem(2523, 1, 164, true, false), avx512));  // a vector: swapped
    // Up to 256 columns where A is past L2 and K long enough.
    CHECK(serves_with_c_transposed(plain_problem(3386, 59, 2345, true, true), avx512));
    CHECK(serves_with_c_transposed(plain_problem(1330, 256, 500, true, false), avx512));
    CHECK_FALSE(serves_with_c_transposed(plain_problem(3386, 256, 100, true, true), avx512));  // short K
    // Up to 96 columns from a K of 100 (A past L2: 3 MB, 5.6 MB).
    CHECK(serves_with_c_transposed(plain_problem(7274, 43, 105, true, false), avx512));
    CHECK(serves_with_c_transposed(plain_problem(7274, 96, 192, true, false), avx512));
    CHECK_FALSE(serves_with_c_transposed(plain_problem(7274, 64, 50, true, false), avx512));    // K too short
    CHECK_FALSE(serves_with_c_transposed(plain_problem(7274, 128, 105, true, false), avx512));  // columns
    CHECK_FALSE(serves_with_c_transposed(plain_problem(3000, 384, 200, true, true), avx512));  // many columns
    CHECK_FALSE(serves_with_c_transposed(plain_problem(100, 32, 1000, true, false), avx512));  // A within L2
    CHECK_FALSE(serves_with_c_transposed(plain_problem(3386, 59, 2345, false, true), avx512)); // A stored M x K
    // Under 48 columns only on one thread.
    CHECK(serves_with_c_transposed(plain_problem(1330, 32, 2000, true, false), avx512, 1));
    CHECK_FALSE(serves_with_c_transposed(plain_problem(1330, 32, 2000, true, false), avx512, 16));
    CHECK(serves_with_c_transposed(plain_problem(1330, 64, 500, true, true), avx512, 16));
}

TEST_CASE("x86 f32: few columns of an A stored K x M run as C^T, then transposed into C", "[x86][matmul]") {
    std::mt19937 rng(2523);
    for (const Tier& tier : runnable_tiers()) {
        INFO("tier " << tier.name);
        const bool avx512 = tier.isa >= jitmm::hw::X86Isa::avx512;
        for (int threads : {1, 3}) {
            INFO("threads " << threads);
            jitmm_engine* e = make_engine(tier.name, threads);
            int it = 0, transposed = 0;
            for (int64_t m : {64, 77, 300, 1030}) {
                for (int64_t n : {2, 3, 16, 17, 23}) {
                    for (int64_t k : {20, 33, 164}) {
                        Case c;
                        c.m = m;
                        c.n = n;
                        c.k = k;
                        c.ta = true;
                        c.tb = it % 2 == 1;
                        c.lda_pad = it % 3 == 0 ? 5 : 0;
                        c.ldb_pad = it % 4 == 1 ? 3 : 0;
                        c.ldc_pad = it % 5 == 2 ? 7 : 0;
                        c.alpha = it % 5 == 0 ? -0.5f : 1.0f;
                        c.beta = it % 3 == 1 ? 0.5f : it % 7 == 3 ? 1.0f : 0.0f;
                        c.epilogue = static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT);
                        c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                        c.batch = it % 4 == 2 ? 3 : 1;
                        c.share_a = c.batch > 1 && it % 8 == 2;
                        c.share_b = c.batch > 1 && it % 8 == 6;
                        const bool ct = jitmm::plan::serves_with_c_transposed(plain_problem(m, n, k, true, c.tb),
                                                                               jitmm::hw::cpu_info(), tier.isa,
                                                                               threads);
                        CHECK((generator_name(e, c).find("_ct") != std::string::npos) == ct);
                        transposed += ct;
                        check_case(e, c, rng);
                        ++it;
                    }
                }
            }
            CHECK((transposed >= 50) == avx512);  // (of 60: all but m = 64 over 17 and 23 columns)
            // 1024 rows: the scratch rows are padded off 4 KiB strides.
            Case aligned{1024, 5, 40, 2, true, false, 0, 0, 0, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_SILU};
            check_case(e, aligned, rng);
            // Up to 256 columns over an A past L2 (on this machine's L2): the swapped problem packs its B as it goes.
            const Case wide[] = {
                {1030, 64, 600, 1, true, true, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_NONE},
                {700, 200, 700, 2, true, false, 3, 1, 5, 0.5f, 0.5f, JITMM_EPILOGUE_BIAS_GELU_ERF, JITMM_BIAS_PER_ROW},
                {520, 256, 900, 1, true, false, 0, 7, 0, 1.0f, 1.0f, JITMM_EPILOGUE_BIAS_RELU},
                {777, 33, 1500, 1, true, true, 1, 0, 2, -1.0f, 0.0f, JITMM_EPILOGUE_SILU},
            };
            for (const Case& c : wide) {
                INFO(describe(c));
                jitmm::Problem p = plain_problem(c.m, c.n, c.k, true, c.tb);
                p.batch = c.batch;
                const bool ct = jitmm::plan::serves_with_c_transposed(p, jitmm::hw::cpu_info(), tier.isa, threads);
                CHECK((generator_name(e, c).find("_ct") != std::string::npos) == ct);
                check_case(e, c, rng);
            }
            jitmm_engine_destroy(e);
        }
    }
}

// A B as stored read in place by a few row tiles, that fits L2 whole, runs long K blocks (its later row tiles
// read it from L2); batches that each bring their own such B together stream it from memory: short blocks.
TEST_CASE("x86 f32 planner: long K blocks over a B in place that fits L2", "[x86][plan]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    const auto isa = jitmm::hw::X86Isa::avx512;
    const auto in_l2 = jitmm::plan::plan_x86_gemm_f32(plain_problem(32, 410, 827, false, false), cpu, isa, 1);
    CHECK_FALSE(in_l2.pack_b);
    CHECK(in_l2.kc >= 256);
    jitmm::Problem batched = plain_problem(39, 2485, 132, false, false);
    batched.batch = 25;
    batched.stride_a = 39 * 132;
    batched.stride_b = 2485 * 132;
    batched.stride_c = 39 * 2485;
    CHECK(jitmm::plan::plan_x86_gemm_f32(batched, cpu, isa, 1).kc <= 32);
    std::mt19937 rng(827);
    for (const Tier& tier : runnable_tiers()) {
        jitmm_engine* e = make_engine(tier.name, 1);
        const Case cases[] = {{32, 410, 827, 1, false, false, 3, 5, 1, 1.0f, 0.5f, JITMM_EPILOGUE_BIAS_RELU},
                              {5, 1013, 164, 2, true, false, 0, 0, 0, -0.5f, 0.0f, JITMM_EPILOGUE_NONE, JITMM_BIAS_PER_COLUMN, true}};
        for (const Case& c : cases) {
            INFO("tier " << tier.name << " " << describe(c));
            check_case(e, c, rng);
        }
        jitmm_engine_destroy(e);
    }
}

// One row of A times a B stored K x N on the one-row kernel (B streamed in place as far-apart row streams). Which
// shapes the rule takes; then against the float64 reference: column tails (N % 16, fewer columns than a vector),
// K below, at and past the stream count with K % streams rows left over, every stream count and a prefetch
// distance, ldb > N, an A stored K x 1 with lda > 1 (strided a), every epilogue with the bias per row and per
// column, alpha/beta, batches with a shared B, 1 and 3 threads (column chunks), the swapped matrix times vector
// (an A stored K x M times a dense column), and a B ending on a guard page.
TEST_CASE("x86 f32: one row times a B stored K x N on the one-row kernel", "[x86][matmul]") {
    const auto avx512 = jitmm::hw::X86Isa::avx512;
    auto row = [](int64_t n, int64_t k) { return dot_problem(Case{1, n, k}); };
    // (The rules as on an Intel core; a chip whose prefetchers take few streams also takes rows 4 KiB apart.)
    jitmm::hw::CpuInfo cpu = jitmm::hw::cpu_info();
    cpu.few_streams_from_memory = false;
    CHECK(jitmm::plan::gemv_serves(row(305, 3602), cpu, avx512, 1));
    CHECK(jitmm::plan::gemv_serves(row(808, 890), cpu, avx512, 1));
    CHECK(jitmm::plan::gemv_serves(row(2845, 153), cpu, avx512, 1));
    CHECK_FALSE(jitmm::plan::gemv_serves(row(305, 3602), cpu, jitmm::hw::X86Isa::avx2, 1));
    CHECK_FALSE(jitmm::plan::gemv_serves(dot_problem(Case{2, 305, 3602}), cpu, avx512, 1));
    CHECK_FALSE(jitmm::plan::gemv_serves(dot_problem(Case{1, 305, 3602, 1, false, true}), cpu, avx512, 1));
    CHECK_FALSE(jitmm::plan::gemv_serves(row(305, 3602), cpu, avx512, 2));  // (two threads' worth of B)
    CHECK(jitmm::plan::gemv_serves(row(256, 64), cpu, avx512, 2));           // (one thread's)
    CHECK_FALSE(jitmm::plan::gemv_serves(row(4096, 32), cpu, avx512, 1));    // a short K
    CHECK_FALSE(jitmm::plan::gemv_serves(row(64, 3602), cpu, avx512, 1));    // few columns
    CHECK(jitmm::plan::gemv_serves(row(100, 3602), cpu, avx512, 1));
    CHECK_FALSE(jitmm::plan::gemv_serves(row(4096, 11008), cpu, avx512, 1));  // rows 4 KiB apart over a long K
    CHECK_FALSE(jitmm::plan::gemv_serves(row(4100, 4096), cpu, avx512, 1));
    CHECK(jitmm::plan::gemv_serves(row(4096, 2048), cpu, avx512, 1));
    CHECK(jitmm::plan::gemv_serves(row(4000, 4096), cpu, avx512, 1));
    // From 4 threads the columns split over them, rows 4 KiB apart included; 2 threads keep the tiles.
    CHECK(jitmm::plan::gemv_serves(row(4096, 4096), cpu, avx512, 16));
    CHECK(jitmm::plan::gemv_serves(row(4096, 11008), cpu, avx512, 4));
    CHECK_FALSE(jitmm::plan::gemv_serves(row(4096, 4096), cpu, avx512, 2));
    cpu.few_streams_from_memory = true;
    CHECK(jitmm::plan::gemv_serves(row(305, 3602), cpu, avx512, 2));  // (a few threads split the columns)
    CHECK(jitmm::plan::gemv_serves(row(4096, 4096), cpu, avx512, 16));
    CHECK(jitmm::plan::gemv_serves(row(4096, 11008), cpu, avx512, 1));
    CHECK(jitmm::plan::gemv_serves(row(4100, 4096), cpu, avx512, 1));
    std::mt19937 rng(3602);
    for (const Tier& tier : runnable_tiers()) {
        if (tier.isa < avx512) continue;
        for (int threads : {1, 3}) {
            jitmm_engine* e = make_engine(tier.name, threads);
            setenv("JITMM_X86_GEMV", "1", 1);  // every size, the rule's smallest included
            int it = 0;
            for (int64_t n : {1, 15, 16, 17, 63, 97, 305, 808}) {
                for (int64_t k : {1, 3, 5, 64, 891}) {
                    Case c{1, n, k, it % 4 == 1 ? 3 : 1, it % 5 == 3, false, it % 5 == 3 ? 2 : 0, it % 3 == 1 ? 5 : 0,
                           it % 4 == 3 ? 2 : 0, it % 5 == 1 ? -0.5f : 1.0f, it % 3 == 0 ? 0.5f : (it % 7 == 2 ? 1.0f : 0.0f),
                           static_cast<jitmm_epilogue>(it % JITMM_EPILOGUE_COUNT)};
                    c.bias_layout = it % 2 ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
                    c.share_b = c.batch > 1 && it % 8 == 1;
                    const std::string streams = std::to_string(1 + it % 16), pf = it % 3 == 2 ? "512" : "0";
                    setenv("JITMM_X86_GEMV_STREAMS", streams.c_str(), 1);
                    setenv("JITMM_X86_GEMV_PF", pf.c_str(), 1);
                    INFO("streams " << streams << " prefetch " << pf);
                    // (One column of ldb 1 is a dot product, planned as NT.)
                    const bool dense_column = c.n == 1 && c.ldb_pad == 0 && c.k > 1;
                    CHECK(generator_name(e, c) == (dense_column ? "x86_f32_dot_avx512" : "x86_f32_gemv_avx512"));
                    check_case(e, c, rng);
                    ++it;
                }
            }
            unsetenv("JITMM_X86_GEMV_STREAMS");
            unsetenv("JITMM_X86_GEMV_PF");
            // A matrix times a vector with A stored K x M: one row times A as stored, swapped.
            for (int64_t m : {300, 2845}) {
                Case c{m, 1, 153, 1, true, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_BIAS_GELU_TANH, JITMM_BIAS_PER_ROW};
                CHECK(generator_name(e, c) == "x86_f32_gemv_avx512_swapped");
                check_case(e, c, rng);
            }
            unsetenv("JITMM_X86_GEMV");
            jitmm_engine_destroy(e);
        }
        // B's last row ends where a PROT_NONE page begins: the tail's masked loads read nothing past it.
        jitmm_engine* e = make_engine(tier.name, 1);
        for (int64_t n : {305, 17, 808}) {
            const int64_t k = 77;
            INFO("guard page 1x" << n << "x" << k);
            const size_t b_bytes = static_cast<size_t>(n * k) * sizeof(float);
            GuardedBytes guarded_memory(static_cast<size_t>(b_bytes));
            float* b = reinterpret_cast<float*>(guarded_memory.data());
            std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
            for (int64_t i = 0; i < n * k; ++i) b[i] = uni(rng);
            std::vector<float> a(static_cast<size_t>(k)), out(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
            for (auto& v : a) v = uni(rng);
            jitmm_matmul_desc d;
            REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
            d.m = 1; d.n = n; d.k = k;
            d.lda = k; d.ldb = n; d.ldc = n;
            jitmm_matmul_args args;
            REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
            args.a = a.data(); args.b = b; args.c = out.data();
            setenv("JITMM_X86_GEMV", "1", 1);
            REQUIRE(jitmm_matmul(e, &d, &args) == JITMM_STATUS_SUCCESS);
            unsetenv("JITMM_X86_GEMV");
            double worst = 0;
            for (int64_t j = 0; j < n; ++j) {
                double ref = 0, mag = 0;
                for (int64_t p = 0; p < k; ++p) {
                    ref += double(a[p]) * b[p * n + j];
                    mag += std::fabs(double(a[p]) * b[p * n + j]);
                }
                const double err = std::fabs(out[j] - ref) / (mag + 1e-30);
                worst = std::isfinite(out[j]) ? std::max(worst, err) : 1e30;
            }
            CHECK(worst <= 1e-6);
        }
        jitmm_engine_destroy(e);
    }
}

// A B as stored read in place over 5/8 of L2 (up to all of it; past 7/8 by one or two row tiles): its rows
// prefetched 16 steps ahead in the long K blocks of a B that fits; not for a smaller B, one- or two-row tiles,
// rows 4 KiB apart, nor a B past L2 or one that the call's A and C push out of it (over a K of 128 or more: its
// rows 32 steps ahead in 32-row blocks, as from memory).
TEST_CASE("x86 f32 planner: a B in place crowding L2 prefetches its rows in long K blocks", "[x86][plan]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 48 * 1024;
    cpu.l2_bytes = 2048 * 1024;
    const auto isa = jitmm::hw::X86Isa::avx512;
    for (bool ta : {false, true}) {
        const auto crowded = jitmm::plan::plan_x86_gemm_f32(plain_problem(7, 390, 1233, ta, false), cpu, isa, 1);
        CHECK(crowded.layout.b_prefetch_k == 16);
        CHECK(crowded.kc >= 256);
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(7, 1200, 300, ta, false), cpu, isa, 1).layout.b_prefetch_k == 16);
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(7, 500, 600, ta, false), cpu, isa, 1).layout.b_prefetch_k == 0);
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(2, 390, 1233, ta, false), cpu, isa, 1).layout.b_prefetch_k != 16);
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(7, 1024, 450, ta, false), cpu, isa, 1).layout.b_prefetch_k == 0);
        // Past 7/8 of L2 only for one or two row tiles (three of 12 or 14 rows here); 86% of L2 for any.
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(36, 390, 1000, ta, false), cpu, isa, 1).layout.b_prefetch_k == 16);
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(33, 390, 1233, ta, false), cpu, isa, 1).layout.b_prefetch_k == 32);
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(40, 500, 900, ta, false), cpu, isa, 1).layout.b_prefetch_k == 16);
        const auto from_memory = jitmm::plan::plan_x86_gemm_f32(plain_problem(7, 390, 3000, ta, false), cpu, isa, 1);
        CHECK(from_memory.layout.b_prefetch_k == 32);
        CHECK(from_memory.kc == 32);
        // B within L2 but not with the call's A and C beside it: streamed as from memory, over a K of 128 or more.
        const auto own_call = jitmm::plan::plan_x86_gemm_f32(plain_problem(40, 390, 1233, ta, false), cpu, isa, 1);
        CHECK(own_call.layout.b_prefetch_k == 32);
        CHECK(own_call.kc == 32);
        CHECK(jitmm::plan::plan_x86_gemm_f32(plain_problem(32, 4000, 100, ta, false), cpu, isa, 1).layout.b_prefetch_k == 16);
    }
    std::mt19937 rng(1233);
    for (const Tier& tier : runnable_tiers()) {
        jitmm_engine* e = make_engine(tier.name, 1);
        const Case cases[] = {{7, 390, 1233, 1, false, false, 0, 0, 0, 1.0f, 0.0f, JITMM_EPILOGUE_NONE},
                              {7, 390, 1233, 1, true, false, 3, 0, 5, -0.5f, 0.5f, JITMM_EPILOGUE_BIAS_SILU},
                              {6, 1200, 300, 1, false, false, 1, 0, 0, 1.0f, 1.0f, JITMM_EPILOGUE_BIAS_RELU, JITMM_BIAS_PER_ROW},
                              {40, 390, 1233, 1, false, false, 0, 3, 0, 1.0f, 0.0f, JITMM_EPILOGUE_GELU_TANH}};
        for (const Case& c : cases) {
            INFO("tier " << tier.name << " " << describe(c));
            check_case(e, c, rng);
        }
        jitmm_engine_destroy(e);
    }
}

TEST_CASE("x86 f32 planner: one row tile over a B from memory takes 8-row K blocks where prefetchers take few streams",
          "[x86][plan]") {
    jitmm::hw::CpuInfo cpu;
    cpu.l1d_bytes = 32 * 1024;
    cpu.l2_bytes = 1024 * 1024;
    cpu.l3_bytes = 32 * 1024 * 1024;
    const auto kc_of = [&](int64_t m, int64_t n, int64_t k, bool few_streams) {
        jitmm::Problem p;
        p.m = m; p.n = n; p.k = k;
        p.lda = k; p.ldb = n; p.ldc = n;
        cpu.few_streams_from_memory = few_streams;
        const auto plan = jitmm::plan::plan_x86_gemm_f32(p, cpu, jitmm::hw::X86Isa::avx512, 1);
        INFO(plan.describe());
        return plan.kc;
    };
    CHECK(kc_of(8, 4096, 4096, true) == 8);
    CHECK(kc_of(4, 11008, 4096, true) == 8);
    CHECK(kc_of(8, 4096, 4096, false) == 32);   // prefetchers that follow many streams: 32 rows
    CHECK(kc_of(32, 4096, 4096, true) == 32);   // several row tiles
    CHECK(kc_of(8, 256, 256, true) > 32);       // a B in L2 keeps long blocks
}
