// libddl's C++ API: a thin RAII layer over ddl.h that throws ddl::Error.
//
//   ddl::Session session;                      // ddl_init(); ddl_finalize() when it ends
//   std::vector<float> grad(n);
//   session.allreduce(std::span(grad), DDL_AVG);
//   ddl::Group evens(std::vector<int>{0, 2});  // every rank may make it; empty on 1 and 3
//   if (evens) evens.allreduce(std::span(grad));
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
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

/// The ddl type of T (float, double, int32_t, int64_t, uint8_t, int8_t, int16_t, uint16_t,
/// bool).
template <typename T>
constexpr ddl_datatype_t datatype_of() {
  if constexpr (std::is_same_v<T, float>) return DDL_FLOAT32;
  if constexpr (std::is_same_v<T, double>) return DDL_FLOAT64;
  if constexpr (std::is_same_v<T, int32_t>) return DDL_INT32;
  if constexpr (std::is_same_v<T, int64_t>) return DDL_INT64;
  if constexpr (std::is_same_v<T, int8_t>) return DDL_INT8;
  if constexpr (std::is_same_v<T, int16_t>) return DDL_INT16;
  if constexpr (std::is_same_v<T, uint16_t>) return DDL_UINT16;
  if constexpr (std::is_same_v<T, bool>) {
    static_assert(sizeof(bool) == 1, "DDL_BOOL is one byte");
    return DDL_BOOL;
  }
  static_assert(
      std::is_same_v<T, uint8_t> || std::is_same_v<T, float> || std::is_same_v<T, double> ||
          std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, int8_t> ||
          std::is_same_v<T, int16_t> || std::is_same_v<T, uint16_t> || std::is_same_v<T, bool>,
      "no ddl data type for this element type");
  return DDL_UINT8;
}

/// A group of ranks (ddl_group_create), destroyed with this object; false (and unusable) on
/// ranks outside it. Group::world() is the whole job. Roots and peers are group ranks.
class Group {
 public:
  /// Every member passes the same `ranks` (job ranks, in group-rank order); others may call it.
  explicit Group(std::span<const int> ranks) {
    check(ddl_group_create(ranks.data(), static_cast<int>(ranks.size()), &group_));
    owned_ = true;
  }
  /// The whole job (not destroyed by this object).
  static Group world() { return Group(ddl_group_world()); }
  ~Group() {
    if (owned_) ddl_group_destroy(group_);
  }
  Group(Group&& o) noexcept : group_(o.group_), owned_(o.owned_) { o.owned_ = false; }
  Group& operator=(Group&& o) noexcept {
    std::swap(group_, o.group_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  /// Whether this rank is a member.
  explicit operator bool() const { return group_ != nullptr; }
  ddl_group_t handle() const { return group_; }
  int rank() const { return ddl_group_rank(group_); }
  int size() const { return ddl_group_size(group_); }

  /// In place.
  template <typename T>
  void allreduce(std::span<T> data, ddl_op_t op = DDL_SUM) {
    check(ddl_group_allreduce(group_, data.data(), data.data(), data.size(), datatype_of<T>(), op));
  }
  template <typename T>
  void broadcast(std::span<T> data, int root) {
    check(ddl_group_bcast(group_, data.data(), data.size(), datatype_of<T>(), root));
  }
  /// Every member's `in`, by group rank.
  template <typename T>
  std::vector<T> allgather(std::span<const T> in) {
    std::vector<T> out(in.size() * static_cast<size_t>(size()));
    check(ddl_group_allgather(group_, in.data(), out.data(), in.size(), datatype_of<T>()));
    return out;
  }
  /// Block j of `in` (in.size() / size() elements) goes to member j; the result holds every
  /// member's block for this one, by group rank.
  template <typename T>
  std::vector<T> alltoall(std::span<const T> in) {
    const size_t n = static_cast<size_t>(size());
    if (in.size() % n != 0) {
      throw Error(DDL_ERR_ARGUMENT, "alltoall: the input is not a multiple of the group size");
    }
    std::vector<T> out(in.size());
    check(ddl_group_alltoall(group_, in.data(), out.data(), in.size() / n, datatype_of<T>()));
    return out;
  }
  void barrier() { check(ddl_group_barrier(group_)); }
  /// The group's collectives fail after `seconds` without progress (ddl_group_set_timeout).
  void set_timeout(double seconds) { check(ddl_group_set_timeout(group_, seconds)); }
  template <typename T>
  void send(std::span<const T> data, int peer, int tag = 0) {
    check(ddl_group_send(group_, data.data(), data.size(), datatype_of<T>(), peer, tag));
  }
  /// Exactly data.size() elements, as sent.
  template <typename T>
  void recv(std::span<T> data, int peer, int tag = 0) {
    check(ddl_group_recv(group_, data.data(), data.size(), datatype_of<T>(), peer, tag));
  }
  /// From whichever other member sends under `tag` first (ddl_group_recv_any); returns the
  /// sender's group rank.
  template <typename T>
  int recv_any(std::span<T> data, int tag = 0) {
    int source = -1;
    check(ddl_group_recv_any(group_, data.data(), data.size(), datatype_of<T>(), tag, &source));
    return source;
  }

 private:
  explicit Group(ddl_group_t world) : group_(world), owned_(false) {}
  ddl_group_t group_ = nullptr;
  bool owned_ = false;
};

/// `count` zeroed elements of T in memory the host's other ranks can map (ddl_alloc): an
/// in-place allreduce where every rank of the host passes such a buffer takes the single pass.
/// Freed (ddl_free) when it ends; movable, not copyable.
///   ddl::SharedBuffer<float> grad(n);
///   session.allreduce(grad.span(), DDL_AVG);
template <typename T>
class SharedBuffer {
 public:
  explicit SharedBuffer(size_t count) : count_(count) {
    if (count > SIZE_MAX / sizeof(T)) {
      throw Error(DDL_ERR_ARGUMENT, "ddl::SharedBuffer: " + std::to_string(count) +
                                        " elements are more bytes than a size_t holds");
    }
    data_ = static_cast<T*>(ddl_alloc(count * sizeof(T)));
    if (data_ == nullptr) throw Error(DDL_ERR_ARGUMENT, ddl_last_error());
  }
  ~SharedBuffer() {
    if (data_ != nullptr) ddl_free(data_);
  }
  SharedBuffer(SharedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  SharedBuffer& operator=(SharedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
    return *this;
  }
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  T* data() const { return data_; }
  size_t size() const { return count_; }
  std::span<T> span() const { return {data_, count_}; }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

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
  /// alltoall, send, recv and recv_any on the whole job (see Group).
  template <typename T>
  std::vector<T> alltoall(std::span<const T> in) {
    return Group::world().alltoall(in);
  }
  template <typename T>
  void send(std::span<const T> data, int peer, int tag = 0) {
    Group::world().send(data, peer, tag);
  }
  template <typename T>
  void recv(std::span<T> data, int peer, int tag = 0) {
    Group::world().recv(data, peer, tag);
  }
  template <typename T>
  int recv_any(std::span<T> data, int tag = 0) {
    return Group::world().recv_any(data, tag);
  }
};

}  // namespace ddl
