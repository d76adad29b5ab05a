// Two runs side by side (compare, bench): stage by stage with the speedup a/b (> 1: b is faster), as text
// (compare.cpp) or as a self-contained HTML page (html.cpp). Both render the same rows.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "models/report/run_report.h"

namespace liftoff {

// {label, A, B, A/B}: host and (where timed) device ms/step per stage, the step, images/s (ratio B/A), GPU
// busy and utilization, memory peaks, and the verdicts' kinds (label "verdict", last).
using ComparisonRow = std::array<std::string, 4>;
std::vector<ComparisonRow> comparison_rows(const RunReport& a, const RunReport& b);
// "cuda:0, resnet20, batch 128 x 1, amp off"
std::string run_label(const RunReport& r);

std::string render_comparison(const RunReport& a, const RunReport& b, const std::string& name_a,
                              const std::string& name_b);
// The same as an HTML page with an inline SVG stacked bar chart of both stage breakdowns (no external
// assets).
std::string comparison_html(const RunReport& a, const RunReport& b, const std::string& name_a,
                            const std::string& name_b);

}  // namespace liftoff
