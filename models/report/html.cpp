// comparison_html: two runs side by side as a self-contained HTML page (inline SVG, no external assets).
#include <algorithm>
#include <array>
#include <sstream>

#include "models/report/compare.h"
#include "models/report/format.h"

namespace liftoff {

namespace {

using report_format::fmt;

std::string html_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

struct Bar {
  std::string label;
  std::array<double, kNumStages> ms{};
  double total = 0.0;
  std::string total_text;
};

// One bar of host ms per image per run (they add up to the step), and for a run with CUDA event timings a
// second bar of device ms per image per stage: with the device as the limit (CUDA graphs), the host bar is
// mostly data wait (back-pressure) and the device bar shows where the time goes. Per image, so that runs of
// different batch sizes compare.
void add_bars(const RunReport& r, const std::string& name, std::vector<Bar>& bars) {
  Bar host;
  Bar dev;
  const double per_image = 1.0 / images_per_step(r);
  for (int i = 0; i < kNumStages; ++i) {
    const StageReport& s = r.stages[static_cast<size_t>(i)];
    host.ms[static_cast<size_t>(i)] = s.host_ms * per_image;
    dev.ms[static_cast<size_t>(i)] = s.device_ms ? *s.device_ms * per_image : 0.0;
    dev.total += dev.ms[static_cast<size_t>(i)];
  }
  host.total = r.step_ms_mean * per_image;
  host.total_text = fmt("%.4f", host.total) + " ms/image";
  const bool has_device = dev.total > 0.0;
  host.label = name + (has_device ? " (host)" : "");
  bars.push_back(host);
  if (has_device) {
    dev.label = name + " (device)";
    dev.total_text = fmt("%.4f", dev.total) + " ms/image on the device";
    bars.push_back(dev);
  }
}

constexpr const char* kColors[kNumStages] = {"#e4572e", "#f3a712", "#a8c686", "#29335c",
                                             "#669bbc", "#8e44ad", "#17becf", "#bbbbbb"};

// A stacked bar per entry, a stage in each colour, scaled to the longest bar, with a legend below.
std::string svg_chart(const std::vector<Bar>& bars) {
  double max_ms = 1e-9;
  size_t longest = 0;
  for (const Bar& bar : bars) {
    max_ms = std::max(max_ms, bar.total);
    longest = std::max(longest, bar.label.size());
  }
  // The label column grows with the longest label (about 7 px a character at 12 px sans-serif).
  const int left = std::max(150, 7 * static_cast<int>(longest) + 24), width = 600, bar_h = 34, top = 20;
  const int rows = static_cast<int>(bars.size());
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << left + width + 180 << "\" height=\""
      << top + rows * (bar_h + 16) + 60 << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  for (int k = 0; k < rows; ++k) {
    const Bar& bar = bars[static_cast<size_t>(k)];
    const int y = top + k * (bar_h + 16);
    svg << "<text x=\"" << left - 8 << "\" y=\"" << y + bar_h / 2 + 4 << "\" text-anchor=\"end\">"
        << html_escape(bar.label) << "</text>\n";
    double x = left;
    for (int i = 0; i < kNumStages; ++i) {
      const double ms = bar.ms[static_cast<size_t>(i)];
      const double w = width * ms / max_ms;
      if (w <= 0) continue;
      svg << "<rect x=\"" << fmt("%.2f", x) << "\" y=\"" << y << "\" width=\"" << fmt("%.2f", w)
          << "\" height=\"" << bar_h << "\" fill=\"" << kColors[i] << "\"><title>"
          << stage_name(static_cast<Stage>(i)) << ": " << fmt("%.4f", ms) << " ms/image</title></rect>\n";
      x += w;
    }
    svg << "<text x=\"" << fmt("%.2f", x + 6) << "\" y=\"" << y + bar_h / 2 + 4 << "\">" << bar.total_text
        << "</text>\n";
  }
  const int ly = top + rows * (bar_h + 16) + 10;
  for (int i = 0; i < kNumStages; ++i) {
    const int lx = left + i * 85;
    svg << "<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"12\" height=\"12\" fill=\"" << kColors[i]
        << "\"/>"
        << "<text x=\"" << lx + 16 << "\" y=\"" << ly + 10 << "\">" << stage_name(static_cast<Stage>(i))
        << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

// A table: a header row, then one row per entry.
void html_table(std::ostringstream& o, const ComparisonRow& header, const std::vector<ComparisonRow>& rows,
                size_t columns) {
  o << "<table><tr>";
  for (size_t c = 0; c < columns; ++c) o << "<th>" << html_escape(header[c]) << "</th>";
  o << "</tr>\n";
  for (const ComparisonRow& row : rows) {
    o << "<tr>";
    for (size_t c = 0; c < columns; ++c) o << "<td>" << html_escape(row[c]) << "</td>";
    o << "</tr>\n";
  }
  o << "</table>\n";
}

std::string verdict_paragraph(const char* which, const Verdict& v) {
  return std::string("<p>") + which + ": <b>" + html_escape(v.kind) + "</b>: " + html_escape(v.evidence) +
         (v.suggestion.empty() ? "" : "; try <code>" + html_escape(v.suggestion) + "</code>") + "</p>\n";
}

}  // namespace

std::string comparison_html(const RunReport& a, const RunReport& b, const std::string& name_a,
                            const std::string& name_b) {
  std::vector<Bar> bars;
  add_bars(a, name_a, bars);
  add_bars(b, name_b, bars);
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Liftoff: " << html_escape(name_a)
    << " vs " << html_escape(name_b) << "</title>\n<style>body{font-family:sans-serif;margin:2em}"
    << "table{border-collapse:collapse}td,th{padding:2px 10px;border-bottom:1px solid #ddd;text-align:right}"
    << "td:first-child,th:first-child{text-align:left}</style></head><body>\n";
  o << "<h1>" << html_escape(name_a) << " vs " << html_escape(name_b) << "</h1>\n";
  o << "<p>A: " << html_escape(run_label(a)) << "<br>B: " << html_escape(run_label(b)) << "</p>\n";
  o << "<p>" << html_escape(comparison_note(a, b)) << "</p>\n";
  const std::vector<ComparisonRow> differ = differing_settings(a, b);
  o << "<h2>Settings that differ</h2>\n";
  if (differ.empty()) {
    o << "<p>None: both runs used the same settings.</p>\n";
  } else {
    html_table(o, {"setting", "A", "B", ""}, differ, 3);
  }
  o << "<h2>Time per image by stage (host; device where CUDA events timed it)</h2>\n" << svg_chart(bars);
  o << "<h2>Side by side</h2>\n";
  html_table(o, {"ms per image", "A", "B", "B vs A"}, comparison_rows(a, b), 4);
  o << "<h2>Verdicts</h2>\n" << verdict_paragraph("A", a.verdict) << verdict_paragraph("B", b.verdict);
  o << "</body></html>\n";
  return o.str();
}

}  // namespace liftoff
