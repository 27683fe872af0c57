#include "cuda/backend_cuda.hpp"

#include "core/dtype.hpp"
#include "core/dump.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "cuda/codegen/sm80_mma.hpp"
#include "cuda/codegen/sm90_wgmma.hpp"
#include "cuda/driver.hpp"
#include "cuda/nvrtc.hpp"
#include "hw/gpu.hpp"
#include "plan/cuda_gemm_plan.hpp"
#include "plan/cuda_sm90_plan.hpp"
#include "cuda/tensor_map.hpp"

#include <atomic>
#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace jitmm::cuda {

namespace {

// Layout of Artifact::ints for a "cubin" artifact; bump kArtifactFormat when it changes.
constexpr int64_t kArtifactFormat = 2;  // 2: kEarlyLaunch
enum ArtifactInt {
    kFormat = 0, kGridX, kGridY, kGridZ, kBlock, kSmem, kAlignA, kAlignB, kAlignC, kAlignBias,
    kEarlyLaunch,  // 1: launched with programmatic stream serialization (GeneratedKernel::waits_for_previous_grid)
    kIntCount
};

// The compute capability an arch name ("sm_90a", "sm_80") compiles for.
int arch_number(const std::string& arch) {
    return arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
}

// JITMM_CUDA_EARLY_LAUNCH=0: launch every kernel after the previous one has ended (measurements).
bool early_launch_enabled() {
    static const bool on = [] {
        const char* env = std::getenv("JITMM_CUDA_EARLY_LAUNCH");
        return env == nullptr || env[0] != '0';
    }();
    return on;
}

// Above this much dynamic shared memory a kernel must opt in (cuFuncSetAttribute).
constexpr int64_t kDefaultSmemLimit = 48 * 1024;

// ---------------------------------------------------------------------------------------------------
// The device: its primary context, retained for as long as any backend or kernel uses it.

class Device {
public:
    explicit Device(int ordinal) : drv_(driver_or_throw()), ordinal_(ordinal) {
        check(drv_.cuDeviceGet(&device_, ordinal), "cuDeviceGet");
        check(entry(drv_.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")(&context_, device_),
              "cuDevicePrimaryCtxRetain");
    }
    ~Device() {
        // At process exit the driver may already be gone; nothing useful can be done with an error here.
        if (pool_ != nullptr && drv_.cuMemPoolDestroy != nullptr) (void)drv_.cuMemPoolDestroy(pool_);
        if (drv_.cuDevicePrimaryCtxRelease != nullptr) (void)drv_.cuDevicePrimaryCtxRelease(device_);
    }

    // Scratch (split-K partial sums) in stream order from the engine's own pool, which keeps its memory
    // between calls (a release threshold of "never"): the default pool hands memory back at every
    // synchronization and maps it again on the next call. Null pool: cuMemAllocAsync's default pool.
    CUdeviceptr scratch_alloc(size_t bytes, CUstream stream) const {
        std::call_once(pool_once_, [&] {
            if (drv_.cuMemPoolCreate == nullptr || drv_.cuMemPoolSetAttribute == nullptr) return;
            CUmemPoolProps props{};
            props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
            props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            props.location.id = ordinal_;
            CUmemoryPool pool = nullptr;
            if (drv_.cuMemPoolCreate(&pool, &props) != CUDA_SUCCESS) return;
            cuuint64_t keep = ~cuuint64_t{0};
            (void)drv_.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
            pool_ = pool;
        });
        CUdeviceptr p = 0;
        if (pool_ != nullptr && drv_.cuMemAllocFromPoolAsync != nullptr)
            check(drv_.cuMemAllocFromPoolAsync(&p, bytes, pool_, stream), "cuMemAllocFromPoolAsync(scratch)");
        else
            check(entry(drv_.cuMemAllocAsync, "cuMemAllocAsync")(&p, bytes, stream), "cuMemAllocAsync(scratch)");
        return p;
    }
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    const DriverApi& drv() const { return drv_; }
    CUcontext context() const { return context_; }
    int ordinal() const { return ordinal_; }

private:
    const DriverApi& drv_;
    int ordinal_;
    CUdevice device_ = 0;
    CUcontext context_ = nullptr;
    mutable std::once_flag pool_once_;
    mutable CUmemoryPool pool_ = nullptr;
};

// The primary context current on this thread for the scope (whatever the caller had stays underneath).
class ContextScope {
public:
    explicit ContextScope(const Device& d) : drv_(d.drv()) {
        check(entry(drv_.cuCtxPushCurrent, "cuCtxPushCurrent")(d.context()), "cuCtxPushCurrent");
    }
    ~ContextScope() {
        CUcontext popped = nullptr;
        (void)drv_.cuCtxPopCurrent(&popped);
    }
    ContextScope(const ContextScope&) = delete;
    ContextScope& operator=(const ContextScope&) = delete;

private:
    const DriverApi& drv_;
};

// ---------------------------------------------------------------------------------------------------
// A loaded cubin: module, function and launch shape.

// Scratch a launch needs beside its operands: bytes in all, the first counter_bytes zeroed before each launch.
struct Workspace {
    size_t bytes = 0;
    size_t counter_bytes = 0;
};

struct LaunchShape {
    unsigned grid[3] = {1, 1, 1};
    unsigned block = 1;
    unsigned smem = 0;
    int64_t align_a = 1, align_b = 1, align_c = 1, align_bias = 1;
    bool early_launch = false;
};

LaunchShape launch_shape(const Artifact& a) {
    if (a.kind != "cubin" || a.ints.size() != kIntCount || a.ints[kFormat] != kArtifactFormat || a.text.empty() ||
        a.payload.empty())
        fail(JITMM_STATUS_INTERNAL_ERROR, "cuda: artifact is not a format-" + std::to_string(kArtifactFormat) +
                                              " cubin (kind \"" + a.kind + "\")");
    LaunchShape s;
    for (int i = 0; i < 3; ++i) s.grid[i] = static_cast<unsigned>(a.ints[kGridX + i]);
    s.block = static_cast<unsigned>(a.ints[kBlock]);
    s.smem = static_cast<unsigned>(a.ints[kSmem]);
    s.align_a = a.ints[kAlignA];
    s.align_b = a.ints[kAlignB];
    s.align_c = a.ints[kAlignC];
    s.align_bias = a.ints[kAlignBias];
    s.early_launch = a.ints[kEarlyLaunch] != 0;
    return s;
}

class Module {
public:
    Module(std::shared_ptr<const Device> device, const Artifact& artifact)
        : device_(std::move(device)), shape_(launch_shape(artifact)) {
        const DriverApi& drv = device_->drv();
        ContextScope scope(*device_);
        check(entry(drv.cuModuleLoadData, "cuModuleLoadData")(&module_, artifact.payload.data()), "cuModuleLoadData");
        const CUresult got = entry(drv.cuModuleGetFunction, "cuModuleGetFunction")(&function_, module_,
                                                                                  artifact.text.c_str());
        if (got != CUDA_SUCCESS) {
            (void)drv.cuModuleUnload(module_);
            check(got, ("cuModuleGetFunction(" + artifact.text + ")").c_str());
        }
        if (shape_.smem > kDefaultSmemLimit) {
            const CUresult set = entry(drv.cuFuncSetAttribute, "cuFuncSetAttribute")(
                function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shape_.smem));
            if (set != CUDA_SUCCESS) {
                (void)drv.cuModuleUnload(module_);
                check(set, "cuFuncSetAttribute(max dynamic shared memory)");
            }
        }
    }
    ~Module() {
        if (module_ == nullptr || device_->drv().cuModuleUnload == nullptr) return;
        try {
            ContextScope scope(*device_);
            (void)device_->drv().cuModuleUnload(module_);
        } catch (...) {
            // The driver is shutting down: the module goes with the context.
        }
    }
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    const LaunchShape& shape() const { return shape_; }

    // A persistent kernel launched in clusters: no more CTAs than can be resident at once. A GPC whose free
    // SMs do not divide by the cluster size leaves SMs over, so 132 SMs may hold fewer than 66 pairs, and a
    // grid of 132 would run its last clusters as a second wave (twice the time).
    void fit_grid_to_resident_clusters(int cluster) {
        const DriverApi& drv = device_->drv();
        if (drv.cuOccupancyMaxActiveClusters == nullptr) return;
        ContextScope scope(*device_);
        CUlaunchConfig config{};
        config.gridDimX = shape_.grid[0];
        config.gridDimY = config.gridDimZ = 1;
        config.blockDimX = shape_.block;
        config.blockDimY = config.blockDimZ = 1;
        config.sharedMemBytes = shape_.smem;
        int clusters = 0;
        const CUresult got = drv.cuOccupancyMaxActiveClusters(&clusters, function_, &config);
        if (verbose_enabled())
            verbose_log("cuda sm90: cuOccupancyMaxActiveClusters: " + result_text(got) + ", " +
                        std::to_string(clusters) + " clusters of " + std::to_string(cluster));
        if (got != CUDA_SUCCESS || clusters <= 0) return;
        unsigned resident = static_cast<unsigned>(clusters * cluster);
        // JITMM_CUDA_GRID caps the persistent grid further (developer knob for tuning runs).
        if (const char* cap = std::getenv("JITMM_CUDA_GRID"); cap != nullptr && std::atoi(cap) >= cluster)
            resident = std::min(resident, static_cast<unsigned>(std::atoi(cap) / cluster * cluster));
        if (resident < shape_.grid[0]) {
            if (verbose_enabled())
                verbose_log("cuda sm90: " + std::to_string(clusters) + " clusters of " + std::to_string(cluster) +
                            " resident at once: persistent grid " + std::to_string(shape_.grid[0]) + " -> " +
                            std::to_string(resident) + " CTAs");
            shape_.grid[0] = resident;
        }
    }

    // Launches on stream with the kernel's parameters; never synchronizes. The caller has the context current.
    // A kernel that waits for the previous grid itself is launched early: its CTAs are placed as the previous
    // kernel's retire instead of after the launch gap (the previous kernel's writes are visible after its
    // griddepcontrol.wait, so stream order holds).
    // A driver that refuses the attribute (an older one, or a setting that disallows it) gets the plain launch,
    // which runs the same kernel correctly: griddepcontrol.wait returns at once without a programmatic edge.
    void launch(void** params, void* stream) const {
        const DriverApi& drv = device_->drv();
        if (shape_.early_launch && early_launch_enabled() && drv.cuLaunchKernelEx != nullptr &&
            !early_refused_.load(std::memory_order_relaxed)) {
            CUlaunchAttribute early{};
            early.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            early.value.programmaticStreamSerializationAllowed = 1;
            CUlaunchConfig config{};
            config.gridDimX = shape_.grid[0];
            config.gridDimY = shape_.grid[1];
            config.gridDimZ = shape_.grid[2];
            config.blockDimX = shape_.block;
            config.blockDimY = config.blockDimZ = 1;
            config.sharedMemBytes = shape_.smem;
            config.hStream = static_cast<CUstream>(stream);
            config.attrs = &early;
            config.numAttrs = 1;
            const CUresult got = drv.cuLaunchKernelEx(&config, function_, params, nullptr);
            if (got != CUDA_ERROR_NOT_SUPPORTED && got != CUDA_ERROR_INVALID_VALUE) {
                check(got, "cuLaunchKernelEx(early launch)");
                return;
            }
            early_refused_.store(true, std::memory_order_relaxed);
            verbose_log("cuda: the driver refused an early launch (" + result_text(got) + "); launching after the "
                        "previous kernel from now on");
        }
        check(drv.cuLaunchKernel(function_, shape_.grid[0], shape_.grid[1], shape_.grid[2], shape_.block, 1, 1,
                                 shape_.smem, static_cast<CUstream>(stream), params, nullptr),
              "cuLaunchKernel");
    }

    // Another kernel of the same module (the Hopper kernel's staging copies): looked up once, at load.
    CUfunction other_function(const char* name) const {
        ContextScope scope(*device_);
        CUfunction f = nullptr;
        check(device_->drv().cuModuleGetFunction(&f, module_, name),
              ("cuModuleGetFunction(" + std::string(name) + ")").c_str());
        return f;
    }
    void launch_other(CUfunction f, const unsigned (&grid)[3], unsigned block, void** params, void* stream) const {
        check(device_->drv().cuLaunchKernel(f, grid[0], grid[1], grid[2], block, 1, 1, 0, static_cast<CUstream>(stream),
                                            params, nullptr),
              "cuLaunchKernel(staging copy)");
    }

    // The SM80 kernels' parameters: (a, b, c, bias).
    // ws: the workspace a gemv split over CTAs needs (a kernel with four parameters never reads the fifth).
    void launch_sm80(const RunArgs& args, void* ws = nullptr) const {
        const void* a = args.a;
        const void* b = args.b;
        void* c = args.c;
        const void* bias = args.bias;
        void* params[] = {&a, &b, &c, &bias, &ws};
        launch(params, args.stream);
    }

private:
    std::shared_ptr<const Device> device_;
    LaunchShape shape_;
    CUmodule module_ = nullptr;
    CUfunction function_ = nullptr;
    mutable std::atomic<bool> early_refused_{false};  // the driver refused an early launch once: plain from then on
};

bool aligned(const void* p, int64_t alignment) {
    return p == nullptr || reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(alignment) == 0;
}

// ---------------------------------------------------------------------------------------------------
// Compile: generate, NVRTC, package.

Artifact package_cubin(const GeneratedKernel& g, const std::string& arch) {
    CompileResult r = compile_to_cubin(g.source, g.name, arch);
    Artifact a;
    a.kind = "cubin";
    a.payload = std::move(r.cubin);
    a.text = g.name;
    a.ints.assign(kIntCount, 0);
    a.ints[kFormat] = kArtifactFormat;
    a.ints[kGridX] = g.grid[0];
    a.ints[kGridY] = g.grid[1];
    a.ints[kGridZ] = g.grid[2];
    a.ints[kBlock] = g.block;
    a.ints[kSmem] = g.smem_bytes;
    a.ints[kEarlyLaunch] = g.waits_for_previous_grid && arch_number(arch) >= 90;  // the wait is compiled in
    if (verbose_enabled()) {
        char line[160];
        std::snprintf(line, sizeof line, "nvrtc %s for %s: %.1f ms, %zu bytes of cubin", g.name.c_str(), arch.c_str(),
                      r.compile_ms, a.payload.size());
        verbose_log(line);
    }
    return a;
}

Artifact compile_sm80_cubin(const Problem& p, const plan::CudaGemmPlan& recipe, const std::string& arch) {
    Artifact a = package_cubin(generate_sm80_gemm(p, recipe), arch);
    // Pointer alignment the kernel assumes: 16 bytes where it uses vector loads, else the element.
    const int64_t e = dtype_size(p.a_type), ec = dtype_size(p.c_type);
    using plan::CudaKernelFamily;
    const bool tiled = recipe.family == CudaKernelFamily::tiled, gemv = recipe.family == CudaKernelFamily::gemv;
    const bool a_vec = gemv || (tiled ? recipe.a_path != plan::OperandPath::scalar : recipe.skinny_vector);
    const bool b_vec = gemv || (tiled ? recipe.b_path != plan::OperandPath::scalar : recipe.skinny_vector);
    a.ints[kAlignA] = a_vec ? 16 : e;
    a.ints[kAlignB] = b_vec ? 16 : e;
    a.ints[kAlignC] = recipe.c_staged ? 16 : recipe.c_pairs ? 2 * ec : ec;
    a.ints[kAlignBias] = p.bias != BiasKind::none ? dtype_size(p.bias_type) : 1;
    return a;
}

// TMA reads A and B: 16-byte aligned bases.
Artifact compile_sm90_cubin(const Problem& p, const plan::Sm90GemmPlan& plan, const std::string& arch) {
    Artifact a = package_cubin(generate_sm90_gemm(p, plan), arch);
    const int64_t ec = dtype_size(p.c_type);
    a.ints[kAlignA] = plan.stage_a ? dtype_size(p.a_type) : 16;  // a staged operand is read element by element
    a.ints[kAlignB] = plan.stage_b ? dtype_size(p.b_type) : 16;
    a.ints[kAlignC] = plan.c_tma ? 16 : plan.c_pairs ? 2 * ec : ec;
    a.ints[kAlignBias] = p.bias != BiasKind::none ? dtype_size(p.bias_type) : 1;
    return a;
}

// The tensor maps of an SM90 kernel's operands for this call's pointers.
TmaOperand sm90_operand(const Problem& p, const plan::Sm90GemmPlan& plan, bool is_a) {
    TmaOperand o;
    o.type = is_a ? p.a_type : p.b_type;
    o.k_major = is_a ? plan.a_k_major : plan.b_k_major;
    o.rows = is_a ? p.m : p.n;
    o.k = p.k;
    o.ld = is_a ? p.lda : p.ldb;
    o.batch = p.batch;
    o.stride = is_a ? p.stride_a : p.stride_b;
    if (is_a ? plan.a_shared : plan.b_shared) o.batch = 1;  // every batch reads this one matrix
    if (is_a ? plan.stage_a : plan.stage_b) {  // the packed K-major copy in the workspace
        o.ld = plan.staged_ld(p);
        o.stride = o.rows * o.ld;
    }
    // K-major: one box of the whole tile (bk x tile rows); M/N-major: boxes of 64 elements x bk lines.
    o.box_k = plan.bk;
    // With a CTA pair, each CTA loads half of B's tile.
    o.box_rows = o.k_major ? (is_a ? plan.bm : plan.bn / plan.cluster_m) : 64;
    return o;
}

// ---------------------------------------------------------------------------------------------------
// The kernel: the module for aligned pointers, and on first need the one for misaligned pointers
// (always an SM80 kernel: element loads and single-element stores everywhere).

class CudaKernel final : public Kernel {
public:
    CudaKernel(KernelMeta meta, std::shared_ptr<const Device> device, const Artifact& artifact, const Problem& p,
               plan::CudaTarget target, std::optional<plan::Sm90GemmPlan> sm90, Workspace sm80_workspace)
        : Kernel(std::move(meta)), device_(std::move(device)), main_(device_, artifact), p_(p),
          target_(std::move(target)), sm90_(std::move(sm90)), sm80_workspace_(sm80_workspace) {
        if (sm90_ && sm90_->cluster_m > 1) main_.fit_grid_to_resident_clusters(sm90_->cluster_m);
        if (sm90_ && sm90_->stage_a) stage_a_ = main_.other_function("jitmm_sm90_stage_a");
        if (sm90_ && sm90_->stage_b) stage_b_ = main_.other_function("jitmm_sm90_stage_b");
    }

    void run(const RunArgs& args) const override {
        const LaunchShape& s = main_.shape();
        const int64_t e = dtype_size(p_.a_type), ec = dtype_size(p_.c_type);
        // Element alignment is the least any kernel needs; below it nothing can run.
        if (!aligned(args.a, e) || !aligned(args.b, dtype_size(p_.b_type)) || !aligned(args.c, ec) ||
            (p_.bias != BiasKind::none && !aligned(args.bias, dtype_size(p_.bias_type))))
            fail(JITMM_STATUS_INVALID_VALUE, "cuda: a, b, c and bias must be aligned to their element size");
        const bool fast = aligned(args.a, s.align_a) && aligned(args.b, s.align_b) && aligned(args.c, s.align_c);
        ContextScope scope(*device_);
        if (!fast) return fallback().launch_sm80(args);
        if (!sm90_) {
            if (sm80_workspace_.bytes == 0) return main_.launch_sm80(args);
            return with_workspace(args, sm80_workspace_, [&](char* ws) { main_.launch_sm80(args, ws); });
        }
        const plan::Sm90GemmPlan& plan = *sm90_;
        const Workspace need{static_cast<size_t>(plan.workspace_bytes(p_)),
                             static_cast<size_t>(plan.workspace_counter_bytes(p_))};
        if (need.bytes == 0) return launch_sm90(args, args.a, args.b, nullptr);
        with_workspace(args, need, [&](char* ws) {
            const void* a = args.a;
            const void* b = args.b;
            if (plan.stage_a) a = stage(stage_a_, args.a, ws + plan.staged_offset(p_, true), true, args.stream);
            if (plan.stage_b) b = stage(stage_b_, args.b, ws + plan.staged_offset(p_, false), false, args.stream);
            launch_sm90(args, a, b, ws);
        });
    }

    size_t workspace_bytes() const override {
        return sm90_ ? static_cast<size_t>(sm90_->workspace_bytes(p_)) : sm80_workspace_.bytes;
    }

private:
    // Runs launch(ws) on a workspace of need.bytes whose first need.counter_bytes (split-K arrival counters)
    // are zeroed in stream order first: the caller's workspace when it is big enough and 256-byte aligned,
    // else stream-ordered memory from the device's pool (allocated and freed in stream order: no
    // synchronization).
    template <class Launch>
    void with_workspace(const RunArgs& args, const Workspace& need, Launch&& launch) const {
        const DriverApi& drv = device_->drv();
        const bool own =
            args.workspace == nullptr || args.workspace_size < need.bytes || !aligned(args.workspace, 256);
        const CUstream stream = static_cast<CUstream>(args.stream);
        const CUdeviceptr ws_ptr =
            own ? device_->scratch_alloc(need.bytes, stream) : reinterpret_cast<CUdeviceptr>(args.workspace);
        try {
            if (need.counter_bytes > 0)
                check(entry(drv.cuMemsetD32Async, "cuMemsetD32Async")(ws_ptr, 0, need.counter_bytes / 4, stream),
                      "cuMemsetD32Async(split-K counters)");
            launch(reinterpret_cast<char*>(ws_ptr));
        } catch (...) {
            if (own) (void)drv.cuMemFreeAsync(ws_ptr, stream);
            throw;
        }
        if (own) check(entry(drv.cuMemFreeAsync, "cuMemFreeAsync")(ws_ptr, stream), "cuMemFreeAsync(workspace)");
    }

    // The Hopper kernel on operands a and b (the caller's, or their staged copies) with workspace ws.
    void launch_sm90(const RunArgs& args, const void* a, const void* b, void* ws) const {
        const DriverApi& drv = device_->drv();
        CUtensorMap map_a = encode_tensor_map(drv, a, sm90_operand(p_, *sm90_, true));
        CUtensorMap map_b = encode_tensor_map(drv, b, sm90_operand(p_, *sm90_, false));
        CUtensorMap map_c{};
        if (sm90_->c_tma)
            map_c = encode_c_tensor_map(drv, args.c, p_.c_type, p_.m, p_.n, p_.ldc, p_.batch, p_.stride_c, 64);
        // The last, partial tile row of A (column of B) is read through maps whose box is exactly that high.
        CUtensorMap map_a_tail{}, map_b_tail{};
        if (const int64_t rows = sm90_->a_tail_rows(p_); rows > 0) {
            TmaOperand tail = sm90_operand(p_, *sm90_, true);
            tail.box_rows = static_cast<int>(rows);
            map_a_tail = encode_tensor_map(drv, a, tail);
        }
        if (const int64_t rows = sm90_->b_tail_rows(p_); rows > 0) {
            TmaOperand tail = sm90_operand(p_, *sm90_, false);
            tail.box_rows = static_cast<int>(rows);
            map_b_tail = encode_tensor_map(drv, b, tail);
        }
        void* c = args.c;
        const void* bias = args.bias;
        const float* a_scales = args.a_scales;
        const float* b_scales = args.b_scales;
        void* params[] = {&map_a, &map_b, &map_c, &map_a_tail, &map_b_tail, &c, &bias, &a_scales, &b_scales, &ws};
        main_.launch(params, args.stream);
    }

    // Launches the staging copy of operand a (or b) from src into dst; returns dst.
    const void* stage(CUfunction f, const void* src, void* dst, bool a, void* stream) const {
        const int64_t rows = a ? p_.m : p_.n;
        const int64_t batches = (a ? sm90_->a_shared : sm90_->b_shared) ? 1 : p_.batch;  // a shared one: once
        const unsigned grid[3] = {static_cast<unsigned>((rows + 31) / 32), static_cast<unsigned>((p_.k + 31) / 32),
                                  static_cast<unsigned>(std::min<int64_t>(batches, 65535))};
        void* params[] = {&src, &dst};
        main_.launch_other(f, grid, 256, params, stream);
        return dst;
    }

    // Compiled once, on the first misaligned call.
    const Module& fallback() const {
        std::call_once(fallback_once_, [&] {
            try {
                const plan::CudaGemmPlan recipe = plan::plan_cuda_gemm(p_, target_, /*aligned_pointers=*/false);
                if (recipe.workspace_bytes(p_) != 0)  // launched without one below
                    fail(JITMM_STATUS_INTERNAL_ERROR, "cuda: the misaligned-pointer kernel would need a workspace");
                fallback_ = std::make_unique<Module>(device_, compile_sm80_cubin(p_, recipe, target_.arch));
            } catch (const Error& e) {
                // fp8 and scaled problems have no SM80 kernel: say what the caller must change.
                fallback_error_ = e.status() != JITMM_STATUS_UNSUPPORTED
                                      ? std::current_exception()
                                      : std::make_exception_ptr(Error(
                                            JITMM_STATUS_INVALID_VALUE,
                                            std::string("cuda: this problem runs only with 16-byte aligned a and b "
                                                        "(and c aligned to two elements): ") + e.what()));
            } catch (...) {
                fallback_error_ = std::current_exception();
            }
        });
        if (fallback_error_) std::rethrow_exception(fallback_error_);
        return *fallback_;
    }

    std::shared_ptr<const Device> device_;
    Module main_;
    Problem p_;
    plan::CudaTarget target_;
    std::optional<plan::Sm90GemmPlan> sm90_;  // set: main_ is the Hopper kernel, launched with tensor maps
    Workspace sm80_workspace_;                // the SM80 kernel's (a gemv split over CTAs)
    CUfunction stage_a_ = nullptr, stage_b_ = nullptr;  // the staging copies in main_'s module
    mutable std::once_flag fallback_once_;
    mutable std::unique_ptr<Module> fallback_;
    mutable std::exception_ptr fallback_error_;
};

// ---------------------------------------------------------------------------------------------------
// Plan and backend.

// One CUDA kernel's plan: the Hopper generator's when it takes the problem, else the SM80 family's.
class CudaPlan final : public Plan {
public:
    CudaPlan(const Problem& p, plan::CudaGemmPlan recipe, plan::CudaTarget target, std::shared_ptr<const Device> device)
        : p_(p), recipe_(std::move(recipe)), target_(std::move(target)), device_(std::move(device)) {}
    CudaPlan(const Problem& p, plan::Sm90GemmPlan sm90, plan::CudaTarget target, std::shared_ptr<const Device> device)
        : p_(p), sm90_(std::move(sm90)), target_(std::move(target)), device_(std::move(device)) {}

    const char* generator() const override {
        if (sm90_) return "cuda_sm90_wgmma";
        switch (recipe_.family) {
            case plan::CudaKernelFamily::skinny: return "cuda_sm80_skinny";
            case plan::CudaKernelFamily::gemv: return "cuda_sm80_gemv";
            default: return "cuda_sm80_tiled";
        }
    }
    int generator_version() const override { return sm90_ ? kSm90GeneratorVersion : kSm80GeneratorVersion; }
    std::string describe() const override { return sm90_ ? sm90_->describe() : recipe_.describe(); }
    void append_key(KeyWriter& w) const override {
        w.str('a', target_.arch);
        if (sm90_) sm90_->append_key(w);
        else recipe_.append_key(w);
    }

    Artifact compile() const override {
        return sm90_ ? compile_sm90_cubin(p_, *sm90_, target_.arch) : compile_sm80_cubin(p_, recipe_, target_.arch);
    }

    std::shared_ptr<Kernel> load(const Artifact& artifact, KernelMeta meta) const override {
        if (!device_)
            fail(JITMM_STATUS_NO_DEVICE, "cuda: compile-only backend for " + target_.arch +
                                             ": cubins can be built here but not loaded (no device)");
        // The source is cheap to regenerate; dumped beside the cubin the engine writes.
        if (dump_enabled()) {
            const std::string source = sm90_ ? generate_sm90_gemm(p_, *sm90_).source
                                             : generate_sm80_gemm(p_, recipe_).source;
            dump_artifact(meta.key, "cu", source.data(), source.size());
        }
        const Workspace sm80_workspace{static_cast<size_t>(recipe_.workspace_bytes(p_)),
                                       static_cast<size_t>(recipe_.workspace_counter_bytes(p_))};
        return std::make_shared<CudaKernel>(std::move(meta), device_, artifact, p_, target_, sm90_,
                                            sm90_ ? Workspace{} : sm80_workspace);
    }

private:
    Problem p_;
    plan::CudaGemmPlan recipe_;
    std::optional<plan::Sm90GemmPlan> sm90_;
    plan::CudaTarget target_;
    std::shared_ptr<const Device> device_;  // null: compile-only
};

std::string nvrtc_version_text() {
    const NvrtcApi* n = nvrtc();
    return n ? std::to_string(n->version) : "none";
}

class CudaBackend final : public Backend {
public:
    // A device backend (device set) or a compile-only one (device null, gpu describes the assumed chip).
    CudaBackend(std::string device_name, plan::CudaTarget target, std::shared_ptr<const Device> device,
                const hw::GpuInfo* gpu)
        : device_name_(std::move(device_name)), target_(std::move(target)), device_(std::move(device)) {
        if (gpu != nullptr) gpu_ = *gpu;
        // Everything that changes the cubin: arch, what the planner read off the chip, the compiler.
        // The driver version is left out on purpose: it does not change the cubin, and a compile-only
        // backend (no driver) must produce the same fingerprint as the device it pre-builds for.
        fingerprint_ = "cuda arch=" + target_.arch + " sms=" + std::to_string(target_.sm_count) +
                       " smem=" + std::to_string(target_.smem_per_block_optin) + " nvrtc=" + nvrtc_version_text();
    }

    const std::string& device() const override { return device_name_; }
    const std::string& fingerprint() const override { return fingerprint_; }

    std::unique_ptr<Plan> plan(const Problem& p) const override {
        try {
            std::string why_not_sm90;
            if (plan::sm90_applies(p, target_, &why_not_sm90))
                return std::make_unique<CudaPlan>(p, plan::plan_sm90_gemm(p, target_), target_, device_);
            // fp8 has only the Hopper kernel: say why that one cannot take it.
            if (dtype_is_fp8(p.a_type) && target_.arch == "sm_90a")
                fail(JITMM_STATUS_UNSUPPORTED, "cuda: fp8 runs on the Hopper (wgmma) kernel only, which cannot take "
                                               "this problem: " + why_not_sm90);
            return std::make_unique<CudaPlan>(p, plan::plan_cuda_gemm(p, target_), target_, device_);
        } catch (const Error& e) {
            if (e.status() != JITMM_STATUS_UNSUPPORTED) throw;
            fail(JITMM_STATUS_UNSUPPORTED, device_name_ + " (" + target_.arch + "): " + e.what() +
                                               "; problem " + jitmm::describe(p));
        }
    }

    std::vector<std::string> tune_candidates(const Problem& p) const override {
        return plan::sm90_tune_candidates(p, target_);
    }

    std::unique_ptr<Plan> plan_with_choice(const Problem& p, const std::string& choice) const override {
        if (choice.rfind("sm90:", 0) == 0 && plan::sm90_applies(p, target_))
            return std::make_unique<CudaPlan>(p, plan::plan_sm90_gemm(p, target_, choice), target_, device_);
        return plan(p);
    }

    // CUDA events around each launch on the caller's stream; the median.
    double time_runs(const Kernel& kernel, const RunArgs& args, int runs) const override {
        if (!device_) fail(JITMM_STATUS_NO_DEVICE, "cuda: compile-only backend cannot time kernels");
        const DriverApi& drv = device_->drv();
        ContextScope scope(*device_);
        CUstream stream = static_cast<CUstream>(args.stream);
        CUevent start = nullptr, stop = nullptr;
        check(drv.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
        const CUresult made = drv.cuEventCreate(&stop, CU_EVENT_DEFAULT);
        if (made != CUDA_SUCCESS) drv.cuEventDestroy(start);
        check(made, "cuEventCreate");
        std::vector<double> us;
        try {
            kernel.run(args);  // warm (module load, clocks)
            for (int i = 0; i < std::max(1, runs); ++i) {
                check(drv.cuEventRecord(start, stream), "cuEventRecord");
                kernel.run(args);
                check(drv.cuEventRecord(stop, stream), "cuEventRecord");
                check(drv.cuEventSynchronize(stop), "cuEventSynchronize");
                float ms = 0;
                check(drv.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
                us.push_back(1000.0 * ms);
            }
        } catch (...) {
            drv.cuEventDestroy(start);
            drv.cuEventDestroy(stop);
            throw;
        }
        drv.cuEventDestroy(start);
        drv.cuEventDestroy(stop);
        std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
        return us[us.size() / 2];
    }

    std::string describe(jitmm_report_format format) const override {
        const NvrtcApi* n = nvrtc();
        const std::string compiler = n ? std::to_string(n->version / 1000) + "." +
                                             std::to_string(n->version % 1000 / 10) + " (" + n->library + ")"
                                       : nvrtc_unavailable_reason();
        if (!device_) {
            if (format == JITMM_REPORT_JSON)
                return "{\"device\": \"" + device_name_ + "\", \"compile_only\": true, \"arch\": \"" + target_.arch +
                       "\", \"sm_count\": " + std::to_string(target_.sm_count) + ", \"nvrtc\": \"" +
                       (n ? std::to_string(n->version) : std::string("none")) + "\"}";
            return "device: " + device_name_ + " (compile only, no GPU)\narch: " + target_.arch +
                   "\nassumed SMs: " + std::to_string(target_.sm_count) + "\nNVRTC: " + compiler + "\n";
        }
        hw::GpuProbe one;
        one.driver_loaded = true;
        one.driver_version = hw::gpu_probe().driver_version;
        one.devices.push_back(gpu_);
        if (format == JITMM_REPORT_JSON) return hw::gpu_report_json(one);
        return hw::gpu_report_text(one) + "NVRTC\n  " + compiler + "\n";
    }

private:
    std::string device_name_;
    plan::CudaTarget target_;
    std::shared_ptr<const Device> device_;
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
    const hw::GpuInfo& gpu = probe.devices[options.cuda_ordinal];
    if (gpu.cc_major < 8)
        fail(JITMM_STATUS_UNSUPPORTED, options.device + " (" + gpu.name + ", " + gpu.arch_name() +
                                           "): jitmm's CUDA kernels need compute capability 8.0 or newer");
    auto device = std::make_shared<const Device>(options.cuda_ordinal);
    return std::make_unique<CudaBackend>(options.device, plan::cuda_target_from_gpu(gpu), std::move(device), &gpu);
}

std::unique_ptr<Backend> make_cuda_compile_only_backend(const std::string& arch) {
    return std::make_unique<CudaBackend>("cuda-compile-only:" + arch, plan::cuda_target_from_arch(arch), nullptr,
                                         nullptr);
}

}  // namespace jitmm::cuda
