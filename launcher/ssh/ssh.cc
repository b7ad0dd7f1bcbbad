// The ssh backend: ddlrun's own multi-host launcher.
//
// How it works: one thread per host that has ranks. Each takes the session its host's probe
// logged in with (so a host sees one login per job), or connects with libssh (the mapper's
// open_ssh_session: ssh config, keys only, strict host keys, connect timeout; at most
// ssh.max_parallel logins at once), runs
// `ddlrun --agent` in an exec channel and waits for its hello. start() waits for every hello:
// if a host failed, every channel is closed (so the agents that did start exit) and one
// LaunchError lists each failed host with its reason. Then the job goes to every agent with
// the rendezvous of rank 0's host (the address ddlrun reached it at, and its free ports); each
// agent checks the program and writes its topology file; only when all are ready do they get
// "go", so a program missing on one host starts nothing anywhere. From then on each thread
// turns frames into events (output, exits) and writes queued frames (signals, stdin) between
// reads. While the supervisor's event queue is output_full() a thread does not read its
// channel (it goes on writing): ssh's window then stops the agent, and the agent stops reading
// its ranks. Stdin goes in a window (protocol.h: Z) so no side queues more than
// kStdinWindow of it. A channel that closes before its agent said "done" is a lost host.
//
// PMIx across hosts: each agent is its host's PMIx server. ddlrun joins the hosts' fence
// contributions in one FenceCombiner (any host's thread adds what its agent sent, and the
// last one sends the combined data down to every host taking part; every thread checks the
// fences' timeouts as it polls), passes direct modex requests to the rank's host and the
// answers back, and turns a PMIx_Abort into the rank's failure (pmix_server::abort_events).
// Data is collected when the ranks ask for it (PMIX_COLLECT_DATA); otherwise a Get of another
// host's key is a direct modex.

#include <libssh/libssh.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <semaphore>
#include <thread>

#include "launcher/external.h"
#include "launcher/factory.h"
#include "launcher/pmix_server/fence.h"
#include "launcher/pmix_server/server.h"
#include "launcher/process.h"
#include "launcher/ssh/protocol.h"
#include "launcher/wire.h"

namespace ddl::launcher {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 20;

/// "10 s", "2.5 s".
std::string seconds_text(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789@%_+=:,./-") == std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (char c : word)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct ChannelFree {
  void operator()(ssh_channel c) const {
    if (ssh_channel_is_open(c)) ssh_channel_close(c);
    ssh_channel_free(c);
  }
};
using Channel = std::unique_ptr<ssh_channel_struct, ChannelFree>;

/// Where a host's conversation stands.
enum class Phase { kConnecting, kHello, kReady, kRunning, kDone, kFailed };

struct HostConn {
  int index = 0;
  std::string name;
  std::vector<int> ranks;
  Phase phase = Phase::kConnecting;
  std::string error;  ///< kFailed: why
  int status = 1;     ///< kFailed: ddlrun's exit status for it
  // The hello.
  std::string reached_address;
  bool answered = false;  ///< its agent said hello: the ssh login worked
  int master_port = 0;
  int ddl_port = 0;
  std::string job_frame;  ///< set by start() when the job may be sent
  bool go = false;
  std::string outgoing;      ///< frames to write (signals, PMIx)
  std::string stdin_frames;  ///< stdin to write after `outgoing` (at most kStdinWindow)
  std::thread thread;
};

class SshBackend : public Backend {
 public:
  SshBackend(const Job& job, const LaunchOptions& options)
      : job_(job), options_(options), logins_(std::max(options.ssh.max_parallel, 1)) {
    for (const comm::Host& h : job_.topology.hosts) {
      auto c = std::make_unique<HostConn>();
      c->index = h.index;
      c->name = h.name;
      for (const comm::RankPlacement& r : job_.topology.ranks) {
        if (r.host == h.index) c->ranks.push_back(r.rank);
      }
      if (!c->ranks.empty()) hosts_.push_back(std::move(c));
    }
  }
  ~SshBackend() override { finish(); }

  std::string_view name() const override { return "ssh"; }

  std::vector<int> start(EventQueue& events) override {
    events_ = &events;
    fences_ = std::make_unique<pmix_server::FenceCombiner>(pmix_server::make_layout(job_.topology),
                                                           default_fence_timeout());
    for (auto& h : hosts_) {
      HostConn* c = h.get();
      c->thread = std::thread([this, c] { converse(*c); });
    }
    const auto connect_limit = options_.ssh.connect_timeout * 4 + std::chrono::seconds(5);
    if (!wait_for(Phase::kHello, connect_limit)) {
      throw_failures("cannot start the job on");
    }
    // The rendezvous lives on rank 0's host.
    const HostConn* first = nullptr;
    for (const auto& h : hosts_) {
      if (std::find(h->ranks.begin(), h->ranks.end(), 0) != h->ranks.end()) first = h.get();
    }
    if (first == nullptr) first = hosts_.front().get();
    Rendezvous rv;
    const comm::Host* host0 = job_.topology.find_host(first->index);
    rv.address = !first->reached_address.empty() ? first->reached_address
                 : host0 != nullptr              ? host0->address
                                                 : first->name;
    rv.master_port = first->master_port;
    // ddlrun's rendezvous server; each agent fills in the address ddlrun came from.
    rv.ddl_port = options_.rendezvous_port;
    const std::string job_bytes = encode_job(job_);
    {
      std::lock_guard lock(mutex_);
      for (auto& h : hosts_) {
        std::string payload;
        wire::put_str(payload, job_bytes);
        wire::put_str(payload, rv.address);
        wire::put_u32(payload, static_cast<uint32_t>(rv.master_port));
        wire::put_u32(payload, static_cast<uint32_t>(rv.ddl_port));
        wire::put_str(payload, rv.ddl_address);
        wire::put_u32(payload, static_cast<uint32_t>(std::min<int64_t>(
                                   options_.heartbeat_timeout.count(), UINT32_MAX)));
        h->job_frame = ssh::encode_frame(ssh::FrameType::kJob, h->index, payload);
      }
    }
    changed_.notify_all();
    if (!wait_for(Phase::kReady, options_.ssh.command_timeout)) {
      throw_failures("cannot start the job on");
    }
    std::vector<int> ranks;
    {
      std::lock_guard lock(mutex_);
      for (auto& h : hosts_) {
        h->go = true;
        ranks.insert(ranks.end(), h->ranks.begin(), h->ranks.end());
      }
    }
    changed_.notify_all();
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  }

  void signal(int sig) override {
    {
      std::lock_guard lock(mutex_);
      if (sig == SIGKILL) killed_ = true;
      for (auto& h : hosts_)
        h->outgoing += ssh::encode_frame(ssh::FrameType::kSignal, sig, {});
    }
  }
  void write_stdin(std::string_view data) override {
    std::unique_lock lock(mutex_);
    HostConn* h = rank0_host();
    while (h != nullptr && !data.empty()) {
      // Waits for window; gives up when the stdin or the host is gone.
      changed_.wait(lock, [&] {
        return stdin_window_ > 0 || stop_ || stdin_closed_ || h->phase >= Phase::kDone;
      });
      if (stdin_window_ == 0) return;
      const size_t n = std::min(stdin_window_, data.size());
      h->stdin_frames += ssh::encode_frame(ssh::FrameType::kStdin, 0, data.substr(0, n));
      stdin_window_ -= n;
      data.remove_prefix(n);
    }
  }
  void close_stdin() override {
    {
      std::lock_guard lock(mutex_);
      if (stdin_closed_) return;
      stdin_closed_ = true;
      if (HostConn* h = rank0_host())
        h->stdin_frames += ssh::encode_frame(ssh::FrameType::kStdinEof, 0, {});
    }
    changed_.notify_all();
  }
  void finish() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (auto& h : hosts_) {
      if (h->thread.joinable()) h->thread.join();
    }
  }

 private:
  HostConn* rank0_host() {
    for (auto& h : hosts_) {
      if (std::find(h->ranks.begin(), h->ranks.end(), 0) != h->ranks.end()) return h.get();
    }
    return nullptr;
  }

  /// Waits until every host reached `phase` (or went past it) or one failed; false on a
  /// failure or after `limit`, when the failure has been recorded.
  bool wait_for(Phase phase, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    const bool all = changed_.wait_for(lock, limit, [&] {
      bool every = true;
      for (auto& h : hosts_) {
        if (h->phase == Phase::kFailed) return true;
        every = every && static_cast<int>(h->phase) >= static_cast<int>(phase);
      }
      return every;
    });
    bool failed = false;
    for (auto& h : hosts_) {
      if (h->phase == Phase::kFailed) failed = true;
    }
    if (!all) {
      for (auto& h : hosts_) {
        if (static_cast<int>(h->phase) < static_cast<int>(phase) && h->phase != Phase::kFailed) {
          h->phase = Phase::kFailed;
          h->error =
              "no answer from its agent after " +
              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
              " s";
        }
      }
      return false;
    }
    if (failed) {
      // Give the others a moment to report theirs too, so one message names every host.
      changed_.wait_for(lock, std::chrono::milliseconds(300), [&] {
        for (auto& h : hosts_) {
          if (h->phase != Phase::kFailed && static_cast<int>(h->phase) < static_cast<int>(phase))
            return false;
        }
        return true;
      });
    }
    return !failed;
  }

  /// $DDL_PMIX_FENCE_TIMEOUT (seconds) of ddlrun's environment: how long a fence that
  /// carries no PMIX_TIMEOUT waits for the other hosts; 0 (or unset): forever.
  std::chrono::milliseconds default_fence_timeout() const {
    const std::optional<std::string> v =
        environ_value(options_.environ.empty() ? current_environment() : options_.environ,
                      "DDL_PMIX_FENCE_TIMEOUT");
    if (!v || v->empty()) return std::chrono::milliseconds(0);
    char* end = nullptr;
    const double seconds = std::strtod(v->c_str(), &end);
    if (end == nullptr || *end != '\0' || !(seconds > 0)) return std::chrono::milliseconds(0);
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  }

  /// The connection to host `index`, or nullptr.
  HostConn* host_by_index(int index) {
    for (auto& h : hosts_) {
      if (h->index == index) return h.get();
    }
    return nullptr;
  }

  /// Sends a finished fence to its hosts (mutex_ held); a failed one is also a note.
  void deliver(const pmix_server::FenceResult& r) {
    const std::string frame =
        ssh::encode_frame(ssh::FrameType::kFenceResult, 0,
                          ssh::encode(ssh::FenceResultFrame{r.key, r.status, r.data, r.error}));
    for (int h : r.hosts) {
      if (HostConn* c = host_by_index(h)) c->outgoing += frame;
    }
    if (r.status != 0) {
      events_->push(
          Event{Event::Type::kOutput, -1, -1, Stream::kStderr, "ddlrun: " + r.error + "\n", {}});
    }
  }

  /// A PMIx frame from host `c`'s agent.
  void pmix_frame(HostConn& c, const ssh::Frame& f) {
    switch (f.type) {
      case ssh::FrameType::kFence: {
        ssh::FenceFrame in = ssh::decode_fence(f.payload);
        pmix_server::Contribution contribution{std::move(in.key), std::move(in.participants),
                                               in.timeout_s, std::move(in.data)};
        std::lock_guard lock(mutex_);
        if (auto done = fences_->add(c.index, std::move(contribution), Clock::now())) {
          deliver(*done);
        }
        break;
      }
      case ssh::FrameType::kAbort: {
        const ssh::AbortFrame a = ssh::decode_abort(f.payload);
        for (Event& e : pmix_server::abort_events(f.id, a.status, a.message)) {
          e.host = c.index;
          events_->push(std::move(e));
        }
        break;
      }
      case ssh::FrameType::kModexRequest: {
        ssh::ModexRequest q = ssh::decode_modex_request(f.payload);
        q.host = c.index;
        const comm::RankPlacement* r = job_.topology.find_rank(q.rank);
        std::lock_guard lock(mutex_);
        HostConn* owner = r != nullptr ? host_by_index(r->host) : nullptr;
        if (owner == nullptr) {
          c.outgoing += ssh::encode_frame(ssh::FrameType::kModexResponse, f.id,
                                          ssh::encode(ssh::ModexResponse{c.index, kNotFound, {}}));
        } else {
          owner->outgoing += ssh::encode_frame(ssh::FrameType::kModexRequest, f.id, ssh::encode(q));
        }
        break;
      }
      case ssh::FrameType::kModexResponse: {
        const ssh::ModexResponse a = ssh::decode_modex_response(f.payload);
        std::lock_guard lock(mutex_);
        if (HostConn* asker = host_by_index(a.host)) {
          asker->outgoing += ssh::encode_frame(ssh::FrameType::kModexResponse, f.id, f.payload);
        }
        break;
      }
      default:
        break;
    }
  }
  static constexpr int kNotFound = -46;  // PMIX_ERR_NOT_FOUND

  [[noreturn]] void throw_failures(const std::string& what) {
    std::string message;
    int status = 1;
    int failed = 0;
    bool unreached = false;  // some host failed before its agent answered
    {
      std::lock_guard lock(mutex_);
      for (auto& h : hosts_) {
        if (h->phase != Phase::kFailed) continue;
        ++failed;
        unreached = unreached || !h->answered;
        message += "\n  " + h->name + ": " + h->error;
        if (status == 1) status = h->status;
      }
    }
    finish();
    const std::string head =
        what + " " + std::to_string(failed) + " of " + std::to_string(hosts_.size()) + " hosts:";
    std::string next;
    if (status == 127) {
      next = "\ninstall the program on those hosts at the same path, or give its full path";
    } else if (status == 1 && unreached) {
      next =
          "\nfix them (each must pass 'ssh -o BatchMode=yes HOST ddlrun --version'), or leave "
          "them out of the host list";
    }
    throw LaunchError(head + message + next, status);
  }

  void fail(HostConn& c, const std::string& error, int status = 1) {
    {
      std::lock_guard lock(mutex_);
      if (c.phase == Phase::kFailed) return;
      c.phase = Phase::kFailed;
      c.error = error;
      c.status = status;
    }
    changed_.notify_all();
  }

  void set_phase(HostConn& c, Phase p) {
    {
      std::lock_guard lock(mutex_);
      c.phase = p;
    }
    changed_.notify_all();
  }

  /// Host `name`'s session: the one its probe logged in with (SshProbeOptions::keep_sessions),
  /// so that each host sees one login; else a new login, at most ssh.max_parallel at once.
  /// When the probe's channel already runs the agent (`ddlrun --probe-agent`), that too, with
  /// the bytes the agent sent after the inventory.
  mapper::SshSessions::Kept open_session(const std::string& name) {
    if (options_.ssh.keep_sessions) {
      mapper::SshSessions::Kept kept = options_.ssh.keep_sessions->take(name);
      if (kept.session && ssh_is_connected(kept.session.get()) &&
          (!kept.channel || ssh_channel_is_open(kept.channel.get()))) {
        return kept;
      }
    }
    logins_.acquire();
    struct Release {
      std::counting_semaphore<>& logins;
      ~Release() { logins.release(); }
    } release{logins_};
    mapper::SshSessions::Kept fresh;
    fresh.session = mapper::open_ssh_session(name, options_.ssh, &fresh.endpoint);
    return fresh;
  }

  /// One host's whole conversation, on its own thread.
  void converse(HostConn& c) {
    mapper::SshSessions::Kept kept;
    try {
      kept = open_session(c.name);
    } catch (const std::exception& e) {
      fail(c, e.what());
      return;
    }
    const mapper::SshSession session = std::move(kept.session);
    const std::string endpoint = kept.endpoint;
    ssh_session s = session.get();
    Channel ch(kept.channel.release());  // the probe's, its agent running; freed before `session`
    const std::string command = ch ? kept.command : shell_quote(options_.ddlrun_path) + " --agent";
    if (!ch &&
        (!(ch = Channel(ssh_channel_new(s))) || ssh_channel_open_session(ch.get()) != SSH_OK ||
         ssh_channel_request_exec(ch.get(), command.c_str()) != SSH_OK)) {
      fail(c, "cannot run '" + command + "' on " + endpoint + ": " + ssh_get_error(s));
      return;
    }
    ssh::FrameReader reader;
    reader.feed(kept.pending);
    std::string err_line;
    bool running = false;
    std::vector<int> unfinished = c.ranks;
    // Heartbeats: a frame a second down the channel from now on; once the agent said hello,
    // silence from it for the deadline loses the host.
    Clock::time_point next_beat = Clock::now();
    Clock::time_point last_heard = Clock::now();
    bool hello = false;
    std::string pending;  // frames the remote window could not take yet
    // Reads what the agent has sent; returns false when the channel has ended.
    auto pump = [&](int wait_ms) {
      int avail = ssh_channel_poll_timeout(ch.get(), wait_ms, 0);
      if (avail == SSH_ERROR) return false;
      char buf[65536];
      bool eof = avail == SSH_EOF;
      while (avail > 0) {
        const int n = ssh_channel_read_nonblocking(ch.get(), buf, sizeof buf, 0);
        if (n == SSH_ERROR) return false;
        if (n <= 0) {
          eof = eof || n == SSH_EOF;
          break;
        }
        last_heard = Clock::now();
        reader.feed(std::string_view(buf, static_cast<size_t>(n)));
      }
      for (;;) {  // the agent's own stderr: one note per line
        const int n = ssh_channel_read_nonblocking(ch.get(), buf, sizeof buf, 1);
        if (n <= 0) break;
        last_heard = Clock::now();
        err_line.append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = err_line.find('\n')) != std::string::npos) {
          events_->push(Event{Event::Type::kOutput,
                              -1,
                              c.index,
                              Stream::kStderr,
                              c.name + ": " + err_line.substr(0, nl + 1),
                              {}});
          err_line.erase(0, nl + 1);
        }
      }
      return !(eof || ssh_channel_is_eof(ch.get()));
    };
    // Writes what the remote window takes now and keeps the rest for later: an agent that
    // reads nothing (stopped, or its host cut off) never blocks this thread. False on an error.
    auto write_pending = [&] {
      while (!pending.empty()) {
        const uint32_t window = ssh_channel_window_size(ch.get());
        if (window == 0) return true;
        const size_t len = std::min<size_t>(pending.size(), window);
        const int n = ssh_channel_write(ch.get(), pending.data(), static_cast<uint32_t>(len));
        if (n < 0) return false;
        if (n == 0) return true;
        pending.erase(0, static_cast<size_t>(n));
      }
      return true;
    };
    const auto lost = [&](const std::string& why) {
      if (!running) {
        fail(c, why);
      } else if (!unfinished.empty()) {
        events_->push(Event{Event::Type::kHostFailure, -1, c.index, Stream::kStdout, why, {}});
      }
    };
    bool write_failed = false;
    std::string write_error;
    // finish() while ranks still run (ddlrun is giving up): SIGKILL them, and close the
    // channel after a grace even if the agent does not answer (it then kills them itself).
    Clock::time_point stop_deadline = Clock::time_point::max();
    bool silent = false;  // no heartbeat for the deadline

    try {
      bool open = true;
      while (open) {
        // What to send now, under the lock.
        std::string to_send;
        bool stopping;
        bool killed;
        {
          std::lock_guard lock(mutex_);
          stopping = stop_;
          killed = killed_;
          if (c.phase == Phase::kHello && !c.job_frame.empty()) {
            to_send = std::move(c.job_frame);
            c.job_frame.clear();
          }
          if (c.phase == Phase::kReady && c.go) {
            to_send = ssh::encode_frame(ssh::FrameType::kGo, 0, {});
            c.phase = Phase::kRunning;
            running = true;
          }
          if (running) {
            for (const pmix_server::FenceResult& r : fences_->expire(Clock::now()))
              deliver(r);
            // Control first: stdin never holds a signal or a fence result back.
            to_send += c.outgoing;
            c.outgoing.clear();
            to_send += c.stdin_frames;
            c.stdin_frames.clear();
          }
        }
        if (stopping && (!running || unfinished.empty())) break;
        if (stopping && stop_deadline == Clock::time_point::max()) {
          // Once SIGKILL went out ddlrun is leaving at once: only a moment to send it again.
          stop_deadline = Clock::now() + (killed ? std::chrono::milliseconds(500)
                                                 : std::chrono::milliseconds(3000));
          to_send += ssh::encode_frame(ssh::FrameType::kSignal, SIGKILL, {});
        }
        const Clock::time_point now = Clock::now();
        if (now >= stop_deadline) break;
        if (now >= next_beat) {
          to_send += ssh::encode_frame(ssh::FrameType::kHeartbeat, 0, {});
          next_beat = now + ssh::kHeartbeatInterval;
        }
        // A write can fail because the agent has already finished (its last frames are still
        // to be read): stop writing, and let reading decide whether anything was lost.
        if (!write_failed) {
          pending += to_send;
          if (!write_pending()) {
            write_failed = true;
            write_error = ssh_get_error(s);
          }
        }
        // Output only while the supervisor has room for it (its events go on meanwhile). The
        // host is not silent while we are the ones not reading it.
        if (running && events_->output_full()) {
          events_->wait_for_room(Clock::now() + std::chrono::milliseconds(kPollMs));
          last_heard = Clock::now();
        } else {
          open = pump(kPollMs);
        }
        if (hello && Clock::now() - last_heard > options_.heartbeat_timeout) {
          silent = true;
          break;
        }
        while (auto f = reader.next()) {
          switch (f->type) {
            case ssh::FrameType::kHello: {
              wire::Reader in(f->payload, "hello");
              in.str();  // its host name
              const std::string reached = in.str();
              const int mp = static_cast<int>(in.u32());
              const int dp = static_cast<int>(in.u32());
              {
                std::lock_guard lock(mutex_);
                c.reached_address = reached;
                c.answered = true;
                c.master_port = mp;
                c.ddl_port = dp;
              }
              set_phase(c, Phase::kHello);
              hello = true;
              break;
            }
            case ssh::FrameType::kReady:
              set_phase(c, Phase::kReady);
              break;
            case ssh::FrameType::kFailure:
              if (running) {
                events_->push(Event{Event::Type::kHostFailure,
                                    -1,
                                    c.index,
                                    Stream::kStdout,
                                    f->payload,
                                    {f->id, 0}});
                unfinished.clear();
              } else {
                fail(c, f->payload, f->id);
              }
              break;
            case ssh::FrameType::kStdout:
            case ssh::FrameType::kStderr:
              events_->push(
                  Event{Event::Type::kOutput,
                        f->id,
                        c.index,
                        f->type == ssh::FrameType::kStdout ? Stream::kStdout : Stream::kStderr,
                        std::move(f->payload),
                        {}});
              break;
            case ssh::FrameType::kExit: {
              wire::Reader in(f->payload, "exit");
              ExitStatus st;
              st.code = in.i32();
              st.signal = in.i32();
              unfinished.erase(std::remove(unfinished.begin(), unfinished.end(), f->id),
                               unfinished.end());
              events_->push(Event{Event::Type::kExit, f->id, c.index, Stream::kStdout, {}, st});
              break;
            }
            case ssh::FrameType::kDone:
              open = false;
              break;
            case ssh::FrameType::kStdinCredit: {
              std::lock_guard lock(mutex_);
              stdin_window_ += static_cast<size_t>(std::max(f->id, 0));
            }
              changed_.notify_all();
              break;
            case ssh::FrameType::kHeartbeat:
              break;
            case ssh::FrameType::kFence:
            case ssh::FrameType::kAbort:
            case ssh::FrameType::kModexRequest:
            case ssh::FrameType::kModexResponse:
              pmix_frame(c, *f);
              break;
            default:
              throw std::runtime_error("unexpected frame from the agent");
          }
        }
      }
      if (silent) {
        // Closing must not wait for a host that cannot answer.
        ssh_set_blocking(s, 0);
        lost("no heartbeat for " + seconds_text(options_.heartbeat_timeout) +
             " (the host is unreachable, or its agent is stopped or hung)");
      } else if (!open && !unfinished.empty()) {
        std::string why = "the connection to its agent closed";
        if (write_failed) why = "lost the connection to " + endpoint + " (" + write_error + ")";
        if (!err_line.empty()) why += " (" + err_line + ")";
        if (!running && c.phase == Phase::kConnecting) {
          why = "'" + command + "' exited before it said hello";
          const int status = ssh_channel_get_exit_status(ch.get());
          if (status == 127) {
            why +=
                " (exit status 127: ddlrun is not installed at " + options_.ddlrun_path + " there)";
          } else if (status >= 0) {
            why += " (exit status " + std::to_string(status) + ")";
          }
        }
        lost(why);
      }
    } catch (const std::exception& e) {
      lost(std::string("protocol error: ") + e.what());
    }
    if (!running) fail(c, "stopped before the job started");
  }

  Job job_;
  LaunchOptions options_;
  std::counting_semaphore<> logins_;  ///< logins in flight, at most ssh.max_parallel
  std::vector<std::unique_ptr<HostConn>> hosts_;
  EventQueue* events_ = nullptr;
  std::unique_ptr<pmix_server::FenceCombiner> fences_;  ///< guarded by mutex_
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  size_t stdin_window_ = ssh::kStdinWindow;  ///< stdin bytes rank 0's agent can take now
  bool stdin_closed_ = false;
  bool killed_ = false;  ///< SIGKILL went out: finish() waits for no more exits
};

}  // namespace

std::unique_ptr<Backend> make_ssh_backend(const Job& job, const LaunchOptions& options) {
  return std::make_unique<SshBackend>(job, options);
}

}  // namespace ddl::launcher
