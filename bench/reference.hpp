// The float64 reference and what it needs: element conversions, random inputs, operand layouts, error bounds.
// Independent of the bench's options and timing so that the test suite can reuse it (include
// "bench/reference.hpp" and compile bench/reference.cpp). The conversions are written here, not taken from
// the library, so that the reference does not share a bug with the code it checks.
#pragma once

#include <jitmm/jitmm.h>

#include <cstdint>

namespace jitmm::bench {

// ---- Element conversions (round to nearest even).
uint16_t f32_to_f16(float value);  // IEEE binary16, overflow to infinity
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float value);
float bf16_to_f32(uint16_t h);
bool is_float_type(jitmm_dtype t);

// Reads count elements of type t at base[start + i*step] (element offsets) as doubles.
void decode(jitmm_dtype t, const void* base, int64_t start, int64_t step, int64_t count, double* out);

// ---- Inputs: a fixed-seed PRNG (splitmix64: tiny, and the same numbers on every standard library).
class Random {
public:
    explicit Random(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0; }  // [-1, 1)

private:
    uint64_t state_;
};

// Floats uniform in [-1,1]; integers in [-64,64] (u8: [0,128]) so s8 x u8 sums stay far from s32 limits;
// fp8 j/4 with |j| <= 8 (exact in e4m3 and e5m2, like the CUDA tests' inputs).
void fill_random(jitmm_dtype t, void* data, int64_t count, Random& rng);
// Dequantization scales: k/4 with k in 1..12 (positive, exact in f32).
void fill_scales(float* data, int64_t count, Random& rng);
// How many f32 values a scale mode needs: 0 (none), 1 (per tensor), m (per row), n (per column).
int64_t scale_count(jitmm_scale_mode mode, int64_t m, int64_t n, int64_t k, bool is_a);
// "none", "tensor", "row", "column" (the --a-scale/--b-scale spellings); "?" for anything else.
const char* scale_mode_str(jitmm_scale_mode mode);
// What beta == 0 must never read: NaN for float types, a garbage pattern for integers.
void fill_poison(jitmm_dtype t, void* data, int64_t count);

// ---- Layouts: how a desc places each matrix in memory (leading dims of 0 mean tightly packed).
struct Operand {
    jitmm_dtype type;
    int64_t rows, cols;  // as stored
    int64_t ld;
    int64_t stride;    // between batches (0: one matrix shared by every batch)
    int64_t elements;  // extent of all batches, in elements
    int64_t bytes() const;
};

Operand operand_a(const jitmm_matmul_desc& d);
Operand operand_b(const jitmm_matmul_desc& d);
Operand operand_c(const jitmm_matmul_desc& d);
// Batch stride of a tightly packed operand (rows * ld).
inline int64_t tight_stride(const Operand& op) { return op.rows * op.ld; }

bool epilogue_has_bias(jitmm_epilogue e);
// The activation part of an epilogue (identity for none and bias), in float64.
double activate(jitmm_epilogue e, double x);

// ---- The check: C = act(alpha * sa[i] * sb[j] * op(A) op(B) + beta * C0 + bias), compared as it is computed.
struct CheckInputs {
    const jitmm_matmul_desc* desc;
    const void* a;
    const void* b;
    const void* c0;    // C before the run (read only when beta != 0)
    const void* c;     // C after the run
    const void* bias;  // nullptr without a bias epilogue
    const float* a_scales = nullptr;  // host copies of the scales desc->a_scale_mode / b_scale_mode ask for
    const float* b_scales = nullptr;
    bool tf32 = false;  // f32 inputs multiplied as tf32 (the CUDA kernels and cuBLASLt's f32 path)
};

struct CheckResult {
    double max_abs_err = 0.0, rel_err = 0.0, bound = 0.0;  // errors are NaN when the output held NaN/Inf
    bool ok = false;
};

// Relative Frobenius bound for desc (DESIGN.md "Numerics"); tf32: f32 inputs multiplied as tf32.
double error_bound(const jitmm_matmul_desc& d, bool tf32 = false);
// Compares batch 0 and the last batch (a wrong batch stride shows there) with the float64 reference, on
// all hardware threads.
CheckResult check_against_reference(const CheckInputs& in);

}  // namespace jitmm::bench
