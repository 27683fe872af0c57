// What else ran on the machine while a shape was measured: the CPU time of everything but this process
// (including a hypervisor's steal time), from /proc. On a shared machine this says which numbers to trust:
// a 2-thread result measured while another process held a CPU is not a 2-thread result.
#pragma once

namespace jitmm::bench {

class LoadMeter {
public:
    LoadMeter();  // starts the interval
    // Average number of CPUs busy with other work since construction (or the last call); NaN without /proc.
    double other_cpus();

private:
    bool read(double* busy_s, double* self_s, double* wall_s) const;
    double busy_s_ = 0.0, self_s_ = 0.0, wall_s_ = 0.0;
    bool ok_ = false;
};

}  // namespace jitmm::bench
