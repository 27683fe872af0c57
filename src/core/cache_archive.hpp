// One-file archives of a disk cache, to move prebuilt kernels between machines (jitmm-warmup --export /
// --import): a CI machine builds the cache, the fleet imports it. No tar: the format is ours and small.
//
//   "jitmmKA\0", u32 archive version, u32 entry format version, u64 entry count,
//   then per entry: u64 size + the entry file's bytes (cache_entry.hpp: self-checksummed),
//   then hash128 of everything before (lo, hi), all little-endian.
//
// Import verifies the archive checksum and every entry on its own (magic, version, sizes, checksum); an
// entry's destination comes from its verified key and fingerprint, never from a name in the archive. The
// checksums detect damage, not malice: import archives only from a source you would take code from.
#pragma once

#include "core/disk_cache.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace jitmm {

struct ArchiveResult {
    int64_t entries = 0;          // entries in the archive / exported
    int64_t written = 0;          // import: new or changed entries written
    int64_t already_present = 0;  // import: identical entry already in the cache
    int64_t rejected = 0;         // entries that failed verification (skipped)
    int64_t write_failed = 0;     // import: verified, but the cache could not store it (full, read-only)
    int64_t bytes = 0;            // archive size
    bool archive_ok = true;       // framing and archive checksum
    std::vector<std::string> problems;
};

// Writes every verified entry of the cache's first folder (current format, every target) to path
// (atomically: temp file + rename). Throws jitmm::Error when the file cannot be written.
ArchiveResult export_cache(const DiskCache& cache, const std::string& path);
// Reads path and stores each verified entry into the cache's first folder, which must be writable.
// Throws jitmm::Error when the file cannot be read or is not an archive at all.
ArchiveResult import_cache(DiskCache& cache, const std::string& path);

}  // namespace jitmm
