#pragma once
// What the environment says to libddl: CommOptions, read by options_from_environment() from one
// table of variables (settings.cc) that tests/comm/settings_test.cc checks against libddl(3).

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "comm/collectives/algorithms.h"
#include "comm/collectives/node.h"
#include "comm/mode.h"

namespace ddl::comm {

namespace device {
class Runtime;  // device/device.h
}

/// What the environment says, resolved (see options_from_environment()).
struct CommOptions {
  std::chrono::milliseconds timeout{60'000};  ///< DDL_TIMEOUT seconds: init and every transfer
  /// DDL_ALGO (or the mode letter): the allreduce algorithm's row; null: the automatic choice.
  const AllreduceAlgorithm* algo = nullptr;
  size_t small_bytes = 16 * 1024;   ///< DDL_SMALL_BYTES: below, recursive doubling
  std::optional<double> check;      ///< DDL_CHECK=tol: compare with a reference
  size_t bucket_bytes = 64u << 20;  ///< DDL_BUCKET_BYTES: allreduce_n's fusion
  /// DDL_PIPELINE_BYTES: the multi-dimensional allreduce's chunks for rings of up to 3, grown
  /// for longer ones (pipeline_chunk_bytes, comm/mode.h); 0: not pipelined.
  size_t pipeline_bytes = kPipelineBytes;
  /// DDL_MAX_RING: a ring of the multi-dimensional allreduce longer than this runs as sub-rings
  /// (ring_factors, comm/mode.h); 0: never split. The same on every rank.
  int max_ring = kMaxRing;
  /// DDL_SHM=0 turns the direct shared-memory collectives off (links and rings only).
  bool shm = true;
  size_t shm_chunk_bytes = NodeOptions::kChunkAuto;  ///< DDL_SHM_CHUNK_BYTES (unset: auto)
  size_t shm_small_bytes = 8 * 1024;  ///< DDL_SHM_SMALL_BYTES: NodeOptions::small_bytes
  size_t shm_cma_bytes = 0;           ///< DDL_SHM_CMA_BYTES: NodeOptions::cma_bytes (0: off)
  size_t shm_stream_bytes = NodeOptions::kStreamAuto;  ///< DDL_SHM_STREAM_BYTES (unset: auto)
  /// The runtime for GPU buffers; null: NCCL, loaded by the constructor when present (tests
  /// pass a stand-in). DDL_NCCL=0 turns NCCL off.
  std::shared_ptr<device::Runtime> device;
};

/// How a variable's value is read.
enum class SettingType {
  kNumber,     ///< a number of at least 0 (fractions allowed), then clamped into [low, high]
  kSwitch,     ///< 0 or 1
  kAlgorithm,  ///< auto or an allreduce algorithm's name (algorithms.h)
  kMode,       ///< IBM DDL's options: only -mode's algorithm letter is read, a bad mode ignored
};

/// The value of one variable, as apply() receives it.
struct SettingValue {
  double number = 0;      ///< kNumber (clamped), kSwitch
  std::string_view word;  ///< the text as set
};

/// One variable of the environment: a row of the table.
struct Setting {
  std::string_view name;  ///< "DDL_TIMEOUT"
  SettingType type;
  /// The default as libddl(3)'s entry states it ("Default: 60"); "" when it states none.
  std::string_view fallback;
  double low;            ///< kNumber: the least value used
  double high;           ///< kNumber: the greatest value used
  std::string_view doc;  ///< one line
  void (*apply)(CommOptions& o, const SettingValue& v);
};

/// Every variable options_from_environment() reads, in the order it reads them.
std::span<const Setting> settings();

/// CommOptions from the variables of settings() (an empty one counts as unset). Throws
/// std::invalid_argument naming the variable and its bad value.
CommOptions options_from_environment();

}  // namespace ddl::comm
