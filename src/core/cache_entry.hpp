// The bytes of one disk-cache entry (a ".jk" file): a fixed header, the full key bytes, the target
// fingerprint, the artifact (kind, ints, text, payload) and a checksum of everything before it. Decoding
// checks every field, so a truncated, bit-flipped, wrong-version or wrong-key entry is never handed out.
//
//   offset  size  field
//   0       8     magic "jitmmKC\0"
//   8       4     format version (u32, little-endian, = kDiskFormatVersion)
//   12      4     header size (u32, = 64: room to grow without breaking old readers' checks)
//   16      8     key size            (u64; the same field order as the sections below)
//   24      8     fingerprint size
//   32      8     kind size
//   40      8     ints count          (each int is 8 bytes, little-endian)
//   48      8     text size
//   56      8     payload size
//   64      ...   key, fingerprint, kind, ints, text, payload
//   end-16  16    hash128 of bytes [0, end-16): lo then hi, little-endian
#pragma once

#include "core/artifact.hpp"
#include "core/key.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace jitmm {

// Bump when the entry layout changes; folders of older versions are deleted by the next writer.
constexpr uint32_t kDiskFormatVersion = 1;

enum class EntryStatus { ok, truncated, bad_magic, wrong_version, malformed, bad_checksum, wrong_key };
const char* entry_status_name(EntryStatus s);

struct DecodedEntry {
    std::string key_bytes;
    std::string fingerprint;
    Artifact artifact;
};

std::vector<uint8_t> encode_entry(const KernelKey& key, const std::string& fingerprint, const Artifact& artifact);

// Checks and decodes an entry. expected_key (may be null) must equal the stored key bytes exactly.
EntryStatus decode_entry(const uint8_t* data, size_t size, const KernelKey* expected_key, DecodedEntry* out);

}  // namespace jitmm
