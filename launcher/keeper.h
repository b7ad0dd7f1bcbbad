#pragma once

#include <string>

namespace ddl::launcher {

// The keeper: what ddlrun (or an agent) leaves behind when it dies without cleaning up, such
// as under SIGKILL, is removed by a small process of its own: `ddlrun-keeper` where it lies
// beside ddlrun (keeper_main.cc: it loads libc alone), else `ddlrun --keeper`. The kernel
// kills the ranks themselves (PR_SET_PDEATHSIG), but not what they started, nor does it remove
// temporary directories.
//
// How it works: enable_keeper() arms it; the first request starts the keeper (fork and exec,
// in a process group of its own, stdin a pipe from this process whose write end only this
// process holds, stdout and stderr /dev/null) and sends it the request as a line. The keeper
// collects requests until the pipe reaches EOF, which happens when this process ends however it
// ends; then it SIGKILLs every process group it was given, then every process whose
// environment holds a marker it was given (the job's token, which a rank's children inherit
// even when they leave its process group), again 100 ms later while a pass found any (to catch
// forks in flight; at most three passes), then removes the directories and exits. After a
// clean exit one pass over /proc finds nothing left to do. An agent's keeper also holds the
// agent's link to its parent (keeper_watch_link: the write end, closed as soon as the agent
// ended) and polls it for a hang-up or error without writing to it: a stopped (SIGSTOP) agent never
// ends, and its ranks would run on after its parent gave the host up; the keeper kills it then, and
// the pipe's EOF follows. Unprivileged: it only signals what the same user may signal.

/// Arms the keeper for this process: `program` is ddlrun's absolute path (it is run as
/// `program --keeper`). Until then the functions below do nothing (as in unit tests).
void enable_keeper(const std::string& program);

/// Also act when `fd` (an agent's link to its parent: its stdout to sshd, whose reader goes
/// only when the channel closes, not at the end of the agent's stdin) hangs up or errs, that
/// is when the parent gave this host up and closed the channel: the keeper then SIGKILLs this
/// process first (a stopped agent, which could not end by itself) and carries out the rest as
/// when it ends. Call before the first request (the keeper takes `fd` when it starts).
void keeper_watch_link(int fd);

/// When this process ends: SIGKILL to process group `pgid`.
void keeper_kill_group(int pgid);

/// When this process ends: SIGKILL to every process whose environment holds every entry of
/// `entry` ("NAME=value" variables, separated by tabs).
void keeper_kill_marked(const std::string& entry);

/// When this process ends: `path` removed with everything in it. Also writes `path`/owner
/// (this process's pid and start time), by which remove_stale_dirs() knows a leftover.
void keeper_remove_dir(const std::string& path);

/// Removes the leftovers of ddlruns and agents that died with their keeper (a reboot without a
/// clean /tmp, the OOM killer): every directory $TMPDIR/ddlrun.*, ddlrun-pmix.* and
/// ddlrun-agent.* of this user whose owner file names a process of this host (by name: $TMPDIR
/// may be shared) that no longer runs, or another process under the same pid. Returns how
/// many it removed.
int remove_stale_dirs();

/// `ddlrun --keeper`: reads requests on `fd` until EOF, carries them out, exits 0. With
/// $DDLRUN_KEEPER_LINK (a descriptor number, set by keeper_watch_link's start), a hang-up on
/// that descriptor SIGKILLs its parent first.
[[noreturn]] void run_keeper(int fd);

}  // namespace ddl::launcher
