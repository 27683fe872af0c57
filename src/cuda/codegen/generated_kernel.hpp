// What a CUDA generator hands the backend: the source of one kernel and how to launch it.
#pragma once

#include <cstdint>
#include <string>

namespace jitmm::cuda {

struct GeneratedKernel {
    std::string name;       // the extern "C" __global__ function
    std::string source;     // one self-contained translation unit
    int64_t grid[3] = {1, 1, 1};
    int64_t block = 128;
    int64_t smem_bytes = 0; // dynamic shared memory per CTA
};

}  // namespace jitmm::cuda
