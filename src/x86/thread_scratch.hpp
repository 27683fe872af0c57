// Per-thread scratch floats for the kernels' drivers: grown on demand, kept for the thread's lifetime (a run's
// next call reuses it), and 64-byte aligned, so that rows of whole vectors start on cache lines (a large
// std::vector's data sits 16 bytes past a page boundary, and a vector load across two lines costs two).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace jitmm::x86 {

// At least `floats` floats of the calling thread's buffer for (Owner, Slot). Each pair has a buffer of its own:
// a kernel that runs another inside it (C computed transposed around the swapped problem's kernel), or one that
// holds two buffers at once, must not be handed the same memory twice.
template <typename Owner, int Slot = 0>
float* thread_scratch(size_t floats) {
    constexpr size_t kLineFloats = 16;
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats + kLineFloats) buffer.resize(floats + kLineFloats);
    const auto address = reinterpret_cast<uintptr_t>(buffer.data());
    return buffer.data() + ((64 - address % 64) % 64) / sizeof(float);
}

}  // namespace jitmm::x86
