// How the x86 f32 GEMM shares one call out to threads: each batch's C cut into m_chunks x n_chunks
// tile-aligned rectangles, one task each, chosen by an estimate of the slowest task's cycles (its FMAs plus
// the packing it does alone) and the rounds the tasks run in. Depends only on its inputs (the shape, the
// blocking and the thread count), so a thread count always gives the same partition and the same results.
#pragma once

#include <cstdint>

namespace jitmm::plan {

struct PartitionInput {
    int64_t batch = 1;
    int64_t m_tiles = 1, n_tiles = 1;  // register tiles of one batch's C
    int mr = 1, nr = 1, nv = 1;        // rows, columns and vectors of a register tile
    int64_t k = 1;
    int64_t kc = 1, nc = 1;            // K and N blocks: an A row tile is packed once per N block and K block
    bool pack_a = false, pack_b = false, trans_b = false;
    bool b_from_memory = false;        // B read in place, streamed from memory (not packed, larger than L2)
    bool a_shareable = false;          // A packed (pack_a) and small enough to be packed whole once per call
    bool a_in_place_large = false;     // A read in place (not packed) and larger than a quarter of L2
    int threads = 1;
    int64_t m = 1, n = 1;              // C's extent (the K split's finish pass adds its parts)
    bool c_rows_share_lines = false;   // C's row stride is not whole cache lines: N chunks meet inside lines
    bool c_is_the_work = false;        // K so short that writing C is the work: N chunk edges cost as if shared
    int64_t k_parts_max = 1;           // > 1: K may also be cut into up to this many parts of whole K blocks
};

struct Partition {
    int m_chunks = 1, n_chunks = 1;
    bool share_a = false;  // each row tile of A packed once per call by the first task to need it, read by the
                           // others (x86/shared_panels.hpp), instead of by every task that uses it
    int k_splits = 1;      // > 1: K cut into this many parts, each over all rows and one of n_chunks (m_chunks 1)
    double cycles = 0;  // the estimate it won with (for tests and tuning)
};

// Chunks per batch for planners that split each batch evenly without a cost model: at least enough to give
// every thread a task (threads / batch), and more where the batch x chunk tasks would leave threads idle in
// the last round (3 batches over 2 threads: one thread runs two whole batches, the other one; cut in two, six
// halves run three a thread). The fewest chunks whose rounds keep the threads busy 85% of the time.
int64_t balanced_chunks_per_batch(int64_t batch, int threads);

// Estimated cycles of the slowest of the tasks when each batch is cut into m_chunks x n_chunks, each task
// packing its A rows itself (share_a false) or the tasks with the same rows sharing the packed tiles.
double partition_cycles(const PartitionInput& in, int m_chunks, int n_chunks, bool share_a = false);

// The same for K cut into k_parts parts, each part's tasks over all rows and one of n_chunks column chunks,
// plus the finish pass that adds the parts.
double k_split_partition_cycles(const PartitionInput& in, int k_parts, int n_chunks);

// The cheapest m_chunks x n_chunks (their product at most the threads a batch gets) and way of packing A;
// near-ties go to fewer M chunks (disjoint B for every task, the old 1-D split), then to more N chunks, then
// to A packed in the tasks. With k_parts_max > 1, K parts x N chunks are candidates too (a few rows over a
// long K, where M x N chunks would pack the same B columns in several tasks).
Partition choose_partition(const PartitionInput& in);

}  // namespace jitmm::plan
