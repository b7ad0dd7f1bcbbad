#pragma once

#include <chrono>
#include <string>

namespace ddl::launcher {

// ddlrun's stop signals (SIGINT, SIGTERM, SIGHUP) from the first instruction of main until its
// job has started: blocked in every thread (each inherits the mask) and taken by a thread of
// their own, which ends ddlrun with the note startup_signal_note() says, after removing the
// paths given to remove_at_signal(), with status 128 + the signal. Probing and planning a job
// on many hosts takes seconds, in which the default action would kill ddlrun without a word and
// leave its temporary files. Whoever takes the signals itself (supervise(), and ddlrun between
// two attempts of a restartable job) holds a StopSignalsTaken meanwhile; once supervise()
// started a job the guard retires, and a signal waits, blocked, for the next taker.

/// Blocks the stop signals in the calling thread (call it first in main, before any thread);
/// with `watch`, also starts the guard's thread (once; later calls only block).
void guard_startup_signals(bool watch = true);
/// "ddlrun: got SIGINT while starting the job; leaving now" (with its newline).
std::string startup_signal_note(int signal);
/// The guard takes no signal from now on (the job has started).
void retire_startup_signals();
/// --timeout before the job has started: at `deadline` the guard ends ddlrun (status 124) with
/// startup_timeout_note(`timeout_s`, the step set last), whether or not signals are its own.
void startup_deadline(std::chrono::steady_clock::time_point deadline, double timeout_s);
/// What ddlrun waits for now ("probing 40 hosts over ssh"), for that note.
void startup_step(const std::string& what);
/// "ddlrun: the job timed out after 5 s (--timeout) while probing 40 hosts over ssh, before it
/// started; leaving now" (with its newline); without a step, "... after 5 s (--timeout)
/// before it started; ...".
std::string startup_timeout_note(double timeout_s, const std::string& step);
/// A path (a file, or a directory and what it holds) the guard removes before it ends
/// ddlrun; forget_at_signal() once it is removed or no longer ours.
void remove_at_signal(const std::string& path);
void forget_at_signal(const std::string& path);

/// While one lives, the guard leaves the stop signals to its owner; one it took meanwhile is
/// raised again for the owner.
class StopSignalsTaken {
 public:
  StopSignalsTaken();
  ~StopSignalsTaken();
  StopSignalsTaken(const StopSignalsTaken&) = delete;
  StopSignalsTaken& operator=(const StopSignalsTaken&) = delete;
};

}  // namespace ddl::launcher
