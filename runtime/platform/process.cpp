#include "runtime/platform/process.h"

#include <unistd.h>

namespace liftoff::platform {

std::string host_name() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "?";
  return host;
}

int64_t process_id() {
  return static_cast<int64_t>(::getpid());
}

}  // namespace liftoff::platform
