// Starting processes on this host and watching them.
//
// How it works: start() resolves the program on the PATH the process will have, builds argv,
// envp and the CPU mask before vfork() (the child of a threaded process may only make
// async-signal-safe calls, and this one borrows the parent's memory), vforks, and in the child
// sets its own process group, PR_SET_PDEATHSIG, default signal handling, the CPU mask and the
// pipes, then execs. A close-on-exec "status" pipe tells the parent whether exec succeeded: it
// reads EOF when it did, or the failing step and errno when it did not, so a failure is
// reported before start() returns. The I/O thread polls a wake pipe, every output pipe (only
// while the event queue has room: otherwise the processes block on their full pipes until the
// consumer catches up, and the queue's waker wakes the thread), every stdin pipe with data to
// write, and a pidfd per process. Output goes on as the chunks read, unchanged; a process's
// kExit is sent after it is reaped and its pipes have been drained of what is already in them
// (at most a pipe's worth or so), so its last output comes before its exit. Stdin is a bounded
// queue per process: write_stdin() waits while it is full.

#include "launcher/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"
#include "launcher/keeper.h"

extern char** environ;

namespace ddl::launcher {

namespace {

constexpr size_t kChunk = 64 * 1024;
/// Reads of one pipe per poll round, so that one busy process cannot hold the thread.
constexpr int kReadsPerRound = 4;
/// What is drained from a reaped process's pipe before its exit is reported, at most.
constexpr size_t kDrainAtExit = size_t{1} << 20;

using base::errno_text;

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

struct ProcessSet::Proc {
  int id = -1;
  pid_t pid = -1;
  int pidfd = -1;
  int out = -1;
  int err = -1;
  int in = -1;
  std::string in_queue;
  size_t in_done = 0;  ///< bytes at the front of in_queue already written
  bool close_in = false;
  bool reaped = false;
};

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    env.emplace_back(*e);
  return env;
}

std::vector<std::string> merge_environment(const std::vector<std::string>& base,
                                           const std::vector<EnvVar>& add) {
  std::vector<std::string> env;
  for (const std::string& e : base) {
    const std::string name = e.substr(0, e.find('='));
    if (std::none_of(add.begin(), add.end(), [&](const EnvVar& a) { return a.first == name; }))
      env.push_back(e);
  }
  for (const EnvVar& a : add)
    env.push_back(a.first + "=" + a.second);
  return env;
}

std::string working_directory_problem(const std::string& dir) {
  struct stat st {};
  int e = 0;
  if (stat(dir.c_str(), &st) != 0) {
    e = errno;
  } else if (!S_ISDIR(st.st_mode)) {
    e = ENOTDIR;
  } else if (access(dir.c_str(), X_OK) != 0) {
    e = errno;
  }
  if (e == 0) return "";
  const std::string what = e == ENOENT ? "is missing" : "cannot be entered";
  return "working directory " + dir + " " + what + " (" + errno_text(e) +
         "): create it there, or give --wdir DIR naming a directory every host has";
}

std::string resolve_program(const std::string& program, const std::vector<std::string>& env,
                            std::string_view where) {
  const std::string prefix = where.empty() ? "" : std::string(where) + ": ";
  if (program.empty()) throw LaunchError(prefix + "the program name is empty", 127);
  auto check = [&](const std::string& path) -> int {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (access(path.c_str(), X_OK) != 0) return errno;
    return 0;
  };
  if (program.find('/') != std::string::npos) {
    const int e = check(program);
    if (e == 0) return program;
    if (e == ENOENT || e == ENOTDIR) {
      throw LaunchError(prefix + "cannot run '" + program + "': no such file", 127);
    }
    throw LaunchError(prefix + "cannot run '" + program + "': " + errno_text(e) +
                          (e == EACCES ? " (is it executable? chmod +x)" : ""),
                      126);
  }
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& e : env) {
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  int denied = 0;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + program;
    const int e = check(candidate);
    if (e == 0) return candidate;
    if (e == EACCES) denied = e;
    start = end + 1;
  }
  if (denied != 0) {
    throw LaunchError(prefix + "cannot run '" + program + "': found on PATH but not executable",
                      126);
  }
  throw LaunchError(prefix + "cannot run '" + program + "': not found on PATH (" + path + ")", 127);
}

namespace {

/// What the child reports through the status pipe when a step fails.
struct ChildFailure {
  int step = 0;  // 1: bind CPUs, 2: exec, 3: set up, 4: enter the working directory
  int err = 0;
};

/// The path to exec for `spec` (checked before anything starts): its program resolved on its
/// PATH, a relative path ("./train") in the directory the process starts in.
std::string program_path(const SpawnSpec& spec, std::string_view where) {
  if (spec.argv.empty()) throw LaunchError(std::string(where) + ": no program to run");
  if (!spec.cwd.empty()) {
    if (const std::string problem = working_directory_problem(spec.cwd); !problem.empty()) {
      throw LaunchError(where.empty() ? problem : std::string(where) + ": " + problem);
    }
  }
  const bool relative = spec.argv[0].find('/') != std::string::npos && spec.argv[0][0] != '/';
  return resolve_program(
      relative && !spec.cwd.empty() ? spec.cwd + "/" + spec.argv[0] : spec.argv[0], spec.env,
      where);
}

/// argv, envp and the CPU mask of a process, built before fork(): the child of a threaded
/// process may only make async-signal-safe calls.
struct ExecArgs {
  explicit ExecArgs(const SpawnSpec& spec) {
    for (const std::string& a : spec.argv)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const std::string& e : spec.env)
      envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    if (!spec.cpus.empty()) {
      const int max_pu = spec.cpus.ranges().back().last;
      mask = CPU_ALLOC(max_pu + 1);
      mask_size = CPU_ALLOC_SIZE(max_pu + 1);
      CPU_ZERO_S(mask_size, mask);
      for (int pu : spec.cpus.pus())
        CPU_SET_S(pu, mask_size, mask);
    }
  }
  ~ExecArgs() {
    if (mask) CPU_FREE(mask);
  }
  ExecArgs(const ExecArgs&) = delete;
  ExecArgs& operator=(const ExecArgs&) = delete;

  std::vector<char*> argv;
  std::vector<char*> envp;
  cpu_set_t* mask = nullptr;  ///< null: inherit ddlrun's CPUs
  size_t mask_size = 0;
};

/// The pipes of a process being started ([0] the read end, [1] the write end): stdout, stderr,
/// stdin (a pipe, or /dev/null in in[0]; -1 when neither opened) and the close-on-exec status
/// pipe.
struct Pipes {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int in[2] = {-1, -1};
  int status[2] = {-1, -1};

  void close_all() {
    for (int fd : {out[0], out[1], err[0], err[1], in[0], in[1], status[0], status[1]})
      if (fd >= 0) close(fd);
  }
  /// In the parent after fork(): the ends the child uses.
  void close_child_ends() {
    close(out[1]);
    close(err[1]);
    if (in[0] >= 0) close(in[0]);
    close(status[1]);
  }
  /// In the parent when the child failed: the ends the parent would have used.
  void close_parent_ends() {
    close(out[0]);
    close(err[0]);
    if (in[1] >= 0) close(in[1]);
  }
};

}  // namespace

LaunchError pipe_error(int error) {
  std::string text = "cannot create a pipe: " + errno_text(error);
  rlimit limit{};
  if ((error == EMFILE || error == ENFILE) && getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    text += error == ENFILE
                ? "; the system's table of open files is full: end other programs, or raise "
                  "fs.file-max"
                : "; ddlrun holds 3 to 4 descriptors for each rank it starts here, and this "
                  "process may open " +
                      std::to_string(limit.rlim_cur) +
                      " (ulimit -n): raise the limit (ulimit -n 4096) or start fewer ranks here";
  }
  return LaunchError(text);
}

namespace {

Pipes open_pipes(const SpawnSpec& spec) {
  Pipes p;
  if (pipe2(p.out, O_CLOEXEC) != 0) throw pipe_error(errno);
  if (pipe2(p.err, O_CLOEXEC) != 0) {
    const int e = errno;
    close(p.out[0]);
    close(p.out[1]);
    throw pipe_error(e);
  }
  if (spec.pipe_stdin) {
    if (pipe2(p.in, O_CLOEXEC) != 0) p.in[0] = p.in[1] = -1;
  } else {
    p.in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  if (pipe2(p.status, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {p.out[0], p.out[1], p.err[0], p.err[1], p.in[0], p.in[1]})
      if (fd >= 0) close(fd);
    throw pipe_error(e);
  }
  return p;
}

/// In the child: tells the parent which step failed, and exits.
[[noreturn]] void child_fails(int status_fd, ChildFailure f) {
  [[maybe_unused]] ssize_t n = write(status_fd, &f, sizeof f);
  _exit(127);
}

/// The child's steps up to exec (async-signal-safe calls only): its own process group, killed
/// with its parent, default signal handling, the pipes, the working directory, the CPU mask.
[[noreturn]] void run_child(const std::string& path, const ExecArgs& exec, const Pipes& pipes,
                            const std::string& cwd, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const int report = pipes.status[1];
  if ((pipes.in[0] >= 0 && dup2(pipes.in[0], 0) < 0) || dup2(pipes.out[1], 1) < 0 ||
      dup2(pipes.err[1], 2) < 0) {
    child_fails(report, {3, errno});
  }
  if (!cwd.empty() && chdir(cwd.c_str()) != 0) child_fails(report, {4, errno});
  if (exec.mask != nullptr && sched_setaffinity(0, exec.mask_size, exec.mask) != 0) {
    child_fails(report, {1, errno});
  }
  execve(path.c_str(), exec.argv.data(), exec.envp.data());
  child_fails(report, {2, errno});
}

/// Should this process die without reaping process `pid` (SIGKILL), the keeper kills what it
/// started: its group, and whatever carries the job's token and this host's index (even outside
/// its group; the host index: two agents of one job may share a machine, or its process table
/// in tests).
void tell_keeper(pid_t pid, const std::vector<std::string>& env) {
  keeper_kill_group(pid);
  std::string token, host;
  for (const std::string& e : env) {
    if (e.rfind("DDL_JOB_TOKEN=", 0) == 0) token = e;
    if (e.rfind("DDL_HOST_INDEX=", 0) == 0) host = e;
  }
  if (!token.empty()) keeper_kill_marked(host.empty() ? token : token + "\t" + host);
}

/// The child's report from the status pipe (whose read end it closes): nothing when exec
/// succeeded (EOF).
std::optional<ChildFailure> read_child_failure(int& fd) {
  ChildFailure f{};
  ssize_t got;
  do {
    got = read(fd, &f, sizeof f);
  } while (got < 0 && errno == EINTR);
  close_fd(fd);
  if (got == static_cast<ssize_t>(sizeof f)) return f;
  return std::nullopt;
}

LaunchError start_failure(const ChildFailure& f, const SpawnSpec& spec, std::string_view where) {
  const std::string prefix = where.empty() ? "" : std::string(where) + ": ";
  if (f.step == 1) {
    return LaunchError(prefix + "cannot bind '" + spec.argv[0] + "' to CPUs " + spec.cpus.str() +
                       ": " + errno_text(f.err) +
                       " (are those CPUs online and allowed here? see --no-probe)");
  }
  if (f.step == 4) {
    return LaunchError(prefix + "cannot enter working directory " + spec.cwd + ": " +
                       errno_text(f.err));
  }
  return LaunchError(prefix + "cannot run '" + spec.argv[0] + "': " + errno_text(f.err),
                     f.err == ENOENT ? 127 : 126);
}

}  // namespace

ProcessSet::ProcessSet(EventQueue& events) : events_(events) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw pipe_error(errno);
  wake_read_ = fds[0];
  wake_write_ = fds[1];
  waker_ = events_.add_waker([this] { wake(); });
}

ProcessSet::~ProcessSet() {
  finish();
  close_fd(wake_read_);
  close_fd(wake_write_);
}

void ProcessSet::wake() {
  const char c = 0;
  [[maybe_unused]] ssize_t n = write(wake_write_, &c, 1);
}

void ProcessSet::start(int id, const SpawnSpec& spec, std::string_view where) {
  const std::string path = program_path(spec, where);
  const ExecArgs exec(spec);
  Pipes pipes = open_pipes(spec);
  const pid_t parent = getpid();
  // vfork: the child borrows this process's memory until it execs, so no page tables are copied
  // and neither side takes copy-on-write faults (with PMIx's and the I/O threads running, fork
  // cost milliseconds a rank). This thread waits meanwhile; the child makes only
  // async-signal-safe calls, writes nothing of the parent's and never returns. Every signal is
  // blocked until the child has its own default handlers (run_child unblocks them).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = vfork();
  if (pid == 0) run_child(path, exec, pipes, spec.cwd, parent);
  const int vfork_error = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    pipes.close_all();
    throw LaunchError(std::string(where) + ": cannot fork: " + errno_text(vfork_error));
  }
  setpgid(pid, pid);  // also here, so that signal() reaches the group before the child runs
  tell_keeper(pid, spec.env);
  pipes.close_child_ends();
  if (const std::optional<ChildFailure> f = read_child_failure(pipes.status[0])) {
    int ignored;
    waitpid(pid, &ignored, 0);
    pipes.close_parent_ends();
    throw start_failure(*f, spec, where);
  }

  auto p = std::make_unique<Proc>();
  p->id = id;
  p->pid = pid;
  p->pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  p->out = pipes.out[0];
  p->err = pipes.err[0];
  p->in = pipes.in[1];
  set_nonblocking(p->out);
  set_nonblocking(p->err);
  if (p->in >= 0) set_nonblocking(p->in);
  {
    std::lock_guard lock(mutex_);
    procs_[id] = std::move(p);
    if (!io_.joinable()) io_ = std::thread([this] { io_loop(); });
  }
  wake();
}

void ProcessSet::signal(int sig) {
  std::lock_guard lock(mutex_);
  for (auto& [id, p] : procs_) {
    if (!p->reaped) kill(-p->pid, sig);
  }
}

bool ProcessSet::write_stdin(int id, std::string_view data) {
  {
    std::unique_lock lock(mutex_);
    auto it = procs_.find(id);
    if (it == procs_.end()) return false;
    Proc& p = *it->second;
    stdin_room_.wait(lock, [&] {
      return p.in < 0 || p.close_in || stopping_ || p.in_queue.size() - p.in_done < kStdinLimit;
    });
    if (p.in < 0 || p.close_in || stopping_) return false;
    p.in_queue.append(data);
  }
  wake();
  return true;
}

void ProcessSet::close_stdin(int id) {
  {
    std::lock_guard lock(mutex_);
    auto it = procs_.find(id);
    if (it == procs_.end()) return;
    it->second->close_in = true;
  }
  stdin_room_.notify_all();
  wake();
}

void ProcessSet::on_stdin_gone(std::function<void(size_t)> gone) {
  std::lock_guard lock(mutex_);
  stdin_gone_ = std::move(gone);
}

int ProcessSet::running() const {
  std::lock_guard lock(mutex_);
  int n = 0;
  for (const auto& [id, p] : procs_)
    n += p->reaped ? 0 : 1;
  return n;
}

void ProcessSet::finish() {
  if (waker_ >= 0) {
    events_.remove_waker(waker_);
    waker_ = -1;
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    // Reaped leaders too: what they left behind in their group (a background child) goes with
    // them. A group id cannot be reused while the group has members.
    for (auto& [id, p] : procs_)
      kill(-p->pid, SIGKILL);
  }
  stdin_room_.notify_all();
  wake();
  if (io_.joinable()) io_.join();
  size_t dropped = 0;  // stdin still queued: gone with its process
  std::function<void(size_t)> gone_callback;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, p] : procs_) {
      if (!p->reaped) {
        int st;
        waitpid(p->pid, &st, 0);
        p->reaped = true;
      }
      dropped += p->in_queue.size() - p->in_done;
      p->in_queue.clear();
      p->in_done = 0;
      close_fd(p->pidfd);
      close_fd(p->out);
      close_fd(p->err);
      close_fd(p->in);
    }
    gone_callback = stdin_gone_;
  }
  if (dropped > 0 && gone_callback) gone_callback(dropped);
}

// Reads what `fd` has now, at most `limit` bytes, as kOutput events; closes it at EOF or on
// an error.
void ProcessSet::drain(int id, int& fd, Stream stream, size_t limit) {
  read_buf_.resize(kChunk);
  while (limit > 0) {
    const ssize_t n = read(fd, read_buf_.data(), std::min(kChunk, limit));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      close_fd(fd);
      return;
    }
    limit -= static_cast<size_t>(n);
    events_.push(Event{Event::Type::kOutput,
                       id,
                       -1,
                       stream,
                       std::string(read_buf_.data(), static_cast<size_t>(n)),
                       {}});
  }
}

// Writes what `p`'s stdin can take now; returns the bytes that left the queue (written, or
// dropped with the pipe when the process closed it).
size_t ProcessSet::feed_stdin(Proc& p, short revents) {
  const size_t queued = p.in_queue.size() - p.in_done;
  ssize_t n = -1;
  if ((revents & (POLLERR | POLLHUP)) == 0) {
    n = write(p.in, p.in_queue.data() + p.in_done, queued);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  }
  if (n < 0) {
    p.in_queue.clear();
    p.in_done = 0;
    close_fd(p.in);
    return queued;
  }
  p.in_done += static_cast<size_t>(n);
  if (p.in_done == p.in_queue.size()) {
    p.in_queue.clear();
    p.in_done = 0;
  } else if (p.in_done > kStdinLimit) {
    p.in_queue.erase(0, p.in_done);
    p.in_done = 0;
  }
  return static_cast<size_t>(n);
}

/// What the I/O thread polls in one round: the wake pipe first, then each process's pipes and
/// pidfd.
struct ProcessSet::PollSet {
  enum class What { kWake, kOut, kErr, kIn, kPid };
  std::vector<pollfd> fds;
  std::vector<std::pair<Proc*, What>> owners;  ///< what each pollfd is

  void add(int fd, short events, Proc* p, What what) {
    fds.push_back({fd, events, 0});
    owners.emplace_back(p, what);
  }
};

void ProcessSet::io_loop() {
  for (;;) {
    PollSet set;
    if (!watch(set)) return;
    // Without a pidfd (old kernels) we look for exits every 50 ms.
    const int rc = poll(set.fds.data(), set.fds.size(), 50);
    if (rc < 0 && errno != EINTR) return;
    size_t stdin_gone = 0;
    std::function<void(size_t)> gone_callback;
    {
      std::lock_guard lock(mutex_);
      stdin_gone = serve(set);
      reap();
      if (stdin_gone > 0) gone_callback = stdin_gone_;
    }
    if (stdin_gone > 0) {
      stdin_room_.notify_all();
      if (gone_callback) gone_callback(stdin_gone);
    }
  }
}

// Fills `set` for the next round (closing stdin pipes that are done with); false once the set
// is stopping and every process has been reaped.
bool ProcessSet::watch(PollSet& set) {
  using What = PollSet::What;
  std::lock_guard lock(mutex_);
  bool all_reaped = true;
  for (auto& [id, p] : procs_)
    all_reaped = all_reaped && p->reaped;
  if (stopping_ && all_reaped) return false;
  // Output only while the queue has room: a process that prints faster than ddlrun's
  // output is read then blocks on its own pipe.
  const bool room = !events_.output_full();
  set.add(wake_read_, POLLIN, nullptr, What::kWake);
  for (auto& [id, p] : procs_) {
    if (p->out >= 0 && room) set.add(p->out, POLLIN, p.get(), What::kOut);
    if (p->err >= 0 && room) set.add(p->err, POLLIN, p.get(), What::kErr);
    if (p->in >= 0 && (p->in_queue.size() > p->in_done || p->close_in)) {
      if (p->in_queue.size() == p->in_done) {
        close_fd(p->in);
      } else {
        set.add(p->in, POLLOUT, p.get(), What::kIn);
      }
    }
    if (!p->reaped && p->pidfd >= 0) set.add(p->pidfd, POLLIN, p.get(), What::kPid);
  }
  return true;
}

// Reads the output and writes the stdin that `set`'s poll found ready (mutex_ held); returns
// the bytes of stdin that left the queues.
size_t ProcessSet::serve(const PollSet& set) {
  using What = PollSet::What;
  if (set.fds[0].revents != 0) {
    char junk[256];
    while (read(wake_read_, junk, sizeof junk) > 0) {
    }
  }
  size_t stdin_gone = 0;
  for (size_t i = 1; i < set.fds.size(); ++i) {
    Proc& p = *set.owners[i].first;
    const What what = set.owners[i].second;
    const short re = set.fds[i].revents;
    if (re == 0) continue;
    if (what == What::kOut || what == What::kErr) {
      int& fd = what == What::kOut ? p.out : p.err;
      const Stream stream = what == What::kOut ? Stream::kStdout : Stream::kStderr;
      for (int k = 0; k < kReadsPerRound && fd >= 0 && !events_.output_full(); ++k)
        drain(p.id, fd, stream, kChunk);
    } else if (what == What::kIn && p.in >= 0) {
      stdin_gone += feed_stdin(p, re);
    }
  }
  return stdin_gone;
}

// Exits: by pidfd, or by polling waitpid when there is none (mutex_ held).
void ProcessSet::reap() {
  for (auto& [id, p] : procs_) {
    if (p->reaped) continue;
    int st = 0;
    const pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r != p->pid) continue;
    p->reaped = true;
    close_fd(p->pidfd);
    if (p->out >= 0) drain(p->id, p->out, Stream::kStdout, kDrainAtExit);
    if (p->err >= 0) drain(p->id, p->err, Stream::kStderr, kDrainAtExit);
    ExitStatus status;
    if (WIFSIGNALED(st)) {
      status.signal = WTERMSIG(st);
    } else {
      status.code = WEXITSTATUS(st);
    }
    events_.push(Event{Event::Type::kExit, p->id, -1, Stream::kStdout, {}, status});
  }
}

}  // namespace ddl::launcher
