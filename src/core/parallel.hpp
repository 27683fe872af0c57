// Parallel execution for CPU kernels: the engine's own thread pool, or a framework's parallel-for handed
// in through jitmm_engine_config (as oneDNN's threadpool interop and XNNPACK's pthreadpool allow).
#pragma once

#include <jitmm/jitmm.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace jitmm {

using TaskFn = std::function<void(int64_t)>;

class ThreadPool {
public:
    explicit ThreadPool(int num_threads);  // num_threads - 1 workers; the caller is the last thread
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
    // Runs fn(i) for i in [0, n) and returns when all are done. If the pool is already busy with another
    // caller's job, the tasks run on the calling thread instead (no deadlock, no oversubscription).
    void parallel_for(int64_t n, const TaskFn& fn);

private:
    // One parallel_for call, on the caller's stack. Task t < first_wave belongs to thread t (the caller is
    // thread 0) and is taken from `unclaimed`; the rest are claimed one by one from `next`; a thread that runs
    // out of work takes the first-wave tasks of threads that have not come yet.
    static constexpr int kMaxFirstWave = 64;
    struct alignas(64) Job {
        const TaskFn* fn;
        int64_t n;
        int64_t first_wave;
        std::atomic<uint64_t> unclaimed{0};
        std::atomic<int64_t> next{0};
    };

    void worker_loop(int index);
    uint64_t wait_for_generation_after(uint64_t seen);
    void wait_until_no_worker_active();
    static void drain(Job& job, int thread_index);

    std::vector<std::thread> workers_;
    std::mutex job_mutex_;  // held by the caller for the duration of one job

    // Written by the caller once per job, read by every spinning worker: a cache line of their own.
    alignas(64) std::atomic<uint64_t> generation_{0};
    std::atomic<int64_t> job_size_{0};  // the newest job's n, stored before generation_
    std::atomic<Job*> current_{nullptr};
    std::atomic<bool> stopping_{false};

    // Workers between joining a job and leaving it: the caller's Job outlives none of them.
    alignas(64) std::atomic<int> active_{0};

    // The slow path only: workers and the caller sleep here after spinning.
    alignas(64) std::mutex sleep_mutex_;
    std::condition_variable wake_cv_, done_cv_;
    std::atomic<int> sleeping_workers_{0};
    std::atomic<bool> caller_sleeping_{false};
};

// What a kernel calls: either the pool or the framework's callback.
class ParallelRunner {
public:
    ParallelRunner(int num_threads, jitmm_parallel_for_fn external, void* external_ctx);
    int num_threads() const { return num_threads_; }
    void parallel_for(int64_t n, const TaskFn& fn) const;
    // fn(i) for i in [0, n) as `runs` contiguous ranges, a task each (where n > runs): the tasks a thread runs
    // stay the same from call to call, so that their data stay in its core's caches, where parallel_for hands
    // them out one by one (batches of back-to-back calls moved between the cores).
    void parallel_for_in_runs(int64_t n, int64_t runs, const TaskFn& fn) const;
    bool uses_external() const { return external_ != nullptr; }

private:
    int num_threads_;
    jitmm_parallel_for_fn external_;
    void* external_ctx_;
    std::unique_ptr<ThreadPool> pool_;
};

}  // namespace jitmm
