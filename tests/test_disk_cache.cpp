// The on-disk kernel cache: round trip between engines, every kind of corruption (detected, counted,
// regenerated, never loaded), folder permission refusal, read-only and full folders, the size cap's LRU
// eviction, stale format folders, 4 processes x 4 threads on one folder (single-flight across processes),
// export/import archives, JITMM_RECORD files and ':'-separated folder tiers.
#include "api/validate.hpp"
#include "core/cache_archive.hpp"
#include "core/cache_entry.hpp"
#include "core/disk_cache.hpp"
#include "core/engine.hpp"
#include "core/error.hpp"
#include "core/recorder.hpp"
#include "core/shape_csv.hpp"
#include "skip.hpp"
#include "x86/backend_x86.hpp"

#include <jitmm/jitmm.h>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using jitmm::DiskCache;
using jitmm::Engine;
using jitmm::KernelPtr;
using jitmm::Problem;

// A fresh folder under /tmp, removed (permissions restored first) when the test ends.
class TempDir {
public:
    TempDir() {
        char name[] = "/tmp/jitmm-disk-test-XXXXXX";
        REQUIRE(::mkdtemp(name) != nullptr);
        path_ = name;
    }
    ~TempDir() {
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
             it.increment(ec))
            if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0700);
        ::chmod(path_.c_str(), 0700);
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string sub(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

// Sets an environment variable for one scope, restoring the previous value.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old, had_ = true;
        if (value) ::setenv(name, value, 1);
        else ::unsetenv(name);
    }
    ~ScopedEnv() {
        if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
        else ::unsetenv(name_.c_str());
    }

private:
    std::string name_, old_;
    bool had_ = false;
};

bool running_as_root() { return ::geteuid() == 0; }

jitmm::EngineOptions options_for(const char* cache_dir) {
    jitmm_engine_config cfg;
    jitmm_engine_config_init(&cfg);
    cfg.cache_dir = cache_dir;  // NULL: JITMM_CACHE_DIR
    cfg.num_threads = 1;
    jitmm::EngineOptions o = jitmm::resolve_engine_options(&cfg);
    o.record_path.clear();
    return o;
}

std::unique_ptr<Engine> make_engine(const jitmm::EngineOptions& o) {
    return std::make_unique<Engine>(o, jitmm::x86::make_x86_backend(o));
}
std::unique_ptr<Engine> make_engine(const std::string& cache_dir) { return make_engine(options_for(cache_dir.c_str())); }

Problem make_problem(int64_t m, int64_t n, int64_t k, bool ta = false, bool tb = false, int64_t pad = 0) {
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = m, d.n = n, d.k = k;
    d.trans_a = ta, d.trans_b = tb;
    if (pad) {
        d.lda = (ta ? m : k) + pad;
        d.ldb = (tb ? k : n) + pad;
        d.ldc = n + pad;
    }
    return jitmm::api::problem_from_desc(&d);
}

// Runs the kernel on fresh random data (C poisoned) and returns the relative Frobenius error against a
// float64 reference; NaN stays NaN so that it fails every bound.
double run_and_check(const jitmm::Kernel& kernel, const Problem& p, uint32_t seed, std::vector<float>* out = nullptr) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> a(size_t(p.a_rows() * p.lda)), b(size_t(p.b_rows() * p.ldb));
    std::vector<float> c(size_t(p.m * p.ldc), std::nanf(""));
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
    kernel.run(jitmm::RunArgs{a.data(), b.data(), c.data()});
    double err = 0, norm = 0;
    for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) {
            double ref = 0;
            for (int64_t l = 0; l < p.k; ++l) {
                const double av = p.trans_a ? a[size_t(l * p.lda + i)] : a[size_t(i * p.lda + l)];
                const double bv = p.trans_b ? b[size_t(j * p.ldb + l)] : b[size_t(l * p.ldb + j)];
                ref += av * bv;
            }
            const double got = c[size_t(i * p.ldc + j)];
            err += (got - ref) * (got - ref);
            norm += ref * ref;
        }
    if (out) *out = c;
    return std::sqrt(err / std::max(norm, 1e-30));
}

double bound(const Problem& p) { return 1e-5 * std::sqrt(double(p.k)) + 1e-6; }

void require_correct(const jitmm::Kernel& kernel, const Problem& p, uint32_t seed = 1) {
    const double err = run_and_check(kernel, p, seed);
    INFO("relative error " << err << " for " << jitmm::describe(p));
    REQUIRE(err <= bound(p));
}

std::string entry_path(const std::string& root, const Engine& engine, const KernelPtr& kernel) {
    const std::string& fp = engine.backend().fingerprint();
    return root + "/v" + std::to_string(jitmm::kDiskFormatVersion) + "/" + jitmm::hash128(fp.data(), fp.size()).hex() +
           "/" + kernel->meta().key.hash.hex() + ".jk";
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    REQUIRE(out.good());
}

int64_t count_entries(const std::string& root) {
    int64_t n = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
        if (it->path().extension() == ".jk") ++n;
    return n;
}

}  // namespace

TEST_CASE("disk cache: a second engine loads the kernel from disk and computes the same result", "[disk_cache]") {
    TempDir dir;
    const Problem p = make_problem(37, 45, 29, false, true, 3);
    std::vector<float> first_out, second_out;
    std::string path;
    {
        auto engine = make_engine(dir.path());
        REQUIRE(engine->disk_cache() != nullptr);
        REQUIRE(engine->disk_cache()->writable());
        const KernelPtr k = engine->get_kernel(p, false);
        CHECK_FALSE(k->meta().from_disk);
        REQUIRE(run_and_check(*k, p, 7, &first_out) <= bound(p));
        const jitmm::DiskCacheStats s = engine->disk_cache()->stats();
        CHECK(s.process.misses == 1);
        CHECK(s.process.writes == 1);
        CHECK(s.entries == 1);
        path = entry_path(dir.path(), *engine, k);
    }
    struct stat st;
    REQUIRE(::stat(path.c_str(), &st) == 0);
    REQUIRE(::stat((dir.path() + "/v1").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);  // folders are created private

    auto engine = make_engine(dir.path());
    const KernelPtr k = engine->get_kernel(p, false);
    CHECK(k->meta().from_disk);
    CHECK(engine->disk_cache()->stats().process.hits == 1);
    CHECK(engine->disk_cache()->stats().process.misses == 0);
    REQUIRE(run_and_check(*k, p, 7, &second_out) <= bound(p));
    CHECK(std::memcmp(first_out.data(), second_out.data(), first_out.size() * sizeof(float)) == 0);  // same code
    require_correct(*k, p, 99);  // and fresh data

    // The memory cache still comes first: no second disk read.
    engine->get_kernel(p, false);
    CHECK(engine->disk_cache()->stats().process.hits == 1);

    // An empty folder list disables the disk cache.
    CHECK(make_engine(std::string())->disk_cache() == nullptr);
}

TEST_CASE("disk cache: truncated, bit-flipped, wrong-version and wrong-key entries are rejected and regenerated",
          "[disk_cache]") {
    TempDir dir;
    const Problem p = make_problem(29, 33, 40);
    const Problem other = make_problem(8, 8, 8);
    std::string path, other_path;
    {
        auto engine = make_engine(dir.path());
        path = entry_path(dir.path(), *engine, engine->get_kernel(p, false));
        other_path = entry_path(dir.path(), *engine, engine->get_kernel(other, false));
    }
    const std::vector<uint8_t> good = read_bytes(path);
    REQUIRE(good.size() > 200);

    std::vector<uint8_t> bad = good;
    SECTION("truncated") { bad.resize(good.size() / 2); }
    SECTION("truncated to a few bytes") { bad.resize(10); }
    SECTION("empty file") { bad.clear(); }
    SECTION("a byte flipped in the header") { bad[26] ^= 0x01; }  // the fingerprint size field
    SECTION("a byte flipped in the magic") { bad[1] ^= 0x20; }
    SECTION("a byte flipped in the key") { bad[64 + 9] ^= 0x40; }
    SECTION("a byte flipped in the payload") { bad[bad.size() - 40] ^= 0x80; }
    SECTION("a byte flipped in the checksum") { bad.back() ^= 0x01; }
    SECTION("a byte appended") { bad.push_back(0); }
    SECTION("wrong format version") { bad[8] = static_cast<uint8_t>(jitmm::kDiskFormatVersion + 1); }
    SECTION("a valid entry of another key under this key's name") { bad = read_bytes(other_path); }
    write_bytes(path, bad);

    {
        auto engine = make_engine(dir.path());
        const KernelPtr k = engine->get_kernel(p, false);
        CHECK_FALSE(k->meta().from_disk);  // never loaded
        const jitmm::DiskCacheStats s = engine->disk_cache()->stats();
        CHECK(s.process.rejects == 1);
        CHECK(s.process.hits == 0);
        CHECK(s.process.writes == 1);  // regenerated and rewritten
        require_correct(*k, p);
    }
    CHECK(read_bytes(path) == good);  // generation is deterministic: the rewrite is the original entry
    auto engine = make_engine(dir.path());
    const KernelPtr k = engine->get_kernel(p, false);
    CHECK(k->meta().from_disk);
    CHECK(engine->disk_cache()->stats().process.rejects == 0);
    require_correct(*k, p);
}

TEST_CASE("disk cache: entry encoding detects each kind of damage", "[disk_cache]") {
    jitmm::KeyWriter w;
    w.str('D', "fp").i64('m', 5);
    const jitmm::KernelKey key = w.finish();
    jitmm::Artifact a;
    a.kind = "x86.bin";
    a.payload.assign(100, 0xC3);
    a.ints = {0, -1, 42};
    a.text = "name";
    const std::vector<uint8_t> bytes = jitmm::encode_entry(key, "fp", a);
    jitmm::DecodedEntry d;
    REQUIRE(jitmm::decode_entry(bytes.data(), bytes.size(), &key, &d) == jitmm::EntryStatus::ok);
    CHECK(d.artifact.payload == a.payload);
    CHECK(d.artifact.ints == a.ints);
    CHECK(d.artifact.text == a.text);
    CHECK(d.artifact.kind == a.kind);
    CHECK(d.fingerprint == "fp");
    // Every single-bit flip anywhere is detected (none decodes as ok).
    int undetected = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
        std::vector<uint8_t> bad = bytes;
        bad[i] ^= uint8_t(1u << (i % 8));
        if (jitmm::decode_entry(bad.data(), bad.size(), &key, nullptr) == jitmm::EntryStatus::ok) ++undetected;
    }
    CHECK(undetected == 0);
    for (size_t n = 0; n < bytes.size(); n += 7)
        CHECK(jitmm::decode_entry(bytes.data(), n, &key, nullptr) != jitmm::EntryStatus::ok);
    jitmm::KeyWriter w2;
    w2.str('D', "fp").i64('m', 6);
    const jitmm::KernelKey other = w2.finish();
    CHECK(jitmm::decode_entry(bytes.data(), bytes.size(), &other, nullptr) == jitmm::EntryStatus::wrong_key);
}

TEST_CASE("disk cache: a folder writable by group or others is refused, the engine still works",
          "[disk_cache]") {
    TempDir dir;
    const Problem p = make_problem(16, 24, 32);
    SECTION("root folder mode 0777") { REQUIRE(::chmod(dir.path().c_str(), 0777) == 0); }
    SECTION("root folder group-writable (0770)") { REQUIRE(::chmod(dir.path().c_str(), 0770) == 0); }
    SECTION("format folder mode 0777") {
        REQUIRE(::mkdir(dir.sub("v1").c_str(), 0700) == 0);
        REQUIRE(::chmod(dir.sub("v1").c_str(), 0777) == 0);
    }
    auto engine = make_engine(dir.path());
    CHECK(engine->disk_cache() == nullptr);
    CHECK(engine->disk_cache_status().find("refused") != std::string::npos);
    const KernelPtr k = engine->get_kernel(p, false);
    CHECK_FALSE(k->meta().from_disk);
    require_correct(*k, p);
    CHECK(count_entries(dir.path()) == 0);  // nothing written there
}

TEST_CASE("disk cache: a folder owned by another user is refused", "[disk_cache]") {
    if (!running_as_root()) {
        WARN_SKIPPED("not root, cannot give a folder to another user");
        return;
    }
    TempDir dir;
    REQUIRE(::chown(dir.path().c_str(), 12345, 12345) == 0);
    auto engine = make_engine(dir.path());
    CHECK(engine->disk_cache() == nullptr);
    CHECK(engine->disk_cache_status().find("owned by uid 12345") != std::string::npos);
    const Problem p = make_problem(16, 24, 32);
    require_correct(*engine->get_kernel(p, false), p);
}

TEST_CASE("disk cache: a read-only folder is read, new kernels stay in memory", "[disk_cache]") {
    if (running_as_root()) {
        WARN_SKIPPED("running as root, where permissions do not block writes (the full-disk test covers the "
             "failed-write path)");
        return;
    }
    TempDir dir;
    const Problem cached = make_problem(20, 20, 20), fresh = make_problem(21, 22, 23);
    make_engine(dir.path())->get_kernel(cached, false);
    for (auto it = fs::recursive_directory_iterator(dir.path()); it != fs::recursive_directory_iterator(); ++it)
        if (it->is_directory()) ::chmod(it->path().c_str(), 0500);
    ::chmod(dir.path().c_str(), 0500);

    auto engine = make_engine(dir.path());
    REQUIRE(engine->disk_cache() != nullptr);
    CHECK_FALSE(engine->disk_cache()->writable());
    const KernelPtr a = engine->get_kernel(cached, false);
    CHECK(a->meta().from_disk);
    require_correct(*a, cached);
    const KernelPtr b = engine->get_kernel(fresh, false);
    CHECK_FALSE(b->meta().from_disk);
    require_correct(*b, fresh);
    CHECK(engine->disk_cache()->stats().process.writes == 0);
    CHECK(count_entries(dir.path()) == 1);
}

TEST_CASE("disk cache: a failed write (disk full) is a warning and the engine keeps working", "[disk_cache]") {
    TempDir dir;
    // RLIMIT_FSIZE makes every entry write fail with EFBIG, as a full disk would, even for root. In a child
    // process, so the limit does not outlive the test.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit limit{200, 200};
        ::setrlimit(RLIMIT_FSIZE, &limit);
        int code = 0;
        try {
            auto engine = make_engine(dir.path());
            const Problem p = make_problem(33, 17, 45);
            const KernelPtr k = engine->get_kernel(p, false);
            const jitmm::DiskCacheStats s = engine->disk_cache()->stats();
            if (k->meta().from_disk || s.process.writes != 0 || s.process.write_errors != 1) code = 3;
            if (run_and_check(*k, p, 3) > bound(p)) code = 4;
        } catch (...) {
            code = 5;
        }
        ::_exit(code);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(count_entries(dir.path()) == 0);
}

TEST_CASE("disk cache: the size cap evicts the least recently used entries", "[disk_cache]") {
    TempDir dir;
    jitmm::Artifact art;
    art.kind = "test";
    art.payload.assign(1000, 0x90);
    auto key_for = [](int i) {
        jitmm::KeyWriter w;
        return w.str('D', "test fp").i64('i', i).finish();
    };
    const size_t entry_size = jitmm::encode_entry(key_for(0), "test fp", art).size();
    DiskCache::Options o;
    o.dirs = dir.path();
    o.fingerprint = "test fp";
    o.max_bytes = entry_size * 7 / 2;  // room for 3.5 entries
    auto cache = DiskCache::open(o);
    REQUIRE(cache);
    for (int i = 0; i < 3; ++i) REQUIRE(cache->store(key_for(i), art));
    // Give them distinct, old ages (file times are only as fine as the kernel's clock tick).
    const std::string target = fs::path(cache->list_entries(0).front().path).parent_path().string();
    for (int i = 0; i < 3; ++i) {
        const timespec times[2] = {{1000000 + i * 1000, 0}, {1000000 + i * 1000, 0}};
        REQUIRE(::utimensat(AT_FDCWD, (target + "/" + key_for(i).hash.hex() + ".jk").c_str(), times, 0) == 0);
    }
    jitmm::Artifact got;
    REQUIRE(cache->load(key_for(0), &got));  // a hit makes entry 0 the youngest
    REQUIRE(cache->store(key_for(3), art));  // 4 entries > 3.5: evict down to 90% of the cap
    CHECK(cache->stats().process.evictions == 1);
    CHECK_FALSE(fs::exists(target + "/" + key_for(1).hash.hex() + ".jk"));  // the least recently used
    CHECK(fs::exists(target + "/" + key_for(0).hash.hex() + ".jk"));
    CHECK(fs::exists(target + "/" + key_for(2).hash.hex() + ".jk"));
    CHECK(fs::exists(target + "/" + key_for(3).hash.hex() + ".jk"));
    CHECK(cache->stats().bytes <= int64_t(o.max_bytes));

    // Through the engine: many kernels under a tiny cap stay under it and keep working.
    TempDir dir2;
    jitmm::EngineOptions eo = options_for(dir2.path().c_str());
    eo.cache_max_bytes = 20000;
    auto engine = make_engine(eo);
    for (int i = 1; i <= 12; ++i) {
        const Problem p = make_problem(8 + i, 16, 8 * i);
        require_correct(*engine->get_kernel(p, false), p);
    }
    const jitmm::DiskCacheStats s = engine->disk_cache()->stats();
    CHECK(s.bytes <= 20000);
    CHECK(s.process.evictions > 0);
    CHECK(s.process.writes == 12);

    // JITMM_CACHE_MAX_MB: fractions allowed, junk refused.
    {
        ScopedEnv env("JITMM_CACHE_MAX_MB", "0.5");
        CHECK(jitmm::cache_max_bytes_from_env() == 524288);
    }
    for (const char* junk : {"0", "-1", "abc", "12x", "nan"}) {
        ScopedEnv env("JITMM_CACHE_MAX_MB", junk);
        CHECK_THROWS_AS(jitmm::cache_max_bytes_from_env(), jitmm::Error);
    }
    ScopedEnv unset("JITMM_CACHE_MAX_MB", nullptr);
    CHECK(jitmm::cache_max_bytes_from_env() == jitmm::kDefaultCacheMaxBytes);
}

TEST_CASE("disk cache: folders of older format versions are removed, newer ones kept", "[disk_cache]") {
    TempDir dir;
    fs::create_directories(dir.sub("v0/abc"));
    write_bytes(dir.sub("v0/abc/old.jk"), {1, 2, 3});
    fs::create_directories(dir.sub("v999/abc"));
    ::chmod(dir.sub("v0").c_str(), 0700);
    auto engine = make_engine(dir.path());
    REQUIRE(engine->disk_cache() != nullptr);
    CHECK_FALSE(fs::exists(dir.sub("v0")));
    CHECK(fs::exists(dir.sub("v999")));
    CHECK(fs::exists(dir.sub("v1")));
}

TEST_CASE("disk cache: 4 processes x 4 threads on one folder compile each kernel once and never fail",
          "[disk_cache]") {
    TempDir dir;
    const std::string cache_dir = dir.sub("cache"), record = dir.sub("record.csv");
    std::vector<Problem> shapes;
    for (int i = 0; i < 10; ++i) shapes.push_back(make_problem(5 + 7 * i, 9 + 5 * i, 4 + 11 * i, i % 2, i % 3 == 0));
    constexpr int kProcesses = 4, kThreads = 4;

    std::vector<pid_t> children;
    for (int proc = 0; proc < kProcesses; ++proc) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid != 0) {
            children.push_back(pid);
            continue;
        }
        // Child: no Catch2 here; the result is the exit code plus a stats file.
        int failures = 0;
        jitmm::DiskCacheCounters total;
        std::mutex mutex;
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&, t] {
                try {
                    jitmm::EngineOptions o = options_for(cache_dir.c_str());
                    o.record_path = record;
                    auto engine = make_engine(o);  // one engine per thread: only the file lock dedupes them
                    for (size_t s = 0; s < shapes.size(); ++s) {
                        const Problem& p = shapes[(s + size_t(t) * 3 + size_t(proc)) % shapes.size()];
                        const KernelPtr k = engine->get_kernel(p, false);
                        if (!(run_and_check(*k, p, uint32_t(t + 10 * proc)) <= bound(p))) {
                            std::lock_guard<std::mutex> lock(mutex);
                            ++failures;
                        }
                    }
                    const jitmm::DiskCacheCounters c = engine->disk_cache()->stats().process;
                    std::lock_guard<std::mutex> lock(mutex);
                    total.hits += c.hits, total.misses += c.misses, total.rejects += c.rejects;
                    total.writes += c.writes, total.write_errors += c.write_errors;
                } catch (...) {
                    std::lock_guard<std::mutex> lock(mutex);
                    ++failures;
                }
            });
        for (auto& th : threads) th.join();
        std::ofstream(dir.sub("stats-" + std::to_string(proc))) << total.hits << " " << total.misses << " "
                                                                 << total.rejects << " " << total.writes << " "
                                                                 << total.write_errors << "\n";
        ::_exit(failures == 0 ? 0 : 1);
    }
    for (pid_t pid : children) {
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    int64_t hits = 0, misses = 0, rejects = 0, writes = 0, write_errors = 0;
    for (int proc = 0; proc < kProcesses; ++proc) {
        std::ifstream in(dir.sub("stats-" + std::to_string(proc)));
        int64_t h, m, r, w, e;
        REQUIRE(in >> h >> m >> r >> w >> e);
        hits += h, misses += m, rejects += r, writes += w, write_errors += e;
    }
    const int64_t n = int64_t(shapes.size());
    CHECK(rejects == 0);
    CHECK(write_errors == 0);
    CHECK(writes == n);   // single-flight across processes and engines: each kernel compiled once
    CHECK(misses == n);
    CHECK(hits == n * (kProcesses * kThreads - 1));
    CHECK(count_entries(cache_dir) == n);
    // No lock or temp files left behind.
    for (auto& e : fs::recursive_directory_iterator(cache_dir)) {
        const std::string name = e.path().filename().string();
        CHECK(name.find(".lock") == std::string::npos);
        CHECK(name.find(".tmp.") == std::string::npos);
    }
    // The record file: one header, one row per shape per process (each process records a key once).
    const std::vector<jitmm::ShapeRow> rows = jitmm::read_shape_file(record);
    CHECK(rows.size() == size_t(n * kProcesses));
}

TEST_CASE("disk cache: of 4 processes needing the same new kernel at once, one builds and 3 wait and load",
          "[disk_cache]") {
    TempDir dir;
    jitmm::KeyWriter w;
    const jitmm::KernelKey key = w.str('D', "lock test").i64('x', 1).finish();
    int start[2];
    REQUIRE(::pipe(start) == 0);
    std::vector<pid_t> children;
    for (int proc = 0; proc < 4; ++proc) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid != 0) {
            children.push_back(pid);
            continue;
        }
        ::close(start[1]);
        char c;
        while (::read(start[0], &c, 1) < 0 && errno == EINTR) {
        }  // EOF: all start together
        DiskCache::Options o;
        o.dirs = dir.path();
        o.fingerprint = "lock test";
        auto cache = DiskCache::open(o);
        bool from_disk = false;
        jitmm::Artifact got;
        try {
            got = cache->fetch_or_build(key, [] {
                std::this_thread::sleep_for(std::chrono::milliseconds(150));  // a slow compiler
                jitmm::Artifact a;
                a.kind = "test";
                a.payload.assign(64, 0x5A);
                return a;
            }, &from_disk);
        } catch (...) {
            ::_exit(1);
        }
        ::_exit(got.payload.size() == 64 && got.payload[0] == 0x5A ? (from_disk ? 11 : 10) : 2);
    }
    ::close(start[0]);
    ::close(start[1]);
    int built = 0, loaded = 0;
    for (pid_t pid : children) {
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        REQUIRE(WIFEXITED(status));
        built += WEXITSTATUS(status) == 10;
        loaded += WEXITSTATUS(status) == 11;
    }
    CHECK(built == 1);
    CHECK(loaded == 3);
}

TEST_CASE("disk cache: export and import move a cache between folders, verifying every entry", "[disk_cache]") {
    TempDir dir;
    const std::string from = dir.sub("from"), to = dir.sub("to"), archive = dir.sub("cache.jka");
    std::vector<Problem> shapes = {make_problem(12, 34, 56), make_problem(65, 43, 21, true, false),
                                   make_problem(7, 77, 7, false, true)};
    {
        auto engine = make_engine(from);
        for (const Problem& p : shapes) engine->get_kernel(p, false);
    }
    DiskCache::Options o;
    o.dirs = from;
    auto source = DiskCache::open(o);
    REQUIRE(source);
    const jitmm::ArchiveResult exported = jitmm::export_cache(*source, archive);
    CHECK(exported.entries == 3);
    CHECK(exported.rejected == 0);

    o.dirs = to;
    {
        auto dest = DiskCache::open(o);
        REQUIRE(dest);
        const jitmm::ArchiveResult imported = jitmm::import_cache(*dest, archive);
        CHECK(imported.archive_ok);
        CHECK(imported.entries == 3);
        CHECK(imported.written == 3);
        CHECK(imported.rejected == 0);
        const jitmm::ArchiveResult again = jitmm::import_cache(*dest, archive);
        CHECK(again.already_present == 3);
        CHECK(again.written == 0);
    }
    {
        auto engine = make_engine(to);
        for (const Problem& p : shapes) {
            const KernelPtr k = engine->get_kernel(p, false);
            CHECK(k->meta().from_disk);
            require_correct(*k, p);
        }
    }

    // A damaged archive: the damaged entry is rejected, the others still come in.
    std::vector<uint8_t> bytes = read_bytes(archive);
    bytes[24 + 8 + 100] ^= 0x10;  // inside the first entry
    write_bytes(archive, bytes);
    TempDir other;
    o.dirs = other.path();
    auto dest = DiskCache::open(o);
    REQUIRE(dest);
    const jitmm::ArchiveResult damaged = jitmm::import_cache(*dest, archive);
    CHECK_FALSE(damaged.archive_ok);
    CHECK(damaged.rejected == 1);
    CHECK(damaged.written == 2);
    CHECK(count_entries(other.path()) == 2);
    // Not an archive at all.
    write_bytes(archive, {1, 2, 3});
    CHECK_THROWS_AS(jitmm::import_cache(*dest, archive), jitmm::Error);
}

TEST_CASE("JITMM_RECORD: every kernel created is appended once and the file parses back", "[disk_cache]") {
    TempDir dir;
    const std::string record = dir.sub("record.csv");
    std::vector<jitmm_matmul_desc> descs;
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    d.m = 13, d.n = 17, d.k = 19;
    descs.push_back(d);
    d.trans_a = 1, d.trans_b = 1, d.lda = 20, d.ldb = 25, d.ldc = 30, d.alpha = 0.5f, d.beta = -1.25f;
    descs.push_back(d);
    jitmm_matmul_desc_init(&d);
    d.m = 8, d.n = 16, d.k = 24, d.batch_count = 3, d.stride_a = 200, d.stride_b = 0, d.stride_c = 130;
    d.epilogue = JITMM_EPILOGUE_BIAS_GELU_TANH, d.bias_layout = JITMM_BIAS_PER_ROW;
    descs.push_back(d);
    std::vector<Problem> problems;
    for (const auto& desc : descs) problems.push_back(jitmm::api::problem_from_desc(&desc));

    {
        ScopedEnv env("JITMM_RECORD", record.c_str());
        const std::string cache = dir.sub("cache");
        auto engine = make_engine([&] {
            jitmm::EngineOptions o = options_for(cache.c_str());
            o.record_path = jitmm::resolve_engine_options(nullptr).record_path;  // from the environment
            return o;
        }());
        for (const Problem& p : problems) engine->get_kernel(p, false);
        engine->get_kernel(problems[0], false);  // a memory hit: not recorded again
        jitmm::EngineOptions o = options_for(cache.c_str());
        o.record_path = record;
        make_engine(o)->get_kernel(problems[1], false);  // a disk hit in the same process: recorded already
    }
    std::ifstream in(record);
    std::stringstream text;
    text << in.rdbuf();
    CHECK(text.str().rfind(jitmm::shape_csv_header(), 0) == 0);
    const std::vector<jitmm::ShapeRow> rows = jitmm::parse_shape_csv(text.str(), record);
    REQUIRE(rows.size() == problems.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        CHECK(rows[i].device == "cpu");
        const Problem back = jitmm::api::problem_from_desc(&rows[i].desc);
        jitmm::KeyWriter a, b;
        jitmm::append_problem(a, back);
        jitmm::append_problem(b, problems[i]);
        CHECK(a.finish() == b.finish());
    }
}

TEST_CASE("disk cache: JITMM_CACHE_DIR folders are all searched, only the first is written", "[disk_cache]") {
    TempDir dir;
    const std::string first = dir.sub("private"), second = dir.sub("shared");
    const Problem shared_kernel = make_problem(30, 31, 32), fresh = make_problem(40, 41, 42);
    make_engine(second)->get_kernel(shared_kernel, false);
    REQUIRE(count_entries(second) == 1);

    const std::string list = first + ":" + second;
    ScopedEnv env("JITMM_CACHE_DIR", list.c_str());
    auto engine = make_engine(options_for(nullptr));  // NULL config.cache_dir: the environment's list
    REQUIRE(engine->disk_cache() != nullptr);
    CHECK(engine->disk_cache()->folders().size() == 2);
    const KernelPtr a = engine->get_kernel(shared_kernel, false);
    CHECK(a->meta().from_disk);  // read from the second folder
    require_correct(*a, shared_kernel);
    const KernelPtr b = engine->get_kernel(fresh, false);
    CHECK_FALSE(b->meta().from_disk);
    require_correct(*b, fresh);
    CHECK(count_entries(first) == 1);   // the new kernel went to the first folder
    CHECK(count_entries(second) == 1);  // the second was not written
    CHECK(fs::exists(entry_path(first, *engine, b)));
}
