// Two runs side by side (compare, bench), as text (compare.cpp) or as a self-contained HTML page (html.cpp);
// both render the same rows. Times are compared per image (ms/step divided by the images of a step), so a
// batch-128 run and a batch-64 run at the same images/s are equal. One direction throughout: the last column
// says how B does relative to A ("1.99x faster", "equal", "1.25x slower"), for times and throughput alike.
// The settings that differ between the runs (batch, amp, device, model, ...) come first.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "models/report/run_report.h"

namespace liftoff {

// Within this fraction, two figures are "equal" (run-to-run noise of a step time is a few percent).
constexpr double kComparisonEqualWithin = 0.02;

// {label, A, B, B vs A}.
using ComparisonRow = std::array<std::string, 4>;

// Images one optimizer step of the whole job processes: measured (images / steps of the report, times the
// ranks); batch x accum x ranks when no step was measured.
double images_per_step(const RunReport& r);
// How B does relative to A from their time per image: "2.00x faster", "equal", "1.50x slower"; "-" when a
// figure is missing (<= 0).
std::string relative_speed(double a_ms, double b_ms);

// {setting, A, B, ""} for each run setting (tool, device, model, data, batch, accum, amp, augment, workers,
// ...) whose values differ.
std::vector<ComparisonRow> differing_settings(const RunReport& a, const RunReport& b);
// Host and (where timed) device ms per image per stage, the step per image, the step as measured, images per
// step, images/s, GPU busy and utilization, memory peaks, and the verdicts' kinds (label "verdict", last).
std::vector<ComparisonRow> comparison_rows(const RunReport& a, const RunReport& b);
// "cuda:0, resnet20, batch 128 x 1, amp off"
std::string run_label(const RunReport& r);
// The sentence that states the direction and the normalisation, for both renderings.
std::string comparison_note(const RunReport& a, const RunReport& b);

std::string render_comparison(const RunReport& a, const RunReport& b, const std::string& name_a,
                              const std::string& name_b);
// The same as an HTML page with an inline SVG stacked bar chart of both stage breakdowns per image (no
// external assets).
std::string comparison_html(const RunReport& a, const RunReport& b, const std::string& name_a,
                            const std::string& name_b);

}  // namespace liftoff
