// The CUDA probe: the devices the driver shows, read through the dlopen'd driver table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jitmm::hw {

struct GpuInfo {
    int ordinal = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;        // compute capability
    int sm_count = 0;
    int64_t smem_per_block_optin = 0;      // bytes a block may opt in to
    int64_t smem_per_sm = 0;
    int64_t l2_bytes = 0;
    int64_t global_mem_bytes = 0;
    int clock_khz = 0, mem_clock_khz = 0, mem_bus_width_bits = 0;
    std::string arch_name() const;         // "sm_90a" for 9.0, "sm_80", "sm_100a", ...
};

struct GpuProbe {
    bool driver_loaded = false;   // libcuda.so.1 found and cuInit succeeded
    std::string driver_note;      // why not (e.g. "no CUDA driver: libcuda.so.1 not found"), else ""
    int driver_version = 0;       // cuDriverGetVersion, e.g. 13000
    std::vector<GpuInfo> devices;
};

// Probed on first use (thread-safe), never fails.
const GpuProbe& gpu_probe();

std::string gpu_report_text(const GpuProbe& probe);
std::string gpu_report_json(const GpuProbe& probe);

}  // namespace jitmm::hw
