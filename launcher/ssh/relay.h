#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <semaphore>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "launcher/ssh/tree.h"
#include "ssh/session.h"

namespace ddl::launcher::ssh {

/// An interior agent's side of the launch tree (tree.h): its children's agents, started over
/// ssh from this host, and the frames between them and the agent's own channel up.
class Relay {
 public:
  /// Writes whole frames up the agent's channel (blocking while it is full); false once the
  /// channel is gone.
  using Up = std::function<bool(std::string_view frames)>;

  /// `spec`: the subtree frame (W) this agent got; `self`: this host's name, for messages.
  Relay(SubtreeFrame spec, std::string self, Up up, ddl::ssh::Connector& connector);
  /// Waits for the children's threads (upstream_gone() first, unless they ended).
  ~Relay();

  /// Logs in to every child (at most ssh.max_parallel at once) and runs its agent, on a
  /// thread per child.
  void start();
  /// A routed frame's payload for host `host` (T, from above): to the child that is `host`,
  /// unwrapped, or on, still routed, to the child whose subtree holds it. False when no
  /// child's subtree holds it.
  bool down(int host, std::string_view frames);
  /// The channel up has closed: every child's channel closes (their agents stop their ranks).
  void upstream_gone();
  /// Frames for every child (the job's bytes, U), before what comes for them later.
  void broadcast(std::string_view frames);
  /// Waits until every child's conversation has ended, or upstream_gone().
  void wait();

 private:
  struct Child;
  class Talk;
  /// The child that is, or is above, host `host`; nullptr when none.
  Child* child_for(int host);
  bool gone() {
    std::lock_guard lock(mutex_);
    return gone_;
  }

  SubtreeFrame spec_;
  std::string self_;
  Up up_;
  ddl::ssh::Connector& connector_;
  std::counting_semaphore<> logins_;
  std::vector<std::unique_ptr<Child>> children_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int running_ = 0;  ///< children's conversations not yet ended
  bool gone_ = false;
};

}  // namespace ddl::launcher::ssh
