#pragma once

#include <signal.h>

#include <thread>
#include <utility>

namespace ddl::comm {

/// A thread that never takes the process's asynchronous signals (SIGINT, SIGTERM, ...): they
/// stay with the application's own threads, which may block them and wait for them (as ddlrun's
/// supervisor does) or handle them. libddl's background threads are all made this way.
template <typename Fn>
std::thread quiet_thread(Fn&& fn) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  std::thread t(std::forward<Fn>(fn));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return t;
}

}  // namespace ddl::comm
