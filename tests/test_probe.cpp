// The chip probe (src/hw) and the CUDA driver table (src/cuda/driver): facts that must hold on any machine,
// plus a [cuda] smoke test of the bound driver entry points when a GPU is present.
#include "cuda/driver.hpp"
#include "hw/cpu.hpp"
#include "hw/gpu.hpp"
#include "skip.hpp"

#include <catch2/catch.hpp>

#if defined(__x86_64__) || defined(__i386__)
#include <xbyak/xbyak_util.h>
#endif

#include <string>

using jitmm::hw::X86Isa;

namespace {

constexpr X86Isa kTiers[] = {X86Isa::none,        X86Isa::avx2,        X86Isa::avx512, X86Isa::avx512_vnni,
                             X86Isa::avx512_bf16, X86Isa::avx512_fp16, X86Isa::amx};

// The features a tier adds on top of the tier below it (mirrors the rule documented in cpu.cpp).
bool tier_features(X86Isa tier, const jitmm::hw::CpuInfo& c) {
    switch (tier) {
        case X86Isa::none: return true;
        case X86Isa::avx2: return c.avx && c.avx2 && c.fma;
        case X86Isa::avx512: return c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq;
        case X86Isa::avx512_vnni: return c.avx512_vnni;
        case X86Isa::avx512_bf16: return c.avx512_bf16;
        case X86Isa::avx512_fp16: return c.avx512_fp16;
        case X86Isa::amx:
            return c.amx_tile && c.amx_bf16 && c.amx_int8 && c.amx_permitted && c.amx_palette_ok;
    }
    return false;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cpu probe: best_isa is the highest tier whose chain of requirements holds", "[hw]") {
    const auto& c = jitmm::hw::cpu_info();
    INFO(jitmm::hw::cpu_report_text(c));
    const int best = static_cast<int>(c.best_isa);
    for (X86Isa tier : kTiers) {
        const int t = static_cast<int>(tier);
        if (t <= best) CHECK(tier_features(tier, c));
    }
    // The next tier up is not fully there, otherwise best would have reached it.
    if (c.best_isa != X86Isa::amx) CHECK_FALSE(tier_features(static_cast<X86Isa>(best + 1), c));
    if (c.best_isa >= X86Isa::avx2) CHECK((c.avx2 && c.fma));
}

TEST_CASE("cpu probe: flags respect their dependencies and the OS-enabled state", "[hw]") {
    const auto& c = jitmm::hw::cpu_info();
    INFO(jitmm::hw::cpu_report_text(c));
    const bool ymm_state = (c.xcr0 & 0x6) == 0x6;
    const bool zmm_state = (c.xcr0 & 0xE0) == 0xE0;
    const bool tile_state = ((c.xcr0 >> 17) & 3) == 3;
    if (c.avx || c.avx2 || c.fma || c.f16c || c.avx_vnni) CHECK(ymm_state);
    if (c.avx2) CHECK(c.avx);
    if (c.avx512f || c.avx512bw || c.avx512vl || c.avx512dq || c.avx512_vnni || c.avx512_bf16 || c.avx512_fp16) {
        CHECK(ymm_state);
        CHECK(zmm_state);
    }
    if (c.amx_tile || c.amx_bf16 || c.amx_int8) CHECK(tile_state);
    if (c.amx_permitted) CHECK(c.amx_tile);
    // AMX that is fully there except for the OS or the palette must say why it is not used.
    if (c.best_isa == X86Isa::avx512_fp16 && (c.amx_tile || c.amx_bf16 || c.amx_int8)) CHECK_FALSE(c.amx_note.empty());
    if (c.best_isa == X86Isa::amx) CHECK(c.amx_note.empty());
}

#if defined(__x86_64__) || defined(__i386__)
TEST_CASE("cpu probe: agrees with Xbyak's CPUID reading", "[hw]") {
    const auto& c = jitmm::hw::cpu_info();
    const Xbyak::util::Cpu x;
    // Xbyak gates these on XCR0 the same way: they must match exactly.
    CHECK(c.avx == x.has(Xbyak::util::Cpu::tAVX));
    CHECK(c.avx2 == x.has(Xbyak::util::Cpu::tAVX2));
    CHECK(c.fma == x.has(Xbyak::util::Cpu::tFMA));
    CHECK(c.avx512f == x.has(Xbyak::util::Cpu::tAVX512F));
    CHECK(c.avx512bw == x.has(Xbyak::util::Cpu::tAVX512BW));
    CHECK(c.avx512vl == x.has(Xbyak::util::Cpu::tAVX512VL));
    CHECK(c.avx512dq == x.has(Xbyak::util::Cpu::tAVX512DQ));
    CHECK(c.avx512_vnni == x.has(Xbyak::util::Cpu::tAVX512_VNNI));
    CHECK(c.avx512_bf16 == x.has(Xbyak::util::Cpu::tAVX512_BF16));
    // Xbyak reads these from CPUID alone (jitmm also needs the OS state): ours may only be stricter.
    if (c.avx512_fp16) CHECK(x.has(Xbyak::util::Cpu::tAVX512_FP16));
    if (c.avx_vnni) CHECK(x.has(Xbyak::util::Cpu::tAVX_VNNI));
    if (c.amx_tile) CHECK(x.has(Xbyak::util::Cpu::tAMX_TILE));
    if (c.amx_bf16) CHECK(x.has(Xbyak::util::Cpu::tAMX_BF16));
    if (c.amx_int8) CHECK(x.has(Xbyak::util::Cpu::tAMX_INT8));
}
#endif

TEST_CASE("cpu probe: caches and cores are plausible", "[hw]") {
    const auto& c = jitmm::hw::cpu_info();
    INFO(jitmm::hw::cpu_report_text(c));
    CHECK(c.physical_cores >= 1);
    CHECK(c.logical_cores >= c.physical_cores);
#if defined(__x86_64__) || defined(__i386__)
    // cpuinfo reads the x86 cache leaves, which every chip with AVX2 has.
    CHECK(c.l1d_bytes > 0);
    CHECK(c.l2_bytes > 0);
#endif
    if (c.l1d_bytes > 0 && c.l2_bytes > 0) CHECK(c.l1d_bytes < c.l2_bytes);
    if (c.l2_bytes > 0 && c.l3_bytes > 0) CHECK(c.l2_bytes <= c.l3_bytes);
}

TEST_CASE("cpu probe: the microarchitecture from CPUID where cpuinfo does not name it", "[hw]") {
    using jitmm::hw::uarch_from_cpuid;
    auto name = [](const char* n) { return std::string(n != nullptr ? n : "(none)"); };
    CHECK(name(uarch_from_cpuid("AMD", 25, 0x11, 1)) == "Zen 4");   // Genoa (EPYC 9004)
    CHECK(name(uarch_from_cpuid("AMD", 25, 0x61, 2)) == "Zen 4");   // Raphael
    CHECK(name(uarch_from_cpuid("AMD", 25, 0xa0, 1)) == "Zen 4c");  // Bergamo
    CHECK(name(uarch_from_cpuid("AMD", 25, 0x01, 1)) == "Zen 3");   // Milan
    CHECK(name(uarch_from_cpuid("AMD", 26, 0x02, 0)) == "Zen 5");
    CHECK(name(uarch_from_cpuid("Intel", 6, 0x8f, 8)) == "Sapphire Rapids");
    CHECK(name(uarch_from_cpuid("Intel", 6, 0xcf, 2)) == "Emerald Rapids");
    CHECK(name(uarch_from_cpuid("Intel", 6, 0x55, 7)) == "Cascade Lake");
    CHECK(name(uarch_from_cpuid("Intel", 6, 0x55, 11)) == "Cooper Lake");
    CHECK(name(uarch_from_cpuid("Intel", 6, 0x55, 4)) == "Skylake-SP");
    CHECK(uarch_from_cpuid("Intel", 6, 0x01, 0) == nullptr);
    CHECK(uarch_from_cpuid("Hygon", 24, 0x00, 0) == nullptr);
    const auto& c = jitmm::hw::cpu_info();
    INFO(jitmm::hw::cpu_report_text(c));
    CHECK_FALSE(c.uarch.empty());
    if (c.uarch == "unknown") CHECK(uarch_from_cpuid(c.vendor, c.family, c.model, c.stepping) == nullptr);
    // vdpbf16ps at the FMA rate is a fact of AMD's cores that have it (the bf16 planner's choice rests on it).
    CHECK(c.bf16_dot_full_rate == (c.avx512_bf16 && c.vendor == "AMD"));
    CHECK(c.zmm_fma_per_cycle == (c.vendor == "AMD" && c.family == 25 ? 1 : 2));
}

TEST_CASE("isa names round-trip and unknown names are refused", "[hw]") {
    for (X86Isa tier : kTiers) {
        X86Isa parsed = X86Isa::none;
        const std::string name = jitmm::hw::isa_name(tier);
        INFO(name);
        REQUIRE(jitmm::hw::isa_from_name(name, &parsed));
        CHECK(parsed == tier);
    }
    CHECK(std::string(jitmm::hw::isa_name(X86Isa::avx512_vnni)) == "avx512_vnni");
    X86Isa parsed = X86Isa::avx2;
    CHECK_FALSE(jitmm::hw::isa_from_name("avx9", &parsed));
    CHECK_FALSE(jitmm::hw::isa_from_name("", &parsed));
    CHECK_FALSE(jitmm::hw::isa_from_name("avx512 ", &parsed));
    CHECK(parsed == X86Isa::avx2);  // untouched on failure
}

TEST_CASE("cpu reports: text names the tier, JSON is an object with best_isa", "[hw]") {
    const auto& c = jitmm::hw::cpu_info();
    const std::string text = jitmm::hw::cpu_report_text(c);
    CHECK(contains(text, std::string("best tier       ") + jitmm::hw::isa_name(c.best_isa)));
    CHECK(contains(text, "avx2 "));
    const std::string json = jitmm::hw::cpu_report_json(c);
    REQUIRE_FALSE(json.empty());
    CHECK(json.front() == '{');
    CHECK(json.back() == '}');
    CHECK(contains(json, std::string("\"best_isa\": \"") + jitmm::hw::isa_name(c.best_isa) + "\""));
}

TEST_CASE("json_string escapes quotes, backslashes and control characters", "[hw]") {
    using jitmm::hw::json_string;
    CHECK(json_string("") == "\"\"");
    CHECK(json_string("Intel(R) Xeon(R)") == "\"Intel(R) Xeon(R)\"");
    CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
    CHECK(json_string("line\nnext\ttab") == "\"line\\nnext\\ttab\"");
    CHECK(json_string(std::string("\x01", 1)) == "\"\\u0001\"");
}

TEST_CASE("arch_name: arch-specific suffix for 9.0 and 10.x and up", "[hw]") {
    auto arch = [](int major, int minor) {
        jitmm::hw::GpuInfo g;
        g.cc_major = major;
        g.cc_minor = minor;
        return g.arch_name();
    };
    CHECK(arch(7, 0) == "sm_70");
    CHECK(arch(8, 0) == "sm_80");
    CHECK(arch(8, 6) == "sm_86");
    CHECK(arch(8, 9) == "sm_89");
    CHECK(arch(9, 0) == "sm_90a");
    CHECK(arch(10, 0) == "sm_100a");
    CHECK(arch(10, 3) == "sm_103a");
    CHECK(arch(12, 0) == "sm_120a");
}

TEST_CASE("gpu probe: returns, and explains a missing driver", "[hw]") {
    const auto& p = jitmm::hw::gpu_probe();
    const std::string text = jitmm::hw::gpu_report_text(p);
    const std::string json = jitmm::hw::gpu_report_json(p);
    INFO(text);
    CHECK(json.front() == '{');
    CHECK(json.back() == '}');
    CHECK(contains(json, "\"driver_loaded\": "));
    if (!p.driver_loaded) {
        CHECK_FALSE(p.driver_note.empty());
        CHECK(p.devices.empty());
        CHECK(p.driver_version == 0);
        CHECK(contains(text, p.driver_note));
    } else {
        CHECK(p.driver_version > 0);
    }
}

TEST_CASE("cuda driver table: present exactly when the probe saw a driver", "[hw]") {
    const auto& p = jitmm::hw::gpu_probe();
    const jitmm::cuda::DriverApi* drv = jitmm::cuda::driver();
    CHECK((drv == nullptr) == !p.driver_loaded);
    CHECK(jitmm::cuda::driver_unavailable_reason().empty() == (drv != nullptr));

    CHECK_NOTHROW(jitmm::cuda::check(CUDA_SUCCESS, "cuNothing"));
    try {
        jitmm::cuda::check(CUDA_ERROR_INVALID_VALUE, "cuSomething");
        FAIL("check did not throw");
    } catch (const jitmm::Error& e) {
        CHECK(e.status() == JITMM_STATUS_DEVICE_ERROR);
        CHECK(starts_with(e.what(), "cuSomething: "));
        if (drv != nullptr) CHECK(contains(e.what(), "CUDA_ERROR_INVALID_VALUE"));
    }
    try {
        jitmm::cuda::check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
        FAIL("check did not throw");
    } catch (const jitmm::Error& e) {
        CHECK(e.status() == JITMM_STATUS_OUT_OF_MEMORY);
    }
    if (drv == nullptr) {
        try {
            jitmm::cuda::driver_or_throw();
            FAIL("driver_or_throw did not throw");
        } catch (const jitmm::Error& e) {
            CHECK(e.status() == JITMM_STATUS_NO_DEVICE);
            CHECK(std::string(e.what()) == jitmm::cuda::driver_unavailable_reason());
        }
    }
}

TEST_CASE("cuda devices: attributes are sane and the bound entry points work", "[cuda]") {
    const auto& p = jitmm::hw::gpu_probe();
    if (!p.driver_loaded || p.devices.empty()) {
        WARN_SKIPPED("no CUDA device: " << (p.driver_note.empty() ? "the driver lists no devices" : p.driver_note));
        return;
    }
    INFO(jitmm::hw::gpu_report_text(p));
    CHECK(p.driver_version >= jitmm::cuda::kDriverAbiVersion);
    for (const auto& d : p.devices) {
        CHECK_FALSE(d.name.empty());
        CHECK(d.cc_major >= 7);
        CHECK(d.sm_count > 0);
        CHECK(d.l2_bytes > 0);
        CHECK(d.smem_per_block_optin >= 48 * 1024);
        CHECK(d.smem_per_sm >= d.smem_per_block_optin);
        CHECK(d.global_mem_bytes > 0);
        CHECK(starts_with(d.arch_name(), "sm_"));
    }

    // Every entry a CUDA 12 driver has is bound; the optional ones too on a 12.0+ driver.
    const auto& drv = jitmm::cuda::driver_or_throw();
    CHECK(drv.missing_entries.empty());
    CHECK(drv.cuLaunchKernelEx != nullptr);
    CHECK(drv.cuTensorMapEncodeTiled != nullptr);

    // A round trip through the primary context exercises the versioned entry points (_v2 ABIs).
    using jitmm::cuda::check;
    CUdevice dev = 0;
    check(drv.cuDeviceGet(&dev, 0), "cuDeviceGet");
    CUcontext ctx = nullptr;
    check(drv.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(drv.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
    constexpr size_t kBytes = 4096;
    CUdeviceptr buf = 0;
    check(drv.cuMemAlloc(&buf, kBytes), "cuMemAlloc");
    CUstream stream = nullptr;
    check(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    CUevent start = nullptr, stop = nullptr;
    check(drv.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    check(drv.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    check(drv.cuEventRecord(start, stream), "cuEventRecord");
    check(drv.cuMemsetD8(buf, 0x5a, kBytes), "cuMemsetD8");
    check(drv.cuEventRecord(stop, stream), "cuEventRecord");
    check(drv.cuEventSynchronize(stop), "cuEventSynchronize");
    float ms = -1.0f;
    check(drv.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    CHECK(ms >= 0.0f);
    unsigned char host[kBytes] = {};
    check(drv.cuMemcpyDtoH(host, buf, kBytes), "cuMemcpyDtoH");
    CHECK(host[0] == 0x5a);
    CHECK(host[kBytes - 1] == 0x5a);
    CUdeviceptr async_buf = 0;
    check(drv.cuMemAllocAsync(&async_buf, kBytes, stream), "cuMemAllocAsync");
    check(drv.cuMemFreeAsync(async_buf, stream), "cuMemFreeAsync");
    check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize");
    check(drv.cuEventDestroy(start), "cuEventDestroy");
    check(drv.cuEventDestroy(stop), "cuEventDestroy");
    check(drv.cuStreamDestroy(stream), "cuStreamDestroy");
    check(drv.cuMemFree(buf), "cuMemFree");
    check(drv.cuCtxSynchronize(), "cuCtxSynchronize");
    CUcontext popped = nullptr;
    check(drv.cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
    CHECK(popped == ctx);
    check(drv.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
}
