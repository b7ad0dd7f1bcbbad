#pragma once
// The one byte encoding of our wires: big-endian integers, length-prefixed strings, and
// messages read off a stream with every length bounded before its bytes are waited for.
//
// How it works: a writer appends with put_u16/put_u32/put_str; a Decoder reads a whole payload
// back, refusing anything short, out of range or left over ("malformed <what>: ..."). On a
// stream, an InBuffer keeps the bytes that came and hands whole messages off its front: the
// bytes before the front are dropped when a read adds more or once they are over half of the
// buffer, so that a read of many small messages costs time linear in its size. A FieldsReader
// reads messages of fields (one type byte, a 4-byte field count, each field a 4-byte length and
// its bytes) as they come: each byte is looked at once, and a count or a length past its limits
// is refused as soon as it is read.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddl::base::net {

/// Appends `v` in two bytes, the high byte first.
void put_u16(std::string& out, uint16_t v);
/// Appends `v` in four bytes, the high byte first.
void put_u32(std::string& out, uint32_t v);
/// Appends the length of `s` (put_u32) and its bytes.
void put_str(std::string& out, std::string_view s);
/// The four bytes at `at` of `bytes` (at least at + 4 of them), as put_u32 wrote them.
uint32_t get_u32(std::string_view bytes, size_t at = 0);

/// Reads what put_u16, put_u32 and put_str wrote; throws std::runtime_error("malformed <what>:
/// ...") on anything short or out of range.
class Decoder {
 public:
  Decoder(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  uint16_t u16();
  uint32_t u32();
  int32_t i32() { return static_cast<int32_t>(u32()); }
  /// A length-prefixed string.
  std::string str();
  /// The next `n` bytes as they are.
  std::string_view bytes(size_t n);
  /// A count of items that each take at least `min_bytes`: bounded by what is left.
  uint32_t count(size_t min_bytes);
  bool done() const { return pos_ == bytes_.size(); }
  /// Throws when bytes are left over.
  void expect_done() const;

 private:
  void need(size_t n) const;
  std::string_view bytes_;
  std::string what_;
  size_t pos_ = 0;
};

/// The bytes of one stream that have come and are not yet taken off its front.
class InBuffer {
 public:
  /// Appends what came (dropping what was taken before).
  void add(std::string_view bytes);
  /// What is not yet taken.
  std::string_view pending() const { return std::string_view(buffer_).substr(at_); }
  /// Takes `n` bytes (at most pending().size()) off the front.
  void take(size_t n);
  /// Everything not yet taken, taken out.
  std::string take_rest();

 private:
  std::string buffer_;
  size_t at_ = 0;  ///< where pending() begins in buffer_
};

/// One message of fields.
struct Fields {
  int type = 0;
  std::vector<std::string> fields;
};

/// The bytes of a message of fields.
std::string encode(int type, const std::vector<std::string>& fields);

/// A FieldsReader's limits unless told others.
inline constexpr size_t kMaxFieldsBytes = size_t{64} << 20;
inline constexpr uint32_t kMaxFields = 1u << 20;

/// Messages of fields, read as the bytes of one stream come (see the top of this file).
class FieldsReader {
 public:
  /// At most `limit` bytes and `max_fields` fields a message.
  explicit FieldsReader(size_t limit = kMaxFieldsBytes, uint32_t max_fields = kMaxFields)
      : limit_(limit), max_fields_(max_fields) {}
  /// The limits from the next message on.
  void set_limits(size_t limit, uint32_t max_fields);
  void add(std::string_view bytes) { in_.add(bytes); }
  /// One whole message off the front; nullopt while it is incomplete. Throws
  /// std::runtime_error for a message past the limits.
  std::optional<Fields> take();
  /// How many bytes the next read may add: what the current message can still need.
  size_t room() const;

 private:
  InBuffer in_;
  size_t limit_;
  uint32_t max_fields_;
  size_t at_ = 0;                   ///< how far the message at the front has been parsed
  std::optional<uint32_t> count_;   ///< its field count, once read
  std::optional<uint32_t> length_;  ///< the length of the field being read, once read
  Fields partial_;
};

/// Appends what `fd` has to `reader` (one read of at most its room; call when poll says `fd` is
/// readable). False on end of file or error.
bool fill(int fd, FieldsReader& reader);

/// Sends a whole message of fields; false when the connection is gone.
bool send(int fd, int type, const std::vector<std::string>& fields);

/// Sends a whole message of fields now or not at all (a peer that does not read cannot hold
/// the sender up); false when it did not all go.
bool send_now(int fd, int type, const std::vector<std::string>& fields);

}  // namespace ddl::base::net
