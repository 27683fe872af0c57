// The on-disk kernel cache: artifacts that survive the process, so that a restart (or a fleet machine fed
// by jitmm-warmup) loads kernels instead of compiling them.
//
// Layout: <folder>/v<format-version>/<hash of the target fingerprint>/<key hash>.jk, one file per kernel
// (format in cache_entry.hpp), plus "fingerprint.txt" naming the target, "locks" (the per-key locks) and
// <folder>/v<N>/stats (lifetime counters, for jitmm-warmup --stats).
//
// Folders: JITMM_CACHE_DIR (or config.cache_dir) lists one or more, separated by ':'. All are searched in
// order; only the first is written (a read-only shared cache built by CI behind a private writable one).
//
// Safety:
//   - Writes go to a temp file in the same folder, then rename: readers see a whole entry or none. No fsync:
//     an entry a crash leaves torn fails its checksum and is regenerated, so durability buys nothing but a
//     recompile, and fsync cost 300-500 us of every cache miss (x86 kernels compile in tens of us).
//   - Every entry is verified (magic, version, sizes, checksum, full key bytes) before it is handed out;
//     a bad one is counted as a reject, ignored and regenerated (the rewrite replaces it).
//   - Folders are created 0700. A folder (or entry) not owned by this user (or root), or writable by group
//     or others, is refused with a warning printed once to stderr (core/warning.hpp), and the run goes on
//     without it: a shared writable cache is a code-injection path. Entries are read with O_NOFOLLOW.
//   - A folder that cannot be written (read-only, disk full): a warning, and kernels stay in memory.
//   - A per-key file lock (an OFD byte-range lock in the target folder's "locks" file, see KeyLock): among
//     processes (or engines) needing the same new kernel one compiles, the others wait for the lock and
//     then read its entry (single-flight among one engine's threads is KernelCache's job).
// Bounds: JITMM_CACHE_MAX_MB (default 1024) on the first folder, least-recently-used first (a hit touches
// the entry's mtime); after a write that takes this process's running total over the cap, the folder is
// rescanned and the oldest entries deleted down to 90% of the cap (the headroom avoids a rescan on every
// write); the total is also rescanned every 30 s of writing, as other processes write to the folder too.
// Folders of older format versions (v<N-1>, ...) are deleted when a writer opens the cache; entries of
// older generator versions can never be hit again (the version is in the key) and age out.
#pragma once

#include "core/artifact.hpp"
#include "core/cache_entry.hpp"
#include "core/key.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace jitmm {

constexpr uint64_t kDefaultCacheMaxBytes = uint64_t(1024) << 20;

// JITMM_CACHE_MAX_MB (a positive decimal, fractions allowed) in bytes, or the default when unset/empty;
// throws jitmm::Error(JITMM_STATUS_INVALID_VALUE) naming the variable on a bad value.
uint64_t cache_max_bytes_from_env();

struct DiskCacheCounters {
    int64_t hits = 0, misses = 0, rejects = 0, writes = 0, evictions = 0, write_errors = 0;
};

struct DiskCacheStats {
    int64_t entries = 0, bytes = 0;  // on disk now: the first usable folder, current format, every target
    DiskCacheCounters process;       // this DiskCache object's events
};

// One entry file found by a scan.
struct CacheFile {
    std::string path;
    int64_t size = 0;
    timespec mtime{};
};

class DiskCache {
public:
    struct Options {
        std::string dirs;          // ':'-separated folder list; empty components are skipped
        std::string fingerprint;   // the backend's target fingerprint; "" = folder-level use only (tools)
        uint64_t max_bytes = kDefaultCacheMaxBytes;
    };

    // Null when dirs is empty or no folder is usable (the reason, already warned about, goes to *why).
    static std::unique_ptr<DiskCache> open(const Options& options, std::string* why = nullptr);
    ~DiskCache();  // adds this object's counters to the first folder's lifetime stats file
    DiskCache(const DiskCache&) = delete;
    DiskCache& operator=(const DiskCache&) = delete;

    // Lookup-or-build: search every folder; on a miss take the key's lock in the writable folder, search it
    // again (another process may have just written it), else build() and store. *from_disk tells which.
    // build's exceptions propagate (nothing is stored). Thread-safe.
    Artifact fetch_or_build(const KernelKey& key, const std::function<Artifact()>& build, bool* from_disk);
    // Entry for key from any folder (verified); false if none. Counts hits and rejects, not misses.
    bool load(const KernelKey& key, Artifact* artifact);
    // Writes key's entry into the first folder (atomic) and enforces the cap; false (warned) on failure.
    bool store(const KernelKey& key, const Artifact& artifact);
    // A verified entry that the backend's loader still refused: counted as a reject.
    void reject_loaded(const KernelKey& key, const std::string& why);

    bool writable() const { return writable_.load(); }
    const std::string& fingerprint() const { return fingerprint_; }
    const std::vector<std::string>& folders() const { return folders_; }  // the usable ones, in search order
    uint64_t max_bytes() const { return max_bytes_; }
    std::string describe() const;  // "folders: A (writable), B (read-only); cap 1024 MiB"
    DiskCacheStats stats() const;
    DiskCacheCounters lifetime_counters() const;  // first folder's stats file (other processes' flushed events)

    // Folder-level operations for jitmm-warmup (every target, current format version).
    std::vector<CacheFile> list_entries(size_t folder_index) const;
    // Verifies an entry's bytes and writes it into the first folder under the name its key gives it.
    enum class ImportOutcome { written, already_present, write_failed };
    EntryStatus import_entry(const uint8_t* data, size_t size, ImportOutcome* outcome);
    // Deletes the least recently used entries of the first folder until at most target bytes remain.
    int64_t evict_to(uint64_t target_bytes);

private:
    DiskCache() = default;
    struct Folder;
    class KeyLock;
    bool find_in(const Folder& folder, const KernelKey& key, Artifact* artifact, bool count_rejects);
    bool write_entry(const std::string& target_dir, const std::string& name, const std::vector<uint8_t>& bytes);
    void after_write(int64_t bytes);
    void flush_lifetime_counters();

    std::vector<std::string> folders_;
    std::vector<std::unique_ptr<Folder>> folder_info_;
    std::string fingerprint_, fingerprint_dir_name_;
    uint64_t max_bytes_ = kDefaultCacheMaxBytes;
    std::atomic<bool> writable_{false};

    std::atomic<int64_t> hits_{0}, misses_{0}, rejects_{0}, writes_{0}, evictions_{0}, write_errors_{0};
    std::mutex evict_mutex_;
    bool scanned_ = false;         // under evict_mutex_
    uint64_t bytes_estimate_ = 0;  // under evict_mutex_: bytes at the last scan plus this process's writes since
    std::chrono::steady_clock::time_point last_scan_{};  // under evict_mutex_
};

}  // namespace jitmm
