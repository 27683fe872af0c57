// Warnings that reach stderr even without JITMM_VERBOSE, printed once per process each. Kept for the few
// events a user must hear about because the library silently degrades otherwise: a disk cache folder
// refused as unsafe (a shared writable cache is a code-injection path), a cache that cannot be written
// (disk full, read-only), or a JITMM_RECORD file that cannot be opened. Everything else goes to verbose_log.
#pragma once

#include <string>

namespace jitmm {

// Prints "jitmm: warning: <message>" to stderr the first time this process sees id; later calls with the
// same id only go to verbose_log. Thread-safe.
void warn_once(const std::string& id, const std::string& message);

}  // namespace jitmm
