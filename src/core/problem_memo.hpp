// ProblemMemo: the engine's fast path for repeated requests. A small direct-mapped table from a problem's
// fields to the kernel made for it, consulted before planning, key building and hashing: a hit costs a short
// compare instead of the whole road. It holds at most kSlots kernels alive beyond the LRU's capacity.
#pragma once

#include "core/cache.hpp"
#include "core/problem.hpp"

#include <array>
#include <cstdint>
#include <mutex>

namespace jitmm {

// The fields append_problem() writes, as tagged words (the same template, so nothing can be left out).
struct ProblemWords {
    static constexpr int kCapacity = 48;
    std::array<int64_t, kCapacity> words{};
    int count = 0;
    bool truncated = false;  // more fields than kCapacity words: never memoized
    uint64_t hash = 0;

    ProblemWords& i64(char tag, int64_t v);
    ProblemWords& f32(char tag, float v);
    bool operator==(const ProblemWords& o) const;
};

ProblemWords problem_words(const Problem& p);

class ProblemMemo {
public:
    KernelPtr find(const ProblemWords& w) const;
    void remember(const ProblemWords& w, const KernelPtr& kernel);
    void clear();  // after tuning: problems may map to other kernels now

private:
    static constexpr size_t kSlots = 256;
    struct Slot {
        ProblemWords words;
        KernelPtr kernel;
    };
    mutable std::mutex mutex_;
    std::array<Slot, kSlots> slots_;
};

}  // namespace jitmm
