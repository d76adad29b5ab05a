// The one table of environment settings: every LIFTOFF_* knob the library reads, and the launcher's process
// variables (RANK, WORLD_SIZE, OMPI_COMM_WORLD_*, the NCCL unique id, ...), each declared once in config.cpp
// with its type, default, accepted values and one line of doc. Library code reads the environment only here.
//
//   if (*config::get_bool(config::Knob::graph_log)) ...
//   const double mb = config::get_double(config::Knob::cudnn_workspace_mb).value_or(512);
//
// Knobs are read from the environment once, on first use, and the parsed value is kept; a malformed value is
// a ValueError "LIFTOFF_X=abc: expected ...; default ...", thrown where the knob is used. Process variables
// are read afresh at each call (launchers and tests set them). Tests change any entry with a ScopedSetting.
// `doctor --config` and `train --print-settings` print the table (format_table).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace liftoff::config {

enum class Knob {
  // Settings (read once).
  cpu_cache_mb,
  cpu_alloc_stats,
  cpu_spin_us,
  cpu_winograd,
  graph_log,
  conv_engines,
  conv_timing,
  conv_cache,
  depthwise,
  few_channel_conv,
  bn_resident,
  bn_mask,
  bn_sweep,
  conv_bias_relu,
  wgrad_lane,
  conv_layout,
  weight_layout,
  cudnn_library,
  cudnn_workspace_mb,
  cudnn_log,
  attention_fused,
  weight_cast,
  grad_cast,
  cublas_library,
  cublas_workspace_mb,
  gemm_search,
  nccl_library,
  mpi_library,
  nvml_interval_s,
  loader_stall_s,
  dist_timeout,
  // Process variables (set by a launcher; read at each call).
  launcher,
  nccl_id,
  nccl_id_file,
  rank,
  world_size,
  local_rank,
  local_world_size,
  ompi_rank,
  ompi_world_size,
  ompi_local_rank,
  ompi_local_size,
  xdg_cache_home,
  home,
  cuda_injection64_path,
  count_,
};

enum class Type {
  boolean,  // 0|1 (also false|true, off|on, no|yes)
  integer,  // a whole number in [min, max]
  number,   // a real number >= min (> min when min_exclusive)
  text,     // any text (a path, an id)
  choice,   // one of the words in `choices`
};

enum class Scope { setting, process };

struct Entry {
  Knob knob;
  const char* name;
  Type type;
  Scope scope;
  // Parsed like a value; nullptr: unset by default, the code using it decides (`unset_means` says what).
  const char* default_value;
  const char* unset_means;
  double min;
  double max;
  bool min_exclusive;
  const char* choices;  // Type::choice: "auto|legacy|graph"
  const char* doc;
};

const Entry& entry(Knob knob);
const std::vector<Knob>& all_knobs();
const char* name(Knob knob);
// The knob called `name` (e.g. "LIFTOFF_GRAPH_LOG"); nullopt when the table has none.
std::optional<Knob> find(std::string_view name);
// "0|1", "an integer in [0, 2]", "a number > 0", "auto|legacy|graph", "text".
std::string accepted(const Entry& e);

// The value: an override, else the environment (empty counts as unset), else the default. nullopt when none
// of them gives one. Each accessor requires the entry's type (choice knobs: get_string); a malformed value
// throws ValueError naming the variable, the value, what is accepted and the default.
std::optional<bool> get_bool(Knob knob);
std::optional<int64_t> get_int(Knob knob);
std::optional<double> get_double(Knob knob);
std::optional<std::string> get_string(Knob knob);  // text and choice entries
// True when an override or the environment gives the entry a (non-empty) value; never throws.
bool is_set(Knob knob);

// Replaces a value for the lifetime of the object (tests). nullopt: as if unset. The value is checked when it
// is read, as the environment's would be. Restores what was there before on destruction; nest them in
// stack order. Thread-safe, but a setting read from another thread meanwhile sees the override.
class ScopedSetting {
 public:
  ScopedSetting(Knob knob, std::optional<std::string> value);
  ~ScopedSetting();
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  Knob knob_;
  bool had_override_;
  std::optional<std::string> previous_;
};

// One row per entry, for tools: what `value` is and where it came from.
struct Row {
  const Entry* entry;
  std::string type;      // "bool", "int", "double", "string", "choice"
  std::string accepted;  // accepted(entry)
  std::string default_text;
  std::string
      value;  // the current value as text; "" when unset; "abc (invalid: expected ...)" when malformed
  std::string source;  // "override", "env" or "default"
};
std::vector<Row> list();

// The table as aligned text: name, type, current value, source, default, accepted values, doc.
std::string format_table();

}  // namespace liftoff::config
