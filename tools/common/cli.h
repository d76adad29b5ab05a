// Command-line pieces every tool shares (CLI11): readable range checks, a help layout without CLI11's
// "--x,--no-x{false}", "did you mean" for unknown flags, and a configuration file (TOML, what CLI11's
// --config reads) of the flags' effective values.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace liftoff::tools {

// Numbers in [lo, hi] (or (lo, hi] with open_low), said as "--lr: 0 is not in (0, 1e+30]": bounds printed
// with %g, never DBL_MAX's 300 digits. NaN and text that is not a number are refused too. The help shows the
// range.
CLI::Validator in_range(double lo, double hi, bool open_low = false);
CLI::Validator in_range(int64_t lo, int64_t hi);
// A number > 0 (finite): "must be > 0".
CLI::Validator positive();

// Help: option names as "--batch, --batch-size" and "--nesterov, --no-nesterov".
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
  std::string make_option_opts(const CLI::Option* opt) const override;
};

// One line for an unknown argument: "unknown flag --batchsize; did you mean --batch-size?" (the closest long
// or short name by edit distance, when one is close), or "" for arguments that are not flags.
std::string unknown_flag_hint(const CLI::App& app, const std::string& argument);

// The effective value of every configurable option as text, in definition order: the value given (command
// line or --config file), else its default; options without either (unset) are left out. Flags need a
// default_str ("true"/"false").
std::vector<std::pair<std::string, std::string>> flag_values(const CLI::App& app);
// Those values as TOML ("name = value" lines, strings quoted), which CLI11's set_config reads back.
std::string config_toml(const CLI::App& app, const std::string& header_comment);

// The same value, written two ways ("0.1" and "1e-1", "true" and "1"): numbers compare as numbers, booleans
// as booleans, anything else as text.
bool same_flag_value(const std::string& a, const std::string& b);

// Parses argv the way every tool does: --help prints the help (exit 0), a parse error prints one line and a
// "did you mean" hint where one fits (exit 2). Returns -1 when the tool should go on.
int parse_command_line(CLI::App& app, int argc, char** argv);

}  // namespace liftoff::tools
