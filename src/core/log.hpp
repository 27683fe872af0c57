// Verbose logging: one line to stderr per event, only when JITMM_VERBOSE is set to a non-zero value.
#pragma once

#include <string>

namespace jitmm {

bool verbose_enabled();
void verbose_log(const std::string& line);  // prefixes "jitmm: " and appends a newline

}  // namespace jitmm
