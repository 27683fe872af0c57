// jitmm-bench on a CUDA device: the host problem's inputs uploaded (rotated over copies that together exceed
// twice the L2, so timings are not L2 hits), C poisoned for the check, runs timed with CUDA events on a
// non-blocking stream, the median reported. The check downloads C and compares on the host.
#pragma once

#include "measure.hpp"
#include "problem.hpp"

#include "timing.hpp"

#include <jitmm/jitmm.h>

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <string>

namespace jitmm::bench {

// The ordinal in "cuda", "cuda:N" (0 for "cuda").
int cuda_ordinal(const std::string& device);

// How many device copies of A and B the timed runs rotate over: enough that one pass exceeds twice the
// device's L2 (at most 16). jitmm and the device peers use the same count.
int64_t device_rotation_copies(const HostProblem& problem, const std::string& device);

// The device timing method, shared by jitmm and the device peers: 3 warm-up runs, then batches of 20 runs,
// each bracketed by CUDA events on `stream`, until policy.repeats (at least 20) runs and policy.min_time_s
// of run time; the median sample. run(i) launches run number i (rotate copies by i). Needs the device's
// context current. Throws jitmm::Error on a driver failure.
Timing time_on_stream(CUstream stream, const TimingPolicy& policy, const std::function<void(int64_t)>& run);

// check_host_c: compares problem.c_buf (batch results, downloaded here) with the reference.
// jitmm_tune on device copies of problem's inputs (one copy, on a stream of its own); the winner and the
// candidates' lines land in r->tuned and r->tune_log, failures in r->error.
void tune_on_cuda(jitmm_engine* engine, HostProblem& problem, ShapeResult* r);

void measure_on_cuda(const jitmm_kernel* kernel, const Options& options, HostProblem& problem, const HostBuffer& c0,
                     const std::function<CheckResult()>& check_host_c, ShapeResult* r);

}  // namespace jitmm::bench
