// The Catch2 test runner's entry point (every other test file only defines test cases). A run that passed but
// skipped something (WARN_SKIPPED) exits with kSkippedExitCode for ctest; failures keep a failing code.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "skip.hpp"

int main(int argc, char* argv[]) {
    const int result = Catch::Session().run(argc, argv);
    if (result != 0) return result == jitmm_test::kSkippedExitCode ? jitmm_test::kSkippedExitCode + 1 : result;
    return jitmm_test::skipped_flag() ? jitmm_test::kSkippedExitCode : 0;
}
