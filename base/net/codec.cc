// The byte encoding of our wires (how it works in codec.h).

#include "base/net/codec.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <utility>

#include "base/fd.h"

namespace ddl::base::net {

void put_u16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v & 0xff));
}

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

uint32_t get_u32(std::string_view bytes, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i)
    v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

uint16_t Decoder::u16() {
  need(2);
  const auto hi = static_cast<unsigned char>(bytes_[pos_]);
  const auto lo = static_cast<unsigned char>(bytes_[pos_ + 1]);
  pos_ += 2;
  return static_cast<uint16_t>((hi << 8) | lo);
}

uint32_t Decoder::u32() {
  need(4);
  const uint32_t v = get_u32(bytes_, pos_);
  pos_ += 4;
  return v;
}

std::string Decoder::str() {
  const uint32_t n = u32();
  return std::string(bytes(n));
}

std::string_view Decoder::bytes(size_t n) {
  need(n);
  const std::string_view out = bytes_.substr(pos_, n);
  pos_ += n;
  return out;
}

uint32_t Decoder::count(size_t min_bytes) {
  const uint32_t n = u32();
  if (n > (bytes_.size() - pos_) / std::max<size_t>(min_bytes, 1)) {
    throw std::runtime_error("malformed " + what_ + ": a count of " + std::to_string(n) +
                             " exceeds the data");
  }
  return n;
}

void Decoder::expect_done() const {
  if (!done()) throw std::runtime_error("malformed " + what_ + ": trailing bytes");
}

void Decoder::need(size_t n) const {
  if (bytes_.size() - pos_ < n) throw std::runtime_error("malformed " + what_ + ": truncated");
}

void InBuffer::add(std::string_view bytes) {
  buffer_.erase(0, std::exchange(at_, 0));
  buffer_.append(bytes);
}

void InBuffer::take(size_t n) {
  at_ += std::min(n, buffer_.size() - at_);
  if (at_ > buffer_.size() / 2) {  // what is dropped pays for moving what is left
    buffer_.erase(0, at_);
    at_ = 0;
  }
}

std::string InBuffer::take_rest() {
  std::string rest = buffer_.substr(at_);
  buffer_.clear();
  at_ = 0;
  return rest;
}

std::string encode(int type, const std::vector<std::string>& fields) {
  std::string out(1, static_cast<char>(type));
  put_u32(out, static_cast<uint32_t>(fields.size()));
  for (const std::string& f : fields)
    put_str(out, f);
  return out;
}

void FieldsReader::set_limits(size_t limit, uint32_t max_fields) {
  limit_ = limit;
  max_fields_ = max_fields;
}

// How it works: `at_` is how far the message at the front of the buffer has been parsed; its
// field count and the length of the field being read are kept once read, and a field once
// whole is moved into `partial_`. A call goes on from there, so each byte is looked at once;
// a whole message is taken off the buffer's front.
std::optional<Fields> FieldsReader::take() {
  while (true) {
    const std::string_view p = in_.pending();
    const size_t have = p.size() - at_;
    if (!count_) {
      if (have < 5) return std::nullopt;
      partial_.type = static_cast<unsigned char>(p[at_]);
      count_ = get_u32(p, at_ + 1);
      if (*count_ > max_fields_)
        throw std::runtime_error("a message with " + std::to_string(*count_) + " fields");
      at_ += 5;
    } else if (partial_.fields.size() == *count_) {
      Fields whole = std::move(partial_);
      in_.take(std::exchange(at_, 0));
      count_.reset();
      partial_ = Fields{};
      return whole;
    } else if (!length_) {
      if (have < 4) return std::nullopt;
      length_ = get_u32(p, at_);
      if (at_ + 4 + *length_ > limit_) {
        throw std::runtime_error("a message over " + std::to_string(limit_ >> 10) + " KiB");
      }
      at_ += 4;
    } else {
      if (have < *length_) return std::nullopt;
      partial_.fields.emplace_back(p.substr(at_, *length_));
      at_ += *length_;
      length_.reset();
    }
  }
}

size_t FieldsReader::room() const {
  // A whole header or length prefix past the limit must still come in, to be refused.
  const size_t cap = limit_ + 8;
  const size_t held = in_.pending().size();
  return held >= cap ? 1 : cap - held;
}

bool fill(int fd, FieldsReader& reader) {
  char chunk[65536];
  ssize_t n = 0;
  do {
    n = ::recv(fd, chunk, std::min(sizeof chunk, reader.room()), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  reader.add(std::string_view(chunk, static_cast<size_t>(n)));
  return true;
}

bool send(int fd, int type, const std::vector<std::string>& fields) {
  return base::write_all(fd, encode(type, fields)) == 0;
}

bool send_now(int fd, int type, const std::vector<std::string>& fields) {
  const std::string bytes = encode(type, fields);
  const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  return n == static_cast<ssize_t>(bytes.size());
}

}  // namespace ddl::base::net
