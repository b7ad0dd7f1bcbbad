// libFuzzer target for the ssh agent protocol (launcher/ssh/protocol.h, tree.h, job.h): the
// bytes a broken or hostile host sends ddlrun or an interior agent up its channel, and a
// parent sends a child down. The first byte picks what reads the rest (its value modulo 4):
//   0  FrameReader fed in pieces (the next byte sizes the first), as ssh's reads cut them:
//      every frame taken must encode back (encode_frame) to exactly the bytes it came from,
//      and a routed frame's payload (T) is read again as frames, as ddlrun and the relay do;
//   1  a frame payload decoder, picked by the next byte: fence, fence result, abort, modex
//      request and answer, command output (V), subtree (W); a payload accepted must encode
//      back to exactly its bytes (a subtree's ssh.max_parallel below 1 reads as 1);
//   2  decode_job (U, J): a job accepted must encode to bytes that decode and encode again to
//      the same bytes (its topology travels as text, which reads back in its canonical form);
//   3  ddlrun's PMIx fence combiner (launcher/pmix_server/fence.h) fed hosts' fence frames
//      (C): records of a host, a clock step and a payload; every result (done or timed out)
//      may name only hosts that contributed to that fence.
// Only std::runtime_error (comm::TopologyError is one) may escape a decoder; anything else,
// a crash, a sanitizer report or an allocation over libFuzzer's limit is a bug.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/net/codec.h"
#include "launcher/job.h"
#include "launcher/pmix_server/fence.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/tree.h"

namespace {

namespace ssh = ddl::launcher::ssh;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_agent_wire: %s\n", what);
  std::abort();
}

/// Every whole frame of `bytes`, each checked to encode back to its bytes; routed payloads
/// read again (at most `depth` levels).
void read_frames(std::string_view bytes, size_t step, int depth) {
  ssh::FrameReader reader;
  std::string consumed, taken;
  size_t at = 0;
  try {
    while (at < bytes.size()) {
      const size_t n = std::min(step, bytes.size() - at);
      reader.feed(bytes.substr(at, n));
      consumed.append(bytes.substr(at, n));
      at += n;
      step = step * 3 % 1031 + 1;
      while (std::optional<ssh::Frame> f = reader.next()) {
        taken += ssh::encode_frame(f->type, f->id, f->payload);
        if (f->type == ssh::FrameType::kRouted && depth > 0) read_frames(f->payload, 7, depth - 1);
      }
    }
  } catch (const std::runtime_error&) {
    return;
  }
  if (consumed.compare(0, taken.size(), taken) != 0) fail("a frame does not encode back");
  if (taken + reader.take_rest() != consumed) fail("the reader lost or added bytes");
}

/// The bytes of a subtree frame as encode() writes them: `in` with its max_parallel field
/// (after the ssh settings' strings and numbers) at least 1, as decode_subtree reads it.
std::string normalised_subtree(std::string_view in, const ssh::SubtreeFrame& f) {
  std::string out(in);
  const size_t at = 4 + f.ssh.ssh_config.size() + 4 + f.ssh.user.size() + 4 + 4 +
                    f.ssh.known_hosts.size() + 4 + 4 + 4;
  std::string one;
  ddl::base::net::put_u32(one, static_cast<uint32_t>(f.ssh.max_parallel));
  out.replace(at, 4, one);
  return out;
}

void decode_payload(uint8_t which, std::string_view p) {
  std::string again;
  try {
    switch (which % 7) {
      case 0:
        again = ssh::encode(ssh::decode_fence(p));
        break;
      case 1:
        again = ssh::encode(ssh::decode_fence_result(p));
        break;
      case 2:
        again = ssh::encode(ssh::decode_abort(p));
        break;
      case 3:
        again = ssh::encode(ssh::decode_modex_request(p));
        break;
      case 4:
        again = ssh::encode(ssh::decode_modex_response(p));
        break;
      case 5:
        again = ssh::encode(ssh::decode_command_output(p));
        break;
      default: {
        const ssh::SubtreeFrame f = ssh::decode_subtree(p);
        if (f.ssh.max_parallel < 1) fail("a subtree frame with max_parallel below 1");
        if (ssh::encode(f) != normalised_subtree(p, f)) fail("a subtree does not encode back");
        return;
      }
    }
  } catch (const std::runtime_error&) {
    return;
  }
  if (again != p) fail("a payload does not encode back to its bytes");
}

void decode_job(const std::string& bytes) {
  std::string once;
  try {
    once = ddl::launcher::encode_job(ddl::launcher::decode_job(bytes));
  } catch (const std::runtime_error&) {
    return;
  }
  if (ddl::launcher::encode_job(ddl::launcher::decode_job(once)) != once)
    fail("a job does not encode, decode and encode to the same bytes");
}

/// The job of fences(): ranks 0,1 on host 0, 2 on host 2, 3,4 on host 1; host 3 holds none.
ddl::comm::Topology fence_job() {
  ddl::comm::Topology t;
  t.job_id = "j";
  t.hosts = {{2, "c", "", {}}, {0, "a", "", {}}, {1, "b", "", {}}, {3, "empty", "", {}}};
  const int host_of[] = {0, 0, 2, 1, 1};
  for (int r = 0; r < 5; ++r) {
    ddl::comm::RankPlacement p;
    p.rank = r;
    p.host = host_of[r];
    t.ranks.push_back(p);
  }
  return t;
}

/// ddlrun's fence combiner fed what hosts sent (C frames, as ssh.cc hands them on): records
/// of a host byte, a clock step byte and a length-prefixed fence payload; each result must
/// name only hosts that contributed to it.
void fences(std::string_view in) {
  using ddl::launcher::pmix_server::FenceCombiner;
  FenceCombiner combiner(ddl::launcher::pmix_server::make_layout(fence_job()),
                         std::chrono::milliseconds(1000));
  FenceCombiner::Clock::time_point now{};
  std::set<std::pair<std::string, int>> contributed;
  auto check = [&](const ddl::launcher::pmix_server::FenceResult& r) {
    for (int h : r.hosts)
      if (contributed.count({r.key, h}) == 0) fail("a fence result for a host that never came");
    if (r.status == 0 && !r.error.empty()) fail("a fence that succeeded with an error");
    std::erase_if(contributed, [&](const auto& c) { return c.first == r.key; });
  };
  while (in.size() >= 4) {
    const int host = static_cast<uint8_t>(in[0]) % 5;
    now += std::chrono::milliseconds(static_cast<uint8_t>(in[1]) * 10);
    const size_t n = std::min<size_t>(static_cast<uint8_t>(in[2]) * 4 + in[3] % 4, in.size() - 4);
    const std::string_view payload = in.substr(4, n);
    in.remove_prefix(4 + n);
    try {
      ssh::FenceFrame f = ssh::decode_fence(payload);
      contributed.insert({f.key, host});
      const std::optional<ddl::launcher::pmix_server::FenceResult> done = combiner.add(
          host, {f.key, std::move(f.participants), f.timeout_s, std::move(f.data)}, now);
      if (done) check(*done);
    } catch (const std::runtime_error&) {
    }
    for (const auto& r : combiner.expire(now))
      check(r);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  switch (data[0] % 4) {
    case 0:
      read_frames(rest, data[1] % 64 + 1, 3);
      break;
    case 1:
      decode_payload(data[1], rest);
      break;
    case 2:
      decode_job(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
      break;
    default:
      fences(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
      break;
  }
  return 0;
}
