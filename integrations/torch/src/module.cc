// The Python module plexus_torch._C: the ProcessGroupPlexus class (a torch.distributed.ProcessGroup) and the
// creator torch.distributed.Backend.register_backend calls.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"

namespace py = pybind11;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // torch registered ProcessGroup and Store with pybind11 (c10::intrusive_ptr holders): this module's class derives
  // from the one torch.distributed shows.
  py::object base = py::module_::import("torch.distributed").attr("ProcessGroup");
  py::class_<plexus_torch::ProcessGroupPlexus, c10::intrusive_ptr<plexus_torch::ProcessGroupPlexus>>(
      m, "ProcessGroupPlexus", base)
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<plexus_torch::ProcessGroupPlexus>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def("plexus_last_decision", [](const plexus_torch::ProcessGroupPlexus& pg) {
        plexusDecision_t d{};
        plexusCommLastDecision(pg.comm(), &d);
        return py::make_tuple(d.algorithm ? d.algorithm : "", d.protocol ? d.protocol : "", d.nChannels,
                              d.reason ? d.reason : "");
      })
      // For tests: (wakes, operations settled) of the group's completion thread.
      .def("plexus_completer_counts", [](const plexus_torch::ProcessGroupPlexus& pg) {
        return pg.settlement().completerCounts();
      });
  m.attr("nccl_version") = NCCL_VERSION_CODE;
}
