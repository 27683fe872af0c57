// The exported C functions: argument checks, translation to the C++ core, and guarded() around every body
// so that nothing throws across the boundary.
#include "api/error_state.hpp"
#include "api/validate.hpp"
#include "core/dtype.hpp"
#include "core/engine.hpp"
#include "cuda/backend_cuda.hpp"
#include "hw/cpu.hpp"
#include "hw/gpu.hpp"
#include "x86/backend_x86.hpp"

#include <jitmm/jitmm.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

struct jitmm_engine {
    std::unique_ptr<jitmm::Engine> engine;
};

struct jitmm_kernel {
    jitmm::KernelPtr kernel;
    jitmm::Problem problem;
};

using jitmm::fail;
using jitmm::api::guarded;

namespace {

#define JITMM_STRINGIFY2(x) #x
#define JITMM_STRINGIFY(x) JITMM_STRINGIFY2(x)

void require(const void* p, const char* what) {
    if (p == nullptr) fail(JITMM_STATUS_NULL_POINTER, std::string(what) + " is NULL");
}

// Copies text into a caller's buffer (truncating, always NUL-terminated) and reports the size it needs.
void copy_out(const std::string& text, char* buffer, size_t buffer_size, size_t* required) {
    if (required) *required = text.size() + 1;
    if (buffer == nullptr || buffer_size == 0) {
        if (buffer_size != 0 || required == nullptr)
            fail(JITMM_STATUS_NULL_POINTER, "buffer is NULL (pass buffer_size 0 and required to query the size)");
        return;
    }
    const size_t n = std::min(buffer_size - 1, text.size());
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
}

std::unique_ptr<jitmm::Backend> make_backend(const jitmm::EngineOptions& options) {
    if (options.cuda_ordinal >= 0) return jitmm::cuda::make_cuda_backend(options);
    return jitmm::x86::make_x86_backend(options);
}

}  // namespace

extern "C" {

JITMM_API int jitmm_version(void) { return JITMM_VERSION; }

JITMM_API const char* jitmm_version_string(void) {
    return JITMM_STRINGIFY(JITMM_VERSION_MAJOR) "." JITMM_STRINGIFY(JITMM_VERSION_MINOR) "." JITMM_STRINGIFY(
        JITMM_VERSION_PATCH);
}

JITMM_API const char* jitmm_status_string(jitmm_status status) {
    switch (status) {
        case JITMM_STATUS_SUCCESS: return "success";
        case JITMM_STATUS_NULL_POINTER: return "null pointer";
        case JITMM_STATUS_INVALID_STRUCT_SIZE: return "invalid struct size";
        case JITMM_STATUS_INVALID_DIMENSION: return "invalid dimension";
        case JITMM_STATUS_INVALID_LEADING_DIM: return "invalid leading dimension";
        case JITMM_STATUS_INVALID_STRIDE: return "invalid batch stride";
        case JITMM_STATUS_INVALID_VALUE: return "invalid value";
        case JITMM_STATUS_OVERFLOW: return "size overflow";
        case JITMM_STATUS_UNSUPPORTED: return "unsupported";
        case JITMM_STATUS_NO_DEVICE: return "no device";
        case JITMM_STATUS_OUT_OF_MEMORY: return "out of memory";
        case JITMM_STATUS_JIT_FAILED: return "code generation failed";
        case JITMM_STATUS_DEVICE_ERROR: return "device error";
        case JITMM_STATUS_INTERNAL_ERROR: return "internal error";
    }
    return "unknown status";
}

JITMM_API const char* jitmm_last_error_message(void) { return jitmm::api::last_error_message(); }

JITMM_API const char* jitmm_dtype_name(jitmm_dtype dtype) {
    const char* name = jitmm::dtype_name_or_null(dtype);
    return name ? name : "invalid";
}

JITMM_API jitmm_status jitmm_dtype_from_name(const char* name, jitmm_dtype* dtype) {
    return guarded([&] {
        require(name, "name");
        require(dtype, "dtype");
        for (int i = 0; i < JITMM_DTYPE_COUNT; ++i)
            if (std::strcmp(name, jitmm::dtype_name_or_null(i)) == 0) {
                *dtype = static_cast<jitmm_dtype>(i);
                return;
            }
        fail(JITMM_STATUS_INVALID_VALUE, std::string("unknown dtype \"") + name +
                                             "\" (f32 f16 bf16 s8 u8 s32 f8_e4m3 f8_e5m2)");
    });
}

JITMM_API const char* jitmm_epilogue_name(jitmm_epilogue epilogue) {
    const char* name = jitmm::epilogue_name_or_null(epilogue);
    return name ? name : "invalid";
}

JITMM_API jitmm_status jitmm_epilogue_from_name(const char* name, jitmm_epilogue* epilogue) {
    return guarded([&] {
        require(name, "name");
        require(epilogue, "epilogue");
        for (int i = 0; i < JITMM_EPILOGUE_COUNT; ++i)
            if (std::strcmp(name, jitmm::epilogue_name_or_null(i)) == 0) {
                *epilogue = static_cast<jitmm_epilogue>(i);
                return;
            }
        fail(JITMM_STATUS_INVALID_VALUE, std::string("unknown epilogue \"") + name +
                                             "\" (none bias relu gelu_tanh gelu_erf silu bias_relu bias_gelu_tanh "
                                             "bias_gelu_erf bias_silu)");
    });
}

JITMM_API jitmm_status jitmm_engine_config_init(jitmm_engine_config* config) {
    return guarded([&] {
        require(config, "config");
        *config = jitmm_engine_config{};
        config->struct_size = sizeof(jitmm_engine_config);
        config->device = "cpu";
    });
}

JITMM_API jitmm_status jitmm_engine_create(const jitmm_engine_config* config, jitmm_engine** engine) {
    return guarded([&] {
        require(engine, "engine");
        *engine = nullptr;
        jitmm::api::check_config(config);
        const jitmm::EngineOptions options = jitmm::resolve_engine_options(config);
        auto handle = std::make_unique<jitmm_engine>();
        handle->engine = std::make_unique<jitmm::Engine>(options, make_backend(options));
        *engine = handle.release();
    });
}

JITMM_API jitmm_status jitmm_engine_destroy(jitmm_engine* engine) {
    return guarded([&] { delete engine; });
}

JITMM_API jitmm_status jitmm_matmul_desc_init(jitmm_matmul_desc* desc) {
    return guarded([&] {
        require(desc, "desc");
        *desc = jitmm_matmul_desc{};
        desc->struct_size = sizeof(jitmm_matmul_desc);
        desc->batch_count = 1;
        desc->a_type = desc->b_type = desc->c_type = desc->bias_type = JITMM_DTYPE_F32;
        desc->alpha = 1.0f;
        desc->beta = 0.0f;
        desc->epilogue = JITMM_EPILOGUE_NONE;
        desc->bias_layout = JITMM_BIAS_PER_COLUMN;
        desc->a_scale_mode = desc->b_scale_mode = JITMM_SCALE_NONE;
        desc->a_zero_point = 0;
    });
}

JITMM_API jitmm_status jitmm_matmul_args_init(jitmm_matmul_args* args) {
    return guarded([&] {
        require(args, "args");
        *args = jitmm_matmul_args{};
        args->struct_size = sizeof(jitmm_matmul_args);
    });
}

JITMM_API jitmm_status jitmm_kernel_create(jitmm_engine* engine, const jitmm_matmul_desc* desc,
                                           jitmm_kernel** kernel) {
    return guarded([&] {
        require(kernel, "kernel");
        *kernel = nullptr;
        require(engine, "engine");
        const jitmm::Problem p = jitmm::api::problem_from_desc(desc);
        auto handle = std::make_unique<jitmm_kernel>();
        handle->kernel = engine->engine->get_kernel(p, /*log_hits=*/true);
        handle->problem = p;
        *kernel = handle.release();
    });
}

JITMM_API jitmm_status jitmm_kernel_run(const jitmm_kernel* kernel, const jitmm_matmul_args* args) {
    return guarded([&] {
        require(kernel, "kernel");
        kernel->kernel->run(jitmm::api::check_args(kernel->problem, args));
    });
}

JITMM_API jitmm_status jitmm_kernel_get_info(const jitmm_kernel* kernel, jitmm_kernel_info* info) {
    return guarded([&] {
        require(kernel, "kernel");
        require(info, "info");
        constexpr size_t kBeforeWorkspace = offsetof(jitmm_kernel_info, workspace_size);  // an older jitmm.h
        if (info->struct_size != sizeof(jitmm_kernel_info) && info->struct_size != kBeforeWorkspace)
            fail(JITMM_STATUS_INVALID_STRUCT_SIZE, "jitmm_kernel_info.struct_size is " +
                                                       std::to_string(info->struct_size) + ", expected " +
                                                       std::to_string(sizeof(jitmm_kernel_info)));
        const jitmm::KernelMeta& meta = kernel->kernel->meta();
        info->generator = meta.generator.c_str();
        info->recipe = meta.recipe.c_str();
        const std::string hex = meta.key.hash.hex();
        std::memcpy(info->key_hex, hex.c_str(), sizeof info->key_hex);
        info->jit_time_us = meta.jit_time_us;
        info->code_size = meta.code_size;
        if (info->struct_size > kBeforeWorkspace) info->workspace_size = kernel->kernel->workspace_bytes();
    });
}

JITMM_API jitmm_status jitmm_kernel_release(jitmm_kernel* kernel) {
    return guarded([&] { delete kernel; });
}

JITMM_API jitmm_status jitmm_matmul(jitmm_engine* engine, const jitmm_matmul_desc* desc,
                                    const jitmm_matmul_args* args) {
    return guarded([&] {
        require(engine, "engine");
        const jitmm::Problem p = jitmm::api::problem_from_desc(desc);
        const jitmm::RunArgs run = jitmm::api::check_args(p, args);
        const jitmm::KernelPtr kernel = engine->engine->get_kernel(p, /*log_hits=*/false);
        kernel->run(run);
    });
}

JITMM_API jitmm_status jitmm_tune(jitmm_engine* engine, const jitmm_matmul_desc* desc, const jitmm_matmul_args* args,
                                  char* log, size_t log_size, size_t* required) {
    return guarded([&] {
        require(engine, "engine");
        const jitmm::Problem p = jitmm::api::problem_from_desc(desc);
        const jitmm::RunArgs run = jitmm::api::check_args(p, args);
        std::string lines;
        const std::string winner = engine->engine->tune(p, run, &lines);
        const std::string text = winner + "\n" + lines;
        if (log != nullptr || log_size != 0 || required != nullptr) copy_out(text, log, log_size, required);
    });
}

JITMM_API jitmm_status jitmm_engine_describe(const jitmm_engine* engine, jitmm_report_format format, char* buffer,
                                             size_t buffer_size, size_t* required) {
    return guarded([&] {
        require(engine, "engine");
        if (format != JITMM_REPORT_TEXT && format != JITMM_REPORT_JSON)
            fail(JITMM_STATUS_INVALID_VALUE, "format must be JITMM_REPORT_TEXT or JITMM_REPORT_JSON");
        copy_out(engine->engine->backend().describe(format), buffer, buffer_size, required);
    });
}

JITMM_API jitmm_status jitmm_probe_report(jitmm_report_format format, char* buffer, size_t buffer_size,
                                          size_t* required) {
    return guarded([&] {
        std::string text;
        if (format == JITMM_REPORT_JSON) {
            text = "{\"cpu\": " + jitmm::hw::cpu_report_json(jitmm::hw::cpu_info()) +
                   ", \"cuda\": " + jitmm::hw::gpu_report_json(jitmm::hw::gpu_probe()) + "}";
        } else if (format == JITMM_REPORT_TEXT) {
            text = jitmm::hw::cpu_report_text(jitmm::hw::cpu_info()) + "\n" +
                   jitmm::hw::gpu_report_text(jitmm::hw::gpu_probe());
        } else {
            fail(JITMM_STATUS_INVALID_VALUE, "format must be JITMM_REPORT_TEXT or JITMM_REPORT_JSON");
        }
        copy_out(text, buffer, buffer_size, required);
    });
}

}  // extern "C"
