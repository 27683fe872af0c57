// In-memory kernel cache: a bounded LRU keyed by KernelKey, with single-flight creation (N threads asking
// for the same new key run its generator once; the others wait for that result).
#pragma once

#include "core/kernel.hpp"
#include "core/key.hpp"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace jitmm {

using KernelPtr = std::shared_ptr<const Kernel>;

struct CacheStats {
    int64_t hits = 0, misses = 0, evictions = 0, entries = 0;
};

class KernelCache {
public:
    explicit KernelCache(size_t capacity);

    // Returns the cached kernel for key, or runs make() once (outside the lock) and caches its result.
    // If make() throws, the waiters receive the same error and nothing is cached.
    KernelPtr get_or_create(const KernelKey& key, const std::function<KernelPtr()>& make, bool* hit = nullptr);
    CacheStats stats() const;
    size_t capacity() const { return capacity_; }

private:
    struct InFlight;
    struct Entry {
        KernelPtr kernel;
        std::list<const KernelKey*>::iterator lru_position;
    };
    void insert_locked(const KernelKey& key, KernelPtr kernel);

    const size_t capacity_;
    mutable std::mutex mutex_;
    std::unordered_map<KernelKey, Entry, KernelKeyHasher> entries_;
    std::list<const KernelKey*> lru_;  // front = most recently used; points at the map's keys
    std::unordered_map<KernelKey, std::shared_ptr<InFlight>, KernelKeyHasher> in_flight_;
    CacheStats stats_;
};

}  // namespace jitmm
