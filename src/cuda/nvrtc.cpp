#include "cuda/nvrtc.hpp"

#include "core/error.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#ifndef JITMM_CUDA_TOOLKIT_DIR
#define JITMM_CUDA_TOOLKIT_DIR "/usr/local/cuda"
#endif

namespace jitmm::cuda {
namespace {

// Newest first: a 13.x NVRTC compiles for every arch a 12.x one does, and more.
constexpr const char* kLibraryNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

struct LoadedNvrtc {
    NvrtcApi api;
    bool usable = false;
    std::string reason;
};

bool is_dir(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Toolkit roots in the order we trust them: the user's CUDA_HOME, then the toolkit this build saw.
std::vector<std::string> toolkit_roots() {
    std::vector<std::string> roots;
    if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') roots.push_back(home);
    if (const char* path = std::getenv("CUDA_PATH"); path != nullptr && *path != '\0') roots.push_back(path);
    roots.push_back(JITMM_CUDA_TOOLKIT_DIR);
    return roots;
}

// Bare names go through the loader's own search (LD_LIBRARY_PATH, ld.so.cache); then the toolkit folders.
std::vector<std::string> candidate_paths() {
    std::vector<std::string> paths;
    for (const char* name : kLibraryNames) paths.push_back(name);
    for (const std::string& root : toolkit_roots())
        for (const char* name : kLibraryNames) {
            paths.push_back(root + "/lib64/" + name);
            paths.push_back(root + "/lib/" + name);
        }
    return paths;
}

std::string find_toolkit_include(const std::string& library_path) {
    std::vector<std::string> roots = toolkit_roots();
    // A library loaded from <root>/lib64 names its own toolkit first.
    const size_t slash = library_path.rfind('/');
    if (slash != std::string::npos) roots.insert(roots.begin(), library_path.substr(0, slash) + "/..");
    for (const std::string& root : roots)
        if (is_dir(root + "/include")) return root;
    return "";
}

LoadedNvrtc load_nvrtc() {
    LoadedNvrtc out;
    void* lib = nullptr;
    std::string tried;
    for (const std::string& path : candidate_paths()) {
        dlerror();
        // Never dlclose'd: programs and their builtins library stay valid for the process.
        lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (lib != nullptr) {
            out.api.library = path;
            break;
        }
        if (tried.empty()) {
            const char* err = dlerror();
            tried = err != nullptr ? err : "unknown error";
        }
    }
    if (lib == nullptr) {
        out.reason = "no NVRTC: libnvrtc.so.13 / .so.12 not found (set CUDA_HOME or LD_LIBRARY_PATH; dlopen: " +
                     tried + ")";
        return out;
    }

    NvrtcApi& api = out.api;
    std::string missing;
#define JITMM_NVRTC_BIND(name)                                                   \
    api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, #name));           \
    if (api.name == nullptr) missing += missing.empty() ? #name : " " #name;
    JITMM_NVRTC_BIND(nvrtcVersion)
    JITMM_NVRTC_BIND(nvrtcGetErrorString)
    JITMM_NVRTC_BIND(nvrtcCreateProgram)
    JITMM_NVRTC_BIND(nvrtcDestroyProgram)
    JITMM_NVRTC_BIND(nvrtcCompileProgram)
    JITMM_NVRTC_BIND(nvrtcGetCUBINSize)
    JITMM_NVRTC_BIND(nvrtcGetCUBIN)
    JITMM_NVRTC_BIND(nvrtcGetPTXSize)
    JITMM_NVRTC_BIND(nvrtcGetPTX)
    JITMM_NVRTC_BIND(nvrtcGetProgramLogSize)
    JITMM_NVRTC_BIND(nvrtcGetProgramLog)
#undef JITMM_NVRTC_BIND
    if (!missing.empty()) {
        out.reason = "NVRTC unusable: " + api.library + " lacks " + missing + " (needs CUDA 12 or newer)";
        return out;
    }
    int major = 0, minor = 0;
    if (api.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
        out.reason = "NVRTC unusable: nvrtcVersion failed in " + api.library;
        return out;
    }
    api.version = major * 1000 + minor * 10;
    api.toolkit_dir = find_toolkit_include(api.library);
    out.usable = true;
    return out;
}

const LoadedNvrtc& loaded_nvrtc() {
    static const LoadedNvrtc loaded = load_nvrtc();  // C++11 statics: loaded once, thread-safe
    return loaded;
}

// Destroys the program on every way out of compile_to_cubin.
struct ProgramGuard {
    const NvrtcApi& api;
    nvrtcProgram program = nullptr;
    ~ProgramGuard() {
        if (program != nullptr) api.nvrtcDestroyProgram(&program);
    }
};

std::string program_log(const NvrtcApi& api, nvrtcProgram program) {
    size_t size = 0;
    if (api.nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
    std::string log(size, '\0');
    if (api.nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    return log;
}

void check(const NvrtcApi& api, nvrtcResult r, const char* what) {
    if (r != NVRTC_SUCCESS) fail(JITMM_STATUS_JIT_FAILED, std::string(what) + ": " + api.nvrtcGetErrorString(r));
}

}  // namespace

const NvrtcApi* nvrtc() {
    const LoadedNvrtc& n = loaded_nvrtc();
    return n.usable ? &n.api : nullptr;
}

const std::string& nvrtc_unavailable_reason() { return loaded_nvrtc().reason; }

const NvrtcApi& nvrtc_or_throw() {
    const LoadedNvrtc& n = loaded_nvrtc();
    if (!n.usable) fail(JITMM_STATUS_JIT_FAILED, n.reason);
    return n.api;
}

CompileResult compile_to_cubin(const std::string& source, const std::string& name, const std::string& arch,
                               const std::vector<std::string>& extra_options, bool want_ptx) {
    const NvrtcApi& api = nvrtc_or_throw();
    const auto started = std::chrono::steady_clock::now();

    ProgramGuard guard{api};
    check(api, api.nvrtcCreateProgram(&guard.program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr),
          "nvrtcCreateProgram");

    std::vector<std::string> options = {"--gpu-architecture=" + arch, "-std=c++17"};
    if (!api.toolkit_dir.empty()) {
        options.push_back("-I" + api.toolkit_dir + "/include");
        if (is_dir(api.toolkit_dir + "/include/cccl")) options.push_back("-I" + api.toolkit_dir + "/include/cccl");
    }
    options.insert(options.end(), extra_options.begin(), extra_options.end());
    std::vector<const char*> argv;
    for (const std::string& o : options) argv.push_back(o.c_str());

    const nvrtcResult compiled = api.nvrtcCompileProgram(guard.program, static_cast<int>(argv.size()), argv.data());
    CompileResult result;
    result.log = program_log(api, guard.program);
    if (compiled != NVRTC_SUCCESS) {
        std::string options_text;
        for (const std::string& o : options) options_text += " " + o;
        fail(JITMM_STATUS_JIT_FAILED, "NVRTC " + std::to_string(api.version / 1000) + "." +
                                          std::to_string(api.version % 1000 / 10) + " failed to compile " + name +
                                          " for " + arch + " (" + api.nvrtcGetErrorString(compiled) +
                                          "; options:" + options_text + "):\n" + result.log);
    }

    size_t cubin_size = 0;
    check(api, api.nvrtcGetCUBINSize(guard.program, &cubin_size), "nvrtcGetCUBINSize");
    if (cubin_size == 0)
        fail(JITMM_STATUS_JIT_FAILED, "NVRTC produced no cubin for " + arch + " (a virtual compute_XY arch?)");
    result.cubin.resize(cubin_size);
    check(api, api.nvrtcGetCUBIN(guard.program, reinterpret_cast<char*>(result.cubin.data())), "nvrtcGetCUBIN");
    if (want_ptx) {
        size_t ptx_size = 0;
        check(api, api.nvrtcGetPTXSize(guard.program, &ptx_size), "nvrtcGetPTXSize");
        result.ptx.assign(ptx_size, '\0');
        check(api, api.nvrtcGetPTX(guard.program, result.ptx.data()), "nvrtcGetPTX");
        while (!result.ptx.empty() && result.ptx.back() == '\0') result.ptx.pop_back();
    }
    result.compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    return result;
}

}  // namespace jitmm::cuda
