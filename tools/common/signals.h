// SIGINT/SIGTERM for long runs: the first asks the run to stop after the current step (it then saves a
// checkpoint and exits 130/143); a second SIGINT exits at once. POSIX; the handler only sets a flag.
#pragma once

namespace liftoff::tools {

void install_stop_signals();
// 0 while no stop was asked for, else the signal number (SIGINT or SIGTERM).
int stop_signal();

}  // namespace liftoff::tools
