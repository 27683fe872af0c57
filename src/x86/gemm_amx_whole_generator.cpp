#include "x86/gemm_amx_whole_generator.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "x86/emit_buffer.hpp"
#include "x86/gemm_amx_generator.hpp"

#include <algorithm>
#include <array>
#include <deque>

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

// Register plan (System V): rdi = A, rsi = B as the caller stores it, rdx = C, rcx = the packed B panels,
// r8 = A row stride, r9 = C row stride, r10 = B panel row stride; zmm0-2 packing temporaries, zmm29-31 the
// permute indices. Every offset is a displacement baked from the shape.
class AmxWholeEmitter : public Xbyak::CodeGenerator {
public:
    AmxWholeEmitter(const Problem& p, const plan::X86LowpPlan& plan, uint8_t* buffer, size_t capacity)
        : Xbyak::CodeGenerator(capacity, buffer),
          p_(p),
          step_bytes_(plan::amx_k_step_bytes(plan.layout.step, p.k)),
          steps_(static_cast<int>(p.k * plan::step_elem_bytes(plan.layout.step) / step_bytes_)),
          a_row_bytes_(p.lda * dtype_size(p.a_type)),
          c_row_bytes_(p.ldc * dtype_size(p.c_type)),
          panel_bytes_(amx_whole_k_groups(p, plan) * kBPanelRow),
          step_(plan.layout.step),
          a_signed_(p.a_type == JITMM_DTYPE_S8),
          b_signed_(p.b_type == JITMM_DTYPE_S8),
          b_row_bytes_(p.ldb * dtype_size(p.b_type)),
          packs_b_(amx_whole_packs_b(p, plan)) {}

    size_t emit_function() {
        const size_t entry = getSize();
        if (packs_b_) {
            vmovdqu64(zmm30, ptr[rip + pair_index_[0]]);
            vmovdqu64(zmm31, ptr[rip + pair_index_[1]]);
            if (p_.n % kPanelCols != 0) vmovdqu64(zmm29, ptr[rip + single_index_]);
            pack_panel(0);
        }
        ldtilecfg(ptr[rip + config_]);
        mov(r8, a_row_bytes_);
        mov(r9, c_row_bytes_);
        mov(r10, kBPanelRow);
        const int64_t row_tiles = p_.m / kTile;
        const size_t store_delay = steps_ == 1 ? 2 : 1;
        int64_t unit = 0;
        for (int64_t j0 = 0; j0 < p_.n; j0 += kPanelCols) {
            const int tn = p_.n - j0 >= kPanelCols ? 2 : 1;
            const int64_t b_panel = j0 / kPanelCols * panel_bytes_;
            const int64_t b_step = (step_bytes_ / 4) * kBPanelRow;  // a K step's k groups in the panel
            for (int j = 0; j < tn; ++j)
                for (int s = 0; s < steps_; ++s)
                    tileloadd(b_tile(j, s), ptr[rcx + r10 + b_panel + s * b_step + j * kTile * 4]);
            for (int64_t i = 0; i < row_tiles; ++i) {
                for (int s = 0; s < steps_; ++s)
                    tileloadd(a_tile(i, s), ptr[rdi + r8 + i * kTile * a_row_bytes_ + s * step_bytes_]);
                for (int j = 0; j < tn; ++j, ++unit) {
                    tilezero(c_tile(unit));
                    for (int s = 0; s < steps_; ++s) multiply(c_tile(unit), a_tile(i, s), b_tile(j, s));
                    // The next panel is packed while the tile unit works through this panel's first products,
                    // and ahead of their C stores: stores leave in program order, so packing stores queued
                    // behind tile stores (which wait for the products) would wait too.
                    if (packs_b_ && i == 0 && j == tn - 1 && j0 + kPanelCols < p_.n) pack_panel(j0 + kPanelCols);
                    waiting_.push_back({i, j0 + j * kTile, unit});
                    if (waiting_.size() > store_delay) store_oldest();
                }
            }
        }
        while (!waiting_.empty()) store_oldest();
        tilerelease();
        if (packs_b_) vzeroupper();
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
    // Palette 1: bytes per row at 16 + 2t, rows at 48 + t. A tiles: 16 rows of K's bytes; B tiles: K's k groups
    // of 16 columns; C tiles: 16 x 16.
    std::array<uint8_t, 64> config_bytes() const {
        std::array<uint8_t, 64> cfg = {};
        cfg[0] = 1;
        auto set = [&](const Tmm& t, int rows, int bytes) {
            cfg[16 + 2 * t.getIdx()] = static_cast<uint8_t>(bytes & 0xff);
            cfg[17 + 2 * t.getIdx()] = static_cast<uint8_t>(bytes >> 8);
            cfg[48 + t.getIdx()] = static_cast<uint8_t>(rows);
        };
        for (int i = 0; i < 2; ++i) set(Tmm(i), kTile, step_bytes_);  // A
        for (int j = 0; j < 2; ++j)
            for (int s = 0; s < steps_; ++s) set(b_tile(j, s), step_bytes_ / 4, kTile * 4);
        for (int u = 0; u < c_tiles(); ++u) set(c_tile(u), kTile, kTile * 4);
        return cfg;
    }

    void multiply(const Tmm& c, const Tmm& a, const Tmm& b) {
        if (step_ == plan::LowpStep::amx_bf16) tdpbf16ps(c, a, b);
        else if (a_signed_ && b_signed_) tdpbssd(c, a, b);
        else if (a_signed_) tdpbsud(c, a, b);
        else if (b_signed_) tdpbusd(c, a, b);
        else tdpbuud(c, a, b);
    }

    // ---- B packing (row-major B, packs_b_): the panel of columns [j0, j0 + 32) ------------------------------
    // Each k group's B rows (4 int8 rows or 2 bf16 rows) become one panel row of 32 columns x 4 bytes: the
    // rows' 32-column slices are gathered into two zmm (int8: rows 0|1 and 2|3, 32 bytes each; bf16: rows 0
    // and 1, 64 bytes each) and two byte permutes interleave them into the panel row's two 64-byte halves. A
    // last panel of 16 columns takes its rows' 16-column slices into one zmm and one single-source permute.
    void pack_panel(int64_t j0) {
        const bool half = p_.n - j0 < kPanelCols;
        const int g = plan::step_group(step_);
        const int64_t esz = plan::step_elem_bytes(step_);
        const int64_t slice_bytes = (half ? kTile : kPanelCols) * esz;  // of one B row
        auto row = [&](int64_t k) { return ptr[rsi + k * b_row_bytes_ + j0 * esz]; };
        const int64_t groups = p_.k / g;
        for (int64_t kg = 0; kg < groups; ++kg) {
            const int64_t k = kg * g;
            const int64_t panel_row = (j0 / kPanelCols) * panel_bytes_ + kg * kBPanelRow;
            auto out = [&](int part) { return ptr[rcx + panel_row + part * 64]; };
            if (half) {
                if (slice_bytes == 16) {  // int8: 4 rows of 16 bytes
                    vmovdqu8(xmm0, row(k));
                    for (int e = 1; e < g; ++e) vinserti32x4(zmm0, zmm0, row(k + e), e);
                } else {  // bf16: 2 rows of 32 bytes
                    vmovdqu8(ymm0, row(k));
                    vinserti64x4(zmm0, zmm0, row(k + 1), 1);
                }
                vpermb(zmm1, zmm29, zmm0);
                vmovdqu8(out(0), zmm1);
                continue;
            }
            if (g == 4) {
                vmovdqu8(ymm0, row(k));
                vinserti64x4(zmm0, zmm0, row(k + 1), 1);
                vmovdqu8(ymm1, row(k + 2));
                vinserti64x4(zmm1, zmm1, row(k + 3), 1);
            } else {
                vmovdqu8(zmm0, row(k));
                vmovdqu8(zmm1, row(k + 1));
            }
            vmovdqa64(zmm2, zmm0);
            vpermt2b(zmm2, zmm30, zmm1);
            vpermt2b(zmm0, zmm31, zmm1);
            vmovdqu8(out(0), zmm2);
            vmovdqu8(out(1), zmm0);
        }
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
        if (p_.n % kPanelCols != 0) emit(single_index_, 0, true);
    }

    Tmm a_tile(int64_t row_tile, int s) const { return Tmm(steps_ == 1 ? static_cast<int>(row_tile % 2) : s); }
    Tmm b_tile(int j, int s) const { return Tmm(2 + j * steps_ + s); }
    int c_tiles() const { return kTiles - 2 - 2 * steps_; }
    Tmm c_tile(int64_t unit) const { return Tmm(2 + 2 * steps_ + static_cast<int>(unit % c_tiles())); }

    // The oldest waiting C tile into C.
    void store_oldest() {
        const Waiting w = waiting_.front();
        waiting_.pop_front();
        tilestored(ptr[rdx + r9 + w.row * kTile * c_row_bytes_ + w.col * 4], c_tile(w.unit));
    }

    struct Waiting {
        int64_t row = 0, col = 0;  // row tile, first column
        int64_t unit = 0;
    };

    const Problem& p_;
    const int step_bytes_;  // K's bytes in one tile step (plan::amx_k_step_bytes)
    const int steps_;       // 1 or 2
    const int64_t a_row_bytes_, c_row_bytes_, panel_bytes_;
    const plan::LowpStep step_;
    const bool a_signed_, b_signed_;
    const int64_t b_row_bytes_;
    const bool packs_b_;
    std::deque<Waiting> waiting_;  // C tiles multiplied, not yet stored
    Xbyak::Label config_, pair_index_[2], single_index_;
};

}  // namespace

bool amx_whole_call_fits(const Problem& p, const plan::X86LowpPlan& plan) {
    const plan::LowpLayout& L = plan.layout;
    if (!plan::step_is_amx(L.step) || L.swap_ab || L.dot_nt || L.amx_c_streamed || L.amx_c_staged) return false;
    if (!amx_direct_store(L)) return false;
    if (p.batch != 1 || plan.threads > 1 || plan.m_chunks != 1 || plan.n_chunks != 1 || plan.pack_a) return false;
    if (plan.k_blocks(p.k) != 1 || p.m > plan.mc || p.n > plan.nc) return false;
    if (p.m % kTile != 0 || p.n % kTile != 0 || (p.m / kTile) * (p.n / kTile) > kAmxWholeMaxTiles) return false;
    const int64_t k_bytes = p.k * plan::step_elem_bytes(L.step), step_bytes = plan::amx_k_step_bytes(L.step, p.k);
    if (k_bytes % step_bytes != 0 || k_bytes / step_bytes > kAmxWholeMaxSteps) return false;
    if (amx_whole_b_bytes(p, plan) > kAmxWholeMaxBBytes) return false;
    // Displacements of the last A row tile and the last C tile within 32 bits.
    const int64_t a_reach = p.m * p.lda * dtype_size(p.a_type), c_reach = p.m * p.ldc * dtype_size(p.c_type);
    return a_reach < (int64_t(1) << 31) && c_reach < (int64_t(1) << 31);
}

bool amx_whole_packs_b(const Problem& p, const plan::X86LowpPlan& plan) {
    static const bool vbmi = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512vbmi") != 0;
    }();
    // The last B row read: its displacement within 32 bits.
    return vbmi && !p.trans_b && plan::step_is_amx(plan.layout.step) &&
           p.k * p.ldb * dtype_size(p.b_type) < (int64_t(1) << 31);
}

int64_t amx_whole_k_groups(const Problem& p, const plan::X86LowpPlan& plan) {
    return p.k * plan::step_elem_bytes(plan.layout.step) / 4;
}

int64_t amx_whole_b_bytes(const Problem& p, const plan::X86LowpPlan& plan) {
    return (p.n + kPanelCols - 1) / kPanelCols * amx_whole_k_groups(p, plan) * kBPanelRow;
}

LowpCode generate_amx_whole(const Problem& p, const plan::X86LowpPlan& plan) {
    if (!amx_whole_call_fits(p, plan))
        fail(JITMM_STATUS_INTERNAL_ERROR, "amx whole-call generator: the shape does not fit");
    // ~60 bytes per C tile and per packed 64-byte B row, plus the configuration and the indices.
    const size_t capacity = 1024 + 64 * size_t(p.m / kTile * p.n / kTile + p.k * p.n / 16);
    return emit_code("amx whole-call", capacity, [&](uint8_t* buffer, size_t size) {
        AmxWholeEmitter emitter(p, plan, buffer, size);
        LowpCode out;
        out.entries.push_back(emitter.emit_function());
        emitter.finish();
        out.bytes.assign(emitter.getCode(), emitter.getCode() + emitter.getSize());
        return out;
    });
}

}  // namespace jitmm::x86
