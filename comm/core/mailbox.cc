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
//
// A receive from any of several peers (recv_any) cannot wait on one link, nor connect the way
// a named receive does: a link needs both ranks' connect(), and a peer that never sends never
// calls it. So it sweeps the peers, starting one further each call, and on each looks without
// waiting: a message kept aside that matches is taken; else, unless a receive on another
// thread is reading that peer's link, the link is taken as far as it exists (try_connect():
// the lower rank makes it at once, the peer's device accepting it by itself; the higher rank
// takes it once the peer has made it, which a send does), and when bytes have arrived the frame
// is read whole, into the caller's buffer when it matches, else aside, as a named receive
// does. Between sweeps it waits for the TCP links' bytes, or naps (shared memory), a little
// longer each time up to kMostNap. A peer whose link fails is left out (it may have ended after
// its last message); the receive fails when every peer is, or when no frame came from any for
// the timeout, naming the peers and those that sent nothing.

#include "comm/core/mailbox.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "base/text.h"
#include "comm/collectives/signature.h"

namespace ddl::comm {

namespace {

constexpr uint32_t kMagic = 0x50444c44;  // "DDLP"
/// Frames up to this size go out as one copy (one packet on TCP).
constexpr size_t kCopyBytes = 64 * 1024;
constexpr const char* kNextStep =
    " (if that rank died, its own output says why; if it is only slow, raise DDL_TIMEOUT)";
/// recv_any's waits between sweeps of its peers: from the first, doubling up to the most.
constexpr auto kFirstNap = std::chrono::microseconds(20);
constexpr auto kMostNap = std::chrono::microseconds(1000);
/// The most peers an error names one by one.
constexpr size_t kNamesShown = 8;

std::string what_of(size_t count, DataType type) {
  return std::to_string(count) + " elements of " + std::string(to_string(type));
}

}  // namespace

/// What recv_any knows of one peer during the call.
struct Mailbox::Candidate {
  int rank;
  Peer* peer;
  transport::Link* link = nullptr;  ///< once it exists
  std::string gone;                 ///< why its link failed; empty while it may still send
  bool progress = false;            ///< a frame came since the last sweep
};

Mailbox::Mailbox(Connect connect, Connect try_connect, std::function<std::string(int)> name,
                 std::chrono::milliseconds timeout)
    : connect_(std::move(connect)),
      try_connect_(std::move(try_connect)),
      name_(std::move(name)),
      timeout_(timeout) {}

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

transport::Link* Mailbox::try_link(int rank, Peer& p) {
  std::unique_lock lock(p.connect_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return nullptr;
  if (!p.link) p.link = try_connect_(rank);
  return p.link.get();
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

Mailbox::Header Mailbox::read_header(int rank, Peer& p, std::span<const std::byte> first) {
  Header h{};
  auto* bytes = reinterpret_cast<std::byte*>(&h);
  if (!first.empty()) std::memcpy(bytes, first.data(), first.size());
  transport::exchange(nullptr, {}, &link(rank, p), {bytes + first.size(), sizeof h - first.size()},
                      timeout_);
  ++p.frames;
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

bool Mailbox::take_early(int rank, Peer& p, const Wanted& w) {
  std::unique_lock lock(p.early_mutex);
  for (auto it = p.early.begin(); it != p.early.end(); ++it) {
    if (it->header.group != w.group || it->header.tag != w.tag) continue;
    const Early e = std::move(*it);
    p.early.erase(it);
    lock.unlock();
    expect(rank, e.header, w.count, w.type);
    if (!e.data.empty()) std::memcpy(w.buf, e.data.data(), e.data.size());
    return true;
  }
  return false;
}

bool Mailbox::read_data(int rank, Peer& p, const Header& h, const Wanted& w) {
  const size_t bytes = h.count * type_size(static_cast<DataType>(h.type));
  const bool mine = h.group == w.group && h.tag == w.tag;
  if (mine && h.count == w.count && h.type == static_cast<uint8_t>(w.type)) {
    transport::exchange(nullptr, {}, p.link.get(), {static_cast<std::byte*>(w.buf), bytes},
                        timeout_);
    return true;
  }
  Early e{h, std::vector<std::byte>(bytes)};
  transport::exchange(nullptr, {}, p.link.get(), e.data, timeout_);
  if (mine) expect(rank, h, w.count, w.type);  // throws: the message is dropped
  std::lock_guard lock(p.early_mutex);
  p.early.push_back(std::move(e));
  return false;
}

void Mailbox::recv(int rank, uint32_t group, int tag, void* buf, size_t count, DataType type) {
  Peer& p = peer(rank);
  std::lock_guard lock(p.recv_mutex);
  const Wanted w{group, tag, buf, count, type};
  if (take_early(rank, p, w)) return;
  try {
    while (!read_data(rank, p, read_header(rank, p), w)) {
    }
  } catch (const transport::TransportError& e) {
    throw transport::TransportError("recv from " + name_(rank) + ", tag " + std::to_string(tag) +
                                    ": " + e.what() + kNextStep);
  }
}

bool Mailbox::look(Candidate& c, const Wanted& w) {
  Peer& p = *c.peer;
  if (take_early(c.rank, p, w)) return true;
  if (!c.gone.empty()) return false;
  std::unique_lock lock(p.recv_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return false;        // a receive on another thread reads this link
  if (take_early(c.rank, p, w)) return true;  // put aside by that receive meanwhile
  std::byte first[sizeof(Header)];
  size_t got = 0;
  try {
    if (c.link == nullptr) c.link = try_link(c.rank, p);
    if (c.link == nullptr) return false;
    got = c.link->recv_some(first, sizeof first);
  } catch (const transport::TransportError& e) {
    c.gone = e.what();
    return false;
  }
  if (got == 0) return false;
  c.progress = true;
  return read_data(c.rank, p, read_header(c.rank, p, {first, got}), w);
}

int Mailbox::recv_any(std::span<const int> peers, uint32_t group, int tag, void* buf, size_t count,
                      DataType type) {
  std::vector<Candidate> candidates;
  for (int r : peers)
    candidates.push_back(Candidate{r, &peer(r), nullptr, "", false});
  const Wanted w{group, tag, buf, count, type};
  const size_t start = any_start_++ % candidates.size();
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto nap = kFirstNap;
  std::vector<pollfd> fds;
  for (;;) {
    bool progress = false;
    size_t gone = 0;
    fds.clear();
    for (size_t i = 0; i < candidates.size(); ++i) {
      Candidate& c = candidates[(start + i) % candidates.size()];
      try {
        if (look(c, w)) return c.rank;
      } catch (const transport::TransportError& e) {
        throw transport::TransportError("recv from " + name_(c.rank) + ", tag " +
                                        std::to_string(tag) + ": " + e.what() + kNextStep);
      }
      progress = progress || std::exchange(c.progress, false);
      gone += c.gone.empty() ? 0 : 1;
      if (c.gone.empty() && c.link != nullptr && c.link->recv_poll_fd() >= 0)
        fds.push_back(pollfd{c.link->recv_poll_fd(), POLLIN, 0});
    }
    const auto now = std::chrono::steady_clock::now();
    if (progress) {
      deadline = now + timeout_;
      nap = kFirstNap;
      continue;
    }
    if (gone == candidates.size() || now >= deadline) throw no_message(candidates, tag);
    const timespec wait{0, std::chrono::duration_cast<std::chrono::nanoseconds>(nap).count()};
    if (fds.empty()) {
      std::this_thread::sleep_for(nap);
    } else {
      ppoll(fds.data(), fds.size(), &wait, nullptr);
    }
    nap = std::min<std::chrono::microseconds>(nap * 2, kMostNap);
  }
}

transport::TransportError Mailbox::no_message(const std::vector<Candidate>& candidates,
                                              int tag) const {
  auto names = [this](const std::vector<int>& ranks) {
    std::string text;
    for (size_t i = 0; i < ranks.size() && i < kNamesShown; ++i)
      text += (i == 0 ? "" : ", ") + name_(ranks[i]);
    if (ranks.size() > kNamesShown)
      text += " and " + std::to_string(ranks.size() - kNamesShown) + " more";
    return text;
  };
  std::vector<int> all, silent;
  std::string gone;
  size_t gone_count = 0;
  for (const Candidate& c : candidates) {
    all.push_back(c.rank);
    if (c.peer->frames == 0 && c.gone.empty()) silent.push_back(c.rank);
    if (c.gone.empty()) continue;
    gone += (gone.empty() ? "" : "; ") + c.gone;
    ++gone_count;
  }
  std::string text = "recv from any of " + names(all) + ", tag " + std::to_string(tag) + ": ";
  if (gone_count == candidates.size())
    return transport::TransportError(text + "every one is gone (" + gone + ")");
  text += "no message within " + base::seconds_text(timeout_);
  if (!silent.empty()) {
    text +=
        "; " + names(silent) + (silent.size() == 1 ? " has" : " have") + " sent this rank nothing";
  }
  if (!gone.empty()) text += "; " + gone;
  return transport::TransportError(
      text +
      " (does every sender use this tag? if a rank died, its own output says why; if it "
      "is only slow, raise DDL_TIMEOUT)");
}

}  // namespace ddl::comm
