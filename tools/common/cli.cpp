#include "tools/common/cli.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace liftoff::tools {

namespace {

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The whole text as a finite number.
bool parse_number(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(out);
}

// true/false in CLI11's spellings (a negated flag stores "-1" or "false").
bool parse_bool(const std::string& text, bool& out) {
  for (const char* t : {"true", "on", "yes", "1"}) {
    if (text == t) {
      out = true;
      return true;
    }
  }
  for (const char* f : {"false", "off", "no", "0", "-1"}) {
    if (text == f) {
      out = false;
      return true;
    }
  }
  return false;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool is_bool_text(const std::string& v) {
  return v == "true" || v == "false";
}

}  // namespace

CLI::Validator in_range(double lo, double hi, bool open_low) {
  const std::string range = (open_low ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + "]";
  return CLI::Validator(
      [lo, hi, open_low, range](std::string& text) {
        double v = 0;
        if (!parse_number(text, v)) return "'" + text + "' is not a finite number";
        const bool inside = (open_low ? v > lo : v >= lo) && v <= hi;
        return inside ? std::string() : text + " is not in " + range;
      },
      "in " + range);
}

CLI::Validator in_range(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) {
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || end != text.c_str() + text.size()) return "'" + text + "' is not an integer";
        return v >= lo && v <= hi ? std::string() : text + " is not in " + range;
      },
      "in " + range);
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& text) {
        double v = 0;
        if (!parse_number(text, v)) return "'" + text + "' is not a finite number";
        return v > 0 ? std::string() : text + " must be > 0";
      },
      "> 0");
}

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
  if (is_positional) return CLI::Formatter::make_option_name(opt, is_positional);
  std::string out;
  for (const std::string& s : opt->get_snames()) out += (out.empty() ? "-" : ", -") + s;
  for (const std::string& l : opt->get_lnames()) out += (out.empty() ? "--" : ", --") + l;
  return out;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  if (opt->get_expected_min() != 0) return CLI::Formatter::make_option_opts(opt);
  // A flag: its default is in its description ("(default on)"), not "=true".
  std::string out;
  for (const CLI::Option* other : opt->get_excludes())
    out += (out.empty() ? " Excludes: " : " ") + other->get_name();
  return out;
}

std::string unknown_flag_hint(const CLI::App& app, const std::string& argument) {
  if (argument.size() < 2 || argument[0] != '-') return "";
  std::string given = argument.substr(argument[1] == '-' ? 2 : 1);
  given = given.substr(0, given.find('='));
  if (given.empty()) return "";
  std::string best;
  size_t best_distance = std::string::npos;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto* names : {&opt->get_lnames(), &opt->get_fnames()}) {
      for (const std::string& name : *names) {
        // A name inside the one given (--num-workers: --workers) counts as two edits at most.
        const bool inside = name.size() >= 3 && given.find(name) != std::string::npos;
        const size_t d = std::min(edit_distance(given, name), inside ? size_t{2} : std::string::npos);
        if (d < best_distance) {
          best_distance = d;
          best = "--" + name;
        }
      }
    }
  }
  const size_t close = std::max<size_t>(2, given.size() / 3);
  if (best.empty() || best_distance > close) return "unknown flag " + argument;
  return "unknown flag " + argument + "; did you mean " + best + "?";
}

std::vector<std::pair<std::string, std::string>> flag_values(const CLI::App& app) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (!opt->get_configurable() || opt->get_lnames().empty()) continue;
    std::string value;
    if (opt->count() > 0) {
      const auto results = opt->reduced_results();
      for (size_t i = 0; i < results.size(); ++i) value += (i ? "," : "") + results[i];
      bool b = false;
      if (opt->get_type_size() == 0 && parse_bool(value, b)) value = b ? "true" : "false";
    } else if (opt->get_expected_min() == 0 && opt->get_type_size() != 0) {
      continue;  // an optional value (--ema [DECAY]): its default string is what a bare flag means, not off
    } else if (!opt->get_needs().empty()) {
      continue;  // a default of a flag that needs another (--ema-buffers: --ema) means nothing on its own
    } else {
      value = opt->get_default_str();
    }
    if (!value.empty()) out.emplace_back(opt->get_lnames().front(), value);
  }
  return out;
}

std::string config_toml(const CLI::App& app, const std::string& header_comment) {
  std::string out = "# " + header_comment + "\n";
  for (const auto& [name, value] : flag_values(app)) {
    double ignored = 0;
    const bool bare = is_bool_text(value) || parse_number(value, ignored);
    out += name + " = " + (bare ? value : "\"" + value + "\"") + "\n";
  }
  return out;
}

bool same_flag_value(const std::string& a, const std::string& b) {
  double x = 0, y = 0;
  if (parse_number(a, x) && parse_number(b, y)) return x == y;
  bool p = false, q = false;
  if (parse_bool(a, p) && parse_bool(b, q)) return p == q;
  return a == b;
}

int parse_command_line(CLI::App& app, int argc, char** argv) {
  const std::string tool = app.get_name();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ExtrasError& e) {
    std::string hint;
    for (const std::string& arg : app.remaining()) {
      hint = unknown_flag_hint(app, arg);
      if (!hint.empty()) break;
    }
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for the flags and their defaults.\n", tool.c_str(),
                 hint.empty() ? e.what() : hint.c_str(), tool.c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for the flags and their defaults.\n", tool.c_str(),
                 e.what(), tool.c_str());
    return 2;
  }
  return -1;
}

}  // namespace liftoff::tools
