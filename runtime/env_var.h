// Numeric settings from environment variables (LIFTOFF_DIST_TIMEOUT, LIFTOFF_NVML_INTERVAL_S, ...), checked:
// a value that is not a number, or is out of range, is a ValueError naming the variable, never silently 0.
#pragma once
#include <optional>

namespace liftoff {

// nullopt when `name` is unset or empty; otherwise its value, which must be a number >= minimum (> minimum
// when minimum_exclusive). `what` describes it for the error, e.g. "a positive number of seconds".
std::optional<double> env_number(const char* name, double minimum, bool minimum_exclusive, const char* what);

}  // namespace liftoff
