// Tests, or parts of tests, that this machine cannot run (no GPU, a missing ISA tier, not root) say so with
// WARN_SKIPPED(message): the message is shown, and a run whose assertions all passed exits with
// kSkippedExitCode, which ctest reports as skipped (SKIP_RETURN_CODE, tests/CMakeLists.txt). A failed assertion
// still fails the run: a skip message in the output must never hide a failure (ctest's output-matching skip did).
#pragma once

#include <catch2/catch.hpp>

#include <atomic>

namespace jitmm_test {

constexpr int kSkippedExitCode = 4;

inline std::atomic<bool>& skipped_flag() {
    static std::atomic<bool> skipped{false};
    return skipped;
}

inline void mark_skipped() { skipped_flag() = true; }

}  // namespace jitmm_test

#define WARN_SKIPPED(msg)                   \
    do {                                    \
        WARN("SKIPPED: " << msg);           \
        ::jitmm_test::mark_skipped();       \
    } while (false)
