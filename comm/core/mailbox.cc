// Point-to-point messages: frames matched by group and tag (see mailbox.h).
//
// How it works: a send writes its frame's 24-byte header and its data on the peer's own
// message link (one exchange() when the frame is small enough to copy into one buffer, else
// the header and then the data straight from the caller's buffer). A receive first looks among
// the messages that arrived ahead of their receive; otherwise it reads headers off the link:
// a frame for another group or tag is read whole into memory and kept aside, in order, and the
// first one that matches is read straight into the caller's buffer. A matching frame of another
// count or type is read and dropped, and the receive fails naming both sides, so the stream
// stays in step for the next message. Links are connected on the first message either way.
// Closing waits until what was sent has been taken (a sender may finalise first).

#include "comm/core/mailbox.h"

#include <cstring>
#include <thread>

#include "comm/collectives/signature.h"

namespace ddl::comm {

namespace {

constexpr uint32_t kMagic = 0x50444c44;  // "DDLP"
/// Frames up to this size go out as one copy (one packet on TCP).
constexpr size_t kCopyBytes = 64 * 1024;
constexpr const char* kNextStep =
    " (if that rank died, its own output says why; if it is only slow, raise DDL_TIMEOUT)";

std::string what_of(size_t count, DataType type) {
  return std::to_string(count) + " elements of " + std::string(to_string(type));
}

}  // namespace

Mailbox::Mailbox(std::function<std::unique_ptr<transport::Link>(int)> connect,
                 std::function<std::string(int)> name, std::chrono::milliseconds timeout)
    : connect_(std::move(connect)), name_(std::move(name)), timeout_(timeout) {}

Mailbox::~Mailbox() {
  // Messages still in a link's buffer reach a receiver that has not connected or read yet
  // (shared memory loses them at the close): wait for them, at most the timeout in all.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (auto& [rank, p] : peers_) {
    while (p->link && !p->link->delivered() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Mailbox::Peer& Mailbox::peer(int rank) {
  std::lock_guard lock(peers_mutex_);
  std::unique_ptr<Peer>& p = peers_[rank];
  if (!p) p = std::make_unique<Peer>();
  return *p;
}

transport::Link& Mailbox::link(int rank, Peer& p) {
  std::lock_guard lock(p.connect_mutex);
  if (!p.link) p.link = connect_(rank);
  return *p.link;
}

void Mailbox::send(int rank, uint32_t group, int tag, const void* buf, size_t count,
                   DataType type) {
  Peer& p = peer(rank);
  std::lock_guard lock(p.send_mutex);
  const Header h{kMagic, group, tag, static_cast<uint8_t>(type), {}, count};
  const size_t bytes = count * type_size(type);
  const auto* data = static_cast<const std::byte*>(buf);
  try {
    transport::Link& l = link(rank, p);
    if (bytes <= kCopyBytes) {
      thread_local std::vector<std::byte> frame;
      frame.resize(sizeof h + bytes);
      std::memcpy(frame.data(), &h, sizeof h);
      if (bytes > 0) std::memcpy(frame.data() + sizeof h, data, bytes);
      transport::exchange(&l, frame, nullptr, {}, timeout_);
      return;
    }
    transport::exchange(&l, {reinterpret_cast<const std::byte*>(&h), sizeof h}, nullptr, {},
                        timeout_);
    transport::exchange(&l, {data, bytes}, nullptr, {}, timeout_);
  } catch (const transport::TransportError& e) {
    throw transport::TransportError("send to " + name_(rank) + ", tag " + std::to_string(tag) +
                                    ": " + e.what() + kNextStep);
  }
}

Mailbox::Header Mailbox::read_header(int rank, Peer& p) {
  Header h{};
  transport::exchange(nullptr, {}, &link(rank, p), {reinterpret_cast<std::byte*>(&h), sizeof h},
                      timeout_);
  if (h.magic != kMagic || h.type >= kDataTypes) {
    throw transport::TransportError(name_(rank) +
                                    ": a message that is not one of libddl's (corrupt link)");
  }
  return h;
}

void Mailbox::expect(int rank, const Header& h, size_t count, DataType type) const {
  const auto sent = static_cast<DataType>(h.type);
  if (h.count == count && sent == type) return;
  throw MismatchError("recv from " + name_(rank) + ", tag " + std::to_string(h.tag) + ": rank " +
                      std::to_string(rank) + " sent " + what_of(h.count, sent) +
                      ", this rank expects " + what_of(count, type) +
                      "; the message was dropped (pass the same count and type to send and "
                      "recv)");
}

void Mailbox::recv(int rank, uint32_t group, int tag, void* buf, size_t count, DataType type) {
  Peer& p = peer(rank);
  std::lock_guard lock(p.recv_mutex);
  for (auto it = p.early.begin(); it != p.early.end(); ++it) {
    if (it->header.group != group || it->header.tag != tag) continue;
    const Early e = std::move(*it);
    p.early.erase(it);
    expect(rank, e.header, count, type);
    if (!e.data.empty()) std::memcpy(buf, e.data.data(), e.data.size());
    return;
  }
  try {
    for (;;) {
      const Header h = read_header(rank, p);
      const size_t bytes = h.count * type_size(static_cast<DataType>(h.type));
      const bool mine = h.group == group && h.tag == tag;
      if (mine && h.count == count && h.type == static_cast<uint8_t>(type)) {
        transport::exchange(nullptr, {}, p.link.get(), {static_cast<std::byte*>(buf), bytes},
                            timeout_);
        return;
      }
      Early e{h, std::vector<std::byte>(bytes)};
      transport::exchange(nullptr, {}, p.link.get(), e.data, timeout_);
      if (mine) expect(rank, h, count, type);  // throws: the message is dropped
      p.early.push_back(std::move(e));
    }
  } catch (const transport::TransportError& e) {
    throw transport::TransportError("recv from " + name_(rank) + ", tag " + std::to_string(tag) +
                                    ": " + e.what() + kNextStep);
  }
}

}  // namespace ddl::comm
