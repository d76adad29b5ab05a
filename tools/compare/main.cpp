// compare: two utilization reports (train --report a.json) side by side, stage by stage, with the speedup;
// --html writes a self-contained page with an SVG stage-breakdown chart.
// Exit codes: 0 success, 1 a report cannot be read or the page cannot be written, 2 a usage error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "models/report/report.h"
#include "runtime/error.h"
#include "runtime/platform/files.h"

namespace {

// A report is a few kB to a few MB (per-rank figures); anything larger is not one (or /dev/zero).
constexpr int64_t kMaxReportBytes = int64_t{64} << 20;

liftoff::RunReport read_report(const std::string& path) {
  return liftoff::RunReport::from_json(liftoff::platform::read_file_capped(path, kMaxReportBytes, "report"),
                                       path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"compare: two Liftoff run reports side by side (train --report run.json)", "compare"};
  std::string path_a, path_b, html;
  app.add_option("a", path_a, "first report (A)")->required();
  app.add_option("b", path_b, "second report (B)")->required();
  app.add_option("--html", html, "also write an HTML page with a stage-breakdown chart to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "compare: %s\nRun 'compare --help' for usage.\n", e.what());
    return 2;
  }
  try {
    const liftoff::RunReport a = read_report(path_a);
    const liftoff::RunReport b = read_report(path_b);
    std::printf("%s", liftoff::render_comparison(a, b, path_a, path_b).c_str());
    if (!html.empty()) {
      std::ofstream out(html, std::ios::binary | std::ios::trunc);
      out << liftoff::comparison_html(a, b, path_a, path_b);
      out.flush();
      if (!out) throw liftoff::IOError("cannot write '" + html + "'");
      std::printf("wrote %s\n", html.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare: error: %s\n", e.what());
    return 1;
  }
}
