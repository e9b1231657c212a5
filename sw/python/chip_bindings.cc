// One chip for scripted directed tests (python/tessera/chip.py): the assembler, HBM as numpy
// bytes, program runs with their counters, faults as DeviceFault, waveform dumps.
#include <pybind11/stl.h>

#include "sw/python/bindings.h"
#include "tessera/asm.h"
#include "tessera/driver.h"
#include "tessera/isa_gen.h"

namespace tessera::python {
namespace {

const char* const kPerfNames[] = {"cycles",    "dma_busy",  "mxu_busy",   "vpu_busy",
                                  "dma_stall", "mxu_stall", "vpu_stall",  "macs",
                                  "hbm_read",  "hbm_write", "row_hits",   "row_misses",
                                  "instructions"};
static_assert(sizeof kPerfNames / sizeof kPerfNames[0] == driver::kPerfCounters);

py::dict report_dict(const driver::RunReport& r) {
  py::dict d, perf;
  d["cycles"] = r.cycles;
  for (int i = 0; i < driver::kPerfCounters; ++i) perf[kPerfNames[i]] = r.perf[i];
  d["perf"] = perf;
  d["hbm_bus_cycles"] = r.hbm_pins[0];
  d["hbm_turns"] = r.hbm_pins[1];
  d["hbm_refreshes"] = r.hbm_pins[2];
  return d;
}

}  // namespace

void bind_chip(py::module_& m) {
  // Assembly text -> the program image (bytes); ValueError listing every error "LINE:COL: why".
  m.def(
      "assemble",
      [](const std::string& text, uint32_t n) {
        assembler::AsmOptions o;
        o.n = n;
        const assembler::AsmResult r = assembler::assemble(text, o);
        if (!r.ok()) {
          std::string why;
          for (const auto& e : r.errors) why += assembler::format_error("<program>", e) + "\n";
          throw std::invalid_argument(why.substr(0, why.size() - 1));
        }
        const std::vector<uint8_t> b = r.bytes();
        return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
      },
      py::arg("text"), py::arg("n") = isa::kDefaultN);
  m.def(
      "disassemble",
      [](const py::bytes& image, uint32_t n) {
        const std::string s = image;
        assembler::AsmOptions o;
        o.n = n;
        const assembler::DisasmResult r =
            assembler::disassemble(std::vector<uint8_t>(s.begin(), s.end()), o);
        if (!r.ok()) {
          std::string why;
          for (const auto& e : r.errors) why += e + "\n";
          throw std::invalid_argument(why.substr(0, why.size() - 1));
        }
        return r.text;
      },
      py::arg("image"), py::arg("n") = isa::kDefaultN);

  py::class_<driver::Device>(m, "Device")
      .def(py::init([](const std::string& backend, int array, int channels,
                       const std::string& arith) {
             driver::DeviceConfig c = driver::chip_for_array(array);
             c.backend = driver::parse_backend(backend);
             c.channels = channels;
             c.arith = driver::parse_arith(arith);
             return driver::Device::open(c);
           }),
           py::arg("backend") = "functional", py::arg("array") = 16, py::arg("channels") = 1,
           py::arg("arith") = "rtl")
      .def_property_readonly("backend",
                             [](const driver::Device& d) { return driver::backend_name(d.config().backend); })
      .def_property_readonly("array", [](const driver::Device& d) { return d.config().n; })
      .def_property_readonly("hbm_bytes", &driver::Device::hbm_bytes)
      .def_property_readonly("ub_bytes", [](const driver::Device& d) { return d.config().ub_bytes; })
      .def_property_readonly("channels", [](const driver::Device& d) { return d.config().channels; })
      .def("alloc", &driver::Device::alloc)
      .def("free", &driver::Device::free)
      .def("write",
           [](driver::Device& d, uint64_t addr, const Array<uint8_t>& bytes) {
             std::vector<uint8_t> v = to_vector(bytes);
             py::gil_scoped_release release;
             d.write(addr, v);
           })
      .def("read",
           [](driver::Device& d, uint64_t addr, size_t n) {
             std::vector<uint8_t> v;
             {
               py::gil_scoped_release release;
               v = d.read(addr, n);
             }
             return to_array(std::move(v));
           })
      .def("csr_read", &driver::Device::csr_read)
      .def("load_program",
           [](driver::Device& d, const py::bytes& image) {
             const std::string s = image;
             return d.load_program(std::vector<uint8_t>(s.begin(), s.end()));
           })
      .def(
          "run",
          [](driver::Device& d, uint64_t prog, uint64_t timeout) {
            driver::RunReport r;
            {
              py::gil_scoped_release release;
              r = d.run(prog, timeout);
            }
            return report_dict(r);
          },
          py::arg("prog_addr"), py::arg("timeout"))
      .def("arm_waves", &driver::Device::arm_waves, py::arg("path"), py::arg("begin"),
           py::arg("end"));
  m.attr("PERF_NAMES") = py::cast(std::vector<std::string>(std::begin(kPerfNames), std::end(kPerfNames)));
  py::dict csr;
  csr["ID"] = isa::CSR_ID;
  csr["STATUS"] = isa::CSR_STATUS;
  csr["FAULT_CODE"] = isa::CSR_FAULT_CODE;
  csr["FAULT_PC"] = isa::CSR_FAULT_PC;
  csr["FAULT_ADDR"] = isa::CSR_FAULT_ADDR;
  csr["UNIT_STATE"] = isa::CSR_UNIT_STATE;
  csr["PC"] = isa::CSR_PC;
  csr["PERF_BASE"] = isa::CSR_PERF_BASE;
  m.attr("CSR") = csr;
}

}  // namespace tessera::python
