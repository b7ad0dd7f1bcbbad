#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ddl::launcher::ssh {

// The agent protocol: frames over the ssh channel's stdin (ddlrun -> agent) and stdout
// (agent -> ddlrun). A frame is one type byte, a signed 32-bit id and a length-prefixed payload
// (wire.h). The conversation:
//
//   agent  -> H  hello: payload = hostname, the address ddlrun reached it at, two free ports
//   ddlrun -> J  job: id = this host's index; payload = encoded Job, rendezvous address, ports,
//                and the address of ddlrun's rendezvous server ("": where ddlrun came from)
//   agent  -> K  ready (program found, topology file written)   or   F failure (id = status)
//   ddlrun -> G  go: start the ranks
//   agent  -> O / R  a line of rank `id`'s stdout / stderr
//   agent  -> X  rank `id` ended: payload = exit code, signal
//   agent  -> D  every rank of this host has ended; the agent exits
//   ddlrun -> S  send signal `id` to every rank;  I stdin data for rank 0;  E close its stdin
// When the channel closes before D, the agent SIGTERMs its ranks, SIGKILLs them after a grace,
// removes its files and exits: a lost or killed ddlrun leaves nothing behind.

enum class FrameType : char {
  kHello = 'H',
  kJob = 'J',
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
};

struct Frame {
  FrameType type = FrameType::kHello;
  int32_t id = 0;
  std::string payload;
};

/// The bytes of one frame.
std::string encode_frame(FrameType type, int32_t id, std::string_view payload);

/// Collects bytes as they arrive and hands out whole frames.
class FrameReader {
 public:
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  /// The next whole frame, or nullopt until more bytes come. Throws std::runtime_error on an
  /// unknown type or a frame over 256 MiB (the stream is not the agent's).
  std::optional<Frame> next();

 private:
  std::string buffer_;
};

}  // namespace ddl::launcher::ssh
