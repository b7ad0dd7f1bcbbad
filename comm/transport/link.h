#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "base/check.h"

namespace ddl::comm::transport {

// Transports move bytes between two ranks. A Link is one peer's duplex, reliable, ordered byte
// stream; a Device makes Links (it listens, publishes an address through the bootstrap, and
// connects). tcp/ and shm/ implement both with the same file set; the collectives see only
// Link and exchange(). Nothing here blocks forever: every wait has a deadline and every
// failure names the peer.

/// The peer is gone (connection reset, closed, timed out) or a transport call failed. what()
/// names the peer rank (and its host when known) and the reason, e.g.
/// "rank 3 (node2): connection reset by peer".
using TransportError = base::Error<struct TransportErrorTag>;

/// One peer's byte stream. Not thread-safe: one collective uses a Link at a time.
class Link {
 public:
  virtual ~Link() = default;
  /// The peer's global rank.
  virtual int peer() const = 0;
  /// "rank 3 (node2)": for messages.
  virtual std::string peer_name() const = 0;
  /// Hands over up to `n` bytes without blocking; returns how many were taken (0 when the link
  /// is full). Throws TransportError when the peer is gone.
  virtual size_t send_some(const void* data, size_t n) = 0;
  /// Takes up to `n` bytes that have arrived, without blocking; returns how many (0 when none).
  /// Throws TransportError when the peer is gone (EOF included).
  virtual size_t recv_some(void* data, size_t n) = 0;
  /// A file descriptor to poll() (POLLIN: data to receive, POLLOUT: room to send), or -1 when
  /// the link cannot be polled (shared memory) and exchange() should spin and yield.
  virtual int poll_fd() const = 0;
  /// The descriptors to poll for room to send (POLLOUT) and for data to receive (POLLIN) when
  /// they differ by direction (a link striped over several sockets); -1 as for poll_fd().
  virtual int send_poll_fd() const { return poll_fd(); }
  virtual int recv_poll_fd() const { return poll_fd(); }
  /// Whether every byte sent has been taken by the peer or never can be (the peer closed its
  /// link or exited): what a sender about to close the link waits for, so that a message sent
  /// just before finalising is not lost. True where the transport keeps sent bytes after the
  /// close (TCP).
  virtual bool delivered() { return true; }
};

/// A Link that knows its peer from the start: what the transports (tcp/, shm/) derive from.
/// Not copyable: a link owns its sockets or its mapping.
class PeerLink : public Link {
 public:
  PeerLink(int peer, std::string peer_name) : peer_(peer), peer_name_(std::move(peer_name)) {}
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  int peer() const final { return peer_; }
  std::string peer_name() const final { return peer_name_; }

 protected:
  const int peer_;
  const std::string peer_name_;
};

/// Sends `send` to `to` and receives `recv` from `from` at the same time, so that two ranks
/// sending to each other (or a ring) never deadlock; either side may be empty (its link may
/// then be null). Returns when both are complete. Throws TransportError naming the peer when
/// a link fails or `timeout` passes without progress.
void exchange(Link* to, std::span<const std::byte> send, Link* from, std::span<std::byte> recv,
              std::chrono::milliseconds timeout);

/// Where a frame goes, decided once its header is in: called with the bytes received so far
/// (the header, perhaps more), it returns the span for the whole frame: the one it was given,
/// cut to the frame's length, or another buffer (the bytes so far are copied there). It may
/// throw; exchange() passes that on.
using FrameRest = std::function<std::span<std::byte>(std::span<const std::byte> so_far)>;

/// exchange() of a frame whose length the receiver learns from its header: receives into
/// `recv` (room for the frame it expects) and, once `header_bytes` have arrived, asks `rest`
/// where the whole frame goes, all in one loop. A frame of the expected length costs what a
/// plain exchange() costs. A shorter one must be the last the sender sends on the link for now
/// (bytes after it may have been taken); a longer one continues in the span `rest` returns.
void exchange(Link* to, std::span<const std::byte> send, Link* from, std::span<std::byte> recv,
              size_t header_bytes, std::chrono::milliseconds timeout, const FrameRest& rest);

/// Makes Links of one kind for one rank.
class Device {
 public:
  virtual ~Device() = default;
  /// What peers need to reach this rank, published through the bootstrap before connect().
  virtual std::string address() const = 0;
  /// A Link to `peer`, whose address() is `peer_address`. Both sides call it; the one with the
  /// lower rank initiates. Blocks until connected or `timeout`. Throws TransportError.
  virtual std::unique_ptr<Link> connect(int peer, const std::string& peer_name,
                                        const std::string& peer_address,
                                        std::chrono::milliseconds timeout) = 0;
  /// connect() without waiting for the peer's program to call connect() too. The side that
  /// makes the link (the lower rank) makes it as connect() does (the peer's device takes its
  /// half on its own), but fails at once when the peer is gone (tcp: its listener refuses);
  /// the side that waits takes the link only when the peer has made it already, and returns
  /// nullptr otherwise. What a receive from any rank uses. Throws TransportError.
  virtual std::unique_ptr<Link> try_connect(int peer, const std::string& peer_name,
                                            const std::string& peer_address,
                                            std::chrono::milliseconds timeout) = 0;
};

/// What a Device is created with.
struct DeviceOptions {
  int rank = 0;
  std::string job_id;  ///< names shared-memory segments
  /// The job's secret: a connection that does not present it is dropped (tcp).
  std::string token;
  /// tcp: the address to listen on ("" = any); the mapper's choice for this rank.
  std::string bind_address;
  /// tcp: sockets per peer, data striped across them (1 = one stream).
  int streams = 1;
  /// shm: bytes of each direction's ring (rounded up to a power of two, at least 4 KiB).
  size_t shm_bytes = 4u << 20;
};

/// The transports' factories (tcp/tcp.cc, shm/shm.cc). Throw TransportError.
std::unique_ptr<Device> make_tcp_device(const DeviceOptions& options);
std::unique_ptr<Device> make_shm_device(const DeviceOptions& options);

}  // namespace ddl::comm::transport
