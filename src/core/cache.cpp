#include "core/cache.hpp"

#include <exception>

namespace jitmm {

struct KernelCache::InFlight {
    std::condition_variable done_cv;
    bool done = false;
    KernelPtr kernel;
    std::exception_ptr error;
};

KernelCache::KernelCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

KernelPtr KernelCache::get_or_create(const KernelKey& key, const std::function<KernelPtr()>& make, bool* hit) {
    std::shared_ptr<InFlight> flight;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        auto found = entries_.find(key);
        if (found != entries_.end()) {
            lru_.splice(lru_.begin(), lru_, found->second.lru_position);
            ++stats_.hits;
            if (hit) *hit = true;
            return found->second.kernel;
        }
        auto pending = in_flight_.find(key);
        if (pending != in_flight_.end()) {
            // Someone else is generating this kernel: wait for their result instead of generating it again.
            std::shared_ptr<InFlight> other = pending->second;
            other->done_cv.wait(lock, [&] { return other->done; });
            if (other->error) std::rethrow_exception(other->error);
            ++stats_.hits;
            if (hit) *hit = true;
            return other->kernel;
        }
        flight = std::make_shared<InFlight>();
        in_flight_.emplace(key, flight);
        ++stats_.misses;
    }
    if (hit) *hit = false;

    KernelPtr kernel;
    std::exception_ptr error;
    try {
        kernel = make();
    } catch (...) {
        error = std::current_exception();
    }

    std::lock_guard<std::mutex> lock(mutex_);
    flight->done = true;
    flight->kernel = kernel;
    flight->error = error;
    in_flight_.erase(key);
    flight->done_cv.notify_all();
    if (error) std::rethrow_exception(error);
    insert_locked(key, kernel);
    return kernel;
}

void KernelCache::insert_locked(const KernelKey& key, KernelPtr kernel) {
    auto [it, inserted] = entries_.emplace(key, Entry{std::move(kernel), {}});
    if (!inserted) return;
    lru_.push_front(&it->first);
    it->second.lru_position = lru_.begin();
    while (entries_.size() > capacity_) {
        auto oldest = entries_.find(*lru_.back());
        lru_.pop_back();
        entries_.erase(oldest);  // handed-out kernels stay alive through their shared_ptr
        ++stats_.evictions;
    }
}

CacheStats KernelCache::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    CacheStats s = stats_;
    s.entries = static_cast<int64_t>(entries_.size());
    return s;
}

}  // namespace jitmm
