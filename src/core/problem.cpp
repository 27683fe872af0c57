#include "core/problem.hpp"

#include "core/dtype.hpp"

#include <cstdio>

namespace jitmm {

const char* activation_name(Activation a) {
    switch (a) {
        case Activation::none: return "none";
        case Activation::relu: return "relu";
        case Activation::gelu_tanh: return "gelu_tanh";
        case Activation::gelu_erf: return "gelu_erf";
        case Activation::silu: return "silu";
    }
    return "?";
}

double Problem::b_bytes_read() const {
    const double own_batches = batch > 1 && stride_b != 0 ? double(batch) : 1.0;
    return double(k) * double(n) * double(dtype_size(b_type)) * own_batches;
}

std::string describe(const Problem& p) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%lldx%lldx%lld batch=%lld %s*%s->%s %c%c lda=%lld ldb=%lld ldc=%lld alpha=%g beta=%g bias=%s "
                  "act=%s",
                  static_cast<long long>(p.m), static_cast<long long>(p.n), static_cast<long long>(p.k),
                  static_cast<long long>(p.batch), dtype_name_or_null(p.a_type), dtype_name_or_null(p.b_type),
                  dtype_name_or_null(p.c_type), p.trans_a ? 't' : 'n', p.trans_b ? 't' : 'n',
                  static_cast<long long>(p.lda), static_cast<long long>(p.ldb), static_cast<long long>(p.ldc),
                  double(p.alpha), double(p.beta),
                  p.bias == BiasKind::none ? "none" : p.bias == BiasKind::per_column ? "column" : "row",
                  activation_name(p.activation));
    if (!p.quantized()) return buf;
    static const char* const kScale[] = {"none", "tensor", "row", "column", "block"};
    char quant[96];
    std::snprintf(quant, sizeof quant, " a_scale=%s b_scale=%s a_zero_point=%d", kScale[int(p.a_scale)],
                  kScale[int(p.b_scale)], int(p.a_zero_point));
    return std::string(buf) + quant;
}

}  // namespace jitmm
