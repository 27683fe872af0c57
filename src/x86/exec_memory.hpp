// Executable memory under W^X: code bytes are written through a writable mapping that is never executable,
// then executed through a mapping that is never writable.
#pragma once

#include <cstddef>
#include <cstdint>

namespace jitmm::x86 {

class ExecMemory {
public:
    // Copies size bytes of position-independent code into fresh executable memory. Throws jitmm::Error
    // (OUT_OF_MEMORY or JIT_FAILED) when neither strategy below works.
    ExecMemory(const uint8_t* code, size_t size);
    ~ExecMemory();
    ExecMemory(const ExecMemory&) = delete;
    ExecMemory& operator=(const ExecMemory&) = delete;

    const uint8_t* entry(size_t offset) const { return exec_ + offset; }
    size_t size() const { return size_; }
    // "mprotect" (write, then flip to read+execute) or "memfd" (one file mapped twice: a writable view
    // and an executable view, for systems such as SELinux deny_execmem that forbid the flip).
    const char* strategy() const { return strategy_; }

private:
    bool try_mprotect(const uint8_t* code, size_t size);
    bool try_memfd(const uint8_t* code, size_t size);

    uint8_t* exec_ = nullptr;
    size_t size_ = 0;
    size_t mapped_ = 0;
    const char* strategy_ = "";
};

}  // namespace jitmm::x86
