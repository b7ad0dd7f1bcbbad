#pragma once

#include <span>
#include <string>
#include <string_view>

namespace ddl::mapper {

// Telling machines apart: one machine named twice (an ssh alias and its address, a name and its
// IP, localhost and 127.0.0.1) must not be planned as two hosts, or two ranks would be bound to
// each of its CPUs and GPUs.
//
// How it works: a live probe records the machine's identity: /etc/machine-id (or D-Bus's copy),
// the boot id (/proc/sys/kernel/random/boot_id), the network namespace (the inode of
// /proc/self/ns/net) and the host name (the UTS namespace's). Two names whose probes found the
// same identity are one machine. Distinct machines differ in machine or boot id; containers
// (and the namespace hosts of the tests) that share a kernel differ in network namespace or
// host name. Without an identity (--no-probe, --host-xml, a probe cached by an older ddlrun),
// the names that are this host (localhost, 127.x, its own names and addresses) are one machine,
// and so are address literals that are equal once parsed. A name given twice is refused, naming
// both spellings: which one the user meant to keep is theirs to say.

/// This machine's identity as a live probe records it:
/// "machine=<machine id>;boot=<boot id>;netns=<inode>;host=<host name>", parts that cannot be
/// read left empty; "" when neither the machine id nor the boot id can be read.
std::string read_machine_identity();

/// The host name part of an identity ("node1"), "" when it has none.
std::string identity_host_name(std::string_view identity);

/// One listed name of a host and what says which machine it is.
struct NamedHost {
  std::string name;      ///< as listed
  std::string origin;    ///< where it was listed ("-H", "hosts.txt:3")
  std::string identity;  ///< from its probe (read_machine_identity there); empty: unknown
  bool local = false;    ///< one of this host's names or addresses
};

/// Throws PlacementError when two names are one machine, for the first name that repeats an
/// earlier one:
///   '127.0.0.1' (-H) and 'localhost' (-H) are the same machine: both are this host; list
///   each machine once, under one name, with all its slots
/// Identities are compared when both names have one; otherwise `local`, then equal address
/// literals ("10.0.0.1", "[fe80::1]" and "fe80:0::1").
void check_distinct_machines(std::span<const NamedHost> hosts);

}  // namespace ddl::mapper
