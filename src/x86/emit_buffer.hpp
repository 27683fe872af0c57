// Where generators emit their code before the bytes are copied to executable memory, and the one way they
// run Xbyak: a per-thread scratch buffer that only grows (a JIT does not pay for fresh pages every time),
// doubled when Xbyak runs out of room, and Xbyak's own errors turned into JIT_FAILED naming the generator.
#pragma once

#include "core/error.hpp"

#include <xbyak/xbyak.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace jitmm::x86 {

// The buffer starts on a cache line: Xbyak's align() pads to the buffer's address, not to the offset, and the
// code runs from page-aligned memory, so an unaligned buffer (a large std::vector sits 16 bytes past a page)
// left the 64-byte constants of an epilogue across two lines and made the bytes depend on the heap.
inline uint8_t* emit_buffer(size_t capacity) {
    constexpr size_t kAlign = 64;
    thread_local std::vector<uint8_t> buffer;
    if (buffer.size() < capacity + kAlign) buffer.resize(capacity + kAlign);
    const uintptr_t address = reinterpret_cast<uintptr_t>(buffer.data());
    return buffer.data() + (kAlign - address % kAlign) % kAlign;
}

// emit(buffer, capacity) builds its emitter on the buffer and returns the generator's result (copying the
// bytes out); a first capacity that proves too small is doubled, up to three times.
template <typename Emit>
auto emit_code(const char* generator, size_t capacity, Emit&& emit) -> decltype(emit(nullptr, capacity)) {
    for (int attempt = 0;; ++attempt) {
        try {
            return emit(emit_buffer(capacity), capacity);
        } catch (const Xbyak::Error& e) {
            if (static_cast<int>(e) == Xbyak::ERR_CODE_IS_TOO_BIG && attempt < 3) {
                capacity *= 2;
                continue;
            }
            fail(JITMM_STATUS_JIT_FAILED, std::string(generator) + " generator: xbyak: " + e.what());
        }
    }
}

}  // namespace jitmm::x86
