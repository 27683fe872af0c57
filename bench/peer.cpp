#include "peer.hpp"

#include <algorithm>
#include <cmath>

namespace jitmm::bench {

namespace {

// Function-local so that registrars in other files can run first (static initialization order).
std::vector<PeerInfo>& registry() {
    static std::vector<PeerInfo> peers;
    return peers;
}

// One activation over a row; the switch sits outside the loop so that each loop is a plain map.
void activate_row(jitmm_epilogue e, float* row, int64_t n) {
    auto map = [&](auto f) {
        for (int64_t j = 0; j < n; ++j) row[j] = f(row[j]);
    };
    switch (e) {
        case JITMM_EPILOGUE_RELU:
        case JITMM_EPILOGUE_BIAS_RELU: map([](float x) { return x > 0.0f ? x : 0.0f; }); break;
        case JITMM_EPILOGUE_GELU_TANH:
        case JITMM_EPILOGUE_BIAS_GELU_TANH:
            map([](float x) { return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x))); });
            break;
        case JITMM_EPILOGUE_GELU_ERF:
        case JITMM_EPILOGUE_BIAS_GELU_ERF:
            map([](float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067812f)); });
            break;
        case JITMM_EPILOGUE_SILU:
        case JITMM_EPILOGUE_BIAS_SILU: map([](float x) { return x / (1.0f + std::exp(-x)); }); break;
        case JITMM_EPILOGUE_NONE:
        case JITMM_EPILOGUE_BIAS: break;
    }
}

}  // namespace

PeerRegistrar::PeerRegistrar(const PeerInfo& info) {
    std::vector<PeerInfo>& peers = registry();
    const auto at = std::upper_bound(peers.begin(), peers.end(), info,
                                     [](const PeerInfo& a, const PeerInfo& b) { return a.order < b.order; });
    peers.insert(at, info);
}

const std::vector<PeerInfo>& peer_registry() { return registry(); }

const PeerInfo* find_peer(const std::string& name) {
    for (const PeerInfo& p : registry()) {
        if (name == p.name) return &p;
    }
    return nullptr;
}

void apply_epilogue_pass(const jitmm_matmul_desc& d, float* c, const float* bias) {
    const int64_t ldc = d.ldc > 0 ? d.ldc : d.n;
    const bool has_bias = epilogue_has_bias(d.epilogue);
    const bool per_row = d.bias_layout == JITMM_BIAS_PER_ROW;
    for (int64_t i = 0; i < d.m; ++i) {
        float* row = c + i * ldc;
        if (has_bias) {
            if (per_row) {
                for (int64_t j = 0; j < d.n; ++j) row[j] += bias[i];
            } else {
                for (int64_t j = 0; j < d.n; ++j) row[j] += bias[j];
            }
        }
        activate_row(d.epilogue, row, d.n);
    }
}

}  // namespace jitmm::bench
