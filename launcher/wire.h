#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddl::launcher::wire {

// The byte encoding of the agent protocol and of an encoded Job: big-endian 32-bit integers
// and length-prefixed strings, so every byte of an argument travels as it is.

inline void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

inline void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

/// Reads what put_u32 and put_str wrote; throws std::runtime_error("malformed <what>: ...") on
/// anything short or out of range.
class Reader {
 public:
  Reader(std::string_view bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  uint32_t u32() {
    need(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v = (v << 8) | static_cast<unsigned char>(bytes_[pos_++]);
    return v;
  }
  int i32() { return static_cast<int32_t>(u32()); }
  std::string str() {
    const uint32_t n = u32();
    need(n);
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  /// A count of items that each take at least `min_bytes`: bounded by what is left.
  uint32_t count(size_t min_bytes) {
    const uint32_t n = u32();
    if (n > (bytes_.size() - pos_) / std::max<size_t>(min_bytes, 1)) {
      throw std::runtime_error("malformed " + what_ + ": a count of " + std::to_string(n) +
                               " exceeds the data");
    }
    return n;
  }
  bool done() const { return pos_ == bytes_.size(); }
  void expect_done() const {
    if (!done()) throw std::runtime_error("malformed " + what_ + ": trailing bytes");
  }

 private:
  void need(size_t n) const {
    if (bytes_.size() - pos_ < n) throw std::runtime_error("malformed " + what_ + ": truncated");
  }
  std::string_view bytes_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace ddl::launcher::wire
