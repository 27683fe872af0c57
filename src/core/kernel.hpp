// Kernel: the one interface every backend's compiled matmul implements.
#pragma once

#include "core/key.hpp"

#include <cstddef>
#include <string>

namespace jitmm {

struct RunArgs {
    const void* a = nullptr;
    const void* b = nullptr;
    void* c = nullptr;
    const void* bias = nullptr;
    void* stream = nullptr;
    void* workspace = nullptr;
    size_t workspace_size = 0;
    const float* a_scales = nullptr;  // quantization scales (Problem::a_scale / b_scale say how many)
    const float* b_scales = nullptr;
};

struct KernelMeta {
    std::string generator;   // "x86_f32_avx512"
    std::string recipe;      // the plan, human-readable
    KernelKey key;
    double jit_time_us = 0;  // generation time when it was made
    size_t code_size = 0;
    bool from_disk = false;  // loaded from the disk cache instead of compiled
};

class Kernel {
public:
    explicit Kernel(KernelMeta meta) : meta_(std::move(meta)) {}
    virtual ~Kernel() = default;
    Kernel(const Kernel&) = delete;
    Kernel& operator=(const Kernel&) = delete;

    // Runs the matmul it was generated for; thread-safe; throws jitmm::Error on failure.
    virtual void run(const RunArgs& args) const = 0;
    // Scratch run() uses when the caller hands in at least this much (RunArgs::workspace, 256-byte aligned);
    // with less it provides its own. 0: none.
    virtual size_t workspace_bytes() const { return 0; }
    const KernelMeta& meta() const { return meta_; }
    // Set once by the engine that made it, before the kernel is shared.
    void set_generation_stats(double jit_time_us) { meta_.jit_time_us = jit_time_us; }

private:
    KernelMeta meta_;
};

}  // namespace jitmm
