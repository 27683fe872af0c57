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

inline uint8_t* emit_buffer(size_t capacity) {
    thread_local std::vector<uint8_t> buffer;
    if (buffer.size() < capacity) buffer.resize(capacity);
    return buffer.data();
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
