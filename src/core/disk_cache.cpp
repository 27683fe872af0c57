#include "core/disk_cache.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/warning.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace jitmm {

namespace {

constexpr uint64_t kMaxEntryBytes = uint64_t(1) << 30;  // a larger file is not something we wrote
constexpr double kEvictTargetFraction = 0.9;            // evict down to this share of the cap
constexpr double kRescanSeconds = 30;                    // other processes write too: rescan now and then
constexpr time_t kStaleTempSeconds = 3600;               // a temp file this old belongs to a dead writer
constexpr const char* kEntrySuffix = ".jk";
constexpr const char* kFingerprintFile = "fingerprint.txt";
constexpr const char* kStatsFile = "stats";
constexpr const char* kLocksFile = "locks";

std::string errno_text(int err) { return std::strerror(err); }

std::string version_dir_name(uint32_t version) { return "v" + std::to_string(version); }

bool ends_with(const std::string& s, const char* suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool is_hex_name(const std::string& s) {
    return s.size() == 32 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// "" when a folder or file may be trusted: owned by this user (or root) and not writable by group/others.
std::string distrust(const struct stat& st) {
    const uid_t me = geteuid();
    if (st.st_uid != me && st.st_uid != 0)
        return "it is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(me) +
               ") or root";
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return std::string("it is writable by group or others (mode ") + mode + ")";
    }
    return "";
}

// mkdir -p with 0700 for every folder it creates; true if path is a directory afterwards.
// mkdir -p, creating every missing folder 0700; *err gets the errno of the last failed mkdir.
void make_dirs(const std::string& path, int* err) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) return;
    const size_t slash = path.find_last_of('/');
    if (slash != std::string::npos && slash > 0) make_dirs(path.substr(0, slash), err);
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) *err = errno;
}

bool read_all(int fd, std::vector<uint8_t>* out, size_t size) {
    out->resize(size);
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::pread(fd, out->data() + done, size - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // shorter than fstat said: the decoder reports truncation
        done += static_cast<size_t>(n);
    }
    out->resize(done);
    return true;
}

bool write_all(int fd, const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

// Deletes a folder tree without following symlinks (used on our own stale format-version folders only).
void remove_tree(int parent_fd, const char* name) {
    const int fd = ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        ::unlinkat(parent_fd, name, 0);
        return;
    }
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
        ::close(fd);
        return;
    }
    while (dirent* e = ::readdir(dir)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        struct stat st;
        if (::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) remove_tree(fd, e->d_name);
        else ::unlinkat(fd, e->d_name, 0);
    }
    ::closedir(dir);
    ::unlinkat(parent_fd, name, AT_REMOVEDIR);
}

// v<N> folders with N below the current format: nothing can read them any more.
void remove_old_versions(const std::string& root) {
    DIR* dir = ::opendir(root.c_str());
    if (!dir) return;
    std::vector<std::string> stale;
    while (dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        if (name.size() < 2 || name[0] != 'v' || name.find_first_not_of("0123456789", 1) != std::string::npos ||
            name.size() > 10)
            continue;
        if (std::strtoul(name.c_str() + 1, nullptr, 10) < kDiskFormatVersion) stale.push_back(name);
    }
    for (const std::string& name : stale) {
        verbose_log("disk cache: removing " + root + "/" + name + " (an older cache format)");
        remove_tree(::dirfd(dir), name.c_str());
    }
    ::closedir(dir);
}

const char* kCounterNames[] = {"hits", "misses", "rejects", "writes", "evictions", "write_errors"};
int64_t* counter_fields(DiskCacheCounters& c, int i) {
    int64_t* fields[] = {&c.hits, &c.misses, &c.rejects, &c.writes, &c.evictions, &c.write_errors};
    return fields[i];
}

DiskCacheCounters parse_counters(const std::string& text) {
    DiskCacheCounters c;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        const size_t space = line.find(' ');
        if (space == std::string::npos) continue;
        for (int i = 0; i < 6; ++i)
            if (line.compare(0, space, kCounterNames[i]) == 0)
                *counter_fields(c, i) = std::strtoll(line.c_str() + space + 1, nullptr, 10);
    }
    return c;
}

std::string read_small_file(int fd) {
    std::string text;
    char buf[4096];
    ssize_t n;
    off_t at = 0;
    while ((n = ::pread(fd, buf, sizeof buf, at)) > 0 && text.size() < 65536) {
        text.append(buf, static_cast<size_t>(n));
        at += n;
    }
    return text;
}

}  // namespace

uint64_t cache_max_bytes_from_env() {
    const char* text = std::getenv("JITMM_CACHE_MAX_MB");
    if (!text || !*text) return kDefaultCacheMaxBytes;
    char* end = nullptr;
    errno = 0;
    const double mb = std::strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !std::isfinite(mb) || mb <= 0 || mb > 1e9)
        fail(JITMM_STATUS_INVALID_VALUE,
             std::string("JITMM_CACHE_MAX_MB must be a number of MiB > 0 (fractions allowed), got \"") + text + "\"");
    return std::max<uint64_t>(1, static_cast<uint64_t>(mb * 1048576.0));
}

struct DiskCache::Folder {
    std::string root;
    std::string version_dir;   // <root>/v<N>
    std::string target_dir;    // <root>/v<N>/<fingerprint hash>; "" without a fingerprint
    bool writable = false;
};

// Holds the lock of one key: an open-file-description lock (F_OFD_SETLKW) on one byte of the target
// folder's "locks" file, at an offset taken from the key hash. OFD locks belong to the descriptor, so
// they exclude threads of one process as well as other processes, vanish when a process dies, and work
// on NFS. One shared, never-deleted file instead of a <key>.lock file per key: creating and deleting a
// file per compile cost 100-250 us of journal traffic each on a busy ext4, more than an x86 compile.
// Two keys sharing an offset (2^46 slots) would only wait for each other, never share an entry.
class DiskCache::KeyLock {
public:
    KeyLock(const std::string& locks_path, const Hash128& key_hash) {
        fd_ = ::open(locks_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd_ < 0) return;  // cannot lock (read-only folder, ...): go on unlocked, still correct
        struct flock lock {};
        lock.l_type = F_WRLCK;
        lock.l_whence = SEEK_SET;
        lock.l_start = static_cast<off_t>(key_hash.lo >> 18);
        lock.l_len = 1;
        int r;
        while ((r = ::fcntl(fd_, F_OFD_SETLKW, &lock)) != 0 && errno == EINTR) {
        }
        if (r != 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    ~KeyLock() {
        if (fd_ >= 0) ::close(fd_);  // releases the lock
    }
    KeyLock(const KeyLock&) = delete;
    KeyLock& operator=(const KeyLock&) = delete;
    bool held() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

std::unique_ptr<DiskCache> DiskCache::open(const Options& options, std::string* why) {
    auto set_why = [&](const std::string& text) {
        if (why) *why = text;
    };
    std::vector<std::string> dirs;
    for (size_t pos = 0; pos <= options.dirs.size();) {
        size_t colon = options.dirs.find(':', pos);
        if (colon == std::string::npos) colon = options.dirs.size();
        std::string dir = options.dirs.substr(pos, colon - pos);
        while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
        if (!dir.empty()) dirs.push_back(dir);
        pos = colon + 1;
    }
    if (dirs.empty()) {
        set_why("disabled (empty cache folder list)");
        return nullptr;
    }

    std::unique_ptr<DiskCache> cache(new DiskCache());
    cache->fingerprint_ = options.fingerprint;
    if (!options.fingerprint.empty())
        cache->fingerprint_dir_name_ = hash128(options.fingerprint.data(), options.fingerprint.size()).hex();
    cache->max_bytes_ = options.max_bytes == 0 ? kDefaultCacheMaxBytes : options.max_bytes;
    std::string refusals;

    for (size_t i = 0; i < dirs.size(); ++i) {
        const bool wants_write = i == 0;  // only the first folder listed is ever written
        auto folder = std::make_unique<Folder>();
        folder->root = dirs[i];
        folder->version_dir = dirs[i] + "/" + version_dir_name(kDiskFormatVersion);
        if (!cache->fingerprint_dir_name_.empty())
            folder->target_dir = folder->version_dir + "/" + cache->fingerprint_dir_name_;
        auto refuse = [&](const std::string& path, const std::string& reason) {
            warn_once("refused:" + path, "disk cache folder " + path + " refused: " + reason +
                                             ". A cache that others can write is a code-injection path; going on "
                                             "without it (fix: chmod go-w " + path +
                                             "; it must belong to you or root)");
            refusals += (refusals.empty() ? "" : "; ") + path + ": " + reason;
        };

        int err = 0;
        if (wants_write) make_dirs(folder->root, &err);
        struct stat st;
        if (::stat(folder->root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            if (wants_write) {
                const std::string reason = err ? errno_text(err) : "not a folder";
                warn_once("create:" + folder->root, "disk cache folder " + folder->root + " cannot be created (" +
                                                        reason + "); new kernels stay in memory");
                refusals += (refusals.empty() ? "" : "; ") + folder->root + ": " + reason;
            } else {
                verbose_log("disk cache: skipping " + folder->root + " (no such folder)");
            }
            continue;
        }
        if (std::string reason = distrust(st); !reason.empty()) {
            refuse(folder->root, reason);
            continue;
        }
        // The sub-folders: created when writing, and checked like the root when they exist.
        bool trusted = true;
        for (const std::string* sub : {&folder->version_dir, &folder->target_dir}) {
            if (sub->empty()) continue;
            if (wants_write) ::mkdir(sub->c_str(), 0700);
            if (::lstat(sub->c_str(), &st) != 0) continue;
            if (!S_ISDIR(st.st_mode)) {
                refuse(*sub, "it is not a folder");
                trusted = false;
                break;
            }
            if (std::string reason = distrust(st); !reason.empty()) {
                refuse(*sub, reason);
                trusted = false;
                break;
            }
        }
        if (!trusted) continue;

        if (wants_write) {
            const std::string& leaf = folder->target_dir.empty() ? folder->version_dir : folder->target_dir;
            folder->writable = ::access(leaf.c_str(), W_OK | X_OK) == 0 && ::access(folder->version_dir.c_str(), W_OK) == 0;
            if (!folder->writable) {
                warn_once("readonly:" + folder->root, "disk cache folder " + folder->root +
                                                          " is read-only: cached kernels are read, new ones stay in memory");
            } else {
                remove_old_versions(folder->root);
                if (!folder->target_dir.empty()) {
                    const std::string fp_path = folder->target_dir + "/" + kFingerprintFile;
                    if (::access(fp_path.c_str(), F_OK) != 0)
                        cache->write_entry(folder->target_dir, kFingerprintFile,
                                           std::vector<uint8_t>(options.fingerprint.begin(), options.fingerprint.end()));
                }
            }
            cache->writable_ = folder->writable;
        }
        cache->folders_.push_back(folder->root);
        cache->folder_info_.push_back(std::move(folder));
    }
    if (cache->folders_.empty()) {
        set_why(refusals.empty() ? "no usable cache folder" : "refused: " + refusals);
        return nullptr;
    }
    set_why(refusals.empty() ? "" : "refused: " + refusals);
    verbose_log("disk cache: " + cache->describe());
    return cache;
}

DiskCache::~DiskCache() { flush_lifetime_counters(); }

std::string DiskCache::describe() const {
    std::string text = "folders: ";
    for (size_t i = 0; i < folder_info_.size(); ++i)
        text += (i ? ", " : "") + folder_info_[i]->root + (folder_info_[i]->writable ? " (writable)" : " (read-only)");
    char cap[64];
    std::snprintf(cap, sizeof cap, "; cap %.1f MiB", double(max_bytes_) / 1048576.0);
    return text + cap;
}

bool DiskCache::find_in(const Folder& folder, const KernelKey& key, Artifact* artifact, bool count_rejects) {
    if (folder.target_dir.empty()) return false;
    const std::string path = folder.target_dir + "/" + key.hash.hex() + kEntrySuffix;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno != ENOENT) verbose_log("disk cache: cannot open " + path + ": " + errno_text(errno));
        return false;
    }
    std::string problem;
    DecodedEntry decoded;
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        problem = "not a regular file";
    } else if (std::string reason = distrust(st); !reason.empty()) {
        problem = "untrusted: " + reason;
    } else if (static_cast<uint64_t>(st.st_size) > kMaxEntryBytes) {
        problem = "too large";
    } else {
        std::vector<uint8_t> bytes;
        read_all(fd, &bytes, static_cast<size_t>(st.st_size));
        const EntryStatus status = decode_entry(bytes.data(), bytes.size(), &key, &decoded);
        if (status != EntryStatus::ok) problem = entry_status_name(status);
    }
    if (problem.empty()) ::futimens(fd, nullptr);  // LRU: a hit makes the entry the youngest (best effort)
    ::close(fd);
    if (!problem.empty()) {
        if (count_rejects) {
            ++rejects_;
            verbose_log("disk cache: rejected " + path + " (" + problem + "); it will be regenerated");
        }
        return false;
    }
    *artifact = std::move(decoded.artifact);
    return true;
}

bool DiskCache::load(const KernelKey& key, Artifact* artifact) {
    for (const auto& folder : folder_info_)
        if (find_in(*folder, key, artifact, /*count_rejects=*/true)) {
            ++hits_;
            return true;
        }
    return false;
}

Artifact DiskCache::fetch_or_build(const KernelKey& key, const std::function<Artifact()>& build, bool* from_disk) {
    Artifact artifact;
    *from_disk = true;
    if (load(key, &artifact)) return artifact;
    if (writable_ && !fingerprint_dir_name_.empty()) {
        const Folder& first = *folder_info_.front();
        KeyLock lock(first.target_dir + "/" + kLocksFile, key.hash);
        // Another process may have compiled it while we waited for the lock. A reject was counted above.
        if (lock.held() && find_in(first, key, &artifact, /*count_rejects=*/false)) {
            ++hits_;
            return artifact;
        }
        ++misses_;
        artifact = build();
        *from_disk = false;
        store(key, artifact);
        return artifact;  // the lock is released after the entry is in place
    }
    ++misses_;
    *from_disk = false;
    return build();
}

void DiskCache::reject_loaded(const KernelKey& key, const std::string& why) {
    ++rejects_;
    verbose_log("disk cache: the loader refused entry " + key.hash.hex() + " (" + why + "); regenerating");
}

bool DiskCache::write_entry(const std::string& target_dir, const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = target_dir + "/" + name;
    // Unique per process and call (several DiskCache objects of one process may write the same name).
    static std::atomic<uint64_t> temp_counter{0};
    const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(temp_counter++);
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    int err = 0;
    if (fd < 0) {
        err = errno;
    } else {
        errno = 0;
        if (!write_all(fd, bytes.data(), bytes.size())) err = errno ? errno : EIO;  // no fsync: see the header
        if (::close(fd) != 0 && err == 0) err = errno;
        if (err == 0 && ::rename(temp.c_str(), path.c_str()) != 0) err = errno;
        if (err != 0) ::unlink(temp.c_str());
    }
    if (err == 0) return true;
    const std::string& root = folder_info_.empty() ? target_dir : folder_info_.front()->root;
    if (err == ENOSPC || err == EDQUOT) {
        warn_once("full:" + root, "disk cache folder " + root + " is full (" + errno_text(err) +
                                      "): new kernels stay in memory");
    } else if (err == EROFS || err == EACCES || err == EPERM) {
        writable_ = false;  // it will not get better in this process
        warn_once("readonly:" + root, "disk cache folder " + root + " cannot be written (" + errno_text(err) +
                                          "): new kernels stay in memory");
    } else {
        warn_once("write:" + root, "disk cache folder " + root + ": cannot write " + path + " (" + errno_text(err) +
                                       "): new kernels stay in memory");
    }
    return false;
}

bool DiskCache::store(const KernelKey& key, const Artifact& artifact) {
    if (!writable_ || fingerprint_dir_name_.empty()) return false;
    const std::vector<uint8_t> bytes = encode_entry(key, fingerprint_, artifact);
    if (!write_entry(folder_info_.front()->target_dir, key.hash.hex() + kEntrySuffix, bytes)) {
        ++write_errors_;
        return false;
    }
    ++writes_;
    after_write(static_cast<int64_t>(bytes.size()));
    return true;
}

void DiskCache::after_write(int64_t bytes) {
    std::lock_guard<std::mutex> lock(evict_mutex_);
    bytes_estimate_ += static_cast<uint64_t>(bytes);
    const auto now = std::chrono::steady_clock::now();
    if (scanned_ && bytes_estimate_ <= max_bytes_ &&
        std::chrono::duration<double>(now - last_scan_).count() < kRescanSeconds)
        return;
    last_scan_ = now;
    // Rescan: this process's total only sees its own writes. Delete temp files of dead writers on the way.
    const Folder& first = *folder_info_.front();
    if (DIR* dir = ::opendir(first.version_dir.c_str())) {
        const time_t now = ::time(nullptr);
        while (dirent* e = ::readdir(dir)) {
            if (!is_hex_name(e->d_name)) continue;
            const std::string sub = first.version_dir + "/" + e->d_name;
            DIR* inner = ::opendir(sub.c_str());
            if (!inner) continue;
            while (dirent* f = ::readdir(inner)) {
                struct stat st;
                if (std::strstr(f->d_name, ".tmp.") && ::fstatat(::dirfd(inner), f->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    now - st.st_mtime > kStaleTempSeconds)
                    ::unlinkat(::dirfd(inner), f->d_name, 0);
            }
            ::closedir(inner);
        }
        ::closedir(dir);
    }
    const uint64_t total = [&] {
        uint64_t sum = 0;
        for (const CacheFile& f : list_entries(0)) sum += static_cast<uint64_t>(f.size);
        return sum;
    }();
    bytes_estimate_ = total;
    if (total > max_bytes_) {
        evict_to(static_cast<uint64_t>(double(max_bytes_) * kEvictTargetFraction));
        bytes_estimate_ = 0;
        for (const CacheFile& f : list_entries(0)) bytes_estimate_ += static_cast<uint64_t>(f.size);
    }
    scanned_ = true;
}

std::vector<CacheFile> DiskCache::list_entries(size_t folder_index) const {
    std::vector<CacheFile> files;
    if (folder_index >= folder_info_.size()) return files;
    const std::string& version_dir = folder_info_[folder_index]->version_dir;
    DIR* dir = ::opendir(version_dir.c_str());
    if (!dir) return files;
    while (dirent* e = ::readdir(dir)) {
        if (!is_hex_name(e->d_name)) continue;
        const std::string sub = version_dir + "/" + e->d_name;
        DIR* inner = ::opendir(sub.c_str());
        if (!inner) continue;
        while (dirent* f = ::readdir(inner)) {
            const std::string name = f->d_name;
            struct stat st;
            if (!ends_with(name, kEntrySuffix) || ::fstatat(::dirfd(inner), f->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISREG(st.st_mode))
                continue;
            files.push_back(CacheFile{sub + "/" + name, static_cast<int64_t>(st.st_size), st.st_mtim});
        }
        ::closedir(inner);
    }
    ::closedir(dir);
    return files;
}

int64_t DiskCache::evict_to(uint64_t target_bytes) {
    if (!writable_) return 0;
    std::vector<CacheFile> files = list_entries(0);
    uint64_t total = 0;
    for (const CacheFile& f : files) total += static_cast<uint64_t>(f.size);
    std::sort(files.begin(), files.end(), [](const CacheFile& a, const CacheFile& b) {
        return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec : a.mtime.tv_nsec < b.mtime.tv_nsec;
    });
    int64_t evicted = 0;
    for (const CacheFile& f : files) {
        if (total <= target_bytes) break;
        // Readers that opened it keep their copy; a process that needs it later regenerates it.
        if (::unlink(f.path.c_str()) == 0 || errno == ENOENT) {
            total -= static_cast<uint64_t>(f.size);
            ++evicted;
            verbose_log("disk cache: evicted " + f.path);
        }
    }
    evictions_ += evicted;
    return evicted;
}

EntryStatus DiskCache::import_entry(const uint8_t* data, size_t size, ImportOutcome* outcome) {
    *outcome = ImportOutcome::write_failed;
    DecodedEntry decoded;
    const EntryStatus status = decode_entry(data, size, nullptr, &decoded);
    if (status != EntryStatus::ok || !writable_) return status;
    // Names come from the verified content, never from the archive: no path can be smuggled in.
    const Folder& first = *folder_info_.front();
    const std::string dir =
        first.version_dir + "/" + hash128(decoded.fingerprint.data(), decoded.fingerprint.size()).hex();
    if (::mkdir(dir.c_str(), 0700) == 0)
        write_entry(dir, kFingerprintFile, std::vector<uint8_t>(decoded.fingerprint.begin(), decoded.fingerprint.end()));
    const std::string name = hash128(decoded.key_bytes.data(), decoded.key_bytes.size()).hex() + kEntrySuffix;
    // Already there and identical: leave it (and its LRU age) alone.
    if (const int fd = ::open((dir + "/" + name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW); fd >= 0) {
        struct stat st;
        std::vector<uint8_t> existing;
        if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == size) read_all(fd, &existing, size);
        ::close(fd);
        if (existing.size() == size && std::memcmp(existing.data(), data, size) == 0) {
            *outcome = ImportOutcome::already_present;
            return EntryStatus::ok;
        }
    }
    if (!write_entry(dir, name, std::vector<uint8_t>(data, data + size))) {
        ++write_errors_;
        return EntryStatus::ok;
    }
    *outcome = ImportOutcome::written;
    ++writes_;
    after_write(static_cast<int64_t>(size));
    return EntryStatus::ok;
}

DiskCacheStats DiskCache::stats() const {
    DiskCacheStats s;
    for (const CacheFile& f : list_entries(0)) {
        ++s.entries;
        s.bytes += f.size;
    }
    s.process.hits = hits_;
    s.process.misses = misses_;
    s.process.rejects = rejects_;
    s.process.writes = writes_;
    s.process.evictions = evictions_;
    s.process.write_errors = write_errors_;
    return s;
}

DiskCacheCounters DiskCache::lifetime_counters() const {
    if (folder_info_.empty()) return {};
    const std::string path = folder_info_.front()->version_dir + "/" + kStatsFile;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return {};
    ::flock(fd, LOCK_SH);
    const DiskCacheCounters c = parse_counters(read_small_file(fd));
    ::close(fd);
    return c;
}

// Adds this object's counters to <first folder>/v<N>/stats under flock: a lifetime record across
// processes for jitmm-warmup --stats. Best effort, and only when something happened.
void DiskCache::flush_lifetime_counters() {
    if (!writable_ || folder_info_.empty()) return;
    DiskCacheCounters mine = stats().process;
    if (mine.hits + mine.misses + mine.rejects + mine.writes + mine.evictions + mine.write_errors == 0) return;
    const std::string path = folder_info_.front()->version_dir + "/" + kStatsFile;
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return;
    if (::flock(fd, LOCK_EX) == 0) {
        DiskCacheCounters total = parse_counters(read_small_file(fd));
        std::string text;
        for (int i = 0; i < 6; ++i) {
            *counter_fields(total, i) += *counter_fields(mine, i);
            text += std::string(kCounterNames[i]) + " " + std::to_string(*counter_fields(total, i)) + "\n";
        }
        if (::ftruncate(fd, 0) == 0) {
            ssize_t ignored = ::pwrite(fd, text.data(), text.size(), 0);
            (void)ignored;
        }
    }
    ::close(fd);
}

}  // namespace jitmm
