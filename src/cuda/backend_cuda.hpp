// The CUDA backend: plans with the SM80-family generator, compiles with NVRTC to a cubin for the exact arch,
// loads it into the device's primary context and launches it on the caller's stream.
#pragma once

#include "core/backend.hpp"
#include "core/engine.hpp"

#include <memory>
#include <string>

namespace jitmm::cuda {

// Throws jitmm::Error(JITMM_STATUS_NO_DEVICE) when there is no driver or no such device.
std::unique_ptr<Backend> make_cuda_backend(const EngineOptions& options);

// A backend for an arch named without a GPU ("sm_80", "sm_90a", "sm_100a"): its plans compile() cubins
// (to pre-build caches for a fleet) but load() throws JITMM_STATUS_NO_DEVICE. The SM count and shared
// memory the planner uses are the arch's flagship part (A100, H100, B200); the fingerprint says which.
std::unique_ptr<Backend> make_cuda_compile_only_backend(const std::string& arch);

}  // namespace jitmm::cuda
