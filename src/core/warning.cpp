#include "core/warning.hpp"

#include "core/log.hpp"

#include <cstdio>
#include <mutex>
#include <set>

namespace jitmm {

void warn_once(const std::string& id, const std::string& message) {
    static std::mutex mutex;
    static std::set<std::string>* seen = new std::set<std::string>;  // leaked: usable during static destruction
    {
        std::lock_guard<std::mutex> lock(mutex);
        if (seen->insert(id).second) {
            std::fprintf(stderr, "jitmm: warning: %s\n", message.c_str());
            return;
        }
    }
    verbose_log("warning: " + message);
}

}  // namespace jitmm
