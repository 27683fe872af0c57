// The planner for the dot-product family (C = A * B^T with B stored N x K and few rows of A): the tile
// (rows of A x rows of Bt) and the thread split over N. Everything here goes into the kernel key.
#pragma once

#include "core/key.hpp"
#include "core/problem.hpp"
#include "hw/cpu.hpp"
#include "plan/x86_gemm_plan.hpp"
#include "x86/gemm_f32_dot_generator.hpp"

#include <string>

namespace jitmm::plan {

struct X86DotPlan {
    x86::GemmF32DotLayout layout;
    int threads = 1;
    int n_chunks = 1;  // each batch's N split into n_chunks tile-aligned parts
    int m_chunks = 1;  // and its M into m_chunks (many rows over few columns)
    // The driver's order (not in the key): every column tile of a row tile before the next row tile where A is
    // the larger operand (A's rows read once, B's few rows from cache), else every row tile of a column tile.
    bool rows_outer = false;
    bool k_split_ready = false;  // few tiles, long K: the part variants and the finish are generated (key)
    int k_splits = 1;            // > 1: K cut into this many parts of whole iterations (driver only)
    // A stored K x M (trans_a): each call first copies op(A) into rows of layout.lda (key), which the kernels read.
    bool a_transposed = false;
    // B stored K x N (few columns, many rows): each call first copies B^T into rows of layout.ldb (key), which
    // the kernels read as the Bt of an NT problem.
    bool b_transposed = false;

    std::string describe() const;
    void append_key(KeyWriter& w) const;
};

// The dot family serves B^T (stored N x K) with few rows of A: each B row is then read once, contiguously,
// instead of being transposed into panels. An A stored K x M is copied into rows first (a_transposed). Also
// fewer columns than a vector over a long K with an A in cache (the broadcast family's vectors would be
// mostly padding), and many rows over few columns of a B stored K x N (NN), whose B^T is copied into rows first
// (b_transposed).
bool dot_family_fits(const Problem& p, hw::X86Isa isa);

// Whether the dot family serves p rather than the broadcast family: it fits, and p is not a K of at most 64
// values over 6 rows or more, or of one vector over 3 or more (there the dot kernel's horizontal sums cost more
// than packing B transposed).
bool dot_family_serves(const Problem& p, hw::X86Isa isa);

// The tile width, from `widest` down to half of it, whose whole tiles shared out over `threads` leave the
// slowest thread the fewest of n's columns, where that is at least 5% fewer than `widest` leaves it (ties to
// the wider).
int balanced_tile_width(int64_t n, int widest, int threads);

X86DotPlan plan_x86_gemm_f32_dot(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads);

}  // namespace jitmm::plan
