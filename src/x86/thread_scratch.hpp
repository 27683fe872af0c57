// Per-thread scratch floats for the kernels' drivers: grown on demand (growing discards the contents), kept for
// the thread's lifetime (a run's next call reuses it), page aligned and in huge pages where they pay
// (huge_scratch.hpp), so that rows of whole vectors start on cache lines and an L2-sized block of packed panels
// sits in the cache sets the same way in every process.
#pragma once

#include "x86/huge_scratch.hpp"

#include <cstddef>

namespace jitmm::x86 {

// At least `floats` floats of the calling thread's buffer for (Owner, Slot). Each pair has a buffer of its own:
// a kernel that runs another inside it (C computed transposed around the swapped problem's kernel), or one that
// holds two buffers at once, must not be handed the same memory twice.
template <typename Owner, int Slot = 0>
float* thread_scratch(size_t floats) {
    thread_local HugeScratch buffer;
    return reinterpret_cast<float*>(buffer.get(floats * sizeof(float)));
}

}  // namespace jitmm::x86
