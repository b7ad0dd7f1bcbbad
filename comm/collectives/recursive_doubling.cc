// Recursive-doubling allreduce, for small messages.
//
// How it works. With p = 2^k members, step j (mask = 1, 2, 4, ...) pairs member i with
// i ^ mask; the two exchange their whole buffers and both combine them, so after k steps
// everyone holds the full reduction: log2(p) latencies instead of the ring's 2 (n - 1).
//
// The result must have the same bits on every member, so both partners evaluate the same
// expression: op(lower, higher), the lower-indexed partner's data on the left. The lower one
// folds the received buffer into its own; the higher one folds its own into the received
// copy and keeps that. (Sum and product are commutative in IEEE arithmetic, but min/max of
// +0/-0 or of two NaNs are not, so the order is fixed for every op.)
//
// When n is not a power of two, let p be the largest power of two below n and e = n - p.
// First the 2e lowest members pair up: member 2i sends its buffer to 2i + 1, which computes
// op(x[2i], x[2i+1]) and takes part in the doubling as virtual member i; members from 2e on
// take part as virtual members i - e. Virtual order follows real order, so "lower virtual
// member" still means a fixed left operand. At the end each 2i + 1 sends the result back to
// 2i. Every element is reduced along one fixed tree, so all members agree bitwise. kAvg sums,
// then every member divides by n (the same operation on the same bits).
//
// With a signature (signature.h) every message is a frame: a fixed header (a magic number, the
// payload's length and the sender's verdict on the members' calls), then the payload. The
// receiver reads the header first and then takes exactly as many payload bytes as it announces,
// so members whose counts differ stay in step; it merges the sender's verdict into its own and
// folds the payload in only while no mismatch is known and the length is its own. The pattern
// carries every member's verdict to every member (the fold's result goes back to 2i with the
// final verdict), so all members throw MismatchError, or none. A mismatch costs nothing more:
// the same messages run to the end, their payloads ignored.
//
// The messages live in two buffers per thread (this member's [header | data] and the
// partner's), grown on first use and kept; `buf` is copied in at the start and out at the end.

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/collectives/signature.h"

namespace ddl::comm {
namespace {

constexpr uint32_t kMagic = 0x53'4c'44'44;  // "DDLS"
/// A larger announced payload cannot be a collective's: the stream is out of step.
constexpr uint64_t kMaxPayload = uint64_t{1} << 40;

/// What precedes a payload when signatures are checked.
struct Header {
  uint32_t magic = kMagic;
  uint32_t reserved = 0;
  uint64_t payload_bytes = 0;
  Verdict verdict;
};

/// One call's messages: this member's [header | data] and room for a partner's.
class Messages {
 public:
  Messages(const Group& g, const void* buf, size_t bytes, const Signature* sig)
      : g_(g), header_bytes_(sig != nullptr ? sizeof(Header) : 0), bytes_(bytes) {
    thread_local std::vector<std::byte> out, in;
    out.resize(std::max(out.size(), header_bytes_ + bytes));
    in.resize(std::max(in.size(), header_bytes_ + bytes));
    out_ = out.data();
    in_ = in.data();
    if (bytes > 0) std::memcpy(mine(), buf, bytes);
    if (sig != nullptr) verdict_ = Verdict::of(g.global(g.rank()), *sig);
  }

  /// This member's data, reduced in place.
  std::byte* mine() { return out_ + header_bytes_; }
  /// The last payload received.
  std::byte* theirs() { return in_ + header_bytes_; }

  /// Sends this member's message to `to` and receives `from`'s (either may be null). True when
  /// the received payload may be used: it has this member's length and no mismatch is known.
  bool exchange(transport::Link* to, transport::Link* from) {
    const auto timeout = g_.timeout();
    std::span<const std::byte> send;
    if (to != nullptr) send = {out_, header_bytes_ + bytes_};
    if (header_bytes_ == 0 || from == nullptr) {
      if (header_bytes_ > 0) write_header();
      transport::exchange(to, send, from, {in_, from != nullptr ? bytes_ : 0}, timeout);
      return true;
    }
    if (to != nullptr) write_header();
    from_ = from;
    // Captures one pointer, so std::function keeps it without allocating.
    transport::exchange(to, send, from, {in_, header_bytes_}, timeout,
                        [this](std::span<const std::byte> got) { return payload_after(got); });
    return usable_;
  }

  /// Throws MismatchError when the members' calls differ, else copies the result to `buf`.
  void finish(void* buf) {
    if (verdict_.mismatch()) throw MismatchError(verdict_.message());
    if (bytes_ > 0) std::memcpy(buf, mine(), bytes_);
  }

 private:
  /// Reads a received header: merges its verdict, and returns where its payload goes.
  std::span<std::byte> payload_after(std::span<const std::byte> got) {
    Header h;
    std::memcpy(&h, got.data(), sizeof h);
    if (h.magic != kMagic || h.payload_bytes > kMaxPayload) {
      throw transport::TransportError(from_->peer_name() +
                                      ": sent bytes that are not a collective's message (its "
                                      "calls are out of step with this rank's)");
    }
    verdict_.merge(h.verdict);
    usable_ = h.payload_bytes == bytes_ && !verdict_.mismatch();
    if (h.payload_bytes == bytes_) return {theirs(), bytes_};
    drain_.resize(h.payload_bytes);
    return drain_;
  }

  void write_header() {
    Header h;
    h.payload_bytes = bytes_;
    h.verdict = verdict_;
    std::memcpy(out_, &h, sizeof h);
  }

  const Group& g_;
  size_t header_bytes_;
  size_t bytes_;
  std::byte* out_;
  std::byte* in_;
  std::vector<std::byte> drain_;
  Verdict verdict_;
  transport::Link* from_ = nullptr;  ///< the sender of the frame being received
  bool usable_ = false;              ///< whether its payload may be used
};

}  // namespace

void recursive_doubling_allreduce(const Group& g, void* buf, size_t count, DataType type,
                                  ReduceOp op, const Signature* sig) {
  const int n = g.size();
  if (n == 1 || (count == 0 && sig == nullptr)) return;
  const size_t bytes = count * type_size(type);
  Messages m(g, buf, bytes, sig);
  // mine = op(lower member's data, higher member's data), the same expression on both sides.
  auto fold = [&](bool partner_is_higher) {
    if (partner_is_higher) {
      reduce_into(m.mine(), m.theirs(), count, type, op);
    } else {
      reduce_into(m.theirs(), m.mine(), count, type, op);
      std::memcpy(m.mine(), m.theirs(), bytes);
    }
  };
  auto finish = [&] {
    m.finish(buf);
    if (op == ReduceOp::kAvg && count > 0) divide(buf, count, type, n);
  };

  int p = 1;
  while (p * 2 <= n)
    p *= 2;
  const int extra = n - p;
  const int r = g.rank();

  // Fold: member 2i hands its data to 2i + 1 and waits for the result.
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      m.exchange(&g.link(r + 1), nullptr);
      if (m.exchange(nullptr, &g.link(r + 1))) std::memcpy(m.mine(), m.theirs(), bytes);
      finish();
      return;
    }
    if (m.exchange(nullptr, &g.link(r - 1))) fold(false);  // op(x[2i], x[2i+1])
  }

  const int virt = r < 2 * extra ? r / 2 : r - extra;
  auto real = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  for (int mask = 1; mask < p; mask *= 2) {
    const int partner = real(virt ^ mask);
    transport::Link& link = g.link(partner);
    if (m.exchange(&link, &link)) fold(partner > r);
  }

  if (r < 2 * extra) m.exchange(&g.link(r - 1), nullptr);
  finish();
}

}  // namespace ddl::comm
