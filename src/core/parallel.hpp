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
    void worker_loop(int index);
    void drain(const TaskFn& fn, int64_t n);

    std::vector<std::thread> workers_;
    std::mutex job_mutex_;           // held by the caller for the duration of one job
    std::mutex state_mutex_;
    std::condition_variable wake_cv_, done_cv_;
    const TaskFn* job_ = nullptr;
    std::atomic<int64_t> job_size_{0};     // written under state_mutex_ before generation_; read by spinning workers
    std::atomic<uint64_t> generation_{0};  // written under state_mutex_, read by spinning workers too
    std::atomic<int64_t> next_task_{0};
    std::atomic<int64_t> tasks_done_{0};
    std::atomic<int> workers_active_{0};  // written under state_mutex_, read by the spinning caller too
    bool stopping_ = false;
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
