#include "tools/common/signals.h"

#include <unistd.h>
#include <csignal>

namespace liftoff::tools {

namespace {
volatile std::sig_atomic_t g_signal = 0;

void on_signal(int sig) {
  if (g_signal == SIGINT && sig == SIGINT) _exit(130);  // the second Ctrl-C: leave now
  g_signal = sig;
}
}  // namespace

void install_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() {
  return static_cast<int>(g_signal);
}

}  // namespace liftoff::tools
