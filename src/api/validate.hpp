// Validation of what callers pass through the C API. Each check throws jitmm::Error with a specific status
// and a message naming the field; nothing past this point sees an invalid value.
#pragma once

#include "core/kernel.hpp"
#include "core/problem.hpp"

#include <jitmm/jitmm.h>

namespace jitmm::api {

Problem problem_from_desc(const jitmm_matmul_desc* desc);
// Checks args against p and returns what the kernel runs with.
RunArgs check_args(const Problem& p, const jitmm_matmul_args* args);
void check_config(const jitmm_engine_config* config);  // NULL is valid (defaults)

}  // namespace jitmm::api
