// The CUDA driver, reached only through a function table: libcuda.so.1 is dlopen'd on first use, so jitmm
// links and runs on machines without a GPU, and the driver's entry points are bound by cuGetProcAddress at
// one pinned ABI version (plain dlsym would bind the oldest _v1 ABIs of versioned functions).
#pragma once

#include "core/error.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

// The table's members are named like the driver functions, and cuda.h maps several of those names through
// macros (cuMemAlloc -> cuMemAlloc_v2, ...). That is harmless while every file sees the same macros; the
// per-thread-stream variants would change the names in one file only, so they are refused here.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "jitmm binds the legacy-stream driver entry points: do not define CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

namespace jitmm::cuda {

// Every entry is requested at this CUDA version and typed with the cudaTypedefs.h PFN variant that was
// current at 12.0, so the pointer's type and the ABI the driver hands back always agree, whatever the
// toolkit headers or the installed driver are (e.g. a 13.x driver would hand out cuCtxSynchronize_v2,
// which takes a context, if asked at 13000).
constexpr int kDriverAbiVersion = 12000;

// X(name, pfn-version, required). required entries are the ones the probe needs: without them the
// driver counts as unavailable. The others are left null when the driver lacks them; use entry() to call
// them with a clear error.
#define JITMM_CUDA_DRIVER_ENTRIES(X)                          \
    X(cuInit, v2000, true)                                    \
    X(cuDriverGetVersion, v2020, true)                        \
    X(cuDeviceGetCount, v2000, true)                          \
    X(cuDeviceGet, v2000, true)                               \
    X(cuDeviceGetName, v2000, true)                           \
    X(cuDeviceGetAttribute, v2000, true)                      \
    X(cuDeviceTotalMem, v3020, true)                          \
    X(cuGetErrorName, v6000, true)                            \
    X(cuGetErrorString, v6000, true)                          \
    X(cuDevicePrimaryCtxRetain, v7000, false)                 \
    X(cuDevicePrimaryCtxRelease, v11000, false)               \
    X(cuCtxPushCurrent, v4000, false)                         \
    X(cuCtxPopCurrent, v4000, false)                          \
    X(cuCtxSynchronize, v2000, false)                         \
    X(cuModuleLoadData, v2000, false)                         \
    X(cuModuleUnload, v2000, false)                           \
    X(cuModuleGetFunction, v2000, false)                      \
    X(cuFuncSetAttribute, v9000, false)                       \
    X(cuLaunchKernel, v4000, false)                           \
    X(cuLaunchKernelEx, v11060, false)                        \
    X(cuMemAlloc, v3020, false)                               \
    X(cuMemFree, v3020, false)                                \
    X(cuMemAllocAsync, v11020, false)                         \
    X(cuMemFreeAsync, v11020, false)                          \
    X(cuMemPoolCreate, v11020, false)                         \
    X(cuMemPoolDestroy, v11020, false)                        \
    X(cuMemPoolSetAttribute, v11020, false)                   \
    X(cuMemAllocFromPoolAsync, v11020, false)                 \
    X(cuMemcpyHtoD, v3020, false)                             \
    X(cuMemcpyDtoH, v3020, false)                             \
    X(cuMemsetD8, v3020, false)                               \
    X(cuMemsetD32Async, v3020, false)                         \
    X(cuStreamCreate, v2000, false)                           \
    X(cuStreamDestroy, v4000, false)                          \
    X(cuStreamSynchronize, v2000, false)                      \
    X(cuEventCreate, v2000, false)                            \
    X(cuEventRecord, v2000, false)                            \
    X(cuEventSynchronize, v2000, false)                       \
    X(cuEventElapsedTime, v2000, false)                       \
    X(cuEventDestroy, v4000, false)                           \
    X(cuTensorMapEncodeTiled, v12000, false)                  \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, v6050, false) \
    X(cuOccupancyMaxActiveClusters, v11070, false)

struct DriverApi {
#define JITMM_CUDA_DECLARE_ENTRY(name, ver, required) PFN_##name##_##ver name = nullptr;
    JITMM_CUDA_DRIVER_ENTRIES(JITMM_CUDA_DECLARE_ENTRY)
#undef JITMM_CUDA_DECLARE_ENTRY

    int driver_version = 0;      // cuDriverGetVersion, e.g. 13000
    std::string missing_entries; // optional entries this driver lacks, space separated ("" when none)
};

// The loaded, initialised (cuInit(0) succeeded) driver, or nullptr when there is none. Loaded once,
// thread-safe; never throws.
const DriverApi* driver();
// Why driver() is nullptr ("" when it is not), e.g. "no CUDA driver: libcuda.so.1 not found (dlopen: ...)".
const std::string& driver_unavailable_reason();

// The driver, or throws jitmm::Error(JITMM_STATUS_NO_DEVICE, driver_unavailable_reason()).
const DriverApi& driver_or_throw();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or "CUresult 2" when the driver cannot name it.
std::string result_text(CUresult r);

// Throws jitmm::Error("<what>: CUDA_ERROR_xxx (text)") unless r is CUDA_SUCCESS. The status is
// JITMM_STATUS_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY, else JITMM_STATUS_DEVICE_ERROR.
void check(CUresult r, const char* what);

// Throws jitmm::Error(JITMM_STATUS_UNSUPPORTED): this driver lacks the entry point `name`.
[[noreturn]] void throw_missing_entry(const char* name);

// An optional entry point, or throws (throw_missing_entry) when the driver lacks it:
//   check(entry(drv.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled")(...), "cuTensorMapEncodeTiled");
template <typename Fn>
Fn entry(Fn fn, const char* name) {
    if (fn == nullptr) throw_missing_entry(name);
    return fn;
}

}  // namespace jitmm::cuda
