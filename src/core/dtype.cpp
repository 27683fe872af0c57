#include "core/dtype.hpp"

namespace jitmm {

namespace {
constexpr const char* kDtypeNames[JITMM_DTYPE_COUNT] = {"f32", "f16", "bf16", "s8", "u8", "s32", "f8_e4m3", "f8_e5m2"};
constexpr const char* kEpilogueNames[JITMM_EPILOGUE_COUNT] = {
    "none", "bias", "relu", "gelu_tanh", "gelu_erf", "silu", "bias_relu", "bias_gelu_tanh", "bias_gelu_erf", "bias_silu"};
}  // namespace

const char* dtype_name_or_null(int value) { return dtype_valid(value) ? kDtypeNames[value] : nullptr; }

const char* epilogue_name_or_null(int value) {
    return value >= 0 && value < JITMM_EPILOGUE_COUNT ? kEpilogueNames[value] : nullptr;
}

}  // namespace jitmm
