#include "hw/gpu.hpp"

#include "cuda/driver.hpp"
#include "hw/cpu.hpp"  // json_string

#include <exception>
#include <sstream>

namespace jitmm::hw {

std::string GpuInfo::arch_name() const {
    // Arch-specific targets ("a": wgmma/setmaxnreg on 9.0, tcgen05/TMEM on 10.x, the 11.x/12.x families)
    // run only on that exact chip, which is what a JIT compiling for the device in hand wants.
    const bool arch_specific = (cc_major == 9 && cc_minor == 0) || cc_major >= 10;
    return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + (arch_specific ? "a" : "");
}

namespace {

// Attributes are read one by one; a failed read is an error of the device, reported and not guessed.
int attribute(const cuda::DriverApi& drv, CUdevice dev, CUdevice_attribute attr, const char* what) {
    int value = 0;
    cuda::check(drv.cuDeviceGetAttribute(&value, attr, dev), what);
    return value;
}

GpuInfo probe_device(const cuda::DriverApi& drv, int ordinal) {
    GpuInfo info;
    info.ordinal = ordinal;
    CUdevice dev = 0;
    cuda::check(drv.cuDeviceGet(&dev, ordinal), "cuDeviceGet");

    char name[256] = {};
    cuda::check(drv.cuDeviceGetName(name, static_cast<int>(sizeof(name) - 1), dev), "cuDeviceGetName");
    info.name = name;

    info.cc_major = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability");
    info.cc_minor = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability");
    info.sm_count = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count");
    info.smem_per_block_optin =
        attribute(drv, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory per block");
    info.smem_per_sm =
        attribute(drv, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "shared memory per SM");
    info.l2_bytes = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size");
    info.clock_khz = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate");
    info.mem_clock_khz = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock rate");
    info.mem_bus_width_bits = attribute(drv, dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, "bus width");

    size_t total = 0;
    cuda::check(drv.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
    info.global_mem_bytes = static_cast<int64_t>(total);
    return info;
}

GpuProbe run_probe() {
    GpuProbe probe;
    const cuda::DriverApi* drv = cuda::driver();
    if (drv == nullptr) {
        probe.driver_note = cuda::driver_unavailable_reason();
        return probe;
    }
    probe.driver_loaded = true;
    probe.driver_version = drv->driver_version;
    try {
        int count = 0;
        cuda::check(drv->cuDeviceGetCount(&count), "cuDeviceGetCount");
        for (int i = 0; i < count; ++i) probe.devices.push_back(probe_device(*drv, i));
    } catch (const std::exception& e) {
        // Keep the devices read so far; the note says where the probe stopped.
        probe.driver_note = std::string("device probe failed: ") + e.what();
    }
    return probe;
}

std::string mib(int64_t bytes) {
    std::ostringstream s;
    if (bytes >= (int64_t{1} << 30)) {
        s.precision(1);
        s << std::fixed << static_cast<double>(bytes) / double(int64_t{1} << 30) << " GiB";
    } else if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) {
        s << (bytes >> 20) << " MiB";
    } else {
        s << (bytes >> 10) << " KiB";
    }
    return s.str();
}

}  // namespace

const GpuProbe& gpu_probe() {
    static const GpuProbe probe = run_probe();  // C++11 statics: probed once, thread-safe
    return probe;
}

std::string gpu_report_text(const GpuProbe& probe) {
    std::ostringstream s;
    s << "CUDA\n";
    if (!probe.driver_loaded) {
        s << "  " << probe.driver_note << "\n";
        return s.str();
    }
    s << "  driver          " << probe.driver_version / 1000 << "." << (probe.driver_version % 1000) / 10
      << " (" << probe.driver_version << ")\n";
    s << "  devices         " << probe.devices.size() << "\n";
    for (const GpuInfo& d : probe.devices) {
        s << "  cuda:" << d.ordinal << "          " << d.name << "\n";
        s << "    arch          " << d.arch_name() << " (compute capability " << d.cc_major << "." << d.cc_minor
          << ")\n";
        s << "    SMs           " << d.sm_count << " at " << d.clock_khz / 1000 << " MHz\n";
        s << "    shared mem    " << mib(d.smem_per_block_optin) << " per block (opt-in), " << mib(d.smem_per_sm)
          << " per SM\n";
        s << "    L2            " << mib(d.l2_bytes) << "\n";
        s << "    memory        " << mib(d.global_mem_bytes) << ", " << d.mem_bus_width_bits << "-bit bus at "
          << d.mem_clock_khz / 1000 << " MHz\n";
    }
    if (!probe.driver_note.empty()) s << "  note            " << probe.driver_note << "\n";
    return s.str();
}

std::string gpu_report_json(const GpuProbe& probe) {
    std::ostringstream s;
    s << "{\"driver_loaded\": " << (probe.driver_loaded ? "true" : "false")
      << ", \"driver_note\": " << json_string(probe.driver_note) << ", \"driver_version\": " << probe.driver_version
      << ", \"devices\": [";
    for (size_t i = 0; i < probe.devices.size(); ++i) {
        const GpuInfo& d = probe.devices[i];
        s << (i ? ", " : "") << "{\"ordinal\": " << d.ordinal << ", \"name\": " << json_string(d.name)
          << ", \"arch\": " << json_string(d.arch_name()) << ", \"cc_major\": " << d.cc_major
          << ", \"cc_minor\": " << d.cc_minor << ", \"sm_count\": " << d.sm_count
          << ", \"smem_per_block_optin\": " << d.smem_per_block_optin << ", \"smem_per_sm\": " << d.smem_per_sm
          << ", \"l2_bytes\": " << d.l2_bytes << ", \"global_mem_bytes\": " << d.global_mem_bytes
          << ", \"clock_khz\": " << d.clock_khz << ", \"mem_clock_khz\": " << d.mem_clock_khz
          << ", \"mem_bus_width_bits\": " << d.mem_bus_width_bits << "}";
    }
    s << "]}";
    return s.str();
}

}  // namespace jitmm::hw
