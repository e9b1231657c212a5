// PYBIND11_MODULE for _tessera (bindings.h).
#include "sw/python/bindings.h"
#include "tessera/mpi_ring.h"

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "Tessera's C++ host stack: the compiler, trainer, data pipeline and chip (docs/python.md)";
  tessera::python::bind_errors(m);
  tessera::python::bind_keras(m);
  tessera::python::bind_data(m);
  tessera::python::bind_chip(m);
  tessera::python::bind_runlog(m);
  // Under mpirun each rank is one chip of the ring (docs/multichip.md); the package calls
  // mpi_init() when it sees a launcher and mpi_finalize() at exit.
  m.def("mpi_launched", &tessera::mpi::launched);
  m.def("mpi_init", &tessera::mpi::init);
  m.def("mpi_finalize", &tessera::mpi::finalize);
  m.def("mpi_rank", &tessera::mpi::rank);
  m.def("mpi_size", &tessera::mpi::size);
}
