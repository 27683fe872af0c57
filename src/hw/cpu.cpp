#include "hw/cpu.hpp"

#include <cpuinfo.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#define JITMM_HW_X86 1
#include <cpuid.h>
#endif
#if defined(JITMM_HW_X86) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace jitmm::hw {

namespace {

constexpr X86Isa kAllTiers[] = {X86Isa::none,        X86Isa::avx2,        X86Isa::avx512, X86Isa::avx512_vnni,
                                X86Isa::avx512_bf16, X86Isa::avx512_fp16, X86Isa::amx};

const char* vendor_name(cpuinfo_vendor v) {
    switch (v) {
        case cpuinfo_vendor_intel: return "Intel";
        case cpuinfo_vendor_amd: return "AMD";
        case cpuinfo_vendor_hygon: return "Hygon";
        case cpuinfo_vendor_via: return "VIA";
        case cpuinfo_vendor_arm: return "ARM";
        case cpuinfo_vendor_apple: return "Apple";
        case cpuinfo_vendor_qualcomm: return "Qualcomm";
        case cpuinfo_vendor_nvidia: return "NVIDIA";
        default: return "unknown";
    }
}

// cpuinfo has no name function; only the x86 cores jitmm could meet are spelled out.
const char* uarch_name(cpuinfo_uarch u) {
    switch (u) {
        case cpuinfo_uarch_nehalem: return "Nehalem";
        case cpuinfo_uarch_sandy_bridge: return "Sandy Bridge";
        case cpuinfo_uarch_ivy_bridge: return "Ivy Bridge";
        case cpuinfo_uarch_haswell: return "Haswell";
        case cpuinfo_uarch_broadwell: return "Broadwell";
        case cpuinfo_uarch_sky_lake: return "Skylake";
        case cpuinfo_uarch_palm_cove: return "Palm Cove";
        case cpuinfo_uarch_sunny_cove: return "Sunny Cove";
        case cpuinfo_uarch_silvermont: return "Silvermont";
        case cpuinfo_uarch_airmont: return "Airmont";
        case cpuinfo_uarch_goldmont: return "Goldmont";
        case cpuinfo_uarch_goldmont_plus: return "Goldmont Plus";
        case cpuinfo_uarch_knights_landing: return "Knights Landing";
        case cpuinfo_uarch_knights_mill: return "Knights Mill";
        case cpuinfo_uarch_bulldozer: return "Bulldozer";
        case cpuinfo_uarch_piledriver: return "Piledriver";
        case cpuinfo_uarch_steamroller: return "Steamroller";
        case cpuinfo_uarch_excavator: return "Excavator";
        case cpuinfo_uarch_zen: return "Zen";
        case cpuinfo_uarch_zen2: return "Zen 2";
        case cpuinfo_uarch_zen3: return "Zen 3";
        case cpuinfo_uarch_jaguar: return "Jaguar";
        case cpuinfo_uarch_unknown: return "unknown";
        default: return "other";
    }
}

// Vendor, uarch hint, caches and core counts from cpuinfo (which reads sysfs and CPUID leaf 4/0x8000001D).
void probe_topology(CpuInfo& info) {
    if (!cpuinfo_initialize()) {
        info.uarch = "unknown";
        const unsigned n = std::thread::hardware_concurrency();
        info.logical_cores = info.physical_cores = n > 0 ? static_cast<int>(n) : 1;
        return;
    }
    if (cpuinfo_get_cores_count() > 0) {
        const cpuinfo_core* core = cpuinfo_get_core(0);
        info.vendor = vendor_name(core->vendor);
        info.uarch = uarch_name(core->uarch);
    }
    if (cpuinfo_get_l1d_caches_count() > 0) info.l1d_bytes = cpuinfo_get_l1d_cache(0)->size;
    if (cpuinfo_get_l2_caches_count() > 0) info.l2_bytes = cpuinfo_get_l2_cache(0)->size;
    if (cpuinfo_get_l3_caches_count() > 0) info.l3_bytes = cpuinfo_get_l3_cache(0)->size;
    info.physical_cores = std::max(1, static_cast<int>(cpuinfo_get_cores_count()));
    info.logical_cores = std::max(info.physical_cores, static_cast<int>(cpuinfo_get_processors_count()));
    if (info.brand.empty() && cpuinfo_get_packages_count() > 0) info.brand = cpuinfo_get_package(0)->name;
}

#if defined(JITMM_HW_X86)

// XCR0 state components (Intel SDM vol. 1, 13.1).
constexpr uint64_t kXcr0Ymm = (1u << 1) | (1u << 2);                  // SSE + AVX (upper YMM)
constexpr uint64_t kXcr0Zmm = (1u << 5) | (1u << 6) | (1u << 7);      // opmask, ZMM_Hi256, Hi16_ZMM
constexpr uint64_t kXcr0Tile = (uint64_t{1} << 17) | (uint64_t{1} << 18);  // XTILECFG, XTILEDATA

// Linux's AMX permission interface (arch/x86/include/uapi/asm/prctl.h, Linux 5.16+). XTILEDATA is
// 64 KiB of state per thread, so the kernel hands it out only on request; without it the first tile
// instruction faults (SIGILL).
constexpr long kArchGetXcompPerm = 0x1022;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// The one AMX tile palette jitmm generates for (CPUID leaf 0x1D subleaf 1).
constexpr uint32_t kTileTotalBytes = 8192, kTileBytes = 1024, kTileRowBytes = 64, kTileNames = 8, kTileRows = 16;

bool bit(uint32_t value, int b) { return ((value >> b) & 1u) != 0; }

struct Regs {
    uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf = 0) {
    Regs r;
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
    return r;
}

uint64_t xgetbv0() {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t{hi} << 32) | lo;
}

std::string trim(std::string s) {
    const size_t b = s.find_first_not_of(' ');
    const size_t e = s.find_last_not_of(' ');
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string cpuid_vendor(const Regs& leaf0) {
    char v[13] = {};
    std::memcpy(v, &leaf0.ebx, 4);
    std::memcpy(v + 4, &leaf0.edx, 4);
    std::memcpy(v + 8, &leaf0.ecx, 4);
    if (std::strcmp(v, "GenuineIntel") == 0) return "Intel";
    if (std::strcmp(v, "AuthenticAMD") == 0) return "AMD";
    return v;
}

std::string cpuid_brand() {
    if (cpuid(0x80000000u).eax < 0x80000004u) return "";
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
        const Regs r = cpuid(0x80000002u + i);
        std::memcpy(brand + 16 * i, &r.eax, 4);
        std::memcpy(brand + 16 * i + 4, &r.ebx, 4);
        std::memcpy(brand + 16 * i + 8, &r.ecx, 4);
        std::memcpy(brand + 16 * i + 12, &r.edx, 4);
    }
    return trim(brand);
}

// Asks Linux for XTILEDATA, then reads the permission back (the request can succeed on a kernel that
// still will not grant it to this process, e.g. under a signal-stack size limit).
bool request_amx_permission(std::string* note) {
#if defined(__linux__)
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
        const int err = errno;
        *note = std::string("arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed: ") + std::strerror(err);
        if (err == EINVAL) *note += " (kernel older than 5.16, or AMX disabled by the kernel)";
        return false;
    }
    unsigned long granted = 0;
    if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0 || !((granted >> kXfeatureXtiledata) & 1u)) {
        *note = "arch_prctl(ARCH_GET_XCOMP_PERM) does not show XTILEDATA after the request";
        return false;
    }
    return true;
#else
    *note = "AMX permission is only requested on Linux";
    return false;
#endif
}

// Palette 1 must have the geometry the AMX generators assume; some VMs advertise AMX with an empty or
// odd leaf 0x1D and then fault on ldtilecfg.
bool check_amx_palette(uint32_t max_leaf, std::string* note) {
    if (max_leaf < 0x1D) {
        *note = "CPUID has no leaf 0x1D (tile palettes)";
        return false;
    }
    if (cpuid(0x1D, 0).eax < 1) {
        *note = "CPUID leaf 0x1D lists no palette 1";
        return false;
    }
    const Regs p = cpuid(0x1D, 1);
    const uint32_t total = p.eax & 0xFFFF, per_tile = p.eax >> 16;
    const uint32_t per_row = p.ebx & 0xFFFF, names = p.ebx >> 16, rows = p.ecx & 0xFFFF;
    if (total == kTileTotalBytes && per_tile == kTileBytes && per_row == kTileRowBytes && names == kTileNames &&
        rows == kTileRows) {
        return true;
    }
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "CPUID leaf 0x1D palette 1 reads total %u, per tile %u, per row %u, names %u, rows %u "
                  "(expected 8192, 1024, 64, 8, 16)",
                  total, per_tile, per_row, names, rows);
    *note = buf;
    return false;
}

void probe_isa(CpuInfo& info) {
    const Regs leaf0 = cpuid(0);
    const uint32_t max_leaf = leaf0.eax;
    info.vendor = cpuid_vendor(leaf0);  // cpuinfo's name replaces it when cpuinfo knows the vendor
    info.brand = cpuid_brand();
    if (max_leaf < 1) return;

    const Regs leaf1 = cpuid(1);
    const int base_family = (leaf1.eax >> 8) & 0xF, base_model = (leaf1.eax >> 4) & 0xF;
    info.family = base_family == 0xF ? base_family + static_cast<int>((leaf1.eax >> 20) & 0xFF) : base_family;
    info.model = (base_family == 0x6 || base_family == 0xF)
                     ? static_cast<int>(((leaf1.eax >> 16) & 0xF) << 4) + base_model
                     : base_model;
    info.stepping = leaf1.eax & 0xF;

    // CPUID says what the silicon has; XCR0 says which register state the OS saves on a context switch.
    // A vector extension is usable only with both (a hypervisor or kernel may switch the state off).
    const bool osxsave = bit(leaf1.ecx, 27);
    info.xcr0 = osxsave ? xgetbv0() : 0;
    const bool ymm_state = (info.xcr0 & kXcr0Ymm) == kXcr0Ymm;
    const bool zmm_state = ymm_state && (info.xcr0 & kXcr0Zmm) == kXcr0Zmm;
    const bool tile_state = (info.xcr0 & kXcr0Tile) == kXcr0Tile;

    info.sse41 = bit(leaf1.ecx, 19);
    info.fma = ymm_state && bit(leaf1.ecx, 12);
    info.avx = ymm_state && bit(leaf1.ecx, 28);
    info.f16c = ymm_state && bit(leaf1.ecx, 29);
    if (max_leaf < 7) return;

    const Regs leaf7 = cpuid(7, 0);
    const Regs leaf7_1 = leaf7.eax >= 1 ? cpuid(7, 1) : Regs{};
    info.avx2 = info.avx && bit(leaf7.ebx, 5);
    info.avx512f = zmm_state && bit(leaf7.ebx, 16);
    info.avx512dq = zmm_state && bit(leaf7.ebx, 17);
    info.avx512bw = zmm_state && bit(leaf7.ebx, 30);
    info.avx512vl = zmm_state && bit(leaf7.ebx, 31);
    info.avx512_vnni = zmm_state && bit(leaf7.ecx, 11);
    info.avx512_fp16 = zmm_state && bit(leaf7.edx, 23);
    info.avx512_bf16 = zmm_state && bit(leaf7_1.eax, 5);
    info.avx_vnni = ymm_state && bit(leaf7_1.eax, 4);

    const bool cpuid_tile = bit(leaf7.edx, 24), cpuid_bf16 = bit(leaf7.edx, 22), cpuid_int8 = bit(leaf7.edx, 25);
    info.amx_tile = tile_state && cpuid_tile;
    info.amx_bf16 = tile_state && cpuid_bf16;
    info.amx_int8 = tile_state && cpuid_int8;
    if (!(cpuid_tile || cpuid_bf16 || cpuid_int8)) return;  // not advertised: nothing to explain

    // AMX is advertised: find out whether it can really run, and say why not when it cannot.
    std::vector<std::string> problems;
    if (!(cpuid_tile && cpuid_bf16 && cpuid_int8)) problems.push_back("CPUID advertises only part of AMX");
    if (!tile_state) {
        problems.push_back("XCR0 lacks XTILECFG/XTILEDATA (bits 17, 18): the OS has not enabled AMX state");
    } else {
        std::string note;
        info.amx_permitted = request_amx_permission(&note);
        if (!info.amx_permitted) problems.push_back(note);
    }
    std::string palette_note;
    info.amx_palette_ok = check_amx_palette(max_leaf, &palette_note);
    if (!info.amx_palette_ok) problems.push_back(palette_note);
    for (const std::string& p : problems) info.amx_note += (info.amx_note.empty() ? "" : "; ") + p;
}

#endif  // JITMM_HW_X86

// The tiers form a chain: a tier is reached only when every lower tier is, plus its own features. So a
// chip with AMX but without AVX512-FP16 stops at avx512_bf16 (every AMX chip so far has FP16).
//   avx2         AVX, AVX2, FMA (OS-enabled YMM state)
//   avx512       + AVX-512 F, BW, VL, DQ (OS-enabled opmask/ZMM state)
//   avx512_vnni  + AVX512-VNNI
//   avx512_bf16  + AVX512-BF16
//   avx512_fp16  + AVX512-FP16
//   amx          + AMX-TILE, AMX-BF16, AMX-INT8 (OS-enabled tile state), the Linux permission, palette 1 as expected
X86Isa best_tier(const CpuInfo& c) {
    const bool tier_ok[] = {
        true,
        c.avx && c.avx2 && c.fma,
        c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq,
        c.avx512_vnni,
        c.avx512_bf16,
        c.avx512_fp16,
        c.amx_tile && c.amx_bf16 && c.amx_int8 && c.amx_permitted && c.amx_palette_ok,
    };
    X86Isa best = X86Isa::none;
    for (X86Isa tier : kAllTiers) {
        if (!tier_ok[static_cast<int>(tier)]) break;
        best = tier;
    }
    return best;
}

CpuInfo run_probe() {
    CpuInfo info;
#if defined(JITMM_HW_X86)
    probe_isa(info);
#endif
    const std::string cpuid_vendor_name = info.vendor;
    probe_topology(info);
    if (info.vendor.empty() || info.vendor == "unknown") info.vendor = cpuid_vendor_name;
    if (info.vendor.empty()) info.vendor = "unknown";
    if (info.uarch.empty() || info.uarch == "unknown") {
        if (const char* name = uarch_from_cpuid(info.vendor, info.family, info.model, info.stepping)) {
            info.uarch = name;
            info.uarch_source = "CPUID family and model";
        }
    }
    // vdpbf16ps: AMD's Zen 4 and later issue it like an FMA (two bf16 pairs per f32 lane: twice the f32 flops,
    // 233 GFLOP/s against 117 measured on one Zen 4 core); on the Intel cores measured (Sapphire and Emerald
    // Rapids, capped below AMX) it reaches half the FMAs' flops, so there the converted f32 FMAs run faster.
    info.bf16_dot_full_rate = info.avx512_bf16 && info.vendor == "AMD";
    // One row times a 64 MB f32 B streamed from memory (1 thread, Zen 4, median us): B stored N x K on 24 rows
    // at once with software prefetches 6050 (1x4096x4096), without them 3280, 8 rows at once without 2520
    // (oneDNN 2950); B stored K x N on 8 streams with rows 16 KiB apart 2820, where the broadcast tiles took
    // 6200. The Intel cores measured ran the prefetched 24 rows at 1.08x oneDNN and lost 3-10% on 4 KiB rows.
    info.few_streams_from_memory = info.vendor == "AMD";
    // Zen 4 (family 0x19) splits a zmm FMA into two 256-bit halves; Zen 5 (0x1a) has 512-bit FMA units.
    if (info.vendor == "AMD" && info.family == 0x19) info.zmm_fma_per_cycle = 1;
    info.best_isa = best_tier(info);
    const bool amx_usable = info.amx_tile && info.amx_bf16 && info.amx_int8 && info.amx_permitted &&
                            info.amx_palette_ok;
    if (amx_usable && info.best_isa != X86Isa::amx) {
        info.amx_note = std::string("AMX is usable, but the amx tier also needs every lower tier (best is ") +
                        isa_name(info.best_isa) + ")";
    }
    return info;
}

std::string size_text(int64_t bytes) {
    if (bytes <= 0) return "unknown";
    std::ostringstream s;
    constexpr int64_t kMiB = int64_t{1} << 20;
    if (bytes >= kMiB) {
        if (bytes % kMiB == 0) {
            s << bytes / kMiB << " MiB";
        } else {
            s.precision(2);
            s << std::fixed << static_cast<double>(bytes) / kMiB << " MiB";
        }
    } else {
        s << bytes / 1024 << " KiB";
    }
    return s.str();
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

}  // namespace

// The microarchitecture from CPUID's family and model, for the chips cpuinfo's Debian release predates (it names
// nothing past Zen 3 and Ice Lake; under a VM it often says unknown even for those). Only server and desktop
// parts that have AVX2 are listed: what jitmm generates for.
const char* uarch_from_cpuid(const std::string& vendor, int family, int model, int stepping) {
    if (vendor == "AMD") {
        if (family == 0x17) return model >= 0x30 ? "Zen 2" : "Zen";
        if (family == 0x19) {
            if ((model >= 0x10 && model <= 0x1f) || (model >= 0x60 && model <= 0x7f)) return "Zen 4";
            if (model >= 0xa0 && model <= 0xaf) return "Zen 4c";
            return "Zen 3";
        }
        if (family == 0x1a) return "Zen 5";
        return nullptr;
    }
    if (vendor != "Intel" || family != 6) return nullptr;
    switch (model) {
        case 0x3c: case 0x3f: case 0x45: case 0x46: return "Haswell";
        case 0x3d: case 0x47: case 0x4f: case 0x56: return "Broadwell";
        case 0x4e: case 0x5e: case 0x8e: case 0x9e: return "Skylake";
        case 0x55: return stepping >= 10 ? "Cooper Lake" : stepping >= 5 ? "Cascade Lake" : "Skylake-SP";
        case 0x6a: case 0x6c: case 0x7d: case 0x7e: return "Ice Lake";
        case 0x8c: case 0x8d: return "Tiger Lake";
        case 0x97: case 0x9a: return "Alder Lake";
        case 0xb7: case 0xba: case 0xbf: return "Raptor Lake";
        case 0x8f: return "Sapphire Rapids";
        case 0xcf: return "Emerald Rapids";
        case 0xad: case 0xae: return "Granite Rapids";
        case 0xaf: return "Sierra Forest";
        default: return nullptr;
    }
}

const char* isa_name(X86Isa isa) {
    switch (isa) {
        case X86Isa::none: return "none";
        case X86Isa::avx2: return "avx2";
        case X86Isa::avx512: return "avx512";
        case X86Isa::avx512_vnni: return "avx512_vnni";
        case X86Isa::avx512_bf16: return "avx512_bf16";
        case X86Isa::avx512_fp16: return "avx512_fp16";
        case X86Isa::amx: return "amx";
    }
    return "none";
}

bool isa_from_name(const std::string& name, X86Isa* isa) {
    for (X86Isa tier : kAllTiers) {
        if (name == isa_name(tier)) {
            if (isa != nullptr) *isa = tier;
            return true;
        }
    }
    return false;
}

const CpuInfo& cpu_info() {
    static const CpuInfo info = run_probe();  // C++11 statics: probed once, thread-safe
    return info;
}

std::string cpu_report_text(const CpuInfo& c) {
    std::ostringstream s;
    s << "CPU\n";
    s << "  vendor          " << c.vendor << "\n";
    s << "  uarch           " << c.uarch << " (" << c.uarch_source << "; family " << c.family << ", model 0x"
      << std::hex << c.model << std::dec << ", stepping " << c.stepping << ")\n";
    s << "  brand           " << (c.brand.empty() ? "unknown" : c.brand) << "\n";
    s << "  cores           " << c.physical_cores << " physical, " << c.logical_cores << " logical\n";
    s << "  caches          L1d " << size_text(c.l1d_bytes) << " and L2 " << size_text(c.l2_bytes)
      << " per core, L3 " << size_text(c.l3_bytes) << "\n";
    s << "  XCR0            0x" << std::hex << c.xcr0 << std::dec << "\n";
    s << "  isa             sse41 " << yes_no(c.sse41) << ", avx " << yes_no(c.avx) << ", avx2 " << yes_no(c.avx2)
      << ", fma " << yes_no(c.fma) << ", f16c " << yes_no(c.f16c) << "\n";
    s << "                  avx512f " << yes_no(c.avx512f) << ", avx512bw " << yes_no(c.avx512bw) << ", avx512vl "
      << yes_no(c.avx512vl) << ", avx512dq " << yes_no(c.avx512dq) << "\n";
    s << "                  avx512_vnni " << yes_no(c.avx512_vnni) << ", avx512_bf16 " << yes_no(c.avx512_bf16)
      << ", avx512_fp16 " << yes_no(c.avx512_fp16) << ", avx_vnni " << yes_no(c.avx_vnni) << "\n";
    s << "                  amx_tile " << yes_no(c.amx_tile) << ", amx_bf16 " << yes_no(c.amx_bf16) << ", amx_int8 "
      << yes_no(c.amx_int8) << "\n";
    s << "  amx             permission " << (c.amx_permitted ? "granted" : "not granted") << ", palette "
      << (c.amx_palette_ok ? "ok (8 tiles of 16 rows x 64 bytes)" : "not usable") << "\n";
    if (!c.amx_note.empty()) s << "  amx note        " << c.amx_note << "\n";
    s << "  best tier       " << isa_name(c.best_isa) << "\n";
    if (c.avx512f) s << "  zmm FMAs        " << c.zmm_fma_per_cycle << " per cycle\n";
    s << "  row streams     " << (c.few_streams_from_memory ? "8 at once, hardware prefetch only"
                                                               : "24 at once, software prefetches ahead") << "\n";
    if (c.avx512_bf16)
        s << "  bf16 without AMX " << (c.bf16_dot_full_rate ? "vdpbf16ps (it issues at the FMA rate here)"
                                                           : "converted to f32 FMAs (vdpbf16ps reaches half their flops)")
          << "\n";
    return s.str();
}

std::string cpu_report_json(const CpuInfo& c) {
    auto b = [](bool v) { return v ? "true" : "false"; };
    char xcr0[24];
    std::snprintf(xcr0, sizeof(xcr0), "0x%llx", static_cast<unsigned long long>(c.xcr0));
    std::ostringstream s;
    s << "{\"vendor\": " << json_string(c.vendor) << ", \"uarch\": " << json_string(c.uarch)
      << ", \"brand\": " << json_string(c.brand) << ", \"family\": " << c.family << ", \"model\": " << c.model
      << ", \"stepping\": " << c.stepping << ", \"xcr0\": " << json_string(xcr0) << ", \"isa\": {"
      << "\"sse41\": " << b(c.sse41) << ", \"avx\": " << b(c.avx) << ", \"avx2\": " << b(c.avx2)
      << ", \"fma\": " << b(c.fma) << ", \"f16c\": " << b(c.f16c) << ", \"avx512f\": " << b(c.avx512f)
      << ", \"avx512bw\": " << b(c.avx512bw) << ", \"avx512vl\": " << b(c.avx512vl)
      << ", \"avx512dq\": " << b(c.avx512dq) << ", \"avx512_vnni\": " << b(c.avx512_vnni)
      << ", \"avx512_bf16\": " << b(c.avx512_bf16) << ", \"avx512_fp16\": " << b(c.avx512_fp16)
      << ", \"avx_vnni\": " << b(c.avx_vnni) << ", \"amx_tile\": " << b(c.amx_tile)
      << ", \"amx_bf16\": " << b(c.amx_bf16) << ", \"amx_int8\": " << b(c.amx_int8) << "}"
      << ", \"amx_permitted\": " << b(c.amx_permitted) << ", \"amx_palette_ok\": " << b(c.amx_palette_ok)
      << ", \"amx_note\": " << json_string(c.amx_note) << ", \"best_isa\": " << json_string(isa_name(c.best_isa))
      << ", \"l1d_bytes\": " << c.l1d_bytes << ", \"l2_bytes\": " << c.l2_bytes << ", \"l3_bytes\": " << c.l3_bytes
      << ", \"physical_cores\": " << c.physical_cores << ", \"logical_cores\": " << c.logical_cores
      << ", \"uarch_source\": " << json_string(c.uarch_source)
      << ", \"bf16_dot_full_rate\": " << b(c.bf16_dot_full_rate)
      << ", \"few_streams_from_memory\": " << b(c.few_streams_from_memory)
      << ", \"zmm_fma_per_cycle\": " << c.zmm_fma_per_cycle << "}";
    return s.str();
}

std::string json_string(const std::string& in) {
    std::string out = "\"";
    for (const char ch : in) {
        const auto u = static_cast<unsigned char>(ch);
        switch (ch) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (u < 0x20) {
                    char esc[8];
                    std::snprintf(esc, sizeof(esc), "\\u%04x", u);
                    out += esc;
                } else {
                    out += ch;  // bytes >= 0x80 pass through: the strings are UTF-8 (or ASCII from CPUID)
                }
        }
    }
    out += '"';
    return out;
}

}  // namespace jitmm::hw
