// Frames of the agent protocol (protocol.h).

#include "launcher/ssh/protocol.h"

#include <algorithm>
#include <stdexcept>

#include "base/net/codec.h"

namespace ddl::launcher::ssh {

namespace {
constexpr uint32_t kMaxPayload = 256u << 20;
// The last six: the launch tree's W, T, L and V, --probe-links' N and the inventory's Hw
// (protocol.h).
constexpr std::string_view kTypes = "HJUKFGORXDSIECBAQPZYM\x01\x02\x03\x04\x05\x06";
}  // namespace

std::string encode_frame(FrameType type, int32_t id, std::string_view payload) {
  std::string out;
  out.reserve(9 + payload.size());
  out.push_back(static_cast<char>(type));
  base::net::put_u32(out, static_cast<uint32_t>(id));
  base::net::put_str(out, payload);
  return out;
}

std::string encode(const FenceFrame& f) {
  std::string out;
  base::net::put_str(out, f.key);
  base::net::put_u32(out, static_cast<uint32_t>(f.participants.size()));
  for (int r : f.participants)
    base::net::put_u32(out, static_cast<uint32_t>(r));
  base::net::put_u32(out, static_cast<uint32_t>(f.timeout_s));
  base::net::put_str(out, f.data);
  return out;
}

std::string encode(const FenceResultFrame& f) {
  std::string out;
  base::net::put_str(out, f.key);
  base::net::put_u32(out, static_cast<uint32_t>(f.status));
  base::net::put_str(out, f.data);
  base::net::put_str(out, f.error);
  return out;
}

std::string encode(const AbortFrame& f) {
  std::string out;
  base::net::put_u32(out, static_cast<uint32_t>(f.status));
  base::net::put_str(out, f.message);
  return out;
}

std::string encode(const ModexRequest& f) {
  std::string out;
  base::net::put_u32(out, static_cast<uint32_t>(f.host));
  base::net::put_u32(out, static_cast<uint32_t>(f.rank));
  return out;
}

std::string encode(const ModexResponse& f) {
  std::string out;
  base::net::put_u32(out, static_cast<uint32_t>(f.host));
  base::net::put_u32(out, static_cast<uint32_t>(f.status));
  base::net::put_str(out, f.data);
  return out;
}

namespace {
/// A non-negative number (a rank, a host, seconds).
int index_from(base::net::Decoder& in, const char* what) {
  const int v = in.i32();
  if (v < 0) throw std::runtime_error(std::string("malformed ") + what + ": a negative index");
  return v;
}
}  // namespace

FenceFrame decode_fence(std::string_view payload) {
  base::net::Decoder in(payload, "fence frame");
  FenceFrame f;
  f.key = in.str();
  const uint32_t n = in.count(4);
  for (uint32_t i = 0; i < n; ++i)
    f.participants.push_back(index_from(in, "fence frame"));
  f.timeout_s = index_from(in, "fence frame");
  f.data = in.str();
  in.expect_done();
  return f;
}

FenceResultFrame decode_fence_result(std::string_view payload) {
  base::net::Decoder in(payload, "fence result frame");
  FenceResultFrame f;
  f.key = in.str();
  f.status = in.i32();
  f.data = in.str();
  f.error = in.str();
  in.expect_done();
  return f;
}

AbortFrame decode_abort(std::string_view payload) {
  base::net::Decoder in(payload, "abort frame");
  AbortFrame f;
  f.status = in.i32();
  f.message = in.str();
  in.expect_done();
  return f;
}

ModexRequest decode_modex_request(std::string_view payload) {
  base::net::Decoder in(payload, "modex request frame");
  ModexRequest f;
  f.host = index_from(in, "modex request frame");
  f.rank = index_from(in, "modex request frame");
  in.expect_done();
  return f;
}

ModexResponse decode_modex_response(std::string_view payload) {
  base::net::Decoder in(payload, "modex response frame");
  ModexResponse f;
  f.host = index_from(in, "modex response frame");
  f.status = in.i32();
  f.data = in.str();
  in.expect_done();
  return f;
}

size_t output_window(size_t hosts) {
  return std::clamp(kOutputBudget / std::max<size_t>(hosts, 1), kMinOutputWindow, kMaxOutputWindow);
}

void FrameReader::feed(std::string_view bytes) {
  in_.add(bytes);
}

std::string FrameReader::take_rest() {
  return in_.take_rest();
}

std::optional<Frame> FrameReader::next() {
  const std::string_view left = in_.pending();
  if (left.size() < 9) return std::nullopt;
  if (kTypes.find(left[0]) == std::string_view::npos) {
    const unsigned char c = static_cast<unsigned char>(left[0]);
    throw std::runtime_error("unexpected byte " + std::to_string(c) +
                             " from the agent (is something printing on its stdout, such as a "
                             "login script?)");
  }
  const int32_t id = static_cast<int32_t>(base::net::get_u32(left, 1));
  const uint32_t length = base::net::get_u32(left, 5);
  if (length > kMaxPayload) throw std::runtime_error("a frame from the agent is too large");
  if (left.size() < 9 + static_cast<size_t>(length)) return std::nullopt;
  Frame f{static_cast<FrameType>(left[0]), id, std::string(left.substr(9, length))};
  in_.take(9 + static_cast<size_t>(length));
  return f;
}

std::vector<Frame> routed_frames(std::string_view payload) {
  FrameReader inner;
  inner.feed(payload);
  std::vector<Frame> frames;
  while (std::optional<Frame> f = inner.next())
    frames.push_back(std::move(*f));
  if (!inner.take_rest().empty()) throw std::runtime_error("a routed frame ends inside a frame");
  return frames;
}

}  // namespace ddl::launcher::ssh
