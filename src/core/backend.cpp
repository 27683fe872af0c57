#include "core/backend.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace jitmm {

// Host clock around each (synchronous) run: right for the CPU backends; devices that run asynchronously
// override it.
double Backend::time_runs(const Kernel& kernel, const RunArgs& args, int runs) const {
    kernel.run(args);  // warm: caches, pages, thread pool
    std::vector<double> us;
    for (int i = 0; i < std::max(1, runs); ++i) {
        const auto start = std::chrono::steady_clock::now();
        kernel.run(args);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    return us[us.size() / 2];
}

}  // namespace jitmm
