// The C boundary's error handling: the thread's last-error message, and guarded() which runs C++ code and
// turns whatever it throws into a jitmm_status. Every exported function body runs inside guarded().
#pragma once

#include "core/error.hpp"

#include <jitmm/jitmm.h>

#include <new>
#include <string>

namespace jitmm::api {

jitmm_status record_error(jitmm_status status, const std::string& message);
const char* last_error_message();

template <typename Body>
jitmm_status guarded(Body&& body) noexcept {
    try {
        body();
        return JITMM_STATUS_SUCCESS;
    } catch (const Error& e) {
        return record_error(e.status(), e.what());
    } catch (const std::bad_alloc&) {
        return record_error(JITMM_STATUS_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        return record_error(JITMM_STATUS_INTERNAL_ERROR, std::string("internal error: ") + e.what());
    } catch (...) {
        return record_error(JITMM_STATUS_INTERNAL_ERROR, "internal error: unknown exception");
    }
}

}  // namespace jitmm::api
