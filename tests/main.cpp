// The Catch2 test runner's entry point (every other test file only defines test cases).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
