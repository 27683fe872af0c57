#include "core/parallel.hpp"

// Tasks must not throw: kernels report errors before they fan out.

#include <memory>

namespace jitmm {

namespace {
constexpr int kSpinIterations = 20000;  // about 0.1-0.5 ms of pause instructions

// Pauses until done() or the spin budget runs out; waking a sleeping thread costs tens of microseconds, as
// much as a small matmul, so both sides of a job spin briefly before they sleep.
template <typename Done>
void spin_until(Done done) {
    for (int spin = 0; spin < kSpinIterations && !done(); ++spin) __builtin_ia32_pause();
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
    for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        stopping_ = true;
    }
    wake_cv_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::drain(const TaskFn& fn, int64_t n) {
    for (int64_t i = next_task_.fetch_add(1); i < n; i = next_task_.fetch_add(1)) {
        fn(i);
        tasks_done_.fetch_add(1, std::memory_order_acq_rel);
    }
}

// Worker `index` (1 .. threads - 1) joins a job of n tasks only if n > index: the caller and workers 1 .. n - 1
// are enough. A worker left out never touches the job's state, so the caller neither waits for it nor shares
// the state mutex with it (16 workers all passing through it twice made every small call of a 16-thread
// engine pay for all of them, however few tasks it had).
void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        const TaskFn* job;
        int64_t n;
        // Kernels tend to come back to back (one per layer).
        spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
        if (const uint64_t now = generation_.load(std::memory_order_acquire);
            now != seen && job_size_.load(std::memory_order_acquire) <= index) {
            seen = now;  // a newer job than `now` changes generation_ again, and is looked at then
            continue;
        }
        {
            std::unique_lock<std::mutex> lock(state_mutex_);
            wake_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) return;
            seen = generation_;
            job = job_;
            n = job_size_;
            if (job == nullptr || n <= index) continue;  // woke after that job had completed, or not needed
            ++workers_active_;
        }
        drain(*job, n);
        {
            std::lock_guard<std::mutex> lock(state_mutex_);
            --workers_active_;
        }
        done_cv_.notify_all();
    }
}

void ThreadPool::parallel_for(int64_t n, const TaskFn& fn) {
    if (n <= 0) return;
    std::unique_lock<std::mutex> job_lock(job_mutex_, std::try_to_lock);
    if (workers_.empty() || n == 1 || !job_lock.owns_lock()) {
        for (int64_t i = 0; i < n; ++i) fn(i);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        job_ = &fn;
        job_size_ = n;
        next_task_.store(0);
        tasks_done_.store(0);
        ++generation_;
    }
    wake_cv_.notify_all();
    drain(fn, n);
    // Wait until every task finished and no worker still holds a reference to fn, spinning first (the last
    // worker is usually a few microseconds behind); the check that counts is the one under the lock below,
    // where job_ is also cleared, so a worker that wakes late finds no job.
    spin_until([&] {
        return tasks_done_.load(std::memory_order_acquire) == n && workers_active_.load(std::memory_order_acquire) == 0;
    });
    std::unique_lock<std::mutex> lock(state_mutex_);
    done_cv_.wait(lock, [&] { return tasks_done_.load() == n && workers_active_ == 0; });
    job_ = nullptr;
}

ParallelRunner::ParallelRunner(int num_threads, jitmm_parallel_for_fn external, void* external_ctx)
    : num_threads_(num_threads < 1 ? 1 : num_threads), external_(external), external_ctx_(external_ctx) {
    if (!external_ && num_threads_ > 1) pool_ = std::make_unique<ThreadPool>(num_threads_);
}

namespace {
void call_task(void* ctx, int64_t i) { (*static_cast<const TaskFn*>(ctx))(i); }
}  // namespace

void ParallelRunner::parallel_for(int64_t n, const TaskFn& fn) const {
    if (n <= 0) return;
    if (n == 1) {
        fn(0);
    } else if (external_) {
        external_(external_ctx_, n, &call_task, const_cast<TaskFn*>(&fn));
    } else if (pool_) {
        pool_->parallel_for(n, fn);
    } else {
        for (int64_t i = 0; i < n; ++i) fn(i);
    }
}

void ParallelRunner::parallel_for_in_runs(int64_t n, int64_t runs, const TaskFn& fn) const {
    if (runs >= n) {
        parallel_for(n, fn);
        return;
    }
    parallel_for(runs, [&](int64_t r) {
        for (int64_t i = n * r / runs; i < n * (r + 1) / runs; ++i) fn(i);
    });
}

}  // namespace jitmm
