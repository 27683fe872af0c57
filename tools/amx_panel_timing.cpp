// jitmm-amx-panels: times the AMX panel-run microkernel alone (gemm_amx_generator.cpp), with its operands hot,
// to tell the microkernel's cost from the driver's (packing, DRAM, cache sharing). A measurement tool, not
// installed.
//
//   jitmm-amx-panels TYPE KC NC ROW_TILES PHASE [STREAM] [LDC]
//     TYPE      bf16 (f32 C) or s8 (s32 C)
//     KC        K block in elements (a multiple of 64 bytes)
//     NC        columns of the packed B block (a multiple of 32): one call runs NC / 32 panels
//     ROW_TILES row tiles of 32 rows, each with its own A panel (rows KC bytes + 64 apart, as the packer
//               lays them out), strip rows and C rows; B is shared, as in the driver
//     PHASE     single (one K block: C stored directly), first (strip stored), middle (strip loaded and
//               stored) or last (strip loaded, C stored)
//     STREAM    1: C written non-temporally (LayoutLowp::amx_c_streamed), default 0
//     LDC       C row stride in elements, default 1024
//
// JITMM_AMX_PANELS_FILL=zero|const|random (default random) picks the operands' values: the tile unit runs zeros
// and the bench's --peak inputs (small, little variety) faster than random data.
// Prints the median over 200 passes (each pass: one call per row tile) in TSC per row tile, per panel and per
// K step, and GFLOP/s (GOP/s) against issue 7's AMX peaks with tile loads (bf16 2.5 TFLOP/s, int8 5.0 TOPS).
// Pin it (taskset -c N): one core's L1 and L2 are what it measures.
#include "hw/cpu.hpp"
#include "x86/exec_memory.hpp"
#include "x86/gemm_amx_generator.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <x86intrin.h>

namespace {

using namespace jitmm;

// Zero-filled, 2 MB aligned, touched (no page faults while timing).
uint8_t* buffer(size_t bytes) {
    const size_t huge = size_t(2) << 20;
    void* raw = mmap(nullptr, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        std::perror("mmap");
        std::exit(1);
    }
    auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + huge - 1) / huge * huge);
    madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(p, 0, bytes);
    return p;
}

// s8: any byte; bf16: values in [-1, 1) (sign, exponents 0x70-0x7e, any mantissa).
void fill_random(uint8_t* p, size_t bytes, bool s8) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < bytes; i += 2) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint16_t v = static_cast<uint16_t>(x);
        if (!s8) v = static_cast<uint16_t>((v & 0x807f) | ((0x70 + (x >> 16) % 15) << 7));
        std::memcpy(p + i, &v, std::min<size_t>(2, bytes - i));
    }
}

// What amx_chains in bench/peak.cpp multiplies: small values with little variety.
void fill_const(uint8_t* p, size_t bytes, bool s8) {
    for (size_t i = 0; i + 1 < bytes; i += 2) {
        const auto v = static_cast<uint16_t>((s8 ? 0x0103 : 0x3c00) + ((i / 2) & (s8 ? 7 : 15)));
        std::memcpy(p + i, &v, 2);
    }
}

double tsc_hz() {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t c0 = __rdtsc();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(50)) {
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return double(__rdtsc() - c0) / s;
}

int usage() {
    std::fprintf(stderr, "usage: jitmm-amx-panels bf16|s8 KC NC ROW_TILES single|first|middle|last [STREAM] [LDC]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 6) return usage();
    const std::string type = argv[1], phase = argv[5];
    const bool s8 = type == "s8";
    if (!s8 && type != "bf16") return usage();
    const int64_t kc = std::atoll(argv[2]), nc = std::atoll(argv[3]);
    const int row_tiles = std::atoi(argv[4]);
    const bool stream = argc > 6 && std::atoi(argv[6]) != 0;
    const int64_t ldc = argc > 7 ? std::atoll(argv[7]) : 1024;
    const int esz = s8 ? 1 : 2;
    if (kc < 1 || (kc * esz) % 64 != 0 || nc < 32 || nc % 32 != 0 || row_tiles < 1 || ldc < nc) return usage();
    if (phase != "single" && phase != "first" && phase != "middle" && phase != "last") return usage();
    const hw::CpuInfo& cpu = hw::cpu_info();
    if (cpu.best_isa < hw::X86Isa::amx || !cpu.amx_permitted) {
        std::fprintf(stderr, "no usable AMX on this CPU\n");
        return 1;
    }

    plan::LowpLayout L;
    L.isa = hw::X86Isa::amx;
    L.step = s8 ? plan::LowpStep::amx_int8 : plan::LowpStep::amx_bf16;
    L.a_type = L.b_type = s8 ? JITMM_DTYPE_S8 : JITMM_DTYPE_BF16;
    L.c_type = L.bias_type = s8 ? JITMM_DTYPE_S32 : JITMM_DTYPE_F32;
    L.int_epilogue = s8;
    L.mr = 32;
    L.nv = 2;
    L.k_unroll = 1;
    L.acc_ld = nc * 4 + 64;  // as the planner pads the strip's rows
    L.ldc = ldc;
    L.amx_b_streamed = true;
    L.amx_c_streamed = stream;
    x86::LowpVariant v;
    v.rows = v.cols = 32;
    v.k_len = kc;
    v.first = phase == "single" || phase == "first";
    v.last = phase == "single" || phase == "last";
    const x86::LowpCode code = x86::generate_amx(L, {v});
    const x86::ExecMemory mem(code.bytes.data(), code.bytes.size());
    const auto kernel = reinterpret_cast<x86::LowpUkernel>(const_cast<uint8_t*>(mem.entry(code.entries[0])));
    const auto configure = reinterpret_cast<x86::LowpStub>(const_cast<uint8_t*>(mem.entry(code.config_entries[0])));
    const auto release = reinterpret_cast<x86::LowpStub>(const_cast<uint8_t*>(mem.entry(code.release_entry)));

    const int64_t a_ld = kc * esz + 64;
    // Random operands: the tile unit runs zeros measurably faster (a third faster measured on bf16).
    uint8_t* a = buffer(size_t(row_tiles) * 32 * a_ld);
    uint8_t* b = buffer(size_t(kc * esz * nc));
    const char* fill = std::getenv("JITMM_AMX_PANELS_FILL");  // zero, const (the bench's --peak inputs), random
    const std::string fill_mode = fill ? fill : "random";
    if (fill_mode == "random") {
        fill_random(a, size_t(row_tiles) * 32 * a_ld, s8);
        fill_random(b, size_t(kc * esz * nc), s8);
    } else if (fill_mode == "const") {
        fill_const(a, size_t(row_tiles) * 32 * a_ld, s8);
        fill_const(b, size_t(kc * esz * nc), s8);
    }
    uint8_t* strip = buffer(size_t(row_tiles) * 32 * L.acc_ld);
    uint8_t* c = buffer(size_t(row_tiles) * 32 * ldc * 4);
    configure();
    x86::LowpCallArgs args;
    args.panels = nc / 32;
    args.stream_c = stream ? 1 : 0;
    args.a_stride = a_ld;
    std::vector<uint64_t> passes;
    for (int pass = 0; pass < 200; ++pass) {
        const uint64_t t0 = __rdtsc();
        for (int r = 0; r < row_tiles; ++r) {
            args.acc = strip + r * 32 * L.acc_ld;
            kernel(a + r * 32 * a_ld, b, c + r * 32 * ldc * 4, &args);
        }
        _mm_sfence();
        passes.push_back(__rdtsc() - t0);
    }
    release();
    std::sort(passes.begin(), passes.end());
    const double per_tile = double(passes[passes.size() / 2]) / row_tiles;
    const double panels = double(nc / 32), steps = double(kc * esz / 64);
    const double seconds = per_tile / tsc_hz();
    const double flops = 2.0 * 32 * nc * kc, peak = s8 ? 5.0e12 : 2.5e12;
    std::printf("%s kc=%lld nc=%lld row_tiles=%d %s%s: %.0f TSC per row tile, %.0f per panel, %.1f per K step; "
                "%.0f %s = %.0f%% of the with-loads peak\n",
                type.c_str(), static_cast<long long>(kc), static_cast<long long>(nc), row_tiles, phase.c_str(),
                stream ? " streamed C" : "", per_tile, per_tile / panels, per_tile / panels / steps,
                flops / seconds * 1e-9, s8 ? "GOP/s" : "GFLOP/s", 100.0 * flops / seconds / peak);
    return 0;
}
