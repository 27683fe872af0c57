// jitmm-info: what jitmm sees on this machine (the CPU tier and caches, the CUDA devices), through the
// public C API only, so it shows exactly what an application linked against libjitmm gets.
#include <jitmm/jitmm.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

void print_usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: jitmm-info [--json]\n"
                 "Prints what jitmm detects on this machine: the x86 ISA tier, caches and cores, and every\n"
                 "CUDA device (or why there is none).\n"
                 "  --json     machine-readable JSON instead of text\n"
                 "  -h, --help this message\n");
}

// Asks for the size, then fills a buffer of that size. Loops because the report may grow between the
// calls (it never should, but a short buffer must not print a truncated report).
bool probe_report(jitmm_report_format format, std::string* out) {
    size_t required = 0;
    jitmm_status status = jitmm_probe_report(format, nullptr, 0, &required);
    for (int attempt = 0; attempt < 3; ++attempt) {
        if (required == 0) break;
        std::vector<char> buffer(required);
        size_t again = 0;
        status = jitmm_probe_report(format, buffer.data(), buffer.size(), &again);
        if (status == JITMM_STATUS_SUCCESS && again <= buffer.size()) {
            out->assign(buffer.data());
            return true;
        }
        required = again > required ? again : 0;
    }
    std::fprintf(stderr, "jitmm-info: jitmm_probe_report failed: %s: %s\n", jitmm_status_string(status),
                 jitmm_last_error_message());
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    jitmm_report_format format = JITMM_REPORT_TEXT;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--json") == 0) {
            format = JITMM_REPORT_JSON;
        } else if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
            print_usage(stdout);
            return 0;
        } else {
            std::fprintf(stderr, "jitmm-info: unknown argument '%s'\n", argv[i]);
            print_usage(stderr);
            return 2;
        }
    }

    std::string report;
    if (!probe_report(format, &report)) return 1;
    if (format == JITMM_REPORT_TEXT) std::printf("jitmm %s\n\n", jitmm_version_string());
    std::fputs(report.c_str(), stdout);
    if (report.empty() || report.back() != '\n') std::fputc('\n', stdout);
    return 0;
}
