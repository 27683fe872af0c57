#include "core/cache_entry.hpp"

#include <cstring>

namespace jitmm {

namespace {

constexpr char kMagic[8] = {'j', 'i', 't', 'm', 'm', 'K', 'C', '\0'};
constexpr size_t kHeaderSize = 64;
constexpr size_t kChecksumSize = 16;

void put_u32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
    return v;
}
uint64_t get_u64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
}

void append(std::vector<uint8_t>& out, const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    out.insert(out.end(), p, p + size);
}

// a += b, false on overflow (sizes come from an untrusted file).
bool add(uint64_t& a, uint64_t b) { return !__builtin_add_overflow(a, b, &a); }

}  // namespace

const char* entry_status_name(EntryStatus s) {
    switch (s) {
        case EntryStatus::ok: return "ok";
        case EntryStatus::truncated: return "truncated";
        case EntryStatus::bad_magic: return "bad magic";
        case EntryStatus::wrong_version: return "wrong format version";
        case EntryStatus::malformed: return "malformed header";
        case EntryStatus::bad_checksum: return "checksum mismatch";
        case EntryStatus::wrong_key: return "key bytes differ (hash collision or misplaced file)";
    }
    return "unknown";
}

std::vector<uint8_t> encode_entry(const KernelKey& key, const std::string& fingerprint, const Artifact& artifact) {
    std::vector<uint8_t> out(kHeaderSize, 0);
    std::memcpy(out.data(), kMagic, sizeof kMagic);
    put_u32(out.data() + 8, kDiskFormatVersion);
    put_u32(out.data() + 12, kHeaderSize);
    put_u64(out.data() + 16, key.bytes.size());
    put_u64(out.data() + 24, fingerprint.size());
    put_u64(out.data() + 32, artifact.kind.size());
    put_u64(out.data() + 40, artifact.ints.size());
    put_u64(out.data() + 48, artifact.text.size());
    put_u64(out.data() + 56, artifact.payload.size());
    out.reserve(kHeaderSize + key.bytes.size() + fingerprint.size() + artifact.kind.size() +
                8 * artifact.ints.size() + artifact.text.size() + artifact.payload.size() + kChecksumSize);
    append(out, key.bytes.data(), key.bytes.size());
    append(out, fingerprint.data(), fingerprint.size());
    append(out, artifact.kind.data(), artifact.kind.size());
    for (int64_t v : artifact.ints) {
        uint8_t b[8];
        put_u64(b, static_cast<uint64_t>(v));
        append(out, b, 8);
    }
    append(out, artifact.text.data(), artifact.text.size());
    append(out, artifact.payload.data(), artifact.payload.size());
    const Hash128 sum = hash128(out.data(), out.size());
    uint8_t b[kChecksumSize];
    put_u64(b, sum.lo);
    put_u64(b + 8, sum.hi);
    append(out, b, sizeof b);
    return out;
}

EntryStatus decode_entry(const uint8_t* data, size_t size, const KernelKey* expected_key, DecodedEntry* out) {
    if (size < kHeaderSize + kChecksumSize) return EntryStatus::truncated;
    if (std::memcmp(data, kMagic, sizeof kMagic) != 0) return EntryStatus::bad_magic;
    if (get_u32(data + 8) != kDiskFormatVersion) return EntryStatus::wrong_version;
    if (get_u32(data + 12) != kHeaderSize) return EntryStatus::malformed;
    const uint64_t key_size = get_u64(data + 16), fp_size = get_u64(data + 24), kind_size = get_u64(data + 32),
                   int_count = get_u64(data + 40), text_size = get_u64(data + 48), payload_size = get_u64(data + 56);
    uint64_t total = kHeaderSize + kChecksumSize;
    if (int_count > (uint64_t(1) << 40) || !add(total, key_size) || !add(total, fp_size) || !add(total, kind_size) ||
        !add(total, int_count * 8) || !add(total, text_size) || !add(total, payload_size))
        return EntryStatus::malformed;
    if (total > size) return EntryStatus::truncated;
    if (total < size) return EntryStatus::malformed;  // trailing bytes: not something we wrote

    // Checksum before the key comparison: a flipped bit anywhere reads as corruption, not as another key.
    const size_t body = size - kChecksumSize;
    const Hash128 sum = hash128(data, body);
    if (get_u64(data + body) != sum.lo || get_u64(data + body + 8) != sum.hi) return EntryStatus::bad_checksum;

    const auto* p = reinterpret_cast<const char*>(data) + kHeaderSize;
    if (expected_key && (key_size != expected_key->bytes.size() ||
                         std::memcmp(p, expected_key->bytes.data(), key_size) != 0))
        return EntryStatus::wrong_key;
    if (!out) return EntryStatus::ok;
    out->key_bytes.assign(p, key_size);
    p += key_size;
    out->fingerprint.assign(p, fp_size);
    p += fp_size;
    out->artifact.kind.assign(p, kind_size);
    p += kind_size;
    out->artifact.ints.resize(int_count);
    for (uint64_t i = 0; i < int_count; ++i, p += 8)
        out->artifact.ints[i] = static_cast<int64_t>(get_u64(reinterpret_cast<const uint8_t*>(p)));
    out->artifact.text.assign(p, text_size);
    p += text_size;
    out->artifact.payload.assign(reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(p) + payload_size);
    return EntryStatus::ok;
}

}  // namespace jitmm
