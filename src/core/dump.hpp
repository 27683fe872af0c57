// JITMM_DUMP_DIR: generated artifacts (x86 code bytes, CUDA source and cubin) written out for inspection,
// named by the kernel key. Best effort: a failure to write is logged under JITMM_VERBOSE, never an error.
#pragma once

#include "core/key.hpp"

#include <cstddef>
#include <string>

namespace jitmm {

bool dump_enabled();
// Writes <JITMM_DUMP_DIR>/<key hex>.<suffix>.
void dump_artifact(const KernelKey& key, const std::string& suffix, const void* data, size_t size);

}  // namespace jitmm
