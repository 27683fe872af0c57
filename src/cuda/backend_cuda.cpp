#include "cuda/backend_cuda.hpp"

#include "core/error.hpp"
#include "hw/gpu.hpp"

#include <string>

namespace jitmm::cuda {

namespace {

class CudaBackend final : public Backend {
public:
    CudaBackend(const EngineOptions& o, const hw::GpuInfo& gpu, int driver_version) : device_(o.device), gpu_(gpu) {
        fingerprint_ = "cuda arch=" + gpu_.arch_name() + " sms=" + std::to_string(gpu_.sm_count) +
                       " driver=" + std::to_string(driver_version);
    }
    const std::string& device() const override { return device_; }
    const std::string& fingerprint() const override { return fingerprint_; }

    std::unique_ptr<Plan> plan(const Problem& p) const override {
        fail(JITMM_STATUS_UNSUPPORTED, device_ + " (" + gpu_.name + ", " + gpu_.arch_name() +
                                           "): no CUDA generator in this build yet; no kernel for " + jitmm::describe(p));
    }

    std::string describe(jitmm_report_format format) const override {
        hw::GpuProbe one;
        one.driver_loaded = true;
        one.driver_version = hw::gpu_probe().driver_version;
        one.devices.push_back(gpu_);
        return format == JITMM_REPORT_JSON ? hw::gpu_report_json(one) : hw::gpu_report_text(one);
    }

private:
    std::string device_;
    hw::GpuInfo gpu_;
    std::string fingerprint_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const EngineOptions& options) {
    const hw::GpuProbe& probe = hw::gpu_probe();
    if (!probe.driver_loaded) fail(JITMM_STATUS_NO_DEVICE, options.device + ": " + probe.driver_note);
    if (options.cuda_ordinal < 0 || options.cuda_ordinal >= static_cast<int>(probe.devices.size()))
        fail(JITMM_STATUS_NO_DEVICE, options.device + ": no such CUDA device (the driver shows " +
                                         std::to_string(probe.devices.size()) + ")");
    return std::make_unique<CudaBackend>(options, probe.devices[options.cuda_ordinal], probe.driver_version);
}

}  // namespace jitmm::cuda
