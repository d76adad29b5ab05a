// Errors are values the user can act on: every library failure throws a liftoff::Error subclass whose
// message names the op, the shapes/dtypes/device involved and a hint. Only tools/ catch and exit.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace liftoff {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Wrong shapes, dtypes, devices or argument values passed to an op or module.
class ShapeError : public Error {
  using Error::Error;
};
class DTypeError : public Error {
  using Error::Error;
};
class DeviceError : public Error {
  using Error::Error;
};
class ValueError : public Error {
  using Error::Error;
};
// A backend call (CUDA, cuBLAS, cuDNN, NCCL, MPI) failed.
class BackendError : public Error {
  using Error::Error;
};
// Device or host memory could not be allocated.
class OutOfMemoryError : public Error {
  using Error::Error;
};
// A file could not be read, or its content is not what it claims to be.
class IOError : public Error {
  using Error::Error;
};

namespace detail {
inline void stream_all(std::ostringstream&) {}
template <class T, class... Rest>
void stream_all(std::ostringstream& out, const T& first, const Rest&... rest) {
  out << first;
  stream_all(out, rest...);
}
}  // namespace detail

// Concatenates streamable pieces into one message: str_cat("conv2d: expected ", 4, "-D input").
template <class... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream out;
  detail::stream_all(out, parts...);
  return out.str();
}

}  // namespace liftoff

// Argument checks in op fronts: LIFTOFF_CHECK(cond, ShapeError, "conv2d: ...", shape_str(x)).
#define LIFTOFF_CHECK(cond, ErrorType, ...)                 \
  do {                                                      \
    if (!(cond)) throw ErrorType(::liftoff::str_cat(__VA_ARGS__)); \
  } while (0)
