/* An installed-jitmm consumer, in C99: finds the package (CMake or pkg-config), creates a CPU engine,
 * runs a small f32 matmul and compares it with a naive loop. Prints OK or FAIL; exits non-zero on a
 * mismatch or on any call that does not return success. */
#include <jitmm/jitmm.h>

#include <math.h>
#include <stdio.h>

#define M 5
#define N 7
#define K 3

static int check(jitmm_status status, const char* what) {
    if (status == JITMM_STATUS_SUCCESS) return 1;
    fprintf(stderr, "FAIL: %s: %s: %s\n", what, jitmm_status_string(status), jitmm_last_error_message());
    return 0;
}

int main(void) {
    float a[M * K], b[K * N], c[M * N];
    double ref[M * N];
    int i, j, p, bad = 0;
    jitmm_engine* engine = NULL;
    jitmm_kernel* kernel = NULL;
    jitmm_matmul_desc desc;
    jitmm_matmul_args args;
    double max_err = 0.0;

    if (jitmm_version() != JITMM_VERSION) {
        fprintf(stderr, "FAIL: header version %d, library version %d\n", JITMM_VERSION, jitmm_version());
        return 1;
    }
    /* Nonzero, distinct, of both signs; C poisoned with NaN (beta == 0 never reads C). */
    for (i = 0; i < M * K; ++i) a[i] = (float)((i * 7 % 11) - 5) * 0.25f + 0.125f;
    for (i = 0; i < K * N; ++i) b[i] = (float)((i * 5 % 13) - 6) * 0.5f + 0.0625f;
    for (i = 0; i < M * N; ++i) c[i] = NAN;
    for (i = 0; i < M; ++i)
        for (j = 0; j < N; ++j) {
            double acc = 0.0;
            for (p = 0; p < K; ++p) acc += (double)a[i * K + p] * (double)b[p * N + j];
            ref[i * N + j] = acc;
        }

    if (!check(jitmm_engine_create(NULL, &engine), "jitmm_engine_create")) return 1;
    if (!check(jitmm_matmul_desc_init(&desc), "jitmm_matmul_desc_init")) goto fail;
    desc.m = M;
    desc.n = N;
    desc.k = K;
    if (!check(jitmm_kernel_create(engine, &desc, &kernel), "jitmm_kernel_create")) goto fail;
    if (!check(jitmm_matmul_args_init(&args), "jitmm_matmul_args_init")) goto fail;
    args.a = a;
    args.b = b;
    args.c = c;
    if (!check(jitmm_kernel_run(kernel, &args), "jitmm_kernel_run")) goto fail;

    for (i = 0; i < M * N; ++i) {
        double err = fabs((double)c[i] - ref[i]);
        if (!(err <= 1e-5 * (1.0 + fabs(ref[i])))) { /* NaN fails too */
            if (bad++ < 5) fprintf(stderr, "  c[%d][%d] = %g, expected %g\n", i / N, i % N, c[i], ref[i]);
        }
        if (err > max_err) max_err = err;
    }
    if (!check(jitmm_kernel_release(kernel), "jitmm_kernel_release")) goto fail;
    kernel = NULL;
    if (!check(jitmm_engine_destroy(engine), "jitmm_engine_destroy")) return 1;
    if (bad) {
        fprintf(stderr, "FAIL: %d of %d elements differ from the reference\n", bad, M * N);
        return 1;
    }
    printf("OK: jitmm %s, %dx%dx%d f32 matmul matches the reference (max abs error %g)\n",
           jitmm_version_string(), M, N, K, max_err);
    return 0;

fail:
    jitmm_kernel_release(kernel);
    jitmm_engine_destroy(engine);
    return 1;
}
