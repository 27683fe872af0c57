#include "load.hpp"

#include "timing.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

namespace jitmm::bench {

LoadMeter::LoadMeter() { ok_ = read(&busy_s_, &self_s_, &wall_s_); }

bool LoadMeter::read(double* busy_s, double* self_s, double* wall_s) const {
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    if (tick <= 0) return false;
    // /proc/stat "cpu  user nice system idle iowait irq softirq steal ...": all CPUs together, in ticks.
    std::ifstream stat("/proc/stat");
    std::string label;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (!(stat >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || label != "cpu") {
        return false;
    }
    // /proc/self/stat: utime and stime are fields 14 and 15, after the ")" that closes the command name.
    std::ifstream self("/proc/self/stat");
    std::string line;
    if (!std::getline(self, line)) return false;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) return false;
    std::istringstream fields(line.substr(close + 2));
    std::string skip;
    for (int field = 3; field < 14; ++field) fields >> skip;
    double utime = 0, stime = 0;
    if (!(fields >> utime >> stime)) return false;
    *busy_s = (user + nice + system + irq + softirq + steal) / tick;
    *self_s = (utime + stime) / tick;
    *wall_s = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    return true;
}

double LoadMeter::other_cpus() {
    double busy = 0, self = 0, wall = 0;
    if (!ok_ || !read(&busy, &self, &wall)) return NAN;
    const double other = std::max(0.0, (busy - busy_s_) - (self - self_s_));
    const double interval = wall - wall_s_;
    busy_s_ = busy;
    self_s_ = self;
    wall_s_ = wall;
    return interval > 0 ? other / interval : NAN;
}

}  // namespace jitmm::bench
