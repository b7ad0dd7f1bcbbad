// libddl's C++ API: a thin RAII layer over ddl.h that throws ddl::Error.
//
//   ddl::Session session;                      // ddl_init(); ddl_finalize() when it ends
//   std::vector<float> grad(n);
//   session.allreduce(std::span(grad), DDL_AVG);
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "ddl/ddl.h"

namespace ddl {

/// A failed call: status() is its code, what() the runtime's message.
class Error : public std::runtime_error {
 public:
  Error(ddl_status_t status, const std::string& what) : std::runtime_error(what), status_(status) {}
  ddl_status_t status() const { return status_; }

 private:
  ddl_status_t status_;
};

/// DDL_ERR_MISMATCH: the ranks called different collectives (or with a different count, type,
/// reduction or root); what() names two ranks and their calls. The session is unusable after it.
class MismatchError : public Error {
 public:
  explicit MismatchError(const std::string& what) : Error(DDL_ERR_MISMATCH, what) {}
};

/// Throws Error (MismatchError for DDL_ERR_MISMATCH) for anything but DDL_SUCCESS.
inline void check(ddl_status_t status) {
  if (status != DDL_SUCCESS) {
    std::string message = ddl_last_error();
    if (message.empty()) message = ddl_error_string(status);
    if (status == DDL_ERR_MISMATCH) throw MismatchError(message);
    throw Error(status, message);
  }
}

/// The ddl type of T (float, double, int32_t, int64_t, uint8_t).
template <typename T>
constexpr ddl_datatype_t datatype_of() {
  if constexpr (std::is_same_v<T, float>) return DDL_FLOAT32;
  if constexpr (std::is_same_v<T, double>) return DDL_FLOAT64;
  if constexpr (std::is_same_v<T, int32_t>) return DDL_INT32;
  if constexpr (std::is_same_v<T, int64_t>) return DDL_INT64;
  static_assert(std::is_same_v<T, uint8_t> || std::is_same_v<T, float> ||
                    std::is_same_v<T, double> || std::is_same_v<T, int32_t> ||
                    std::is_same_v<T, int64_t>,
                "no ddl data type for this element type");
  return DDL_UINT8;
}

/// The runtime, initialised for the lifetime of this object (one per process at a time).
class Session {
 public:
  Session() { check(ddl_init()); }
  ~Session() { ddl_finalize(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int rank() const { return ddl_rank(); }
  int size() const { return ddl_size(); }
  int local_rank() const { return ddl_local_rank(); }
  int local_size() const { return ddl_local_size(); }
  int local_gpu() const { return ddl_local_gpu(); }

  /// In place.
  template <typename T>
  void allreduce(std::span<T> data, ddl_op_t op = DDL_SUM) {
    check(ddl_allreduce(data.data(), data.data(), data.size(), datatype_of<T>(), op));
  }
  /// Out of place; `out` has as many elements as `in`.
  template <typename T>
  void allreduce(std::span<const T> in, std::span<T> out, ddl_op_t op = DDL_SUM) {
    if (in.size() != out.size()) throw Error(DDL_ERR_ARGUMENT, "allreduce: sizes differ");
    check(ddl_allreduce(in.data(), out.data(), in.size(), datatype_of<T>(), op));
  }
  template <typename T>
  void broadcast(std::span<T> data, int root) {
    check(ddl_bcast(data.data(), data.size(), datatype_of<T>(), root));
  }
  /// Every rank's `in`, by rank.
  template <typename T>
  std::vector<T> allgather(std::span<const T> in) {
    std::vector<T> out(in.size() * static_cast<size_t>(size()));
    check(ddl_allgather(in.data(), out.data(), in.size(), datatype_of<T>()));
    return out;
  }
  /// This rank's chunk (in.size() / size() elements) of the reduction of every rank's `in`.
  template <typename T>
  std::vector<T> reduce_scatter(std::span<const T> in, ddl_op_t op = DDL_SUM) {
    const size_t n = static_cast<size_t>(size());
    if (in.size() % n != 0) {
      throw Error(DDL_ERR_ARGUMENT, "reduce_scatter: the input is not a multiple of the size");
    }
    std::vector<T> out(in.size() / n);
    check(ddl_reduce_scatter(in.data(), out.data(), out.size(), datatype_of<T>(), op));
    return out;
  }
  void barrier() { check(ddl_barrier()); }
};

}  // namespace ddl
