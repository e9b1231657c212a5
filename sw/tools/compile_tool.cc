// tessera compile: compiles a model's training step (--model FILE; default the example CNN) and, with --dump, prints the graph
// IR after each pass (sw/compiler/graph.h: build, autodiff, numerics, fuse, lower), then the
// HBM plan and the emitted program's statistics per phase (docs/compiler.md walks through it).
// --asm FILE writes the whole program as assembly (tessera disasm's canonical text).
#include "sw/tools/compile_tool.h"

#include <fstream>
#include <iomanip>
#include <memory>
#include <ostream>

#include "sw/compiler/graph.h"
#include "tessera/asm.h"
#include "tessera/compiler.h"
#include "tessera/driver.h"
#include "tessera/model_file.h"

namespace tessera::tools {

int compile_step(const CompileOptions& o, std::ostream& out, std::ostream& err) {
  compiler::CnnSpec s;
  if (!o.model.empty()) {
    try {
      s = keras::lowerable_spec(keras::load_model_description(o.model).layers);
    } catch (const keras::ModelFileError& e) {
      err << "tessera compile: " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      err << "tessera compile: " << o.model << ": " << e.what() << "\n";
      return 2;
    }
  }
  const driver::DeviceConfig c = driver::chip_for_array(o.array);
  const compiler::ChipShape chip{c.n, c.ub_bytes, c.acc_rows};
  std::unique_ptr<compiler::CnnTrainStep> step;
  try {
    step = std::make_unique<compiler::CnnTrainStep>(
        s, compiler::AdamSpec{}, chip, o.batch, 0,
        o.evaluate ? compiler::StepKind::kEvaluate : compiler::StepKind::kTrain);
  } catch (const std::exception& e) {
    err << "tessera compile: " << e.what() << "\n";
    return 2;
  }
  if (o.dump) {
    std::vector<std::pair<std::string, std::string>> dumps;
    compiler::compile_graph(s, o.batch, &dumps);
    int stage = 1;
    for (const auto& [pass, text] : dumps)
      out << "== " << stage++ << " " << pass << "\n" << text << "\n";
    out << "== " << stage++ << " memory (HBM plan, base 0)\n";
    const compiler::HbmLayout& L = step->layout();
    const std::pair<const char*, uint64_t> regions[] = {
        {"images bf16 [B][H][W]", L.images},     {"labels f32 [Bpad]", L.labels},
        {"conv_w f32 [taps][F]", L.conv_w},      {"conv_w m,v", L.conv_w_m},
        {"conv_b f32 [F] (+m,v)", L.conv_b},     {"conv_w16 bf16 [Tpad][F]", L.conv_w16},
        {"dense_w f32 [C][D] (W^T)", L.dense_w}, {"dense_w m,v", L.dense_w_m},
        {"dense_b f32 (+m,v)", L.dense_b},       {"dense_w16t bf16 [Cpad][D]", L.dense_w16t},
        {"powers f32 [2][N]", L.powers},         {"consts f32 [2Cc][N]", L.consts},
        {"features bf16 [B][D]", L.features},    {"argmax i32 [B][PH][2][F]", L.argmax},
        {"dfeatures bf16 [B][D]", L.dfeatures},  {"metrics f32 [2][N]", L.metrics},
        {"probs f32 [B][Cpad]", L.probs},        {"program", L.program}};
    for (const auto& r : regions)
      out << "  0x" << std::hex << std::setw(8) << std::setfill('0') << r.second << std::dec
          << std::setfill(' ') << "  " << r.first << "\n";
    out << "  total " << L.bytes << " bytes\n\n";
  }
  const compiler::StepStats& st = step->stats();
  out << "== program: " << st.instructions << " instructions (" << st.instructions * 16
      << " bytes, " << st.loops << " REPEAT loops; " << st.executed
      << " executed, loop bodies unrolled), DMA " << st.dma << ", MXU " << st.mxu << ", VPU "
      << st.vpu << "; sync: " << st.waits << " WAIT, " << st.signals << " SIGNAL; " << st.macs
      << " MACs; " << st.dma_elements << " DMA elements\n";
  for (const auto& p : st.phases)
    out << "  " << std::left << std::setw(10) << p.name << std::right << std::setw(9)
        << p.instructions << " instructions, MXU bound " << std::setw(8) << p.mxu_bound << ", VPU "
        << std::setw(8) << p.vpu << ", DMA elements " << std::setw(8) << p.dma_elements << "\n";
  out << "  bound: MXU " << step->mxu_bound_cycles() << " cycles, VPU " << step->vpu_bound_cycles()
      << " cycles\n";
  if (!o.asm_out.empty()) {
    std::ofstream f(o.asm_out);
    if (!f) {
      err << "tessera compile: cannot write " << o.asm_out << "\n";
      return 2;
    }
    for (const auto& i : step->program()) f << assembler::disassemble(i) << "\n";
    out << "wrote " << o.asm_out << "\n";
  }
  return 0;
}

}  // namespace tessera::tools
