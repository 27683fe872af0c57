// The x86 low-precision planner: int8 (s8/u8), bf16 and f16 inputs. From a Problem and the tier the engine
// runs at, it picks how the microkernel multiplies (the "step": AMX tiles, VNNI, widened int8, bf16 dot
// products, or f32 FMAs on converted inputs), the tile shape, the K and N blocks and the thread partition.
// Everything here goes into the kernel key.
//
// Tiers and steps (the best the tier allows; a tier the CPU lacks is never planned for):
//   int8  amx: tdpbusd/tdpbssd/tdpbsud/tdpbuud   avx512_vnni+: vpdpbusd (B s8; s8 A shifted by +128)
//         avx2 on a chip with AVX-VNNI: VEX vpdpbusd on ymm, the same way (JITMM_X86_AVX_VNNI=0: s16)
//         avx512 / avx2 otherwise (and u8 B below amx): widened to s16, vpmaddwd + vpaddd (exact)
//   bf16  amx: tdpbf16ps   below: converted to f32, vfmadd231ps (avx512_bf16+ with JITMM_X86_BF16_DOT=1:
//         vdpbf16ps, which issues at half the f32 FMA's flop rate on the chips measured)
//   f16   every tier: converted to f32 (F16C semantics), vfmadd231ps
// Every transpose of A and B is supported: B is always packed, A is packed whenever the kernel cannot read
// it in place (transposed, converted, or a K tail inside a k group). The exception, AMX with up to 256 rows
// and B stored N x K (a Linear layer's weights): the roles swap (LowpLayout::swap_ab) and B is read in place.
#pragma once

#include "core/key.hpp"
#include "core/problem.hpp"
#include "hw/cpu.hpp"

#include <string>

namespace jitmm::plan {

// How the microkernel multiplies one k group of packed A by packed B.
enum class LowpStep : int32_t {
    amx_int8 = 0,  // 16x16 s32 tiles, k groups of 4 bytes (VNNI-4)
    amx_bf16,      // 16x16 f32 tiles, k groups of 2 bf16
    vnni_u8s8,     // vpdpbusd: u8 (A) x s8 (B), k groups of 4 (zmm EVEX; ymm VEX at avx2: AVX-VNNI)
    madd_s16,      // vpmaddwd + vpaddd on int8 widened to s16, k groups of 2
    dot_bf16,      // vdpbf16ps, k groups of 2 bf16
    fma_f32,       // vfmadd231ps on bf16/f16 converted to f32 when packed, k groups of 1
};

const char* step_name(LowpStep s);

// AMX: the bytes of K one A tile row holds in a call whose whole K is one block of k_len. 64, or where k_len's
// bytes are no multiple of 64 but split into as many equal steps of whole dwords as 64-byte steps would take,
// that step (48 bf16: two steps of 48 bytes, 48 int8: one): the tiles then read just K's bytes of each row, so
// an A with such rows is read in place instead of being copied into zero-padded rows, for the same products.
// int8 rounds each step up to whole dwords (53 bytes: one step of 56; 100: two of 52): the bytes a tile row then
// reads past K (the next row's first, or for the last rows a copy's zero padding) meet the packed side's zero k
// rows, exact in integers (bf16 may not: what lies past K could be an Inf or a NaN, and 0 x Inf is a NaN).
inline int amx_k_step_bytes(LowpStep s, int64_t k_len) {
    const int64_t bytes = s == LowpStep::amx_bf16 ? k_len * 2 : k_len;
    const int64_t steps = (bytes + 63) / 64;
    if (bytes <= 0 || bytes % 64 == 0) return 64;
    if (s == LowpStep::amx_int8) return static_cast<int>(((bytes + steps - 1) / steps + 3) / 4 * 4);
    if (bytes % steps != 0 || (bytes / steps) % 4 != 0) return 64;
    return static_cast<int>(bytes / steps);
}
// AMX, a call whose whole K is one block of k_len: its tile rows read just K's bytes (int8: up to its steps'
// whole dwords), so an operand in tile rows is read in place at any row stride. Short steps (above), or int8
// whole steps that a K of 61-63 bytes (125-127, ...) rounds up to.
inline bool amx_k_reads_rows(LowpStep s, int64_t k_len) {
    if (amx_k_step_bytes(s, k_len) < 64) return true;
    return s == LowpStep::amx_int8 && k_len % 64 != 0 && (k_len + 3) / 4 * 4 % 64 == 0;
}
// The bytes such a call's tile rows read past K (int8: what its steps round up).
inline int64_t amx_k_overrun_bytes(LowpStep s, int64_t k_len) {
    if (s != LowpStep::amx_int8 || !amx_k_reads_rows(s, k_len)) return 0;
    const int64_t step = amx_k_step_bytes(s, k_len);
    return (k_len + step - 1) / step * step - k_len;
}
// AMX bf16 in the swapped order (B's rows, stored N x K, in the A tiles): the K block of k_len (the call's only
// one, or its last) ends inside a step, whose whole bytes would read what lies past K in the rows (their padding:
// an Inf or a NaN there times the packed side's zero k rows is a NaN). That last step's tile rows come from a
// zero-padded copy of 64 bytes a row (LowpCallArgs::a_last_step); the whole steps before it read the rows in place.
inline bool amx_swapped_last_step_copied(LowpStep s, int64_t k_len, bool single_block) {
    const int step = single_block ? amx_k_step_bytes(s, k_len) : 64;
    return s == LowpStep::amx_bf16 && (k_len * 2) % step != 0;
}
inline bool step_is_amx(LowpStep s) { return s == LowpStep::amx_int8 || s == LowpStep::amx_bf16; }
// AMX int8 with few column panels (in the swapped order, few 32-row panels of A): the operand in tile rows (A, or
// B stored N x K when swapped) is read in place at any row stride and any K, whole 64-byte steps and all, where
// it would be copied into aligned, zero-padded rows: its tile rows serve so few products that the split loads
// of a row across two lines cost less than the copy. The bytes its last K block reads past K meet zero k rows
// of the packed side (exact in integers), and a row tile whose reads would leave the operand comes from a copy
// (GemmLowpKernel::tile_copied). The planner decides for A (X86LowpPlan::pack_a), the driver for swapped B.
// bf16 in the normal order too (not swapped), over as many panels: the bytes past K are no zeros in bf16 (0 x Inf
// is a NaN), so a last K block that ends inside a step takes that step's tile rows from a zero-padded copy
// (LowpLayout::a_last_step_copied).
constexpr int64_t kAmxAnyStrideMaxPanels = 8;
constexpr int64_t kAmxAnyStrideMaxSwappedPanels = 4;
inline bool amx_rows_any_stride(LowpStep s, bool swapped, int64_t m, int64_t n) {
    if (s == LowpStep::amx_bf16) return !swapped && (n + 31) / 32 <= kAmxAnyStrideMaxPanels;
    if (s != LowpStep::amx_int8) return false;
    return swapped ? (m + 31) / 32 <= kAmxAnyStrideMaxSwappedPanels : (n + 31) / 32 <= kAmxAnyStrideMaxPanels;
}
inline bool step_is_int(LowpStep s) {
    return s == LowpStep::amx_int8 || s == LowpStep::vnni_u8s8 || s == LowpStep::madd_s16;
}
// Elements of one k group (what one dword of a packed A row holds) and the packed element size.
inline int step_group(LowpStep s) {
    switch (s) {
        case LowpStep::amx_int8: case LowpStep::vnni_u8s8: return 4;
        case LowpStep::amx_bf16: case LowpStep::madd_s16: case LowpStep::dot_bf16: return 2;
        case LowpStep::fma_f32: return 1;
    }
    return 1;
}
inline int step_elem_bytes(LowpStep s) { return 4 / step_group(s); }

// What the generated code bakes in.
struct LowpLayout {
    hw::X86Isa isa = hw::X86Isa::avx512;  // avx2: ymm; higher tiers: zmm (and tiles for amx steps)
    LowpStep step = LowpStep::fma_f32;
    jitmm_dtype a_type = JITMM_DTYPE_BF16, b_type = JITMM_DTYPE_BF16, c_type = JITMM_DTYPE_F32;
    jitmm_dtype bias_type = JITMM_DTYPE_F32;
    int mr = 6;                  // rows of a full tile (AMX: 32)
    int nv = 4;                  // vectors across a full tile (AMX: 2 tiles of 16 columns)
    int64_t a_row_bytes = 0;     // vector steps: bytes between rows of the A tile the kernel reads
    int64_t acc_ld = 0;          // bytes between rows of the K-block accumulator strip
    int64_t ldc = 0;             // elements
    float alpha = 1, beta = 0;
    BiasKind bias = BiasKind::none;
    Activation activation = Activation::none;
    ScaleMode a_scale = ScaleMode::none, b_scale = ScaleMode::none;
    bool compensate = false;     // int8: subtract comp[j] = (shift + zero point) * column sum of B
    bool int_epilogue = false;   // s32 C: exact integer epilogue (no float conversion)
    // AMX with few rows and B stored N x K: the tiles compute C^T = B A^T, so that B's rows feed the A tiles in
    // place (no B packing; only the rows of A are packed), and the epilogue reads the block transposed.
    // a_type/b_type then name the tile operands (B's type, A's type); tile rows run over N, columns over M.
    bool swap_ab = false;
    // AMX bf16 in the normal order with A read in place (amx_rows_any_stride) whose last K block ends inside a
    // step: that step's A tile rows come from a zero-padded copy (LowpCallArgs::a_last_step), as in the swapped
    // order (amx_swapped_last_step_copied), instead of all of A being packed for its K tail.
    bool a_last_step_copied = false;
    // AMX: B tiles loaded with the T1 hint (streamed past the A tile in L1); off when one K block of packed B is
    // small enough that plain loads, which keep it in L1 for the next row tile, are faster.
    bool amx_b_streamed = true;
    // AMX, last K block stored straight into C (amx_direct_store) by 32-column panels: the code can also write C
    // with non-temporal stores (tiles stored to an L1 block, then copied out with vmovntps), chosen per call
    // (LowpCallArgs::stream_c). For a C far larger than the caches that nobody reads before it leaves them:
    // a tile store into a cold line first reads it from memory (RFO), doubling C's DRAM traffic.
    bool amx_c_streamed = false;
    // AMX, the same block and spread copy-out with plain stores where C's rows start off 64-byte lines: a tile
    // store of rows that straddle lines costs ~1.5x a line's store once C is past L2, a vector store the same
    // either way (amx_c_staged; chosen per call like amx_c_streamed, never both).
    bool amx_c_staged = false;
    int k_unroll = 4;            // vector steps: k groups per loop iteration
    // VNNI decode with B stored N x K (dot_nt): each C element is a dot product along K of an A row and a B row,
    // both read as 64-byte vectors (B in place, streamed once; A packed with its K padded to 64 bytes), the
    // tile's nv B rows (nv = 4, 8 or 16 columns of C) reduced across lanes at the end. s8 A: B is flipped to u8
    // (b + 128, the first vpdpbusd operand) and 128 * (row sum of A) is subtracted per row (dot_row_comp).
    bool dot_nt = false;
    bool dot_row_comp = false;
    int64_t b_row_bytes = 0;     // dot_nt, b_in_place: bytes between B rows (baked)
    // dot_nt over f16 with many rows (few columns over a long K), A stored M x K: A's rows are read where they lie,
    // widened by vcvtph2ps like B's (a_row_bytes apart), instead of being packed into f32 rows per call.
    bool dot_a_in_place = false;
    // fma_f32 over f16 at the AVX-512 tiers, B stored K x N: the kernel reads B where it lies, each 16-column
    // vector widened by vcvtph2ps from memory (masked at the column tail), instead of B being packed into f32
    // panels. For calls with few row tiles, where each B value serves one or two tiles and its packing (a
    // store and a reload of 4 bytes for each 2-byte value) costs more than the products.
    bool b_in_place = false;
    int b_prefetch_k = 0;        // b_in_place: B's rows prefetched this many k steps ahead (0: none)
    // fma_f32 over a short K: each call that runs the epilogue prefetches its C tile's lines before the K loop,
    // so that the stores (and beta's reads) find them in L1 instead of missing one after the other (as the f32
    // family's c_prefetch does).
    bool c_prefetch = false;
    // fma_f32 over an f16 A at the AVX512-FP16 tiers: the kernel reads A where it lies, each value broadcast and
    // widened by one vcvtph2psx from memory, instead of A being packed into f32 rows. For one column panel over a K
    // of a value or two (A stored M x K), where packing each short row is most of the call, or a short K of an A
    // stored K x M, whose packing is a transpose. a_row_bytes apart from row to row, a_k_bytes from k to k (2 and
    // lda * 2 for an A stored K x M).
    bool a_f16_in_place = false;
    int64_t a_k_bytes = 2;
    // fma_f32 over f16 with a B of at most 8 columns (one vector, half of it or more padding as one k a step): two
    // k values a step, B packed with them interleaved in the vector's lanes (column c at k + e in lane 2c + e), the
    // packed A's two f32 values of a row broadcast to every lane pair: one FMA a row for two k values. The pairs'
    // lanes are summed before the epilogue.
    bool f16_k_pairs = false;
    // dot_bf16 with A read in place over an odd K: the last k value of each row read alone (a word broadcast to
    // the even lanes, zero in the odd ones) instead of the dword that would take the next row's first value,
    // which packed B's zero k row does not cancel where it is a NaN or an infinity. A was packed for any odd K.
    bool a_odd_k_word = false;
    // vnni_u8s8 over an s8 A read in place (AVX-512): each broadcast A dword is flipped to u8 (+128, a vpxord with
    // 0x80 bytes) in its register before the products; compensate subtracts the shift's share as it does for an
    // A packed flipped. The flip constant takes the register after the broadcast.
    bool a_s8_flipped = false;
    // AVX-512 vector steps over a B streaming from memory, whose chunks pack each block of B (one K block of one
    // N block) right before its calls (one M block a chunk): every call prefetches into L2 its share of the next
    // block's B as stored (LowpCallArgs::prefetch to prefetch_end, whole rows), b_src_rows rows of b_src_lines
    // lines each K-loop iteration, rows b_src_stride bytes apart, b_src_seg bytes of each (whole lines). The
    // next block's packing then reads L2, and its reads from memory overlap this block's products.
    int b_src_rows = 0;  // 0: no such prefetch
    int b_src_lines = 0;
    int64_t b_src_seg = 0;
    int64_t b_src_stride = 0;

    int vlen() const { return isa >= hw::X86Isa::avx512 ? 16 : 8; }  // 32-bit lanes
    int nr() const { return dot_nt ? nv : nv * (step_is_amx(step) ? 16 : vlen()); }
};

struct X86LowpPlan {
    LowpLayout layout;
    int64_t kc = 0;              // K block in elements (a multiple of the k group; AMX: of the 64-byte k step)
    int64_t nc = 0;              // N block: a multiple of nr; B is packed for all of K per N block
    int64_t mc = 0;              // M block (a multiple of mr) that goes through every K block before the next
    bool pack_a = false;         // A copied (and converted) into [mr][a_panel_ld] panels before use
    int64_t a_panel_ld = 0;      // packed A row stride in packed elements (AMX: also for an A found misaligned)
    int threads = 1;
    int m_chunks = 1, n_chunks = 1;

    int nr() const { return layout.nr(); }
    int64_t k_blocks(int64_t k) const { return (k + kc - 1) / kc; }
    std::string describe() const;
    void append_key(KeyWriter& w) const;
};

// True for problems this planner owns: s8/u8, bf16 or f16 inputs.
bool is_lowp_problem(const Problem& p);
// Empty when a kernel exists for p at tier isa, else why not (for an UNSUPPORTED message).
std::string lowp_unsupported_reason(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa);
// Requires lowp_unsupported_reason(p, cpu, isa) to be empty.
X86LowpPlan plan_x86_lowp(const Problem& p, const hw::CpuInfo& cpu, hw::X86Isa isa, int num_threads);

// Whether bf16 (f32 C) or s8 x s8 (s32 or f32 C, no scales) over few columns runs as C^T = op(B)^T op(A)^T, few
// rows times a B stored N x K where A is stored M x K (the swapped problem on the vdpbf16ps or VNNI dot
// products), or stored K x N where A is stored K x M (up to 24 columns: A packed as that problem's B instead
// of transposed), transposed into C after; below the AMX tier.
// Not where the scratch C^T of a short K passes half of L2 (its round trip then costs more than the swap gains).
bool lowp_serves_with_c_transposed(const Problem& p, hw::X86Isa isa, const hw::CpuInfo& cpu);

// Whether a low-precision problem of a very short K runs in f32 on operands widened to f32 (x86::widen_to_f32):
// C is then the work, which the f32 tiles store at their full rate, where the low-precision tiles pack A a row
// at a time and spend a k group (2 or 4 values) per step on a K of 1-3. f16 without AVX512-FP16 (converted to
// f32 either way) widens at longer K too, from 8 rows, and at any K from 64 rows and 8 columns. f32 C, or s32 C stored exactly (alpha 1,
// beta 0, no bias, relu at most); no scales or zero point. Requires lowp_unsupported_reason(p, ...) empty.
bool lowp_widens_to_f32(const Problem& p, hw::X86Isa isa, const hw::CpuInfo& cpu);
// The f32 problem on the widened operands: A and B f32 with tight rows (and batch strides, 0 kept), C and the
// rest as p (an s32 C written through layout.store_s32).
Problem widened_f32_problem(const Problem& p);

}  // namespace jitmm::plan
