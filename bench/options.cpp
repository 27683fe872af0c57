#include "options.hpp"

#include "core/error.hpp"
#include "peer.hpp"
#include "reference.hpp"

#include <jitmm/jitmm.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace jitmm::bench {
namespace {

const char* kUsage =
    "usage: jitmm-bench --m M --n N --k K [shape options] [run options]\n"
    "       jitmm-bench --shapes FILE [run options]\n"
    "       jitmm-bench --peak [--threads N] [--json]\n"
    "\n"
    "shape options (C[M,N] = act(alpha * op(A) op(B) + beta * C + bias), row-major):\n"
    "  --m M --n N --k K          problem size (required without --shapes)\n"
    "  --batch B                  batch count (default 1); batches are packed tightly unless\n"
    "  --stride-a/-b/-c S         give a stride (elements; 0 for A or B shares one matrix)\n"
    "  --dtype T                  a, b and c type: f32 f16 bf16 s8 u8 s32 f8_e4m3 f8_e5m2 (default f32)\n"
    "  --a-type T --b-type T --c-type T --bias-type T\n"
    "  --trans-a --trans-b        op(A) = A^T (A stored K x M), op(B) = B^T (B stored N x K)\n"
    "  --lda X --ldb X --ldc X    leading dimensions (default tight)\n"
    "  --alpha A --beta B         (default 1 and 0)\n"
    "  --epilogue E               none bias relu gelu_tanh gelu_erf silu bias_relu bias_gelu_tanh\n"
    "                             bias_gelu_erf bias_silu\n"
    "  --bias-layout L            column (bias[N], default) or row (bias[M])\n"
    "  --a-scale S                dequantization scales of A (s8/u8/fp8 inputs, float C): none (default),\n"
    "                             tensor (one value) or row (M values): C = alpha * sa * sb * AB + ...\n"
    "  --b-scale S                none (default), tensor or column (N values); scales are random k/4\n"
    "                             block on both (fp8): A per row and 128-wide K block, B per 128x128 block\n"
    "\n"
    "run options:\n"
    "  --shapes FILE              CSV of shapes (header of desc fields: m,n,k,trans_b,dtype,...;\n"
    "                             a device column overrides --device per row; stride_c 0 with\n"
    "                             batch_count > 1 means tightly packed; a_scale and b_scale columns\n"
    "                             take the --a-scale/--b-scale values, an empty cell is none)\n"
    "  --device D                 cpu (default), cuda, cuda:N\n"
    "  --threads N                engine threads (default: JITMM_NUM_THREADS or physical cores); CPU peers\n"
    "                             and %peak use the same count\n"
    "  --repeats R                at least R timed runs (default 5)\n"
    "  --min-time-ms T            and at least T ms of timed runs (default 200)\n"
    "  --back-to-back             device runs: one event pair around each batch of 20 calls, the time per\n"
    "                             call of the batch (a decode step's layers run so); default: an event pair\n"
    "                             around each call\n"
    "  --check                    compare with a float64 reference (exit 1 past the bound)\n"
    "  --tune                     first time the planner's candidate recipes for each shape (jitmm_tune) and\n"
    "                             keep the fastest in the tuning store beside the kernel cache, which this\n"
    "                             and later processes then use; the table is measured with the winner\n"
    "  --peer NAME[,NAME...]      also time peer libraries on the same inputs and threads: onednn,\n"
    "                             openblas, libxsmm, ... or all (repeatable); columns NAME_GFLOP/s and\n"
    "                             ratio_vs_NAME (peer time / jitmm time: > 1 means jitmm is faster)\n"
    "  --peak                     measure the FMA peak of each code tier at 1 and --threads threads\n"
    "                             (the denominator of %peak), print it and exit\n"
    "  --json                     one JSON array on stdout, one object per shape\n"
    "  --help\n"
    "\n"
    "exit status: 0 all shapes ran (and passed --check), 1 otherwise, 2 bad usage\n";

int64_t parse_int_arg(const std::string& flag, const std::string& value, int64_t min_value) {
    int64_t v = 0;
    const char* last = value.data() + value.size();
    const auto r = std::from_chars(value.data(), last, v);
    if (value.empty() || r.ec != std::errc() || r.ptr != last) throw UsageError(flag + ": bad integer '" + value + "'");
    if (v < min_value) throw UsageError(flag + ": must be at least " + std::to_string(min_value) + ", got " + value);
    return v;
}

float parse_float_arg(const std::string& flag, const std::string& value) {
    float v = 0;
    const char* last = value.data() + value.size();
    const auto r = std::from_chars(value.data(), last, v);
    if (value.empty() || r.ec != std::errc() || r.ptr != last || !std::isfinite(v)) {
        throw UsageError(flag + ": bad number '" + value + "'");
    }
    return v;
}

jitmm_dtype parse_dtype_arg(const std::string& flag, const std::string& value) {
    jitmm_dtype t;
    if (jitmm_dtype_from_name(value.c_str(), &t) != JITMM_STATUS_SUCCESS) {
        throw UsageError(flag + ": unknown dtype '" + value + "' (f32 f16 bf16 s8 u8 s32 f8_e4m3 f8_e5m2)");
    }
    return t;
}

// --a-scale / --b-scale values (shape files' a_scale / b_scale cells are read by core/shape_csv). *error is set on a bad value.
bool parse_scale_mode(bool is_a, const std::string& value, jitmm_scale_mode* mode, std::string* error) {
    std::string v;
    for (const char ch : value) v += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (v.empty() || v == "none") {
        *mode = JITMM_SCALE_NONE;
    } else if (v == "tensor" || v == "per_tensor") {
        *mode = JITMM_SCALE_PER_TENSOR;
    } else if (is_a && (v == "row" || v == "per_row")) {
        *mode = JITMM_SCALE_PER_ROW;
    } else if (!is_a && (v == "column" || v == "per_column")) {
        *mode = JITMM_SCALE_PER_COLUMN;
    } else if (v == "block" || v == "per_block") {
        *mode = JITMM_SCALE_PER_BLOCK_128;
    } else {
        *error = std::string("expected none, tensor, ") + (is_a ? "row" : "column") + " or block, got '" + value + "'";
        return false;
    }
    return true;
}

// --peer takes "a,b" lists and "all"; names are checked against the registry (a peer that is registered
// but not built is accepted: its column says n/a and why).
void add_peers(const std::string& value, std::vector<std::string>* names) {
    size_t start = 0;
    while (start <= value.size()) {
        const size_t comma = std::min(value.find(',', start), value.size());
        const std::string name = value.substr(start, comma - start);
        start = comma + 1;
        if (name == "all") {
            for (const PeerInfo& p : peer_registry()) names->push_back(p.name);
            continue;
        }
        if (find_peer(name) == nullptr) {
            std::string list;
            for (const PeerInfo& p : peer_registry()) list += std::string(list.empty() ? "" : " ") + p.name;
            throw UsageError("--peer: unknown peer '" + name + "' (known: " + (list.empty() ? "none" : list) +
                             ", all)");
        }
        names->push_back(name);
    }
}

}  // namespace

// Tight batch strides fill in what a command line (or a shape file's stride_c of 0, never a valid C stride)
// leaves out.
Options parse_args(int argc, char** argv) {
    Options o;
    jitmm_matmul_desc d;
    jitmm_matmul_desc_init(&d);
    bool have_m = false, have_n = false, have_k = false, any_shape_flag = false;
    bool have_stride[3] = {false, false, false};
    bool have_type[3] = {false, false, false};
    jitmm_dtype all_type = JITMM_DTYPE_F32;
    std::string shapes_path;
    std::vector<std::string> peer_names;

    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        std::string value;
        bool inline_value = false;
        const size_t eq = flag.find('=');
        if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = flag.substr(eq + 1);
            flag = flag.substr(0, eq);
            inline_value = true;
        }
        auto take = [&]() -> std::string {
            if (inline_value) return value;
            if (i + 1 >= argc) throw UsageError(flag + ": missing value");
            return argv[++i];
        };
        auto no_value = [&]() {
            if (inline_value) throw UsageError(flag + ": takes no value");
        };
        auto shape_flag = [&]() { any_shape_flag = true; };

        if (flag == "--help" || flag == "-h") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (flag == "--m") {
            shape_flag();
            d.m = parse_int_arg(flag, take(), 1);
            have_m = true;
        } else if (flag == "--n") {
            shape_flag();
            d.n = parse_int_arg(flag, take(), 1);
            have_n = true;
        } else if (flag == "--k") {
            shape_flag();
            d.k = parse_int_arg(flag, take(), 1);
            have_k = true;
        } else if (flag == "--batch") {
            shape_flag();
            d.batch_count = parse_int_arg(flag, take(), 1);
        } else if (flag == "--stride-a") {
            shape_flag();
            d.stride_a = parse_int_arg(flag, take(), 0);
            have_stride[0] = true;
        } else if (flag == "--stride-b") {
            shape_flag();
            d.stride_b = parse_int_arg(flag, take(), 0);
            have_stride[1] = true;
        } else if (flag == "--stride-c") {
            shape_flag();
            d.stride_c = parse_int_arg(flag, take(), 0);
            have_stride[2] = true;
        } else if (flag == "--dtype") {
            shape_flag();
            all_type = parse_dtype_arg(flag, take());
        } else if (flag == "--a-type") {
            shape_flag();
            d.a_type = parse_dtype_arg(flag, take());
            have_type[0] = true;
        } else if (flag == "--b-type") {
            shape_flag();
            d.b_type = parse_dtype_arg(flag, take());
            have_type[1] = true;
        } else if (flag == "--c-type") {
            shape_flag();
            d.c_type = parse_dtype_arg(flag, take());
            have_type[2] = true;
        } else if (flag == "--bias-type") {
            shape_flag();
            d.bias_type = parse_dtype_arg(flag, take());
        } else if (flag == "--trans-a") {
            shape_flag();
            no_value();
            d.trans_a = 1;
        } else if (flag == "--trans-b") {
            shape_flag();
            no_value();
            d.trans_b = 1;
        } else if (flag == "--lda") {
            shape_flag();
            d.lda = parse_int_arg(flag, take(), 0);
        } else if (flag == "--ldb") {
            shape_flag();
            d.ldb = parse_int_arg(flag, take(), 0);
        } else if (flag == "--ldc") {
            shape_flag();
            d.ldc = parse_int_arg(flag, take(), 0);
        } else if (flag == "--alpha") {
            shape_flag();
            d.alpha = parse_float_arg(flag, take());
        } else if (flag == "--beta") {
            shape_flag();
            d.beta = parse_float_arg(flag, take());
        } else if (flag == "--epilogue") {
            shape_flag();
            const std::string v = take();
            if (jitmm_epilogue_from_name(v.c_str(), &d.epilogue) != JITMM_STATUS_SUCCESS) {
                throw UsageError("--epilogue: unknown epilogue '" + v + "'");
            }
        } else if (flag == "--bias-layout") {
            shape_flag();
            const std::string v = take();
            if (v == "column" || v == "per_column")
                d.bias_layout = JITMM_BIAS_PER_COLUMN;
            else if (v == "row" || v == "per_row")
                d.bias_layout = JITMM_BIAS_PER_ROW;
            else
                throw UsageError("--bias-layout: expected column or row, got '" + v + "'");
        } else if (flag == "--a-scale" || flag == "--b-scale") {
            shape_flag();
            const bool is_a = flag == "--a-scale";
            std::string error;
            if (!parse_scale_mode(is_a, take(), is_a ? &d.a_scale_mode : &d.b_scale_mode, &error))
                throw UsageError(flag + ": " + error);
        } else if (flag == "--device") {
            o.device = take();
            if (o.device.empty()) throw UsageError("--device: empty device");
        } else if (flag == "--threads") {
            o.threads = static_cast<int32_t>(parse_int_arg(flag, take(), 0));
            if (o.threads > 4096) throw UsageError("--threads: at most 4096");
        } else if (flag == "--shapes") {
            shapes_path = take();
        } else if (flag == "--repeats") {
            o.timing.repeats = static_cast<int>(std::min<int64_t>(parse_int_arg(flag, take(), 1), 1 << 30));
        } else if (flag == "--min-time-ms") {
            o.timing.min_time_s = static_cast<double>(parse_int_arg(flag, take(), 0)) / 1000.0;
        } else if (flag == "--back-to-back") {
            no_value();
            o.timing.back_to_back = true;
        } else if (flag == "--tune") {
            no_value();
            o.tune = true;
        } else if (flag == "--check") {
            no_value();
            o.check = true;
        } else if (flag == "--json") {
            no_value();
            o.json = true;
        } else if (flag == "--peer") {
            add_peers(take(), &peer_names);
        } else if (flag == "--peak") {
            no_value();
            o.peak = true;
        } else {
            throw UsageError("unknown option '" + flag + "' (see --help)");
        }
    }

    for (const PeerInfo& p : peer_registry()) {  // registry order, each once
        if (std::find(peer_names.begin(), peer_names.end(), p.name) != peer_names.end()) o.peers.push_back(p.name);
    }
    if (o.peak) {
        if (any_shape_flag || !shapes_path.empty() || !o.peers.empty() || o.check) {
            throw UsageError("--peak measures the FMA peak only: no shapes, --peer or --check");
        }
        return o;
    }

    if (!shapes_path.empty()) {
        if (any_shape_flag) {
            throw UsageError("--shapes: shape options (--m, --dtype, ...) cannot be combined with a shape file");
        }
        try {
            o.shapes = read_shape_file(shapes_path);
        } catch (const Error& e) {
            throw UsageError(e.what());
        }
        if (o.shapes.empty()) throw UsageError(shapes_path + ": no shapes");
        // A batched row without strides (no stride columns, or all three 0) is tightly packed; a row that gives
        // C's stride keeps A's and B's as written (0: one matrix shared by every batch, as JITMM_RECORD writes it).
        for (ShapeRow& row : o.shapes) {
            jitmm_matmul_desc& d = row.desc;
            if (d.batch_count <= 1 || d.stride_c != 0) continue;
            if (d.stride_a == 0 && d.stride_b == 0) {
                d.stride_a = tight_stride(operand_a(d));
                d.stride_b = tight_stride(operand_b(d));
            }
            d.stride_c = tight_stride(operand_c(d));
        }
        return o;
    }
    if (!have_m || !have_n || !have_k) throw UsageError("--m, --n and --k are required (or --shapes FILE); see --help");
    if (!have_type[0]) d.a_type = all_type;
    if (!have_type[1]) d.b_type = all_type;
    if (!have_type[2]) d.c_type = all_type;
    if (d.batch_count > 1) {
        if (!have_stride[0]) d.stride_a = tight_stride(operand_a(d));
        if (!have_stride[1]) d.stride_b = tight_stride(operand_b(d));
        if (!have_stride[2]) d.stride_c = tight_stride(operand_c(d));
    }
    ShapeRow row;
    row.desc = d;
    row.line = 0;
    o.shapes.push_back(row);
    return o;
}

}  // namespace jitmm::bench
