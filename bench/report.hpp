// Output: the text table (rows stream out as shapes finish, notes at the end) or one JSON array.
#pragma once

#include "measure.hpp"
#include "options.hpp"
#include "peak.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace jitmm::bench {

class TextTable {
public:
    TextTable(const Options& options, bool show_device);
    // Lines for peers that are not built (their columns read n/a), then the column header.
    void header();
    void row(const ShapeResult& r);
    // What the rows could not say: per-peer n/a reasons and remarks grouped over shapes, which peer path won,
    // the peaks behind %peak.
    // peak_other_cpus: other processes' load while the peaks were measured.
    void notes(const std::vector<std::pair<std::string, Peak>>& peaks, double peak_other_cpus);

private:
    struct Column {
        std::string name;
        size_t width;
        bool left;
    };
    void print(const std::vector<std::string>& cells) const;
    void note(const std::string& peer, const std::string& text, const std::string& shape);

    const Options& options_;
    std::vector<Column> columns_;
    // (peer, text) -> shapes, in first-seen order.
    std::vector<std::pair<std::pair<std::string, std::string>, std::vector<std::string>>> notes_;
    // Other processes' load per shape (load.hpp), for the last note.
    std::vector<std::pair<std::string, double>> loads_;
};

// One JSON object (no trailing newline).
std::string json_object(const ShapeResult& r);

// --peak: a table or a JSON array of (kind, threads, GFLOP/s, per core).
void print_peaks(const std::vector<std::pair<std::string, Peak>>& peaks, bool json);

}  // namespace jitmm::bench
