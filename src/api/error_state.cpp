#include "api/error_state.hpp"

#include "core/log.hpp"

namespace jitmm::api {

namespace {
thread_local std::string t_last_error;
}

jitmm_status record_error(jitmm_status status, const std::string& message) {
    try {
        t_last_error = message;
    } catch (...) {
        // Out of memory while recording: keep the status, lose the detail.
    }
    if (verbose_enabled()) verbose_log(std::string("error: ") + jitmm_status_string(status) + ": " + message);
    return status;
}

const char* last_error_message() { return t_last_error.c_str(); }

}  // namespace jitmm::api
