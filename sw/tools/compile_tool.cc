// tessera compile: compiles the example CNN's training step and, with --dump, prints the
// compiler's representation after each stage (docs/compiler.md walks through this output):
//   1 graph      the Keras layer graph with shapes and dtypes
//   2 autodiff   the training graph: forward ops, loss, gradient ops, optimizer ops
//   3 lowering   each op assigned to chip phases and units, matmuls with their MXU operands
//   4 memory     the HBM plan (every region, its layout and size)
//   5 program    instruction counts per phase and unit, sync inserted, the analytic bound
// --asm FILE writes the whole program as assembly (tessera disasm's canonical text).
#include "sw/tools/compile_tool.h"

#include <fstream>
#include <iomanip>
#include <memory>
#include <ostream>

#include "tessera/asm.h"
#include "tessera/compiler.h"

namespace tessera::tools {

int compile_step(const CompileOptions& o, std::ostream& out, std::ostream& err) {
  compiler::CnnSpec s;
  compiler::ChipShape chip;
  if (o.array == 4)
    chip = {4, 8192, 64};
  else if (o.array == 16)
    chip = {16, 65536, 256};
  else
    chip = {o.array, 256 * 1024, 1024};
  std::unique_ptr<compiler::CnnTrainStep> step;
  try {
    step = std::make_unique<compiler::CnnTrainStep>(
        s, compiler::AdamSpec{}, chip, o.batch, 0,
        o.evaluate ? compiler::StepKind::kEvaluate : compiler::StepKind::kTrain);
  } catch (const std::exception& e) {
    err << "tessera compile: " << e.what() << "\n";
    return 2;
  }
  const uint32_t B = o.batch, H = s.height, W = s.width, F = s.filters, K = s.kernel;
  const uint32_t CH = s.conv_h(), CW = s.conv_w(), PH = s.pool_h(), PW = s.pool_w();
  const uint32_t D = s.features(), C = s.classes, N = chip.n;
  const uint32_t Cpad = step->class_pad(), Tpad = step->tap_pad();
  if (o.dump) {
    out << "== 1 graph (Keras layers; NHWC, fp32 unless noted)\n"
        << "  x        input           [" << B << "," << H << "," << W << ",1]  (staged as bf16)\n"
        << "  conv     Conv2D          [" << B << "," << CH << "," << CW << "," << F
        << "]  kernel [" << K << "," << K << ",1," << F << "] relu valid\n"
        << "  pool     MaxPool2D       [" << B << "," << PH << "," << PW << "," << F << "]  2x2/2\n"
        << "  flat     Flatten         [" << B << "," << D << "]\n"
        << "  dense    Dense           [" << B << "," << C << "]  kernel [" << D << "," << C
        << "] softmax\n"
        << "  loss     SparseCategoricalCrossentropy -> scalar; accuracy -> scalar\n\n";
    out << "== 2 autodiff (training graph)\n"
        << "  z1  = im2col(x) @ bf16(Wc)            [" << B * CH * CW << "," << F << "]\n"
        << "  y1  = relu(z1 + bc); p = maxpool(y1), a = argmax window (fused: relu(max(z1)+bc))\n"
        << "  f   = bf16(flatten(p))                 [" << B << "," << D << "]\n"
        << "  z2  = f @ bf16(Wd) + bd                [" << B << "," << C << "]\n"
        << "  L   = mean(logsumexp(z2) - z2[label]); acc = sum(z2[label] == max z2)\n"
        << "  dz2 = bf16((softmax(z2) - onehot) / B)   (fused with the loss)\n"
        << "  dWd = f^T @ dz2; dbd = 1^T @ dz2;  df = bf16(dz2 @ bf16(Wd)^T)\n"
        << "  dz1 = df routed to the argmax position where relu was on (max-pool + relu backward)\n"
        << "  dWc = im2col(x)^T @ dz1; dbc = 1^T @ dz1\n"
        << "  Adam(Wc, bc, Wd, bd): m, v, w updated elementwise; bf16 copies of Wc, Wd\n\n";
    out << "== 3 lowering (phase: units — operands)\n"
        << "  conv_fwd  per (image, pooled row): DMA im2col walk x -> UB [" << 2 * CW << " rows,"
        << Tpad << " taps]; MXU.MM rows " << 2 * CW << ", K " << Tpad << ", " << F / N
        << " column tiles; VPU bias+relu+pool+argmax -> DMA f, a to HBM\n"
        << "  dense_fwd MXU f [" << B << "," << D << "] x Wd [" << D << "," << Cpad << "] in "
        << D / N << " K tiles (DMA-streamed); VPU softmax, log-sum-exp, loss, accuracy, dz2\n"
        << "  dense_dx  MXU dz2 x Wd^T (Wd^T tiles: a transposing DMA walk) -> df to HBM\n"
        << "  dense_dw  MXU f^T (transposing DMA walk) x dz2, ones x dz2; VPU Adam from the ACC\n"
        << "  conv_dw   per (image, pooled row): DMA im2col^T walk + df + a; VPU dz1; MXU "
           "im2col^T (+ ones row) x dz1 accumulated over the batch; VPU Adam\n\n";
    const compiler::HbmLayout& L = step->layout();
    out << "== 4 memory (HBM plan, base 0)\n";
    const std::pair<const char*, uint64_t> regions[] = {
        {"images bf16 [B][H][W]", L.images},    {"labels f32 [Bpad]", L.labels},
        {"conv_w f32 [taps][F]", L.conv_w},     {"conv_w m,v", L.conv_w_m},
        {"conv_b f32 [F] (+m,v)", L.conv_b},    {"conv_w16 bf16 [Tpad][F]", L.conv_w16},
        {"dense_w f32 [D][Cpad]", L.dense_w},   {"dense_w m,v", L.dense_w_m},
        {"dense_b f32 (+m,v)", L.dense_b},      {"dense_w16 bf16 [D][Cpad]", L.dense_w16},
        {"powers f32 [2][N]", L.powers},        {"consts f32 [2Cc][N]", L.consts},
        {"features bf16 [B][D]", L.features},   {"argmax bf16 [B][D]", L.argmax},
        {"dfeatures bf16 [B][D]", L.dfeatures}, {"metrics f32 [2][N]", L.metrics},
        {"probs f32 [B][Cpad]", L.probs},       {"program", L.program}};
    for (const auto& r : regions)
      out << "  0x" << std::hex << std::setw(8) << std::setfill('0') << r.second << std::dec
          << std::setfill(' ') << "  " << r.first << "\n";
    out << "  total " << L.bytes << " bytes\n\n";
  }
  const compiler::StepStats& st = step->stats();
  out << "== 5 program: " << st.instructions << " instructions (" << st.instructions * 16
      << " bytes), DMA " << st.dma << ", MXU " << st.mxu << ", VPU " << st.vpu
      << "; sync: " << st.waits << " WAIT, " << st.signals << " SIGNAL; " << st.macs << " MACs; "
      << st.dma_elements << " DMA elements\n";
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
