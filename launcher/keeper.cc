// The keeper (keeper.h): cleaning up after a ddlrun or agent that died without doing it.

#include "launcher/keeper.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace ddl::launcher {

namespace {

/// Set in the keeper's environment. A process that has it was started as a keeper: it starts
/// no keeper of its own. This cuts short a program that is not ddlrun and does not know
/// --keeper (a test binary calling ddlrun's code in-process, whose /proc/self/exe is itself)
/// before it can start copies of itself without end.
constexpr const char* kKeeperVariable = "DDLRUN_KEEPER=1";
/// What a keeper says first; a program that does not say it in time is not one (and is killed).
constexpr char kKeeperHello = 'K';
constexpr int kKeeperHelloMs = 2000;
/// The keeper's own small program, looked for beside ddlrun (launcher/keeper_main.cc).
constexpr const char* kKeeperProgram = "ddlrun-keeper";
/// Where a keeper finds the link it watches (keeper_watch_link): this descriptor, named by
/// this variable.
constexpr int kLinkFd = 3;
constexpr const char* kLinkVariable = "DDLRUN_KEEPER_LINK=3";

std::mutex g_mutex;
std::string g_program;  // empty: not armed
int g_socket = -1;      // our end; -1 until the keeper runs
bool g_failed = false;  // it could not be started: do not try again
int g_link = -1;        // a copy of the link the keeper watches (keeper_watch_link), or -1

/// Waits (on a thread of its own) for the hello of keeper `pid` on `fd`; a program that does
/// not say it in time is killed, and no keeper is used from then on.
void expect_hello(pid_t pid, int fd) {
  pollfd p{fd, POLLIN, 0};
  char hello = 0;
  int n;
  while ((n = poll(&p, 1, kKeeperHelloMs)) < 0 && errno == EINTR) {
  }
  if (n == 1 && recv(fd, &hello, 1, MSG_DONTWAIT) == 1 && hello == kKeeperHello) return;
  std::lock_guard lock(g_mutex);
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  if (g_socket == fd) g_socket = -1;
  close(fd);
  g_failed = true;
}

/// What runs the keeper: kKeeperProgram beside g_program when it is there (a keeper starts
/// for ddlrun and for every agent, and loading all of ddlrun's libraries cost as much CPU as
/// the keeper's own work), else `g_program --keeper`.
std::vector<std::string> keeper_command() {
  const size_t slash = g_program.rfind('/');
  const std::string beside =
      (slash == std::string::npos ? "" : g_program.substr(0, slash + 1)) + kKeeperProgram;
  if (slash != std::string::npos && access(beside.c_str(), X_OK) == 0) return {beside};
  return {g_program, "--keeper"};
}

/// Starts the keeper (keeper_command; g_mutex held). Only async-signal-safe calls between fork
/// and exec: this process has threads. Its hello is awaited on a thread (expect_hello), not
/// here: the requests queue in the socket meanwhile, and a launch does not wait for it to load.
bool start_keeper() {
  if (const char* k = std::getenv("DDLRUN_KEEPER"); k != nullptr && *k != '\0') return false;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return false;
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  const std::vector<std::string> command = keeper_command();
  std::vector<const char*> argv;
  for (const std::string& word : command)
    argv.push_back(word.c_str());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    envp.push_back(*e);
  envp.push_back(const_cast<char*>(kKeeperVariable));
  if (g_link >= 0) envp.push_back(const_cast<char*>(kLinkVariable));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // out of reach of the terminal's and ddlrun's group signals
    sigset_t none;  // ddlrun's stop signals are blocked (startup_signals.h); not the keeper's
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (dup2(fds[1], 0) < 0 || (null_fd >= 0 && (dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0)))
      _exit(127);
    if (g_link >= 0 && dup2(g_link, kLinkFd) < 0) _exit(127);  // g_link > kLinkFd: no clash
    execve(argv[0], const_cast<char* const*>(argv.data()), envp.data());
    _exit(127);
  }
  close(fds[1]);
  if (null_fd >= 0) close(null_fd);
  if (pid < 0) {
    close(fds[0]);
    return false;
  }
  g_socket = fds[0];
  std::thread(expect_hello, pid, fds[0]).detach();
  return true;
}

/// Sends one request line ("g 123", "m NAME=value", "d /tmp/x").
void request(char kind, std::string_view what) {
  if (what.find('\n') != std::string_view::npos) return;
  std::lock_guard lock(g_mutex);
  if (g_program.empty() || g_failed) return;
  if (g_socket < 0 && !start_keeper()) {
    g_failed = true;
    return;
  }
  std::string line(1, kind);
  line.push_back(' ');
  line.append(what);
  line.push_back('\n');
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t n = send(g_socket, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

/// The NUL-separated environment of process `pid` holds every entry of one of the markers
/// (tab-separated "NAME=value" entries); false when unreadable. Searches the bytes as they are
/// (each entry between NULs): a sweep reads every process's environment.
bool has_entry(const std::string& pid, const std::set<std::string>& markers) {
  const int fd = open(("/proc/" + pid + "/environ").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string env(1, '\0');  // so that the first entry, too, follows a NUL
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    env.append(buf, static_cast<size_t>(n));
  close(fd);
  if (env.back() != '\0') env.push_back('\0');
  std::string needle;
  const auto holds = [&](std::string_view entry) {
    needle.assign(1, '\0');
    needle.append(entry);
    needle.push_back('\0');
    return env.find(needle) != std::string::npos;
  };
  for (const std::string_view m : markers) {
    bool all = true;
    for (size_t from = 0; all && from <= m.size();) {
      const size_t tab = std::min(m.find('\t', from), m.size());
      all = holds(m.substr(from, tab - from));
      from = tab + 1;
    }
    if (all) return true;
  }
  return false;
}

/// The process group of process `pid` (field 5 of /proc/PID/stat), or -1.
int group_of(const std::string& pid) {
  const int fd = open(("/proc/" + pid + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  const std::string_view stat(buf, static_cast<size_t>(n));
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string_view::npos) return -1;
  buf[n] = '\0';
  char state = 0;
  int ppid = 0, pgrp = 0;
  if (std::sscanf(buf + paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) return -1;
  return pgrp;
}

/// One sweep: SIGKILL to every process that carries a marker, and to every member of a
/// watched group that holds at least one such process (a group id alone may have been reused
/// since; without markers the groups are taken as they are). Returns how many were signalled.
int sweep(const std::set<int>& groups, const std::set<std::string>& markers) {
  struct Proc {
    pid_t pid;
    int group;
    bool marked;
  };
  std::vector<Proc> procs;
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  const pid_t self = getpid();
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    if (pid == self) continue;
    procs.push_back({pid, group_of(name), !markers.empty() && has_entry(name, markers)});
  }
  closedir(d);
  std::set<int> live_groups;
  for (const Proc& p : procs) {
    if (groups.count(p.group) != 0 && (p.marked || markers.empty())) live_groups.insert(p.group);
  }
  int n = 0;
  for (const Proc& p : procs) {
    if (p.marked || live_groups.count(p.group) != 0) n += kill(p.pid, SIGKILL) == 0 ? 1 : 0;
  }
  return n;
}

/// Field 22 of /proc/PID/stat, the process's start time in ticks since boot ("" when it does
/// not exist): with the pid, it names one process for good.
std::string start_time(const std::string& pid) {
  const int fd = open(("/proc/" + pid + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return "";
  const std::string stat(buf, static_cast<size_t>(n));
  size_t pos = stat.rfind(')');
  for (int field = 2; field < 22 && pos != std::string::npos; ++field)
    pos = stat.find(' ', pos + 1);
  if (pos == std::string::npos) return "";
  return stat.substr(pos + 1, stat.find(' ', pos + 1) - pos - 1);
}

std::string this_host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

void enable_keeper(const std::string& program) {
  std::lock_guard lock(g_mutex);
  if (g_program.empty()) g_program = program;
}

void keeper_watch_link(int fd) {
  std::lock_guard lock(g_mutex);
  if (g_link < 0 && g_socket < 0) g_link = fcntl(fd, F_DUPFD_CLOEXEC, 10);
}

void keeper_kill_group(int pgid) {
  if (pgid > 1) request('g', std::to_string(pgid));
}

void keeper_kill_marked(const std::string& entry) {
  if (entry.find('=') != std::string::npos) request('m', entry);
}

void keeper_remove_dir(const std::string& path) {
  if (path.empty() || path.front() != '/') return;
  const std::string owner =
      std::to_string(getpid()) + " " + start_time("self") + " " + this_host() + "\n";
  const int fd = open((path + "/owner").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    [[maybe_unused]] ssize_t n = write(fd, owner.data(), owner.size());
    close(fd);
  }
  request('d', path);
}

int remove_stale_dirs() {
  const char* t = std::getenv("TMPDIR");
  const std::string tmp = t != nullptr && *t != '\0' ? t : "/tmp";
  DIR* d = opendir(tmp.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("ddlrun.", 0) != 0 && name.rfind("ddlrun-pmix.", 0) != 0 &&
        name.rfind("ddlrun-agent.", 0) != 0)
      continue;
    const std::string path = tmp + "/" + name;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
    char buf[512] = {};
    const int fd = open((path + "/owner").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // not ours to judge (or still being made)
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    long pid = 0;
    char start[32] = {};
    char host[300] = {};
    if (n <= 0 || std::sscanf(buf, "%ld %31s %299s", &pid, start, host) != 3 || pid <= 0) continue;
    if (host != this_host()) continue;  // a $TMPDIR shared with other hosts: not ours to judge
    if (start_time(std::to_string(pid)) != start) stale.push_back(path);
  }
  closedir(d);
  for (const std::string& path : stale) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  return static_cast<int>(stale.size());
}

void run_keeper(int fd) {
  // SIGPIPE first: a parent that died before the hello (killed as it started the keeper) is
  // exactly what the keeper is for.
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  [[maybe_unused]] const ssize_t said = write(fd, &kKeeperHello, 1);
  const pid_t parent = getppid();
  const char* link_variable = std::getenv("DDLRUN_KEEPER_LINK");
  int link = link_variable != nullptr ? std::atoi(link_variable) : -1;
  std::set<int> groups;
  std::set<std::string> markers;
  std::vector<std::string> dirs;
  std::string buf;
  char chunk[4096];
  for (;;) {
    // The link is polled for its hang-up only (no events asked for: its bytes are the
    // parent's); once it hung up, the parent is killed and the requests read to their EOF.
    pollfd p[2] = {{fd, POLLIN, 0}, {link, 0, 0}};
    if (poll(p, link >= 0 ? 2 : 1, -1) < 0 && errno != EINTR) break;
    if (link >= 0 && (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) {
      if (getppid() == parent) kill(parent, SIGKILL);
      close(link);
      link = -1;
    }
    if (p[0].revents == 0) continue;
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      const std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (line.size() < 3) continue;
      const std::string arg = line.substr(2);
      if (line[0] == 'g') groups.insert(std::atoi(arg.c_str()));
      if (line[0] == 'm') markers.insert(arg);
      if (line[0] == 'd') dirs.push_back(arg);
    }
  }
  if (link >= 0) close(link);  // (a pipe's reader sees its end once the writers are gone)
  // Our parent has ended. What it started goes first, then its files. A round that signals
  // nothing ends the sweeps: no process of the job was left to start another (after a clean
  // end, the usual case, one pass over /proc).
  for (int round = 0; round < 3 && !(groups.empty() && markers.empty()); ++round) {
    if (sweep(groups, markers) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (const std::string& d : dirs) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
  _exit(0);
}

}  // namespace ddl::launcher
