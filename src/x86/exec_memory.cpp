#include "x86/exec_memory.hpp"

#include "core/error.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace jitmm::x86 {

namespace {

size_t page_round(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (n + page - 1) / page * page;
}

// JITMM_EXEC_MEMORY=memfd forces the double-mapping path (tests use it; it is also an escape hatch).
bool memfd_forced() {
    const char* v = std::getenv("JITMM_EXEC_MEMORY");
    return v != nullptr && std::strcmp(v, "memfd") == 0;
}

}  // namespace

ExecMemory::ExecMemory(const uint8_t* code, size_t size) : size_(size), mapped_(page_round(size == 0 ? 1 : size)) {
    if (!memfd_forced() && try_mprotect(code, size)) return;
    if (try_memfd(code, size)) return;
    fail(JITMM_STATUS_JIT_FAILED,
         "cannot obtain executable memory: mprotect(PROT_READ|PROT_EXEC) and the memfd double mapping both failed (" +
             std::string(std::strerror(errno)) + ")");
}

bool ExecMemory::try_mprotect(const uint8_t* code, size_t size) {
    void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    std::memcpy(p, code, size);
    if (mprotect(p, mapped_, PROT_READ | PROT_EXEC) != 0) {
        munmap(p, mapped_);
        return false;
    }
    exec_ = static_cast<uint8_t*>(p);
    strategy_ = "mprotect";
    return true;
}

bool ExecMemory::try_memfd(const uint8_t* code, size_t size) {
    int fd = memfd_create("jitmm-code", MFD_CLOEXEC);
    if (fd < 0) return false;
    bool ok = ftruncate(fd, static_cast<off_t>(mapped_)) == 0;
    void* writable = ok ? mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    void* executable = MAP_FAILED;
    if (writable != MAP_FAILED) {
        std::memcpy(writable, code, size);
        executable = mmap(nullptr, mapped_, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
        munmap(writable, mapped_);  // the writable view never outlives the copy
    }
    close(fd);
    if (executable == MAP_FAILED) return false;
    exec_ = static_cast<uint8_t*>(executable);
    strategy_ = "memfd";
    return true;
}

ExecMemory::~ExecMemory() {
    if (exec_) munmap(exec_, mapped_);
}

}  // namespace jitmm::x86
