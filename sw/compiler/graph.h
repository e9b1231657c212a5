// The compiler's graph IR (docs/compiler.md, "Stages"): nodes with an op, inputs, a shape and a
// dtype, built from any supported layer stack and rewritten by passes —
//   build     the forward graph of the layers, the loss and the accuracy
//   autodiff  reverse mode: each op's gradient rule appends the gradient nodes of the values
//             that need one (no gradient flows into the images), then one optimizer update
//             (Adam or SGD with momentum) per parameter
//   numerics  the chip's rounding points: a bf16 cast on every MXU operand
//   fuse      rewrites matched op patterns into the fused ops the step's emitters implement
//             (an MXU op with its bias/relu/Dropout or softmax-cross-entropy epilogue, a pooling
//             or MXU input gradient with the producer's relu gradient, a weight gradient with
//             its optimizer update, the conv + relu + max-pool with its argmax where
//             conv_pool_fused says the chip runs it so, ...)
//   lower     each node to the chip phase (fwd_<layer>, fwd<l>, bwd<l>, bwd_<layer>) and the
//             units that run it; an op with no lowering is refused here, naming its layer
// The step compiler (DenseStackStep, StepLowering) emits the program from the lowered graph: it
// walks the phases in order and lowers each phase's nodes by their op; `tessera compile --dump`
// prints the graph after each pass.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/compiler.h"
#include "tessera/dense_step.h"

namespace tessera::compiler {

enum class DType { kF32, kBf16, kI32 };
const char* dtype_name(DType t);

struct Node {
  int id = 0;
  std::string op;               // "conv2d", "matmul", "adam", "fused.matmul_bias_relu", ...
  std::string name;             // value name, e.g. "conv1.z", "ddense2.W"
  std::vector<int> inputs;      // node ids
  std::vector<uint32_t> shape;  // empty: scalar
  DType dtype = DType::kF32;
  std::string attrs;                  // op attributes as printed
  std::map<std::string, double> num;  // the same attributes, structured (kernel, stride, ...)
  int layer = -1;                     // the model layer it belongs to (features first, then Dense)
  bool backward = false;              // made by autodiff (a gradient or an optimizer update)
  std::string phase, units;           // set by lower()
  bool dead = false;                  // removed by a pass (kept so ids stay stable)
};

class Graph {
 public:
  int add(const std::string& op, const std::string& name, std::vector<int> inputs,
          std::vector<uint32_t> shape, DType dtype, const std::string& attrs = "");
  Node& at(int id) { return nodes_[id]; }
  const Node& at(int id) const { return nodes_[id]; }
  int find(const std::string& name) const;  // -1 when absent
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& nodes() { return nodes_; }
  size_t live() const;
  std::vector<int> consumers(int id) const;  // live nodes reading `id`
  void replace_uses(int from, int to);       // every live input `from` becomes `to`
  std::string dump() const;  // one line a live node: id name = op(inputs) : shape dtype [attrs]

  // The model the graph was built from (layer names, the optimizer).
  DenseStackSpec spec;
  OptimizerSpec::Kind optimizer = OptimizerSpec::Kind::kAdam;
  ChipShape chip;  // the chip (some fusions depend on its array and ACC sizes)

 private:
  std::vector<Node> nodes_;
};

// A layer's name in node names and phases: conv1, maxpool2, avgpool3 (feature layers, from 1),
// dense1 … (Dense layers, from 1).
std::string layer_name(const DenseStackSpec& spec, int layer);

// The passes, in order. Each throws std::invalid_argument for a graph it cannot handle.
Graph build_forward(const DenseStackSpec& spec, uint32_t batch);
void autodiff(Graph& g);
void insert_casts(Graph& g);
void fuse(Graph& g);
void lower(Graph& g);

// The phases the lowered graph assigns, in program order, with "setup" first.
std::vector<std::string> graph_phases(const Graph& g);

// All passes; `dumps` (optional) receives the dump after each one, labelled.
using PassDumps = std::vector<std::pair<std::string, std::string>>;
Graph compile_graph(const DenseStackSpec& spec, OptimizerSpec::Kind optimizer, const ChipShape& chip,
                    uint32_t batch, PassDumps* dumps = nullptr);

}  // namespace tessera::compiler
