#include "report.hpp"

#include "problem.hpp"
#include "reference.hpp"

#include <jitmm/jitmm.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace jitmm::bench {
namespace {

std::string format(const char* fmt, double value) {
    if (std::isnan(value)) return "-";
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), fmt, value);
    return buffer;
}

std::string dtype_str(jitmm_dtype t) {
    const char* name = jitmm_dtype_name(t);
    return name ? name : "?";
}

std::string epilogue_str(jitmm_epilogue e) {
    const char* name = jitmm_epilogue_name(e);
    return name ? name : "?";
}

std::string float_str(float f) {
    char buffer[32];
    const auto r = std::to_chars(buffer, buffer + sizeof(buffer), f);
    return std::string(buffer, r.ptr);
}

// "NT f32 bias_gelu_tanh", "NN bf16*bf16->f32 a=0.5 b=1": the desc in a few characters.
std::string op_summary(const jitmm_matmul_desc& d) {
    std::string s;
    s += d.trans_a ? 'T' : 'N';
    s += d.trans_b ? 'T' : 'N';
    s += ' ';
    if (d.a_type == d.b_type && d.b_type == d.c_type)
        s += dtype_str(d.a_type);
    else
        s += dtype_str(d.a_type) + "*" + dtype_str(d.b_type) + "->" + dtype_str(d.c_type);
    if (d.epilogue != JITMM_EPILOGUE_NONE) {
        s += ' ' + epilogue_str(d.epilogue);
        if (epilogue_has_bias(d.epilogue) && d.bias_layout == JITMM_BIAS_PER_ROW) s += "(row)";
    }
    if (d.a_scale_mode != JITMM_SCALE_NONE || d.b_scale_mode != JITMM_SCALE_NONE) {
        s += std::string(" scale=") + scale_mode_str(d.a_scale_mode) + "/" + scale_mode_str(d.b_scale_mode);
    }
    if (d.alpha != 1.0f) s += " a=" + float_str(d.alpha);
    if (d.beta != 0.0f) s += " b=" + float_str(d.beta);
    if (d.lda || d.ldb || d.ldc) {
        s += " ld=" + std::to_string(d.lda) + "," + std::to_string(d.ldb) + "," + std::to_string(d.ldc);
    }
    return s;
}

std::string shape_str(const jitmm_matmul_desc& d) {
    return std::to_string(d.m) + "x" + std::to_string(d.n) + "x" + std::to_string(d.k);
}

const char* peer_title(const std::string& name) {
    const PeerInfo* info = find_peer(name);
    return info ? info->title : name.c_str();
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (const char ch : s) {
        const unsigned char c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buffer[8];
                    std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
                    out += buffer;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    return out + "\"";
}

std::string json_number(double v, const char* fmt = "%.6g") {
    if (!std::isfinite(v)) return "null";
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), fmt, v);
    return buffer;
}

}  // namespace

TextTable::TextTable(const Options& options, bool show_device) : options_(options) {
    // Fixed widths so rows can stream out as shapes finish; a longer cell just pushes the row right.
    columns_ = {{"shape", 15, true}, {"batch", 5, false}, {"op", 24, true}};
    if (show_device) columns_.push_back({"device", 7, true});
    columns_.insert(columns_.end(), {{"generator", 18, true},
                                     {"jit_us", 9, false},
                                     {"hit_ns", 7, false},
                                     {"median_us", 10, false},
                                     {"GFLOP/s", 8, false},
                                     {"%peak", 6, false},
                                     {"GB/s", 7, false}});
    if (options.check) columns_.insert(columns_.end(), {{"max_err", 9, false}, {"rel_err", 13, false}});
    for (const std::string& p : options.peers) {
        const std::string gflops = p + "_GFLOP/s", ratio = "ratio_vs_" + p;
        columns_.push_back({gflops, gflops.size(), false});
        columns_.push_back({ratio, ratio.size(), false});
    }
}

void TextTable::header() {
    for (const std::string& p : options_.peers) {
        const PeerInfo* info = find_peer(p);
        if (info && info->create == nullptr) std::printf("%s: %s\n", info->title, info->absent_reason);
    }
    std::vector<std::string> cells;
    for (const Column& c : columns_) cells.push_back(c.name);
    print(cells);
}

void TextTable::row(const ShapeResult& r) {
    const jitmm_matmul_desc& d = r.desc;
    const std::string shape = shape_str(d);
    // How the notes name this row: the shape, plus the transposes when there are any (NN and NT rows of one
    // shape are different problems).
    const std::string label =
        d.trans_a || d.trans_b ? shape + " " + (d.trans_a ? "T" : "N") + (d.trans_b ? "T" : "N") : shape;
    std::vector<std::string> cells = {shape, std::to_string(d.batch_count), op_summary(d)};
    if (columns_[3].name == "device") cells.push_back(r.device);
    std::vector<std::string> below;  // lines under the row: errors and failed peer checks
    if (r.error.empty() || !std::isnan(r.jit_us)) {
        cells.push_back(r.generator.empty() ? "-" : r.generator);
        cells.push_back(format("%.1f", r.jit_us));
        cells.push_back(format("%.0f", r.hit_ns));
        cells.push_back(format("%.2f", r.median_us));
        cells.push_back(format("%.1f", r.gflops));
        cells.push_back(format("%.0f%%", r.peak_pct));
        cells.push_back(r.median_us > 0 ? format("%.0f", min_bytes(d) / r.median_us * 1e-3) : "-");
        if (options_.check) {
            // NaN here means the output held NaN/Inf: say so rather than print "-".
            auto err_cell = [](double v) { return std::isnan(v) ? std::string("NaN") : format("%.2e", v); };
            cells.push_back(r.checked ? err_cell(r.check.max_abs_err) : "-");
            cells.push_back(r.checked ? err_cell(r.check.rel_err) + (r.check.ok ? "" : " FAIL") : "-");
        }
        for (const PeerResult& p : r.peers) {
            const char* title = peer_title(p.name);
            if (const PeerPathResult* best = p.best_path()) {
                cells.push_back(format("%.1f", best->gflops));
                cells.push_back(format("%.2f", p.ratio));
            } else if (p.paths.empty()) {
                cells.push_back("n/a");
                cells.push_back("n/a");
            } else {
                cells.push_back("FAIL");
                cells.push_back("-");
            }
            if (!p.note.empty()) {
                // A peer that is not built is said once above the header.
                const PeerInfo* info = find_peer(p.name);
                if (!(info && info->create == nullptr)) note(title, p.note, label);
            }
            for (const PeerPathResult& pp : p.paths) {
                const std::string who = std::string(title) + " " + pp.path;
                if (!pp.error.empty()) below.push_back(who + ": error: " + pp.error);
                if (pp.checked && !pp.check.ok) {
                    below.push_back(who + ": check FAILED: rel_err " + format("%.2e", pp.check.rel_err) + " > bound " +
                                    format("%.2e", pp.check.bound));
                }
                if (!pp.remark.empty() && p.best_path() == &pp) note(title, pp.remark, label);
            }
            if (p.paths.size() > 1 && p.best_path()) note(title, "fastest path: " + p.best_path()->path, label);
            if (p.paths.size() > 1) {
                // Every path's own time and ratio under the row; "*" marks the one in the columns.
                std::string line = std::string(title) + " paths:";
                for (const PeerPathResult& pp : p.paths) {
                    line += "  " + pp.path + (p.best_path() == &pp ? "*" : "") + " ";
                    if (!pp.error.empty()) {
                        line += "error";
                        continue;
                    }
                    line += format("%.2f us", pp.median_us) + " " + format("%.1f GFLOP/s", pp.gflops);
                    if (r.median_us > 0) line += " " + format("ratio %.2f", pp.median_us / r.median_us);
                    if (pp.checked && !pp.check.ok) line += " (check FAILED)";
                }
                below.push_back(line);
            }
        }
    }
    print(cells);
    loads_.emplace_back(label, r.other_cpus);
    if (!r.error.empty()) std::printf("    error: %s\n", r.error.c_str());
    if (!r.tuned.empty() || !r.tune_log.empty()) {
        std::printf("    tuned: %s\n", r.tuned.empty() ? "(nothing to tune)" : r.tuned.c_str());
        size_t at = 0;
        while (at < r.tune_log.size()) {
            const size_t end = r.tune_log.find('\n', at);
            std::printf("      %s\n", r.tune_log.substr(at, end - at).c_str());
            if (end == std::string::npos) break;
            at = end + 1;
        }
    }
    for (const std::string& line : below) std::printf("    %s\n", line.c_str());
    std::fflush(stdout);
}

void TextTable::note(const std::string& peer, const std::string& text, const std::string& shape) {
    const auto key = std::make_pair(peer, text);
    for (auto& entry : notes_) {
        if (entry.first == key) {
            entry.second.push_back(shape);
            return;
        }
    }
    notes_.push_back({key, {shape}});
}

void TextTable::notes(const std::vector<std::pair<std::string, Peak>>& peaks, double peak_other_cpus) {
    // One peer's notes together, peers in column order.
    auto rank = [](const std::string& title) {
        const std::vector<PeerInfo>& peers = peer_registry();
        for (size_t i = 0; i < peers.size(); ++i) {
            if (title == peers[i].title) return i;
        }
        return peers.size();
    };
    std::stable_sort(notes_.begin(), notes_.end(),
                     [&](const auto& a, const auto& b) { return rank(a.first.first) < rank(b.first.first); });
    for (const auto& entry : notes_) {
        const std::vector<std::string>& shapes = entry.second;
        std::string list;
        constexpr size_t kShown = 6;
        for (size_t i = 0; i < shapes.size() && i < kShown; ++i) list += (i ? ", " : "") + shapes[i];
        if (shapes.size() > kShown) list += ", ...";
        std::printf("%s: %s (%zu shape%s: %s)\n", entry.first.first.c_str(), entry.first.second.c_str(), shapes.size(),
                    shapes.size() == 1 ? "" : "s", list.c_str());
    }
    for (const auto& p : peaks) {
        std::printf("%%peak: of the measured FMA peak %s x %d thread%s = %.1f GFLOP/s (%.1f per core)\n",
                    p.first.c_str(), p.second.threads, p.second.threads == 1 ? "" : "s", p.second.total_gflops,
                    p.second.per_core_gflops);
    }
    // Other processes' CPU use: a result measured while another process held a CPU is not the chip's.
    constexpr double kBusy = 0.1;  // CPUs
    double sum = 0.0;
    int count = 0;
    std::string busy;
    for (const auto& [shape, cpus] : loads_) {
        if (std::isnan(cpus)) continue;
        sum += cpus;
        ++count;
        if (cpus > kBusy) busy += (busy.empty() ? "" : ", ") + shape + format(" (%.2f)", cpus);
    }
    if (count > 0 || !std::isnan(peak_other_cpus)) {
        std::printf("other load: %s CPUs busy with other processes on average while shapes ran, %s while the peak "
                    "was measured%s%s\n",
                    count ? format("%.2f", sum / count).c_str() : "-", format("%.2f", peak_other_cpus).c_str(),
                    busy.empty() ? "" : "; above 0.1 during: ", busy.c_str());
    }
}

void TextTable::print(const std::vector<std::string>& cells) const {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
        const Column c = i < columns_.size() ? columns_[i] : Column{"", 9, false};
        const std::string& cell = cells[i];
        const std::string pad = cell.size() < c.width ? std::string(c.width - cell.size(), ' ') : "";
        line += (i ? "  " : "") + (c.left ? cell + pad : pad + cell);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
}

std::string json_object(const ShapeResult& r) {
    const jitmm_matmul_desc& d = r.desc;
    std::vector<std::pair<std::string, std::string>> f = {
        {"m", std::to_string(d.m)},
        {"n", std::to_string(d.n)},
        {"k", std::to_string(d.k)},
        {"batch_count", std::to_string(d.batch_count)},
        {"stride_a", std::to_string(d.stride_a)},
        {"stride_b", std::to_string(d.stride_b)},
        {"stride_c", std::to_string(d.stride_c)},
        {"a_type", json_string(dtype_str(d.a_type))},
        {"b_type", json_string(dtype_str(d.b_type))},
        {"c_type", json_string(dtype_str(d.c_type))},
        {"trans_a", std::to_string(d.trans_a)},
        {"trans_b", std::to_string(d.trans_b)},
        {"lda", std::to_string(d.lda)},
        {"ldb", std::to_string(d.ldb)},
        {"ldc", std::to_string(d.ldc)},
        {"alpha", float_str(d.alpha)},
        {"beta", float_str(d.beta)},
        {"epilogue", json_string(epilogue_str(d.epilogue))},
        {"bias_type", json_string(dtype_str(d.bias_type))},
        {"bias_layout", json_string(d.bias_layout == JITMM_BIAS_PER_ROW ? "row" : "column")},
        {"a_scale", json_string(scale_mode_str(d.a_scale_mode))},
        {"b_scale", json_string(scale_mode_str(d.b_scale_mode))},
        {"device", json_string(r.device)},
    };
    if (!std::isnan(r.jit_us)) {
        f.emplace_back("generator", json_string(r.generator));
        f.emplace_back("recipe", json_string(r.recipe));
        f.emplace_back("jit_us", json_number(r.jit_us));
        f.emplace_back("gen_us", json_number(r.gen_us));
        f.emplace_back("hit_ns", json_number(r.hit_ns));
    }
    if (r.runs > 0) {
        f.emplace_back("median_us", json_number(r.median_us));
        f.emplace_back("gflops", json_number(r.gflops));
        f.emplace_back("gbps", json_number(r.median_us > 0 ? min_bytes(r.desc) / r.median_us * 1e-3 : NAN));
        f.emplace_back("runs", std::to_string(r.runs));
        f.emplace_back("copies", std::to_string(r.copies));
    }
    if (r.checked) {
        f.emplace_back("max_abs_err", json_number(r.check.max_abs_err, "%.3e"));
        f.emplace_back("rel_err", json_number(r.check.rel_err, "%.3e"));
        f.emplace_back("err_bound", json_number(r.check.bound, "%.3e"));
        f.emplace_back("check_ok", r.check.ok ? "true" : "false");
    }
    if (!r.peak_kind.empty()) {
        f.emplace_back("peak_kind", json_string(r.peak_kind));
        f.emplace_back("peak_gflops", json_number(r.peak_gflops));
        f.emplace_back("peak_pct", json_number(r.peak_pct, "%.4g"));
    }
    for (const PeerResult& p : r.peers) {
        f.emplace_back("ratio_vs_" + p.name, json_number(p.ratio, "%.4g"));
        if (const PeerPathResult* best = p.best_path()) {
            f.emplace_back("gflops_" + p.name, json_number(best->gflops));
            f.emplace_back("median_us_" + p.name, json_number(best->median_us));
            f.emplace_back("path_" + p.name, json_string(best->path));  // the fastest path that passed
            if (!best->remark.empty()) f.emplace_back("remark_" + p.name, json_string(best->remark));
        }
        if (!p.note.empty()) f.emplace_back("note_" + p.name, json_string(p.note));
        if (!p.paths.empty()) {
            std::string list = "[";
            for (size_t i = 0; i < p.paths.size(); ++i) {
                const PeerPathResult& pp = p.paths[i];
                list += std::string(i ? ", " : "") + "{\"path\": " + json_string(pp.path) +
                        ", \"median_us\": " + json_number(pp.median_us) + ", \"gflops\": " + json_number(pp.gflops) +
                        ", \"runs\": " + std::to_string(pp.runs);
                if (pp.checked) {
                    list += ", \"rel_err\": " + json_number(pp.check.rel_err, "%.3e") +
                            ", \"check_ok\": " + (pp.check.ok ? "true" : "false");
                }
                if (!pp.error.empty()) list += ", \"error\": " + json_string(pp.error);
                list += "}";
            }
            f.emplace_back("paths_" + p.name, list + "]");
        }
    }
    f.emplace_back("other_cpus", json_number(r.other_cpus, "%.3g"));
    if (!r.error.empty()) f.emplace_back("error", json_string(r.error));
    std::string out = "{";
    for (size_t i = 0; i < f.size(); ++i) out += (i ? ", " : "") + json_string(f[i].first) + ": " + f[i].second;
    return out + "}";
}

void print_peaks(const std::vector<std::pair<std::string, Peak>>& peaks, bool json) {
    if (json) {
        std::printf("[\n");
        for (size_t i = 0; i < peaks.size(); ++i) {
            const Peak& p = peaks[i].second;
            std::printf("{\"kind\": %s, \"threads\": %d, \"gflops\": %s, \"per_core_gflops\": %s}%s\n",
                        json_string(peaks[i].first).c_str(), p.threads, json_number(p.total_gflops).c_str(),
                        json_number(p.per_core_gflops).c_str(), i + 1 < peaks.size() ? "," : "");
        }
        std::printf("]\n");
        return;
    }
    std::printf("jitmm %s, jitmm-bench --peak: FMA throughput in registers, best of 5-30 runs of ~20 ms, threads pinned\n",
                jitmm_version_string());
    std::printf("%-16s  %7s  %9s  %9s\n", "kind", "threads", "GFLOP/s", "per_core");
    for (const auto& entry : peaks) {
        const Peak& p = entry.second;
        std::printf("%-16s  %7d  %9.1f  %9.1f\n", entry.first.c_str(), p.threads, p.total_gflops, p.per_core_gflops);
    }
}

}  // namespace jitmm::bench
