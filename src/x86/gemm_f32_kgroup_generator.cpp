#include "x86/gemm_f32_kgroup_generator.hpp"

#include "core/error.hpp"
#include "x86/emit_buffer.hpp"
#include "x86/vector_math.hpp"

#include <xbyak/xbyak.h>

#include <algorithm>
#include <array>
#include <vector>

namespace jitmm::x86 {

namespace {

using Xbyak::Zmm;

// Full groups up to this many are emitted straight; more run in a loop of kGroupsPerIteration per iteration.
constexpr int64_t kMaxUnrolledGroups = 8;
constexpr int kGroupsPerIteration = 2;

// Which (row of the group, A lane) products each lane of a register sums: the reduction tree's shuffles are
// replayed on these at generation time, so that the final permute is derived, not hand-written per g.
using LaneSources = std::array<std::vector<int>, 16>;  // source = row * 16 + lane

// The reduction levels that add up groups of g lanes: 128-bit chunks (g = 8), pairs of floats (g >= 4), floats.
enum class Level { chunks128, pairs64, floats32 };

std::vector<Level> levels_for(int g) {
    if (g == 8) return {Level::chunks128, Level::pairs64, Level::floats32};
    if (g == 4) return {Level::pairs64, Level::floats32};
    return {Level::floats32};
}

// The two shuffles of a level on lane sources (lo and hi halves of each pair, as the emitted instructions).
void replay(Level level, const LaneSources& x, const LaneSources& y, LaneSources& lo, LaneSources& hi) {
    for (int j = 0; j < 4; ++j) {  // 128-bit chunks
        for (int l = 0; l < 4; ++l) {
            const int d = 4 * j + l;
            if (level == Level::chunks128) {  // vshuff32x4 0x88 / 0xdd: even / odd chunks of x, then of y
                const int src_chunk = (j % 2) * 2;
                lo[d] = (j < 2 ? x : y)[4 * src_chunk + l];
                hi[d] = (j < 2 ? x : y)[4 * (src_chunk + 1) + l];
            } else if (level == Level::pairs64) {  // vunpcklpd / vunpckhpd
                lo[d] = (l < 2 ? x : y)[4 * j + l % 2];
                hi[d] = (l < 2 ? x : y)[4 * j + 2 + l % 2];
            } else {  // vshufps 0x88 / 0xdd: even / odd floats of x, then of y
                lo[d] = (l < 2 ? x : y)[4 * j + 2 * (l % 2)];
                hi[d] = (l < 2 ? x : y)[4 * j + 2 * (l % 2) + 1];
            }
        }
    }
}

// Register plan (System V): rdi = A tile, rsi = packed B, rdx = C tile, rcx = bias (per row: this tile's first),
// r8 = loop counter, r11 = C cursor, rax scratch. zmm0 .. rows-1 accumulators; the main loop's B vector and two
// broadcast registers, and the epilogue's scratch, sit above kKGroupMaxRows.
class GemmF32KGroupEmitter : public Xbyak::CodeGenerator {
public:
    GemmF32KGroupEmitter(const GemmF32KGroupLayout& layout, uint8_t* buffer, size_t capacity)
        : Xbyak::CodeGenerator(capacity, buffer),
          L_(layout),
          slots_(kgroup_slots(layout.g)),
          k_tail_(static_cast<int>(layout.k % layout.g)),
          pool_(*this),
          math_(*this, pool_, true) {
        derive_lane_order();
    }

    size_t emit_variant(int rows) {
        align(16);
        const size_t entry = getSize();
        rows_ = rows;
        if (k_tail_ != 0) {
            mov(eax, (1u << k_tail_) - 1);
            kmovw(k1, eax);
        }
        for (int i = 0; i < rows_; ++i) vxorps(acc(i), acc(i), acc(i));
        prefetch_a_ahead();
        k_loop();
        epilogue();
        vzeroupper();
        ret();
        return entry;
    }

    void finish() {
        align(64);
        L(lane_order_);
        for (int v : lane_order_values_) dd(static_cast<uint32_t>(v));
        L(row_of_lane_);  // lane -> the row (of the group) whose value it holds: a per-row bias into place
        for (int lane = 0; lane < 16; ++lane) dd(static_cast<uint32_t>(lane_row(lane)));
        L(slot_of_lane_);  // lane -> its column slot: a per-column bias into place (C transposed)
        for (int lane = 0; lane < 16; ++lane) dd(static_cast<uint32_t>(lane_slot(lane)));
        pool_.emit();
    }

private:
    Zmm acc(int i) const { return Zmm(i); }
    // Main loop.
    Zmm bvec() const { return Zmm(29); }
    Zmm bcast(int i) const { return Zmm(30 + i % 2); }
    // Epilogue.
    Zmm tree_tmp() const { return Zmm(24); }
    Zmm zero() const { return Zmm(25); }
    Zmm order() const { return Zmm(26); }
    Zmm loaded() const { return Zmm(27); }
    Zmm act_tmp(int t) const { return Zmm(28 + t); }

    // ---- main loop: per group, one B vector and per row a broadcast load and an FMA ----
    Xbyak::Address a_at(int i, int64_t off) { return ptr[rdi + i * L_.lda * 4 + off]; }

    void group_step(int64_t a_off, int64_t b_off) {
        vmovups(bvec(), ptr[rsi + b_off]);
        for (int i = 0; i < rows_; ++i) {
            if (L_.g == 2) vbroadcastsd(bcast(i), a_at(i, a_off));
            else if (L_.g == 4) vbroadcastf32x4(bcast(i), a_at(i, a_off));
            else vbroadcastf64x4(bcast(i), a_at(i, a_off));
            vfmadd231ps(acc(i), bcast(i), bvec());
        }
    }

    // The last K % g values of each row: a masked load (nothing past the row is read), then the same broadcast
    // from the register. Its B vector is zero past K.
    void tail_step(int64_t a_off, int64_t b_off) {
        vmovups(bvec(), ptr[rsi + b_off]);
        for (int i = 0; i < rows_; ++i) {
            const Zmm t = bcast(i);
            if (L_.g == 8) {
                vmovups(Xbyak::Ymm(t.getIdx()) | k1 | T_z, a_at(i, a_off));
                vshuff64x2(t, t, t, 0x44);
            } else {
                vmovups(Xbyak::Xmm(t.getIdx()) | k1 | T_z, a_at(i, a_off));
                if (L_.g == 4) vshuff32x4(t, t, t, 0x00);
                else vbroadcastsd(t, Xbyak::Xmm(t.getIdx()));
            }
            vfmadd231ps(acc(i), t, bvec());
        }
    }

    // An A streaming from memory: the lines a_prefetch_bytes past the tile's rows (later tiles' rows, A being
    // read front to back), into L2, so that many lines are in flight (the rows' few K values keep the FMAs short).
    void prefetch_a_ahead() {
        if (L_.a_prefetch_bytes <= 0) return;
        const int64_t span = (int64_t(rows_ - 1) * L_.lda + L_.k) * 4;
        for (int64_t off = 0; off < span; off += 64) prefetcht1(ptr[rdi + L_.a_prefetch_bytes + off]);
    }

    void k_loop() {
        const int64_t groups = L_.k / L_.g;
        const int64_t a_step = int64_t(L_.g) * 4, b_step = 64;
        int64_t done = 0;
        if (groups > kMaxUnrolledGroups) {
            const int64_t iterations = groups / kGroupsPerIteration;
            Xbyak::Label loop;
            mov(r8, iterations);
            L(loop);
            for (int u = 0; u < kGroupsPerIteration; ++u) group_step(u * a_step, u * b_step);
            add(rdi, static_cast<uint32_t>(kGroupsPerIteration * a_step));
            add(rsi, static_cast<uint32_t>(kGroupsPerIteration * b_step));
            dec(r8);
            jnz(loop, T_NEAR);
            done = iterations * kGroupsPerIteration;
        }
        // (Offsets from the cursors, which the loop left at group `done`.)
        const int64_t base = done;
        for (int64_t q = done; q < groups; ++q) group_step((q - base) * a_step, (q - base) * b_step);
        if (k_tail_ != 0) tail_step((groups - base) * a_step, (groups - base) * b_step);
    }

    // ---- epilogue: per group of g rows, the sums into one vector of g rows x slots_ columns ----
    void derive_lane_order() {
        std::vector<LaneSources> regs(L_.g);
        for (int r = 0; r < L_.g; ++r)
            for (int lane = 0; lane < 16; ++lane) regs[r][lane] = {r * 16 + lane};
        for (Level level : levels_for(L_.g)) {
            std::vector<LaneSources> next(regs.size() / 2);
            for (size_t p = 0; p < next.size(); ++p) {
                LaneSources lo, hi;
                replay(level, regs[2 * p], regs[2 * p + 1], lo, hi);
                for (int lane = 0; lane < 16; ++lane) {
                    next[p][lane] = lo[lane];
                    next[p][lane].insert(next[p][lane].end(), hi[lane].begin(), hi[lane].end());
                }
            }
            regs = next;
        }
        // Each lane now sums the g lanes of one row's column slot: out lane slots_ * row + column takes it.
        lane_order_values_.assign(16, 0);
        for (int lane = 0; lane < 16; ++lane) {
            const std::vector<int>& s = regs[0][lane];
            const int row = s.front() / 16, slot = (s.front() % 16) / L_.g;
            bool whole = static_cast<int>(s.size()) == L_.g;
            for (int src : s) whole = whole && src / 16 == row && (src % 16) / L_.g == slot;
            if (!whole) fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_kgroup generator: reduction tree mixes lanes");
            lane_order_values_[out_lane(row, slot)] = lane;
        }
    }

    // The tree over the accumulators of rows r0 .. r0 + g - 1 (absent rows of a tail as zeros); returns the
    // register holding the sums, still in the tree's lane order.
    Zmm reduce_group(int r0) {
        std::vector<int> regs(L_.g, -1);
        for (int j = 0; j < L_.g && r0 + j < rows_; ++j) regs[j] = r0 + j;
        bool zeroed = false;
        auto operand = [&](int r) {
            if (r >= 0) return Zmm(r);
            if (!zeroed) vxorps(zero(), zero(), zero());
            zeroed = true;
            return zero();
        };
        for (Level level : levels_for(L_.g)) {
            std::vector<int> next(regs.size() / 2, -1);
            for (size_t p = 0; p < next.size(); ++p) {
                const int a = regs[2 * p], b = regs[2 * p + 1];
                if (a < 0 && b < 0) continue;
                const Zmm dst(a >= 0 ? a : b), x = operand(a), y = operand(b);
                if (level == Level::chunks128) {
                    vshuff32x4(tree_tmp(), x, y, 0x88);
                    vshuff32x4(dst, x, y, 0xdd);
                } else if (level == Level::pairs64) {
                    vunpcklpd(tree_tmp(), x, y);
                    vunpckhpd(dst, x, y);
                } else {
                    vshufps(tree_tmp(), x, y, 0x88);
                    vshufps(dst, x, y, 0xdd);
                }
                vaddps(dst, dst, tree_tmp());
                next[p] = dst.getIdx();
            }
            regs = next;
        }
        return Zmm(regs[0]);
    }

    // The epilogue's vector holds g rows x slots_ columns: lane slots_ * row + column, or with C transposed (the
    // tile's rows are C's columns) lane g * column + row. It is stored in units: a row's n columns, or with C
    // transposed a column's rows, each one masked store at the unit's address less its first lane's offset (the
    // lanes outside the mask are neither read nor written, so the address may precede C).
    int out_lane(int row, int slot) const { return L_.c_transposed ? L_.g * slot + row : slots_ * row + slot; }
    int lane_row(int lane) const { return L_.c_transposed ? lane % L_.g : lane / slots_; }
    int lane_slot(int lane) const { return L_.c_transposed ? lane / L_.g : lane % slots_; }
    int units(int present) const { return L_.c_transposed ? L_.n : present; }
    uint32_t unit_bits(int u, int present) const {
        return L_.c_transposed ? ((1u << present) - 1) << (L_.g * u) : ((1u << L_.n) - 1) << (slots_ * u);
    }
    Xbyak::Address unit_at(int u) {
        const int first_lane = L_.c_transposed ? L_.g * u : slots_ * u;
        return ptr[r11 + u * L_.ldc * 4 - first_lane * 4];
    }

    // A whole group's unit masks are set once per call in k4 .. k7 where there are up to 4 units (k1 is the K
    // tail's, k2 the erf-GELU's); more units, and a transposed tail group's, take turns in k3.
    bool masks_preset() const { return units(L_.g) <= 4; }

    void preset_unit_masks() {
        if (!masks_preset()) return;
        for (int u = 0; u < units(L_.g); ++u) {
            mov(eax, unit_bits(u, L_.g));
            kmovw(Xbyak::Opmask(4 + u), eax);
        }
    }

    Xbyak::Opmask unit_mask(int u, int present) {
        if (masks_preset() && unit_bits(u, present) == unit_bits(u, L_.g)) return Xbyak::Opmask(4 + u);
        mov(eax, unit_bits(u, present));
        kmovw(k3, eax);
        return k3;
    }

    // A bias of `count` values from `at` into the lanes that `table` names (rows or columns of the layout).
    void spread_bias(const Xbyak::Address& at, int count, const Xbyak::Label& table) {
        mov(eax, (1u << count) - 1);
        kmovw(k3, eax);
        vmovups(loaded() | k3 | T_z, at);
        vmovups(act_tmp(0), ptr[rip + table]);
        vpermps(loaded(), act_tmp(0), loaded());
    }

    void epilogue() {
        mov(r11, rdx);
        vmovups(order(), ptr[rip + lane_order_]);
        preset_unit_masks();
        for (int r0 = 0; r0 < rows_; r0 += L_.g) {
            const int present = std::min(L_.g, rows_ - r0);
            const Zmm x = reduce_group(r0);
            vpermps(x, order(), x);
            if (L_.alpha != 1.0f) vmulps(x, x, pool_(L_.alpha));
            if (L_.beta != 0.0f) {
                vxorps(loaded(), loaded(), loaded());
                for (int u = 0; u < units(present); ++u) vmovups(loaded() | unit_mask(u, present), unit_at(u));
                if (L_.beta == 1.0f) vaddps(x, x, loaded());
                else vfmadd231ps(x, loaded(), pool_(L_.beta));
            }
            if (L_.bias == BiasKind::per_column && !L_.c_transposed) {
                // bias[0 .. n) into every slot group of lanes.
                mov(eax, (1u << L_.n) - 1);
                kmovw(k3, eax);
                vmovups(loaded() | k3 | T_z, ptr[rcx]);
                if (slots_ == 2) vbroadcastsd(loaded(), Xbyak::Xmm(loaded().getIdx()));
                else if (slots_ == 4) vshuff32x4(loaded(), loaded(), loaded(), 0x00);
                else vshuff64x2(loaded(), loaded(), loaded(), 0x44);
                vaddps(x, x, loaded());
            } else if (L_.bias == BiasKind::per_column) {
                spread_bias(ptr[rcx], L_.n, slot_of_lane_);
                vaddps(x, x, loaded());
            } else if (L_.bias == BiasKind::per_row) {
                spread_bias(ptr[rcx + r0 * 4], present, row_of_lane_);
                vaddps(x, x, loaded());
            }
            math_.apply(L_.activation, x, act_tmp(0), act_tmp(1), act_tmp(2));
            for (int u = 0; u < units(present); ++u) vmovups(unit_at(u) | unit_mask(u, present), x);
            if (r0 + L_.g < rows_) {
                // The next group's rows: g rows of C further, or with C transposed g columns.
                mov(rax, L_.c_transposed ? int64_t(L_.g) * 4 : int64_t(L_.g) * L_.ldc * 4);
                add(r11, rax);
            }
        }
    }

    const GemmF32KGroupLayout L_;
    const int slots_;
    const int k_tail_;
    ConstantPool pool_;
    VectorMath math_;
    int rows_ = 0;
    std::vector<int> lane_order_values_;
    Xbyak::Label lane_order_, row_of_lane_, slot_of_lane_;
};

}  // namespace

GeneratedKGroupCode generate_gemm_f32_kgroup(const GemmF32KGroupLayout& layout, const std::vector<int>& rows) {
    if (layout.g != 2 && layout.g != 4 && layout.g != 8)
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_kgroup generator: g must be 2, 4 or 8");
    if (layout.n < 1 || layout.n > kgroup_slots(layout.g) || layout.mr < 1 || layout.mr > kKGroupMaxRows ||
        layout.k < 1)
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_kgroup generator: tile outside the registers");
    if (int64_t(layout.mr) * std::max(layout.lda, layout.ldc) * 4 + layout.a_prefetch_bytes + 64 >= (int64_t(1) << 31))
        fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_kgroup generator: row offsets exceed 32-bit displacements");
    const int64_t groups = std::min<int64_t>(layout.k / layout.g, kMaxUnrolledGroups + kGroupsPerIteration);
    size_t capacity = 4096;
    for (int r : rows) {
        if (r < 1 || r > layout.mr)
            fail(JITMM_STATUS_INTERNAL_ERROR, "gemm_f32_kgroup generator: rows outside the tile");
        capacity += 2048 + static_cast<size_t>(groups + 1) * (8 + 16 * r) + static_cast<size_t>(r) * 64;
        if (layout.a_prefetch_bytes > 0) capacity += static_cast<size_t>((r * layout.lda * 4) / 64 + 1) * 8;
    }
    return emit_code("gemm_f32_kgroup", capacity, [&](uint8_t* buffer, size_t size) {
        GemmF32KGroupEmitter emitter(layout, buffer, size);
        GeneratedKGroupCode out;
        for (int r : rows) out.entries.push_back(emitter.emit_variant(r));
        emitter.finish();
        out.bytes.assign(emitter.getCode(), emitter.getCode() + emitter.getSize());
        return out;
    });
}

}  // namespace jitmm::x86
