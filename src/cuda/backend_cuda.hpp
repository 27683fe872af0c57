// The CUDA backend: a device found through the driver. Kernel generation for it is the CUDA backend issue's
// work; until then every problem is reported as unsupported, honestly and without touching the GPU.
#pragma once

#include "core/backend.hpp"
#include "core/engine.hpp"

#include <memory>

namespace jitmm::cuda {

// Throws jitmm::Error(JITMM_STATUS_NO_DEVICE) when there is no driver or no such device.
std::unique_ptr<Backend> make_cuda_backend(const EngineOptions& options);

}  // namespace jitmm::cuda
