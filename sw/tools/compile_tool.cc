// tessera compile: compiles a model's training step (--model FILE; default the example CNN) and,
// with --dump, prints the graph IR after each pass (sw/compiler/graph.h: build, autodiff, numerics,
// fuse, lower), then the HBM plan and the emitted program's statistics per phase (docs/compiler.md
// walks through it).
// --asm FILE writes the whole program as assembly (tessera disasm's canonical text).
#include "sw/tools/compile_tool.h"

#include <fstream>
#include <iomanip>
#include <memory>
#include <ostream>
#include <sstream>

#include "sw/compiler/graph.h"
#include "tessera/asm.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tessera/keras.h"
#include "tessera/model_file.h"

namespace tessera::tools {

namespace {

void print_stats(std::ostream& out, const compiler::DenseStackStep& step) {
  const compiler::StepStats& st = step.stats();
  out << "== program: " << st.instructions << " instructions (" << st.instructions * 16
      << " bytes, " << st.loops << " REPEAT loops; " << st.executed
      << " executed, loop bodies unrolled), DMA " << st.dma << ", MXU " << st.mxu << ", VPU "
      << st.vpu << "; sync: " << st.waits << " WAIT, " << st.signals << " SIGNAL; " << st.macs
      << " MACs; " << st.dma_elements << " DMA elements\n";
  for (const auto& p : st.phases) {
    const compiler::Roofline rf = compiler::roofline(p, step.chip().channels);
    out << "  " << std::left << std::setw(10) << p.name << std::right << std::setw(9)
        << p.instructions << " instructions, MXU bound " << std::setw(8) << rf.mxu << ", VPU "
        << std::setw(8) << rf.vpu << ", DMA " << std::setw(8) << rf.dma << " (" << p.dma_elements
        << " elements), HBM " << std::setw(8) << rf.hbm << ", ICI " << rf.ici << ", SEQ " << rf.seq
        << ": roofline " << rf.bound() << " (" << rf.unit() << ")\n";
  }
  out << "  bound: MXU " << step.mxu_bound_cycles() << " cycles, VPU " << step.vpu_bound_cycles()
      << " cycles, DMA " << step.dma_bound_cycles() << " cycles, HBM " << step.hbm_bound_cycles()
      << " cycles, ICI " << step.ici_bound_cycles() << " cycles; roofline " << step.bound_cycles()
      << " cycles\n";
}

int write_asm(const CompileOptions& o, const std::vector<isa::Instruction>& prog, std::ostream& out,
              std::ostream& err) {
  if (o.asm_out.empty()) return 0;
  std::ofstream f(o.asm_out);
  if (!f) {
    err << "tessera compile: cannot write " << o.asm_out << "\n";
    return 2;
  }
  for (const auto& i : prog) f << assembler::disassemble(i) << "\n";
  out << "wrote " << o.asm_out << "\n";
  return 0;
}

std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
  return s.str();
}

// The graph passes, DenseStackStep's op-by-op tiling, its HBM plan (persistent
// tensors, then the liveness planner's transients with their phase intervals) and the program.
int compile_dense(const CompileOptions& o, const compiler::DenseStackSpec& spec_in,
                  std::ostream& out, std::ostream& err) {
  const driver::DeviceConfig c = driver::chip_for_array(o.array);
  const tessera::ChipShape chip{c.n, c.ub_bytes, c.acc_rows};
  std::unique_ptr<compiler::DenseStackStep> step;
  compiler::PassDumps dumps;
  try {
    // the graph passes, then the step compiler on the layer stack the lowered graph describes
    const compiler::Graph g = compiler::compile_graph(spec_in, compiler::OptimizerSpec::Kind::kAdam,
                                                      c, o.batch, &dumps);
    compiler::OptimizerSpec os;
    os.label_smoothing = o.label_smoothing;
    (void)g;
    step = std::make_unique<compiler::DenseStackStep>(
        spec_in, os, chip, o.batch, 0,
        o.evaluate ? compiler::StepKind::kEvaluate : compiler::StepKind::kTrain);
  } catch (const std::exception& e) {
    err << "tessera compile: " << e.what() << "\n";
    return 2;
  }
  const compiler::DenseStackSpec& spec = step->spec();
  if (o.dump) {
    int stage = 1;
    for (const auto& [pass, text] : dumps)
      out << "== " << stage++ << " " << pass << "\n" << text << "\n";
    const size_t weighted = step->layout().layers.size();
    std::vector<std::string> weight_names;  // the layers with weights, in order
    for (size_t i = 0; weight_names.size() < weighted; ++i)
      if (i >= spec.features.size() ||
          spec.features[i].kind == compiler::FeatureLayerSpec::Kind::kConv)
        weight_names.push_back(compiler::layer_name(spec, static_cast<int>(i)));
    out << "== " << stage++ << " tiling (one tiled MXU matmul per op, N = " << c.n << ", UB "
        << c.ub_bytes << " bytes, " << c.acc_rows << " ACC rows)\n";
    for (const auto& line : step->lowering_plan()) out << "  " << line << "\n";
    const auto& Y = step->layout();
    out << "\n== " << stage++ << " memory (HBM plan, base 0)\n";
    out << "  " << hex(Y.images) << "  images bf16 [Bpad][P0]\n  " << hex(Y.labels)
        << "  labels f32 [Bpad]\n";
    for (size_t l = 0; l < Y.layers.size(); ++l)
      out << "  " << hex(Y.layers[l].w) << "  " << weight_names[l]
          << " W^T f32 [Up][Kp], m, v, bf16 copy; bias f32 [Up], m, v\n";
    out << "  " << hex(Y.powers) << "  powers f32 [2][N]\n  " << hex(Y.consts)
        << "  consts f32 [2Cc][N]\n  " << hex(Y.ones) << "  ones bf16 [" << step->ones_count()
        << "]\n  " << hex(Y.metrics) << "  metrics f32 [2][N]\n  " << hex(Y.probs)
        << "  probs f32 [Bpad][Cpad]\n";
    out << "  phases:";
    for (size_t i = 0; i < step->stats().phases.size(); ++i)
      out << " " << i << " " << step->stats().phases[i].name;
    out << "\n  transients (live in phases, by the numbers above): " << Y.transient_bytes
        << " bytes planned for " << Y.transient_unshared << " bytes of buffers\n";
    for (const auto& t : Y.transients)
      out << "    " << hex(t.addr) << "  " << std::left << std::setw(20) << t.name << std::right
          << std::setw(10) << t.bytes << " bytes, live in phases " << t.first << ".." << t.last
          << "\n";
    out << "  total " << Y.bytes << " bytes\n\n";
  }
  print_stats(out, *step);
  return write_asm(o, step->program(), out, err);
}

}  // namespace

int compile_step(const CompileOptions& o, std::ostream& out, std::ostream& err) {
  compiler::DenseStackSpec spec;
  try {
    spec = keras::dense_stack_spec(o.model.empty() ? keras::example_cnn().layers
                                                   : keras::load_model_description(o.model).layers);
  } catch (const keras::ModelFileError& e) {
    err << "tessera compile: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "tessera compile: " << (o.model.empty() ? "the example CNN" : o.model) << ": "
        << e.what() << "\n";
    return 2;
  }
  return compile_dense(o, spec, out, err);
}

}  // namespace tessera::tools
