#include "core/key.hpp"

#include <cstdio>

namespace jitmm {

namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// A strong 64-bit finalizer (avalanches every input bit into every output bit).
uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

}  // namespace

// Two independent lanes over 8-byte words, cross-mixed at the end: not cryptographic (the key bytes are
// compared in full anyway), but well distributed for cache indexing and file names.
Hash128 hash128(const void* data, size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    uint64_t a = kPrime1 ^ size, b = kPrime2 + size;
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        a = rotl(a ^ (w * kPrime2), 31) * kPrime1;
        b = rotl(b + (w * kPrime3), 27) * kPrime2 + a;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p + i, size - i);
    a = rotl(a ^ (tail * kPrime2), 31) * kPrime1;
    b = rotl(b + (tail * kPrime3) + (size - i), 27) * kPrime2;
    Hash128 h;
    h.lo = mix(a + b);
    h.hi = mix(b ^ rotl(a, 17) ^ kPrime3);
    return h;
}

std::string Hash128::hex() const {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi),
                  static_cast<unsigned long long>(lo));
    return buf;
}


}  // namespace jitmm
