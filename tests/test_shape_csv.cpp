// Shape files: round trip through the writer, defaults, shorthand, tolerated noise, and errors that point
// at the line and the column.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/shape_csv.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

namespace {

jitmm_matmul_desc default_desc() {
    jitmm_matmul_desc desc;
    REQUIRE(jitmm_matmul_desc_init(&desc) == JITMM_STATUS_SUCCESS);
    return desc;
}

bool same_float_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Field by field: the struct has padding, so memcmp of the whole desc would compare garbage.
void require_same_desc(const jitmm_matmul_desc& got, const jitmm_matmul_desc& want) {
    CHECK(got.struct_size == want.struct_size);
    CHECK(got.m == want.m);
    CHECK(got.n == want.n);
    CHECK(got.k == want.k);
    CHECK(got.batch_count == want.batch_count);
    CHECK(got.stride_a == want.stride_a);
    CHECK(got.stride_b == want.stride_b);
    CHECK(got.stride_c == want.stride_c);
    CHECK(got.a_type == want.a_type);
    CHECK(got.b_type == want.b_type);
    CHECK(got.c_type == want.c_type);
    CHECK(got.trans_a == want.trans_a);
    CHECK(got.trans_b == want.trans_b);
    CHECK(got.lda == want.lda);
    CHECK(got.ldb == want.ldb);
    CHECK(got.ldc == want.ldc);
    CHECK(same_float_bits(got.alpha, want.alpha));
    CHECK(same_float_bits(got.beta, want.beta));
    CHECK(got.epilogue == want.epilogue);
    CHECK(got.bias_type == want.bias_type);
    CHECK(got.bias_layout == want.bias_layout);
    CHECK(got.a_scale_mode == want.a_scale_mode);
    CHECK(got.b_scale_mode == want.b_scale_mode);
    CHECK(got.a_zero_point == want.a_zero_point);
}

// Runs the parser on text that must fail; returns the error so the test can look at it.
jitmm::Error parse_error(const std::string& text) {
    try {
        jitmm::parse_shape_csv(text, "shapes.csv");
    } catch (const jitmm::Error& e) {
        return e;
    }
    FAIL("parse_shape_csv accepted:\n" << text);
    return jitmm::Error(JITMM_STATUS_SUCCESS, "");
}

void require_error(const std::string& text, int line, const std::string& column, const std::string& cell) {
    INFO("input:\n" << text);
    const jitmm::Error e = parse_error(text);
    const std::string message = e.what();
    INFO("message: " << message);
    CHECK(e.status() == JITMM_STATUS_INVALID_VALUE);
    CHECK(message.rfind("shapes.csv:" + std::to_string(line) + ": ", 0) == 0);
    if (!column.empty()) CHECK(message.find("'" + column + "'") != std::string::npos);
    if (!cell.empty()) CHECK(message.find("'" + cell + "'") != std::string::npos);
}

}  // namespace

TEST_CASE("shape csv: random descs round-trip through header + row", "[shape_csv]") {
    std::mt19937_64 rng(20240611);
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    const float special_floats[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 1e-30f, 3.4028235e38f, 1.17549435e-38f, 1e-45f /* denormal */, 0.333333343f};
    const char* devices[] = {"", "cpu", "cuda", "cuda:1", "sm_90a"};
    for (int iter = 0; iter < 500; ++iter) {
        jitmm_matmul_desc desc = default_desc();
        desc.m = pick(1, 1 << 20);
        desc.n = pick(1, 1 << 20);
        desc.k = pick(1, 1 << 20);
        desc.batch_count = pick(1, 64);
        desc.stride_a = pick(0, INT64_MAX);
        desc.stride_b = pick(INT64_MIN, INT64_MAX);  // the parser does not validate, it must only not lose bits
        desc.stride_c = pick(0, 1 << 30);
        desc.a_type = static_cast<jitmm_dtype>(pick(0, JITMM_DTYPE_COUNT - 1));
        desc.b_type = static_cast<jitmm_dtype>(pick(0, JITMM_DTYPE_COUNT - 1));
        desc.c_type = static_cast<jitmm_dtype>(pick(0, JITMM_DTYPE_COUNT - 1));
        desc.trans_a = static_cast<int32_t>(pick(0, 1));
        desc.trans_b = static_cast<int32_t>(pick(0, 1));
        desc.lda = pick(0, 1 << 20);
        desc.ldb = pick(0, 1 << 20);
        desc.ldc = pick(0, 1 << 20);
        if (iter % 3 == 0) {
            desc.alpha = special_floats[pick(0, 9)];
            desc.beta = special_floats[pick(0, 9)];
        } else {
            // Any finite float bit pattern.
            for (float* f : {&desc.alpha, &desc.beta}) {
                uint32_t bits;
                do {
                    bits = static_cast<uint32_t>(rng());
                } while (((bits >> 23) & 0xff) == 0xff);
                std::memcpy(f, &bits, sizeof(bits));
            }
        }
        desc.epilogue = static_cast<jitmm_epilogue>(pick(0, JITMM_EPILOGUE_COUNT - 1));
        desc.bias_type = static_cast<jitmm_dtype>(pick(0, JITMM_DTYPE_COUNT - 1));
        desc.bias_layout = static_cast<jitmm_bias_layout>(pick(0, 1));
        desc.a_scale_mode = static_cast<jitmm_scale_mode>(pick(0, 1) ? pick(0, 2) : 0);          // none/tensor/row
        desc.b_scale_mode = static_cast<jitmm_scale_mode>(pick(0, 1) ? pick(0, 1) : 3 * pick(0, 1));  // none/tensor/column
        desc.a_zero_point = pick(0, 3) == 0 ? pick(-128, 255) : 0;
        const std::string device = devices[pick(0, 4)];

        const std::string text = jitmm::shape_csv_header() + jitmm::shape_csv_row(desc, device);
        INFO("csv:\n" << text);
        const std::vector<jitmm::ShapeRow> rows = jitmm::parse_shape_csv(text, "roundtrip");
        REQUIRE(rows.size() == 1);
        require_same_desc(rows[0].desc, desc);
        CHECK(rows[0].device == device);
        CHECK(rows[0].line == 2);
    }
}

TEST_CASE("shape csv: the written header names every field once", "[shape_csv]") {
    const std::string header = jitmm::shape_csv_header();
    CHECK(header ==
          "m,n,k,batch_count,stride_a,stride_b,stride_c,a_type,b_type,c_type,trans_a,trans_b,"
          "lda,ldb,ldc,alpha,beta,epilogue,bias_type,bias_layout,a_scale,b_scale,a_zero_point,device\n");
    jitmm_matmul_desc desc = default_desc();
    desc.m = 64;
    desc.n = 32;
    desc.k = 16;
    desc.epilogue = JITMM_EPILOGUE_BIAS_GELU_TANH;
    desc.bias_layout = JITMM_BIAS_PER_ROW;
    desc.alpha = 0.5f;
    CHECK(jitmm::shape_csv_row(desc, "cpu") ==
          "64,32,16,1,0,0,0,f32,f32,f32,0,0,0,0,0,0.5,0,bias_gelu_tanh,f32,row,none,none,0,cpu\n");
    desc.a_type = JITMM_DTYPE_U8;
    desc.a_scale_mode = JITMM_SCALE_PER_ROW;
    desc.b_scale_mode = JITMM_SCALE_PER_COLUMN;
    desc.a_zero_point = 128;
    const auto rows = jitmm::parse_shape_csv(jitmm::shape_csv_header() + jitmm::shape_csv_row(desc, "cpu"), "scales");
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].desc.a_scale_mode == JITMM_SCALE_PER_ROW);
    CHECK(rows[0].desc.b_scale_mode == JITMM_SCALE_PER_COLUMN);
    desc.a_scale_mode = desc.b_scale_mode = JITMM_SCALE_PER_BLOCK_128;  // fp8 block scales: "block" both ways
    const auto blocks = jitmm::parse_shape_csv(jitmm::shape_csv_header() + jitmm::shape_csv_row(desc, "cpu"), "blocks");
    REQUIRE(blocks.size() == 1);
    CHECK(blocks[0].desc.a_scale_mode == JITMM_SCALE_PER_BLOCK_128);
    CHECK(blocks[0].desc.b_scale_mode == JITMM_SCALE_PER_BLOCK_128);
    CHECK(rows[0].desc.a_zero_point == 128);
    // A's scales are per row, B's per column: the other way round is an error naming the column.
    CHECK_THROWS_WITH(jitmm::parse_shape_csv("m,n,k,a_scale\n1,2,3,column\n", "bad"),
                      Catch::Contains("a_scale"));
    CHECK_THROWS_WITH(jitmm::parse_shape_csv("m,n,k,b_scale\n1,2,3,row\n", "bad"), Catch::Contains("b_scale"));
}

TEST_CASE("shape csv: a subset header leaves the other fields at their defaults", "[shape_csv]") {
    const auto rows = jitmm::parse_shape_csv("k,m,n\n30,10,20\n7,5,6\n", "subset");
    REQUIRE(rows.size() == 2);
    jitmm_matmul_desc want = default_desc();
    want.m = 10;
    want.n = 20;
    want.k = 30;
    require_same_desc(rows[0].desc, want);
    CHECK(rows[0].device.empty());
    CHECK(rows[0].line == 2);
    want.m = 5;
    want.n = 6;
    want.k = 7;
    require_same_desc(rows[1].desc, want);
    CHECK(rows[1].line == 3);

    CHECK(jitmm::parse_shape_csv("m,n,k\n", "header only").empty());
}

TEST_CASE("shape csv: dtype shorthand, with explicit types winning in any column order", "[shape_csv]") {
    auto rows = jitmm::parse_shape_csv("m,n,k,dtype\n1,2,3,bf16\n", "s");
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].desc.a_type == JITMM_DTYPE_BF16);
    CHECK(rows[0].desc.b_type == JITMM_DTYPE_BF16);
    CHECK(rows[0].desc.c_type == JITMM_DTYPE_BF16);

    rows = jitmm::parse_shape_csv("c_type,m,n,k,dtype\nf32,1,2,3,f16\n", "s");
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].desc.a_type == JITMM_DTYPE_F16);
    CHECK(rows[0].desc.b_type == JITMM_DTYPE_F16);
    CHECK(rows[0].desc.c_type == JITMM_DTYPE_F32);

    rows = jitmm::parse_shape_csv("m,n,k,dtype,c_type\n1,2,3,s8,s32\n", "s");
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].desc.a_type == JITMM_DTYPE_S8);
    CHECK(rows[0].desc.c_type == JITMM_DTYPE_S32);
}

TEST_CASE("shape csv: comments, blank lines, whitespace and CRLF", "[shape_csv]") {
    const std::string text =
        "\xEF\xBB\xBF# a comment before the header\r\n"
        "\r\n"
        " M , n,k ,trans_a, trans_b ,alpha,beta,epilogue,bias_layout,device\r\n"
        "   # an indented comment\r\n"
        "  64 ,\t32, 16 , true , n , 0.5 , -2 , RELU , per_row , cuda:1 \r\n"
        "\r\n"
        "8,8,8,t,false,1e-3,0,none,column,\r\n"
        "8,8,8,1,0,1,1,bias,row,cpu";  // no final newline
    const auto rows = jitmm::parse_shape_csv(text, "noisy");
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].line == 5);
    CHECK(rows[0].desc.m == 64);
    CHECK(rows[0].desc.n == 32);
    CHECK(rows[0].desc.k == 16);
    CHECK(rows[0].desc.trans_a == 1);
    CHECK(rows[0].desc.trans_b == 0);
    CHECK(rows[0].desc.alpha == 0.5f);
    CHECK(rows[0].desc.beta == -2.0f);
    CHECK(rows[0].desc.epilogue == JITMM_EPILOGUE_RELU);
    CHECK(rows[0].desc.bias_layout == JITMM_BIAS_PER_ROW);
    CHECK(rows[0].device == "cuda:1");
    CHECK(rows[1].line == 7);
    CHECK(rows[1].desc.trans_a == 1);
    CHECK(rows[1].desc.alpha == 1e-3f);
    CHECK(rows[1].desc.bias_layout == JITMM_BIAS_PER_COLUMN);
    CHECK(rows[1].device.empty());
    CHECK(rows[2].line == 8);
    CHECK(rows[2].desc.epilogue == JITMM_EPILOGUE_BIAS);
    CHECK(rows[2].device == "cpu");
}

TEST_CASE("shape csv: errors name the line, the column and the cell", "[shape_csv]") {
    SECTION("unknown column") { require_error("m,n,kk\n1,2,3\n", 1, "kk", ""); }
    SECTION("column named twice") { require_error("# c\nm,n,k,m\n1,2,3,4\n", 2, "m", ""); }
    SECTION("no header") { require_error("# only a comment\n\n", 3, "", ""); }
    SECTION("bad integer: trailing junk") { require_error("m,n,k\n1,2,3\n12x,2,3\n", 3, "m", "12x"); }
    SECTION("bad integer: empty cell") { require_error("m,n,k\n1,,3\n", 2, "n", ""); }
    SECTION("bad integer: overflow") {
        require_error("m,n,k\n1,2,99999999999999999999\n", 2, "k", "99999999999999999999");
    }
    SECTION("bad integer: plus sign and hex") {
        require_error("m,n,k\n+1,2,3\n", 2, "m", "+1");
        require_error("m,n,k\n0x10,2,3\n", 2, "m", "0x10");
        require_error("m,n,k\n1.5,2,3\n", 2, "m", "1.5");
    }
    SECTION("too few cells") { require_error("m,n,k\n1,2\n", 2, "", ""); }
    SECTION("too many cells") { require_error("m,n,k\n\n1,2,3,4\n", 3, "", ""); }
    SECTION("unknown dtype") { require_error("m,n,k,a_type\n1,2,3,f64\n", 2, "a_type", "f64"); }
    SECTION("unknown dtype in the shorthand") { require_error("m,n,k,dtype\n1,2,3,fp32\n", 2, "dtype", "fp32"); }
    SECTION("unknown epilogue") { require_error("m,n,k,epilogue\n1,2,3,gelu\n", 2, "epilogue", "gelu"); }
    SECTION("bad flag") { require_error("m,n,k,trans_b\n1,2,3,2\n", 2, "trans_b", "2"); }
    SECTION("bad float") {
        require_error("m,n,k,alpha\n1,2,3,1.0f\n", 2, "alpha", "1.0f");
        require_error("m,n,k,beta\n1,2,3,nan\n", 2, "beta", "nan");
        require_error("m,n,k,beta\n1,2,3,1e39\n", 2, "beta", "1e39");
    }
    SECTION("bad bias layout") { require_error("m,n,k,bias_layout\n1,2,3,diagonal\n", 2, "bias_layout", "diagonal"); }
}

TEST_CASE("shape csv: unreadable file", "[shape_csv]") {
    try {
        jitmm::read_shape_file("/nonexistent/jitmm/shapes.csv");
        FAIL("read_shape_file accepted a missing file");
    } catch (const jitmm::Error& e) {
        CHECK(e.status() == JITMM_STATUS_INVALID_VALUE);
        CHECK(std::string(e.what()).find("/nonexistent/jitmm/shapes.csv") != std::string::npos);
    }
}
