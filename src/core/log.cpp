#include "core/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace jitmm {

bool verbose_enabled() {
    static const bool enabled = [] {
        const char* v = std::getenv("JITMM_VERBOSE");
        return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
    }();
    return enabled;
}

void verbose_log(const std::string& line) {
    if (!verbose_enabled()) return;
    static std::mutex mutex;  // keep lines from different threads whole
    std::lock_guard<std::mutex> lock(mutex);
    std::fprintf(stderr, "jitmm: %s\n", line.c_str());
}

}  // namespace jitmm
