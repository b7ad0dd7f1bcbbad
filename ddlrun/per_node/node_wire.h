#pragma once
// The wire format of per-node mode's rendezvous (rendezvous.h): a message is one type byte, a
// 4-byte field count and the fields, each a 4-byte length and its bytes (big-endian), at most
// kMaxMessage bytes in all, and at most kMaxHello (kMaxHelloFields fields) before a node proved
// that it knows the job's secret.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ddlrun/per_node/rendezvous.h"

namespace ddl::ddlrun::wire {

enum Type : uint8_t {
  kHello = 1,  ///< magic, nonce, proof, node rank, node count, job, host, "", round
  kWelcome,    ///< proof, salt, job id, N, then node rank, host, address, inventory for each
  kPlan,       ///< digest, ddl port, master port
  kGo,         ///< ddl port, master port
  kHeartbeat,  ///< nothing
  kFail,       ///< what, status
  kDone,       ///< status, restartable ("1": failed by itself, or 0)
  kStop,       ///< node, host, what, status
  kEnd,        ///< status, final ("1": no restart), node ranks of the nodes lost
  kError,      ///< text
  kChallenge,  ///< magic, nonce: node 0's first words on every connection
  kProven,     ///< proof: node 0's, once it admitted a node's hello, before the node says more
  kInventory,  ///< inventory: a node's hardware, sent only once node 0 proved the secret
};

inline constexpr const char* kMagic = "DDLNODE4";
inline constexpr size_t kMaxMessage = size_t{64} << 20;
/// Before the hello is accepted: a hello carries one node's hardware, tens of KB.
inline constexpr size_t kMaxHello = size_t{256} << 10;
inline constexpr uint32_t kMaxHelloFields = 16;
/// The nonces' size in bytes.
inline constexpr size_t kNonceSize = 16;

struct Message {
  int type = 0;
  std::vector<std::string> fields;
};

std::string encode(int type, const std::vector<std::string>& fields);

/// The messages of one connection, read as the bytes come: each byte is looked at once (a
/// field once complete is never parsed again), and a length prefix or field count past the
/// limits is refused as soon as it is read, before its bytes are waited for.
class Reader {
 public:
  explicit Reader(size_t limit = kMaxMessage, uint32_t max_fields = 1u << 20)
      : limit_(limit), max_fields_(max_fields) {}
  /// The limits from the next message on (the hello accepted: the larger ones).
  void set_limits(size_t limit, uint32_t max_fields);
  void add(std::string_view bytes) { buffer_.append(bytes); }
  /// One whole message off the front; nullopt while it is incomplete. Throws
  /// std::runtime_error for a message past the limits.
  std::optional<Message> take();
  /// How many bytes the next read may add: what the current message can still need.
  size_t room() const;

 private:
  std::string buffer_;
  size_t limit_;
  uint32_t max_fields_;
  size_t start_ = 0;                ///< where the message at the front begins
  size_t at_ = 0;                   ///< how far it has been parsed
  std::optional<uint32_t> count_;   ///< its field count, once read
  std::optional<uint32_t> length_;  ///< the length of the field being read, once read
  Message partial_;
};

/// Appends what `fd` has to `reader` (one read of at most its room; call when poll says `fd` is
/// readable). False on end of file or error.
bool fill(int fd, Reader& reader);

/// Sends a whole message; false when the connection is gone.
bool send(int fd, int type, const std::vector<std::string>& fields);

/// Sends a whole message now or not at all (a connection that does not read cannot hold node
/// 0 up); false when it did not all go.
bool send_now(int fd, int type, const std::vector<std::string>& fields);

/// What proves knowledge of the job's secret (HMAC-SHA256, raw bytes): `role` says who proves
/// it ("node", "node 0"), the nonces which connection it is for.
std::string proof(const std::string& secret, std::string_view role, std::string_view nonce_a,
                  std::string_view nonce_b);

/// The ranks' $DDL_JOB_TOKEN, derived on every node from the job's secret and the round's salt
/// (node 0 sends the salt, never the token).
std::string ranks_token(const std::string& secret, std::string_view salt);

/// node 0's challenge (kChallenge with this ddlrun's magic): its nonce; nullopt when it is not
/// one.
std::optional<std::string> decode_challenge(const Message& m);

/// Whether node 0's proof `m` (kProven) shows that it knows `secret` for `nonce`, this node's,
/// and `challenge`, node 0's. A node sends its inventory only then.
bool node0_proved(const Message& m, const std::string& secret, std::string_view nonce,
                  std::string_view challenge);

/// node 0's welcome, once its proof (for `nonce`, this node's, and `challenge`, node 0's)
/// shows that it knows `secret`; the ranks' token derived from it. Throws RendezvousError.
Welcome decode_welcome(const Message& m, const std::string& secret, std::string_view nonce,
                       std::string_view challenge);

/// The peer's address ("10.200.0.10"), "?" when unknown.
std::string peer_address(int fd);

/// `text` as a whole number, nullopt when it is not one.
std::optional<int> to_int(const std::string& text);

}  // namespace ddl::ddlrun::wire
