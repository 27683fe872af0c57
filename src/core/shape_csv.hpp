// Shape files: CSV whose header names desc fields (m,n,k,trans_a,...). One format for every tool
// (jitmm-bench --shapes, jitmm-warmup --shapes) and for the recorder (JITMM_RECORD).
#pragma once

#include <jitmm/jitmm.h>

#include <string>
#include <vector>

namespace jitmm {

struct ShapeRow {
    jitmm_matmul_desc desc;  // fields the file does not name keep jitmm_matmul_desc_init's defaults
    std::string device;      // the optional "device" column ("cpu", "cuda:0", "sm_90a"); "" when absent
    int line = 0;            // 1-based line in the source, for messages
};

// Columns (any subset, any order, header required): m n k batch_count stride_a stride_b stride_c a_type
// b_type c_type trans_a trans_b lda ldb ldc alpha beta epilogue bias_type bias_layout device, plus "dtype"
// as shorthand setting a_type, b_type and c_type together (explicit a_type/b_type/c_type cells win).
// Cells are trimmed; names (header, dtypes, epilogues) are case-insensitive. Integers are strict decimal
// (no "12x", no overflow); trans_a/trans_b take 0/1, true/false or t/n; alpha/beta are finite floats;
// bias_layout is column/row (or per_column/per_row). Only the device cell may be empty (= the tool's
// default). Blank lines and lines starting with '#' are skipped; CRLF and a UTF-8 BOM are tolerated.
// Throws jitmm::Error(JITMM_STATUS_INVALID_VALUE, "<source>:<line>: column '<name>': <what> '<cell>'")
// on a bad cell, and "<source>:<line>: <what>" on a bad header or cell count.
std::vector<ShapeRow> parse_shape_csv(const std::string& text, const std::string& source_name);
std::vector<ShapeRow> read_shape_file(const std::string& path);  // also throws on an unreadable file

// Writing: the full header (every column but "dtype") and one row of every field, each ending in '\n',
// so that parse(header + row) gives back the same desc and device. Floats are written in their shortest
// exact form. Throws jitmm::Error on an enum with no name or a device containing ',' or a newline.
std::string shape_csv_header();
std::string shape_csv_row(const jitmm_matmul_desc& desc, const std::string& device);

}  // namespace jitmm
