#include "x86/shared_panels.hpp"

#include "x86/huge_scratch.hpp"

#include <memory>
#include <thread>

namespace jitmm::x86 {

SharedPanels::SharedPanels(int64_t count, int64_t panel_floats) : panel_floats_(panel_floats) {
    thread_local HugeScratch floats;  // (page aligned, huge pages where they pay)
    thread_local std::unique_ptr<std::atomic<uint8_t>[]> states;
    thread_local size_t state_count = 0;
    panels_ = reinterpret_cast<float*>(floats.get(static_cast<size_t>(count * panel_floats) * sizeof(float)));
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
