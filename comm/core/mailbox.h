#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
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
/// exchanging large messages both ways do not wait on each other. A receive from any of several
/// peers (recv_any) takes the first matching message of whichever sends, beside the receives
/// from named peers.
class Mailbox {
 public:
  /// What makes a link to a peer: Device::connect or Device::try_connect on the right device.
  using Connect = std::function<std::unique_ptr<transport::Link>(int peer)>;

  /// `connect(peer)` makes the link to `peer` (both sides call it: see Device::connect),
  /// `try_connect(peer)` without waiting for the peer (Device::try_connect); `name(peer)` says
  /// "rank 3 (node2)".
  Mailbox(Connect connect, Connect try_connect, std::function<std::string(int peer)> name,
          std::chrono::milliseconds timeout);
  /// Waits, at most the timeout, until the messages sent have been taken (Link::delivered()).
  ~Mailbox();

  /// Sends `count` elements to `peer` under (`group`, `tag`). Throws TransportError naming the
  /// peer when it is gone or makes no progress for the timeout.
  void send(int peer, uint32_t group, int tag, const void* buf, size_t count, DataType type);
  /// Receives the message from `peer` under (`group`, `tag`) into `buf`. Throws MismatchError
  /// when its count or type differ from `count` and `type` (the message is dropped), and
  /// TransportError as send().
  void recv(int peer, uint32_t group, int tag, void* buf, size_t count, DataType type);
  /// Receives the first message under (`group`, `tag`) from whichever of `peers` (other ranks)
  /// sends one, into `buf`, and returns its sender. Throws MismatchError as recv(), and
  /// TransportError naming the peers when none sends for the timeout (and those that have
  /// sent this rank nothing yet), or when every one is gone.
  int recv_any(std::span<const int> peers, uint32_t group, int tag, void* buf, size_t count,
               DataType type);

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
    std::mutex early_mutex;  ///< for `early` (recv_any looks while a recv reads the link)
    std::deque<Early> early;
    std::atomic<uint64_t> frames{0};  ///< frames received
  };
  /// What a receive waits for, and where its data goes.
  struct Wanted {
    uint32_t group;
    int tag;
    void* buf;
    size_t count;
    DataType type;
  };
  /// recv_any's state of one peer.
  struct Candidate;

  Peer& peer(int rank);
  transport::Link& link(int rank, Peer& p);
  /// The link to `rank` if there is one, or one try_connect() makes now; nullptr while the
  /// peer has not made its half (or another thread is connecting).
  transport::Link* try_link(int rank, Peer& p);
  /// Reads the next frame's header from `p` (a TransportError names corrupt bytes); with
  /// `first` (bytes of it already taken), the rest of it.
  Header read_header(int rank, Peer& p, std::span<const std::byte> first = {});
  /// Takes the first message kept aside from `rank` that `w` waits for; false when none.
  bool take_early(int rank, Peer& p, const Wanted& w);
  /// Reads the data of the frame `h` just read from `rank`: into w.buf when `w` waits for it
  /// (true), else aside (false; MismatchError when its count or type differ from `w`'s).
  bool read_data(int rank, Peer& p, const Header& h, const Wanted& w);
  /// One look at `c`'s peer for recv_any: its messages aside, else a frame when bytes have
  /// arrived; true when `w`'s message was taken. Sets c.progress when a frame was read.
  bool look(Candidate& c, const Wanted& w);
  /// recv_any's error once no message came for the timeout (or every peer is gone).
  transport::TransportError no_message(const std::vector<Candidate>& candidates, int tag) const;
  /// Checks `h` against what the receive expects; throws MismatchError when it differs.
  void expect(int rank, const Header& h, size_t count, DataType type) const;

  Connect connect_, try_connect_;
  std::function<std::string(int)> name_;
  std::chrono::milliseconds timeout_;
  std::mutex peers_mutex_;
  std::map<int, std::unique_ptr<Peer>> peers_;
  std::atomic<unsigned> any_start_{0};  ///< recv_any's first peer, one further each call
};

}  // namespace ddl::comm
