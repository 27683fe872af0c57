// The direct EVEX encodings (x86/zmm_encoder.hpp) against Xbyak's: byte for byte, every register, base
// registers that qualify and displacements around each encoding boundary (none, disp8 * N, disp32).
#include "x86/zmm_encoder.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
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
