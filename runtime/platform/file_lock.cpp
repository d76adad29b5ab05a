#include "runtime/platform/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/error.h"

namespace liftoff::platform {

namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  for (off_t at = 0; out.size() < 4096;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

[[noreturn]] void lock_fail(const std::string& path, const char* what, int err) {
  throw IOError(str_cat("lock file '", path, "': ", what, ": ", std::strerror(err),
                        "; check that the directory is writable"));
}

}  // namespace

std::string process_description() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  return str_cat("pid ", ::getpid(), " on ", host);
}

LockAttempt FileLock::try_lock(const std::string& path, const std::string& description) {
  // A releasing holder unlinks the file while it still holds the lock: a lock taken on an unlinked inode
  // protects nothing, so retry until the locked file is the one under `path`.
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) lock_fail(path, "cannot create it", errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      LockAttempt refused;
      refused.held_by = read_all(fd);
      ::close(fd);
      if (err != EWOULDBLOCK) lock_fail(path, "cannot lock it", err);
      if (refused.held_by.empty()) refused.held_by = "another process";
      return refused;
    }
    struct stat locked {
    }, named{};
    if (::fstat(fd, &locked) != 0 || ::stat(path.c_str(), &named) != 0 || locked.st_ino != named.st_ino ||
        locked.st_dev != named.st_dev) {
      ::close(fd);
      continue;
    }
    LockAttempt taken;
    taken.stale_from = read_all(fd);
    const std::string text = description + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      const int err = errno;
      ::close(fd);
      lock_fail(path, "cannot write it", err);
    }
    taken.lock.reset(new FileLock(path, fd));
    return taken;
  }
  throw IOError(str_cat("lock file '", path, "': it keeps being replaced by other processes; try again"));
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace liftoff::platform
