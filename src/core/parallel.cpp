#include "core/parallel.hpp"

// Tasks must not throw: kernels report errors before they fan out.

#include <algorithm>
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
    stopping_.store(true);
    generation_.fetch_add(1);
    {
        std::lock_guard<std::mutex> lock(sleep_mutex_);
        wake_cv_.notify_all();
    }
    for (auto& t : workers_) t.join();
}

// The first wave's fixed owners keep a task's data in the same core's caches from call to call (a layer's
// weights, B's column slice: claimed first-come, the tasks of back-to-back calls moved between the cores);
// taking the others' tasks last keeps a late or descheduled thread from holding up the call.
void ThreadPool::drain(Job& job, int thread_index) {
    const auto claim = [&job](int64_t t) {
        const uint64_t bit = uint64_t(1) << t;
        return (job.unclaimed.fetch_and(~bit) & bit) != 0;
    };
    if (thread_index < job.first_wave && claim(thread_index)) (*job.fn)(thread_index);
    for (int64_t i = job.next.fetch_add(1); i < job.n; i = job.next.fetch_add(1)) (*job.fn)(i);
    for (uint64_t left = job.unclaimed.load(); left != 0; left = job.unclaimed.load()) {
        const int64_t t = __builtin_ctzll(left);
        if (claim(t)) (*job.fn)(t);
    }
}

// Spins, then sleeps, until a job newer than `seen` is published (or the pool stops). The sleep is a
// Dekker handshake with parallel_for: a worker counts itself in sleeping_workers_ before it reads
// generation_ a last time, the caller stores generation_ before it reads sleeping_workers_, so (all
// sequentially consistent) either the worker sees the new job or the caller sees the sleeper and wakes it.
uint64_t ThreadPool::wait_for_generation_after(uint64_t seen) {
    spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
    uint64_t now = generation_.load(std::memory_order_acquire);
    if (now != seen) return now;
    std::unique_lock<std::mutex> lock(sleep_mutex_);
    sleeping_workers_.fetch_add(1);
    wake_cv_.wait(lock, [&] { return (now = generation_.load()) != seen; });
    sleeping_workers_.fetch_sub(1);
    return now;
}

// Worker `index` (1 .. threads - 1) joins a job of n tasks only if n > index: the caller and workers 1 .. n - 1
// are enough. A worker left out writes nothing shared, so a small call on a many-thread engine neither waits
// for the others nor pays for their cache-line traffic.
//
// The hot path takes no lock (a mutex taken by 15 workers at once made a 16-thread fan-out of 16 empty
// tasks cost 28 us on the GPU machine's host): a worker counts itself in active_ before it reads current_,
// and the caller clears current_ before it waits for active_ to drain, so a worker either sees no job or
// is waited for.
void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        const uint64_t now = wait_for_generation_after(seen);
        if (stopping_.load()) return;
        // job_size_ is at least as new as `now` (stored before it): a worker skipped here because of a
        // newer, smaller job looks at generation_ again and finds that job.
        seen = now;
        if (job_size_.load(std::memory_order_acquire) <= index) continue;
        active_.fetch_add(1);
        if (Job* job = current_.load(); job != nullptr && job->n > index) drain(*job, index);
        if (active_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
            std::lock_guard<std::mutex> lock(sleep_mutex_);
            done_cv_.notify_all();
        }
    }
}

// Spins while the last workers finish their tasks (usually a few microseconds), then sleeps; the same
// handshake as the workers' sleep, with caller_sleeping_ and active_.
void ThreadPool::wait_until_no_worker_active() {
    spin_until([&] { return active_.load() == 0; });
    if (active_.load() == 0) return;
    std::unique_lock<std::mutex> lock(sleep_mutex_);
    caller_sleeping_.store(true);
    done_cv_.wait(lock, [&] { return active_.load() == 0; });
    caller_sleeping_.store(false);
}

void ThreadPool::parallel_for(int64_t n, const TaskFn& fn) {
    if (n <= 0) return;
    std::unique_lock<std::mutex> job_lock(job_mutex_, std::try_to_lock);
    if (workers_.empty() || n == 1 || !job_lock.owns_lock()) {
        for (int64_t i = 0; i < n; ++i) fn(i);
        return;
    }
    Job job;
    job.fn = &fn;
    job.n = n;
    job.first_wave = std::min<int64_t>({n, num_threads(), kMaxFirstWave});
    job.unclaimed.store(job.first_wave == kMaxFirstWave ? ~uint64_t(0) : (uint64_t(1) << job.first_wave) - 1);
    job.next.store(job.first_wave);
    current_.store(&job);
    job_size_.store(n);
    generation_.fetch_add(1);
    if (sleeping_workers_.load() > 0) {
        std::lock_guard<std::mutex> lock(sleep_mutex_);
        wake_cv_.notify_all();
    }
    drain(job, 0);
    // Every task is claimed; the ones still running belong to workers counted in active_.
    current_.store(nullptr);
    wait_until_no_worker_active();
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
