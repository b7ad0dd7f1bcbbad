#include "comm/transport/os.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>

namespace ddl::comm::transport {

std::string safe_job(const std::string& job) {
  std::string out;
  for (char c : job.substr(0, 64))
    out.push_back(
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_');
  return out.empty() ? "job" : out;
}

int open_pidfd(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace ddl::comm::transport
