// The compiler's graph as a tensorflow.GraphDef (tensorflow/core/framework/graph.proto), the form
// TensorBoard's Graphs tab draws (docs/compiler.md, "The graph in TensorBoard"). Every live node
// becomes a NodeDef named by '/'-scopes so that TensorBoard folds the graph into groups —
//   input/<value>                       the images, the labels and their bf16 cast
//   variables/<layer>/<value>           parameters and their bf16 copies (HBM state)
//   forward/<layer>/<value>             the forward pass (the Flatten: forward/flatten/...)
//   backward/<layer>/<value>            gradients
//   optimizer/<layer>/<value>           the fused updates (gradient matmul + Adam / SGD)
// with its op as the graph has it ("fused.matmul_bias_relu", ...), its inputs by producer name,
// and the attrs _output_shapes (list(shape)), dtype (DT_FLOAT, DT_BFLOAT16 or DT_INT32), and as
// strings output ("[8,10] f32"), phase, units, layer, value (the graph's value name) and note
// (the node's attributes as tessera compile --dump prints them, when it has any).
#pragma once

#include <string>
#include <vector>

#include "sw/compiler/graph.h"

namespace tessera::compiler {

// The NodeDef name of every node (empty for dead ones), indexed by node id: unique, and made of
// the characters TensorFlow allows ([A-Za-z0-9_./], a scope's first character alphanumeric).
std::vector<std::string> graph_def_names(const Graph& g);

// The serialized GraphDef of the graph's live nodes, in node-id order.
std::string graph_def_bytes(const Graph& g);

}  // namespace tessera::compiler
