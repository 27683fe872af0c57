// Shape files: a strict little CSV reader/writer for jitmm_matmul_desc rows. Strict because a shape file
// is usually hand-edited, and a silently misread cell ("12x" read as 12) benchmarks the wrong problem.
#include "core/shape_csv.hpp"

#include "core/error.hpp"

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace jitmm {
namespace {

enum class Column {
    m,
    n,
    k,
    batch_count,
    stride_a,
    stride_b,
    stride_c,
    a_type,
    b_type,
    c_type,
    trans_a,
    trans_b,
    lda,
    ldb,
    ldc,
    alpha,
    beta,
    epilogue,
    bias_type,
    bias_layout,
    a_scale,
    b_scale,
    a_zero_point,
    device,
    dtype,
};

struct ColumnName {
    const char* name;
    Column column;
};

// The writer emits these in this order (all but the "dtype" shorthand, which is last so it can be skipped).
constexpr std::array<ColumnName, 25> kColumns = {{
    {"m", Column::m},
    {"n", Column::n},
    {"k", Column::k},
    {"batch_count", Column::batch_count},
    {"stride_a", Column::stride_a},
    {"stride_b", Column::stride_b},
    {"stride_c", Column::stride_c},
    {"a_type", Column::a_type},
    {"b_type", Column::b_type},
    {"c_type", Column::c_type},
    {"trans_a", Column::trans_a},
    {"trans_b", Column::trans_b},
    {"lda", Column::lda},
    {"ldb", Column::ldb},
    {"ldc", Column::ldc},
    {"alpha", Column::alpha},
    {"beta", Column::beta},
    {"epilogue", Column::epilogue},
    {"bias_type", Column::bias_type},
    {"bias_layout", Column::bias_layout},
    {"a_scale", Column::a_scale},
    {"b_scale", Column::b_scale},
    {"a_zero_point", Column::a_zero_point},
    {"device", Column::device},
    {"dtype", Column::dtype},
}};

std::string trim(const std::string& s) {
    const char* ws = " \t\r\n\v\f";
    const size_t begin = s.find_first_not_of(ws);
    if (begin == std::string::npos) return "";
    const size_t end = s.find_last_not_of(ws);
    return s.substr(begin, end - begin + 1);
}

std::string lower(std::string s) {
    for (char& c : s) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return s;
}

std::vector<std::string> split_cells(const std::string& line) {
    std::vector<std::string> cells;
    size_t start = 0;
    for (;;) {
        const size_t comma = line.find(',', start);
        cells.push_back(trim(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return cells;
}

// Messages name the place, the column and the cell: "<source>:<line>: column 'm': bad integer '12x'".
[[noreturn]] void fail_at(const std::string& source, int line, const std::string& what) {
    fail(JITMM_STATUS_INVALID_VALUE, source + ":" + std::to_string(line) + ": " + what);
}

struct CellContext {
    const std::string& source;
    int line;
    const char* column;

    [[noreturn]] void fail_cell(const std::string& what, const std::string& cell) const {
        fail_at(source, line, std::string("column '") + column + "': " + what + " '" + cell + "'");
    }
};

// Decimal digits with an optional '-', nothing else: no '+', no hex, no trailing junk, no overflow.
int64_t parse_int64(const CellContext& ctx, const std::string& cell) {
    if (cell.empty()) ctx.fail_cell("empty cell, expected an integer", cell);
    int64_t value = 0;
    const char* first = cell.data();
    const char* last = cell.data() + cell.size();
    const auto result = std::from_chars(first, last, value);
    if (result.ec == std::errc::result_out_of_range) ctx.fail_cell("integer out of range", cell);
    if (result.ec != std::errc() || result.ptr != last) ctx.fail_cell("bad integer", cell);
    return value;
}

int32_t parse_flag(const CellContext& ctx, const std::string& cell) {
    const std::string v = lower(cell);
    if (v == "0" || v == "false" || v == "n") return 0;
    if (v == "1" || v == "true" || v == "t") return 1;
    ctx.fail_cell(cell.empty() ? "empty cell, expected 0/1/true/false/t/n" : "bad flag (expected 0/1/true/false/t/n)",
                  cell);
}

// from_chars is locale-independent (strtof would read "0,5" under a German locale) and rejects
// leading '+' and whitespace; non-finite values are refused because the API refuses them anyway.
float parse_float(const CellContext& ctx, const std::string& cell) {
    if (cell.empty()) ctx.fail_cell("empty cell, expected a number", cell);
    float value = 0.0f;
    const char* first = cell.data();
    const char* last = cell.data() + cell.size();
    const auto result = std::from_chars(first, last, value);
    if (result.ec == std::errc::result_out_of_range) ctx.fail_cell("number out of float range", cell);
    if (result.ec != std::errc() || result.ptr != last) ctx.fail_cell("bad number", cell);
    if (!std::isfinite(value)) ctx.fail_cell("number must be finite", cell);
    return value;
}

jitmm_dtype parse_dtype(const CellContext& ctx, const std::string& cell) {
    jitmm_dtype dtype = JITMM_DTYPE_F32;
    if (cell.empty()) ctx.fail_cell("empty cell, expected a dtype", cell);
    if (jitmm_dtype_from_name(lower(cell).c_str(), &dtype) != JITMM_STATUS_SUCCESS) {
        ctx.fail_cell("unknown dtype (expected f32 f16 bf16 s8 u8 s32 f8_e4m3 f8_e5m2)", cell);
    }
    return dtype;
}

jitmm_epilogue parse_epilogue(const CellContext& ctx, const std::string& cell) {
    jitmm_epilogue epilogue = JITMM_EPILOGUE_NONE;
    if (cell.empty()) ctx.fail_cell("empty cell, expected an epilogue", cell);
    if (jitmm_epilogue_from_name(lower(cell).c_str(), &epilogue) != JITMM_STATUS_SUCCESS) {
        ctx.fail_cell(
            "unknown epilogue (expected none bias relu gelu_tanh gelu_erf silu bias_relu bias_gelu_tanh "
            "bias_gelu_erf bias_silu)",
            cell);
    }
    return epilogue;
}

jitmm_bias_layout parse_bias_layout(const CellContext& ctx, const std::string& cell) {
    const std::string v = lower(cell);
    if (v == "column" || v == "per_column") return JITMM_BIAS_PER_COLUMN;
    if (v == "row" || v == "per_row") return JITMM_BIAS_PER_ROW;
    ctx.fail_cell(cell.empty() ? "empty cell, expected column/row" : "unknown bias layout (expected column/row)", cell);
}

// Quantization scale granularity: none (or an empty cell), tensor, and row (A) or column (B).
jitmm_scale_mode parse_scale(const CellContext& ctx, const std::string& cell, bool is_a) {
    const std::string v = lower(cell);
    if (v.empty() || v == "none") return JITMM_SCALE_NONE;
    if (v == "tensor" || v == "per_tensor") return JITMM_SCALE_PER_TENSOR;
    if (is_a && (v == "row" || v == "per_row")) return JITMM_SCALE_PER_ROW;
    if (!is_a && (v == "column" || v == "per_column")) return JITMM_SCALE_PER_COLUMN;
    if (v == "block" || v == "per_block") return JITMM_SCALE_PER_BLOCK_128;
    ctx.fail_cell(is_a ? "unknown A scale (expected none/tensor/row/block)"
                       : "unknown B scale (expected none/tensor/column/block)",
                  cell);
}

const char* scale_name(jitmm_scale_mode m) {
    switch (m) {
        case JITMM_SCALE_PER_TENSOR: return "tensor";
        case JITMM_SCALE_PER_ROW: return "row";
        case JITMM_SCALE_PER_COLUMN: return "column";
        case JITMM_SCALE_PER_BLOCK_128: return "block";
        default: return "none";
    }
}

// Lines are split on '\n'; a trailing '\r' goes with the trim. A UTF-8 byte-order mark (spreadsheet
// exports) is dropped from the first line.
std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t start = 0;
    if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) start = 3;
    while (start <= text.size()) {
        const size_t newline = text.find('\n', start);
        if (newline == std::string::npos) {
            if (start < text.size()) lines.push_back(text.substr(start));
            break;
        }
        lines.push_back(text.substr(start, newline - start));
        start = newline + 1;
    }
    return lines;
}

void apply_cell(Column column, const CellContext& ctx, const std::string& cell, ShapeRow* row) {
    jitmm_matmul_desc& d = row->desc;
    switch (column) {
        case Column::m: d.m = parse_int64(ctx, cell); break;
        case Column::n: d.n = parse_int64(ctx, cell); break;
        case Column::k: d.k = parse_int64(ctx, cell); break;
        case Column::batch_count: d.batch_count = parse_int64(ctx, cell); break;
        case Column::stride_a: d.stride_a = parse_int64(ctx, cell); break;
        case Column::stride_b: d.stride_b = parse_int64(ctx, cell); break;
        case Column::stride_c: d.stride_c = parse_int64(ctx, cell); break;
        case Column::a_type: d.a_type = parse_dtype(ctx, cell); break;
        case Column::b_type: d.b_type = parse_dtype(ctx, cell); break;
        case Column::c_type: d.c_type = parse_dtype(ctx, cell); break;
        case Column::trans_a: d.trans_a = parse_flag(ctx, cell); break;
        case Column::trans_b: d.trans_b = parse_flag(ctx, cell); break;
        case Column::lda: d.lda = parse_int64(ctx, cell); break;
        case Column::ldb: d.ldb = parse_int64(ctx, cell); break;
        case Column::ldc: d.ldc = parse_int64(ctx, cell); break;
        case Column::alpha: d.alpha = parse_float(ctx, cell); break;
        case Column::beta: d.beta = parse_float(ctx, cell); break;
        case Column::epilogue: d.epilogue = parse_epilogue(ctx, cell); break;
        case Column::bias_type: d.bias_type = parse_dtype(ctx, cell); break;
        case Column::bias_layout: d.bias_layout = parse_bias_layout(ctx, cell); break;
        case Column::a_scale: d.a_scale_mode = parse_scale(ctx, cell, true); break;
        case Column::b_scale: d.b_scale_mode = parse_scale(ctx, cell, false); break;
        case Column::a_zero_point: {
            const int64_t z = parse_int64(ctx, cell);
            if (z < INT32_MIN || z > INT32_MAX) ctx.fail_cell("zero point out of the int32 range", cell);
            d.a_zero_point = static_cast<int32_t>(z);
            break;
        }
        case Column::device: row->device = cell; break;  // empty: the tool's default device
        case Column::dtype: {
            const jitmm_dtype t = parse_dtype(ctx, cell);
            d.a_type = d.b_type = d.c_type = t;
            break;
        }
    }
}

const char* dtype_name_or_fail(jitmm_dtype dtype) {
    const char* name = jitmm_dtype_name(dtype);
    if (name == nullptr) {
        fail(JITMM_STATUS_INVALID_VALUE, "shape_csv_row: dtype " + std::to_string(dtype) + " has no name");
    }
    return name;
}

// Shortest text that reads back as the same float (to_chars' guarantee), locale-independent.
std::string format_float(float value) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    return std::string(buffer, result.ptr);
}

}  // namespace

std::vector<ShapeRow> parse_shape_csv(const std::string& text, const std::string& source_name) {
    const std::vector<std::string> lines = split_lines(text);
    std::vector<Column> header;
    std::vector<ShapeRow> rows;
    int dtype_index = -1;  // the shorthand is applied first so that explicit a_type/b_type/c_type win
    for (size_t i = 0; i < lines.size(); ++i) {
        const int line_no = static_cast<int>(i) + 1;
        const std::string line = trim(lines[i]);
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> cells = split_cells(line);
        if (header.empty()) {
            for (size_t c = 0; c < cells.size(); ++c) {
                const std::string name = lower(cells[c]);
                const ColumnName* found = nullptr;
                for (const ColumnName& col : kColumns) {
                    if (name == col.name) found = &col;
                }
                if (found == nullptr) {
                    fail_at(source_name, line_no,
                            name.empty() ? "empty column name in the header"
                                         : "unknown column '" + cells[c] + "' in the header");
                }
                for (Column seen : header) {
                    if (seen == found->column) fail_at(source_name, line_no, "column '" + name + "' named twice");
                }
                if (found->column == Column::dtype) dtype_index = static_cast<int>(c);
                header.push_back(found->column);
            }
            continue;
        }
        if (cells.size() != header.size()) {
            fail_at(source_name, line_no,
                    "expected " + std::to_string(header.size()) + " cells (one per header column), found " +
                        std::to_string(cells.size()));
        }
        ShapeRow row;
        const jitmm_status init = jitmm_matmul_desc_init(&row.desc);
        if (init != JITMM_STATUS_SUCCESS) fail(init, "jitmm_matmul_desc_init failed");
        row.line = line_no;
        if (dtype_index >= 0) {
            const CellContext ctx{source_name, line_no, "dtype"};
            apply_cell(Column::dtype, ctx, cells[dtype_index], &row);
        }
        for (size_t c = 0; c < cells.size(); ++c) {
            if (static_cast<int>(c) == dtype_index) continue;
            const CellContext ctx{source_name, line_no, kColumns[static_cast<size_t>(header[c])].name};
            apply_cell(header[c], ctx, cells[c], &row);
        }
        rows.push_back(row);
    }
    if (header.empty()) fail_at(source_name, static_cast<int>(lines.size()) + 1, "no header line (e.g. \"m,n,k\")");
    return rows;
}

std::vector<ShapeRow> read_shape_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(JITMM_STATUS_INVALID_VALUE, path + ": cannot open: " + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) fail(JITMM_STATUS_INVALID_VALUE, path + ": read error");
    return parse_shape_csv(text.str(), path);
}

std::string shape_csv_header() {
    std::string header;
    for (const ColumnName& col : kColumns) {
        if (col.column == Column::dtype) continue;
        if (!header.empty()) header += ',';
        header += col.name;
    }
    return header + "\n";
}

std::string shape_csv_row(const jitmm_matmul_desc& desc, const std::string& device) {
    if (device.find_first_of(",\r\n") != std::string::npos) {
        fail(JITMM_STATUS_INVALID_VALUE, "shape_csv_row: device '" + device + "' cannot be written to a CSV cell");
    }
    const char* epilogue = jitmm_epilogue_name(desc.epilogue);
    if (epilogue == nullptr) {
        fail(JITMM_STATUS_INVALID_VALUE, "shape_csv_row: epilogue " + std::to_string(desc.epilogue) + " has no name");
    }
    if (desc.bias_layout != JITMM_BIAS_PER_COLUMN && desc.bias_layout != JITMM_BIAS_PER_ROW) {
        fail(JITMM_STATUS_INVALID_VALUE,
             "shape_csv_row: bias layout " + std::to_string(desc.bias_layout) + " has no name");
    }
    const std::string cells[] = {
        std::to_string(desc.m),
        std::to_string(desc.n),
        std::to_string(desc.k),
        std::to_string(desc.batch_count),
        std::to_string(desc.stride_a),
        std::to_string(desc.stride_b),
        std::to_string(desc.stride_c),
        dtype_name_or_fail(desc.a_type),
        dtype_name_or_fail(desc.b_type),
        dtype_name_or_fail(desc.c_type),
        std::to_string(desc.trans_a),
        std::to_string(desc.trans_b),
        std::to_string(desc.lda),
        std::to_string(desc.ldb),
        std::to_string(desc.ldc),
        format_float(desc.alpha),
        format_float(desc.beta),
        epilogue,
        dtype_name_or_fail(desc.bias_type),
        desc.bias_layout == JITMM_BIAS_PER_ROW ? "row" : "column",
        scale_name(desc.a_scale_mode),
        scale_name(desc.b_scale_mode),
        std::to_string(desc.a_zero_point),
        trim(device),
    };
    std::string row;
    for (size_t i = 0; i < std::size(cells); ++i) {
        if (i > 0) row += ',';
        row += cells[i];
    }
    return row + "\n";
}

}  // namespace jitmm
