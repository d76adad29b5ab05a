#include "runtime/env_var.h"

#include <cerrno>
#include <cstdlib>

#include "runtime/error.h"

namespace liftoff {

std::optional<double> env_number(const char* name, double minimum, bool minimum_exclusive, const char* what) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  const bool in_range = minimum_exclusive ? value > minimum : value >= minimum;
  LIFTOFF_CHECK(errno == 0 && end != text && *end == '\0' && in_range, ValueError, name, "='", text,
                "' is not ", what);
  return value;
}

}  // namespace liftoff
