#include "measure.hpp"
#include "measure_cuda.hpp"

#include "core/error.hpp"
#include "problem.hpp"
#include "timing.hpp"

#include <cstring>
#include <exception>
#include <new>
#include <thread>

namespace jitmm::bench {

std::string status_message(jitmm_status status) {
    const std::string detail = jitmm_last_error_message();
    std::string text = jitmm_status_string(status);
    if (!detail.empty()) text += ": " + detail;
    return text;
}

EnginePool::~EnginePool() {
    for (auto& entry : engines_) jitmm_engine_destroy(entry.second.engine);
}

jitmm_engine* EnginePool::get(const std::string& device, std::string* error) {
    auto it = engines_.find(device);
    if (it == engines_.end()) {
        Entry entry;
        jitmm_engine_config config;
        jitmm_engine_config_init(&config);
        config.device = device.c_str();
        config.num_threads = threads_;
        const jitmm_status st = jitmm_engine_create(&config, &entry.engine);
        if (st != JITMM_STATUS_SUCCESS) {
            entry.engine = nullptr;
            entry.error = "engine for '" + device + "': " + status_message(st);
        }
        it = engines_.emplace(device, entry).first;
    }
    *error = it->second.error;
    return it->second.engine;
}

Peer* PeerSet::get(const PeerInfo& info) {
    if (info.create == nullptr) return nullptr;
    std::unique_ptr<Peer>& peer = peers_[info.name];
    if (!peer) peer = info.create();
    return peer.get();
}

namespace {

bool is_host_device(const std::string& device) { return device == "cpu"; }

// Releases a kernel handle on every way out of run_shape.
struct KernelHandle {
    jitmm_kernel* kernel = nullptr;
    ~KernelHandle() { jitmm_kernel_release(kernel); }
};

// C as a check run must find it: poisoned when beta == 0 (it must not be read), else the initial values.
void reset_c(const HostProblem& problem, const jitmm_matmul_desc& d, const HostBuffer& c0) {
    if (d.beta != 0.0f)
        std::memcpy(problem.c_buf.data(), c0.data(), c0.bytes());
    else
        fill_poison(problem.c.type, problem.c_buf.data(), problem.c.elements);
}

// (On a device, f32 inputs are multiplied as tf32 by jitmm's kernels and by cuBLASLt's f32 path alike.)
CheckResult check_output(const jitmm_matmul_desc& d, const HostProblem& problem, const HostBuffer& c0,
                         const std::string& device) {
    CheckInputs in{&d,
                         problem.a_ptr(0),
                         problem.b_ptr(0),
                         c0.data(),
                         problem.c_buf.data(),
                         problem.bias_buf.data(),
                         problem.a_scales(),
                         problem.b_scales()};
    in.tf32 = !is_host_device(device);
    return check_against_reference(in);
}

// Every path of one peer: set up, check (with --check), time; the fastest usable path is the peer's result.
PeerResult measure_peer(const std::string& name, PeerSet* peers, const PeerShape& shape, const Options& options,
                        const HostBuffer& c0, double jitmm_seconds) {
    PeerResult pr;
    pr.name = name;
    const PeerInfo* info = find_peer(name);
    Peer* peer = info ? peers->get(*info) : nullptr;
    if (peer == nullptr) {
        pr.note = info ? info->absent_reason : "unknown peer";
        return pr;
    }
    const jitmm_matmul_desc& d = *shape.desc;
    const HostProblem& problem = *shape.inputs;
    std::vector<std::string> paths;
    std::string why;
    try {
        paths = peer->paths(shape, &why);
    } catch (const std::exception& e) {
        paths.clear();
        why = e.what();
    }
    // No path at all: "n/a: <why>". Some paths: why names the ones left out ("<path> n/a: <reason>").
    if (!why.empty()) pr.note = paths.empty() ? "n/a: " + why : why;
    for (const std::string& path : paths) {
        PeerPathResult pp;
        pp.path = path;
        try {
            // C is set for the check before prepare(), so that a device peer uploads the C the check expects.
            if (options.check) reset_c(problem, d, c0);
            try {
                peer->prepare(shape, path);
            } catch (const Error& e) {
                if (e.status() != JITMM_STATUS_UNSUPPORTED) throw;
                // The library cannot run this path for the shape: n/a, said in the note, not a failure.
                pr.note += std::string(pr.note.empty() ? "" : "; ") + path + " n/a: " + e.what();
                continue;
            }
            pp.remark = peer->remark();
            if (options.check) {
                peer->run(0);
                peer->finish();
                peer->fetch_result();
                pp.check = check_output(d, problem, c0, shape.device);
                pp.checked = true;
            }
            Timing t;
            if (!peer->time_on_device(options.timing, &t)) {
                int64_t run_index = 0;
                t = time_runs(options.timing, [&] {
                    peer->run(run_index++ % problem.copies);
                    peer->finish();
                    return true;
                });
            }
            pp.runs = t.runs;
            pp.median_us = t.median_s * 1e6;
            pp.gflops = t.median_s > 0 ? flops(d) / t.median_s * 1e-9 : NAN;
            if (const double s = peer->spin_after_s(); s > 0) {
                std::this_thread::sleep_for(std::chrono::duration<double>(s));
            }
        } catch (const std::bad_alloc&) {
            pp.error = "out of host memory";
        } catch (const std::exception& e) {
            pp.error = e.what();
        }
        pr.paths.push_back(pp);
    }
    // A path that failed its check or did not run cannot be the one the ratio compares against.
    for (size_t i = 0; i < pr.paths.size(); ++i) {
        const PeerPathResult& pp = pr.paths[i];
        if (!pp.error.empty() || std::isnan(pp.median_us) || (pp.checked && !pp.check.ok)) continue;
        if (pr.best < 0 || pp.median_us < pr.best_path()->median_us) pr.best = static_cast<int>(i);
    }
    if (const PeerPathResult* best = pr.best_path(); best && jitmm_seconds > 0) {
        pr.ratio = best->median_us * 1e-6 / jitmm_seconds;
    }
    return pr;
}

}  // namespace

void run_shape(jitmm_engine* engine, const Options& options, int threads, PeerSet* peers, ShapeResult* r) {
    const jitmm_matmul_desc& d = r->desc;

    // --tune: the candidates are timed first, so that the kernel created below is the winner.
    if (options.tune) {
        HostProblem inputs(d);
        if (!is_host_device(r->device)) {
            tune_on_cuda(engine, inputs, r);
            if (!r->error.empty()) return;
        } else {
            const jitmm_matmul_args args = inputs.args(0);
            char first[128] = "";
            size_t required = 0;
            const jitmm_status st = jitmm_tune(engine, &d, &args, first, sizeof first, &required);
            if (st != JITMM_STATUS_SUCCESS) {
                r->error = "tune: " + status_message(st);
                return;
            }
            r->tuned = std::string(first).substr(0, std::string(first).find('\n'));
        }
    }

    // JIT (or disk-cache load) time: the first create of this desc in this process.
    KernelHandle handle;
    const Clock::time_point t0 = Clock::now();
    const jitmm_status created = jitmm_kernel_create(engine, &d, &handle.kernel);
    const double create_s = seconds_since(t0);
    if (created != JITMM_STATUS_SUCCESS) {
        r->error = status_message(created);
        return;
    }
    r->jit_us = create_s * 1e6;
    jitmm_kernel_info info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    if (jitmm_kernel_get_info(handle.kernel, &info) == JITMM_STATUS_SUCCESS) {
        r->generator = info.generator ? info.generator : "";
        r->recipe = info.recipe ? info.recipe : "";
        r->gen_us = info.jit_time_us;
    }

    // Cache-hit lookup: groups of calls so that the clock's own cost is amortized.
    constexpr int kGroups = 100, kPerGroup = 10;
    std::vector<double> groups;
    groups.reserve(kGroups);
    for (int g = 0; g < kGroups; ++g) {
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < kPerGroup; ++i) {
            jitmm_kernel* again = nullptr;
            const jitmm_status st = jitmm_kernel_create(engine, &d, &again);
            if (st != JITMM_STATUS_SUCCESS) {
                r->error = "cache-hit create: " + status_message(st);
                return;
            }
            jitmm_kernel_release(again);
        }
        groups.push_back(seconds_since(start) / kPerGroup);
    }
    r->hit_ns = median(groups) * 1e9;

    HostProblem problem(d);
    r->copies = problem.copies;
    // C as it was filled: what beta scales in every check (jitmm's and each peer's).
    HostBuffer c0;
    if (d.beta != 0.0f) {
        c0 = HostBuffer(problem.c_buf.bytes());
        std::memcpy(c0.data(), problem.c_buf.data(), problem.c_buf.bytes());
    }

    PeerShape shape;
    shape.desc = &d;
    shape.inputs = &problem;
    shape.device = r->device;
    shape.threads = threads;
    if (!is_host_device(r->device)) {
        // jitmm on device buffers with CUDA events; device peers (cuBLASLt) time themselves on the same inputs.
        measure_on_cuda(handle.kernel, options, problem, c0, [&] { return check_output(d, problem, c0, r->device); }, r);
        if (!r->error.empty()) return;
        for (const std::string& name : options.peers)
            r->peers.push_back(measure_peer(name, peers, shape, options, c0, r->median_us * 1e-6));
        return;
    }

    if (options.check) {
        reset_c(problem, d, c0);
        const jitmm_matmul_args args = problem.args(0);
        const jitmm_status st = jitmm_kernel_run(handle.kernel, &args);
        if (st != JITMM_STATUS_SUCCESS) {
            r->error = "run: " + status_message(st);
            return;
        }
        r->check = check_output(d, problem, c0, r->device);
        r->checked = true;
    }

    int64_t run_index = 0;
    const Timing t = time_runs(options.timing, [&]() -> bool {
        const jitmm_matmul_args args = problem.args(run_index++ % problem.copies);
        const jitmm_status st = jitmm_kernel_run(handle.kernel, &args);
        if (st != JITMM_STATUS_SUCCESS) {
            r->error = "run: " + status_message(st);
            return false;
        }
        return true;
    });
    if (!t.ok) return;
    r->runs = t.runs;
    r->median_us = t.median_s * 1e6;
    r->gflops = t.median_s > 0 ? flops(d) / t.median_s * 1e-9 : NAN;

    for (const std::string& name : options.peers) {
        r->peers.push_back(measure_peer(name, peers, shape, options, c0, t.median_s));
    }
}

}  // namespace jitmm::bench
