// The run's files for python/tessera/keras/callbacks.py: TensorBoard event files (the C++
// writer: scalars, histograms, the graph; TFRecord framing, CRC-32C).
#include <pybind11/stl.h>

#include <optional>

#include "sw/python/bindings.h"
#include "tessera/tfevents.h"

namespace tessera::python {

void bind_runlog(py::module_& m) {
  py::class_<runlog::EventWriter>(m, "EventWriter")
      .def(py::init<const std::string&>(), py::arg("log_dir"))
      .def(
          "add_scalar",
          [](runlog::EventWriter& w, const std::string& tag, int64_t step, float value,
             std::optional<double> wall_time) {
            w.add_scalar(tag, step, value, wall_time ? *wall_time : runlog::unix_time_now());
          },
          py::arg("tag"), py::arg("step"), py::arg("value"), py::arg("wall_time") = py::none())
      // A histogram of the values (TensorFlow's buckets; ValueError for NaN or infinity).
      .def(
          "add_histogram",
          [](runlog::EventWriter& w, const std::string& tag, int64_t step, const Array<float>& v,
             std::optional<double> wall_time) {
            w.add_histogram(tag, step, to_vector(v),
                            wall_time ? *wall_time : runlog::unix_time_now());
          },
          py::arg("tag"), py::arg("step"), py::arg("values"), py::arg("wall_time") = py::none())
      // A GraphDef's bytes (the Graphs tab).
      .def(
          "add_graph",
          [](runlog::EventWriter& w, const py::bytes& g) { w.add_graph(std::string(g)); },
          py::arg("graph_def"))
      .def("flush", &runlog::EventWriter::flush)
      .def("sync", &runlog::EventWriter::sync)
      .def_property_readonly("path", &runlog::EventWriter::path);
}

}  // namespace tessera::python
