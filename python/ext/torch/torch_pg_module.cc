// ddl._torch_pg: ProcessGroupDdl (process_group_ddl.h) for Python, a subclass of torch's own
// backend type (torch.distributed.ProcessGroup on torch 1.x, its Backend on 2.x), so c10d
// (DistributedDataParallel included) takes it as any other backend. ddl/_site/sitecustomize.py (in
// ddlrun's ranks) and `import ddl.torch` register it as the backend "ddl". On torch 2.x also
// GroupDdl, the torch ProcessGroup named "ddl" that ddl/torch.py's creator returns around it.
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_ddl.h"

namespace py = pybind11;

PYBIND11_MODULE(_torch_pg, m) {
  m.doc() = "The torch.distributed backend \"ddl\" (a C++ ProcessGroup over libddl)";
  // torch's backend type must be known to pybind11 before it is named as a base.
  py::module::import("torch.distributed");
  m.attr("torch_major") = TORCH_VERSION_MAJOR;
  py::class_<ddl::python::ProcessGroupDdl, ddl::python::TorchBackend,
             c10::intrusive_ptr<ddl::python::ProcessGroupDdl>>(m, "ProcessGroupDdl")
      .def(py::init<int, int, std::vector<int>, c10::intrusive_ptr<c10d::Store>, double>(),
           py::arg("rank"), py::arg("size"), py::arg("ranks") = std::vector<int>(),
           py::arg("store"), py::arg("timeout") = 0.0,
           "The group of job ranks `ranks` (every rank when empty) in which this process is "
           "group rank `rank` of `size`, meeting in `store` for monitored_barrier, its "
           "collectives failing after `timeout` seconds without progress (0: libddl's "
           "DDL_TIMEOUT); libddl must be initialised (ddl.init())",
           py::call_guard<py::gil_scoped_release>())
#if DDL_TORCH2
      .def_property_readonly("options", &ddl::python::ProcessGroupDdl::getBackendOptions,
                             "The backend's options (name \"ddl\", the group's timeout), which "
                             "split_group copies for the groups it splits off")
#endif
      ;
#if DDL_TORCH2
  py::class_<ddl::python::GroupDdl, c10d::ProcessGroup, c10::intrusive_ptr<ddl::python::GroupDdl>>(
      m, "GroupDdl")
      .def(py::init<const c10::intrusive_ptr<c10d::Store>&, int, int,
                    const c10::intrusive_ptr<c10d::Backend>&>(),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("backend"),
           "The torch ProcessGroup named \"ddl\" that holds `backend` for cpu and cuda");
#endif
}
