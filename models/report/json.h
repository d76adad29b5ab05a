// JSON both ways through one field description per struct. A description is a function template over an
// "io" that names each field once:
//
//   template <class Io, class C> void describe(Io& io, C& c) {  // C: RunConfig or const RunConfig
//     io("tool", c.tool);
//     io.object("step_ms", [&](auto& sub) { sub("mean", c.mean); });
//   }
//
// JsonWriter puts the fields into a JSON object (in the described order); JsonReader takes them out,
// checking presence and type, and throws IOError naming the source file and the field's JSON path
// ("x.json: not a valid liftoff.report/1 report: missing field 'stages.backward.host_ms'"). Optionals are
// written as null and read back from null; io.when_present(key, ...) marks fields a document may lack.
// Internal to models/report (.cpp files only: it brings nlohmann).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace liftoff::report_json {

using json = nlohmann::ordered_json;

// A figure written as null when it was not measured, read back as 0 from null (NVML figures).
template <class T>
struct NullUnless {
  bool measured;
  T& value;
};
template <class T>
NullUnless<T> null_unless(bool measured, T& value) {
  return {measured, value};
}

class JsonWriter {
 public:
  explicit JsonWriter(json& out) : out_(out) { out_ = json::object(); }

  template <class T>
  void operator()(const char* key, const T& value) {
    out_[key] = value;
  }
  template <class T>
  void operator()(const char* key, const std::optional<T>& value) {
    out_[key] = value ? json(*value) : json(nullptr);
  }
  template <class T>
  void operator()(const char* key, NullUnless<T> v) {
    out_[key] = v.measured ? json(v.value) : json(nullptr);
  }
  template <class F>
  void object(const char* key, F&& describe) {
    JsonWriter sub(out_[key]);
    describe(sub);
  }
  template <class T, class F>
  void array(const char* key, const std::vector<T>& items, F&& describe) {
    json arr = json::array();
    for (const T& item : items) {
      json e;
      JsonWriter sub(e);
      describe(sub, item);
      arr.push_back(std::move(e));
    }
    out_[key] = std::move(arr);
  }
  // Fields a document may lack, whose presence `key` marks (fields added after the schema's first release,
  // sections only some runs have): written when `write`, read only when present.
  template <class F>
  void when_present(const char* /*key*/, F&& describe, bool write = true) {
    if (write) describe(*this);
  }

 private:
  json& out_;
};

class JsonReader {
 public:
  // what: the document's kind in error messages ("liftoff.report/1 report").
  JsonReader(const json& in, std::string source, std::string what, std::string path = "")
      : in_(in), source_(std::move(source)), what_(std::move(what)), path_(std::move(path)) {}

  void operator()(const char* key, std::string& v) {
    v = get<std::string>(key, &json::is_string, "a string");
  }
  void operator()(const char* key, bool& v) { v = get<bool>(key, &json::is_boolean, "true or false"); }
  void operator()(const char* key, double& v) { v = get<double>(key, &json::is_number, "a number"); }
  void operator()(const char* key, int64_t& v) {
    v = get<int64_t>(key, &json::is_number_integer, "an integer");
  }
  void operator()(const char* key, int& v) {
    v = static_cast<int>(get<int64_t>(key, &json::is_number_integer, "an integer"));
  }
  void operator()(const char* key, std::optional<double>& v) {
    v = get_optional<double>(key, &json::is_number, "a number");
  }
  void operator()(const char* key, std::optional<int64_t>& v) {
    v = get_optional<int64_t>(key, &json::is_number_integer, "an integer");
  }
  template <class T>
  void operator()(const char* key, NullUnless<T> v) {
    using Read = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
    std::optional<Read> read;
    (*this)(key, read);
    v.value = static_cast<T>(read.value_or(Read{0}));
  }
  void operator()(const char* key, std::vector<double>& v) {
    const json& a = need(key);
    if (!a.is_array()) bad("field '" + path_ + key + "' must be an array");
    v.clear();
    for (const json& e : a) {
      if (!e.is_number()) bad("field '" + path_ + key + "' must hold numbers");
      v.push_back(e.get<double>());
    }
  }
  template <class F>
  void object(const char* key, F&& describe) {
    JsonReader sub(need(key), source_, what_, path_ + key + ".");
    describe(sub);
  }
  template <class T, class F>
  void array(const char* key, std::vector<T>& items, F&& describe) {
    const json& a = need(key);
    if (!a.is_array()) bad("field '" + path_ + key + "' must be an array");
    items.clear();
    for (const json& e : a) {
      JsonReader sub(e, source_, what_, path_ + key + "[].");
      describe(sub, items.emplace_back());
    }
  }
  // See JsonWriter::when_present: read only when `key` is present.
  template <class F>
  void when_present(const char* key, F&& describe, bool /*write*/ = true) {
    if (in_.is_object() && in_.contains(key)) describe(*this);
  }

  [[noreturn]] void bad(const std::string& message) const {
    throw IOError(source_ + ": not a valid " + what_ + ": " + message);
  }

 private:
  using Is = bool (json::*)() const noexcept;

  const json& need(const char* key) const {
    if (!in_.is_object() || !in_.contains(key)) bad("missing field '" + path_ + key + "'");
    return in_.at(key);
  }
  template <class T>
  T get(const char* key, Is is, const char* type) const {
    const json& v = need(key);
    if (!(v.*is)()) bad("field '" + path_ + key + "' must be " + type);
    return v.get<T>();
  }
  template <class T>
  std::optional<T> get_optional(const char* key, Is is, const char* type) const {
    const json& v = need(key);
    if (v.is_null()) return std::nullopt;
    if (!(v.*is)()) bad("field '" + path_ + key + "' must be " + type + " or null");
    return v.get<T>();
  }

  const json& in_;
  std::string source_, what_, path_;
};

}  // namespace liftoff::report_json
