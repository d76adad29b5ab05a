// Where is every thread? `kill -USR1 <pid>` on a run that seems stuck prints each thread's stack to stderr
// (like Python's faulthandler), and the run goes on. Frames are printed as binary(+offset): turn them into
// function names with `addr2line -f -C -e <binary> <offset>`. Linux only; a debugging aid, not for hot paths.
#pragma once
#include <csignal>

namespace liftoff::tools {

// Installs the handler for `signal` (SIGUSR1 by default) and a real-time signal used to reach each thread.
void install_stack_dump_signal(int signal = SIGUSR1);

}  // namespace liftoff::tools
