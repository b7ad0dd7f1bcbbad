#include "base/subprocess.h"

// How it works: two pipes (one when stderr is merged) are made close-on-exec, posix_spawn
// dups their write ends onto 1 and 2 and opens /dev/null as 0; the parent closes the write
// ends, polls the read ends until both report end of file or the deadline passes (then SIGKILL
// to the child, or to its group), closes what is left and reaps the child with waitpid.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/fd.h"

namespace ddl::base {

namespace {

std::vector<char*> c_strings(const std::vector<std::string>& words) {
  std::vector<char*> out;
  for (const std::string& w : words)
    out.push_back(const_cast<char*>(w.c_str()));
  out.push_back(nullptr);
  return out;
}

/// The read ends of the child's output pipes, and where each one's bytes go.
struct Pipes {
  int read_fd[2] = {-1, -1};
  int write_fd[2] = {-1, -1};
  int count = 0;

  ~Pipes() {
    for (int i = 0; i < 2; ++i) {
      if (read_fd[i] >= 0) close(read_fd[i]);
      if (write_fd[i] >= 0) close(write_fd[i]);
    }
  }
  int open(int n) {
    for (count = 0; count < n; ++count) {
      int fds[2];
      if (pipe2(fds, O_CLOEXEC) != 0) return errno;
      read_fd[count] = fds[0];
      write_fd[count] = fds[1];
    }
    return 0;
  }
  void close_write_ends() {
    for (int& fd : write_fd) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  }
};

int spawn(const std::vector<std::string>& argv, const CaptureOptions& options, const Pipes& pipes,
          pid_t& pid) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipes.write_fd[0], 1);
  posix_spawn_file_actions_adddup2(&actions, pipes.write_fd[pipes.count - 1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The child starts with no signal blocked, whatever this thread blocks (ddlrun keeps its stop
  // signals blocked between the attempts of a restarted job).
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(
      &attr,
      static_cast<short>(POSIX_SPAWN_SETSIGMASK | (options.own_group ? POSIX_SPAWN_SETPGROUP : 0)));
  auto cargv = c_strings(argv);
  auto cenv = c_strings(options.environ);
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

/// Reads both pipes to their end; false when the deadline passed first.
bool drain(Pipes& pipes, Captured& result, const std::optional<Deadline>& deadline) {
  pollfd fds[2] = {{pipes.read_fd[0], POLLIN, 0}, {pipes.read_fd[1], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = pipes.count;
  while (open_fds > 0) {
    if (deadline && deadline->passed()) return false;
    const int n = poll(fds, 2, deadline ? deadline->poll_ms() : -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return true;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[8192];
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
        continue;
      }
      fds[i].fd = -1;
      --open_fds;
    }
  }
  return true;
}

}  // namespace

Captured run_capture(const std::vector<std::string>& argv, const CaptureOptions& options) {
  Captured result;
  Pipes pipes;
  if (argv.empty()) {
    result.spawn_error = ENOENT;
    return result;
  }
  if ((result.spawn_error = pipes.open(options.merge_stderr ? 1 : 2)) != 0) return result;
  pid_t pid = -1;
  result.spawn_error = spawn(argv, options, pipes, pid);
  pipes.close_write_ends();
  if (result.spawn_error != 0) return result;
  std::optional<Deadline> deadline;
  if (options.timeout) deadline.emplace(*options.timeout);
  if (!drain(pipes, result, deadline)) {
    result.timed_out = true;
    kill(options.own_group ? -pid : pid, SIGKILL);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace ddl::base
