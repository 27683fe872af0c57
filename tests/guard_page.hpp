// Memory that ends exactly where a PROT_NONE page begins: a test hands a kernel or a packer an operand placed here,
// and any read past its last byte faults instead of passing unnoticed.
#pragma once

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

class GuardedBytes {
public:
    explicit GuardedBytes(size_t bytes) {
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        span_ = (bytes + page - 1) / page * page;
        map_ = mmap(nullptr, span_ + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(map_ != MAP_FAILED);
        REQUIRE(mprotect(static_cast<uint8_t*>(map_) + span_, page, PROT_NONE) == 0);
        data_ = static_cast<uint8_t*>(map_) + span_ - bytes;
        mapped_ = span_ + page;
    }
    ~GuardedBytes() {
        if (map_ != MAP_FAILED) munmap(map_, mapped_);
    }
    GuardedBytes(const GuardedBytes&) = delete;
    GuardedBytes& operator=(const GuardedBytes&) = delete;

    uint8_t* data() const { return data_; }

private:
    void* map_ = MAP_FAILED;
    size_t span_ = 0, mapped_ = 0;
    uint8_t* data_ = nullptr;
};
