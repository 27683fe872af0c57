// The command line of jitmm-bench.
#pragma once

#include "core/shape_csv.hpp"
#include "timing.hpp"

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace jitmm::bench {

struct Options {
    std::vector<ShapeRow> shapes;
    std::string device = "cpu";
    int32_t threads = 0;  // 0: the engine's default (JITMM_NUM_THREADS or physical cores)
    TimingPolicy timing;
    bool check = false;
    bool json = false;
    bool peak = false;               // --peak: measure the FMA peak and exit
    bool tune = false;               // --tune: jitmm_tune each shape first (the winner goes to the tuning store)
    std::vector<std::string> peers;  // registered names, in registry order, no duplicates
};

class UsageError : public std::exception {
public:
    explicit UsageError(std::string message) : message_(std::move(message)) {}
    const char* what() const noexcept override { return message_.c_str(); }

private:
    std::string message_;
};

// Throws UsageError; prints the usage and exits 0 on --help.
Options parse_args(int argc, char** argv);

}  // namespace jitmm::bench
