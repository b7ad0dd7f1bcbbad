// ddlrun's stop signals before its job starts (startup_signals.h).
//
// How it works: guard_startup_signals() blocks SIGINT, SIGTERM and SIGHUP in main's thread,
// before any other thread exists, so that every thread ddlrun starts inherits the mask and no
// signal runs its default action in any of them; its thread then waits for them with
// sigtimedwait() in slices of 50 ms, and between slices looks whether an owner took them over
// (a StopSignalsTaken lives: it then waits until none does) or the job started (it ends). A
// signal it took while an owner came is raised again, pending for the owner. Otherwise it says
// why ddlrun leaves, removes the registered paths and _exits: the agents it started lose their
// channels and stop, and the keeper (keeper.h) ends what it was told of. Processes ddlrun
// starts reset their mask (process.cc, base/subprocess.cc, keeper.cc), so ranks never inherit
// it.

#include "launcher/startup_signals.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "launcher/supervise.h"

namespace ddl::launcher {

namespace {

using Clock = std::chrono::steady_clock;

struct Guard {
  std::mutex mutex;
  std::condition_variable changed;
  int owners = 0;
  bool retired = false;
  bool watching = false;
  std::vector<std::string> paths;
  Clock::time_point deadline = Clock::time_point::max();
  double timeout_s = 0;
  std::string step;
  sigset_t signals;  ///< the stop signals not ignored when ddlrun started (nohup, `cmd &`)
  bool chosen = false;
};

Guard& guard() {
  static Guard* g = new Guard;  // never destroyed: its thread may outlive main's statics
  return *g;
}

/// The stop signals ddlrun did not inherit ignored (the shell's `cmd &` ignores SIGINT, nohup
/// SIGHUP: those stay ignored until the job starts), chosen once.
sigset_t stop_signals() {
  Guard& g = guard();
  std::lock_guard lock(g.mutex);
  if (!g.chosen) {
    sigemptyset(&g.signals);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (sigaction(s, nullptr, &old) != 0 || old.sa_handler != SIG_IGN) sigaddset(&g.signals, s);
    }
    g.chosen = true;
  }
  return g.signals;
}

/// Says `note`, removes the registered paths and ends ddlrun with `status` (g.mutex held).
[[noreturn]] void leave(const std::string& note, int status,
                        const std::vector<std::string>& paths) {
  [[maybe_unused]] const ssize_t n = write(2, note.data(), note.size());
  for (const std::string& p : paths) {
    std::error_code ec;
    std::filesystem::remove_all(p, ec);
  }
  _exit(status);
}

void watch() {
  Guard& g = guard();
  const sigset_t set = stop_signals();
  constexpr auto kSlice = std::chrono::milliseconds(50);
  for (;;) {
    {
      std::unique_lock lock(g.mutex);
      if (g.retired) return;
      if (Clock::now() >= g.deadline) {
        leave(startup_timeout_note(g.timeout_s, g.step), 124, g.paths);
      }
      if (g.owners > 0) {  // its owner takes the signals; the deadline is still ours
        g.changed.wait_for(lock, kSlice);
        continue;
      }
    }
    const timespec slice{0, std::chrono::nanoseconds(kSlice).count()};
    const int sig = sigtimedwait(&set, nullptr, &slice);
    if (sig <= 0) continue;
    std::unique_lock lock(g.mutex);
    if (g.owners == 0 && !g.retired) leave(startup_signal_note(sig), 128 + sig, g.paths);
    kill(getpid(), sig);  // pending again, for the owner
  }
}

}  // namespace

void guard_startup_signals(bool watch_them) {
  // All three blocked in every thread, the ignored ones too: a signal that comes later for the
  // job's supervisor must stay pending for it, not be dropped by a thread that left it open.
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (!watch_them) return;
  Guard& g = guard();
  {
    std::lock_guard lock(g.mutex);
    if (g.watching || g.retired) return;
    g.watching = true;
  }
  std::thread(watch).detach();
}

std::string startup_signal_note(int signal) {
  return "ddlrun: got " + signal_name(signal) + " while starting the job; leaving now\n";
}

std::string startup_timeout_note(double timeout_s, const std::string& step) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g s", timeout_s);
  return std::string("ddlrun: the job timed out after ") + seconds + " (--timeout)" +
         (step.empty() ? "" : " while " + step + ",") + " before it started; leaving now\n";
}

void startup_deadline(Clock::time_point deadline, double timeout_s) {
  Guard& g = guard();
  std::lock_guard lock(g.mutex);
  g.deadline = deadline;
  g.timeout_s = timeout_s;
}

void startup_step(const std::string& what) {
  Guard& g = guard();
  std::lock_guard lock(g.mutex);
  g.step = what;
}

void retire_startup_signals() {
  Guard& g = guard();
  {
    std::lock_guard lock(g.mutex);
    g.retired = true;
  }
  g.changed.notify_all();
}

void remove_at_signal(const std::string& path) {
  Guard& g = guard();
  std::lock_guard lock(g.mutex);
  g.paths.push_back(path);
}

void forget_at_signal(const std::string& path) {
  Guard& g = guard();
  std::lock_guard lock(g.mutex);
  std::erase(g.paths, path);
}

StopSignalsTaken::StopSignalsTaken() {
  std::lock_guard lock(guard().mutex);
  ++guard().owners;
}

StopSignalsTaken::~StopSignalsTaken() {
  {
    std::lock_guard lock(guard().mutex);
    --guard().owners;
  }
  guard().changed.notify_all();
}

}  // namespace ddl::launcher
