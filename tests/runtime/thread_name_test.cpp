// The platform helper that names threads, and the names of the threads the library starts (seen by the stack
// dump and by tools such as top -H through /proc/self/task/<tid>/comm).
#include "runtime/platform/thread_name.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace liftoff {
namespace {

// Names of all threads of this process, as the system reports them.
std::multiset<std::string> thread_names() {
  std::multiset<std::string> names;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return names;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name)) names.insert(name);
  }
  closedir(dir);
  return names;
}

#if defined(__linux__)

TEST(ThreadName, NamesTheCallingThreadAsProcSeesIt) {
  std::mutex mutex;
  std::condition_variable cv;
  bool named = false;
  bool done = false;
  std::thread t([&] {
    platform::set_current_thread_name("lo-test-7");
    EXPECT_EQ(platform::current_thread_name(), "lo-test-7");
    std::unique_lock<std::mutex> lock(mutex);
    named = true;
    cv.notify_all();
    cv.wait(lock, [&] { return done; });
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return named; });
  }
  EXPECT_EQ(thread_names().count("lo-test-7"), 1u);
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
  }
  cv.notify_all();
  t.join();
  EXPECT_EQ(thread_names().count("lo-test-7"), 0u);
}

TEST(ThreadName, CutsLongNamesToWhatTheSystemKeeps) {
  std::thread t([] {
    platform::set_current_thread_name("lo-a-name-much-longer-than-fifteen");
    const std::string name = platform::current_thread_name();
    EXPECT_EQ(name.size(), platform::kMaxThreadNameLength);
    EXPECT_EQ(name,
              std::string("lo-a-name-much-longer-than-fifteen").substr(0, platform::kMaxThreadNameLength));
  });
  t.join();
}

#endif

}  // namespace
}  // namespace liftoff
