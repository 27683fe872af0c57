#include "problem.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "hw/cpu.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace jitmm::bench {

HostBuffer::HostBuffer(size_t bytes) {
    const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    data_.reset(std::aligned_alloc(64, rounded));
    if (!data_) fail(JITMM_STATUS_OUT_OF_MEMORY, "jitmm-bench: cannot allocate " + std::to_string(bytes) + " bytes");
    bytes_ = bytes;
}

void HostBuffer::Free::operator()(void* p) const { std::free(p); }

double flops(const jitmm_matmul_desc& d) {
    return 2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k) *
           static_cast<double>(d.batch_count);
}

double min_bytes(const jitmm_matmul_desc& d) {
    const double batch = static_cast<double>(d.batch_count);
    auto operand = [&](jitmm_dtype t, int64_t rows, int64_t cols, int64_t stride) {
        const double copies = d.batch_count > 1 && stride == 0 ? 1.0 : batch;
        return copies * static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(dtype_size(t));
    };
    const double c = operand(d.c_type, d.m, d.n, d.stride_c);
    return operand(d.a_type, d.m, d.k, d.stride_a) + operand(d.b_type, d.k, d.n, d.stride_b) +
           (d.beta != 0.0f ? 2.0 : 1.0) * c;
}

int64_t rotation_copies(int64_t ab_bytes) {
    constexpr int64_t kCapBytes = int64_t{256} << 20, kMaxCopies = 64;
    const hw::CpuInfo& cpu = hw::cpu_info();
    const int64_t l2 = cpu.l2_bytes > 0 ? cpu.l2_bytes : int64_t{2} << 20;
    const int64_t llc = cpu.l3_bytes > 0 ? cpu.l3_bytes : int64_t{32} << 20;
    if (ab_bytes <= l2) return 1;
    const int64_t wanted = (2 * llc + ab_bytes - 1) / ab_bytes;
    return std::max<int64_t>(1, std::min({wanted, kMaxCopies, kCapBytes / ab_bytes}));
}

HostProblem::HostProblem(const jitmm_matmul_desc& d) : a(operand_a(d)), b(operand_b(d)), c(operand_c(d)) {
    a_pitch = static_cast<size_t>((a.bytes() + 63) / 64 * 64);
    b_pitch = static_cast<size_t>((b.bytes() + 63) / 64 * 64);
    copies = rotation_copies(static_cast<int64_t>(a_pitch + b_pitch));
    a_buf = HostBuffer(a_pitch * static_cast<size_t>(copies));
    b_buf = HostBuffer(b_pitch * static_cast<size_t>(copies));
    c_buf = HostBuffer(static_cast<size_t>(c.bytes()));
    Random ra(0x5eed0001), rb(0x5eed0002), rbias(0x5eed0004);
    fill_random(a.type, a_buf.data(), a.elements, ra);
    fill_random(b.type, b_buf.data(), b.elements, rb);
    for (int64_t i = 1; i < copies; ++i) {
        std::memcpy(a_ptr(i), a_ptr(0), a_pitch);
        std::memcpy(b_ptr(i), b_ptr(0), b_pitch);
    }
    if (epilogue_has_bias(d.epilogue)) {
        const int64_t count = d.bias_layout == JITMM_BIAS_PER_ROW ? d.m : d.n;
        bias_buf = HostBuffer(static_cast<size_t>(count * dtype_size(d.bias_type)));
        fill_random(d.bias_type, bias_buf.data(), count, rbias);
    }
    Random rc(0x5eed0003);
    fill_random(c.type, c_buf.data(), c.elements, rc);
    auto make_scales = [&](jitmm_scale_mode mode, bool is_a, uint64_t seed, HostBuffer* buf) {
        const int64_t count = scale_count(mode, d.m, d.n, d.k, is_a);
        if (count == 0) return;
        *buf = HostBuffer(static_cast<size_t>(count) * sizeof(float));
        Random rs(seed);
        fill_scales(static_cast<float*>(buf->data()), count, rs);
    };
    make_scales(d.a_scale_mode, true, 0x5eed0005, &a_scales_buf);
    make_scales(d.b_scale_mode, false, 0x5eed0006, &b_scales_buf);
}

jitmm_matmul_args HostProblem::args(int64_t copy) const {
    jitmm_matmul_args args;
    jitmm_matmul_args_init(&args);
    args.a = a_ptr(copy);
    args.b = b_ptr(copy);
    args.c = c_buf.data();
    args.bias = bias_buf.data();
    args.a_scales = a_scales();
    args.b_scales = b_scales();
    return args;
}

}  // namespace jitmm::bench
