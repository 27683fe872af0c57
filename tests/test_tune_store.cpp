// The tuning store and jitmm_tune's contract on a device with nothing to tune (the CPU): results persist per
// problem beside the kernel cache and are read back by a later store; the C entry point validates its
// arguments and reports an empty winner. The GPU side (candidates timed, the winner used by a later engine)
// is in test_cuda.cpp.
#include "core/problem.hpp"
#include "core/tune_store.hpp"

#include <jitmm/jitmm.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

std::string temp_folder() {
    char name[] = "/tmp/jitmm-tune-test-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    return name;
}

jitmm::Problem square(int64_t n) {
    jitmm::Problem p;
    p.m = p.n = p.k = n;
    p.lda = p.ldb = p.ldc = n;
    p.a_type = p.b_type = p.c_type = JITMM_DTYPE_BF16;
    return p;
}

}  // namespace

TEST_CASE("tune store: results persist per problem and per target", "[tune]") {
    const std::string dir = temp_folder();
    const std::string file = jitmm::tune_store_path(dir, "cuda arch=sm_90a sms=132");
    CHECK(file != jitmm::tune_store_path(dir, "cuda arch=sm_80 sms=108"));  // one store per target
    {
        jitmm::TuneStore store(file);
        CHECK(store.size() == 0);
        CHECK(store.lookup(square(4096)).empty());
        store.record(square(4096), "sm90:128x256x4", 221.5);
        store.record(square(2048), "sm90:128x128x6", 34.0);
        store.record(square(4096), "sm90:128x192x4", 215.0);  // the later result wins
        CHECK(store.lookup(square(4096)) == "sm90:128x192x4");
    }
    jitmm::TuneStore again(file);  // a later process
    CHECK(again.size() == 2);
    CHECK(again.lookup(square(4096)) == "sm90:128x192x4");
    CHECK(again.lookup(square(2048)) == "sm90:128x128x6");
    jitmm::Problem other = square(4096);
    other.trans_b = true;  // any field of the problem makes it another entry
    CHECK(again.lookup(other).empty());
    jitmm::TuneStore memory_only("");
    memory_only.record(square(64), "x", 1.0);
    CHECK(memory_only.lookup(square(64)) == "x");
    std::filesystem::remove_all(dir);
}

TEST_CASE("jitmm_tune: validates its arguments, and the CPU has nothing to tune", "[tune]") {
    const std::string dir = temp_folder();
    jitmm_engine_config config;
    jitmm_engine_config_init(&config);
    config.cache_dir = dir.c_str();
    jitmm_engine* engine = nullptr;
    REQUIRE(jitmm_engine_create(&config, &engine) == JITMM_STATUS_SUCCESS);
    jitmm_matmul_desc desc;
    jitmm_matmul_desc_init(&desc);
    desc.m = desc.n = desc.k = 33;
    std::vector<float> a(33 * 33, 0.5f), b(33 * 33, 0.25f), c(33 * 33, -1.0f);
    jitmm_matmul_args args;
    jitmm_matmul_args_init(&args);
    args.a = a.data();
    args.b = b.data();
    args.c = c.data();

    char log[256];
    size_t required = 0;
    CHECK(jitmm_tune(nullptr, &desc, &args, log, sizeof log, &required) == JITMM_STATUS_NULL_POINTER);
    CHECK(jitmm_tune(engine, nullptr, &args, log, sizeof log, &required) == JITMM_STATUS_NULL_POINTER);
    args.c = nullptr;
    CHECK(jitmm_tune(engine, &desc, &args, log, sizeof log, &required) == JITMM_STATUS_NULL_POINTER);
    CHECK(std::string(jitmm_last_error_message()).find("c") != std::string::npos);
    args.c = c.data();
    REQUIRE(jitmm_tune(engine, &desc, &args, log, sizeof log, &required) == JITMM_STATUS_SUCCESS);
    const std::string text = log;
    CHECK(text.rfind("\nnothing to tune", 0) == 0);  // empty winner line, then why
    CHECK(required == text.size() + 1);
    CHECK(jitmm_tune(engine, &desc, &args, nullptr, 0, nullptr) == JITMM_STATUS_SUCCESS);  // no log wanted
    // The matmul itself still runs as before.
    REQUIRE(jitmm_matmul(engine, &desc, &args) == JITMM_STATUS_SUCCESS);
    CHECK(c[0] == Approx(33 * 0.125f));
    jitmm_engine_destroy(engine);
    std::filesystem::remove_all(dir);
}
