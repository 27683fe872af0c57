#include "core/tune_store.hpp"

#include "core/key.hpp"
#include "core/warning.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace jitmm {

namespace {

// The problem's identity: the same fields the kernel key starts from.
std::string problem_hash(const Problem& p) {
    KeyWriter w;
    append_problem(w, p);
    return w.finish().hash.hex();
}

}  // namespace

std::string tune_store_path(const std::string& cache_folder, const std::string& fingerprint) {
    return cache_folder + "/tune-v1/" + hash128(fingerprint.data(), fingerprint.size()).hex() + ".tsv";
}

TuneStore::TuneStore(std::string file) : file_(std::move(file)) { load(); }

void TuneStore::load() {
    if (file_.empty()) return;
    std::ifstream in(file_);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string hash;
        Entry e;
        if (fields >> hash >> e.choice >> e.microseconds && hash.size() == 32) entries_[hash] = e;
    }
}

std::string TuneStore::lookup(const Problem& p) const {
    const std::string hash = problem_hash(p);
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(hash);
    return it == entries_.end() ? std::string() : it->second.choice;
}

size_t TuneStore::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
}

void TuneStore::record(const Problem& p, const std::string& choice, double microseconds) {
    const std::string hash = problem_hash(p);
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[hash] = Entry{choice, microseconds};
    if (!file_.empty()) save_locked();
}

void TuneStore::save_locked() const {
    const std::string dir = file_.substr(0, file_.rfind('/'));
    ::mkdir(dir.c_str(), 0700);  // the cache folder above it was made and checked by the disk cache
    const std::string temp = file_ + ".tmp." + std::to_string(::getpid());
    bool ok = false;
    if (FILE* f = std::fopen(temp.c_str(), "w")) {
        ok = true;
        for (const auto& [hash, e] : entries_)
            ok = ok && std::fprintf(f, "%s %s %.3f\n", hash.c_str(), e.choice.c_str(), e.microseconds) > 0;
        ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0 && ok;
        ok = std::fclose(f) == 0 && ok;
    }
    if (ok && std::rename(temp.c_str(), file_.c_str()) == 0) return;
    std::remove(temp.c_str());
    warn_once("tune-store", "cannot write the tuning store " + file_ + "; tuning results stay in memory");
}

}  // namespace jitmm
