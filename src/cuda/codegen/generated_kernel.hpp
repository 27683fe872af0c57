// What a CUDA generator hands the backend: the source of one kernel and how to launch it.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

namespace jitmm::cuda {

struct GeneratedKernel {
    std::string name;       // the extern "C" __global__ function
    std::string source;     // one self-contained translation unit
    int64_t grid[3] = {1, 1, 1};
    int64_t block = 128;
    int64_t smem_bytes = 0; // dynamic shared memory per CTA
    // The kernel's first instruction on sm_90 and later is griddepcontrol.wait (emit_grid_dependency_wait):
    // it may be launched before the previous kernel on the stream has ended (programmatic stream
    // serialization), its CTAs placed as that kernel's retire, and touches memory only once that kernel is done.
    bool waits_for_previous_grid = false;
};

// Emits the kernel-entry lines that make a kernel safe to launch early (see waits_for_previous_grid): wait
// for the previous grid's completion and memory, then let the next kernel be placed. sm_90 and later only;
// the same source compiled for an older arch has neither (and is then never launched early).
inline void emit_grid_dependency_wait(std::ostringstream& os) {
    os << R"(#if __CUDA_ARCH__ >= 900
  // Placed before the previous kernel on the stream has ended: touch no memory until it has, then let the next
  // kernel be placed as this one's CTAs retire (hides the launch gap of kernels run back to back).
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
)";
}

}  // namespace jitmm::cuda
