// Artifact: what a generator produces before anything is made executable: the bytes the disk cache stores
// and a later process loads. x86: position-independent machine code plus entry offsets. CUDA: a cubin plus
// its launch metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jitmm {

struct Artifact {
    std::string kind;               // "x86-code", "cubin"
    std::vector<uint8_t> payload;   // machine code / cubin
    std::vector<int64_t> ints;      // backend-defined metadata (entry offsets, launch shape, ...)
    std::string text;               // backend-defined metadata (kernel names, ...)
};

}  // namespace jitmm
