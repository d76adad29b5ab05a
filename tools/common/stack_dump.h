// Where is every thread? `kill -USR1 <pid>` on a run that seems stuck prints each thread's stack to stderr
// (like Python's faulthandler), and the run goes on. Each thread is headed by its id and its name (the
// library names the threads it starts: "lo-worker-0", "lo-decode-1", "lo-sampler", ...). Frames are printed
// as binary(symbol+offset) [address]; the tool is linked with -rdynamic (ENABLE_EXPORTS) so that its own
// functions have names. Names stay mangled: demangling allocates, which a signal handler must not do. Pipe
// the dump through `c++filt` to demangle it; a frame without a name (a static function) is found with
// `addr2line -f -C -e <binary> <offset>`. Linux only; a debugging aid, not for hot paths.
#pragma once
#include <csignal>

namespace liftoff::tools {

// Installs the handler for `signal` (SIGUSR1 by default) and a real-time signal used to reach each thread.
void install_stack_dump_signal(int signal = SIGUSR1);

}  // namespace liftoff::tools
