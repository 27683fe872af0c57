// The host buffers of one shape: A and B (rotated over several copies when large), C, bias.
//
// Inputs are uniform random in [-1,1] (integers: small random integers; fp8: j/4, |j| <= 8) from a fixed-seed
// PRNG; dequantization scales (desc.a_scale_mode / b_scale_mode) are k/4, k in 1..12. A problem
// whose A+B exceeds the per-core L2 is a "large" problem: it rotates over enough copies of A and B that the
// working set is twice the last-level cache, capped at 256 MiB of copies, so that repeated runs do not time a
// cache-resident weight matrix that a real model would stream from DRAM. Small problems run cache-hot, as
// they do in a tight inference loop. jitmm and every peer run on these same buffers.
#pragma once

#include "reference.hpp"

#include <jitmm/jitmm.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace jitmm::bench {

// 64-byte aligned host memory.
class HostBuffer {
public:
    HostBuffer() = default;
    explicit HostBuffer(size_t bytes);  // throws jitmm::Error when out of memory
    void* data() const { return data_.get(); }
    size_t bytes() const { return bytes_; }

private:
    struct Free {
        void operator()(void* p) const;
    };
    std::unique_ptr<void, Free> data_;
    size_t bytes_ = 0;
};

// 2*M*N*K*batch.
double flops(const jitmm_matmul_desc& d);

// Bytes a kernel moves at least: A and B once (a shared operand, batch stride 0, once for all batches), C
// written once and read once more when beta != 0. The denominator of GB/s, which decides decode-like shapes.
double min_bytes(const jitmm_matmul_desc& d);

// How many copies of A and B the timed runs rotate over (see the top of this file).
int64_t rotation_copies(int64_t ab_bytes);

struct HostProblem {
    Operand a, b, c;
    int64_t copies = 1;
    size_t a_pitch = 0, b_pitch = 0;  // bytes between copies (64-byte multiples)
    HostBuffer a_buf, b_buf, c_buf, bias_buf;
    HostBuffer a_scales_buf, b_scales_buf;  // f32, scale_count() values each; empty without scales

    explicit HostProblem(const jitmm_matmul_desc& d);
    void* a_ptr(int64_t copy) const { return static_cast<char*>(a_buf.data()) + a_pitch * static_cast<size_t>(copy); }
    void* b_ptr(int64_t copy) const { return static_cast<char*>(b_buf.data()) + b_pitch * static_cast<size_t>(copy); }
    const float* a_scales() const { return static_cast<const float*>(a_scales_buf.data()); }
    const float* b_scales() const { return static_cast<const float*>(b_scales_buf.data()); }
    jitmm_matmul_args args(int64_t copy) const;  // host pointers (the CPU engine's)
};

}  // namespace jitmm::bench
