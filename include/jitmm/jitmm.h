/*
 * jitmm: a JIT code-generating matrix-multiplication engine.
 *
 * C API. Every function returns a jitmm_status; the detail of the last failure on the calling thread is
 * in jitmm_last_error_message(). No function throws or aborts. Logs go to stderr only when JITMM_VERBOSE is
 * set, with one exception: a disk cache folder refused as unsafe (writable by others) or unwritable is
 * reported once per process, since the cache would otherwise stop working silently.
 *
 * Semantics (row-major, like the C arrays a framework hands in):
 *   for each batch b in [0, batch_count):
 *     C_b[M,N] = act( alpha * op(A_b)[M,K] * op(B_b)[K,N] + beta * C_b + bias )
 *   op(A) = A (stored M x K, lda >= K) or, with trans_a, A^T (A stored K x M, lda >= M).
 *   op(B) = B (stored K x N, ldb >= N) or, with trans_b, B^T (B stored N x K, ldb >= K).
 *   C is stored M x N with ldc >= N. Leading dimensions and batch strides count elements, not bytes.
 *   A leading dimension of 0 in the desc means "tightly packed". With batch_count > 1 a stride of 0 for
 *   A or B broadcasts one matrix to every batch (shared weights); C needs a stride that keeps the
 *   batches' outputs apart.
 *   beta == 0 never reads C (C may hold NaN or garbage).
 *
 * Thread safety: an engine may be shared by threads; a kernel handle may be run concurrently.
 */
#ifndef JITMM_JITMM_H
#define JITMM_JITMM_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define JITMM_API __declspec(dllexport)
#else
#define JITMM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define JITMM_VERSION_MAJOR 0
#define JITMM_VERSION_MINOR 1
#define JITMM_VERSION_PATCH 0
/* Encoded as major * 10000 + minor * 100 + patch. */
#define JITMM_VERSION (JITMM_VERSION_MAJOR * 10000 + JITMM_VERSION_MINOR * 100 + JITMM_VERSION_PATCH)

typedef enum jitmm_status {
    JITMM_STATUS_SUCCESS = 0,
    JITMM_STATUS_NULL_POINTER = 1,          /* a required pointer argument or field is NULL */
    JITMM_STATUS_INVALID_STRUCT_SIZE = 2,   /* struct_size is 0, too small, or larger than this library knows */
    JITMM_STATUS_INVALID_DIMENSION = 3,     /* m, n, k or batch_count is zero or negative */
    JITMM_STATUS_INVALID_LEADING_DIM = 4,   /* lda/ldb/ldc smaller than the stored row */
    JITMM_STATUS_INVALID_STRIDE = 5,        /* negative batch stride, or batches that overlap */
    JITMM_STATUS_INVALID_VALUE = 6,         /* an enum or flag out of range, a non-finite alpha/beta, bad config */
    JITMM_STATUS_OVERFLOW = 7,              /* a matrix's extent in bytes does not fit in 64-bit addressing */
    JITMM_STATUS_UNSUPPORTED = 8,           /* valid, but this device/backend has no kernel for it (yet) */
    JITMM_STATUS_NO_DEVICE = 9,             /* the requested device does not exist or has no driver */
    JITMM_STATUS_OUT_OF_MEMORY = 10,
    JITMM_STATUS_JIT_FAILED = 11,           /* code generation or compilation failed */
    JITMM_STATUS_DEVICE_ERROR = 12,         /* the CUDA driver or NVRTC reported an error */
    JITMM_STATUS_INTERNAL_ERROR = 13
} jitmm_status;

typedef enum jitmm_dtype {
    JITMM_DTYPE_F32 = 0,
    JITMM_DTYPE_F16 = 1,
    JITMM_DTYPE_BF16 = 2,
    JITMM_DTYPE_S8 = 3,
    JITMM_DTYPE_U8 = 4,
    JITMM_DTYPE_S32 = 5,
    JITMM_DTYPE_F8_E4M3 = 6,
    JITMM_DTYPE_F8_E5M2 = 7
} jitmm_dtype;
#define JITMM_DTYPE_COUNT 8

/* Applied to alpha * A*B + beta * C before the single store of C. */
typedef enum jitmm_epilogue {
    JITMM_EPILOGUE_NONE = 0,
    JITMM_EPILOGUE_BIAS = 1,
    JITMM_EPILOGUE_RELU = 2,
    JITMM_EPILOGUE_GELU_TANH = 3,
    JITMM_EPILOGUE_GELU_ERF = 4,
    JITMM_EPILOGUE_SILU = 5,
    JITMM_EPILOGUE_BIAS_RELU = 6,
    JITMM_EPILOGUE_BIAS_GELU_TANH = 7,
    JITMM_EPILOGUE_BIAS_GELU_ERF = 8,
    JITMM_EPILOGUE_BIAS_SILU = 9
} jitmm_epilogue;
#define JITMM_EPILOGUE_COUNT 10

/* Which way a bias vector broadcasts. */
typedef enum jitmm_bias_layout {
    JITMM_BIAS_PER_COLUMN = 0, /* bias[N], added to every row (a Linear layer's bias) */
    JITMM_BIAS_PER_ROW = 1     /* bias[M], added to every column */
} jitmm_bias_layout;

/* Quantization scales (int8 and fp8 inputs): how many f32 values a scales pointer in the args holds.
 * With scales the result is dequantized before beta, bias and activation:
 *   C = act( alpha * sa[i] * sb[j] * sum_k (op(A)[i][k] - a_zero_point) * op(B)[k][j] + beta * C + bias )
 * (a_zero_point applies with or without scales; with an s32 c_type the sum is exact).
 * sa is 1 without A scales, a_scales[0] per tensor, a_scales[i] per row; sb likewise with b_scales[0] or
 * b_scales[j]. Every batch uses the same scales. Scales need s8/u8 or fp8 (e4m3/e5m2) inputs and a
 * floating-point c_type, and a zero point an s8/u8 A within its range: anything else is
 * JITMM_STATUS_INVALID_VALUE naming the field (a scale mode set with its pointer NULL in the args:
 * JITMM_STATUS_NULL_POINTER "args.a_scales" / "args.b_scales"). */
typedef enum jitmm_scale_mode {
    JITMM_SCALE_NONE = 0,
    JITMM_SCALE_PER_TENSOR = 1, /* one value */
    JITMM_SCALE_PER_ROW = 2,    /* A only: m values, one per row of C (per token) */
    JITMM_SCALE_PER_COLUMN = 3, /* B only: n values, one per column of C (per output channel) */
    /* fp8 inputs, A and B together (DeepSeek-V3 / DeepGEMM style), with kb = ceil(k / 128) K blocks:
     * A: m x kb values, a_scales[i * kb + p / 128] for row i of op(A) and K index p (per token and block);
     * B: ceil(n / 128) x kb values, b_scales[(j / 128) * kb + p / 128] for column j of op(B) (128 x 128 blocks).
     * Each K block's product is scaled before it is summed:
     *   C = act( alpha * sum_blocks sa[i][kb] * sb[j / 128][kb] * sum_{p in kb} op(A)[i][p] op(B)[p][j] + ... ) */
    JITMM_SCALE_PER_BLOCK_128 = 4
} jitmm_scale_mode;

typedef struct jitmm_engine jitmm_engine;
typedef struct jitmm_kernel jitmm_kernel;

/* A framework's own parallel-for: call fn(fn_ctx, i) once for every i in [0, n), possibly concurrently,
 * and return when all calls have returned. */
typedef void (*jitmm_task_fn)(void* fn_ctx, int64_t i);
typedef void (*jitmm_parallel_for_fn)(void* user_ctx, int64_t n, jitmm_task_fn fn, void* fn_ctx);

typedef struct jitmm_engine_config {
    size_t struct_size;       /* sizeof(jitmm_engine_config) */
    const char* device;       /* "cpu" (default), "cuda", "cuda:0", "cuda:1", ... */
    const char* cache_dir;    /* NULL: JITMM_CACHE_DIR or the default; "": no disk cache */
    const char* max_isa;      /* NULL: JITMM_MAX_ISA or the best the CPU has; else avx2, avx512, avx512_vnni,
                                 avx512_bf16, avx512_fp16, amx */
    int32_t num_threads;      /* 0: JITMM_NUM_THREADS or the number of physical cores */
    int32_t kernel_cache_capacity; /* kernels kept in memory; 0: default (4096) */
    jitmm_parallel_for_fn parallel_for; /* NULL: the engine's own thread pool */
    void* parallel_for_ctx;
} jitmm_engine_config;

typedef struct jitmm_matmul_desc {
    size_t struct_size;       /* sizeof(jitmm_matmul_desc) */
    int64_t m, n, k;
    int64_t batch_count;      /* >= 1 */
    int64_t stride_a, stride_b, stride_c; /* elements between consecutive batches */
    jitmm_dtype a_type, b_type, c_type;
    int32_t trans_a, trans_b; /* 0 or 1 */
    int64_t lda, ldb, ldc;    /* 0: tightly packed */
    float alpha, beta;
    jitmm_epilogue epilogue;
    jitmm_dtype bias_type;    /* used by the bias epilogues */
    jitmm_bias_layout bias_layout;
    /* Quantized inputs. Appended: a desc whose struct_size ends before a_scale_mode (built against an
     * older jitmm.h) reads them as the defaults: no scales, zero point 0. */
    jitmm_scale_mode a_scale_mode; /* NONE, PER_TENSOR, PER_ROW or PER_BLOCK_128; args.a_scales holds the values */
    jitmm_scale_mode b_scale_mode; /* NONE, PER_TENSOR, PER_COLUMN or PER_BLOCK_128; args.b_scales holds them */
    int32_t a_zero_point;     /* subtracted from every A element (s8/u8 A only, in its type's range); 0: none */
} jitmm_matmul_desc;

typedef struct jitmm_matmul_args {
    size_t struct_size;       /* sizeof(jitmm_matmul_args) */
    const void* a;
    const void* b;
    void* c;
    const void* bias;         /* required by the bias epilogues, else ignored */
    void* stream;             /* CUDA: the caller's CUstream (NULL: the legacy default stream); CPU: ignored */
    void* workspace;          /* optional scratch the caller owns; NULL: the engine provides it */
    size_t workspace_size;
    /* Appended: an args whose struct_size ends before a_scales (an older jitmm.h) reads them as NULL. */
    const float* a_scales;    /* required when desc.a_scale_mode is set, else ignored (CUDA: device memory) */
    const float* b_scales;    /* required when desc.b_scale_mode is set, else ignored (CUDA: device memory) */
} jitmm_matmul_args;

typedef enum jitmm_report_format { JITMM_REPORT_TEXT = 0, JITMM_REPORT_JSON = 1 } jitmm_report_format;

typedef struct jitmm_kernel_info {
    size_t struct_size;       /* sizeof(jitmm_kernel_info) */
    const char* generator;    /* e.g. "x86_f32_avx512"; valid while the kernel lives */
    const char* recipe;       /* the plan the generator followed, human-readable */
    char key_hex[33];         /* the 128-bit kernel key */
    double jit_time_us;       /* time it took to make this kernel (generate, or load from the disk cache); a
                                 memory-cache hit hands out the same kernel with its original time */
    size_t code_size;         /* bytes of machine code / cubin */
    /* Appended (an info whose struct_size ends before it, from an older jitmm.h, is filled without it). */
    size_t workspace_size;    /* scratch a run uses when args.workspace has this many bytes (256-byte aligned);
                                 with less, the engine provides its own (CUDA: stream-ordered). 0: none */
} jitmm_kernel_info;

/* Library version, JITMM_VERSION of the build that is loaded. */
JITMM_API int jitmm_version(void);
JITMM_API const char* jitmm_version_string(void);
/* Static English text for a status ("success", "null pointer", ...). */
JITMM_API const char* jitmm_status_string(jitmm_status status);
/* The detail of the last failed call on this thread ("" if none). Valid until the next jitmm call here. */
JITMM_API const char* jitmm_last_error_message(void);

/* Spelled the same in files, flags, JSON and logs: f32 f16 bf16 s8 u8 s32 f8_e4m3 f8_e5m2. */
JITMM_API const char* jitmm_dtype_name(jitmm_dtype dtype);
JITMM_API jitmm_status jitmm_dtype_from_name(const char* name, jitmm_dtype* dtype);
/* none bias relu gelu_tanh gelu_erf silu bias_relu bias_gelu_tanh bias_gelu_erf bias_silu */
JITMM_API const char* jitmm_epilogue_name(jitmm_epilogue epilogue);
JITMM_API jitmm_status jitmm_epilogue_from_name(const char* name, jitmm_epilogue* epilogue);

/* Fills defaults: struct_size set, device "cpu", everything else from the environment. */
JITMM_API jitmm_status jitmm_engine_config_init(jitmm_engine_config* config);
/* config may be NULL: defaults plus environment. */
JITMM_API jitmm_status jitmm_engine_create(const jitmm_engine_config* config, jitmm_engine** engine);
/* Kernels created from the engine stay valid after it is destroyed. NULL is accepted. */
JITMM_API jitmm_status jitmm_engine_destroy(jitmm_engine* engine);

/* Fills defaults: f32 everywhere, batch_count 1, no transposes, tight leading dims, alpha 1, beta 0,
 * no epilogue, no scales, zero point 0; m, n, k are 0 and must be set. */
JITMM_API jitmm_status jitmm_matmul_desc_init(jitmm_matmul_desc* desc);
JITMM_API jitmm_status jitmm_matmul_args_init(jitmm_matmul_args* args);

/* Validates desc, then returns a kernel from the cache or generates one. Release it with
 * jitmm_kernel_release. */
JITMM_API jitmm_status jitmm_kernel_create(jitmm_engine* engine, const jitmm_matmul_desc* desc,
                                           jitmm_kernel** kernel);
JITMM_API jitmm_status jitmm_kernel_run(const jitmm_kernel* kernel, const jitmm_matmul_args* args);
JITMM_API jitmm_status jitmm_kernel_get_info(const jitmm_kernel* kernel, jitmm_kernel_info* info);
/* NULL is accepted. */
JITMM_API jitmm_status jitmm_kernel_release(jitmm_kernel* kernel);

/* Lookup-or-create, then run: the one-call form. */
JITMM_API jitmm_status jitmm_matmul(jitmm_engine* engine, const jitmm_matmul_desc* desc,
                                    const jitmm_matmul_args* args);

/* Tuning: times the candidate kernels the planner considers for desc on args' buffers and stream (C is
 * overwritten; each candidate is compiled once, or found in the cache), and keeps the fastest in the tuning
 * store beside the kernel cache (<cache>/tune-v1/, in memory without a disk cache): every later kernel_create
 * and matmul of this problem, in this process and in later ones sharing the cache folder, uses it.
 * log (may be NULL, then log_size 0) receives the winner's name on the first line ("" when the device has
 * nothing to tune: the CPU today) and one line per candidate with its median time; *required as below. */
JITMM_API jitmm_status jitmm_tune(jitmm_engine* engine, const jitmm_matmul_desc* desc, const jitmm_matmul_args* args,
                                  char* log, size_t log_size, size_t* required);

/* What the engine's device is and can do (the probe), as text or JSON. Writes at most buffer_size bytes
 * including the terminating NUL; *required (if not NULL) receives the full size needed. */
JITMM_API jitmm_status jitmm_engine_describe(const jitmm_engine* engine, jitmm_report_format format,
                                             char* buffer, size_t buffer_size, size_t* required);
/* The probe of this machine: the CPU and every CUDA device (or why there is none). */
JITMM_API jitmm_status jitmm_probe_report(jitmm_report_format format, char* buffer, size_t buffer_size,
                                          size_t* required);

#ifdef __cplusplus
}
#endif

#endif /* JITMM_JITMM_H */
