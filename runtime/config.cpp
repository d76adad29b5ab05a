#include "runtime/config.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <variant>

#include "runtime/error.h"

namespace liftoff::config {

namespace {

constexpr double kMaxRank = (1 << 24) - 1;

// Row builders, one per type: a row of the table then reads as what it is.
constexpr Entry row(Knob k, const char* name, Type type, const char* default_value, const char* unset_means,
                    const char* doc) {
  return Entry{k, name, type, Scope::setting, default_value, unset_means, 0, 0, false, nullptr, doc};
}
constexpr Entry bool_knob(Knob k, const char* name, const char* default_value, const char* unset_means,
                          const char* doc) {
  return row(k, name, Type::boolean, default_value, unset_means, doc);
}
constexpr Entry int_knob(Knob k, const char* name, const char* default_value, const char* unset_means,
                         double min, double max, const char* doc) {
  Entry e = row(k, name, Type::integer, default_value, unset_means, doc);
  e.min = min;
  e.max = max;
  return e;
}
// Numbers have no fixed default here: the code using them passes its own.
constexpr Entry number_knob(Knob k, const char* name, const char* unset_means, double min, bool min_exclusive,
                            const char* doc) {
  Entry e = row(k, name, Type::number, nullptr, unset_means, doc);
  e.min = min;
  e.min_exclusive = min_exclusive;
  return e;
}
constexpr Entry choice_knob(Knob k, const char* name, const char* default_value, const char* words,
                            const char* doc) {
  Entry e = row(k, name, Type::choice, default_value, nullptr, doc);
  e.choices = words;
  return e;
}
constexpr Entry text_knob(Knob k, const char* name, const char* unset_means, const char* doc) {
  return row(k, name, Type::text, nullptr, unset_means, doc);
}
constexpr Entry process(Entry e) {
  e.scope = Scope::process;
  return e;
}
constexpr Entry rank_variable(Knob k, const char* name, const char* unset_means, const char* doc) {
  return process(int_knob(k, name, nullptr, unset_means, 0, kMaxRank, doc));
}

// The table, in the order of enum Knob (checked below). Process variables keep their launchers' names.
constexpr Entry kTable[] = {
    int_knob(Knob::cpu_cache_mb, "LIFTOFF_CPU_CACHE_MB", "1024", nullptr, 0, 1 << 30,
             "idle CPU allocations the allocator keeps for reuse, MiB (0: none cached)"),
    bool_knob(Knob::cpu_alloc_stats, "LIFTOFF_CPU_ALLOC_STATS", "0", nullptr,
              "1: print the CPU allocator's reuse statistics at exit"),
    int_knob(Knob::cpu_spin_us, "LIFTOFF_CPU_SPIN_US", "50", nullptr, 0, 10000000,
             "microseconds an idle CPU worker thread polls before it sleeps (0: sleep at once)"),
    int_knob(Knob::cpu_winograd, "LIFTOFF_CPU_WINOGRAD", "1", nullptr, 0, 2,
             "CPU Winograd 3x3 convolutions: 0 off, 1 in the gradients, 2 in the forward too"),
    bool_knob(Knob::graph_log, "LIFTOFF_GRAPH_LOG", "0", nullptr,
              "1: print each captured step graph's nodes by kernel, most frequent first"),
    choice_knob(Knob::conv_engines, "LIFTOFF_CONV_ENGINES", "auto", "auto|legacy|graph",
                "cuDNN API per convolution: auto times both and keeps the faster"),
    choice_knob(
        Knob::conv_timing, "LIFTOFF_CONV_TIMING", "auto", "auto|graph|eager",
        "how cuDNN candidates are timed: auto replays them in a graph before a capture, else eagerly"),
    text_knob(Knob::conv_cache, "LIFTOFF_CONV_CACHE", "auto: $XDG_CACHE_HOME/liftoff, else ~/.cache/liftoff",
              "folder keeping the cuDNN algorithms chosen per convolution shape between runs (a later run "
              "restores them instead of searching); off: search in every run"),
    choice_knob(
        Knob::depthwise, "LIFTOFF_DEPTHWISE", "auto", "auto|cudnn",
        "channels-last depthwise convolutions on CUDA: auto runs Liftoff's own kernels, cudnn cuDNN's"),
    choice_knob(Knob::few_channel_conv, "LIFTOFF_FEW_CHANNEL_CONV", "auto", "auto|own|forward|cudnn",
                "channels-last CUDA convolutions with at most 4 input channels (a first layer): auto runs "
                "Liftoff's own forward for up to 32 filters and its weight gradient for up to 16, own both "
                "for up to 64, forward the own forward alone for up to 64 (cuDNN's weight gradient), cudnn "
                "never"),
    choice_knob(Knob::bn_resident, "LIFTOFF_BN_RESIDENT", "auto", "auto|off",
                "channels-last training batch norm of at most 2048 rows (N*H*W) on CUDA: auto runs each pass "
                "in one launch (rows held in registers), off the split reduction + elementwise kernels"),
    choice_knob(Knob::bn_mask, "LIFTOFF_BN_MASK", "auto", "auto|read",
                "CUDA backward of a batch norm fused with a ReLU and no residual: auto recomputes the ReLU's "
                "mask from the input (one tensor fewer read), read loads the forward's output"),
    choice_knob(
        Knob::bn_sweep, "LIFTOFF_BN_SWEEP", "auto", "auto|forward",
        "channels-last CUDA batch-norm reductions (statistics, gradient sums): auto walks the rows "
        "from the last back, so the pass after it starts on the rows read last (the likeliest still in "
        "L2); forward from row 0"),
    choice_knob(Knob::conv_bias_relu, "LIFTOFF_CONV_BIAS_RELU", "off", "off|auto",
                "CUDA convolutions with a bias: auto defers the bias add so that a relu right after adds it "
                "in its own pass (one pass over the output instead of two); off adds it at once (the default "
                "until measured on a GPU)"),
    choice_knob(
        Knob::wgrad_lane, "LIFTOFF_WGRAD_LANE", "auto", "auto|on|off",
        "CUDA backward: weight gradients of convolutions on a second stream beside the input-gradient "
        "chain; auto in captured steps, on in eager steps too, off on the compute stream"),
    choice_knob(Knob::conv_layout, "LIFTOFF_CONV_LAYOUT", "auto", "auto|input",
                "layout of 4-D CUDA convolutions: auto (channels-last, f64 NCHW) or input (the input's own)"),
    choice_knob(
        Knob::weight_layout, "LIFTOFF_WEIGHT_LAYOUT", "auto", "auto|keep",
        "Trainer on CUDA without autocast: auto stores 4-D f32 weights channels-last (KRSC, the order "
        "the convolutions read; no copy a step), keep leaves them as the model made them"),
    text_knob(Knob::cudnn_library, "LIFTOFF_CUDNN_LIBRARY", "libcudnn.so.9, else libcudnn.so",
              "the cuDNN library file to load (only that one)"),
    number_knob(Knob::cudnn_workspace_mb, "LIFTOFF_CUDNN_WORKSPACE_MB",
                "1024 (the graph API's engines 64), 64 for f16", 0, false,
                "cap on any cuDNN search or algorithm workspace, MiB"),
    bool_knob(Knob::cudnn_log, "LIFTOFF_CUDNN_LOG", "0", nullptr,
              "1: print each cuDNN algorithm choice, its workspace and the legacy-vs-graph timings, and each "
              "attention plan (or why cuDNN rejected it)"),
    bool_knob(Knob::attention_fused, "LIFTOFF_ATTENTION_FUSED", "1", nullptr,
              "0: CUDA attention always takes the plain path (GEMM, softmax, GEMM), for A/B comparisons"),
    choice_knob(Knob::weight_cast, "LIFTOFF_WEIGHT_CAST", "batched", "batched|each",
                "autocast half weight casts: batched (one launch per step) or each (one kernel per weight)"),
    choice_knob(
        Knob::grad_cast, "LIFTOFF_GRAD_CAST", "batched", "batched|each",
        "autocast weights' half gradients into their f32 .grad: batched (one launch per 96 weights at the "
        "end of each backward) or each (one kernel per weight)"),
    text_knob(Knob::cublas_library, "LIFTOFF_CUBLAS_LIBRARY", "libcublas.so.13, else libcublas.so",
              "the cuBLAS library file to load (only that one)"),
    int_knob(Knob::cublas_workspace_mb, "LIFTOFF_CUBLAS_WORKSPACE_MB", "128", nullptr, 0, 4096,
             "cuBLAS workspace of large GEMMs (>= 8 GFLOP a call), MiB (0: cuBLAS's default pool for all)"),
    bool_knob(Knob::gemm_search, "LIFTOFF_GEMM_SEARCH", "1", nullptr,
              "1: a large GEMM's (>= 8 GFLOP) first call times cuBLAS's own pick and cuBLASLt's candidate "
              "kernels and keeps the fastest for its shape; 0: cuBLAS's own pick"),
    text_knob(Knob::nccl_library, "LIFTOFF_NCCL_LIBRARY", "libnccl.so.2, else libnccl.so",
              "the NCCL library file to load (only that one)"),
    text_knob(Knob::mpi_library, "LIFTOFF_MPI_LIBRARY", "libmpi.so.40, else libmpi.so",
              "the MPI library file to load (only that one; the MPI the build was compiled against)"),
    number_knob(Knob::nvml_interval_s, "LIFTOFF_NVML_INTERVAL_S", "the report's period, 0.1 s", 0, true,
                "GPU (NVML) sampling period of the report, seconds"),
    number_knob(
        Knob::loader_stall_s, "LIFTOFF_LOADER_STALL_S", "60", 0, false,
        "seconds the training thread waits for one batch before the loader prints its state to stderr "
        "(then again each period; 0: never)"),
    number_knob(Knob::dist_timeout, "LIFTOFF_DIST_TIMEOUT", "ProcessGroupOptions::timeout_seconds, 45 s", 0,
                true, "seconds a collective may wait for the other ranks before the process group aborts"),
    process(text_knob(Knob::launcher, "LIFTOFF_LAUNCHER", "env",
                      "the launcher's name in the report (`train --gpus` sets it)")),
    process(text_knob(Knob::nccl_id, "LIFTOFF_NCCL_ID",
                      "from LIFTOFF_NCCL_ID_FILE, MPI, or fresh for one rank",
                      "the NCCL unique id itself, 256 hex characters")),
    process(text_knob(
        Knob::nccl_id_file, "LIFTOFF_NCCL_ID_FILE", "not used",
        "file through which rank 0 hands the NCCL unique id to the others (`train --gpus` sets it)")),
    rank_variable(Knob::rank, "RANK", "single process",
                  "this process's rank (`train --gpus`, torchrun-style launchers)"),
    rank_variable(Knob::world_size, "WORLD_SIZE", "single process", "processes in the job"),
    rank_variable(Knob::local_rank, "LOCAL_RANK", "RANK", "this process's rank on its machine"),
    rank_variable(Knob::local_world_size, "LOCAL_WORLD_SIZE", "WORLD_SIZE",
                  "processes of the job on this machine"),
    rank_variable(Knob::ompi_rank, "OMPI_COMM_WORLD_RANK", "not under mpirun",
                  "rank under Open MPI's mpirun"),
    rank_variable(Knob::ompi_world_size, "OMPI_COMM_WORLD_SIZE", "not under mpirun",
                  "processes under Open MPI's mpirun"),
    rank_variable(Knob::ompi_local_rank, "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
                  "local rank under Open MPI's mpirun"),
    rank_variable(Knob::ompi_local_size, "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE",
                  "processes on this machine under Open MPI's mpirun"),
    process(text_knob(
        Knob::xdg_cache_home, "XDG_CACHE_HOME", "HOME/.cache",
        "the user's cache folder (the convolution algorithm store goes under it, LIFTOFF_CONV_CACHE)")),
    process(text_knob(Knob::home, "HOME", "no cache folder: the algorithm store is off",
                      "the user's home folder (its .cache when XDG_CACHE_HOME is unset)")),
    process(text_knob(Knob::cuda_injection64_path, "CUDA_INJECTION64_PATH", "no CUDA profiler attached",
                      "set by CUDA profilers: the convolution algorithm store is then read but not written "
                      "(choices timed under a profiler are not the run's; so too when a profiler's library "
                      "is loaded)")),
};

constexpr size_t kCount = static_cast<size_t>(Knob::count_);
static_assert(sizeof(kTable) / sizeof(kTable[0]) == kCount, "one table row per Knob");
constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < kCount; ++i) {
    if (static_cast<size_t>(kTable[i].knob) != i) return false;
  }
  return true;
}
static_assert(rows_in_enum_order(), "kTable rows must follow the order of enum Knob");

using Value = std::variant<std::monostate, bool, int64_t, double, std::string>;

std::string default_text(const Entry& e) {
  return e.default_value != nullptr ? std::string(e.default_value)
                                    : "unset (" + std::string(e.unset_means) + ")";
}

[[noreturn]] void reject(const Entry& e, const std::string& text) {
  throw ValueError(str_cat(e.name, "=", text, ": expected ", accepted(e), "; default ", default_text(e)));
}

Value parse(const Entry& e, const std::string& text) {
  switch (e.type) {
    case Type::boolean:
      for (const char* yes : {"1", "true", "on", "yes"}) {
        if (text == yes) return true;
      }
      for (const char* no : {"0", "false", "off", "no"}) {
        if (text == no) return false;
      }
      reject(e, text);
    case Type::integer: {
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno != 0 || end == text.c_str() || *end != '\0' || v < e.min || v > e.max) reject(e, text);
      return static_cast<int64_t>(v);
    }
    case Type::number: {
      errno = 0;
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      const bool in_range = e.min_exclusive ? v > e.min : v >= e.min;
      if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v) || !in_range)
        reject(e, text);
      return v;
    }
    case Type::choice: {
      std::istringstream words(e.choices);
      for (std::string word; std::getline(words, word, '|');) {
        if (word == text) return text;
      }
      reject(e, text);
    }
    case Type::text:
      return text;
  }
  reject(e, text);
}

// What the process knows of one entry. Settings read the environment once; process variables every time.
struct Slot {
  bool env_read = false;
  std::optional<std::string> env;
  bool overridden = false;
  std::optional<std::string> override_value;
  bool parsed = false;
  Value value;
};

struct Registry {
  std::mutex mutex;
  std::array<Slot, kCount> slots;
};

Registry& registry() {
  static auto* r = new Registry;  // leaked: usable from other statics' constructors and destructors
  return *r;
}

std::optional<std::string> read_environment(const char* name) {
  const char* text = std::getenv(name);  // the library's only getenv
  if (text == nullptr || *text == '\0') return std::nullopt;
  return std::string(text);
}

struct Raw {
  std::optional<std::string> text;  // nullopt: no value at all
  const char* source;
};

// Caller holds the registry's mutex.
Raw raw_locked(Slot& s, const Entry& e) {
  if (s.overridden && s.override_value) return {s.override_value, "override"};
  if (!s.overridden) {
    if (e.scope == Scope::process) {
      if (auto env = read_environment(e.name)) return {env, "env"};
    } else {
      if (!s.env_read) {
        s.env = read_environment(e.name);
        s.env_read = true;
      }
      if (s.env) return {s.env, "env"};
    }
  }
  const char* source = s.overridden ? "override" : "default";
  if (e.default_value == nullptr) return {std::nullopt, source};
  return {std::string(e.default_value), source};
}

Value resolve(Knob knob) {
  const Entry& e = entry(knob);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  Slot& s = r.slots[static_cast<size_t>(knob)];
  if (s.parsed) return s.value;
  const Raw raw = raw_locked(s, e);
  Value v = raw.text ? parse(e, *raw.text) : Value{};
  if (e.scope == Scope::setting) {
    s.value = v;
    s.parsed = true;
  }
  return v;
}

template <class T>
std::optional<T> get_as(Knob knob, bool type_ok, const char* accessor) {
  LIFTOFF_CHECK(type_ok, ValueError, "config::", accessor, "(", name(knob), "): the table declares it as ",
                accepted(entry(knob)));
  const Value v = resolve(knob);
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  return std::get<T>(v);
}

const char* type_name(Type t) {
  switch (t) {
    case Type::boolean:
      return "bool";
    case Type::integer:
      return "int";
    case Type::number:
      return "double";
    case Type::text:
      return "string";
    case Type::choice:
      return "choice";
  }
  return "?";
}

}  // namespace

const Entry& entry(Knob knob) {
  const auto i = static_cast<size_t>(knob);
  LIFTOFF_CHECK(i < kCount, ValueError, "config: knob ", i, " is not in the table");
  return kTable[i];
}

const std::vector<Knob>& all_knobs() {
  static const std::vector<Knob> knobs = [] {
    std::vector<Knob> v;
    for (const Entry& e : kTable) v.push_back(e.knob);
    return v;
  }();
  return knobs;
}

const char* name(Knob knob) {
  return entry(knob).name;
}

std::optional<Knob> find(std::string_view name) {
  for (const Entry& e : kTable) {
    if (name == e.name) return e.knob;
  }
  return std::nullopt;
}

std::string accepted(const Entry& e) {
  std::ostringstream out;
  switch (e.type) {
    case Type::boolean:
      return "0 or 1 (or false/true, off/on, no/yes)";
    case Type::integer:
      out << "an integer in [" << static_cast<int64_t>(e.min) << ", " << static_cast<int64_t>(e.max) << "]";
      return out.str();
    case Type::number:
      out << "a number " << (e.min_exclusive ? "> " : ">= ") << e.min;
      return out.str();
    case Type::choice: {
      std::string words = "one of ";
      for (const char* c = e.choices; *c != '\0'; ++c)
        words += *c == '|' ? std::string(", ") : std::string(1, *c);
      return words;
    }
    case Type::text:
      return "any text";
  }
  return "?";
}

std::optional<bool> get_bool(Knob knob) {
  return get_as<bool>(knob, entry(knob).type == Type::boolean, "get_bool");
}

std::optional<int64_t> get_int(Knob knob) {
  return get_as<int64_t>(knob, entry(knob).type == Type::integer, "get_int");
}

std::optional<double> get_double(Knob knob) {
  return get_as<double>(knob, entry(knob).type == Type::number, "get_double");
}

std::optional<std::string> get_string(Knob knob) {
  const Type t = entry(knob).type;
  return get_as<std::string>(knob, t == Type::text || t == Type::choice, "get_string");
}

bool is_set(Knob knob) {
  const Entry& e = entry(knob);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  Slot& s = r.slots[static_cast<size_t>(knob)];
  const Raw raw = raw_locked(s, e);
  return raw.text.has_value() && std::string(raw.source) != "default";
}

ScopedSetting::ScopedSetting(Knob knob, std::optional<std::string> value) : knob_(knob) {
  entry(knob);  // checks the knob
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  Slot& s = r.slots[static_cast<size_t>(knob)];
  had_override_ = s.overridden;
  previous_ = s.override_value;
  s.overridden = true;
  s.override_value = value && !value->empty() ? std::move(value) : std::nullopt;
  s.parsed = false;
}

ScopedSetting::~ScopedSetting() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  Slot& s = r.slots[static_cast<size_t>(knob_)];
  s.overridden = had_override_;
  s.override_value = previous_;
  s.parsed = false;
}

std::vector<Row> list() {
  std::vector<Row> rows;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const Entry& e : kTable) {
    const Raw raw = raw_locked(r.slots[static_cast<size_t>(e.knob)], e);
    Row row{&e, type_name(e.type), accepted(e), default_text(e), raw.text.value_or(""), raw.source};
    if (raw.text) {
      try {
        parse(e, *raw.text);
      } catch (const ValueError&) {
        row.value += " (invalid: expected " + row.accepted + ")";
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string format_table() {
  std::ostringstream out;
  for (const Scope scope : {Scope::setting, Scope::process}) {
    out << (scope == Scope::setting
                ? "Settings (environment, read once; the source says where a value is from)\n"
                : "Process variables (set by launchers)\n");
    for (const Row& row : list()) {
      if (row.entry->scope != scope) continue;
      const std::string value = row.value.empty() ? " (unset)" : "=" + row.value;
      out << "  " << row.entry->name << value << "  [" << row.source << "]\n"
          << "      " << row.entry->doc << "\n"
          << "      " << row.type << ": " << row.accepted << "; default " << row.default_text << "\n";
    }
  }
  return out.str();
}

}  // namespace liftoff::config
