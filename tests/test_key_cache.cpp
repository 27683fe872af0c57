// Kernel keys (stability, sensitivity to every field, canonicalization), the 128-bit hash, the in-memory
// kernel cache (single-flight, error propagation, LRU eviction, kernels outliving eviction), and the CPU
// parallel layer (the engine's thread pool and a framework's parallel-for handed in by config).
#include "api/validate.hpp"
#include "core/cache.hpp"
#include "core/engine.hpp"
#include "core/error.hpp"
#include "core/kernel.hpp"
#include "core/key.hpp"
#include "core/parallel.hpp"
#include "core/problem.hpp"
#include "hw/cpu.hpp"
#include "skip.hpp"
#include "x86/backend_x86.hpp"

#include <jitmm/jitmm.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using jitmm::KernelCache;
using jitmm::KernelKey;
using jitmm::KernelPtr;
using jitmm::KeyWriter;

// ---------------------------------------------------------------------------------------------------------
// Helpers: engines and keys through the C API and through the internal Engine.

jitmm_matmul_desc make_desc(int64_t m, int64_t n, int64_t k) {
    jitmm_matmul_desc d;
    REQUIRE(jitmm_matmul_desc_init(&d) == JITMM_STATUS_SUCCESS);
    d.m = m;
    d.n = n;
    d.k = k;
    return d;
}

jitmm_engine_config make_config(int num_threads, const char* max_isa = nullptr) {
    jitmm_engine_config c;
    REQUIRE(jitmm_engine_config_init(&c) == JITMM_STATUS_SUCCESS);
    c.cache_dir = "";
    c.num_threads = num_threads;
    c.max_isa = max_isa;
    return c;
}

class EngineHolder {
public:
    explicit EngineHolder(const jitmm_engine_config& config) {
        const jitmm_status s = jitmm_engine_create(&config, &engine_);
        INFO(jitmm_last_error_message());
        REQUIRE(s == JITMM_STATUS_SUCCESS);
    }
    ~EngineHolder() { jitmm_engine_destroy(engine_); }
    EngineHolder(const EngineHolder&) = delete;
    EngineHolder& operator=(const EngineHolder&) = delete;
    jitmm_engine* get() const { return engine_; }

private:
    jitmm_engine* engine_ = nullptr;
};

struct KeyInfo {
    std::string key_hex;
    std::string generator;
};

// The key of desc's kernel through the public API.
KeyInfo c_api_key(jitmm_engine* engine, const jitmm_matmul_desc& desc) {
    jitmm_kernel* kernel = nullptr;
    const jitmm_status s = jitmm_kernel_create(engine, &desc, &kernel);
    INFO(jitmm_last_error_message());
    REQUIRE(s == JITMM_STATUS_SUCCESS);
    jitmm_kernel_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    REQUIRE(jitmm_kernel_get_info(kernel, &info) == JITMM_STATUS_SUCCESS);
    KeyInfo out{info.key_hex, info.generator};
    jitmm_kernel_release(kernel);
    return out;
}

// An internal engine (the same construction jitmm_engine_create does).
std::unique_ptr<jitmm::Engine> internal_engine(const jitmm_engine_config& config) {
    const jitmm::EngineOptions options = jitmm::resolve_engine_options(&config);
    return std::make_unique<jitmm::Engine>(options, jitmm::x86::make_x86_backend(options));
}

KernelKey internal_key(jitmm::Engine& engine, const jitmm_matmul_desc& desc) {
    const jitmm::Problem p = jitmm::api::problem_from_desc(&desc);
    const KernelPtr kernel = engine.get_kernel(p, false);
    REQUIRE(kernel != nullptr);
    return kernel->meta().key;
}

KernelKey problem_key(const jitmm::Problem& p) {
    KeyWriter w;
    jitmm::append_problem(w, p);
    return w.finish();
}

bool is_lower_hex(const std::string& s) {
    for (char ch : s)
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    return true;
}

// ---------------------------------------------------------------------------------------------------------
// A do-nothing kernel for cache tests.

class FakeKernel final : public jitmm::Kernel {
public:
    explicit FakeKernel(const std::string& name) : Kernel(meta_for(name)) {}
    void run(const jitmm::RunArgs&) const override { runs.fetch_add(1); }
    mutable std::atomic<int> runs{0};

private:
    static jitmm::KernelMeta meta_for(const std::string& name) {
        jitmm::KernelMeta m;
        m.generator = "fake";
        m.recipe = name;
        return m;
    }
};

KernelKey name_key(const std::string& name) { return KeyWriter().str('n', name).finish(); }

// Releases N threads at once, so that they reach the code under test together.
class StartLine {
public:
    explicit StartLine(int parties) : waiting_(parties) {}
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        if (--waiting_ == 0) cv_.notify_all();
        else cv_.wait(lock, [&] { return waiting_ == 0; });
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    int waiting_;
};

}  // namespace

// =========================================================================================================
// Keys.

TEST_CASE("key: the same desc gives the same key in two separately created engines", "[key]") {
    const jitmm_engine_config config = make_config(2);
    const jitmm_matmul_desc desc = make_desc(48, 40, 24);

    // Public API: two engines, same key_hex; asking twice on one engine gives it again.
    EngineHolder e1(config), e2(config);
    const KeyInfo k1 = c_api_key(e1.get(), desc);
    const KeyInfo k2 = c_api_key(e2.get(), desc);
    const KeyInfo k1_again = c_api_key(e1.get(), desc);
    CHECK(k1.key_hex.size() == 32);
    CHECK(is_lower_hex(k1.key_hex));
    CHECK(k1.key_hex == k2.key_hex);
    CHECK(k1.key_hex == k1_again.key_hex);
    CHECK(k1.generator == k2.generator);

    // Internal: two jitmm::Engine objects produce byte-identical keys, whose hash is the C API's key_hex.
    auto i1 = internal_engine(config);
    auto i2 = internal_engine(config);
    const KernelKey a = internal_key(*i1, desc);
    const KernelKey b = internal_key(*i2, desc);
    CHECK(!a.bytes.empty());
    CHECK(a.bytes == b.bytes);
    CHECK(a.hash == b.hash);
    CHECK(a == b);
    CHECK(a.hash.hex() == k1.key_hex);
    // The hash is the hash of the bytes.
    CHECK(jitmm::hash128(a.bytes.data(), a.bytes.size()) == a.hash);
    // The key names the target and the generator.
    CHECK(a.bytes.find("x86 isa=") != std::string::npos);
    CHECK(a.bytes.find(k1.generator) != std::string::npos);
}

TEST_CASE("key: changing any single desc field changes the key", "[key]") {
    const jitmm_engine_config config = make_config(2);
    EngineHolder engine(config);
    auto internal = internal_engine(config);

    const int64_t M = 8, N = 16, K = 4;
    const jitmm_matmul_desc base = make_desc(M, N, K);
    jitmm_matmul_desc batched = base;  // tight, non-overlapping strides
    batched.batch_count = 2;
    batched.stride_a = M * K;
    batched.stride_b = K * N;
    batched.stride_c = M * N;

    struct Variant {
        std::string name;
        jitmm_matmul_desc desc;
    };
    std::vector<Variant> variants;
    auto add = [&](const std::string& name, const jitmm_matmul_desc& from, auto&& change) {
        jitmm_matmul_desc d = from;
        change(d);
        variants.push_back({name, d});
    };
    add("base", base, [](jitmm_matmul_desc&) {});
    add("m", base, [](jitmm_matmul_desc& d) { d.m += 1; });
    add("n", base, [](jitmm_matmul_desc& d) { d.n += 1; });
    add("k", base, [](jitmm_matmul_desc& d) { d.k += 1; });
    add("trans_a", base, [](jitmm_matmul_desc& d) { d.trans_a = 1; });
    add("trans_b", base, [](jitmm_matmul_desc& d) { d.trans_b = 1; });
    add("trans_a+trans_b", base, [](jitmm_matmul_desc& d) { d.trans_a = d.trans_b = 1; });
    add("lda", base, [](jitmm_matmul_desc& d) { d.lda = d.k + 1; });
    add("ldb", base, [](jitmm_matmul_desc& d) { d.ldb = d.n + 1; });
    add("ldc", base, [](jitmm_matmul_desc& d) { d.ldc = d.n + 1; });
    add("alpha=2", base, [](jitmm_matmul_desc& d) { d.alpha = 2.0f; });
    add("alpha=-1", base, [](jitmm_matmul_desc& d) { d.alpha = -1.0f; });
    add("alpha=+0", base, [](jitmm_matmul_desc& d) { d.alpha = 0.0f; });
    add("alpha=-0", base, [](jitmm_matmul_desc& d) { d.alpha = -0.0f; });
    add("beta=1", base, [](jitmm_matmul_desc& d) { d.beta = 1.0f; });
    add("beta=-0", base, [](jitmm_matmul_desc& d) { d.beta = -0.0f; });  // base has +0.0
    for (int e = 1; e < JITMM_EPILOGUE_COUNT; ++e)
        add(std::string("epilogue=") + jitmm_epilogue_name(static_cast<jitmm_epilogue>(e)), base,
            [e](jitmm_matmul_desc& d) { d.epilogue = static_cast<jitmm_epilogue>(e); });
    add("bias per row", base, [](jitmm_matmul_desc& d) {
        d.epilogue = JITMM_EPILOGUE_BIAS;
        d.bias_layout = JITMM_BIAS_PER_ROW;
    });
    add("bias_relu per row", base, [](jitmm_matmul_desc& d) {
        d.epilogue = JITMM_EPILOGUE_BIAS_RELU;
        d.bias_layout = JITMM_BIAS_PER_ROW;
    });
    add("batch_count=2", batched, [](jitmm_matmul_desc&) {});
    add("batch_count=3", batched, [](jitmm_matmul_desc& d) { d.batch_count = 3; });
    add("batched stride_a", batched, [](jitmm_matmul_desc& d) { d.stride_a += 1; });
    add("batched stride_b", batched, [](jitmm_matmul_desc& d) { d.stride_b += 1; });
    add("batched stride_c", batched, [](jitmm_matmul_desc& d) { d.stride_c += 1; });
    add("batched stride_a=0", batched, [](jitmm_matmul_desc& d) { d.stride_a = 0; });
    add("batched stride_b=0", batched, [](jitmm_matmul_desc& d) { d.stride_b = 0; });

    std::map<std::string, std::string> hex_owner;    // key_hex -> the variant that produced it
    std::map<std::string, std::string> bytes_owner;  // key bytes -> the variant
    for (const Variant& v : variants) {
        INFO("variant " << v.name);
        const std::string hex = c_api_key(engine.get(), v.desc).key_hex;
        const KernelKey key = internal_key(*internal, v.desc);
        CHECK(key.hash.hex() == hex);
        const auto h = hex_owner.emplace(hex, v.name);
        INFO("same key_hex as " << h.first->second);
        CHECK(h.second);
        const auto b = bytes_owner.emplace(key.bytes, v.name);
        INFO("same key bytes as " << b.first->second);
        CHECK(b.second);
    }
    CHECK(hex_owner.size() == variants.size());
    CHECK(bytes_owner.size() == variants.size());
}

TEST_CASE("key: fields that do not change the kernel are canonicalized away", "[key]") {
    const jitmm_engine_config config = make_config(2);
    EngineHolder engine(config);
    const jitmm_matmul_desc base = make_desc(8, 16, 4);
    const std::string base_hex = c_api_key(engine.get(), base).key_hex;

    // ld 0 and the explicit tight ld are the same problem.
    jitmm_matmul_desc d = base;
    d.lda = 4;
    d.ldb = 16;
    d.ldc = 16;
    CHECK(c_api_key(engine.get(), d).key_hex == base_hex);
    // Strides are ignored with one batch.
    d = base;
    d.stride_a = 1;
    d.stride_b = 1000;
    d.stride_c = 3;
    CHECK(c_api_key(engine.get(), d).key_hex == base_hex);
    // bias_type / bias_layout only matter with a bias epilogue.
    d = base;
    d.bias_type = JITMM_DTYPE_BF16;
    d.bias_layout = JITMM_BIAS_PER_ROW;
    CHECK(c_api_key(engine.get(), d).key_hex == base_hex);
    d.epilogue = JITMM_EPILOGUE_RELU;
    jitmm_matmul_desc relu = base;
    relu.epilogue = JITMM_EPILOGUE_RELU;
    CHECK(c_api_key(engine.get(), d).key_hex == c_api_key(engine.get(), relu).key_hex);
    // And the key_hex of a different problem is different (the checks above are not vacuous).
    d = base;
    d.m = 9;
    CHECK(c_api_key(engine.get(), d).key_hex != base_hex);
}

TEST_CASE("key: dtype fields each change the problem's key bytes", "[key]") {
    // The CPU backend rejects non-f32 problems, so this goes through append_problem directly.
    jitmm::Problem base;
    base.m = 8;
    base.n = 16;
    base.k = 4;
    base.lda = 4;
    base.ldb = 16;
    base.ldc = 16;
    base.bias = jitmm::BiasKind::per_column;

    std::map<std::string, std::string> owner;
    int count = 0;
    auto expect_new = [&](const jitmm::Problem& p, const std::string& name) {
        INFO("variant " << name);
        const KernelKey key = problem_key(p);
        CHECK(key == problem_key(p));  // deterministic
        const auto r = owner.emplace(key.bytes, name);
        INFO("same bytes as " << r.first->second);
        CHECK(r.second);
        ++count;
    };
    expect_new(base, "base");
    for (int t = 1; t < JITMM_DTYPE_COUNT; ++t) {
        const jitmm_dtype dt = static_cast<jitmm_dtype>(t);
        const std::string name = jitmm_dtype_name(dt);
        jitmm::Problem p = base;
        p.a_type = dt;
        expect_new(p, "a_type=" + name);
        p = base;
        p.b_type = dt;
        expect_new(p, "b_type=" + name);
        p = base;
        p.c_type = dt;
        expect_new(p, "c_type=" + name);
        p = base;
        p.bias_type = dt;
        expect_new(p, "bias_type=" + name);
    }
    // Swapped input types are different problems.
    jitmm::Problem p = base;
    p.a_type = JITMM_DTYPE_F16;
    p.b_type = JITMM_DTYPE_BF16;
    expect_new(p, "f16*bf16");
    p.a_type = JITMM_DTYPE_BF16;
    p.b_type = JITMM_DTYPE_F16;
    expect_new(p, "bf16*f16");
    CHECK(owner.size() == size_t(count));
    CHECK(count == 1 + 4 * (JITMM_DTYPE_COUNT - 1) + 2);

    // Without a bias, bias_type does not enter the key.
    jitmm::Problem no_bias = base;
    no_bias.bias = jitmm::BiasKind::none;
    jitmm::Problem no_bias_other = no_bias;
    no_bias_other.bias_type = JITMM_DTYPE_S8;
    CHECK(problem_key(no_bias).bytes == problem_key(no_bias_other).bytes);
    // With one batch, strides do not either.
    jitmm::Problem strided = base;
    strided.stride_a = 5;
    strided.stride_c = 99;
    CHECK(problem_key(strided).bytes == problem_key(base).bytes);
    strided.batch = 2;
    CHECK(problem_key(strided).bytes != problem_key(base).bytes);
}

TEST_CASE("key: a different max_isa cap gives a different key", "[key]") {
    const jitmm_matmul_desc desc = make_desc(32, 48, 16);
    EngineHolder avx2(make_config(2, "avx2"));
    EngineHolder avx512(make_config(2, "avx512"));
    const jitmm::hw::X86Isa best = jitmm::hw::cpu_info().best_isa;
    if (best < jitmm::hw::X86Isa::avx2) {
        WARN_SKIPPED("this CPU has no avx2 tier");
        return;
    }
    const KeyInfo k2 = c_api_key(avx2.get(), desc);
    const KeyInfo k512 = c_api_key(avx512.get(), desc);
    CHECK(k2.generator == "x86_f32_avx2");
    if (best >= jitmm::hw::X86Isa::avx512) {
        CHECK(k512.generator == "x86_f32_avx512");
        CHECK(k2.key_hex != k512.key_hex);
    } else {
        // Both caps land on the avx2 tier here: the same kernel, the same key.
        WARN("this CPU tops out at avx2: the avx512 cap changes nothing");
        CHECK(k2.key_hex == k512.key_hex);
    }
    // The same cap in a fresh engine gives the same key again.
    EngineHolder avx2_again(make_config(2, "avx2"));
    CHECK(c_api_key(avx2_again.get(), desc).key_hex == k2.key_hex);
}

TEST_CASE("key: hash128 and KeyWriter sanity", "[key]") {
    // Deterministic, and different for different inputs, including inputs that differ only in length
    // (zeros of lengths 0..64) or in one bit.
    std::set<std::pair<uint64_t, uint64_t>> seen;
    const std::vector<unsigned char> zeros(64, 0);
    for (size_t len = 0; len <= 64; ++len) {
        const jitmm::Hash128 h = jitmm::hash128(zeros.data(), len);
        CHECK(h == jitmm::hash128(zeros.data(), len));
        CHECK(seen.insert({h.lo, h.hi}).second);
    }
    std::vector<unsigned char> bytes(40, 0);
    for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
        bytes.assign(40, 0);
        bytes[bit / 8] = static_cast<unsigned char>(1u << (bit % 8));
        const jitmm::Hash128 h = jitmm::hash128(bytes.data(), bytes.size());
        INFO("bit " << bit);
        CHECK(seen.insert({h.lo, h.hi}).second);
    }
    const std::string s1 = "abc", s2 = "abd";
    CHECK(!(jitmm::hash128(s1.data(), s1.size()) == jitmm::hash128(s2.data(), s2.size())));
    // Both halves carry information.
    const jitmm::Hash128 h = jitmm::hash128(s1.data(), s1.size());
    CHECK(h.lo != 0);
    CHECK(h.hi != 0);
    CHECK(h.lo != h.hi);

    // hex: 32 lowercase digits, hi then lo.
    jitmm::Hash128 known;
    known.hi = 0x0123456789abcdefull;
    known.lo = 0xfedcba9876543210ull;
    CHECK(known.hex() == "0123456789abcdeffedcba9876543210");
    const std::string hex = h.hex();
    CHECK(hex.size() == 32);
    CHECK(is_lower_hex(hex));
    CHECK(jitmm::Hash128{}.hex() == std::string(32, '0'));

    // KeyWriter: tags and length prefixes keep different field sequences apart.
    CHECK(KeyWriter().i64('m', 1).i64('n', 2).finish().bytes != KeyWriter().i64('n', 1).i64('m', 2).finish().bytes);
    CHECK(KeyWriter().str('s', "ab").str('s', "c").finish().bytes !=
          KeyWriter().str('s', "a").str('s', "bc").finish().bytes);
    CHECK(KeyWriter().f32('f', 0.0f).finish().bytes != KeyWriter().f32('f', -0.0f).finish().bytes);
    const KernelKey a = KeyWriter().i64('x', 42).str('y', "gen").finish();
    const KernelKey b = KeyWriter().i64('x', 42).str('y', "gen").finish();
    CHECK(a == b);
    CHECK(jitmm::KernelKeyHasher()(a) == jitmm::KernelKeyHasher()(b));
    CHECK(a.bytes.size() == (1 + 8) + (1 + 8 + 3));
}

// =========================================================================================================
// KernelCache.

TEST_CASE("cache: 16 threads asking for one new key generate it once", "[cache]") {
    KernelCache cache(16);
    const KernelKey key = name_key("single");
    std::atomic<int> made{0};
    auto make = [&]() -> KernelPtr {
        made.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return std::make_shared<FakeKernel>("single");
    };
    constexpr int kThreads = 16;
    std::vector<KernelPtr> got(kThreads);
    std::vector<int> hit(kThreads, -1);
    StartLine start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            start.arrive_and_wait();
            bool h = false;
            got[t] = cache.get_or_create(key, make, &h);
            hit[t] = h ? 1 : 0;
        });
    for (auto& th : threads) th.join();

    CHECK(made.load() == 1);
    REQUIRE(got[0] != nullptr);
    int misses = 0;
    for (int t = 0; t < kThreads; ++t) {
        CHECK(got[t] == got[0]);
        misses += hit[t] == 0;
    }
    CHECK(misses == 1);  // exactly one caller generated; the rest waited or hit
    const jitmm::CacheStats s = cache.stats();
    CHECK(s.misses == 1);
    CHECK(s.hits == kThreads - 1);
    CHECK(s.entries == 1);
    CHECK(s.evictions == 0);
    // And it is cached now.
    bool h = false;
    CHECK(cache.get_or_create(key, make, &h) == got[0]);
    CHECK(h);
    CHECK(made.load() == 1);
}

TEST_CASE("cache: 4 keys x 4 threads each generate 4 kernels", "[cache]") {
    KernelCache cache(16);
    std::atomic<int> made{0};
    constexpr int kKeys = 4, kPerKey = 4;
    std::vector<KernelPtr> got(kKeys * kPerKey);
    StartLine start(kKeys * kPerKey);
    std::vector<std::thread> threads;
    for (int i = 0; i < kKeys * kPerKey; ++i)
        threads.emplace_back([&, i] {
            const int key_index = i % kKeys;
            const KernelKey key = name_key("key" + std::to_string(key_index));
            start.arrive_and_wait();
            got[i] = cache.get_or_create(key, [&, key_index]() -> KernelPtr {
                made.fetch_add(1);
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                return std::make_shared<FakeKernel>("key" + std::to_string(key_index));
            });
        });
    for (auto& th : threads) th.join();

    CHECK(made.load() == kKeys);
    std::set<const jitmm::Kernel*> distinct;
    for (int i = 0; i < kKeys * kPerKey; ++i) {
        REQUIRE(got[i] != nullptr);
        CHECK(got[i] == got[i % kKeys]);  // same key, same kernel
        CHECK(got[i]->meta().recipe == "key" + std::to_string(i % kKeys));
        distinct.insert(got[i].get());
    }
    CHECK(distinct.size() == size_t(kKeys));
    const jitmm::CacheStats s = cache.stats();
    CHECK(s.misses == kKeys);
    CHECK(s.hits == kKeys * (kPerKey - 1));
    CHECK(s.entries == kKeys);
}

TEST_CASE("cache: a throwing make() fails every waiter, caches nothing, and is retried later", "[cache]") {
    KernelCache cache(4);
    const KernelKey key = name_key("throws");
    std::atomic<int> made{0};
    auto failing_make = [&]() -> KernelPtr {
        made.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        jitmm::fail(JITMM_STATUS_JIT_FAILED, "generator exploded");
    };
    constexpr int kThreads = 8;
    std::vector<int> status(kThreads, -1);
    std::vector<std::string> message(kThreads);
    std::vector<int> returned(kThreads, 0);
    StartLine start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            start.arrive_and_wait();
            try {
                const KernelPtr k = cache.get_or_create(key, failing_make);
                returned[t] = k != nullptr ? 1 : 2;
            } catch (const jitmm::Error& e) {
                status[t] = e.status();
                message[t] = e.what();
            } catch (...) {
                status[t] = -2;
            }
        });
    for (auto& th : threads) th.join();

    CHECK(made.load() == 1);  // the waiters shared the one failed attempt
    for (int t = 0; t < kThreads; ++t) {
        INFO("thread " << t);
        CHECK(returned[t] == 0);
        CHECK(status[t] == JITMM_STATUS_JIT_FAILED);
        CHECK(message[t] == "generator exploded");
    }
    jitmm::CacheStats s = cache.stats();
    CHECK(s.entries == 0);

    // A later call tries again (and a failure again is not cached either).
    CHECK_THROWS_AS(cache.get_or_create(key, failing_make), jitmm::Error);
    CHECK(made.load() == 2);
    CHECK(cache.stats().entries == 0);

    std::atomic<int> good_made{0};
    auto good_make = [&]() -> KernelPtr {
        good_made.fetch_add(1);
        return std::make_shared<FakeKernel>("recovered");
    };
    bool hit = true;
    const KernelPtr k = cache.get_or_create(key, good_make, &hit);
    REQUIRE(k != nullptr);
    CHECK_FALSE(hit);
    CHECK(k->meta().recipe == "recovered");
    CHECK(good_made.load() == 1);
    CHECK(cache.get_or_create(key, good_make, &hit) == k);
    CHECK(hit);
    CHECK(good_made.load() == 1);
    CHECK(cache.stats().entries == 1);
}

TEST_CASE("cache: LRU eviction at capacity, stats, and kernels that outlive eviction", "[cache]") {
    KernelCache cache(3);
    CHECK(cache.capacity() == 3);
    std::map<std::string, int> made;
    auto get = [&](const std::string& name, bool* hit) {
        return cache.get_or_create(name_key(name), [&, name]() -> KernelPtr {
            ++made[name];
            return std::make_shared<FakeKernel>(name);
        }, hit);
    };
    bool hit = false;
    const KernelPtr a = get("A", &hit);
    CHECK_FALSE(hit);
    KernelPtr b = get("B", &hit);
    CHECK_FALSE(hit);
    const KernelPtr c = get("C", &hit);
    CHECK_FALSE(hit);
    jitmm::CacheStats s = cache.stats();
    CHECK(s.misses == 3);
    CHECK(s.hits == 0);
    CHECK(s.entries == 3);
    CHECK(s.evictions == 0);

    CHECK(get("A", &hit) == a);  // touch A: B is now the least recently used
    CHECK(hit);
    const KernelPtr d = get("D", &hit);  // evicts B
    CHECK_FALSE(hit);
    s = cache.stats();
    CHECK(s.misses == 4);
    CHECK(s.hits == 1);
    CHECK(s.entries == 3);
    CHECK(s.evictions == 1);

    // B's kernel is still alive through the caller's shared_ptr, and usable.
    REQUIRE(b != nullptr);
    CHECK(b.use_count() == 1);
    CHECK(b->meta().recipe == "B");
    b->run(jitmm::RunArgs{});
    CHECK(static_cast<const FakeKernel&>(*b).runs.load() == 1);

    // A, C, D still hit (no make); this order leaves A least recently used (recency: D, C, A).
    CHECK(get("A", &hit) == a);
    CHECK(hit);
    CHECK(get("C", &hit) == c);
    CHECK(hit);
    CHECK(get("D", &hit) == d);
    CHECK(hit);
    CHECK(made["A"] == 1);
    CHECK(made["C"] == 1);
    CHECK(made["D"] == 1);
    // Asking for B again makes it anew and evicts A.
    const KernelPtr b2 = get("B", &hit);
    CHECK_FALSE(hit);
    CHECK(made["B"] == 2);
    CHECK(b2 != b);
    CHECK(b2->meta().recipe == "B");
    s = cache.stats();
    CHECK(s.misses == 5);
    CHECK(s.hits == 4);
    CHECK(s.entries == 3);
    CHECK(s.evictions == 2);
    // A was the one evicted (C and D still hit), and the old handle to A still works.
    CHECK(get("C", &hit) == c);
    CHECK(hit);
    CHECK(get("D", &hit) == d);
    CHECK(hit);
    CHECK(made["A"] == 1);
    const KernelPtr a2 = get("A", &hit);
    CHECK_FALSE(hit);
    CHECK(made["A"] == 2);
    CHECK(a2 != a);
    CHECK(a->meta().recipe == "A");
    CHECK(cache.stats().entries == 3);
    // Asking for A evicted B2 (recency was D, C, B2): the caller's handle is now the only one.
    CHECK(b2.use_count() == 1);
    CHECK(b2->meta().recipe == "B");
    CHECK(cache.stats().evictions == 3);
    b.reset();  // the last reference to the first, evicted B goes away cleanly
}

TEST_CASE("cache: capacity 0 is treated as 1", "[cache]") {
    KernelCache cache(0);
    CHECK(cache.capacity() == 1);
    int made = 0;
    auto make = [&]() -> KernelPtr {
        ++made;
        return std::make_shared<FakeKernel>("x");
    };
    const KernelPtr x = cache.get_or_create(name_key("x"), make);
    CHECK(cache.get_or_create(name_key("x"), make) == x);
    CHECK(made == 1);
    cache.get_or_create(name_key("y"), make);
    CHECK(made == 2);
    CHECK(cache.stats().entries == 1);
    CHECK(cache.stats().evictions == 1);
}

// =========================================================================================================
// ThreadPool and ParallelRunner.

TEST_CASE("parallel: ThreadPool and ParallelRunner cover every index exactly once", "[parallel]") {
    for (int threads = 1; threads <= 4; ++threads) {
        jitmm::ThreadPool pool(threads);
        CHECK(pool.num_threads() == threads);
        jitmm::ParallelRunner runner(threads, nullptr, nullptr);
        CHECK(runner.num_threads() == threads);
        CHECK_FALSE(runner.uses_external());
        for (int64_t n : {0, 1, 2, 7, 1000}) {
            INFO("threads " << threads << " n " << n);
            for (int which = 0; which < 2; ++which) {
                std::vector<std::atomic<int>> count(static_cast<size_t>(n) + 1);
                for (auto& c : count) c.store(0);
                std::atomic<int64_t> out_of_range{0};
                const jitmm::TaskFn fn = [&](int64_t i) {
                    if (i < 0 || i >= n) out_of_range.fetch_add(1);
                    else count[size_t(i)].fetch_add(1);
                };
                if (which == 0) pool.parallel_for(n, fn);
                else runner.parallel_for(n, fn);
                int64_t wrong = 0;
                for (int64_t i = 0; i < n; ++i) wrong += count[size_t(i)].load() != 1;
                CHECK(wrong == 0);
                CHECK(out_of_range.load() == 0);
            }
        }
        // The pool is reusable many times in a row.
        std::atomic<int64_t> sum{0};
        for (int rep = 0; rep < 200; ++rep) pool.parallel_for(13, [&](int64_t i) { sum.fetch_add(i + 1); });
        CHECK(sum.load() == 200 * (13 * 14 / 2));
    }
}

// A job of n tasks is run by the caller and workers 1 .. n - 1 only: the others never touch it (a small call
// on a many-thread engine does not wait for every worker). Over many jobs of 2 tasks, only two threads ever
// run them (any idle worker could otherwise take one); job sizes alternate, so workers left out of one job
// still join the next.
TEST_CASE("parallel: a job of few tasks runs on as many threads, the next larger one on more", "[parallel]") {
    jitmm::ThreadPool pool(8);
    std::mutex m;
    std::map<int64_t, std::set<std::thread::id>> ids_by_size;
    for (int rep = 0; rep < 300; ++rep) {
        const int64_t n = rep % 3 == 0 ? 2 : rep % 3 == 1 ? 40 : 5;
        std::vector<std::atomic<int>> count(static_cast<size_t>(n));
        for (auto& c : count) c.store(0);
        pool.parallel_for(n, [&](int64_t i) {
            count[size_t(i)].fetch_add(1);
            {
                std::lock_guard<std::mutex> lock(m);
                ids_by_size[n].insert(std::this_thread::get_id());
            }
            // Long enough that idle workers would get to the job's remaining tasks if they could take them.
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        });
        int64_t wrong = 0;
        for (auto& c : count) wrong += c.load() != 1;
        REQUIRE(wrong == 0);
    }
    CHECK(ids_by_size[2].size() <= 2);
    CHECK(ids_by_size[5].size() <= 5);
    CHECK(ids_by_size[40].size() <= 8);
}

// Task t of a job of at most num_threads tasks belongs to thread t, call after call (so that its data stay in
// one core's caches); another thread takes it only when its owner is late. Each task waits (bounded) until
// all three have started, so no thread can finish early and take a late owner's task: ownership then holds
// even on a loaded machine (ctest runs tests side by side), unless a worker is more than a second late.
TEST_CASE("parallel: task t of a small job runs on the same thread from call to call", "[parallel]") {
    jitmm::ThreadPool pool(3);
    constexpr int kJobs = 20;
    std::vector<std::array<std::thread::id, 3>> ran_on(kJobs);
    for (int job = 0; job < kJobs; ++job) {
        std::atomic<int> started{0};
        pool.parallel_for(3, [&](int64_t t) {
            ran_on[size_t(job)][size_t(t)] = std::this_thread::get_id();
            started.fetch_add(1);
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
            while (started.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        });
    }
    const std::thread::id caller = std::this_thread::get_id();
    int task0_on_caller = 0, same_as_first_job = 0;
    for (int job = 0; job < kJobs; ++job) {
        task0_on_caller += ran_on[size_t(job)][0] == caller;
        same_as_first_job += ran_on[size_t(job)][1] == ran_on[0][1] && ran_on[size_t(job)][2] == ran_on[0][2];
    }
    CHECK(task0_on_caller == kJobs);  // the caller's own task is claimed before anything else
    CHECK(ran_on[0][1] != caller);
    CHECK(ran_on[0][2] != caller);
    CHECK(ran_on[0][1] != ran_on[0][2]);
    CHECK(same_as_first_job >= kJobs - 2);
}

TEST_CASE("parallel: a second parallel_for while the pool is busy runs inline and completes", "[parallel]") {
    jitmm::ThreadPool pool(4);
    constexpr int64_t kFirst = 64, kSecond = 50;
    std::vector<std::atomic<int>> first_count(kFirst), second_count(kSecond);
    for (auto& c : first_count) c.store(0);
    for (auto& c : second_count) c.store(0);

    std::mutex m;
    std::condition_variable cv;
    bool first_started = false, second_done = false, timed_out = false;
    std::thread::id second_thread_id;
    std::atomic<int> second_off_thread{0};

    std::thread first([&] {
        pool.parallel_for(kFirst, [&](int64_t i) {
            if (i == 0) {
                // Hold the pool busy until the second caller has finished (bounded, so a regression that
                // blocks the second caller shows up as a failure, not a hang).
                std::unique_lock<std::mutex> lock(m);
                first_started = true;
                cv.notify_all();
                if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return second_done; })) timed_out = true;
            }
            first_count[size_t(i)].fetch_add(1);
        });
    });
    std::thread second([&] {
        {
            std::unique_lock<std::mutex> lock(m);
            cv.wait(lock, [&] { return first_started; });
        }
        second_thread_id = std::this_thread::get_id();
        pool.parallel_for(kSecond, [&](int64_t i) {
            if (std::this_thread::get_id() != second_thread_id) second_off_thread.fetch_add(1);
            second_count[size_t(i)].fetch_add(1);
        });
        std::lock_guard<std::mutex> lock(m);
        second_done = true;
        cv.notify_all();
    });
    first.join();
    second.join();

    CHECK_FALSE(timed_out);
    CHECK(second_off_thread.load() == 0);  // the busy pool made the second caller run its tasks itself
    int64_t wrong = 0;
    for (auto& c : first_count) wrong += c.load() != 1;
    for (auto& c : second_count) wrong += c.load() != 1;
    CHECK(wrong == 0);

    // Two threads hammering one pool concurrently: every job still completes exactly.
    std::atomic<int64_t> total{0};
    auto hammer = [&] {
        for (int rep = 0; rep < 100; ++rep) pool.parallel_for(17, [&](int64_t i) { total.fetch_add(i); });
    };
    std::thread h1(hammer), h2(hammer);
    h1.join();
    h2.join();
    CHECK(total.load() == 2 * 100 * (16 * 17 / 2));
}

namespace {

// A framework's parallel-for: counts its invocations and the tasks it ran, and fans out over real threads.
struct ExternalPool {
    std::atomic<int> invocations{0};
    std::atomic<int64_t> tasks{0};
    std::atomic<int64_t> max_n{0};
};

void external_parallel_for(void* user_ctx, int64_t n, jitmm_task_fn fn, void* fn_ctx) {
    auto* pool = static_cast<ExternalPool*>(user_ctx);
    pool->invocations.fetch_add(1);
    int64_t prev = pool->max_n.load();
    while (n > prev && !pool->max_n.compare_exchange_weak(prev, n)) {
    }
    const int64_t workers = std::min<int64_t>(n, 3);
    std::vector<std::thread> threads;
    for (int64_t w = 0; w < workers; ++w)
        threads.emplace_back([=] {
            for (int64_t i = w; i < n; i += workers) {
                fn(fn_ctx, i);
                pool->tasks.fetch_add(1);
            }
        });
    for (auto& t : threads) t.join();
}

}  // namespace

TEST_CASE("parallel: ParallelRunner hands work to an external parallel-for", "[parallel]") {
    ExternalPool ext;
    jitmm::ParallelRunner runner(4, &external_parallel_for, &ext);
    CHECK(runner.uses_external());
    CHECK(runner.num_threads() == 4);
    std::vector<std::atomic<int>> count(100);
    for (auto& c : count) c.store(0);
    runner.parallel_for(100, [&](int64_t i) { count[size_t(i)].fetch_add(1); });
    CHECK(ext.invocations.load() == 1);
    CHECK(ext.tasks.load() == 100);
    int64_t wrong = 0;
    for (auto& c : count) wrong += c.load() != 1;
    CHECK(wrong == 0);
    // n == 0 calls nothing.
    runner.parallel_for(0, [&](int64_t) { FAIL("task ran for n == 0"); });
    CHECK(ext.invocations.load() == 1);
}

TEST_CASE("parallel: the framework's own parallel-for from the engine config is used by a matmul", "[parallel]") {
    ExternalPool ext;
    jitmm_engine_config config = make_config(4);
    config.parallel_for = &external_parallel_for;
    config.parallel_for_ctx = &ext;
    EngineHolder engine(config);

    const int64_t M = 256, N = 256, K = 256;
    std::mt19937 rng(4242);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> a(size_t(M * K)), b(size_t(K * N));
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
    REQUIRE(a[0] != 0.0f);
    std::vector<float> c(size_t(M * N), std::numeric_limits<float>::quiet_NaN());  // beta 0: never read

    jitmm_matmul_desc desc = make_desc(M, N, K);
    jitmm_kernel* kernel = nullptr;
    REQUIRE(jitmm_kernel_create(engine.get(), &desc, &kernel) == JITMM_STATUS_SUCCESS);
    jitmm_matmul_args args;
    REQUIRE(jitmm_matmul_args_init(&args) == JITMM_STATUS_SUCCESS);
    args.a = a.data();
    args.b = b.data();
    args.c = c.data();
    const jitmm_status s = jitmm_kernel_run(kernel, &args);
    INFO(jitmm_last_error_message());
    REQUIRE(s == JITMM_STATUS_SUCCESS);
    jitmm_kernel_info info;
    info.struct_size = sizeof info;
    REQUIRE(jitmm_kernel_get_info(kernel, &info) == JITMM_STATUS_SUCCESS);
    INFO("recipe: " << info.recipe);
    jitmm_kernel_release(kernel);

    CHECK(ext.invocations.load() >= 1);
    CHECK(ext.max_n.load() > 1);
    CHECK(ext.tasks.load() > 1);

    double err2 = 0, ref2 = 0;
    int64_t non_finite = 0;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            double ref = 0;
            for (int64_t p = 0; p < K; ++p) ref += double(a[size_t(i * K + p)]) * double(b[size_t(p * N + j)]);
            const double got = c[size_t(i * N + j)];
            if (!std::isfinite(got)) ++non_finite;
            err2 += (got - ref) * (got - ref);
            ref2 += ref * ref;
        }
    const double rel = std::sqrt(err2 / ref2);
    INFO("relative Frobenius error " << rel);
    CHECK(non_finite == 0);
    CHECK(ref2 > 0);
    CHECK(rel <= 1e-5 * std::sqrt(double(K)));

    // The one-call form goes through it too.
    const int before = ext.invocations.load();
    std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
    REQUIRE(jitmm_matmul(engine.get(), &desc, &args) == JITMM_STATUS_SUCCESS);
    CHECK(ext.invocations.load() > before);
    int64_t nan_left = 0;
    for (float v : c) nan_left += std::isnan(v) ? 1 : 0;
    CHECK(nan_left == 0);
}
