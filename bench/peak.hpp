// Peak: the measured FMA throughput of one code tier on N threads, the denominator of "% of peak". Measured,
// not computed from a nominal clock, because a VM's or a loaded chip's clock under wide FMAs is what bounds
// a kernel here. Each thread runs independent FMA chains in registers (enough to cover the FMA latency times
// the FMA ports), pinned to its own CPU where the affinity mask allows.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace jitmm::bench {

// One entry per kind of arithmetic a generator emits: f32 FMA (AVX2, AVX-512), int8 dot products (vpdpbusd,
// AVX512-VNNI), bf16 dot products (vdpbf16ps, AVX512-BF16), f16 FMA (vfmadd231ph, AVX512-FP16), and AMX tile
// products (tdpbf16ps, tdpbusd: four accumulator tiles from tiles already loaded). int8 counts ops, not flops.
enum class PeakKind { f32_avx2, f32_avx512, int8_vnni_avx512, bf16_avx512, f16_avx512, amx_bf16, amx_int8 };

const char* peak_kind_name(PeakKind kind);  // "f32_avx2", "f32_avx512", "int8_vnni_avx512", ..., "amx_int8"
// The kinds this CPU (as probed) can run, in increasing order.
std::vector<PeakKind> supported_peak_kinds();
// The kind that bounds a kernel from this generator ("x86_f32_avx512" -> f32_avx512); false for a generator
// with no measured peak (e.g. GPU ones).
bool peak_kind_for_generator(const std::string& generator, PeakKind* kind);

struct Peak {
    double total_gflops = 0.0;  // all threads together
    double per_core_gflops = 0.0;
    int threads = 0;
};

// The best of 5 to 30 runs of ~20 ms (until the best three agree within 2%).
Peak measure_peak(PeakKind kind, int threads);

// Measures each (kind, threads) once per run, when first asked.
class PeakCache {
public:
    const Peak& get(PeakKind kind, int threads);

private:
    std::map<std::pair<PeakKind, int>, Peak> peaks_;
};

}  // namespace jitmm::bench
