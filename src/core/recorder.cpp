#include "core/recorder.hpp"

#include "core/shape_csv.hpp"
#include "core/warning.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace jitmm {

namespace {

bool write_whole(int fd, const std::string& text) {
    // One write() per row: with O_APPEND the kernel places it at the end in one piece.
    ssize_t n;
    while ((n = ::write(fd, text.data(), text.size())) < 0 && errno == EINTR) {
    }
    return n == static_cast<ssize_t>(text.size());
}

}  // namespace

jitmm_matmul_desc desc_from_problem(const Problem& p) {
    jitmm_matmul_desc d{};
    d.struct_size = sizeof d;
    d.m = p.m;
    d.n = p.n;
    d.k = p.k;
    d.batch_count = p.batch;
    if (p.batch > 1) {
        d.stride_a = p.stride_a;
        d.stride_b = p.stride_b;
        d.stride_c = p.stride_c;
    }
    d.a_type = p.a_type;
    d.b_type = p.b_type;
    d.c_type = p.c_type;
    d.trans_a = p.trans_a ? 1 : 0;
    d.trans_b = p.trans_b ? 1 : 0;
    d.lda = p.lda;
    d.ldb = p.ldb;
    d.ldc = p.ldc;
    d.alpha = p.alpha;
    d.beta = p.beta;
    static constexpr jitmm_epilogue kPlain[] = {JITMM_EPILOGUE_NONE, JITMM_EPILOGUE_RELU, JITMM_EPILOGUE_GELU_TANH,
                                                JITMM_EPILOGUE_GELU_ERF, JITMM_EPILOGUE_SILU};
    static constexpr jitmm_epilogue kBiased[] = {JITMM_EPILOGUE_BIAS, JITMM_EPILOGUE_BIAS_RELU,
                                                 JITMM_EPILOGUE_BIAS_GELU_TANH, JITMM_EPILOGUE_BIAS_GELU_ERF,
                                                 JITMM_EPILOGUE_BIAS_SILU};
    const int act = static_cast<int>(p.activation);
    d.epilogue = p.bias == BiasKind::none ? kPlain[act] : kBiased[act];
    d.bias_type = p.bias == BiasKind::none ? JITMM_DTYPE_F32 : p.bias_type;
    d.bias_layout = p.bias == BiasKind::per_row ? JITMM_BIAS_PER_ROW : JITMM_BIAS_PER_COLUMN;
    // ScaleMode and jitmm_scale_mode share their values (none, per_tensor, per_row, per_column, per_block).
    d.a_scale_mode = static_cast<jitmm_scale_mode>(p.a_scale);
    d.b_scale_mode = static_cast<jitmm_scale_mode>(p.b_scale);
    d.a_zero_point = p.a_zero_point;
    return d;
}

std::shared_ptr<Recorder> Recorder::for_path(const std::string& path) {
    if (path.empty()) return nullptr;
    // Kept for the process's lifetime (leaked on purpose: usable during static destruction), so that
    // "each key once per process" holds even when engines come and go.
    static std::mutex mutex;
    static auto* recorders = new std::map<std::string, std::shared_ptr<Recorder>>;
    std::lock_guard<std::mutex> lock(mutex);
    std::shared_ptr<Recorder>& r = (*recorders)[path];
    if (!r) r.reset(new Recorder(path));
    return r;
}

Recorder::~Recorder() {
    if (fd_ >= 0) ::close(fd_);
}

bool Recorder::ensure_open_locked() {
    if (fd_ >= 0) return true;
    if (failed_) return false;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    bool ok = fd_ >= 0;
    int err = ok ? 0 : errno;
    if (ok && ::flock(fd_, LOCK_EX) == 0) {
        // Under the lock, so that of N processes starting on a new file exactly one writes the header.
        struct stat st;
        if (::fstat(fd_, &st) == 0 && st.st_size == 0 && !write_whole(fd_, shape_csv_header())) {
            ok = false;
            err = errno;
        }
        ::flock(fd_, LOCK_UN);
    }
    if (!ok) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        failed_ = true;
        warn_once("record:" + path_, "JITMM_RECORD: cannot write " + path_ + " (" + std::strerror(err) +
                                         "); kernels are not recorded");
    }
    return ok;
}

void Recorder::record(const KernelKey& key, const Problem& p, const std::string& device) noexcept {
    try {
        const std::string row = shape_csv_row(desc_from_problem(p), device);
        std::lock_guard<std::mutex> lock(mutex_);
        if (recorded_.count(key) || !ensure_open_locked()) return;
        if (!write_whole(fd_, row)) {
            warn_once("record-write:" + path_,
                      "JITMM_RECORD: cannot append to " + path_ + " (" + std::strerror(errno) + ")");
            return;
        }
        recorded_.insert(key);
    } catch (const std::exception& e) {
        warn_once("record-row:" + path_, std::string("JITMM_RECORD: cannot record a kernel: ") + e.what());
    }
}

}  // namespace jitmm
