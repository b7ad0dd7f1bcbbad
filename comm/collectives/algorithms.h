#pragma once
// libddl's allreduce algorithms as a registry (algorithms.cc): one row per algorithm answers
// every question the runtime asks about it, so that adding one is a file and a row.
//
// How it works. A row has the name DDL_ALGO knows it by (also the route a mismatch names), a
// one-line description, the automatic choice's rule and its place in that choice, whether it
// can run where it is named (and what runs instead), and its entry points: in place on host
// memory, from one buffer into another, and on GPU memory. The communicator and a group describe
// their members as an AllreduceShape (for the choice) and an AllreduceSite (for the run), ask
// choose_allreduce() for a row and call its entry; the row sets the call's route in its
// signature and checks the signature its own way (on its messages or before them).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "comm/collectives/collectives.h"

namespace ddl::comm {

class Dimension;  // dimension.h
class NodeGroup;  // node.h
namespace device {
class Comm;  // device/device.h
}

/// What the automatic choice looks at.
struct AllreduceShape {
  size_t bytes = 0;
  size_t small_bytes = 0;  ///< DDL_SMALL_BYTES
  /// Every member is on this host and the shared-memory collectives run (AllreduceSite::node).
  bool one_host = false;
  size_t rings = 0;       ///< the topology's rings of more than one rank through this rank
  size_t dimensions = 0;  ///< the multi-dimensional allreduce's (a long ring as its sub-rings)
};

/// What an algorithm runs over: the caller's members and how it checks a call's signature.
struct AllreduceSite {
  const Group& flat;                       ///< every member, in rank order
  std::span<Dimension* const> dimensions;  ///< the multi-dimensional allreduce's, innermost first
  NodeGroup* node = nullptr;               ///< every member in shared memory (one_host), or null
  size_t pipeline_bytes = 0;               ///< DDL_PIPELINE_BYTES
  /// Compares a signature among the members before the data moves.
  std::function<void(const Signature&)> verify;
  /// Whether every call is checked through verify() whatever its route (a job on one host), so
  /// an algorithm that checks on its own messages checks through verify() instead.
  bool verify_always = false;
};

/// One allreduce algorithm: a row of the registry.
struct AllreduceAlgorithm {
  std::string_view name;                     ///< DDL_ALGO's word, and the route a mismatch names
  std::string_view description;              ///< one line
  int auto_rank;                             ///< the automatic choice asks rows by rising rank
  bool (*automatic)(const AllreduceShape&);  ///< whether the automatic choice takes it
  bool (*usable)(const AllreduceShape&);     ///< whether it runs where DDL_ALGO names it
  std::string_view otherwise;  ///< what runs when named but not usable: a row's name, or "auto"
  /// Whether a one-host job's other collectives run in shared memory while DDL_ALGO names it.
  bool shm_collectives;
  /// In place on host memory. With `sig`, sets its route and checks it among the members.
  void (*run)(const AllreduceSite& site, void* buf, size_t count, DataType type, ReduceOp op,
              Signature* sig);
  /// From `send` into `recv` (disjoint) with no copy first; null: the caller copies, then run.
  void (*run_apart)(const AllreduceSite& site, const void* send, void* recv, size_t count,
                    DataType type, ReduceOp op, Signature* sig);
  /// On GPU memory over one NCCL communicator per ring; null: NCCL's allreduce of every rank.
  void (*device)(std::span<device::Comm* const> rings, device::Comm& flat, const void* send,
                 void* recv, size_t count, DataType type, ReduceOp op);
};

/// Every row, in the order DDL_ALGO lists them.
std::span<const AllreduceAlgorithm> allreduce_algorithms();

/// The row DDL_ALGO calls `name`, or nullptr for "auto"; throws std::invalid_argument naming
/// $DDL_ALGO, the word (with a did-you-mean) and the choices for any other word.
const AllreduceAlgorithm* find_allreduce(std::string_view name);

/// The row that runs: `named` (null: automatic) when usable, else what it names instead, else
/// the first row by auto_rank whose rule holds.
const AllreduceAlgorithm& choose_allreduce(const AllreduceAlgorithm* named,
                                           const AllreduceShape& shape);

/// Signature::route values that are no algorithm's: none chosen, and NCCL on GPU memory.
inline constexpr uint8_t kRouteDefault = 0;
inline constexpr uint8_t kRouteDevice = 1;
/// The route of the row called `name` (a registry row: anything else is a bug).
uint8_t route_of(std::string_view name);
/// "default", "nccl on GPU memory", or the name of the row whose route it is.
std::string_view route_name(uint8_t route);

}  // namespace ddl::comm
