// bench: the same model and batch trained twice (by default on the CPU and on CUDA), then the two utilization
// reports side by side, stage by stage, with the speedup: "compare with --device cpu" in one command.
//   bench [--a "--device cpu"] [--b "--device cuda"] [--steps 40] [--html out.html] [train flags for both...]
// Exit codes: 0 success, 1 a run failed (its last lines are shown), 2 a usage error.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "models/report/report.h"
#include "runtime/error.h"

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw liftoff::IOError("cannot open '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The train executable beside this one (both land in build/bin).
std::string train_path() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "train";
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.find_last_of('/') + 1) + "train";
}

// Runs train with `args`; returns its exit status and leaves its output in `log`.
int run_train(const std::vector<std::string>& args, const std::string& log) {
  std::string cmd = shell_quote(train_path());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(log) + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string tail_lines(const std::string& text, size_t lines) {
  std::vector<std::string> all;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    out += "  " + all[i] + "\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "bench: train the same model twice (CPU vs CUDA by default) and compare the utilization reports",
      "bench"};
  std::string a = "--device cpu", b = "--device cuda", html;
  int64_t steps = 40, warmup = 5;
  app.add_option("--a", a, "train flags of run A")->capture_default_str();
  app.add_option("--b", b, "train flags of run B")->capture_default_str();
  app.add_option("--steps", steps, "optimizer steps per run")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000000));
  app.add_option("--timing-warmup", warmup, "steps left out of the timing")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--html", html, "also write an HTML page with the stage-breakdown chart");
  app.allow_extras();  // the rest goes to both train runs (--model, --batch, --accum, --data, ...)
  app.footer("Other flags are passed to both runs, e.g. bench --model resnet20 --batch 16 --accum 4");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "bench: %s\nRun 'bench --help' for usage.\n", e.what());
    return 2;
  }
  const std::vector<std::string> common = app.remaining();
  char dir_template[] = "/tmp/liftoff-bench-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    std::fprintf(stderr, "bench: error: cannot create a temporary folder in /tmp\n");
    return 1;
  }
  try {
    std::vector<liftoff::RunReport> reports;
    for (const auto& [name, flags] : {std::pair<std::string, std::string>{"A", a}, {"B", b}}) {
      std::vector<std::string> args = common;
      for (const auto& w : split_words(flags)) args.push_back(w);
      const std::string report = std::string(dir) + "/" + name + ".json";
      const std::string log = std::string(dir) + "/" + name + ".log";
      for (const std::string& extra :
           {std::string("--max-steps"), std::to_string(steps), std::string("--timing-warmup"),
            std::to_string(warmup), std::string("--no-eval"), std::string("--epochs"), std::string("100000"),
            std::string("--report"), report}) {
        args.push_back(extra);
      }
      std::printf("run %s: train %s ... ", name.c_str(), flags.c_str());
      std::fflush(stdout);
      const int rc = run_train(args, log);
      if (rc != 0) {
        std::printf("failed (exit %d)\n%s", rc, tail_lines(read_file(log), 3).c_str());
        return 1;
      }
      std::printf("done\n");
      reports.push_back(liftoff::RunReport::from_json(read_file(report), report));
    }
    std::printf("%s", liftoff::render_comparison(reports[0], reports[1], a, b).c_str());
    if (!html.empty()) {
      std::ofstream out(html, std::ios::binary | std::ios::trunc);
      out << liftoff::comparison_html(reports[0], reports[1], a, b);
      out.flush();
      if (!out) throw liftoff::IOError("cannot write '" + html + "'");
      std::printf("wrote %s\n", html.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: error: %s\n", e.what());
    return 1;
  }
}
