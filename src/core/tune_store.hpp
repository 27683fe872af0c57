// TuneStore: the tuning results of one backend target, kept beside the kernel cache (<cache>/tune-v1/
// <fingerprint hash>.tsv). jitmm_tune (and jitmm-bench --tune) time the planner's candidate recipes for a
// problem and record the fastest here; every later plan of that problem, in this process or a later one,
// starts from it. One line per problem: "<problem hash> <choice> <microseconds>"; rewritten atomically
// (temp file + rename), the last writer of a problem wins.
#pragma once

#include "core/problem.hpp"

#include <map>
#include <mutex>
#include <string>

namespace jitmm {

class TuneStore {
public:
    // file "" keeps results in memory only (no disk cache).
    explicit TuneStore(std::string file);

    // The recorded choice for p ("" when none).
    std::string lookup(const Problem& p) const;
    // Records (and persists, when there is a file) the winner for p. Failures to write are warned once and
    // leave the result in memory.
    void record(const Problem& p, const std::string& choice, double microseconds);

    const std::string& file() const { return file_; }
    size_t size() const;

private:
    struct Entry {
        std::string choice;
        double microseconds = 0;
    };
    void load();
    void save_locked() const;

    std::string file_;
    mutable std::mutex mutex_;
    std::map<std::string, Entry> entries_;  // problem hash (hex) -> result
};

// Where the store of a target lives under a cache folder.
std::string tune_store_path(const std::string& cache_folder, const std::string& fingerprint);

}  // namespace jitmm
