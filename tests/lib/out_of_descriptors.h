#pragma once
// listener_out_of_descriptors(): what a listener does when its process has no descriptor left
// for a queued connection (accept() fails with EMFILE): it must leave its listening socket
// alone for a while rather than spin on it (base::AcceptRest), and take the connection once a
// descriptor frees. Header-only, for the tests of every listener: libddl's rendezvous server,
// ddlrun's node rendezvous, the link agent. It lowers the descriptor limit: run it in a forked
// child (in_child).

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/lib/dial.h"

namespace ddl::testing {

/// What listener_out_of_descriptors() found, as a child's exit status.
enum OutOfDescriptors : int {
  kRestedThenTook = 0,
  kSpun = 1,         ///< the process spent over kSpinMs of CPU in the second out of descriptors
  kNotTaken = 2,     ///< no byte from the listener within 3 s of a descriptor freeing
  kNoLimit = 3,      ///< setrlimit() failed
  kNoConnection = 4  ///< the last descriptor could not connect
};

/// CPU time in the second out of descriptors above which the listener counts as spinning
/// (one that spins spends about 1000 ms; one that rests, a few).
inline constexpr long kSpinMs = 300;

/// The CPU time this process has spent, in milliseconds.
inline long process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1000L + t.tv_nsec / 1'000'000L;
}

/// The highest descriptor this process has open.
inline int highest_descriptor() {
  int highest = 2;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d))
      highest = std::max(highest, std::atoi(e->d_name));
    closedir(d);
  }
  return highest;
}

/// For a listener on 127.0.0.1:`port` that runs in a thread of this process and speaks first
/// (a challenge): lowers the descriptor limit, uses up every descriptor but one, connects with
/// that one, and measures this process's CPU time for 1 s while the connection waits in the
/// listening queue; then frees two descriptors and waits 3 s for the listener's first byte.
inline int listener_out_of_descriptors(int port) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = static_cast<rlim_t>(highest_descriptor() + 16);
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return kNoLimit;
  std::vector<int> spare;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;)
    spare.push_back(fd);
  close(spare.back());
  spare.pop_back();
  const int client = dial(port);  // the last descriptor
  if (client < 0) return kNoConnection;
  const long before = process_cpu_ms();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the connection waits in the queue
  const long spent = process_cpu_ms() - before;
  for (int i = 0; i < 2; ++i) {  // descriptors free: the listener takes it and challenges it
    close(spare.back());
    spare.pop_back();
  }
  pollfd p{client, POLLIN, 0};
  char byte = 0;
  const bool taken = poll(&p, 1, 3000) == 1 && recv(client, &byte, 1, 0) == 1;
  close(client);
  for (int fd : spare)
    close(fd);
  if (spent > kSpinMs) return kSpun;
  return taken ? kRestedThenTook : kNotTaken;
}

/// Runs `body` in a forked child (which keeps this process's descriptors and limit untouched)
/// and returns its exit status, or 128 + the signal that killed it.
inline int in_child(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// What a status of listener_out_of_descriptors() means, for a test's failure message.
inline std::string out_of_descriptors_text(int status) {
  switch (status) {
    case kRestedThenTook:
      return "rested, then took the connection";
    case kSpun:
      return "spun on the CPU while out of descriptors";
    case kNotTaken:
      return "did not take the connection once a descriptor freed";
    case kNoLimit:
      return "setrlimit failed";
    case kNoConnection:
      return "could not connect";
    default:
      return "the child ended with status " + std::to_string(status);
  }
}

}  // namespace ddl::testing
