// runtime/config: the one table of environment settings, its parsing, errors, scoped overrides and listing.
#include "runtime/config.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"

namespace liftoff::config {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the ValueError `fn` throws; fails the test when it throws none.
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const ValueError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ValueError";
  return "";
}

TEST(Config, EveryRowIsWellFormed) {
  std::set<std::string> names;
  for (Knob k : all_knobs()) {
    const Entry& e = entry(k);
    EXPECT_EQ(e.knob, k);
    EXPECT_TRUE(names.insert(e.name).second) << e.name << " twice";
    EXPECT_EQ(find(e.name), k);
    EXPECT_GT(std::string(e.doc).size(), 10u) << e.name;
    if (e.scope == Scope::setting) {
      EXPECT_EQ(std::string(e.name).rfind("LIFTOFF_", 0), 0u) << e.name;
    }
    EXPECT_TRUE(e.default_value != nullptr || e.unset_means != nullptr) << e.name << " says nothing of unset";
    if (e.type == Type::choice) {
      EXPECT_NE(e.choices, nullptr) << e.name;
    }
    // Every default parses as its own type.
    ScopedSetting unset(k, std::nullopt);
    EXPECT_NO_THROW({
      switch (e.type) {
        case Type::boolean:
          EXPECT_EQ(get_bool(k).has_value(), e.default_value != nullptr);
          break;
        case Type::integer:
          EXPECT_EQ(get_int(k).has_value(), e.default_value != nullptr);
          break;
        case Type::number:
          EXPECT_EQ(get_double(k).has_value(), e.default_value != nullptr);
          break;
        case Type::text:
        case Type::choice:
          EXPECT_EQ(get_string(k).has_value(), e.default_value != nullptr);
          break;
      }
    }) << e.name;
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(Knob::count_));
  EXPECT_FALSE(find("LIFTOFF_NO_SUCH_KNOB").has_value());
}

TEST(Config, Booleans) {
  for (const char* on : {"1", "true", "on", "yes"}) {
    ScopedSetting s(Knob::graph_log, on);
    EXPECT_EQ(get_bool(Knob::graph_log), true) << on;
  }
  for (const char* off : {"0", "false", "off", "no"}) {
    ScopedSetting s(Knob::graph_log, off);
    EXPECT_EQ(get_bool(Knob::graph_log), false) << off;
  }
  ScopedSetting bad(Knob::graph_log, "2");
  const std::string message = error_of([] { get_bool(Knob::graph_log); });
  EXPECT_TRUE(contains(message, "LIFTOFF_GRAPH_LOG=2: expected 0 or 1")) << message;
  EXPECT_TRUE(contains(message, "; default 0")) << message;
}

TEST(Config, IntegersAndTheirRange) {
  {
    ScopedSetting s(Knob::cpu_winograd, "2");
    EXPECT_EQ(get_int(Knob::cpu_winograd), 2);
  }
  {
    ScopedSetting s(Knob::cpu_winograd, std::nullopt);
    EXPECT_EQ(get_int(Knob::cpu_winograd), 1);  // the default
  }
  for (const char* bad : {"3", "-1", "1.5", "x", "2x", "99999999999999999999"}) {
    ScopedSetting s(Knob::cpu_winograd, bad);
    const std::string message = error_of([] { get_int(Knob::cpu_winograd); });
    EXPECT_TRUE(contains(
        message, std::string("LIFTOFF_CPU_WINOGRAD=") + bad + ": expected an integer in [0, 2]; default 1"))
        << message;
  }
}

TEST(Config, NumbersAndTheirMinimum) {
  {
    ScopedSetting s(Knob::dist_timeout, "7.5");
    EXPECT_DOUBLE_EQ(*get_double(Knob::dist_timeout), 7.5);
  }
  {
    ScopedSetting s(Knob::cudnn_workspace_mb, "0");  // inclusive minimum
    EXPECT_DOUBLE_EQ(*get_double(Knob::cudnn_workspace_mb), 0.0);
  }
  {
    ScopedSetting s(Knob::dist_timeout, std::nullopt);
    EXPECT_FALSE(get_double(Knob::dist_timeout).has_value());  // the caller's default applies
  }
  for (const char* bad : {"0", "-1", "abc", "12ms", "1e999", "nan", "inf"}) {
    ScopedSetting s(Knob::dist_timeout, bad);
    const std::string message = error_of([] { get_double(Knob::dist_timeout); });
    EXPECT_TRUE(contains(message, std::string("LIFTOFF_DIST_TIMEOUT=") + bad + ": expected a number > 0"))
        << message;
    EXPECT_TRUE(contains(message, "; default unset (ProcessGroupOptions::timeout_seconds")) << message;
  }
}

TEST(Config, ChoicesAndText) {
  {
    ScopedSetting s(Knob::conv_engines, "legacy");
    EXPECT_EQ(get_string(Knob::conv_engines), "legacy");
  }
  {
    ScopedSetting s(Knob::conv_timing, std::nullopt);
    EXPECT_EQ(get_string(Knob::conv_timing), "auto");  // the default
  }
  {
    ScopedSetting s(Knob::conv_engines, "Graph");  // words are exact
    const std::string message = error_of([] { get_string(Knob::conv_engines); });
    EXPECT_TRUE(
        contains(message, "LIFTOFF_CONV_ENGINES=Graph: expected one of auto, legacy, graph; default auto"))
        << message;
  }
  {
    ScopedSetting s(Knob::cudnn_library, "/opt/cudnn/libcudnn.so.9");
    EXPECT_EQ(get_string(Knob::cudnn_library), "/opt/cudnn/libcudnn.so.9");
  }
  ScopedSetting s(Knob::cudnn_library, "");  // empty counts as unset, as in the environment
  EXPECT_FALSE(get_string(Knob::cudnn_library).has_value());
}

TEST(Config, AnAccessorOfTheWrongTypeIsAnError) {
  EXPECT_THROW(get_int(Knob::graph_log), ValueError);
  EXPECT_THROW(get_bool(Knob::conv_engines), ValueError);
  EXPECT_THROW(get_string(Knob::dist_timeout), ValueError);
}

TEST(Config, ScopedOverridesNestAndRestore) {
  const std::optional<std::string> before = get_string(Knob::conv_timing);
  {
    ScopedSetting outer(Knob::conv_timing, "graph");
    EXPECT_EQ(get_string(Knob::conv_timing), "graph");
    EXPECT_TRUE(is_set(Knob::conv_timing));
    {
      ScopedSetting inner(Knob::conv_timing, "eager");
      EXPECT_EQ(get_string(Knob::conv_timing), "eager");
    }
    EXPECT_EQ(get_string(Knob::conv_timing), "graph");
  }
  EXPECT_EQ(get_string(Knob::conv_timing), before);
  {
    ScopedSetting bad(Knob::conv_timing, "sometimes");
    EXPECT_THROW(get_string(Knob::conv_timing), ValueError);
  }
  EXPECT_EQ(get_string(Knob::conv_timing), before);  // a bad override leaves nothing behind
}

// Process variables are read at each call and an override hides them; settings are read once.
TEST(Config, ProcessVariablesFollowTheEnvironment) {
  unsetenv("RANK");
  EXPECT_FALSE(is_set(Knob::rank));
  EXPECT_FALSE(get_int(Knob::rank).has_value());
  setenv("RANK", "3", 1);
  EXPECT_TRUE(is_set(Knob::rank));
  EXPECT_EQ(get_int(Knob::rank), 3);
  {
    ScopedSetting s(Knob::rank, "5");
    EXPECT_EQ(get_int(Knob::rank), 5);
  }
  {
    ScopedSetting s(Knob::rank, std::nullopt);
    EXPECT_FALSE(is_set(Knob::rank));
    EXPECT_FALSE(get_int(Knob::rank).has_value());
  }
  EXPECT_EQ(get_int(Knob::rank), 3);
  setenv("RANK", "x1", 1);
  const std::string message = error_of([] { get_int(Knob::rank); });
  EXPECT_TRUE(contains(message, "RANK=x1: expected an integer in [0, 16777215]")) << message;
  unsetenv("RANK");
}

TEST(Config, SettingsAreReadOnce) {
  const std::optional<bool> first = get_bool(Knob::cudnn_log);
  const char* was = std::getenv("LIFTOFF_CUDNN_LOG");
  const std::string saved = was != nullptr ? was : "";
  setenv("LIFTOFF_CUDNN_LOG", first == true ? "0" : "1", 1);
  EXPECT_EQ(get_bool(Knob::cudnn_log), first);
  if (was != nullptr) {
    setenv("LIFTOFF_CUDNN_LOG", saved.c_str(), 1);
  } else {
    unsetenv("LIFTOFF_CUDNN_LOG");
  }
}

TEST(Config, ListingCoversEveryKnobWithItsSource) {
  ScopedSetting engines(Knob::conv_engines, "graph");
  ScopedSetting bad(Knob::cpu_spin_us, "soon");
  ScopedSetting unset(Knob::cpu_cache_mb, std::nullopt);
  ScopedSetting library(Knob::cudnn_library, std::nullopt);
  const std::vector<Row> rows = list();
  ASSERT_EQ(rows.size(), static_cast<size_t>(Knob::count_));
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    EXPECT_EQ(static_cast<size_t>(row.entry->knob), i);
    EXPECT_FALSE(row.type.empty());
    EXPECT_FALSE(row.default_text.empty());
    EXPECT_TRUE(row.source == "env" || row.source == "default" || row.source == "override") << row.source;
  }
  const Row& e = rows[static_cast<size_t>(Knob::conv_engines)];
  EXPECT_EQ(e.value, "graph");
  EXPECT_EQ(e.source, "override");
  EXPECT_EQ(e.type, "choice");
  EXPECT_EQ(e.accepted, "one of auto, legacy, graph");
  const Row& spin = rows[static_cast<size_t>(Knob::cpu_spin_us)];
  EXPECT_TRUE(contains(spin.value, "soon (invalid: expected an integer in"))
      << spin.value;  // listing never throws
  const Row& cache = rows[static_cast<size_t>(Knob::cpu_cache_mb)];
  EXPECT_EQ(cache.value, "1024");
  EXPECT_EQ(cache.default_text, "1024");
  EXPECT_EQ(cache.type, "int");

  const std::string table = format_table();
  for (Knob k : all_knobs()) EXPECT_TRUE(contains(table, std::string("  ") + name(k))) << name(k);
  EXPECT_TRUE(contains(table, "LIFTOFF_CUDNN_LIBRARY (unset)  [override]")) << table;
  EXPECT_TRUE(contains(table, "LIFTOFF_CONV_ENGINES=graph  [override]")) << table;
}

// docs/internals.md lists every knob of the table with its type and default, and no variable the table lacks.
TEST(Config, TheDocListsEveryKnob) {
  // ctest sets LIFTOFF_SOURCE_DIR; by hand, the binary runs from the source or the build folder.
  std::vector<std::string> candidates = {"docs/internals.md", "../docs/internals.md"};
  if (const char* root = std::getenv("LIFTOFF_SOURCE_DIR"))
    candidates.insert(candidates.begin(), root + std::string("/docs/internals.md"));
  std::ifstream in;
  for (const std::string& path : candidates) {
    in.open(path);
    if (in) break;
    in.clear();
  }
  ASSERT_TRUE(in.is_open()) << "cannot find docs/internals.md (set LIFTOFF_SOURCE_DIR)";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t start = doc.find("<!-- config table -->");
  const size_t end = doc.find("<!-- end config table -->");
  ASSERT_TRUE(start != std::string::npos && end != std::string::npos)
      << "docs/internals.md has no config table";
  const std::string table = doc.substr(start, end - start);
  for (const Row& row : list()) {  // name, type and default as the code has them
    const std::string start =
        str_cat("| `", row.entry->name, "` | ", row.type, " | ", row.default_text, " |");
    EXPECT_TRUE(contains(table, "\n" + start)) << "docs/internals.md has no row starting " << start;
  }
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::string documented = line.substr(3, line.find('`', 3) - 3);
    EXPECT_TRUE(find(documented).has_value()) << documented << " is documented but not in the table";
  }
}

// Many readers while overrides come and go: every read is one of the two values, never a torn one.
TEST(Config, ConcurrentReadersSeeWholeValues) {
  ScopedSetting base(Knob::conv_engines, "legacy");
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        const auto v = get_string(Knob::conv_engines);
        if (v != "legacy" && v != "graph") ++wrong;
      }
    });
  }
  for (int i = 0; i < 2000; ++i) ScopedSetting s(Knob::conv_engines, "graph");
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace liftoff::config
