#include "x86/huge_scratch.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <new>

namespace jitmm::x86 {

HugeScratch::~HugeScratch() {
    if (base_ != nullptr) munmap(base_, size_);
}

uint8_t* HugeScratch::get(size_t bytes) {
    bytes = std::max<size_t>(bytes, 1);  // always a valid pointer
    if (bytes <= size_) return static_cast<uint8_t*>(base_);
    if (base_ != nullptr) munmap(base_, size_);
    base_ = nullptr;
    size_ = 0;
    // Small buffers (column sums, a strip of a few tiles) keep ordinary pages.
    const size_t page = bytes >= (size_t(512) << 10) ? size_t(2) << 20 : size_t(4) << 10;
    const size_t size = (bytes + page - 1) / page * page;
    // Over-map by one huge page, then trim to a 2 MB aligned range (THP needs aligned ranges).
    void* raw = mmap(nullptr, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + page - 1) / page * page;
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t end = start + size + page;
    if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
    base_ = reinterpret_cast<void*>(aligned);
    size_ = size;
    if (page > 4096) madvise(base_, size_, MADV_HUGEPAGE);
    return static_cast<uint8_t*>(base_);
}

}  // namespace jitmm::x86
