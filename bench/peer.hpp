// Peers: other libraries timed on the same shapes, on the same inputs, with the same thread count and the same
// median method, in the same run (columns <peer>_GFLOP/s and ratio_vs_<peer>).
//
// A peer lives in its own file (peer_onednn.cpp, peer_openblas.cpp, peer_libxsmm.cpp, peer_cublas.cpp, ...) and
// registers itself with a static PeerRegistrar, so adding one touches neither this registry nor main. A peer
// whose library was not found at configure time (no JITMM_HAVE_<PEER>) still registers, with create ==
// nullptr and the reason, so that `--peer NAME` is accepted and the table says "n/a" and why.
#pragma once

#include "problem.hpp"
#include "timing.hpp"

#include <jitmm/jitmm.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace jitmm::bench {

// What a peer gets for one shape.
struct PeerShape {
    const jitmm_matmul_desc* desc = nullptr;
    const HostProblem* inputs = nullptr;  // the A and B copies, bias and C that jitmm runs on; peers write C
    std::string device;                   // "cpu", "cuda:0", ...
    int threads = 1;                      // the thread count jitmm's engine uses: CPU peers use the same
};

class Peer {
public:
    virtual ~Peer() = default;
    // The ways this peer can compute the shape (oneDNN: "matmul" and "sgemm"). The bench times each with the
    // same method and reports the fastest, naming it (each path's time is in the JSON and under the table
    // row). Empty, with *why set, when the peer cannot run the shape at all (the table shows "n/a"); with
    // paths, *why may name the ones left out, as "<path> n/a: <reason>".
    virtual std::vector<std::string> paths(const PeerShape& shape, std::string* why) = 0;
    // Sets up `path` for the shape outside the timed loop: thread count, primitive creation, JIT dispatch,
    // uploads. Throws jitmm::Error when it cannot; with JITMM_STATUS_UNSUPPORTED the path is reported n/a
    // with the message (the library has no way to run it, e.g. no algorithm for this layout), not failed. With --check, inputs->c_buf already holds the C the check
    // starts from (its initial values, or poison when beta == 0): a device peer uploads it here.
    virtual void prepare(const PeerShape& shape, const std::string& path) = 0;
    // One call on copy `copy` of A and B (0 <= copy < inputs->copies), writing C. Timed.
    virtual void run(int64_t copy) = 0;
    // Waits for what run() started (a GPU peer syncs its stream); timed with each run. Host peers: nothing.
    virtual void finish() {}
    // A device peer times itself as jitmm's device runs are timed (time_on_stream in measure_cuda.hpp: CUDA
    // events around each run on its stream, rotating its device copies): returns true with *t filled.
    // false (the default): the bench times run() + finish() on the host clock.
    virtual bool time_on_device(const TimingPolicy& policy, Timing* t) {
        (void)policy;
        (void)t;
        return false;
    }
    // After run() + finish() for --check: leaves the result in inputs->c_buf (a GPU peer downloads it).
    virtual void fetch_result() {}
    // How the prepared path differs from a fused call, for the reader ("" when it does not): e.g. an
    // epilogue done as a separate pass over C.
    virtual std::string remark() const { return ""; }
    // How long the library's worker threads keep spinning after a call (OpenBLAS: up to ~0.1 s). The bench
    // waits this long after timing the peer so that the next measurement does not share the cores with them.
    virtual double spin_after_s() const { return 0.0; }
};

struct PeerInfo {
    const char* name = "";            // the --peer spelling and column suffix: "onednn"
    const char* title = "";           // for notes: "oneDNN"
    int order = 0;                    // position in `--peer all` and among the columns
    std::unique_ptr<Peer> (*create)() = nullptr;  // nullptr: not built into this jitmm-bench
    const char* absent_reason = "";   // why create is nullptr, e.g. "not built (libdnnl-dev missing at configure time)"
};

// A peer file defines one of these at namespace scope: static const PeerRegistrar kRegistrar{info};
class PeerRegistrar {
public:
    explicit PeerRegistrar(const PeerInfo& info);
};

// Every registered peer, built or not, in `order`.
const std::vector<PeerInfo>& peer_registry();
// nullptr for a name nobody registered.
const PeerInfo* find_peer(const std::string& name);

// For peers whose library has no fused epilogue: bias and activation as one separate pass over one batch of
// an f32 C, written as plainly as a framework would (what such a peer really costs).
void apply_epilogue_pass(const jitmm_matmul_desc& d, float* c, const float* bias);

}  // namespace jitmm::bench
