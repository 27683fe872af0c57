// Element types: sizes and the one spelling every file, flag, JSON field and log line uses.
#pragma once

#include <jitmm/jitmm.h>

#include <cstdint>

namespace jitmm {

inline bool dtype_valid(int value) { return value >= 0 && value < JITMM_DTYPE_COUNT; }

inline int64_t dtype_size(jitmm_dtype t) {
    switch (t) {
        case JITMM_DTYPE_F32: case JITMM_DTYPE_S32: return 4;
        case JITMM_DTYPE_F16: case JITMM_DTYPE_BF16: return 2;
        case JITMM_DTYPE_S8: case JITMM_DTYPE_U8: case JITMM_DTYPE_F8_E4M3: case JITMM_DTYPE_F8_E5M2: return 1;
    }
    return 0;
}

inline bool dtype_is_fp8(jitmm_dtype t) { return t == JITMM_DTYPE_F8_E4M3 || t == JITMM_DTYPE_F8_E5M2; }

// nullptr for values out of range.
const char* dtype_name_or_null(int value);
const char* epilogue_name_or_null(int value);

}  // namespace jitmm
