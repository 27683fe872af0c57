// Packed panels shared by the tasks of one call: each panel is packed by the first task that needs it and read
// by the others, so that tasks which use the same rows of A (a 1-D split over N: all of them) do not each pack
// them. A task only ever waits on a copy in progress (claimed by a task that is running it and waits on
// nothing), never on a task that has not started, so it cannot deadlock however the tasks are run (a pool, a
// framework's parallel_for, one after another). The copy is the same whoever makes it: results do not depend
// on which task packed what.
#pragma once

#include <atomic>
#include <cstdint>

namespace jitmm::x86 {

class SharedPanels {
public:
    // `count` panels of `panel_floats` floats (a multiple of 16: panels start on cache lines), all unclaimed,
    // in the calling thread's scratch (kept for the thread's lifetime, reused by its next call).
    SharedPanels(int64_t count, int64_t panel_floats);

    // Panel `index`, packed by pack(float* panel) here unless another task has packed it or is packing it
    // (then this waits for that copy to finish).
    template <typename Pack>
    const float* get(int64_t index, Pack&& pack) const {
        float* panel = panels_ + index * panel_floats_;
        uint8_t state = state_[index].load(std::memory_order_acquire);
        if (state == kReady) return panel;
        if (state == kFree && state_[index].compare_exchange_strong(state, kClaimed, std::memory_order_acq_rel)) {
            pack(panel);
            state_[index].store(kReady, std::memory_order_release);
            return panel;
        }
        wait_ready(index);
        return panel;
    }

    // Whether someone has packed panel `index` or is packing it (a hint: for prefetching the panel or its source).
    bool claimed(int64_t index) const { return state_[index].load(std::memory_order_relaxed) != kFree; }
    const float* panel(int64_t index) const { return panels_ + index * panel_floats_; }

private:
    static constexpr uint8_t kFree = 0, kClaimed = 1, kReady = 2;
    void wait_ready(int64_t index) const;

    float* panels_ = nullptr;
    std::atomic<uint8_t>* state_ = nullptr;
    int64_t panel_floats_ = 0;
};

}  // namespace jitmm::x86
