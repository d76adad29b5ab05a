#include "runtime/platform/thread_name.h"

#if defined(__linux__)
#include <pthread.h>
#endif

namespace liftoff::platform {

void set_current_thread_name(const std::string& name) {
#if defined(__linux__)
  const std::string cut = name.substr(0, kMaxThreadNameLength);  // pthread_setname_np refuses longer (ERANGE)
  (void)pthread_setname_np(pthread_self(), cut.c_str());
#else
  (void)name;
#endif
}

std::string current_thread_name() {
#if defined(__linux__)
  char name[kMaxThreadNameLength + 1] = {0};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) return {};
  return name;
#else
  return {};
#endif
}

}  // namespace liftoff::platform
