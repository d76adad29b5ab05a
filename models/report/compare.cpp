#include "models/report/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <utility>

#include "models/report/format.h"

namespace liftoff {

namespace {

using report_format::fmt;

std::string ms_text(double ms) {
  return fmt("%.4f", ms);
}

// Each stage per image: host ms, and device ms where either run timed the stage.
void stage_rows(const RunReport& a, const RunReport& b, std::vector<ComparisonRow>& rows) {
  const double per_a = 1.0 / images_per_step(a), per_b = 1.0 / images_per_step(b);
  for (int i = 0; i < kNumStages; ++i) {
    const StageReport& x = a.stages[static_cast<size_t>(i)];
    const StageReport& y = b.stages[static_cast<size_t>(i)];
    const std::string name = stage_name(static_cast<Stage>(i));
    rows.push_back({name + " (host)", ms_text(x.host_ms * per_a), ms_text(y.host_ms * per_b),
                    relative_speed(x.host_ms * per_a, y.host_ms * per_b)});
    if (x.device_ms || y.device_ms) {
      rows.push_back(
          {name + " (device)", x.device_ms ? ms_text(*x.device_ms * per_a) : "-",
           y.device_ms ? ms_text(*y.device_ms * per_b) : "-",
           x.device_ms && y.device_ms ? relative_speed(*x.device_ms * per_a, *y.device_ms * per_b) : "-"});
    }
  }
}

// The run settings a comparison names, in the train flags' words.
std::vector<std::pair<std::string, std::string>> settings(const RunReport& r) {
  const RunConfig& c = r.config;
  auto n = [](int64_t v) { return std::to_string(v); };
  return {{"tool", c.tool},
          {"device", c.device},
          {"GPU", c.device_name},
          {"model", c.model},
          {"data", c.data},
          {"batch", n(c.batch)},
          {"accum", n(c.accum)},
          {"ranks (world size)", n(c.world_size)},
          {"amp", c.amp},
          {"augment", c.augment},
          {"workers", n(c.workers)},
          {"prefetch", n(c.prefetch)},
          {"pinned memory", c.pin_memory ? "yes" : "no"},
          {"CPU threads", n(c.threads)},
          {"host cores", n(c.host_cores)},
          {"activation layout", c.activation_layout},
          {"CUDA graphs", r.graphs.mode + (r.graphs.used ? " (used)" : " (not used)")}};
}

std::string verdict_line(const char* which, const Verdict& v) {
  return std::string("  verdict ") + which + ": " + v.kind +
         (v.suggestion.empty() ? "" : " (try " + v.suggestion + ")") + "\n";
}

void print_rows(std::ostringstream& o, const std::vector<ComparisonRow>& rows, const char* heading) {
  char line[256];
  std::snprintf(line, sizeof line, "  %-24s %14s %14s  %s\n", heading, "A", "B", "B vs A");
  o << line;
  for (const ComparisonRow& row : rows) {
    if (row[0] == "verdict") continue;
    std::snprintf(line, sizeof line, "  %-24s %14s %14s  %s\n", row[0].c_str(), row[1].c_str(),
                  row[2].c_str(), row[3].c_str());
    o << line;
  }
}

}  // namespace

double images_per_step(const RunReport& r) {
  const double ranks = static_cast<double>(std::max(1, r.config.world_size));
  if (r.steps_measured > 0 && r.images_measured > 0) {
    return ranks * static_cast<double>(r.images_measured) / static_cast<double>(r.steps_measured);
  }
  return ranks *
         static_cast<double>(std::max<int64_t>(1, r.config.batch * std::max<int64_t>(1, r.config.accum)));
}

std::string relative_speed(double a_ms, double b_ms) {
  if (!(a_ms > 0.0) || !(b_ms > 0.0)) return "-";
  const double speedup = a_ms / b_ms;  // > 1: B takes less time per image
  if (std::abs(speedup - 1.0) < kComparisonEqualWithin) return "equal";
  return speedup > 1.0 ? fmt("%.2fx faster", speedup) : fmt("%.2fx slower", 1.0 / speedup);
}

std::string run_label(const RunReport& r) {
  return r.config.device + ", " + (r.config.model.empty() ? "?" : r.config.model) + ", batch " +
         std::to_string(r.config.batch) + " x " + std::to_string(r.config.accum) + ", amp " + r.config.amp;
}

std::vector<ComparisonRow> differing_settings(const RunReport& a, const RunReport& b) {
  std::vector<ComparisonRow> rows;
  const auto sa = settings(a), sb = settings(b);
  for (size_t i = 0; i < sa.size(); ++i) {
    if (sa[i].second != sb[i].second) rows.push_back({sa[i].first, sa[i].second, sb[i].second, ""});
  }
  return rows;
}

std::string comparison_note(const RunReport& a, const RunReport& b) {
  return "B relative to A throughout: \"faster\" means B needs less time per image (or processes more "
         "images/s); within " +
         fmt("%.0f", 100.0 * kComparisonEqualWithin) +
         "% they are equal. Stage and step times are per image: ms/step divided by the images of one step "
         "(A " +
         fmt("%.0f", images_per_step(a)) + ", B " + fmt("%.0f", images_per_step(b)) + ").";
}

std::vector<ComparisonRow> comparison_rows(const RunReport& a, const RunReport& b) {
  std::vector<ComparisonRow> rows;
  stage_rows(a, b, rows);
  const double a_ms = a.step_ms_mean / images_per_step(a), b_ms = b.step_ms_mean / images_per_step(b);
  rows.push_back({"step", ms_text(a_ms), ms_text(b_ms), relative_speed(a_ms, b_ms)});
  rows.push_back({"ms/step (as measured)", fmt("%.3f", a.step_ms_mean), fmt("%.3f", b.step_ms_mean), ""});
  rows.push_back({"images per step", fmt("%.0f", images_per_step(a)), fmt("%.0f", images_per_step(b)), ""});
  // Throughput: more images/s is faster, the same direction as less time per image.
  const double ips_a = a.images_per_second, ips_b = b.images_per_second;
  rows.push_back({"images/s", fmt("%.1f", ips_a), fmt("%.1f", ips_b),
                  ips_a > 0 && ips_b > 0 ? relative_speed(1.0 / ips_a, 1.0 / ips_b) : "-"});
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
  o << comparison_note(a, b) << "\n";
  const std::vector<ComparisonRow> differ = differing_settings(a, b);
  if (differ.empty()) {
    o << "settings: the same\n";
  } else {
    char line[256];
    std::snprintf(line, sizeof line, "  %-24s %14s %14s\n", "settings that differ", "A", "B");
    o << line;
    for (const ComparisonRow& row : differ) {
      std::snprintf(line, sizeof line, "  %-24s %14s %14s\n", row[0].c_str(), row[1].c_str(), row[2].c_str());
      o << line;
    }
  }
  print_rows(o, comparison_rows(a, b), "ms per image");
  o << verdict_line("A", a.verdict) << verdict_line("B", b.verdict);
  return o.str();
}

}  // namespace liftoff
