// An exclusive, advisory lock on a file, held for the life of the object: a training run holds one in its
// checkpoint directory so a second run cannot write there at the same time. POSIX flock(2): the kernel drops
// the lock when the process dies (also on SIGKILL), so a lock file left behind by a dead process is stale and
// the next run takes it over. Kept in this platform file so a Windows port (LockFileEx) swaps this file only.
#pragma once
#include <memory>
#include <string>

namespace liftoff::platform {

class FileLock;

struct LockAttempt {
  std::unique_ptr<FileLock> lock;  // null: another live process holds it
  std::string held_by;             // when refused: the holder's description (what it wrote into the file)
  std::string stale_from;          // when taken over: what a dead holder left in the file ("" if none)
};

class FileLock {
 public:
  // Tries (without waiting) to lock `path`, creating it if needed. On success the file holds `description`
  // (e.g. "pid 123 on host, since ..."), for the message another process shows when it is refused. Throws
  // IOError when the file cannot be created or locked for another reason than a live holder.
  static LockAttempt try_lock(const std::string& path, const std::string& description);
  // Removes the file, then releases the lock.
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  FileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

// "pid <pid> on <host>": what a lock of this process says about it.
std::string process_description();

}  // namespace liftoff::platform
