#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "comm/comm.h"
#include "launcher/backend.h"
#include "launcher/output.h"

namespace ddl::launcher {

struct SuperviseOptions {
  /// After SIGTERM, how long ranks have before SIGKILL (--kill-grace).
  std::chrono::milliseconds kill_grace{3000};
  /// Ends the job after this long (--timeout): exit status 124.
  std::optional<std::chrono::milliseconds> timeout;
  /// The --timeout the note names when `timeout` is what is left of it (the probe, the plan
  /// and earlier attempts took the rest); unset: `timeout` itself.
  std::optional<std::chrono::milliseconds> timeout_given;
  /// Takes SIGINT, SIGTERM and SIGHUP (blocked in every thread, read by one) and forwards them;
  /// a second SIGINT kills at once. Off in unit tests that drive signals through events.
  bool handle_signals = true;
  /// Forwards this fd (ddlrun's stdin) to rank 0; -1: none.
  int stdin_fd = 0;
  /// Lines of a failed rank's output shown in the summary.
  int tail_lines = 5;
  /// How long after SIGKILL ddlrun still waits for processes to report their end before it
  /// leaves without them (a host that cannot be reached any more).
  std::chrono::milliseconds give_up{15000};
  /// Called (on the supervisor's thread) when a process's failure starts the stop, before
  /// anything else is done about it: per-node mode tells the other nodes at once. A failure
  /// whose output blames a peer is passed once its note is written (up to a second later, with
  /// the status it gives the job), so that the peer's own failure, on another node, comes first.
  std::function<void(int rank, const ExitStatus& status)> on_first_failure;
  /// Called (on the supervisor's thread) at SIGTSTP (Ctrl-Z), instead of stopping the job:
  /// per-node mode tells node 0 that this node was stopped (rather than leave the others to
  /// find it silent) and, since a node cannot pause alone, this node's ranks are stopped for
  /// good (status 128 + SIGTSTP) instead of paused. Unset: the job pauses until SIGCONT.
  std::function<void()> on_stopped;
};

/// How a supervised job ended, beyond its exit status: what ddlrun needs to restart it
/// (--max-restarts).
struct JobEnd {
  int status = 0;  ///< supervise()'s return value
  /// The job failed by itself (a process failed, a host was lost), rather than being stopped by
  /// --timeout, a signal to ddlrun or its output: a failure a restart may get past.
  bool failed = false;
  std::string reason;  ///< the failure as the note said it: "rank 3 (node2) exited with status 1"
  int rank = -1;       ///< the rank that note blames; -1: a host, or the backend's own process
  std::string host;    ///< that rank's host, or the lost host; empty when unknown
  /// Hosts lost (their agent gone, no heartbeat) or whose processes did not report their end
  /// after SIGKILL: the job cannot count on them again.
  std::set<std::string> lost_hosts;
  /// The stop signal (SIGINT, SIGTERM, SIGHUP) that ddlrun got, whenever it came (even while a
  /// failure was being stopped: `failed` is then false, as the job was stopped); 0: none.
  int signal = 0;
};

/// Runs the job: starts `backend`, prints output through `sink`, and ends the whole job when one
/// process fails (exit status other than 0, or a signal), when a host is lost, on --timeout,
/// when the sink fails (stdout closed or full), or when ddlrun gets SIGINT/SIGTERM/SIGHUP:
/// SIGTERM to every process, SIGKILL after kill_grace. Never blocks on the sink: output waits in
/// the event queue while the sink is not ready() (its producers then stop reading), and is
/// dropped once ddlrun got a signal or kill_grace after a stop began. A signal that comes while
/// the job is being stopped (a second one, or the first after a failure) sends SIGKILL and
/// returns at once; so does `give_up` after SIGKILL: no wait is without a deadline. Returns
/// when every process has ended and its output is written (or dropped, or a second after the
/// stop when the reader still does not read). `topology` names each rank's host in messages
/// (may be null). Returns ddlrun's exit status: 0 when every process exited 0, else the first
/// failed process's (128+N for signal N), 124 on timeout, 128+N when ddlrun was stopped by
/// signal N, 1 when a host was lost, the sink's failure() status (141: stdout closed, 1: other
/// write errors). LaunchError from backend.start() is not caught. `end`, when given, is filled
/// in with how the job ended.
int supervise(Backend& backend, const comm::Topology* topology, const SuperviseOptions& options,
              OutputSink& sink, JobEnd* end = nullptr);

/// "SIGKILL" for 9, "signal 70" when unknown.
std::string signal_name(int signal);

}  // namespace ddl::launcher
