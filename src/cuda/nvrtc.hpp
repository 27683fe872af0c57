// NVRTC, reached only through a function table: libnvrtc is dlopen'd on first use (CUDA 13, then 12, then the
// unversioned name; from the loader's path, $CUDA_HOME/lib64 and the build's toolkit), so jitmm links and
// runs where no toolkit is installed and says why it cannot compile there.
#pragma once

#include <nvrtc.h>

#include <cstdint>
#include <string>
#include <vector>

namespace jitmm::cuda {

struct NvrtcApi {
    decltype(&::nvrtcVersion) nvrtcVersion = nullptr;
    decltype(&::nvrtcGetErrorString) nvrtcGetErrorString = nullptr;
    decltype(&::nvrtcCreateProgram) nvrtcCreateProgram = nullptr;
    decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram = nullptr;
    decltype(&::nvrtcCompileProgram) nvrtcCompileProgram = nullptr;
    decltype(&::nvrtcGetCUBINSize) nvrtcGetCUBINSize = nullptr;
    decltype(&::nvrtcGetCUBIN) nvrtcGetCUBIN = nullptr;
    decltype(&::nvrtcGetPTXSize) nvrtcGetPTXSize = nullptr;
    decltype(&::nvrtcGetPTX) nvrtcGetPTX = nullptr;
    decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize = nullptr;
    decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog = nullptr;

    int version = 0;          // major * 1000 + minor * 10, like the driver's numbers (13000 for 13.0)
    std::string library;      // the file that was loaded
    std::string toolkit_dir;  // where the CUDA headers for -I were found ("" when none)
};

// The loaded NVRTC, or nullptr when there is none. Loaded once, thread-safe; never throws.
const NvrtcApi* nvrtc();
// Why nvrtc() is nullptr ("" when it is not).
const std::string& nvrtc_unavailable_reason();
// NVRTC, or throws jitmm::Error(JITMM_STATUS_JIT_FAILED, nvrtc_unavailable_reason()).
const NvrtcApi& nvrtc_or_throw();

struct CompileResult {
    std::vector<uint8_t> cubin;
    std::string ptx;          // only when asked for (want_ptx)
    std::string log;          // NVRTC's log (warnings, ptxas -v output when requested)
    double compile_ms = 0;
};

// Compiles one translation unit to a cubin for arch ("sm_80", "sm_90a", "sm_100a"). Options always given:
// --gpu-architecture=<arch>, -std=c++17, -I<toolkit>/include (and /include/cccl when present).
// Throws jitmm::Error(JITMM_STATUS_JIT_FAILED) with the NVRTC log on failure.
CompileResult compile_to_cubin(const std::string& source, const std::string& name, const std::string& arch,
                               const std::vector<std::string>& extra_options = {}, bool want_ptx = false);

}  // namespace jitmm::cuda
