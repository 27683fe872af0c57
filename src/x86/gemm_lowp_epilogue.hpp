// What the low-precision kernels share: the call ABI between the driver and every generated microkernel,
// and the fused epilogue, emitted inline for one accumulator vector (a row's 8 or 16 columns) at a time:
//
//   int8:   acc -= comp[j]                     (s8 shift for VNNI and the A zero point, as column sums of B)
//   s32 C:  acc += C (beta 1); acc += bias; relu; store           exact, integer only
//   else:   x = float(acc) * scale * b_scales[j] * a_scales[i]   (alpha folded into scale)
//           x += beta * C; x += bias; x = act(x); C = convert(x)  (f32, bf16 or f16; tails masked)
#pragma once

#include "plan/x86_lowp_plan.hpp"
#include "x86/vector_math.hpp"

#include <xbyak/xbyak.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace jitmm::x86 {

// One microkernel call's operands beyond A, B and C; the kernels read them at fixed offsets from rcx.
struct LowpCallArgs {
    const void* bias = nullptr;       // at the tile's first column (per column) or first row (per row)
    const float* b_scales = nullptr;  // per-column scales at the tile's first column
    const float* a_scales = nullptr;  // per-row scales at the tile's first row
    const int32_t* comp = nullptr;    // int8 compensation at the tile's first column (whole vectors readable)
    void* acc = nullptr;              // the K-block accumulator strip at the tile (layout.acc_ld per row)
    int64_t a_stride = 0;             // AMX: bytes between rows of the A tile
    float scale = 1;                  // alpha times the per-tensor scales, when there are any
    // AMX variants without a vector epilogue (strip stores, direct stores): the call runs `panels` column
    // panels of the same row tile one after another (B panels adjacent, C and the strip 32 columns further
    // each). Other variants run one panel.
    int64_t panels = 1;
    // AMX direct-store variants built with LowpLayout::amx_c_streamed: nonzero = this call writes C with
    // non-temporal stores (the driver checks that C's tile rows are whole, aligned cache lines), zero = with
    // tile stores. The driver fences (sfence) before the task ends.
    int64_t stream_c = 0;
    // AMX panel runs and swapped (swap_ab) calls: bytes [prefetch, prefetch_end) are prefetched into L2, a few
    // lines after each K step (what the driver's next row tile reads: its A rows, or in swapped calls its rows
    // of B, so that their DRAM reads overlap this call's products).
    const void* prefetch = nullptr;
    const void* prefetch_end = nullptr;
    // AMX bf16 swapped calls, or normal-order calls with A in place (LowpLayout::a_last_step_copied), whose K
    // ends inside a 64-byte step (plan::amx_swapped_last_step_copied): that last step's A tile rows, 64 bytes
    // apart and zero past K (the rows in place, whole steps, before it).
    const void* a_last_step = nullptr;
};

// void ukernel(const void* a, const void* b, void* c, const LowpCallArgs* args)   (System V: rdi rsi rdx rcx)
using LowpUkernel = void (*)(const void* a, const void* b, void* c, const LowpCallArgs* args);
using LowpStub = void (*)();  // AMX: load a tile configuration, or release the tiles

constexpr int kArgBias = offsetof(LowpCallArgs, bias);
constexpr int kArgBScales = offsetof(LowpCallArgs, b_scales);
constexpr int kArgAScales = offsetof(LowpCallArgs, a_scales);
constexpr int kArgComp = offsetof(LowpCallArgs, comp);
constexpr int kArgAcc = offsetof(LowpCallArgs, acc);
constexpr int kArgAStride = offsetof(LowpCallArgs, a_stride);
constexpr int kArgScale = offsetof(LowpCallArgs, scale);
constexpr int kArgPanels = offsetof(LowpCallArgs, panels);
constexpr int kArgStreamC = offsetof(LowpCallArgs, stream_c);
constexpr int kArgPrefetch = offsetof(LowpCallArgs, prefetch);
constexpr int kArgPrefetchEnd = offsetof(LowpCallArgs, prefetch_end);
constexpr int kArgALastStep = offsetof(LowpCallArgs, a_last_step);

// One microkernel a shape needs: a C tile of rows x cols over one K block of k_len elements. The first block
// starts from zero (else from the accumulator strip); the last applies the epilogue (else it stores the raw
// sums to the strip).
struct LowpVariant {
    int rows = 0, cols = 0;
    int64_t k_len = 0;
    bool first = true, last = true;
};

struct LowpCode {
    std::vector<uint8_t> bytes;          // position-independent: constants are addressed RIP-relative
    std::vector<size_t> entries;         // each variant's kernel
    std::vector<size_t> config_entries;  // AMX: each variant's tile-configuration stub
    size_t release_entry = 0;            // AMX: the tilerelease stub
};

// Emits the epilogue into a kernel. Registers it owns while it runs: rcx (the args, kept by the kernel),
// r8 bias, r9 comp, r10 b_scales, r11 a_scales (set by load_pointers), rsi scratch (AVX2 16-bit tails),
// k1 or the mask register (column tail), k2. Scratch vectors are passed to apply().
class LowpEpilogue {
public:
    LowpEpilogue(Xbyak::CodeGenerator& gen, ConstantPool& pool, const plan::LowpLayout& layout);

    // Whether a runtime scale multiplies (per-tensor scales), and whether anything but a plain store remains.
    bool runtime_scale() const;
    // Loads the pointers the epilogue reads from the args (rcx).
    void load_pointers();
    // Columns in the tail vector (0: none): sets k1 (AVX-512) or the mask register (AVX2).
    void set_tail(int tail);
    // Finishes accumulator v (row `row` of the tile, vector j) and stores it at c. Per-row operands are read
    // at row * element size from their pointers (pass 0 when the caller advances the pointers instead).
    void apply(const Xbyak::Xmm& v, int row, int j, bool tail, const Xbyak::RegExp& c, const Xbyak::Xmm& t0,
               const Xbyak::Xmm& t1, const Xbyak::Xmm& t2);
    // The AVX2 mask table; call once after the last kernel, before the constant pool.
    void emit_tables();
    // AVX2: the register that holds the column mask (the highest ymm).
    static constexpr int kAvx2MaskRegister = 15;

private:
    Xbyak::Xmm vec(int idx) const;
    Xbyak::Xmm half(const Xbyak::Xmm& x) const;  // the register of half the width (ymm of a zmm, xmm of a ymm)
    void load_f32(const Xbyak::Xmm& dst, const Xbyak::RegExp& src, jitmm_dtype type, bool tail);
    void load_s32(const Xbyak::Xmm& dst, const Xbyak::RegExp& src, bool tail);
    void broadcast_f32(const Xbyak::Xmm& dst, const Xbyak::RegExp& src, jitmm_dtype type);
    void store(const Xbyak::RegExp& dst, const Xbyak::Xmm& v, jitmm_dtype type, bool tail, const Xbyak::Xmm& t0,
               const Xbyak::Xmm& t1, const Xbyak::Xmm& t2);
    void to_bf16(const Xbyak::Xmm& v, const Xbyak::Xmm& t0, const Xbyak::Xmm& t1, const Xbyak::Xmm& t2);
    // AVX2 16-bit tails go through the red zone below rsp, copied by general registers.
    void copy_bytes(const Xbyak::RegExp& dst, const Xbyak::RegExp& src, int bytes);
    Xbyak::Address red_zone() const;

    Xbyak::CodeGenerator& g_;
    ConstantPool& pool_;
    VectorMath math_;
    const plan::LowpLayout& L_;
    const bool zmm_;
    const int vlen_;
    int tail_ = 0;
    bool need_mask_table_ = false;
    Xbyak::Label mask_table_;
};

}  // namespace jitmm::x86
