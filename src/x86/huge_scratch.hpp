// Scratch memory for the kernels' packed panels, mapped in whole 2 MB huge pages where the kernel grants them
// (MADV_HUGEPAGE; THP is often "madvise" only). Two reasons: the panels are streamed by tile loads and stores
// that touch a page per row or two (4 KB pages cost a TLB miss per few rows), and a block sized to stay in L2
// must not depend on where 4 KB pages happen to land in the cache sets (random physical pages put more of them
// on some L2 sets than the ways hold, and a run's speed then changed from process to process).
#pragma once

#include <cstddef>
#include <cstdint>

namespace jitmm::x86 {

class HugeScratch {
public:
    HugeScratch() = default;
    HugeScratch(const HugeScratch&) = delete;
    HugeScratch& operator=(const HugeScratch&) = delete;
    ~HugeScratch();

    // At least `bytes` (never null), page aligned. Growing discards the contents; throws std::bad_alloc when
    // the memory cannot be mapped.
    uint8_t* get(size_t bytes);

private:
    void* base_ = nullptr;
    size_t size_ = 0;
};

}  // namespace jitmm::x86
