// The AMX microkernel generator (int8: tdpbusd/tdpbssd/tdpbsud/tdpbuud, bf16: tdpbf16ps). One kernel computes
// a C block of up to 32 x 32 as 2 x 2 tiles of 16 x 16 (s32 or f32) over one K block:
//
//   void ukernel(const void* a, const void* b, void* c, const LowpCallArgs* args);
//
//   tiles: C[i][j] = tmm(2i + j), A[i] = tmm4 + i (16 rows x 64 bytes of K), B[j] = tmm6 + j (16 k groups x
//   16 columns, the VNNI layout of the packed B panel, rows 128 bytes apart)
//   per 64-byte K step: load A0, B0, C00 += A0 B0, load B1, C01 += A0 B1, load A1, C10 += A1 B0, C11 += A1 B1
//   (B with the T1 hint: the B panels stream from L2 without evicting the A tile, which stays in L1 for the
//   whole row of B panels); a call of one K block whose K splits into equal shorter steps of whole dwords
//   (plan::amx_k_step_bytes) takes those steps, so that an A with such rows is read in place
//   then: the strip (K blocks before the last), a direct tile store into C (s32 or f32 C with nothing to
//   fuse), or tile stores into a stack block that the vector epilogue (gemm_lowp_epilogue.hpp) finishes row
//   by row into C. Variants without the vector epilogue (strip and direct stores) run args->panels column
//   panels of one row tile per call, each panel's stores issued after the next panel's first A and B loads.
//   With LowpLayout::amx_c_streamed the direct stores may instead (per call: LowpCallArgs::stream_c) go to an
//   L1 block on the stack and out to C with non-temporal stores, a few rows after each K step of the next panel.
//
// Each variant also gets a stub that loads its tile configuration (rows and bytes per tile for its row and
// column tails); the driver calls it when the variant changes within a task and calls the tilerelease stub
// when the task ends, so tile state never leaks into the caller's thread.
#pragma once

#include "plan/x86_lowp_plan.hpp"
#include "x86/gemm_lowp_epilogue.hpp"

#include <vector>

namespace jitmm::x86 {

// Throws jitmm::Error(JIT_FAILED) if Xbyak rejects something.
LowpCode generate_amx(const plan::LowpLayout& layout, const std::vector<LowpVariant>& variants);

// Whether the last K block can store the C tiles straight into C (no epilogue work at all).
bool amx_direct_store(const plan::LowpLayout& layout);

}  // namespace jitmm::x86
