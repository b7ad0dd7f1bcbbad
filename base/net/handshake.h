#pragma once
// The challenge that opens every connection between two parts of one job (libddl's rendezvous
// and TCP links, per-node mode's rendezvous, the link agents): the acceptor proves the other
// side knows the job's secret without the secret crossing the network.
//
// How it works: the acceptor speaks first, its magic (which names the protocol and its
// version) and a fresh nonce (kNonceSize random bytes). The other side checks the magic as the
// bytes come (a stranger is refused at its first wrong byte) and answers with
// proof(secret, label, nonce and what the connection is for): HMAC-SHA256 under the secret of
// the protocol's label and that context, so a proof for one protocol, connection or role is
// worth nothing for another, and a recorded answer is useless against the next nonce. The
// acceptor computes the same proof and compares the two in constant time (proves()). This keeps
// out stray, stale and foreign processes, not an attacker who can change packets in flight
// (there is no encryption).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ddl::base::net {

/// A nonce's size in bytes.
inline constexpr size_t kNonceSize = 16;

/// A fresh nonce (kNonceSize bytes from getrandom()); throws std::runtime_error when the kernel
/// gives none.
std::string nonce();

/// What proves knowledge of `secret` (32 raw bytes): HMAC-SHA256(secret, label || context).
/// `label` names the protocol and the role ("libddl rendezvous rank: "); `context` holds the
/// nonces and whatever the proof binds (ranks, stream numbers).
std::string proof(std::string_view secret, std::string_view label, std::string_view context);

/// Whether `got` is proof(secret, label, context), compared in constant time.
bool proves(std::string_view got, std::string_view secret, std::string_view label,
            std::string_view context);

/// Whether the bytes that came so far (`got`) can still be `magic`'s: every byte that came
/// of the magic is right.
bool may_speak(std::string_view got, std::string_view magic);

/// What follows `magic` in a message of exactly `size` bytes; nullopt when `got` is another
/// size or does not begin with the magic.
std::optional<std::string_view> after_magic(std::string_view got, std::string_view magic,
                                            size_t size);

}  // namespace ddl::base::net
