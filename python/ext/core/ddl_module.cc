// ddl._ddl: the Python binding of libddl (the package `ddl` in python/ddl/ wraps it).
//
// How it works: every collective here takes raw addresses (Python ints), an element count and
// the ddl_datatype_t/ddl_op_t codes; the package's Python layer checks the arrays or tensors
// (contiguous, writable, one dtype, the right sizes) and passes their data pointers, so nothing
// is copied and numpy arrays and torch tensors (bfloat16 included) share one path. The GIL is
// released while a call communicates, so other Python threads run meanwhile. A failed call
// raises ddl.Error (a RuntimeError) whose text is the runtime's message (ddl_last_error(), read
// on the calling thread after the GIL is back) and whose `status` is the ddl_status_t code;
// ddl.MismatchError, a subclass, when the ranks' calls did not match (DDL_ERR_MISMATCH). A
// signal handler's exception (KeyboardInterrupt) that is pending when a call fails is raised
// instead: under Ctrl-C every rank is interrupted and the failures are its consequences.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.h"
#include "comm/bootstrap/rank_variables.h"
#include "ddl/ddl.h"
#include "ddl/ddl.hpp"

namespace py = pybind11;

namespace {

/// The address a Python int names, as a pointer.
void* as_pointer(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);
}

/// Runs `call` (a ddl_ function returning ddl_status_t) without the GIL; throws ddl::Error on
/// failure with the runtime's message.
template <typename Call>
void communicate(Call call) {
  ddl_status_t status;
  {
    py::gil_scoped_release release;
    status = call();
  }
  ddl::check(status);
}

/// ddl.Error and ddl.MismatchError, and the translation of ddl::Error into them.
void def_errors(py::module_& m) {
  static py::exception<ddl::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<ddl::MismatchError> mismatch(m, "MismatchError", error.ptr());
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const ddl::Error& e) {
      // A signal that came meanwhile (Ctrl-C) is what the caller hears: the failure is then
      // most likely its consequence (the peers were interrupted too), and an error raised
      // while the handler's KeyboardInterrupt is pending makes the interpreter dump both.
      if (PyErr_CheckSignals() != 0) return;
      // By status, so that the torch backend's errors (thrown as ddl::Error) map the same way.
      const py::handle type =
          e.status() == DDL_ERR_MISMATCH ? py::handle(mismatch) : py::handle(error);
      py::object instance = py::reinterpret_borrow<py::object>(type)(e.what());
      instance.attr("status") = static_cast<int>(e.status());
      PyErr_SetObject(type.ptr(), instance.ptr());
    }
  });
  m.attr("ERR_MISMATCH") = static_cast<int>(DDL_ERR_MISMATCH);
}

/// init, finalize and the job's shape.
void def_job(py::module_& m) {
  m.def("init", [] { communicate([] { return ddl_init(); }); });
  m.def("finalize", [] { ddl::check(ddl_finalize()); });
  m.def("initialized", [] { return ddl_initialized() != 0; });
  m.def("rank", &ddl_rank);
  m.def("size", &ddl_size);
  m.def("local_rank", &ddl_local_rank);
  m.def("local_size", &ddl_local_size);
  m.def("local_gpu", &ddl_local_gpu);
}

/// The pointers of allreduce_n's buffers (as many as counts).
std::vector<void*> pointers_of(const std::vector<std::uintptr_t>& buffers,
                               const std::vector<std::size_t>& counts) {
  if (buffers.size() != counts.size()) {
    throw py::value_error("allreduce_n: as many counts as buffers are needed");
  }
  std::vector<void*> pointers;
  pointers.reserve(buffers.size());
  for (std::uintptr_t address : buffers)
    pointers.push_back(as_pointer(address));
  return pointers;
}

/// A group handle from Python: 0 is the whole job.
ddl_group_t group_of(std::uintptr_t handle) {
  return handle == 0 ? ddl_group_world() : reinterpret_cast<ddl_group_t>(handle);
}

/// Groups: group_create (a handle, None outside the group), group_destroy, group_rank.
void def_groups(py::module_& m) {
  m.def(
      "group_create",
      [](const std::vector<int>& ranks) -> py::object {
        ddl_group_t group = nullptr;
        communicate(
            [&] { return ddl_group_create(ranks.data(), static_cast<int>(ranks.size()), &group); });
        if (group == nullptr) return py::none();
        return py::int_(reinterpret_cast<std::uintptr_t>(group));
      },
      py::arg("ranks"));
  m.def(
      "group_destroy", [](std::uintptr_t group) { ddl::check(ddl_group_destroy(group_of(group))); },
      py::arg("group"));
  m.def(
      "group_rank", [](std::uintptr_t group) { return ddl_group_rank(group_of(group)); },
      py::arg("group"));
}

/// A reduction from a send to a recv buffer on a group (`Call`: ddl_group_allreduce or
/// ddl_group_reduce_scatter) as `name`, whose count argument is called `count`.
template <auto Call>
void def_group_reduction(py::module_& m, const char* name, const char* count) {
  m.def(
      name,
      [](std::uintptr_t g, std::uintptr_t send, std::uintptr_t recv, std::size_t n, int type,
         int op) {
        communicate([&] {
          return Call(group_of(g), as_pointer(send), as_pointer(recv), n,
                      static_cast<ddl_datatype_t>(type), static_cast<ddl_op_t>(op));
        });
      },
      py::arg("group"), py::arg("send"), py::arg("recv"), py::arg(count), py::arg("type"),
      py::arg("op"));
}

/// The collectives on a group (0: the job): group_allreduce, group_allreduce_n, group_bcast,
/// group_reduce_scatter, group_barrier.
void def_group_collectives(py::module_& m) {
  def_group_reduction<ddl_group_allreduce>(m, "group_allreduce", "count");
  m.def(
      "group_allreduce_n",
      [](std::uintptr_t g, const std::vector<std::uintptr_t>& buffers,
         const std::vector<std::size_t>& counts, int type, int op) {
        const std::vector<void*> pointers = pointers_of(buffers, counts);
        communicate([&] {
          return ddl_group_allreduce_n(group_of(g), pointers.data(), counts.data(), pointers.size(),
                                       static_cast<ddl_datatype_t>(type),
                                       static_cast<ddl_op_t>(op));
        });
      },
      py::arg("group"), py::arg("buffers"), py::arg("counts"), py::arg("type"), py::arg("op"));
  m.def(
      "group_bcast",
      [](std::uintptr_t g, std::uintptr_t buf, std::size_t count, int type, int root) {
        communicate([&] {
          return ddl_group_bcast(group_of(g), as_pointer(buf), count,
                                 static_cast<ddl_datatype_t>(type), root);
        });
      },
      py::arg("group"), py::arg("buf"), py::arg("count"), py::arg("type"), py::arg("root"));
  def_group_reduction<ddl_group_reduce_scatter>(m, "group_reduce_scatter", "recv_count");
  m.def(
      "group_barrier",
      [](std::uintptr_t g) { communicate([&] { return ddl_group_barrier(group_of(g)); }); },
      py::arg("group"));
}

/// send or recv (`Call`, ddl_group_send or ddl_group_recv) as `name`, on the job or a group
/// (`group`, 0: the job).
template <auto Call>
void def_point_to_point(py::module_& m, const char* name) {
  m.def(
      name,
      [](std::uintptr_t buf, std::size_t count, int type, int peer, int tag, std::uintptr_t g) {
        communicate([&] {
          return Call(group_of(g), as_pointer(buf), count, static_cast<ddl_datatype_t>(type), peer,
                      tag);
        });
      },
      py::arg("buf"), py::arg("count"), py::arg("type"), py::arg("peer"), py::arg("tag"),
      py::arg("group") = 0);
}

/// allgather or alltoall (`Call`, ddl_group_allgather or ddl_group_alltoall) as `name`: `count`
/// elements from or to each rank, on the job or a group (`group`, 0: the job).
template <auto Call>
void def_exchange(py::module_& m, const char* name) {
  m.def(
      name,
      [](std::uintptr_t send, std::uintptr_t recv, std::size_t count, int type, std::uintptr_t g) {
        communicate([&] {
          return Call(group_of(g), as_pointer(send), as_pointer(recv), count,
                      static_cast<ddl_datatype_t>(type));
        });
      },
      py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("type"), py::arg("group") = 0);
}

/// send, recv, allgather and alltoall, on the job or a group (`group`, 0: the job).
void def_exchanges(py::module_& m) {
  def_point_to_point<ddl_group_send>(m, "send");
  def_point_to_point<ddl_group_recv>(m, "recv");
  def_exchange<ddl_group_allgather>(m, "allgather");
  def_exchange<ddl_group_alltoall>(m, "alltoall");
}

/// Throws ValueError ("<needs> N entries, one per rank of the group") unless each of `lists`
/// has one entry per rank of group `g` (none when the group is unknown: the call says why).
void check_per_rank(std::uintptr_t g, std::initializer_list<const std::vector<std::size_t>*> lists,
                    const std::string& needs) {
  const int n = ddl_group_size(group_of(g));
  for (const auto* v : lists) {
    if (n >= 0 && v->size() != static_cast<std::size_t>(n))
      throw py::value_error(needs + std::to_string(n) + " entries, one per rank of the group");
  }
}

/// alltoallv and allgatherv (a size per rank), on the job or a group (`group`, 0: the job).
void def_variable_exchanges(py::module_& m) {
  m.def(
      "alltoallv",
      [](std::uintptr_t send, const std::vector<std::size_t>& send_counts,
         const std::vector<std::size_t>& send_displs, std::uintptr_t recv,
         const std::vector<std::size_t>& recv_counts, const std::vector<std::size_t>& recv_displs,
         int type, std::uintptr_t g) {
        check_per_rank(g, {&send_counts, &send_displs, &recv_counts, &recv_displs},
                       "alltoallv: every count and displacement list needs ");
        communicate([&] {
          return ddl_group_alltoallv(group_of(g), as_pointer(send), send_counts.data(),
                                     send_displs.data(), as_pointer(recv), recv_counts.data(),
                                     recv_displs.data(), static_cast<ddl_datatype_t>(type));
        });
      },
      py::arg("send"), py::arg("send_counts"), py::arg("send_displs"), py::arg("recv"),
      py::arg("recv_counts"), py::arg("recv_displs"), py::arg("type"), py::arg("group") = 0);
  m.def(
      "allgatherv",
      [](std::uintptr_t send, std::size_t send_count, std::uintptr_t recv,
         const std::vector<std::size_t>& recv_counts, const std::vector<std::size_t>& recv_displs,
         int type, std::uintptr_t g) {
        check_per_rank(g, {&recv_counts, &recv_displs},
                       "allgatherv: recv_counts and recv_displs need ");
        communicate([&] {
          return ddl_group_allgatherv(group_of(g), as_pointer(send), send_count, as_pointer(recv),
                                      recv_counts.data(), recv_displs.data(),
                                      static_cast<ddl_datatype_t>(type));
        });
      },
      py::arg("send"), py::arg("send_count"), py::arg("recv"), py::arg("recv_counts"),
      py::arg("recv_displs"), py::arg("type"), py::arg("group") = 0);
}

/// ddlrun's rendezvous server (comm/bootstrap), for jobs another launcher started: the torch
/// backend's rank 0 runs one under torchrun and hands its address to the other ranks through
/// torch's store (ddl/torch.py). It lives, answering on its own thread, until deleted.
void def_rendezvous(py::module_& m) {
  py::class_<ddl::comm::RendezvousServer>(m, "RendezvousServer")
      .def(py::init<std::string, int>(), py::arg("token"), py::arg("size"))
      .def_property_readonly("port", &ddl::comm::RendezvousServer::port);
  // The variables that say a launcher libddl knows started this process: the rank variables
  // ddl_init() reads (comm/bootstrap/rank_variables.h), and PMIx's namespace.
  m.def("launcher_variables", [] {
    std::vector<std::string> names;
    for (const auto* v : ddl::comm::rank_variables_of(&ddl::comm::RankVariable::identity))
      names.emplace_back(v->rank);
    names.emplace_back(ddl::comm::kPmixNamespaceVariable);
    return names;
  });
  // The same rows' (rank, size) variable pairs, in the order ddl_init() asks them.
  m.def("rank_variables", [] {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const auto* v : ddl::comm::rank_variables_of(&ddl::comm::RankVariable::identity))
      pairs.emplace_back(v->rank, v->size);
    return pairs;
  });
}

/// A ddl_alloc buffer (shared memory the host's ranks map), freed when the last array or
/// tensor over it goes: its buffer protocol gives `bytes` writable bytes, which the package's
/// ddl.shared_zeros() views as a numpy array or torch tensor.
struct SharedBlock {
  explicit SharedBlock(size_t bytes) : bytes(bytes) {
    data = ddl_alloc(bytes);
    if (data == nullptr) throw ddl::Error(DDL_ERR_ARGUMENT, ddl_last_error());
  }
  ~SharedBlock() { ddl_free(data); }
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;
  void* data = nullptr;
  size_t bytes = 0;
};

void def_shared(py::module_& m) {
  py::class_<SharedBlock>(m, "SharedBlock", py::buffer_protocol())
      .def(py::init<size_t>(), py::arg("bytes"))
      .def_readonly("bytes", &SharedBlock::bytes)
      .def_property_readonly(
          "address", [](const SharedBlock& b) { return reinterpret_cast<uintptr_t>(b.data); })
      .def_buffer([](SharedBlock& b) {
        return py::buffer_info(b.data, 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.bytes)}, {py::ssize_t{1}});
      });
}

}  // namespace

PYBIND11_MODULE(_ddl, m) {
  m.doc() = "libddl's C API over raw addresses; use the package `ddl`, not this module";
  def_errors(m);
  def_job(m);
  def_groups(m);
  def_group_collectives(m);
  def_exchanges(m);
  def_variable_exchanges(m);
  def_rendezvous(m);
  def_shared(m);
}
