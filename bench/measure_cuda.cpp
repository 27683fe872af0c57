#include "measure_cuda.hpp"

#include "core/error.hpp"
#include "cuda/driver.hpp"
#include "hw/gpu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace jitmm::bench {

namespace {

// The device's primary context made current for this scope (the same context jitmm's kernels use).
class ContextScope {
public:
    ContextScope(const cuda::DriverApi& drv, int ordinal) : drv_(drv) {
        cuda::check(drv_.cuDeviceGet(&device_, ordinal), "cuDeviceGet");
        cuda::check(drv_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
        cuda::check(drv_.cuCtxPushCurrent(context_), "cuCtxPushCurrent");
    }
    ~ContextScope() {
        CUcontext popped;
        drv_.cuCtxPopCurrent(&popped);
        drv_.cuDevicePrimaryCtxRelease(device_);
    }

private:
    const cuda::DriverApi& drv_;
    CUdevice device_ = 0;
    CUcontext context_ = nullptr;
};

class DeviceBuffer {
public:
    DeviceBuffer(const cuda::DriverApi& drv, size_t bytes) : drv_(drv) {
        if (bytes > 0) cuda::check(drv_.cuMemAlloc(&ptr_, bytes), "cuMemAlloc");
    }
    ~DeviceBuffer() {
        if (ptr_) drv_.cuMemFree(ptr_);
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    CUdeviceptr get() const { return ptr_; }
    void* at(size_t offset) const { return reinterpret_cast<void*>(ptr_ + offset); }

private:
    const cuda::DriverApi& drv_;
    CUdeviceptr ptr_ = 0;
};

}  // namespace

int cuda_ordinal(const std::string& device) {
    const size_t colon = device.find(':');
    return colon == std::string::npos ? 0 : std::atoi(device.c_str() + colon + 1);
}

int64_t device_rotation_copies(const HostProblem& problem, const std::string& device) {
    const int ordinal = cuda_ordinal(device);
    const hw::GpuProbe& gpus = hw::gpu_probe();
    const int64_t l2 = ordinal >= 0 && ordinal < static_cast<int>(gpus.devices.size()) ? gpus.devices[ordinal].l2_bytes : 0;
    const int64_t ab = static_cast<int64_t>(problem.a_pitch + problem.b_pitch);
    return std::clamp<int64_t>((2 * std::max<int64_t>(l2, 1) + ab - 1) / std::max<int64_t>(ab, 1), 1, 16);
}

Timing time_on_stream(CUstream stream, const TimingPolicy& policy, const std::function<void(int64_t)>& run) {
    const cuda::DriverApi& drv = cuda::driver_or_throw();
    for (int i = 0; i < 3; ++i) run(i);
    cuda::check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize");
    constexpr int kBatch = 20;
    std::vector<CUevent> events(2 * kBatch);
    for (CUevent& e : events) cuda::check(drv.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    struct EventsGuard {
        const cuda::DriverApi& drv;
        std::vector<CUevent>& events;
        ~EventsGuard() {
            for (CUevent e : events)
                if (e) drv.cuEventDestroy(e);
        }
    } events_guard{drv, events};
    std::vector<double> samples;
    double total_s = 0;
    int64_t index = 3;
    while ((static_cast<int>(samples.size()) < std::max(policy.repeats, kBatch) || total_s < policy.min_time_s) &&
           samples.size() < 20000) {
        if (policy.back_to_back) {
            cuda::check(drv.cuEventRecord(events[0], stream), "cuEventRecord");
            for (int i = 0; i < kBatch; ++i) run(index++);
            cuda::check(drv.cuEventRecord(events[1], stream), "cuEventRecord");
            cuda::check(drv.cuEventSynchronize(events[1]), "cuEventSynchronize");
            float ms = 0;
            cuda::check(drv.cuEventElapsedTime(&ms, events[0], events[1]), "cuEventElapsedTime");
            samples.push_back(ms * 1e-3 / kBatch);
            total_s += ms * 1e-3;
            continue;
        }
        for (int i = 0; i < kBatch; ++i) {
            cuda::check(drv.cuEventRecord(events[2 * i], stream), "cuEventRecord");
            run(index++);
            cuda::check(drv.cuEventRecord(events[2 * i + 1], stream), "cuEventRecord");
        }
        cuda::check(drv.cuEventSynchronize(events.back()), "cuEventSynchronize");
        for (int i = 0; i < kBatch; ++i) {
            float ms = 0;
            cuda::check(drv.cuEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cuEventElapsedTime");
            samples.push_back(ms * 1e-3);
            total_s += ms * 1e-3;
        }
    }
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    Timing t;
    t.median_s = samples[samples.size() / 2];
    t.runs = static_cast<int64_t>(samples.size());
    t.ok = true;
    return t;
}

namespace {

// problem's inputs in device memory (`copies` copies of A and B, rotated through by the timing loop; one C,
// bias and scales) and a stream of their own: what jitmm's runs and its tuning use.
class DeviceInputs {
public:
    DeviceInputs(const cuda::DriverApi& drv, const HostProblem& problem, int64_t copies)
        : drv_(drv), problem_(problem), a_(drv, problem.a_pitch * copies), b_(drv, problem.b_pitch * copies),
          c_(drv, problem.c_buf.bytes()), bias_(drv, problem.bias_buf.bytes()),
          a_scales_(drv, problem.a_scales_buf.bytes()), b_scales_(drv, problem.b_scales_buf.bytes()),
          workspace_(drv, kWorkspaceBytes) {
        for (int64_t i = 0; i < copies; ++i) {
            upload(a_.get() + problem.a_pitch * i, problem.a_ptr(i % problem.copies), problem.a_pitch, "A");
            upload(b_.get() + problem.b_pitch * i, problem.b_ptr(i % problem.copies), problem.b_pitch, "B");
        }
        upload(bias_.get(), problem.bias_buf.data(), problem.bias_buf.bytes(), "bias");
        upload(a_scales_.get(), problem.a_scales_buf.data(), problem.a_scales_buf.bytes(), "a_scales");
        upload(b_scales_.get(), problem.b_scales_buf.data(), problem.b_scales_buf.bytes(), "b_scales");
        cuda::check(drv.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    }
    // The uploads and C's filling run on the legacy stream, which the non-blocking stream the kernels run on does
    // not wait for (a pageable cuMemcpyHtoD or a cuMemsetD8 may return before the device has done it): each user
    // calls this once its C is filled, before the first run.
    void settle() const { cuda::check(drv_.cuCtxSynchronize(), "cuCtxSynchronize"); }
    ~DeviceInputs() { drv_.cuStreamDestroy(stream_); }
    DeviceInputs(const DeviceInputs&) = delete;
    DeviceInputs& operator=(const DeviceInputs&) = delete;

    CUdeviceptr c() const { return c_.get(); }
    CUstream stream() const { return stream_; }

    // jitmm's args for copy `copy` of A and B.
    jitmm_matmul_args args(int64_t copy) const {
        jitmm_matmul_args args;
        jitmm_matmul_args_init(&args);
        args.a = a_.at(problem_.a_pitch * static_cast<size_t>(copy));
        args.b = b_.at(problem_.b_pitch * static_cast<size_t>(copy));
        args.c = c_.at(0);
        args.bias = problem_.bias_buf.bytes() > 0 ? bias_.at(0) : nullptr;
        args.a_scales = problem_.a_scales_buf.bytes() > 0 ? static_cast<const float*>(a_scales_.at(0)) : nullptr;
        args.b_scales = problem_.b_scales_buf.bytes() > 0 ? static_cast<const float*>(b_scales_.at(0)) : nullptr;
        args.stream = stream_;
        args.workspace = workspace_.at(0);
        args.workspace_size = kWorkspaceBytes;
        return args;
    }

private:
    void upload(CUdeviceptr to, const void* from, size_t bytes, const char* what) {
        if (bytes > 0) cuda::check(drv_.cuMemcpyHtoD(to, from, bytes), (std::string("cuMemcpyHtoD(") + what + ")").c_str());
    }

    // Scratch handed to jitmm (split K), as much as the cuBLASLt peer gets: a framework keeps one around.
    static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

    const cuda::DriverApi& drv_;
    const HostProblem& problem_;
    DeviceBuffer a_, b_, c_, bias_, a_scales_, b_scales_, workspace_;
    CUstream stream_ = nullptr;
};

}  // namespace

void tune_on_cuda(jitmm_engine* engine, HostProblem& problem, ShapeResult* r) {
    try {
        const cuda::DriverApi& drv = cuda::driver_or_throw();
        ContextScope context(drv, cuda_ordinal(r->device));
        const DeviceInputs inputs(drv, problem, 1);
        cuda::check(drv.cuMemcpyHtoD(inputs.c(), problem.c_buf.data(), problem.c_buf.bytes()), "cuMemcpyHtoD(C)");
        inputs.settle();
        const jitmm_matmul_args args = inputs.args(0);
        size_t required = 0;
        jitmm_status st = jitmm_tune(engine, &r->desc, &args, nullptr, 0, &required);
        std::string log(required, '\0');
        if (st == JITMM_STATUS_SUCCESS) st = jitmm_tune(engine, &r->desc, &args, log.data(), log.size(), &required);
        if (st != JITMM_STATUS_SUCCESS)
            fail(st, std::string("tune: ") + jitmm_status_string(st) + ": " + jitmm_last_error_message());
        log.resize(std::strlen(log.c_str()));
        const size_t newline = log.find('\n');
        r->tuned = log.substr(0, newline);
        r->tune_log = newline == std::string::npos ? "" : log.substr(newline + 1);
    } catch (const Error& e) {
        r->error = e.what();
    }
}

void measure_on_cuda(const jitmm_kernel* kernel, const Options& options, HostProblem& problem, const HostBuffer& c0,
                     const std::function<CheckResult()>& check_host_c, ShapeResult* r) {
    const jitmm_matmul_desc& d = r->desc;
    try {
        const cuda::DriverApi& drv = cuda::driver_or_throw();
        ContextScope context(drv, cuda_ordinal(r->device));
        // Enough copies of A and B that one pass over them exceeds twice the L2.
        const int64_t copies = device_rotation_copies(problem, r->device);
        const DeviceInputs inputs(drv, problem, copies);
        auto run = [&](int64_t copy) {
            const jitmm_matmul_args args = inputs.args(copy);
            const jitmm_status st = jitmm_kernel_run(kernel, &args);
            if (st != JITMM_STATUS_SUCCESS)
                fail(st, std::string("run: ") + jitmm_status_string(st) + ": " + jitmm_last_error_message());
        };

        // C as the check needs it: NaN everywhere when beta == 0 (it must not be read), else C0.
        if (d.beta == 0.0f) cuda::check(drv.cuMemsetD8(inputs.c(), 0xFF, problem.c_buf.bytes()), "cuMemsetD8");
        else cuda::check(drv.cuMemcpyHtoD(inputs.c(), c0.data(), c0.bytes()), "cuMemcpyHtoD(C)");
        inputs.settle();
        if (options.check) {
            run(0);
            cuda::check(drv.cuStreamSynchronize(inputs.stream()), "cuStreamSynchronize");
            cuda::check(drv.cuMemcpyDtoH(problem.c_buf.data(), inputs.c(), problem.c_buf.bytes()), "cuMemcpyDtoH(C)");
            r->check = check_host_c();
            r->checked = true;
        }

        // Warm up, then batches of event-timed runs until the policy is met; the median of all samples.
        const Timing t = time_on_stream(inputs.stream(), options.timing, [&](int64_t i) { run(i % copies); });
        const double median_s = t.median_s;
        r->runs = t.runs;
        r->copies = copies;
        r->median_us = median_s * 1e6;
        r->gflops = median_s > 0 ? 2.0 * d.m * d.n * d.k * d.batch_count / median_s * 1e-9 : NAN;
    } catch (const Error& e) {
        r->error = e.what();
    }
}

}  // namespace jitmm::bench
