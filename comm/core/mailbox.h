#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/transport/link.h"

namespace ddl::comm {

/// Point-to-point messages between two ranks, on links of their own (never the collectives'),
/// so that they may run on other threads while collectives run.
///
/// Each message is a frame: a header (group id, tag, type, count) and its bytes. A receive takes
/// the sender's first message with its group and tag: one that waited aside (arrived while
/// another tag was being waited for), else the next frames from the link, keeping those of other
/// tags aside in arrival order. Sends to one peer are serialised, and so are receives from one
/// peer; a send and a receive with the same peer may run at once (two threads), so two ranks
/// exchanging large messages both ways do not wait on each other.
class Mailbox {
 public:
  /// `connect(peer)` makes the link to `peer` (both sides call it: see Device::connect);
  /// `name(peer)` says "rank 3 (node2)".
  Mailbox(std::function<std::unique_ptr<transport::Link>(int peer)> connect,
          std::function<std::string(int peer)> name, std::chrono::milliseconds timeout);
  /// Waits, at most the timeout, until the messages sent have been taken (Link::delivered()).
  ~Mailbox();

  /// Sends `count` elements to `peer` under (`group`, `tag`). Throws TransportError naming the
  /// peer when it is gone or makes no progress for the timeout.
  void send(int peer, uint32_t group, int tag, const void* buf, size_t count, DataType type);
  /// Receives the message from `peer` under (`group`, `tag`) into `buf`. Throws MismatchError
  /// when its count or type differ from `count` and `type` (the message is dropped), and
  /// TransportError as send().
  void recv(int peer, uint32_t group, int tag, void* buf, size_t count, DataType type);

 private:
  /// A frame's header, as sent.
  struct Header {
    uint32_t magic;
    uint32_t group;
    int32_t tag;
    uint8_t type;
    uint8_t unused[3];
    uint64_t count;
  };
  static_assert(sizeof(Header) == 24, "a Header is sent as its bytes");
  /// A message that arrived before its receive.
  struct Early {
    Header header;
    std::vector<std::byte> data;
  };
  struct Peer {
    std::mutex connect_mutex, send_mutex, recv_mutex;
    std::unique_ptr<transport::Link> link;
    std::deque<Early> early;
  };

  Peer& peer(int rank);
  transport::Link& link(int rank, Peer& p);
  /// Reads the next frame's header from `p` (a TransportError names corrupt bytes).
  Header read_header(int rank, Peer& p);
  /// Checks `h` against what the receive expects; throws MismatchError when it differs.
  void expect(int rank, const Header& h, size_t count, DataType type) const;

  std::function<std::unique_ptr<transport::Link>(int)> connect_;
  std::function<std::string(int)> name_;
  std::chrono::milliseconds timeout_;
  std::mutex peers_mutex_;
  std::map<int, std::unique_ptr<Peer>> peers_;
};

}  // namespace ddl::comm
