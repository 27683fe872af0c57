#include "core/dump.hpp"

#include "core/log.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>

namespace jitmm {

namespace {
const char* dump_dir() {
    const char* dir = std::getenv("JITMM_DUMP_DIR");
    return dir && *dir ? dir : nullptr;
}
}  // namespace

bool dump_enabled() { return dump_dir() != nullptr; }

void dump_artifact(const KernelKey& key, const std::string& suffix, const void* data, size_t size) {
    const char* dir = dump_dir();
    if (!dir) return;
    mkdir(dir, 0700);  // may already exist
    const std::string path = std::string(dir) + "/" + key.hash.hex() + "." + suffix;
    FILE* f = std::fopen(path.c_str(), "wb");
    const bool ok = f && std::fwrite(data, 1, size, f) == size;
    if (f) std::fclose(f);
    if (!ok) verbose_log("dump: cannot write " + path + ": " + std::strerror(errno));
    else verbose_log("dump: wrote " + path);
}

}  // namespace jitmm
