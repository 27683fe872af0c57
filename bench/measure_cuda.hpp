// jitmm-bench on a CUDA device: the host problem's inputs uploaded (rotated over copies that together exceed
// twice the L2, so timings are not L2 hits), C poisoned for the check, runs timed with CUDA events on a
// non-blocking stream, the median reported. The check downloads C and compares on the host.
#pragma once

#include "measure.hpp"
#include "problem.hpp"

#include <jitmm/jitmm.h>

#include <functional>

namespace jitmm::bench {

// check_host_c: compares problem.c_buf (batch results, downloaded here) with the reference.
void measure_on_cuda(const jitmm_kernel* kernel, const Options& options, HostProblem& problem, const HostBuffer& c0,
                     const std::function<CheckResult()>& check_host_c, ShapeResult* r);

}  // namespace jitmm::bench
