// The direct EVEX encodings (x86/zmm_encoder.hpp) against Xbyak's: byte for byte, every register, base
// registers that qualify and displacements around each encoding boundary (none, disp8 * N, disp32).
#include "x86/zmm_encoder.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

namespace {

struct Emitter : Xbyak::CodeGenerator {
    Emitter() : Xbyak::CodeGenerator(4096) {}
    std::vector<uint8_t> take() {
        std::vector<uint8_t> bytes(getCode(), getCode() + getSize());
        reset();
        return bytes;
    }
};

const int32_t kDisplacements[] = {0, 4, -4, 6, 64, -64, 508, 512, -512, 8128, 8192, -8192, 100000, -100000, INT32_MAX};

}  // namespace

TEST_CASE("zmm encoder: the same bytes as Xbyak", "[x86][encoder]") {
    Emitter mine, xbyak;
    for (int d = 0; d < 32; ++d) {
        for (int a = 0; a < 32; ++a) {
            for (int b = 0; b < 32; ++b) {
                INFO("zmm" << d << ", zmm" << a << ", zmm" << b);
                jitmm::x86::fma231_zmm(mine, d, a, b);
                xbyak.vfmadd231ps(Xbyak::Zmm(d), Xbyak::Zmm(a), Xbyak::Zmm(b));
                REQUIRE(mine.take() == xbyak.take());
                jitmm::x86::add_zmm(mine, d, a, b);
                xbyak.vaddps(Xbyak::Zmm(d), Xbyak::Zmm(a), Xbyak::Zmm(b));
                REQUIRE(mine.take() == xbyak.take());
                jitmm::x86::zmm_op(mine, jitmm::x86::kZmmPxord, d, a, b);
                xbyak.vpxord(Xbyak::Zmm(d), Xbyak::Zmm(a), Xbyak::Zmm(b));
                REQUIRE(mine.take() == xbyak.take());
                jitmm::x86::zmm_op(mine, jitmm::x86::kZmmDpbusd, d, a, b);
                xbyak.vpdpbusd(Xbyak::Zmm(d), Xbyak::Zmm(a), Xbyak::Zmm(b));
                REQUIRE(mine.take() == xbyak.take());
                jitmm::x86::zmm_op(mine, jitmm::x86::kZmmDpbf16ps, d, a, b);
                xbyak.vdpbf16ps(Xbyak::Zmm(d), Xbyak::Zmm(a), Xbyak::Zmm(b));
                REQUIRE(mine.take() == xbyak.take());
            }
        }
    }
    int bases_tried = 0;
    for (int r = 0; r < 16; ++r) {
        const Xbyak::Reg64 base(r);
        if (!jitmm::x86::zmm_memory_operand_ok(base)) continue;
        ++bases_tried;
        for (int d = 0; d < 32; ++d) {
            for (int32_t disp : kDisplacements) {
                INFO("zmm" << d << ", [" << base.toString() << " + " << disp << "]");
                jitmm::x86::broadcast_zmm(mine, d, base, disp);
                xbyak.vbroadcastss(Xbyak::Zmm(d), xbyak.ptr[base + disp]);
                REQUIRE(mine.take() == xbyak.take());
                jitmm::x86::broadcast_dword_zmm(mine, d, base, disp);
                xbyak.vpbroadcastd(Xbyak::Zmm(d), xbyak.ptr[base + disp]);
                REQUIRE(mine.take() == xbyak.take());
                jitmm::x86::load_zmm(mine, d, base, disp);
                xbyak.vmovups(Xbyak::Zmm(d), xbyak.ptr[base + disp]);
                REQUIRE(mine.take() == xbyak.take());
                jitmm::x86::store_zmm(mine, base, disp, d);
                xbyak.vmovups(xbyak.ptr[base + disp], Xbyak::Zmm(d));
                REQUIRE(mine.take() == xbyak.take());
            }
        }
    }
    CHECK(bases_tried == 12);  // all but rsp, rbp, r12, r13
}

TEST_CASE("zmm encoder: the activations' operations, on registers and on a RIP-relative constant", "[x86][encoder]") {
    using Xbyak::Zmm;
    using Op = void (*)(Emitter&, const Zmm&, const Zmm&, const Xbyak::Operand&);
#define XBYAK_OP(name) [](Emitter& e, const Zmm& d, const Zmm& a, const Xbyak::Operand& b) { e.name(d, a, b); }, #name
    struct Case {
        jitmm::x86::ZmmOp op;
        Op xbyak;
        const char* name;
    };
    const Case cases[] = {
        {jitmm::x86::kZmmAdd, XBYAK_OP(vaddps)},
        {jitmm::x86::kZmmMul, XBYAK_OP(vmulps)},
        {jitmm::x86::kZmmSub, XBYAK_OP(vsubps)},
        {jitmm::x86::kZmmMin, XBYAK_OP(vminps)},
        {jitmm::x86::kZmmMax, XBYAK_OP(vmaxps)},
        {jitmm::x86::kZmmAnd, XBYAK_OP(vandps)},
        {jitmm::x86::kZmmXor, XBYAK_OP(vxorps)},
        {jitmm::x86::kZmmFmadd213, XBYAK_OP(vfmadd213ps)},
        {jitmm::x86::kZmmFmadd231, XBYAK_OP(vfmadd231ps)},
        {jitmm::x86::kZmmFnmadd213, XBYAK_OP(vfnmadd213ps)},
        {jitmm::x86::kZmmFnmadd231, XBYAK_OP(vfnmadd231ps)},
        {jitmm::x86::kZmmScalef, XBYAK_OP(vscalefps)},
    };
#undef XBYAK_OP
    Emitter mine, xbyak;
    for (const Case& c : cases) {
        for (int d = 0; d < 32; d += 3) {
            for (int a = 0; a < 32; a += 5) {
                for (int b = 0; b < 32; b += 7) {
                    INFO(c.name << " zmm" << d << ", zmm" << a << ", zmm" << b);
                    jitmm::x86::zmm_op(mine, c.op, d, a, b);
                    c.xbyak(xbyak, Zmm(d), Zmm(a), Zmm(b));
                    REQUIRE(mine.take() == xbyak.take());
                }
                // [rip + rel32] pointing 100 bytes past the instruction: patched by hand here, by Xbyak's label.
                INFO(c.name << " zmm" << d << ", zmm" << a << ", [rip]");
                const size_t rel_at = jitmm::x86::zmm_op_rip(mine, c.op, d, a);
                mine.rewrite(rel_at, 100, 4);
                Xbyak::Label target;
                c.xbyak(xbyak, Zmm(d), Zmm(a), xbyak.ptr[xbyak.rip + target]);
                for (int i = 0; i < 100; ++i) xbyak.db(0);
                xbyak.L(target);
                std::vector<uint8_t> theirs = xbyak.take();
                theirs.resize(theirs.size() - 100);
                REQUIRE(mine.take() == theirs);
            }
        }
    }
    // The one-source forms: vmovups from a constant, vrcp14ps.
    for (int d = 0; d < 32; d += 3) {
        const size_t rel_at = jitmm::x86::zmm_op_rip(mine, jitmm::x86::kZmmLoad, d, 0);
        mine.rewrite(rel_at, 100, 4);
        Xbyak::Label target;
        xbyak.vmovups(Zmm(d), xbyak.ptr[xbyak.rip + target]);
        for (int i = 0; i < 100; ++i) xbyak.db(0);
        xbyak.L(target);
        std::vector<uint8_t> theirs = xbyak.take();
        theirs.resize(theirs.size() - 100);
        REQUIRE(mine.take() == theirs);
        for (int b = 0; b < 32; b += 7) {
            jitmm::x86::zmm_op(mine, jitmm::x86::kZmmRcp14, d, 0, b);
            xbyak.vrcp14ps(Zmm(d), Zmm(b));
            REQUIRE(mine.take() == xbyak.take());
        }
    }
}

// A buffer without room for the next instruction: the same error as Xbyak's own (which the generators answer
// with a larger buffer), the bytes before it intact and nothing written past the end.
TEST_CASE("zmm encoder: a full buffer raises Xbyak's code-too-big error", "[x86][encoder]") {
    alignas(64) uint8_t buffer[32 + 8];
    std::fill(std::begin(buffer), std::end(buffer), uint8_t{0xCC});
    Xbyak::CodeGenerator small(32, buffer);
    jitmm::x86::load_zmm(small, 1, Xbyak::util::rdi, 64);   // 7 bytes
    jitmm::x86::load_zmm(small, 2, Xbyak::util::rdi, 128);  // 14
    jitmm::x86::load_zmm(small, 3, Xbyak::util::rdi, 192);  // 21
    jitmm::x86::load_zmm(small, 4, Xbyak::util::rdi, 256);  // 28
    REQUIRE(small.getSize() == 28);
    try {
        jitmm::x86::load_zmm(small, 5, Xbyak::util::rdi, 320);
        FAIL("a fifth 7-byte instruction fit in 32 bytes");
    } catch (const Xbyak::Error& e) {
        CHECK(static_cast<int>(e) == Xbyak::ERR_CODE_IS_TOO_BIG);
    }
    CHECK(small.getSize() == 28);
    for (size_t i = 28; i < sizeof buffer; ++i) CHECK(buffer[i] == 0xCC);
}
