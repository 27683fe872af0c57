// The CPU probe: what this x86 chip can run, read once per process.
#pragma once

#include <cstdint>
#include <string>

namespace jitmm::hw {

// x86 code tiers, ordered: each tier implies the ones before it.
enum class X86Isa : int {
    none = 0,     // no tier jitmm generates code for (pre-AVX2 or non-x86)
    avx2 = 1,     // AVX2 + FMA3
    avx512 = 2,   // AVX-512 F/BW/VL/DQ with OS-enabled zmm/opmask state
    avx512_vnni = 3,
    avx512_bf16 = 4,
    avx512_fp16 = 5,
    amx = 6,      // AMX-TILE/BF16/INT8, a usable palette, and the OS permission granted
};

const char* isa_name(X86Isa isa);
// Parses "avx2", "avx512", ..., "amx" (also "none"); false on unknown names.
bool isa_from_name(const std::string& name, X86Isa* isa);

struct CpuInfo {
    std::string vendor;          // "Intel", "AMD", ... (cpuinfo)
    std::string uarch;           // the microarchitecture's name: a hint only, "unknown" where neither source knows
    std::string uarch_source = "cpuinfo";  // or "CPUID family and model" where cpuinfo said unknown
    std::string brand;           // CPUID brand string
    int family = 0, model = 0, stepping = 0;  // CPUID leaf 1, display values (the uarch when cpuinfo says unknown)
    uint64_t xcr0 = 0;           // the OS-enabled state components (XGETBV 0); 0 without OSXSAVE
    // ISA bits as CPUID reports them AND the OS has enabled (XCR0) where state is involved.
    bool sse41 = false, avx = false, avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
    bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false, avx_vnni = false;
    bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
    bool amx_permitted = false;  // arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) succeeded
    bool amx_palette_ok = false; // CPUID leaf 0x1D describes palette 1 with 8 tiles of 16 rows x 64 bytes
    std::string amx_note;        // why AMX is unusable, when it is advertised but refused
    X86Isa best_isa = X86Isa::none;  // the highest tier whose every requirement above holds
    // vdpbf16ps issues at the f32 FMA rate (twice its flops): bf16 runs on it where AMX is absent, rather than
    // converted to f32 (AMD Zen 4 and later; see run_probe).
    bool bf16_dot_full_rate = false;
    // The hardware prefetchers stream a few rows from memory best left alone: about 8 row streams at once, no
    // software prefetches among them, and rows a multiple of 4 KiB apart no worse than others (AMD Zen 4; the
    // Intel cores measured gained from software prefetches and 24 streams; see run_probe).
    bool few_streams_from_memory = false;
    // zmm FMAs issued per cycle: 2 on the Intel server cores measured, 1 on AMD's Zen 4 (two 256-bit halves each:
    // 117 GFLOP/s on one core, the same as its ymm FMAs). The planners' flops thresholds assume 2.
    int zmm_fma_per_cycle = 2;
    // Per-core data caches and the shared last level, in bytes (0 if unknown; callers use defaults).
    int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
    int physical_cores = 1, logical_cores = 1;
};

// The microarchitecture's name from CPUID's vendor, family, model and stepping (display values), for chips that
// cpuinfo does not name; nullptr where the table does not know them.
const char* uarch_from_cpuid(const std::string& vendor, int family, int model, int stepping);

// Probed on first use (thread-safe), never fails: unknown parts read as absent/0.
const CpuInfo& cpu_info();

// Text and JSON renderings for jitmm-info and jitmm_probe_report.
std::string cpu_report_text(const CpuInfo& info);
std::string cpu_report_json(const CpuInfo& info);

// A JSON string literal of s, quotes included, with ", \ and control characters escaped (shared by the
// hand-written hw reports).
std::string json_string(const std::string& s);

}  // namespace jitmm::hw
