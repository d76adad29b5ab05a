// Who this process is (host name, process id), for file names that must not collide between runs.
#pragma once
#include <cstdint>
#include <string>

namespace liftoff::platform {

std::string host_name();  // "?" when the system does not say
int64_t process_id();

}  // namespace liftoff::platform
