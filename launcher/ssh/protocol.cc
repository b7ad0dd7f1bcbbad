// Frames of the agent protocol (protocol.h).

#include "launcher/ssh/protocol.h"

#include <stdexcept>

#include "launcher/wire.h"

namespace ddl::launcher::ssh {

namespace {
constexpr uint32_t kMaxPayload = 256u << 20;
constexpr std::string_view kTypes = "HJKFGORXDSIE";
}  // namespace

std::string encode_frame(FrameType type, int32_t id, std::string_view payload) {
  std::string out;
  out.reserve(9 + payload.size());
  out.push_back(static_cast<char>(type));
  wire::put_u32(out, static_cast<uint32_t>(id));
  wire::put_str(out, payload);
  return out;
}

std::optional<Frame> FrameReader::next() {
  if (buffer_.size() < 9) return std::nullopt;
  if (kTypes.find(buffer_[0]) == std::string_view::npos) {
    const unsigned char c = static_cast<unsigned char>(buffer_[0]);
    throw std::runtime_error("unexpected byte " + std::to_string(c) +
                             " from the agent (is something printing on its stdout, such as a "
                             "login script?)");
  }
  wire::Reader head(std::string_view(buffer_).substr(1, 8), "frame");
  const int32_t id = head.i32();
  const uint32_t length = head.u32();
  if (length > kMaxPayload) throw std::runtime_error("a frame from the agent is too large");
  if (buffer_.size() < 9 + static_cast<size_t>(length)) return std::nullopt;
  Frame f{static_cast<FrameType>(buffer_[0]), id, buffer_.substr(9, length)};
  buffer_.erase(0, 9 + static_cast<size_t>(length));
  return f;
}

}  // namespace ddl::launcher::ssh
