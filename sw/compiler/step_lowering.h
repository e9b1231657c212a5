// The lowering of one step (docs/compiler.md, "Program emission"): walks the lowered graph's
// phases in program order and hands each phase's nodes to the lowering of their op —
//   setup                 the step count, Dropout keys, lr_t and Adam's powers, constants
//   fwd_<feature>         fused.conv2d_bias[_relu][_maxpool], maxpool, avgpool
//                         (forward_lowering.cc)
//   fwd<l>                fused.matmul_bias[_relu][_dropout], fused.matmul_bias_softmax_xent
//                         (forward_lowering.cc)
//   bwd<l>                transpose, matmul / fused.matmul_relu_grad (input gradient),
//                         fused.matmul_<optimizer>, fused.matmul_ones_<optimizer>
//                         (backward_lowering.cc)
//   bwd_<feature>         pooling gradients, fused.maxpool_relu_grad, conv2d_input_grad[_relu],
//                         fused.conv2d_filter[_bias]_grad_<optimizer> (backward_lowering.cc)
//   reduce_scatter, update, allgather   data parallelism's split update (optimizer_lowering.cc)
// The lowerings share the chip's UB plan (this class: the global rows, the arena), the HBM
// layout and the feature plan; each emits through one ProgramBuilder into the step's phases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sw/compiler/feature_lowering.h"
#include "sw/compiler/feature_plan.h"
#include "sw/compiler/graph.h"
#include "sw/compiler/lowering_util.h"
#include "sw/compiler/matmul_lowering.h"
#include "sw/compiler/program_builder.h"
#include "tessera/dense_step.h"

namespace tessera::compiler {

class StepLowering {
 public:
  using LayerRegions = DenseStackStep::LayerRegions;
  using Block = lowering::Block;
  StepLowering(DenseStackStep& step, const Graph& graph);
  // Emits the whole step; the program, its statistics and the lowering plan land in `step`.
  void run();

 private:
  using Nodes = std::vector<const Node*>;
  using Gather = std::function<void(uint64_t r0, uint32_t rows, uint32_t c0, uint32_t cols,
                                    uint32_t ub, uint32_t pitch, bool fresh, uint32_t stage)>;

  // ---- the lowerings, by phase (the nodes the lowered graph assigns to it) ----
  void setup();
  void feature_forward(const Node& n);  // a conv (its fused pool), or a pooling layer
  lowering::Matmul dense_matmul(uint32_t l, const LayerRegions& R, const char* name);
  void dense_forward(const Node& n);  // fused.matmul_bias[_relu][_dropout]
  void softmax_xent(const Node& n);   // the last layer: softmax, cross-entropy, d logits
  void dense_backward(uint32_t l, const Nodes& nodes);
  void feature_backward(int i, const Nodes& nodes);
  // The optimizer epilogue on a piece of a tensor (optimizer_lowering.cc): `load` its state
  // into the scratch, else update it from the gradient in the ACC (or, split, store the
  // gradient to the gradient vector).
  void update(bool load, const Block& k, const LayerRegions& R, uint32_t pitch,
              bool transposed = false);
  void optimizer_constants();
  void split_update();  // reduce_scatter, the sharded update, allgather

  // ---- shared helpers ----
  uint64_t transient(const std::string& name) const;
  uint64_t x_addr(uint32_t l) const;  // x_l: the images, x0 (Flatten) or a Dense output
  void note(const std::string& text);
  void zero(uint64_t addr, uint64_t bytes);
  lowering::MapRef out_ref(int i) const;   // op i's output as the next op reads it (-1: images)
  lowering::MapRef grad_ref(int i) const;  // the gradient of op i's output
  void prepare_grad(int i, bool holes);
  Gather gather_from(const lowering::PatchMap& pm);
  Gather x0_gather();
  lowering::PatchMap conv_source(int i, bool emit);
  lowering::PatchMap grad_source(int i, const lowering::MapRef& g);
  static LayerRegions bias_of(const LayerRegions& R);

  DenseStackStep& s_;
  const Graph& g_;
  const DenseStackSpec& spec_;
  const ChipShape& chip_;
  const DenseStackStep::Layout& Y;
  const uint32_t N, B, Bpad, L, row2n, row4n;
  std::vector<uint32_t> P, D;  // per layer boundary: padded and real widths (0: the inputs)
  uint32_t Cpad = 0, Cc = 0;
  FeaturePlan fp;
  uint32_t nf = 0, P0 = 0;
  bool train = false, adam = false, split = false;
  // x0 pooled-row-major (a fused conv + max-pool writes the Flatten input): [hp][Bpad][wp F],
  // so the first Dense layer's operand loads read the batch's runs of a pooled row back to
  // back (one run where a load spans whole pooled rows) instead of rows P0 apart
  bool x0_rows = false;
  uint32_t x0_row = 0, x0_hp = 0;
  ProgramBuilder b;
  lowering::StepPhases phases;
  // Global UB: powers, lr_t, Dropout keys, metrics, labels, class constants, one layer's bias,
  // zeros, the identity; the rest is the phases' arena [arena_lo, arena_hi).
  uint32_t ub_powers = 0, ub_lrt = 0, ub_dbase = 0, ub_metrics = 0, ub_labels = 0, ub_consts = 0,
           ub_bias = 0, zero_bytes = 0, ub_zero = 0, ub_identity = 0, zero_elems = 0;
  bool dropout = false;
  uint64_t arena_lo = 0, arena_hi = 0;
  const AdamRegs ar;
  uint32_t upd_bytes = 0;  // the optimizer epilogue's scratch an ACC row
};

// A forward epilogue piece: ACC + bias (the fp32 rows at ub_bias, one per column tile), relu
// if asked, as bf16 rows of the piece's scratch (ct N values a row). V3, V4.
void emit_bias_relu(ProgramBuilder& b, const lowering::Block& k, uint32_t ub_bias, bool relu);
// x = H(x) (dropout_hash) on the VPU: 22 instructions; clobbers t and s.
void emit_hash(ProgramBuilder& b, int x, int t, int s);

}  // namespace tessera::compiler
