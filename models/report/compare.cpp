#include "models/report/compare.h"

#include <cstdio>
#include <optional>
#include <sstream>

#include "models/report/format.h"

namespace liftoff {

namespace {

using report_format::fmt;

std::string ratio_text(double a, double b) {
  if (a <= 0.0 && b <= 0.0) return "-";
  if (b <= 0.0) return "inf";
  return fmt("%.2fx", a / b);
}

void stage_rows(const RunReport& a, const RunReport& b, std::vector<ComparisonRow>& rows) {
  for (int i = 0; i < kNumStages; ++i) {
    const StageReport& x = a.stages[static_cast<size_t>(i)];
    const StageReport& y = b.stages[static_cast<size_t>(i)];
    const std::string name = stage_name(static_cast<Stage>(i));
    rows.push_back(
        {name + " (host)", fmt("%.3f", x.host_ms), fmt("%.3f", y.host_ms), ratio_text(x.host_ms, y.host_ms)});
    if (x.device_ms || y.device_ms) {
      rows.push_back({name + " (device)", x.device_ms ? fmt("%.3f", *x.device_ms) : "-",
                      y.device_ms ? fmt("%.3f", *y.device_ms) : "-",
                      x.device_ms && y.device_ms ? ratio_text(*x.device_ms, *y.device_ms) : "-"});
    }
  }
}

std::string verdict_line(const char* which, const Verdict& v) {
  return std::string("  verdict ") + which + ": " + v.kind +
         (v.suggestion.empty() ? "" : " (try " + v.suggestion + ")") + "\n";
}

}  // namespace

std::string run_label(const RunReport& r) {
  return r.config.device + ", " + (r.config.model.empty() ? "?" : r.config.model) + ", batch " +
         std::to_string(r.config.batch) + " x " + std::to_string(r.config.accum) + ", amp " + r.config.amp;
}

std::vector<ComparisonRow> comparison_rows(const RunReport& a, const RunReport& b) {
  std::vector<ComparisonRow> rows;
  stage_rows(a, b, rows);
  rows.push_back({"step", fmt("%.3f", a.step_ms_mean), fmt("%.3f", b.step_ms_mean),
                  ratio_text(a.step_ms_mean, b.step_ms_mean)});
  rows.push_back({"images/s", fmt("%.1f", a.images_per_second), fmt("%.1f", b.images_per_second),
                  ratio_text(b.images_per_second, a.images_per_second)});
  auto opt_pct = [](const std::optional<double>& v) { return v ? fmt("%.0f%%", *v) : std::string("-"); };
  rows.push_back({"GPU busy (events)", opt_pct(a.device_busy_pct), opt_pct(b.device_busy_pct), ""});
  auto nvml = [](const RunReport& r) {
    return r.gpu.available && r.gpu.samples > 0 ? fmt("%.0f%%", r.gpu.util_mean_pct) : std::string("-");
  };
  rows.push_back({"GPU util (NVML)", nvml(a), nvml(b), ""});
  auto mem = [](const RunReport& r) {
    return r.device_memory_peak_allocated ? format_bytes(*r.device_memory_peak_allocated) : std::string("-");
  };
  rows.push_back({"device memory peak", mem(a), mem(b), ""});
  auto rss = [](const RunReport& r) {
    return r.host_peak_rss ? format_bytes(*r.host_peak_rss) : std::string("-");
  };
  rows.push_back({"host peak RSS", rss(a), rss(b), ""});
  if (a.loader.files_total > 0 || b.loader.files_total > 0) {
    auto skipped = [](const RunReport& r) {
      return r.loader.files_total > 0 ? std::to_string(r.loader.skipped_files.size()) + " of " +
                                            std::to_string(r.loader.files_total)
                                      : std::string("-");
    };
    rows.push_back({"files skipped", skipped(a), skipped(b), ""});
  }
  rows.push_back({"verdict", a.verdict.kind, b.verdict.kind, ""});
  return rows;
}

std::string render_comparison(const RunReport& a, const RunReport& b, const std::string& name_a,
                              const std::string& name_b) {
  std::ostringstream o;
  o << "A: " << name_a << " (" << run_label(a) << ")\n";
  o << "B: " << name_b << " (" << run_label(b) << ")\n";
  char line[200];
  std::snprintf(line, sizeof line, "  %-22s %14s %14s %9s\n", "ms/step", "A", "B", "A/B");
  o << line;
  for (const ComparisonRow& row : comparison_rows(a, b)) {
    if (row[0] == "verdict") continue;
    std::snprintf(line, sizeof line, "  %-22s %14s %14s %9s\n", row[0].c_str(), row[1].c_str(),
                  row[2].c_str(), row[3].c_str());
    o << line;
  }
  o << "  (A/B > 1: B is faster; for images/s the ratio is B/A)\n";
  o << verdict_line("A", a.verdict) << verdict_line("B", b.verdict);
  return o.str();
}

}  // namespace liftoff
