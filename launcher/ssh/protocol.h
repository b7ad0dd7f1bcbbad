#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/net/codec.h"

namespace ddl::launcher::ssh {

// The agent protocol: frames over the ssh channel's stdin (ddlrun -> agent) and stdout
// (agent -> ddlrun). A frame is one type byte, a signed 32-bit id and a length-prefixed payload
// (base/net/codec.h). The conversation:
//
//   agent  -> H  hello: payload = hostname, the address ddlrun reached it at, two free ports
//   ddlrun -> U  the job's bytes (encode_job), once down each channel before the first J; an
//                interior agent passes it on to each child before the frames routed to it,
//                so ddlrun sends the job, which grows with the hosts, once per channel and not
//                once per host
//   ddlrun -> J  job: id = this host's index; payload = the encoded Job ("": the U before),
//                rendezvous address, ports, and the address of ddlrun's rendezvous server
//                ("": where ddlrun came from)
//   agent  -> K  ready (program found, topology file written)   or   F failure (id = status)
//   ddlrun -> G  go: start the ranks
//   ddlrun -> M  `id` more bytes of output (O and R) may come: the agent sends a rank's output
//                only while ddlrun has granted room for it (the first M comes with G, the
//                host's output window, output_window()), and ddlrun grants back what it read
//                while its own queue has room (launcher/backend.h: EventQueue)
//   agent  -> O / R  bytes of rank `id`'s stdout / stderr, as read (chunks, not lines)
//   agent  -> X  rank `id` ended: payload = exit code, signal
//   agent  -> D  every rank of this host has ended; the agent exits
//   ddlrun -> S  send signal `id` to every rank;  I stdin data for rank 0;  E close its stdin
//   agent  -> Z  `id` more bytes of stdin may come: ddlrun has at most kStdinWindow bytes of I
//                frames that the agent has not yet passed on (written, or dropped with a
//                closed stdin), so the agent's stdin queue is bounded
// Output goes in a window too (M), so that a reader who does not read holds the ranks back
// (the agent stops reading them) and never the channel: ddlrun and every relay keep reading
// every channel, and heartbeats, exits and lost-host notes pass output that waits, as they do
// in the local launcher. (When ddlrun stopped reading a channel instead, a full channel held
// the frames behind the output: an exit went unnoticed, and in the launch tree a relay blocked
// upwards wrote no heartbeat down, so the hosts below gave up.)
// and, for the PMIx server each agent runs (pmix_server/):
//   agent  -> C  fence contribution (FenceFrame): this host's ranks have all entered fence `key`
//   ddlrun -> B  fence result (FenceResultFrame): every host has contributed (or time is up)
//   agent  -> A  rank `id` called PMIx_Abort: payload = status, message
//   agent  -> Q  direct modex request `id` (ModexRequest): the data of a rank on another host
//   ddlrun -> Q  the same request, to the rank's host (host = the asking host)
//   agent  -> P  the answer (ModexResponse; host = the asking host), passed on by ddlrun
// and, to detect a silent partition or a stopped peer:
//   both   -> Y  heartbeat, every second (kHeartbeatInterval): ddlrun from the moment the
//                channel opens, the agent from its hello. Any bytes count as a sign of life.
// When the channel closes before D, the agent SIGTERMs its ranks, SIGKILLs them after a grace,
// removes its files and exits: a lost or killed ddlrun leaves nothing behind. When nothing at
// all comes from ddlrun for the heartbeat deadline (the job frame carries it; 10 s until then)
// the agent does the same; ddlrun, hearing nothing from an agent for that deadline once it said
// hello, declares its host lost ("no heartbeat for N s") and stops waiting for its ranks.
//
// Beyond the fan-out (--tree-width; tree.h), along the launch tree:
//   ddlrun -> W  subtree (SubtreeFrame, tree.h): the agent logs in to its children and runs
//                their agents, each of which gets its own W
//   both   -> T  routed: id = the host a frame is for (down) or from (up), payload = one or
//                more whole frames of that host's conversation, passed on unchanged
//   agent  -> L  host `id`, a child in the tree, is lost: payload = why (its agent went silent,
//                or its channel closed before done, or it ended badly after done)
//   agent  -> V  (routed from the host) all that the host's command (TreeHost::command: ddlrun's
//                agent under the probe's name) printed when it ended before its hello, and
//                how it ended (CommandOutput, tree.h)
// and, for --probe-links down the tree (tree_links.h), while the agent waits for its job:
//   ddlrun -> N  a line for this host's link agent (mapper::run_link_agent), which the agent
//                runs in a thread of its own: the first N starts it, listening on TCP port `id`
//                (0: any free one); payload = the line without its newline ("": none). The
//                job frame (J) stops it, as does the end of the channel.
//   agent  -> N  id 0: a line the link agent printed, without its newline; id 1: it ended
//                (payload: how), and no more lines come
// and, so that ddlrun plans from its agents' answers, at any time before the job (routed like
// the rest to a host below the first level):
//   ddlrun -> Hw inventory request: this host's hardware (the hwloc/NVML probe ddlrun runs
//                here; AgentServices::inventory)
//   agent  -> Hw the answer: id 0, payload = the inventory as YAML (mapper's inventory text);
//                id 1, payload = why this host could not be probed
// W, T, L, V, N and Hw name these six here; their type bytes are 1, 2, 3, 4, 5 and 6, which
// no text begins with, so that a login script's "Welcome ..." or "This system ..." is still
// caught as not the agent's.

enum class FrameType : char {
  kHello = 'H',
  kJob = 'J',
  kJobBytes = 'U',
  kReady = 'K',
  kFailure = 'F',
  kGo = 'G',
  kStdout = 'O',
  kStderr = 'R',
  kExit = 'X',
  kDone = 'D',
  kSignal = 'S',
  kStdin = 'I',
  kStdinEof = 'E',
  kFence = 'C',
  kFenceResult = 'B',
  kAbort = 'A',
  kModexRequest = 'Q',
  kModexResponse = 'P',
  kStdinCredit = 'Z',
  kHeartbeat = 'Y',
  kOutputCredit = 'M',
  kSubtree = '\x01',    ///< W
  kRouted = '\x02',     ///< T
  kLost = '\x03',       ///< L
  kOutput = '\x04',     ///< V
  kLinkLine = '\x05',   ///< N
  kInventory = '\x06',  ///< Hw
};

/// Bytes of stdin ddlrun may send before the agent grants more (kStdinCredit).
constexpr size_t kStdinWindow = size_t{512} << 10;
/// The output window ddlrun grants each host (M) when `hosts` hosts run ranks: what ddlrun
/// may hold beyond its own queue is at most kOutputBudget in all (one host's window at most
/// kMaxOutputWindow, at least kMinOutputWindow), and a single chunk beyond each.
constexpr size_t kOutputBudget = size_t{16} << 20;
constexpr size_t kMinOutputWindow = size_t{64} << 10;
constexpr size_t kMaxOutputWindow = size_t{1} << 20;
size_t output_window(size_t hosts);
/// How often each side sends a heartbeat (Y).
constexpr std::chrono::milliseconds kHeartbeatInterval{1000};
/// The heartbeat deadline until the job frame says otherwise, and ddlrun's default
/// (--heartbeat-timeout).
constexpr std::chrono::milliseconds kDefaultHeartbeatTimeout{10000};

struct Frame {
  FrameType type = FrameType::kHello;
  int32_t id = 0;
  std::string payload;
};

/// A fence contribution (C): the fence's key, its participants (empty: every rank), its
/// PMIX_TIMEOUT in seconds (0: none) and the host's collected data.
struct FenceFrame {
  std::string key;
  std::vector<int> participants;
  int timeout_s = 0;
  std::string data;
  bool operator==(const FenceFrame&) const = default;
};
/// A fence's result (B): its key, the PMIx status (0: success), the combined data, and why it
/// failed.
struct FenceResultFrame {
  std::string key;
  int status = 0;
  std::string data;
  std::string error;
  bool operator==(const FenceResultFrame&) const = default;
};
/// An abort (A): PMIx_Abort's status and message.
struct AbortFrame {
  int status = 0;
  std::string message;
  bool operator==(const AbortFrame&) const = default;
};
/// A direct modex request (Q): the host asking, and the rank whose data it wants.
struct ModexRequest {
  int host = 0;
  int rank = 0;
  bool operator==(const ModexRequest&) const = default;
};
/// A direct modex answer (P): the host that asked, the PMIx status, the rank's data.
struct ModexResponse {
  int host = 0;
  int status = 0;
  std::string data;
  bool operator==(const ModexResponse&) const = default;
};

/// Payloads and back; the decoders throw std::runtime_error("malformed <frame>: ...") on short,
/// long or out-of-range input.
std::string encode(const FenceFrame& f);
std::string encode(const FenceResultFrame& f);
std::string encode(const AbortFrame& f);
std::string encode(const ModexRequest& f);
std::string encode(const ModexResponse& f);
FenceFrame decode_fence(std::string_view payload);
FenceResultFrame decode_fence_result(std::string_view payload);
AbortFrame decode_abort(std::string_view payload);
ModexRequest decode_modex_request(std::string_view payload);
ModexResponse decode_modex_response(std::string_view payload);

/// The bytes of one frame.
std::string encode_frame(FrameType type, int32_t id, std::string_view payload);

/// Collects bytes as they arrive and hands out whole frames (off a base::net::InBuffer: a read
/// of many small frames costs time linear in its size).
class FrameReader {
 public:
  void feed(std::string_view bytes);
  /// The next whole frame, or nullopt until more bytes come. Throws std::runtime_error on an
  /// unknown type or a frame over 256 MiB (the stream is not the agent's).
  std::optional<Frame> next();
  /// The bytes fed but not yet handed out (the start of the next frame), taken out.
  std::string take_rest();

 private:
  base::net::InBuffer in_;
};

/// The frames a routed frame's payload carries. Throws std::runtime_error when it is not whole
/// frames: one that FrameReader refuses, or bytes after the last whole one ("a routed frame
/// ends inside a frame"), which a reader taking what it can would drop without a word.
std::vector<Frame> routed_frames(std::string_view payload);

}  // namespace ddl::launcher::ssh
