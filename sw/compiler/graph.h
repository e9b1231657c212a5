// The compiler's graph IR (docs/compiler.md, "Stages"): nodes with an op, inputs, a shape and a
// dtype, built from the model's layers and rewritten by passes —
//   build     the forward graph of the layer stack, the loss and the accuracy
//   autodiff  reverse mode: each op's gradient rule appends the gradient nodes, then one Adam
//             update per parameter
//   numerics  the chip's rounding points: a bf16 cast on every matmul / conv operand
//   fuse      bias+relu+max-pool into the conv epilogue (with the argmax it keeps for the
//             backward pass), softmax with the cross-entropy and its gradient, max-pool and relu
//             gradients into one routing op
//   lower     each node to a chip phase and the units that execute it; the phases are then
//             emitted by CnnTrainStep (cnn_train_step.cc), which is why `lower` refuses a graph
//             that is not the pattern those emitters implement.
// `tessera compile --dump` prints the graph after each pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/compiler.h"

namespace tessera::compiler {

enum class DType { kF32, kBf16, kI32 };
const char* dtype_name(DType t);

struct Node {
  int id = 0;
  std::string op;               // "conv2d", "matmul", "adam", "fused.conv_bias_relu_maxpool", ...
  std::string name;             // value name, e.g. "z1", "dWd"
  std::vector<int> inputs;      // node ids
  std::vector<uint32_t> shape;  // empty: scalar
  DType dtype = DType::kF32;
  std::string attrs;         // op attributes, printed as they are
  std::string phase, units;  // set by lower()
  bool dead = false;         // removed by a pass (kept so ids stay stable)
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
  std::string dump() const;  // one line a live node: id name = op(inputs) : shape dtype [attrs]

 private:
  std::vector<Node> nodes_;
};

// The passes, in order. Each throws std::invalid_argument for a graph it cannot handle.
Graph build_forward(const CnnSpec& spec, uint32_t batch);
void autodiff(Graph& g);
void insert_casts(Graph& g);
void fuse(Graph& g);
void lower(Graph& g);

// All passes; `dumps` (optional) receives the dump after each one, labelled.
Graph compile_graph(const CnnSpec& spec, uint32_t batch,
                    std::vector<std::pair<std::string, std::string>>* dumps = nullptr);

}  // namespace tessera::compiler
