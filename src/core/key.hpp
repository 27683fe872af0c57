// KernelKey: canonical bytes naming everything that changes a kernel's binary (problem, target
// fingerprint, recipe, generator version), and their 128-bit hash. The bytes are kept whole so that a
// hash collision can never hand out the wrong kernel (caches compare bytes, not just hashes).
#pragma once

#include "core/problem.hpp"

#include <cstdint>
#include <cstring>
#include <string>

namespace jitmm {

struct Hash128 {
    uint64_t lo = 0, hi = 0;
    bool operator==(const Hash128& o) const { return lo == o.lo && hi == o.hi; }
    std::string hex() const;  // 32 lowercase hex digits, hi then lo
};

Hash128 hash128(const void* data, size_t size);

struct KernelKey {
    std::string bytes;
    Hash128 hash;
    bool operator==(const KernelKey& o) const { return hash == o.hash && bytes == o.bytes; }
};

struct KernelKeyHasher {
    size_t operator()(const KernelKey& k) const { return static_cast<size_t>(k.hash.lo); }
};

// Appends fixed-width little-endian fields, each preceded by a one-byte tag, so that two different
// field sequences never produce the same bytes.
class KeyWriter {
public:
    KeyWriter& i64(char tag, int64_t v) { return raw(tag, &v, sizeof v); }
    KeyWriter& f32(char tag, float v) { return raw(tag, &v, sizeof v); }  // bit pattern: -0.0 != 0.0
    KeyWriter& str(char tag, const std::string& s) {
        i64(tag, static_cast<int64_t>(s.size()));
        bytes_.append(s);
        return *this;
    }
    KernelKey finish() const { return KernelKey{bytes_, hash128(bytes_.data(), bytes_.size())}; }

private:
    KeyWriter& raw(char tag, const void* p, size_t n) {
        bytes_.push_back(tag);
        bytes_.append(static_cast<const char*>(p), n);
        return *this;
    }
    std::string bytes_;
};

// The problem's part of a key: every field of Problem, in a fixed order. A template over the writer so that
// the engine's problem memo (ProblemMemo) sees exactly the same fields as the key: a field added here is
// never forgotten there.
template <typename Writer>
void append_problem(Writer& w, const Problem& p) {
    w.i64('m', p.m).i64('n', p.n).i64('k', p.k).i64('B', p.batch);
    w.i64('t', (p.trans_a ? 1 : 0) | (p.trans_b ? 2 : 0));
    w.i64('a', p.lda).i64('b', p.ldb).i64('c', p.ldc);
    // Strides only matter with several batches; canonicalize them away otherwise.
    const bool batched = p.batch > 1;
    w.i64('x', batched ? p.stride_a : 0).i64('y', batched ? p.stride_b : 0).i64('z', batched ? p.stride_c : 0);
    w.i64('T', p.a_type | (p.b_type << 8) | (p.c_type << 16));
    w.f32('A', p.alpha).f32('E', p.beta);
    w.i64('e', static_cast<int64_t>(p.bias) | (static_cast<int64_t>(p.activation) << 8));
    w.i64('q', p.bias == BiasKind::none ? -1 : p.bias_type);
    w.i64('Q', static_cast<int64_t>(p.a_scale) | (static_cast<int64_t>(p.b_scale) << 8) |
                   (static_cast<int64_t>(static_cast<uint32_t>(p.a_zero_point)) << 16));
}

}  // namespace jitmm
