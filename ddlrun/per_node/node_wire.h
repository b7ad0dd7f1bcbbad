#pragma once
// The wire format of per-node mode's rendezvous (rendezvous.h): a message of fields
// (base/net/codec.h: one type byte, a 4-byte field count, each field length-prefixed), at most
// kMaxMessage bytes in all, and at most kMaxHello (kMaxHelloFields fields) before a node proved
// that it knows the job's secret.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/net/codec.h"
#include "base/net/handshake.h"
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
inline constexpr size_t kMaxMessage = base::net::kMaxFieldsBytes;
/// Before the hello is accepted: a hello carries one node's hardware, tens of KB.
inline constexpr size_t kMaxHello = size_t{256} << 10;
inline constexpr uint32_t kMaxHelloFields = 16;
/// The nonces' size in bytes.
inline constexpr size_t kNonceSize = base::net::kNonceSize;

using Message = base::net::Fields;
using Reader = base::net::FieldsReader;  ///< by default with an admitted node's limits
using base::net::encode;
using base::net::fill;
using base::net::send;
using base::net::send_now;

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

/// `text` as a whole number (1 to 9 decimal digits, nothing else), nullopt when it is not one.
std::optional<int> to_int(const std::string& text);

}  // namespace ddl::ddlrun::wire
