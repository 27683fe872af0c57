// Internal errors. Code below the C API throws jitmm::Error; src/api turns it (and any other exception)
// into a jitmm_status plus the thread's last-error message. Nothing is thrown across the C boundary.
#pragma once

#include <jitmm/jitmm.h>

#include <exception>
#include <string>

namespace jitmm {

class Error : public std::exception {
public:
    Error(jitmm_status status, std::string message) : status_(status), message_(std::move(message)) {}
    jitmm_status status() const noexcept { return status_; }
    const char* what() const noexcept override { return message_.c_str(); }

private:
    jitmm_status status_;
    std::string message_;
};

[[noreturn]] inline void fail(jitmm_status status, std::string message) { throw Error(status, std::move(message)); }

}  // namespace jitmm
