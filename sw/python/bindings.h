// The _tessera extension module (docs/python.md): the C++ host stack as Python sees it. Each
// bind_* adds one part; the pure-Python package python/tessera/ builds the Keras-, tf.data-
// and tf.distribute-shaped API over them. Long calls (a chip step, a pipeline's next batch)
// release the GIL, so the user's Python threads and a prefetching Dataset keep running.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_keras(py::module_& m);
void bind_data(py::module_& m);
void bind_chip(py::module_& m);
void bind_runlog(py::module_& m);

// A C-contiguous array of T (pybind11 converts and checks: a wrong dtype that cannot be cast
// safely raises TypeError naming the argument).
template <typename T>
using Array = py::array_t<T, py::array::c_style | py::array::forcecast>;

// The elements of `a` as a vector (one copy: the C++ API owns its buffers).
template <typename T>
std::vector<T> to_vector(const Array<T>& a) {
  const T* p = a.data();
  return std::vector<T>(p, p + a.size());
}

// A new numpy array holding `v` (moved into a capsule: no copy).
template <typename T>
py::array_t<T> to_array(std::vector<T>&& v, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), free_when_done);
}
template <typename T>
py::array_t<T> to_array(std::vector<T>&& v) {
  const auto n = static_cast<py::ssize_t>(v.size());
  return to_array(std::move(v), {n});
}

}  // namespace tessera::python
