#include "runtime/env_var.h"

#include "runtime/config.h"
#include "runtime/error.h"

namespace liftoff {

std::optional<double> env_number(const char* name, double /*minimum*/, bool /*minimum_exclusive*/,
                                 const char* /*what*/) {
  const std::optional<config::Knob> knob = config::find(name);
  LIFTOFF_CHECK(knob.has_value(), ValueError, "env_number: ", name, " is not in runtime/config's table");
  switch (config::entry(*knob).type) {
    case config::Type::boolean: {
      const std::optional<bool> on = config::get_bool(*knob);
      return on ? std::optional<double>(*on ? 1.0 : 0.0) : std::nullopt;
    }
    case config::Type::integer: {
      const std::optional<int64_t> v = config::get_int(*knob);
      return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
    }
    case config::Type::number:
      return config::get_double(*knob);
    default:
      break;
  }
  throw ValueError(str_cat("env_number: ", name, " is not a number in runtime/config's table"));
}

}  // namespace liftoff
