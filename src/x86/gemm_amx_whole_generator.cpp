#include "x86/gemm_amx_whole_generator.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "x86/emit_buffer.hpp"
#include "x86/gemm_amx_generator.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstdint>
#include <deque>
#include <string>

namespace jitmm::x86 {

namespace {

using Xbyak::Tmm;

constexpr int kTile = 16;        // rows and 32-bit columns of a C tile
constexpr int kPanelCols = 32;   // columns of one packed B panel
constexpr int kBPanelRow = 128;  // bytes of one k group across the panel

// Tiles, one K step (K's bytes at most 64): A tmm0-1 (row tiles in turn), B tmm2-3 (the panel's two column
// tiles), C tmm4-7 in turn, each stored two products after its own: the store then finds its product done, and
// the product that reuses the register finds the store done. Two K steps: A tmm0-1 (the row tile's two steps),
// B tmm2-5 (column tile j, step s: 2 + 2j + s), C tmm6-7 in turn, each stored one product later.
constexpr int kTiles = 8;

// Whether the function visits its tiles row tile by row tile: a C of kRowMajorMinCBytes or more (past what L1
// keeps beside A and B: panel by panel, each C row's lines were written in as many passes as panels) over a K of
// kRowMajorMinKBytes. 1 thread, median us, panels -> rows: s8 128x128x64 1.74 -> 1.36, 128^3 2.21 -> 1.66,
// 127^3 3.73 -> 2.62, 100^3 1.82 -> 1.43, 64x256x64 2.16 -> 1.73, 48x200x64 1.25 -> 1.08, bf16 128x64x64 0.97
// -> 0.78, 90x90x64 1.48 -> 1.12, 100x100x64 x4 7.35 -> 5.71; a smaller C kept panels (bf16 64^3 0.31 against
// 0.38, s8 80x96x64 0.42 against 0.45), and so did a K of 8 bytes (u8 120x120x8 1.05 against 1.19).
// JITMM_X86_LOWP_WHOLE_ORDER=rows|panels forces one (measurements).
constexpr int64_t kRowMajorMinCBytes = 32 * 1024;
constexpr int64_t kRowMajorMinKBytes = 32;
bool row_major_order(const Problem& p, plan::LowpStep step) {
    const char* env = std::getenv("JITMM_X86_LOWP_WHOLE_ORDER");
    if (env != nullptr && std::string(env) == "rows") return true;
    if (env != nullptr && std::string(env) == "panels") return false;
    return p.m * p.n * dtype_size(p.c_type) >= kRowMajorMinCBytes &&
           p.k * plan::step_elem_bytes(step) >= kRowMajorMinKBytes;
}

// K steps whose B tiles a panel holds in registers (more: long_k).
constexpr int kHeldSteps = 2;
// Bytes between the copied rows of A's last step (one tile row).
constexpr int64_t kStepRowBytes = 64;

// Tile products at most over three or four K steps (amx_whole_call_fits).
constexpr int64_t kWholeMaxLongProducts = 160;

// Row tiles at most over 17-31 columns (amx_whole_call_fits).
constexpr int64_t kWholeMaxRowTilesOverTwoPanels = 16;

// Register plan (System V): rdi = A, rsi = B as the caller stores it, rdx = C, rcx = the packed B panels,
// r11 = the copied A rows (arrives in r8), r8 = A row stride, r9 = C row stride, r10 = B panel row stride,
// rax = the copied rows' stride; zmm0-2 packing and copying temporaries, zmm28 zero, zmm29-31 the permute
// indices. Every offset is a displacement baked from the shape.
class AmxWholeEmitter : public Xbyak::CodeGenerator {
public:
    AmxWholeEmitter(const Problem& p, const plan::X86LowpPlan& plan, uint8_t* buffer, size_t capacity)
        : Xbyak::CodeGenerator(capacity, buffer),
          p_(p),
          step_bytes_(plan::amx_k_step_bytes(plan.layout.step, p.k)),
          k_bytes_(p.k * plan::step_elem_bytes(plan.layout.step)),
          steps_(static_cast<int>((k_bytes_ + step_bytes_ - 1) / step_bytes_)),
          a_row_bytes_(p.lda * dtype_size(p.a_type)),
          c_row_bytes_(p.ldc * dtype_size(p.c_type)),
          panel_bytes_(amx_whole_k_groups(p, plan) * kBPanelRow),
          step_(plan.layout.step),
          a_signed_(p.a_type == JITMM_DTYPE_S8),
          b_signed_(p.b_type == JITMM_DTYPE_S8),
          b_row_bytes_(p.ldb * dtype_size(p.b_type)),
          packs_b_(amx_whole_packs_b(p, plan)),
          row_tiles_(amx_whole_tiles(p.m)),
          panels_(amx_whole_panels(p.n)),
          copy_first_(copied_rows_from(p, plan.layout.step)),
          row_major_(row_major_order(p, plan.layout.step)) {}

    size_t emit_function() {
        const size_t entry = getSize();
        const bool copies = copy_first_ < p_.m;
        if (copies) mov(r11, r8);
        if (packs_b_ || copies) vpxord(zmm28, zmm28, zmm28);
        if (packs_b_) {
            vmovdqu64(zmm30, ptr[rip + pair_index_[0]]);
            vmovdqu64(zmm31, ptr[rip + pair_index_[1]]);
            if (has_single_panel()) vmovdqu64(zmm29, ptr[rip + single_index_]);
            pack_panel(panels_[0], 0);
        }
        if (copies) copy_a_rows();
        // A single call (r9, the sixth argument, non-zero) loads the configuration here, while the packing
        // stores drain, and releases the tiles at the end; a run of batches has the driver's stub load it once.
        Xbyak::Label configured;
        push(r9);
        test(r9, r9);
        jz(configured, T_NEAR);
        ldtilecfg(ptr[rip + config_]);
        L(configured);
        mov(r8, a_row_bytes_);
        mov(r9, c_row_bytes_);
        mov(r10, kBPanelRow);
        if (copies) mov(rax, kStepRowBytes);
        const size_t store_delay = steps_ == 1 || long_k() ? 2 : 1;
        int64_t unit = 0;
        // Visits of (row tile, panel): panel by panel (B's tiles loaded once a panel, A's once a visit), or row
        // tile by row tile where C passes L1 (row_major_: A's tiles once a row tile, B's once a visit; C's rows
        // then written whole before the next ones).
        std::vector<std::pair<size_t, size_t>> visits;
        for (size_t outer = 0; outer < (row_major_ ? row_tiles_.size() : panels_.size()); ++outer)
            for (size_t inner = 0; inner < (row_major_ ? panels_.size() : row_tiles_.size()); ++inner)
                visits.emplace_back(row_major_ ? outer : inner, row_major_ ? inner : outer);
        size_t loaded_a = SIZE_MAX, loaded_b = SIZE_MAX;
        for (const auto& [i, pi] : visits) {
            const AmxWholePanel& panel = panels_[pi];
            const int64_t b_panel = static_cast<int64_t>(pi) * panel_bytes_;
            const int64_t row = row_tiles_[i];
            auto load_b = [&](const Tmm& t, int j, int s) {
                tileloadd(t, ptr[rcx + r10 + b_panel + s * b_step() + j * kTile * 4]);
            };
            if (!long_k() && loaded_b != pi)
                for (int j = 0; j < panel.tiles; ++j)
                    for (int s = 0; s < steps_; ++s) load_b(b_tile(j, s), j, s);
            if (!long_k() && (loaded_a != i || !row_major_))
                for (int s = 0; s < steps_; ++s) load_a(a_tile(i, s), row, s);
            loaded_a = i;
            loaded_b = pi;
            for (int j = 0; j < panel.tiles; ++j, ++unit) {
                tilezero(c_tile(unit));
                for (int s = 0; s < steps_; ++s) {
                    if (long_k()) {  // both operands a step at a time, in registers that alternate
                        load_a(a_tile(i, s), row, s);
                        load_b(b_tile(j, s), j, s);
                    }
                    multiply(c_tile(unit), a_tile(i, s), b_tile(j, s));
                }
                // The next panel is packed while the tile unit works through this panel's first products,
                // and ahead of their C stores: stores leave in program order, so packing stores queued
                // behind tile stores (which wait for the products) would wait too.
                // (Packing two or four panels ahead measured the same, over one or two row tiles too.)
                if (packs_b_ && i == 0 && j == panel.tiles - 1 && pi + 1 < panels_.size())
                    pack_panel(panels_[pi + 1], static_cast<int64_t>(pi + 1));
                waiting_.push_back({row, panel.first + j * kTile, unit});
                if (waiting_.size() > store_delay) store_oldest();
            }
        }
        while (!waiting_.empty()) store_oldest();
        if (packs_b_ || copies) vzeroupper();
        Xbyak::Label kept;
        pop(rax);
        test(rax, rax);
        jz(kept, T_NEAR);
        tilerelease();
        L(kept);
        ret();
        return entry;
    }

    // The stubs the driver calls around a run of calls (TileSession): the tile configuration, and the release.
    size_t emit_config_stub() {
        align(16);
        const size_t entry = getSize();
        ldtilecfg(ptr[rip + config_]);
        ret();
        return entry;
    }
    size_t emit_release_stub() {
        align(16);
        const size_t entry = getSize();
        tilerelease();
        ret();
        return entry;
    }

    void finish() {
        align(64);
        L(config_);
        for (uint8_t byte : config_bytes()) db(byte);
        if (packs_b_) emit_indices();
    }

private:
    // Three or four K steps: the B tiles of a panel no longer all fit the tile registers, so each product loads
    // its step's A and B tiles (tmm0-1 and tmm2-3 by the step's parity, so that a step's loads overlap the
    // product before) and C rotates through tmm4-7.
    bool long_k() const { return steps_ > kHeldSteps; }
    int64_t b_step() const { return (step_bytes_ / 4) * kBPanelRow; }  // a K step's k groups in the panel
    // Row tile `row`'s A tile of step s: in place, or the last step of copied rows from the copy.
    void load_a(const Tmm& t, int64_t row, int s) {
        if (row >= copy_first_ && s == steps_ - 1)
            tileloadd(t, ptr[r11 + rax + (row - copy_first_) * kStepRowBytes]);
        else
            tileloadd(t, ptr[rdi + r8 + row * a_row_bytes_ + s * step_bytes_]);
    }

    // Palette 1: bytes per row at 16 + 2t, rows at 48 + t. A tiles: 16 rows (or M's, under 16) of a step's
    // bytes; B tiles: a step's k groups of 16 columns (or N's); C tiles: as many rows and columns.
    std::array<uint8_t, 64> config_bytes() const {
        std::array<uint8_t, 64> cfg = {};
        cfg[0] = 1;
        auto set = [&](const Tmm& t, int rows, int bytes) {
            cfg[16 + 2 * t.getIdx()] = static_cast<uint8_t>(bytes & 0xff);
            cfg[17 + 2 * t.getIdx()] = static_cast<uint8_t>(bytes >> 8);
            cfg[48 + t.getIdx()] = static_cast<uint8_t>(rows);
        };
        const int rows = static_cast<int>(std::min<int64_t>(kTile, p_.m));
        const int cols = static_cast<int>(std::min<int64_t>(kTile, p_.n));
        for (int i = 0; i < 2; ++i) set(Tmm(i), rows, step_bytes_);  // A
        for (int j = 0; j < 2; ++j)
            for (int s = 0; s < std::min(steps_, kHeldSteps); ++s) set(b_tile(j, s), step_bytes_ / 4, cols * 4);
        for (int u = 0; u < c_tiles(); ++u) set(c_tile(u), rows, cols * 4);
        return cfg;
    }

    void multiply(const Tmm& c, const Tmm& a, const Tmm& b) {
        if (step_ == plan::LowpStep::amx_bf16) tdpbf16ps(c, a, b);
        else if (a_signed_ && b_signed_) tdpbssd(c, a, b);
        else if (a_signed_) tdpbsud(c, a, b);
        else if (b_signed_) tdpbusd(c, a, b);
        else tdpbuud(c, a, b);
    }

    // ---- A rows whose steps would read past K ----------------------------------------------------------------
    // The last step's bytes of the rows from copy_first_ on (copied_rows_from) go to a_rows, kStepRowBytes apart,
    // zero past K: a masked load and a store a row. Their other steps are read in place.
    static int64_t copied_rows_from(const Problem& p, plan::LowpStep step) {
        const int64_t k_bytes = p.k * plan::step_elem_bytes(step);
        const int64_t step_bytes = plan::amx_k_step_bytes(step, p.k);
        if (k_bytes % step_bytes == 0) return p.m;  // the steps end at K: every row in place
        // bf16: the bytes past K could be an Inf or a NaN (0 x Inf is a NaN), so every row. int8: the bytes past
        // K meet the packed B's zero k rows (exact), so only the last row tile, whose reads may leave A.
        if (step == plan::LowpStep::amx_bf16) return 0;
        return amx_whole_tiles(p.m).back();
    }
    void copy_a_rows() {
        const int64_t last_step = (steps_ - 1) * step_bytes_;
        const int64_t valid = k_bytes_ - last_step;  // 1 .. step_bytes_ - 1
        mov(rax, (uint64_t(1) << valid) - 1);
        kmovq(k1, rax);
        for (int64_t r = copy_first_; r < p_.m; ++r) {
            vmovdqu8(zmm0 | k1 | T_z, ptr[rdi + r * a_row_bytes_ + last_step]);
            vmovdqa64(ptr[r11 + (r - copy_first_) * kStepRowBytes], zmm0);
        }
    }

    // ---- B packing (row-major B, packs_b_): one panel, at slot `index` of the panels ----------------------------
    // Each k group's B rows (4 int8 rows or 2 bf16 rows) become one panel row of 32 columns x 4 bytes: the
    // rows' 32-column slices are gathered into two zmm (int8: rows 0|1 and 2|3, 32 bytes each; bf16: rows 0
    // and 1, 64 bytes each) and two byte permutes interleave them into the panel row's two 64-byte halves. A
    // panel of one column tile takes its rows' 16-column slices into one zmm and one single-source permute.
    // Rows past K are zero (zmm28), and so are the k groups past them up to the steps' end.
    void pack_panel(const AmxWholePanel& panel, int64_t index) {
        const bool half = panel.tiles == 1;
        const int64_t j0 = panel.first;
        const int g = plan::step_group(step_);
        const int64_t esz = plan::step_elem_bytes(step_);
        const int64_t slice_bytes = (half ? kTile : kPanelCols) * esz;  // of one B row
        auto row = [&](int64_t k) { return ptr[rsi + k * b_row_bytes_ + j0 * esz]; };
        const int64_t groups = panel_bytes_ / kBPanelRow;
        for (int64_t kg = 0; kg < groups; ++kg) {
            const int64_t k = kg * g;
            const int64_t panel_row = index * panel_bytes_ + kg * kBPanelRow;
            auto out = [&](int part) { return ptr[rcx + panel_row + part * 64]; };
            if (k >= p_.k) {  // past K: zero k rows
                vmovdqu8(out(0), zmm28);
                if (!half) vmovdqu8(out(1), zmm28);
                continue;
            }
            const bool whole_group = k + g <= p_.k;
            if (half) {
                if (slice_bytes == 16) {  // int8: 4 rows of 16 bytes
                    vmovdqu8(xmm0, row(k));
                    for (int e = 1; e < g; ++e) {
                        if (k + e < p_.k) vinserti32x4(zmm0, zmm0, row(k + e), e);
                        else vinserti32x4(zmm0, zmm0, xmm28, e);
                    }
                } else {  // bf16: 2 rows of 32 bytes
                    vmovdqu8(ymm0, row(k));
                    if (whole_group) vinserti64x4(zmm0, zmm0, row(k + 1), 1);
                    else vinserti64x4(zmm0, zmm0, ymm28, 1);
                }
                vpermb(zmm1, zmm29, zmm0);
                vmovdqu8(out(0), zmm1);
                continue;
            }
            // The row k + e, or zero past K, into the part of zmm `dst` (int8: 32-byte halves; bf16: whole).
            auto load_row = [&](const Xbyak::Zmm& dst, int e, int half_index) {
                const bool present = k + e < p_.k;
                if (g == 4) {
                    if (half_index == 0) {
                        if (present) vmovdqu8(Xbyak::Ymm(dst.getIdx()), row(k + e));
                        else vmovdqa64(Xbyak::Ymm(dst.getIdx()), ymm28);
                    } else {
                        if (present) vinserti64x4(dst, dst, row(k + e), 1);
                        else vinserti64x4(dst, dst, ymm28, 1);
                    }
                } else {
                    if (present) vmovdqu8(dst, row(k + e));
                    else vmovdqa64(dst, zmm28);
                }
            };
            if (g == 4) {
                load_row(zmm0, 0, 0);
                load_row(zmm0, 1, 1);
                load_row(zmm1, 2, 0);
                load_row(zmm1, 3, 1);
            } else {
                load_row(zmm0, 0, 0);
                load_row(zmm1, 1, 0);
            }
            vmovdqa64(zmm2, zmm0);
            vpermt2b(zmm2, zmm30, zmm1);
            vpermt2b(zmm0, zmm31, zmm1);
            vmovdqu8(out(0), zmm2);
            vmovdqu8(out(1), zmm0);
        }
    }

    bool has_single_panel() const {
        for (const auto& panel : panels_)
            if (panel.tiles == 1) return true;
        return false;
    }

    // Permute indices, one byte per output byte b of a panel row (column c = b / 4 of the half, its k group's
    // row e and byte of the element), pointing into the permute's sources (byte 64 on: the second source):
    // the two halves of a 32-column panel (int8: rows 0|1 in the first zmm and 2|3 in the second, 32 bytes
    // each; bf16: row 0 in the first, row 1 in the second, 64 bytes each), and the 16-column panel (its rows'
    // 16-column slices one after another in one zmm).
    void emit_indices() {
        const int g = plan::step_group(step_);
        const int esz = plan::step_elem_bytes(step_);
        auto emit = [&](Xbyak::Label& label, int first_col, bool one_source) {
            align(64);
            L(label);
            for (int b = 0; b < 64; ++b) {
                const int c = first_col + b / 4, e = (b % 4) / esz, byte = b % esz;
                const int row_offset = one_source ? e * kTile * esz
                                       : g == 4   ? (e / 2) * 64 + (e % 2) * kPanelCols
                                                  : e * 64;
                db(static_cast<uint8_t>(row_offset + c * esz + byte));
            }
        };
        emit(pair_index_[0], 0, false);
        emit(pair_index_[1], kTile, false);
        if (has_single_panel()) emit(single_index_, 0, true);
    }

    Tmm a_tile(size_t row_tile, int s) const {
        if (long_k()) return Tmm(s % 2);
        return Tmm(steps_ == 1 ? static_cast<int>(row_tile % 2) : s);
    }
    Tmm b_tile(int j, int s) const { return long_k() ? Tmm(2 + s % 2) : Tmm(2 + j * steps_ + s); }
    int held_b_tiles() const { return long_k() ? 2 : 2 * steps_; }
    int c_tiles() const { return kTiles - 2 - held_b_tiles(); }
    Tmm c_tile(int64_t unit) const { return Tmm(2 + held_b_tiles() + static_cast<int>(unit % c_tiles())); }

    // The oldest waiting C tile into C.
    void store_oldest() {
        const Waiting w = waiting_.front();
        waiting_.pop_front();
        tilestored(ptr[rdx + r9 + w.row * c_row_bytes_ + w.col * 4], c_tile(w.unit));
    }

    struct Waiting {
        int64_t row = 0, col = 0;  // the tile's first row and column
        int64_t unit = 0;
    };

    const Problem& p_;
    const int step_bytes_;  // K's bytes in one tile step (plan::amx_k_step_bytes)
    const int64_t k_bytes_;
    const int steps_;       // 1 or 2
    const int64_t a_row_bytes_, c_row_bytes_, panel_bytes_;
    const plan::LowpStep step_;
    const bool a_signed_, b_signed_;
    const int64_t b_row_bytes_;
    const bool packs_b_;
    const std::vector<int64_t> row_tiles_;      // amx_whole_tiles(M)
    const std::vector<AmxWholePanel> panels_;   // amx_whole_panels(N)
    const int64_t copy_first_;                  // the first A row read from the copy (M: none)
    const bool row_major_;                      // visits row tile by row tile (see emit_function)
    std::deque<Waiting> waiting_;  // C tiles multiplied, not yet stored
    Xbyak::Label config_, pair_index_[2], single_index_;
};

}  // namespace

std::vector<int64_t> amx_whole_tiles(int64_t extent) {
    std::vector<int64_t> first;
    for (int64_t t = 0; t + kTile <= extent; t += kTile) first.push_back(t);
    if (extent < kTile) first.push_back(0);
    else if (extent % kTile != 0) first.push_back(extent - kTile);
    return first;
}

std::vector<AmxWholePanel> amx_whole_panels(int64_t n) {
    if (n <= kTile) return {{0, 1}};
    std::vector<AmxWholePanel> panels;
    int64_t j = 0;
    for (; j + kPanelCols <= n; j += kPanelCols) panels.push_back({j, 2});
    const int64_t rest = n - j;
    if (rest == 0) return panels;
    if (rest <= kTile) panels.push_back({n - kTile, 1});  // (overlapping the panel before unless 16)
    else if (n >= kPanelCols) panels.push_back({n - kPanelCols, 2});
    else panels.insert(panels.end(), {{0, 1}, {n - kTile, 1}});  // 17-31 columns: two overlapping tiles
    return panels;
}

bool amx_whole_call_fits(const Problem& p, const plan::X86LowpPlan& plan) {
    const plan::LowpLayout& L = plan.layout;
    if (!plan::step_is_amx(L.step) || L.swap_ab || L.dot_nt || L.amx_c_streamed || L.amx_c_staged) return false;
    if (!amx_direct_store(L)) return false;
    // (A packed by the plan is read here as stored, or from the function's copy of its rows: M x K is enough.)
    // (Batches run one call of the function each, a run of them per thread.)
    if ((p.batch == 1 && plan.threads > 1) || plan.m_chunks != 1 || plan.n_chunks != 1 || p.trans_a) return false;
    if (plan.k_blocks(p.k) != 1 || p.m > plan.mc || p.n > plan.nc) return false;
    // JITMM_X86_LOWP_WHOLE=0: never; =tiles: only over whole tiles and steps, no tails (measurements).
    const char* env = std::getenv("JITMM_X86_LOWP_WHOLE");
    const std::string forced = env != nullptr ? env : "";
    if (forced == "0") return false;
    const bool tails = p.m % kTile != 0 || p.n % kTile != 0 ||
                       (p.k * plan::step_elem_bytes(L.step)) % plan::amx_k_step_bytes(L.step, p.k) != 0;
    if (forced == "tiles" && tails) return false;
    // Batches of whole tiles whose B the driver packs (stored N x K, or N under 16) kept the microkernels, which
    // share one configuration over a group of batches (1 thread, median us, microkernels -> function: bf16
    // 64x64x64 NT x9 4.70 -> 4.99, u8 32x64x64 NT x9 2.52 -> 2.83, s8 8^3 x64 2.66 -> 2.93); with tails, or B
    // packed here, the function won (s8 35x63x26 x20 9.44 -> 5.47, NT 11.9 -> 8.6, 16^3 x16 0.82 -> 0.56,
    // 64x64x16 x16 6.3 -> 5.4, bf16 33^3 x8 3.78 -> 2.00).
    if (p.batch > 1 && !tails && !amx_whole_packs_b(p, plan)) return false;
    int64_t column_tiles = 0;
    for (const auto& panel : amx_whole_panels(p.n)) column_tiles += panel.tiles;
    const int64_t row_tiles = static_cast<int64_t>(amx_whole_tiles(p.m).size());
    if (row_tiles * column_tiles > kAmxWholeMaxTiles) return false;
    // 17-31 columns are two one-tile panels, two passes over C's rows: past 16 row tiles the microkernels' narrow
    // tail tile won (1 thread, median us, whole -> microkernels: s8 400x20x64 1.32 -> 0.98, 400x17x64 1.16 ->
    // 0.89, bf16 400x20x32 1.35 -> 1.01; 200 rows kept the function: s8 200x20x64 0.35, microkernels 0.50).
    if (p.n > kTile && p.n < kPanelCols && row_tiles > kWholeMaxRowTilesOverTwoPanels) return false;
    const int64_t k_bytes = p.k * plan::step_elem_bytes(L.step), step_bytes = plan::amx_k_step_bytes(L.step, p.k);
    const int64_t steps = (k_bytes + step_bytes - 1) / step_bytes;
    if (steps > kAmxWholeMaxSteps) return false;
    // Batches over three or four steps kept the microkernels (1 thread, median us, microkernels -> function: bf16
    // 128x64x128 x12 16.6 -> 19.3, 117x20x118 NT x2 2.31 -> 2.85, s8 31x19x240 NT x17 6.0 -> 7.5).
    if (p.batch > 1 && steps > kHeldSteps) return false;
    // Three or four steps: at most kWholeMaxLongProducts products, unrolled (the JIT time grows with them: bf16
    // 128^3, 256 products, took 118 us to generate against 57 for the microkernels, and ran as fast).
    if (steps > kHeldSteps && row_tiles * column_tiles * steps > kWholeMaxLongProducts) return false;
    if (amx_whole_b_bytes(p, plan) > kAmxWholeMaxBBytes) return false;
    // The rows whose last step is copied where the steps end past K (AmxWholeEmitter::copied_rows_from): all of
    // them for bf16, the last row tile's for int8, 64 bytes each.
    if (k_bytes % step_bytes != 0) {
        const int64_t rows = L.step == plan::LowpStep::amx_bf16 ? p.m : std::min<int64_t>(kTile, p.m);
        if (rows * kStepRowBytes > kAmxWholeMaxACopyBytes) return false;
    }
    // Displacements of the last A row and the last C tile within 32 bits.
    const int64_t a_reach = p.m * p.lda * dtype_size(p.a_type), c_reach = p.m * p.ldc * dtype_size(p.c_type);
    return a_reach < (int64_t(1) << 31) && c_reach < (int64_t(1) << 31);
}

bool amx_whole_packs_b(const Problem& p, const plan::X86LowpPlan& plan) {
    static const bool vbmi = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512vbmi") != 0;
    }();
    // The last B row read: its displacement within 32 bits. Panels of whole 16-column tiles read only B's columns
    // (an N under 16 would read past them: the driver packs it).
    return vbmi && !p.trans_b && plan::step_is_amx(plan.layout.step) && p.n >= kTile &&
           p.k * p.ldb * dtype_size(p.b_type) < (int64_t(1) << 31);
}

int64_t amx_whole_k_groups(const Problem& p, const plan::X86LowpPlan& plan) {
    const int64_t k_bytes = p.k * plan::step_elem_bytes(plan.layout.step);
    const int64_t step_bytes = plan::amx_k_step_bytes(plan.layout.step, p.k);
    return (k_bytes + step_bytes - 1) / step_bytes * step_bytes / 4;
}

int64_t amx_whole_b_bytes(const Problem& p, const plan::X86LowpPlan& plan) {
    return static_cast<int64_t>(amx_whole_panels(p.n).size()) * amx_whole_k_groups(p, plan) * kBPanelRow;
}

LowpCode generate_amx_whole(const Problem& p, const plan::X86LowpPlan& plan) {
    if (!amx_whole_call_fits(p, plan))
        fail(JITMM_STATUS_INTERNAL_ERROR, "amx whole-call generator: the shape does not fit");
    // ~60 bytes per C tile and per packed 64-byte B row, plus the configuration and the indices.
    // ~40 bytes per C tile and ~40 per K step of each (its loads and products), ~60 per packed 64-byte B row,
    // ~20 per copied A row, plus the configuration and the indices.
    const int64_t units = (p.m / kTile + 2) * (p.n / kTile + 2);
    const int64_t groups = amx_whole_k_groups(p, plan) * static_cast<int64_t>(amx_whole_panels(p.n).size());
    const size_t capacity = static_cast<size_t>(1024 + units * (40 + 40 * kAmxWholeMaxSteps) + 60 * 2 * groups + 20 * p.m);
    return emit_code("amx whole-call", capacity, [&](uint8_t* buffer, size_t size) {
        AmxWholeEmitter emitter(p, plan, buffer, size);
        LowpCode out;
        out.entries.push_back(emitter.emit_function());
        out.config_entries.push_back(emitter.emit_config_stub());
        out.release_entry = emitter.emit_release_stub();
        emitter.finish();
        out.bytes.assign(emitter.getCode(), emitter.getCode() + emitter.getSize());
        return out;
    });
}

}  // namespace jitmm::x86
