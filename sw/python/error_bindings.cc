// The C++ stack's exceptions as Python exception classes (docs/python.md, "Errors"): a chip
// fault keeps its code, program counter, address and cycle as attributes.
#include "sw/python/bindings.h"
#include "tessera/checkpoint.h"
#include "tessera/data.h"
#include "tessera/driver.h"

namespace tessera::python {

void bind_errors(py::module_& m) {
  // A malformed or unreadable data file: `PATH: offset 0xOFF: reason`.
  static py::exception<data::DataError> data_error(m, "DataError", PyExc_ValueError);
  // A checkpoint that cannot be read or belongs to another model (file named in the message).
  static py::exception<runlog::CheckpointError> ckpt_error(m, "CheckpointError", PyExc_ValueError);
  // The chip stopped on a fault: .code, .name, .pc, .addr, .info, .cycle.
  static py::exception<driver::DeviceFault> fault(m, "DeviceFault", PyExc_RuntimeError);
  // A run that did not halt within its timeout (the message says what each unit was doing).
  static py::exception<driver::DeviceTimeout> timeout(m, "DeviceTimeout", PyExc_TimeoutError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const driver::DeviceFault& e) {
      py::object inst = py::reinterpret_borrow<py::object>(fault.ptr())(e.what());
      inst.attr("code") = e.code;
      inst.attr("name") = driver::fault_name(e.code);
      inst.attr("pc") = e.pc;
      inst.attr("addr") = e.addr;
      inst.attr("info") = e.info;
      inst.attr("cycle") = e.cycle;
      PyErr_SetObject(fault.ptr(), inst.ptr());
    } catch (const driver::DeviceTimeout& e) {
      PyErr_SetString(timeout.ptr(), e.what());
    } catch (const data::DataError& e) {
      PyErr_SetString(data_error.ptr(), e.what());
    } catch (const runlog::CheckpointError& e) {
      PyErr_SetString(ckpt_error.ptr(), e.what());
    }
  });
}

}  // namespace tessera::python
