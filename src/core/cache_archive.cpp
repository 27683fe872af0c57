#include "core/cache_archive.hpp"

#include "core/cache_entry.hpp"
#include "core/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace jitmm {

namespace {

constexpr char kArchiveMagic[8] = {'j', 'i', 't', 'm', 'm', 'K', 'A', '\0'};
constexpr uint32_t kArchiveVersion = 1;
constexpr size_t kArchiveHeader = 24;

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u32(std::vector<uint8_t>& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t get_u64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
}
uint32_t get_u32(const uint8_t* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
    return v;
}

bool read_file(const std::string& path, std::vector<uint8_t>* out, std::string* error) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *error = std::strerror(errno);
        return false;
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *error = "not a regular file";
        ::close(fd);
        return false;
    }
    out->resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < out->size()) {
        const ssize_t n = ::read(fd, out->data() + done, out->size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    out->resize(done);
    ::close(fd);
    return true;
}

}  // namespace

ArchiveResult export_cache(const DiskCache& cache, const std::string& path) {
    ArchiveResult result;
    std::vector<CacheFile> files = cache.list_entries(0);
    std::sort(files.begin(), files.end(), [](const CacheFile& a, const CacheFile& b) { return a.path < b.path; });

    std::vector<uint8_t> out(kArchiveMagic, kArchiveMagic + sizeof kArchiveMagic);
    put_u32(out, kArchiveVersion);
    put_u32(out, kDiskFormatVersion);
    put_u64(out, 0);  // count, patched below
    std::vector<uint8_t> entry;
    std::string error;
    for (const CacheFile& f : files) {
        // Entries are verified on the way out too: never ship a damaged one.
        if (!read_file(f.path, &entry, &error)) continue;  // evicted meanwhile
        const EntryStatus status = decode_entry(entry.data(), entry.size(), nullptr, nullptr);
        if (status != EntryStatus::ok) {
            ++result.rejected;
            result.problems.push_back(f.path + ": " + entry_status_name(status));
            continue;
        }
        put_u64(out, entry.size());
        out.insert(out.end(), entry.begin(), entry.end());
        ++result.entries;
    }
    for (int i = 0; i < 8; ++i) out[16 + i] = static_cast<uint8_t>(uint64_t(result.entries) >> (8 * i));
    const Hash128 sum = hash128(out.data(), out.size());
    put_u64(out, sum.lo);
    put_u64(out, sum.hi);
    result.bytes = static_cast<int64_t>(out.size());

    const std::string temp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail(JITMM_STATUS_INVALID_VALUE, "cannot write " + temp + ": " + std::strerror(errno));
    size_t done = 0;
    int err = 0;
    while (done < out.size()) {
        const ssize_t n = ::write(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err = errno ? errno : EIO;
            break;
        }
        done += static_cast<size_t>(n);
    }
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && ::rename(temp.c_str(), path.c_str()) != 0) err = errno;
    if (err != 0) {
        ::unlink(temp.c_str());
        fail(JITMM_STATUS_INVALID_VALUE, "cannot write " + path + ": " + std::strerror(err));
    }
    return result;
}

ArchiveResult import_cache(DiskCache& cache, const std::string& path) {
    ArchiveResult result;
    if (!cache.writable()) fail(JITMM_STATUS_INVALID_VALUE, "import: the cache folder is not writable");
    std::vector<uint8_t> data;
    std::string error;
    if (!read_file(path, &data, &error)) fail(JITMM_STATUS_INVALID_VALUE, "cannot read " + path + ": " + error);
    result.bytes = static_cast<int64_t>(data.size());
    if (data.size() < kArchiveHeader + 16 || std::memcmp(data.data(), kArchiveMagic, sizeof kArchiveMagic) != 0)
        fail(JITMM_STATUS_INVALID_VALUE, path + " is not a jitmm cache archive");
    if (get_u32(data.data() + 8) != kArchiveVersion)
        fail(JITMM_STATUS_INVALID_VALUE, path + ": archive version " + std::to_string(get_u32(data.data() + 8)) +
                                             " (this jitmm reads version " + std::to_string(kArchiveVersion) + ")");
    if (get_u32(data.data() + 12) != kDiskFormatVersion)
        fail(JITMM_STATUS_INVALID_VALUE, path + ": its entries are in cache format " +
                                             std::to_string(get_u32(data.data() + 12)) + ", this jitmm uses " +
                                             std::to_string(kDiskFormatVersion) + ": rebuild it with this version");
    const size_t body = data.size() - 16;
    const Hash128 sum = hash128(data.data(), body);
    if (get_u64(data.data() + body) != sum.lo || get_u64(data.data() + body + 8) != sum.hi) {
        result.archive_ok = false;
        result.problems.push_back("archive checksum mismatch: importing only entries that verify on their own");
    }
    const uint64_t count = get_u64(data.data() + 16);
    size_t at = kArchiveHeader;
    for (uint64_t i = 0; i < count; ++i) {
        if (body - at < 8 || get_u64(data.data() + at) > body - at - 8) {
            result.archive_ok = false;
            result.problems.push_back("archive truncated after " + std::to_string(i) + " of " +
                                      std::to_string(count) + " entries");
            break;
        }
        const size_t size = static_cast<size_t>(get_u64(data.data() + at));
        at += 8;
        ++result.entries;
        DiskCache::ImportOutcome outcome;
        const EntryStatus status = cache.import_entry(data.data() + at, size, &outcome);
        at += size;
        if (status != EntryStatus::ok) {
            ++result.rejected;
            result.problems.push_back("entry " + std::to_string(i) + ": " + entry_status_name(status));
        } else if (outcome == DiskCache::ImportOutcome::written) {
            ++result.written;
        } else if (outcome == DiskCache::ImportOutcome::already_present) {
            ++result.already_present;
        } else {
            ++result.write_failed;
        }
    }
    if (result.archive_ok && at != body) {
        result.archive_ok = false;
        result.problems.push_back("archive has trailing bytes after its entries");
    }
    return result;
}

}  // namespace jitmm
