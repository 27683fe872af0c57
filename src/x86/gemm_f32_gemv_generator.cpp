#include "x86/gemm_f32_gemv_generator.hpp"

#include "core/error.hpp"
#include "x86/emit_buffer.hpp"
#include "x86/vector_math.hpp"

#include <xbyak/xbyak.h>

#include <vector>

namespace jitmm::x86 {

namespace {

using Xbyak::Zmm;

// Vectors per iteration of a row group's pass over the columns (independent sums in flight); the rest one by one.
constexpr int kVectorsPerIteration = 4;

// Register plan (System V): rdi = a at the current row of segment 0, rsi = B at that row (the call's first
// column), rdx = C, rcx = bias, r8 = acc, r9 = the whole vectors' bytes, r10 = column offset in bytes, r11 = row
// loop counter, rax scratch. zmm0 .. 3 sums, zmm4 .. 6 the epilogue's scratch, zmm23 a per-row bias, the streams'
// broadcast a values in zmm24 .. 31, then zmm7 .. 14. k1 holds the tail's lanes (k2 is the erf-GELU's).
class GemmF32GemvEmitter : public Xbyak::CodeGenerator {
public:
    GemmF32GemvEmitter(const GemmF32GemvLayout& layout, uint8_t* buffer, size_t capacity)
        : Xbyak::CodeGenerator(capacity, buffer), L_(layout), pool_(*this), math_(*this, pool_, true) {}

    size_t emit_variant(bool tail) {
        align(16);
        const size_t entry = getSize();
        tail_ = tail;
        shl(r9, 6);
        if (tail_) {
            mov(eax, (1u << (L_.n % 16)) - 1);
            kmovw(k1, eax);
        }
        if (L_.bias == BiasKind::per_row) vbroadcastss(row_bias(), ptr[rcx]);  // one row: bias[0] for every column
        row_groups();
        vzeroupper();
        ret();
        return entry;
    }

    void finish() { pool_.emit(); }

private:
    Zmm sum(int u) const { return Zmm(u); }
    Zmm scratch(int t) const { return Zmm(4 + t); }
    Zmm row_bias() const { return Zmm(23); }
    Zmm a_value(int s) const { return Zmm(s < 8 ? 24 + s : 7 + (s - 8)); }

    int64_t segment_rows() const { return L_.k / L_.streams; }
    int64_t b_row_bytes() const { return L_.ldb * 4; }

    // ---- the K loop: row groups of one row per stream, each a pass over the columns ----
    void advance_one_row() {
        add(rdi, static_cast<uint32_t>(L_.a_step));
        mov(rax, b_row_bytes());
        add(rsi, rax);
    }

    // Row groups: the first starts the sums (nothing to load), the last (the K % streams rows left past the last
    // segment where there are any) ends them through the epilogue into C, the ones between go through acc. Each
    // group after the first first moves the cursors one row on.
    void row_groups() {
        const int64_t rows = segment_rows();
        std::vector<int64_t> group(L_.streams);  // each stream's row, relative to segment 0's
        for (int s = 0; s < L_.streams; ++s) group[s] = s * rows;
        // (From segment 0's row `rows`, where the cursors are after the last group, the rows past the last segment.)
        std::vector<int64_t> rest;
        for (int64_t r = int64_t(L_.streams) * rows; r < L_.k; ++r) rest.push_back(r - rows);
        const int64_t middle = rest.empty() ? rows - 2 : rows - 1;  // groups between the first and the last
        column_pass(group, true, rest.empty() && rows == 1);
        if (middle > 0) {
            Xbyak::Label loop;
            mov(r11, middle);
            L(loop);
            advance_one_row();
            column_pass(group, false, false);
            dec(r11);
            jnz(loop, T_NEAR);
        }
        if (!rest.empty()) {
            advance_one_row();
            column_pass(rest, false, true);
        } else if (rows > 1) {
            advance_one_row();
            column_pass(group, false, true);
        }
    }

    Xbyak::Address b_at(int64_t row, int64_t off) { return ptr[rsi + r10 + row * b_row_bytes() + off]; }

    // One vector (or `count` at once) of the row group: acc (or, for the first group, nothing) plus each
    // stream's row times its a value, back into acc or, for the last group, through the epilogue into C.
    void column_step(const std::vector<int64_t>& group, bool first, bool last, int count, bool masked) {
        for (int u = 0; u < count; ++u) {
            const Zmm x = sum(u);
            const int64_t off = int64_t(u) * 64;
            size_t s = 0;
            if (first) {
                if (masked) vmulps(x | k1 | T_z, a_value(0), b_at(group[0], off));
                else vmulps(x, a_value(0), b_at(group[0], off));
                s = 1;
            } else {
                vmovups(x, ptr[r8 + r10 + off]);
            }
            for (; s < group.size(); ++s) {
                if (masked) vfmadd231ps(x | k1, a_value(static_cast<int>(s)), b_at(group[s], off));
                else vfmadd231ps(x, a_value(static_cast<int>(s)), b_at(group[s], off));
            }
        }
        // (One line in four: enough to start the L2 prefetcher on a stream's next page before the loads get there.)
        if (L_.prefetch_bytes > 0 && count == kVectorsPerIteration)
            for (int64_t row : group) prefetcht1(b_at(row, L_.prefetch_bytes));
        for (int u = 0; u < count; ++u) {
            if (last) epilogue_step(sum(u), int64_t(u) * 64, masked);
            else vmovups(ptr[r8 + r10 + int64_t(u) * 64], sum(u));
        }
    }

    void column_pass(const std::vector<int64_t>& group, bool first, bool last) {
        for (size_t s = 0; s < group.size(); ++s)
            vbroadcastss(a_value(static_cast<int>(s)), ptr[rdi + group[s] * L_.a_step]);
        xor_(r10d, r10d);
        Xbyak::Label wide, single, done;
        L(wide);
        lea(rax, ptr[r10 + kVectorsPerIteration * 64]);
        cmp(rax, r9);
        ja(single, T_NEAR);
        column_step(group, first, last, kVectorsPerIteration, false);
        add(r10, kVectorsPerIteration * 64);
        jmp(wide, T_NEAR);
        L(single);
        cmp(r10, r9);
        jae(done, T_NEAR);
        column_step(group, first, last, 1, false);
        add(r10, 64);
        jmp(single, T_NEAR);
        L(done);
        if (tail_) column_step(group, first, last, 1, true);
    }

    // ---- epilogue: C = act(alpha sum + beta C + bias) for the vector at column offset r10 + off ----
    void epilogue_step(const Zmm& x, int64_t off, bool masked) {
        const Zmm loaded = scratch(0);
        if (L_.alpha != 1.0f) vmulps(x, x, pool_(L_.alpha));
        if (L_.beta != 0.0f) {
            if (masked) vmovups(loaded | k1 | T_z, ptr[rdx + r10 + off]);
            else vmovups(loaded, ptr[rdx + r10 + off]);
            if (L_.beta == 1.0f) vaddps(x, x, loaded);
            else vfmadd231ps(x, loaded, pool_(L_.beta));
        }
        if (L_.bias == BiasKind::per_column) {
            if (masked) vmovups(loaded | k1 | T_z, ptr[rcx + r10 + off]);
            else vmovups(loaded, ptr[rcx + r10 + off]);
            vaddps(x, x, loaded);
        } else if (L_.bias == BiasKind::per_row) {
            vaddps(x, x, row_bias());
        }
        math_.apply(L_.activation, x, scratch(0), scratch(1), scratch(2));
        if (masked) vmovups(ptr[rdx + r10 + off] | k1, x);
        else vmovups(ptr[rdx + r10 + off], x);
    }

    const GemmF32GemvLayout L_;
    ConstantPool pool_;
    VectorMath math_;
    bool tail_ = false;
};

}  // namespace

GeneratedGemvCode generate_gemm_f32_gemv(const GemmF32GemvLayout& layout) {
    if (layout.n < 1 || layout.k < 1 || layout.streams < 1 || layout.streams > kGemvMaxStreams ||
        layout.streams > layout.k || layout.prefetch_bytes < 0)
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_gemv generator: layout outside what it emits");
    const int64_t reach = layout.k * layout.ldb * 4 + layout.prefetch_bytes + 64 * kVectorsPerIteration;
    if (reach >= (int64_t(1) << 31) || layout.k * layout.a_step >= (int64_t(1) << 31))
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_gemv generator: row offsets exceed 32-bit displacements");
    // Per variant, up to four column passes (first, loop, last, rest) of up to kVectorsPerIteration + 2 steps of
    // streams x 2 instructions, the last pass's steps each with an epilogue (an activation included).
    const size_t pass = static_cast<size_t>(kVectorsPerIteration + 2) * (static_cast<size_t>(layout.streams) * 24 + 32);
    const size_t capacity = 4096 + 2 * (4 * pass + (kVectorsPerIteration + 2) * 768);
    return emit_code("gemm_f32_gemv", capacity, [&](uint8_t* buffer, size_t size) {
        GemmF32GemvEmitter emitter(layout, buffer, size);
        GeneratedGemvCode out;
        out.whole_entry = emitter.emit_variant(false);
        out.tail_entry = layout.n % 16 != 0 ? emitter.emit_variant(true) : out.whole_entry;
        emitter.finish();
        out.bytes.assign(emitter.getCode(), emitter.getCode() + emitter.getSize());
        return out;
    });
}

}  // namespace jitmm::x86
