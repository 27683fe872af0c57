#include "core/problem_memo.hpp"

#include "core/key.hpp"

#include <cstring>

namespace jitmm {

ProblemWords& ProblemWords::i64(char tag, int64_t v) {
    if (count + 2 <= kCapacity) {
        words[count++] = tag;
        words[count++] = v;
    } else {
        truncated = true;
    }
    hash = (hash ^ static_cast<uint64_t>(v) ^ (static_cast<uint64_t>(tag) << 56)) * 0x9E3779B97F4A7C15ull;
    hash ^= hash >> 29;
    return *this;
}

ProblemWords& ProblemWords::f32(char tag, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return i64(tag, bits);
}

bool ProblemWords::operator==(const ProblemWords& o) const {
    return count == o.count && hash == o.hash &&
           std::memcmp(words.data(), o.words.data(), sizeof(int64_t) * static_cast<size_t>(count)) == 0;
}

ProblemWords problem_words(const Problem& p) {
    ProblemWords w;
    append_problem(w, p);
    return w;
}

KernelPtr ProblemMemo::find(const ProblemWords& w) const {
    const Slot& slot = slots_[w.hash % kSlots];
    std::lock_guard<std::mutex> lock(mutex_);
    return slot.kernel && slot.words == w ? slot.kernel : nullptr;
}

void ProblemMemo::remember(const ProblemWords& w, const KernelPtr& kernel) {
    if (w.truncated) return;
    Slot& slot = slots_[w.hash % kSlots];
    std::lock_guard<std::mutex> lock(mutex_);
    slot.words = w;
    slot.kernel = kernel;
}

void ProblemMemo::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Slot& slot : slots_) slot = Slot{};
}

}  // namespace jitmm
