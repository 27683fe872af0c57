// Scratch memory the generators emit into before the bytes are copied to executable memory. Kept per thread
// and only ever grown, so a JIT does not pay for fresh pages (zeroing, page faults) every time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace jitmm::x86 {

inline uint8_t* emit_buffer(size_t capacity) {
    thread_local std::vector<uint8_t> buffer;
    if (buffer.size() < capacity) buffer.resize(capacity);
    return buffer.data();
}

}  // namespace jitmm::x86
