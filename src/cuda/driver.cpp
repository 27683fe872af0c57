#include "cuda/driver.hpp"

#include <dlfcn.h>

#include <string>

namespace jitmm::cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

struct LoadedDriver {
    DriverApi api;       // filled as far as loading got, so result_text can name errors even after a failed cuInit
    bool usable = false; // every required entry bound and cuInit(0) succeeded
    std::string reason;  // why not usable
};

std::string name_result(const DriverApi& api, CUresult r) {
    const char* name = nullptr;
    const char* text = nullptr;
    if (api.cuGetErrorName != nullptr && api.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
    if (api.cuGetErrorString != nullptr && api.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    std::string out = name != nullptr ? std::string(name) : "CUresult " + std::to_string(static_cast<int>(r));
    if (text != nullptr) out += std::string(" (") + text + ")";
    return out;
}

LoadedDriver load_driver() {
    LoadedDriver out;
    dlerror();  // clear any stale message so the one we report is ours
    // Never dlclose'd: the driver keeps threads and state that must outlive every CUDA object we hand out.
    void* lib = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char* err = dlerror();
        out.reason = std::string("no CUDA driver: ") + kDriverLibrary + " not found (dlopen: " +
                     (err != nullptr ? err : "unknown error") + ")";
        return out;
    }

    // cuGetProcAddress_v2 (CUDA 12.0+) reports a status per symbol; the 11.3 form has no status argument.
    // Either binds the versioned ABI we ask for, unlike dlsym, which finds the unversioned _v1 symbols.
    auto get_proc_v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
    auto get_proc_v1 = get_proc_v2 != nullptr
                           ? nullptr
                           : reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(lib, "cuGetProcAddress"));
    if (get_proc_v2 == nullptr && get_proc_v1 == nullptr) {
        out.reason = std::string("CUDA driver too old: ") + kDriverLibrary +
                     " has no cuGetProcAddress (needs a CUDA 12 driver)";
        return out;
    }
    auto lookup = [&](const char* symbol) -> void* {
        void* fn = nullptr;
        CUresult r;
        if (get_proc_v2 != nullptr) {
            CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
            r = get_proc_v2(symbol, &fn, kDriverAbiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
            if (status != CU_GET_PROC_ADDRESS_SUCCESS) fn = nullptr;
        } else {
            r = get_proc_v1(symbol, &fn, kDriverAbiVersion, CU_GET_PROC_ADDRESS_DEFAULT);
        }
        return r == CUDA_SUCCESS ? fn : nullptr;
    };

    DriverApi& api = out.api;
    std::string missing_required;
    // #name is the base name the driver expects ("cuMemAlloc"), not cuda.h's macro target (cuMemAlloc_v2).
#define JITMM_CUDA_BIND_ENTRY(name, ver, required)                                   \
    api.name = reinterpret_cast<PFN_##name##_##ver>(lookup(#name));                 \
    if (api.name == nullptr) {                                                       \
        std::string& list = (required) ? missing_required : api.missing_entries;     \
        list += list.empty() ? #name : " " #name;                                    \
    }
    JITMM_CUDA_DRIVER_ENTRIES(JITMM_CUDA_BIND_ENTRY)
#undef JITMM_CUDA_BIND_ENTRY

    if (!missing_required.empty()) {
        out.reason = std::string("CUDA driver unusable: ") + kDriverLibrary + " lacks " + missing_required;
        return out;
    }
    const CUresult init = api.cuInit(0);
    if (init != CUDA_SUCCESS) {
        out.reason = "CUDA driver found but cuInit failed: " + name_result(api, init);
        return out;
    }
    if (api.cuDriverGetVersion(&api.driver_version) != CUDA_SUCCESS) api.driver_version = 0;
    out.usable = true;
    return out;
}

const LoadedDriver& loaded_driver() {
    static const LoadedDriver loaded = load_driver();  // C++11 statics: loaded once, thread-safe
    return loaded;
}

}  // namespace

const DriverApi* driver() {
    const LoadedDriver& d = loaded_driver();
    return d.usable ? &d.api : nullptr;
}

const std::string& driver_unavailable_reason() { return loaded_driver().reason; }

const DriverApi& driver_or_throw() {
    const LoadedDriver& d = loaded_driver();
    if (!d.usable) fail(JITMM_STATUS_NO_DEVICE, d.reason);
    return d.api;
}

std::string result_text(CUresult r) { return name_result(loaded_driver().api, r); }

void check(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    const jitmm_status status =
        r == CUDA_ERROR_OUT_OF_MEMORY ? JITMM_STATUS_OUT_OF_MEMORY : JITMM_STATUS_DEVICE_ERROR;
    fail(status, std::string(what) + ": " + result_text(r));
}

void throw_missing_entry(const char* name) {
    const LoadedDriver& d = loaded_driver();
    if (!d.usable) fail(JITMM_STATUS_NO_DEVICE, d.reason);
    fail(JITMM_STATUS_UNSUPPORTED, std::string("the CUDA driver (version ") +
                                       std::to_string(d.api.driver_version) + ") lacks " + name +
                                       "; a newer driver is needed");
}

}  // namespace jitmm::cuda
