// JITMM_RECORD=FILE: every kernel a process had to create (a memory-cache miss, whether it was then compiled
// or loaded from the disk cache) is appended to FILE as a shape-file row (core/shape_csv.hpp), so that
// `jitmm-warmup --shapes FILE` can prebuild exactly what production needed, on any machine. Disk hits are
// recorded too: the file should name the whole working set, not what happened to be missing locally.
//
// The header is written (under flock) when the file is new or empty; each row is one write() on an
// O_APPEND descriptor, so rows of concurrent processes never interleave. A process records each key once.
#pragma once

#include "core/key.hpp"
#include "core/problem.hpp"

#include <jitmm/jitmm.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

namespace jitmm {

// The desc that problem_from_desc turns back into p (leading dimensions written out, strides only
// when batched).
jitmm_matmul_desc desc_from_problem(const Problem& p);

class Recorder {
public:
    // The process-wide recorder for path, shared by every engine that records there (and kept until the
    // process exits); null for "".
    static std::shared_ptr<Recorder> for_path(const std::string& path);
    ~Recorder();
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    // Appends p's row (once per key). Never throws: a failure is a one-time warning.
    void record(const KernelKey& key, const Problem& p, const std::string& device) noexcept;

private:
    explicit Recorder(std::string path) : path_(std::move(path)) {}
    bool ensure_open_locked();

    const std::string path_;
    std::mutex mutex_;
    int fd_ = -1;
    bool failed_ = false;
    std::unordered_set<KernelKey, KernelKeyHasher> recorded_;
};

}  // namespace jitmm
