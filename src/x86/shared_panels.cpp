#include "x86/shared_panels.hpp"

#include <memory>
#include <thread>
#include <vector>

namespace jitmm::x86 {

SharedPanels::SharedPanels(int64_t count, int64_t panel_floats) : panel_floats_(panel_floats) {
    constexpr size_t kLineFloats = 16;
    thread_local std::vector<float> floats;
    thread_local std::unique_ptr<std::atomic<uint8_t>[]> states;
    thread_local size_t state_count = 0;
    const size_t need = static_cast<size_t>(count * panel_floats) + kLineFloats;
    if (floats.size() < need) floats.resize(need);
    const uintptr_t address = reinterpret_cast<uintptr_t>(floats.data());
    panels_ = floats.data() + ((64 - address % 64) % 64) / sizeof(float);
    if (state_count < static_cast<size_t>(count)) {
        states = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(count));
        state_count = static_cast<size_t>(count);
    }
    state_ = states.get();
    // Published to the tasks by the fan-out that starts them.
    for (int64_t i = 0; i < count; ++i) state_[i].store(kFree, std::memory_order_relaxed);
}

void SharedPanels::wait_ready(int64_t index) const {
    // A copy of one panel takes microseconds; yield only if the packing thread seems to have been descheduled.
    for (int spin = 0; state_[index].load(std::memory_order_acquire) != kReady; ++spin) {
        if (spin < 4096) __builtin_ia32_pause();
        else std::this_thread::yield();
    }
}

}  // namespace jitmm::x86
