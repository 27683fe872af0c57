// The x86 CPU backend: plans and generates kernels for the probed CPU, capped at the configured ISA tier.
#pragma once

#include "core/backend.hpp"
#include "core/engine.hpp"

#include <memory>

namespace jitmm::x86 {

std::unique_ptr<Backend> make_x86_backend(const EngineOptions& options);

}  // namespace jitmm::x86
