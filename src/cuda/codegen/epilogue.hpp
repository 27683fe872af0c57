// The epilogue every CUDA generator shares, as CUDA C++ source: finish() = act(alpha * acc + beta * C + bias)
// and the stores that convert to C's type once. The emitted code expects the generator's prelude to have
// defined u16, u32, i64 and Acc (the accumulator type: float, or int for s8 inputs).
#pragma once

#include "core/problem.hpp"

#include <sstream>
#include <string>

namespace jitmm::cuda {

// Exact float literal (hex float), so that alpha and beta in the kernel are the caller's bits.
std::string float_literal(float v);

// True when the whole epilogue stays in exact s32 arithmetic (alpha 1, beta 0 or 1, integer bias, relu or
// nothing); Val is int then, else float.
bool exact_int_epilogue(const Problem& p);

// Emits ALPHA, BETA, EC, Val, act(), c_store(), c_store2() and
// finish(Acc acc, const char* c, int row, int col, const char* bias) -> Val.
void emit_epilogue_helpers(std::ostringstream& os, const Problem& p);

}  // namespace jitmm::cuda
