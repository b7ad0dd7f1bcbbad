// Streaming copies for the node group's output (node_copy.h).
//
// How it works. A store to a line not in the cache first reads the line from memory (read for
// ownership), so copying S bytes out to a large buffer costs 3S of memory traffic (read the
// source, read and write the destination). Non-temporal stores write whole lines through the
// write-combining buffers instead: 2S, and the destination does not evict what is in the
// cache. The copy stores 16 bytes at a time with movntdq, which needs a 16-byte-aligned
// destination: the head up to the first aligned address and the tail under 64 bytes go
// through memcpy; the body moves 64 bytes (a line) per iteration, loaded unaligned. Streaming
// stores are weakly ordered: stream_fence() (sfence) must come before a flag that says the
// data is there, or before the caller gets its buffer back.

#include "comm/collectives/node_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace ddl::comm::node {

void stream_copy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  const size_t head = (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16;
  if (bytes < head + 64) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

void copy_out(void* dst, const void* src, size_t bytes, bool stream) {
  if (stream) {
    stream_copy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace ddl::comm::node
