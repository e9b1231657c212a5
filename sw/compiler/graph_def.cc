// The graph as a tensorflow.GraphDef (graph_def.h), encoded with the event files' protobuf writer.
#include "sw/compiler/graph_def.h"

#include <set>
#include <stdexcept>

#include "sw/runlog/protobuf.h"

namespace tessera::compiler {
namespace {

// Field numbers of tensorflow/core/framework/{graph,node_def,attr_value,tensor_shape}.proto.
constexpr uint32_t kFieldGraphNode = 1;   // repeated NodeDef
constexpr uint32_t kFieldNodeName = 1;    // string
constexpr uint32_t kFieldNodeOp = 2;      // string
constexpr uint32_t kFieldNodeInput = 3;   // repeated string
constexpr uint32_t kFieldNodeAttr = 5;    // map<string, AttrValue>
constexpr uint32_t kFieldMapKey = 1;      // a map entry's key
constexpr uint32_t kFieldMapValue = 2;    // and value
constexpr uint32_t kFieldAttrList = 1;    // AttrValue.list (ListValue)
constexpr uint32_t kFieldAttrString = 2;  // AttrValue.s
constexpr uint32_t kFieldAttrType = 6;    // AttrValue.type (DataType)
constexpr uint32_t kFieldListShape = 7;   // ListValue.shape (repeated TensorShapeProto)
constexpr uint32_t kFieldShapeDim = 2;    // TensorShapeProto.dim
constexpr uint32_t kFieldDimSize = 1;     // TensorShapeProto.Dim.size (int64)
// tensorflow/core/framework/types.proto
constexpr uint64_t kDtFloat = 1, kDtInt32 = 3, kDtBfloat16 = 14;

using runlog::proto::Writer;

bool is_optimizer(const std::string& op) {
  auto ends = [&](const std::string& s) {
    return op.size() >= s.size() && op.compare(op.size() - s.size(), s.size(), s) == 0;
  };
  return op == "adam" || op == "sgd_momentum" || ends("_adam") || ends("_sgd_momentum");
}

// A value name inside its layer's scope: "dense1.W'" -> "W", "ddense1.a" -> "da",
// "conv1.W', conv1.b'" -> "W_b", "loss, acc, dlogits" -> "loss_acc_dlogits".
std::string leaf_name(const std::string& value, const std::string& layer) {
  std::string s = value;
  if (!layer.empty())
    for (size_t at; (at = s.find(layer + ".")) != std::string::npos;) s.erase(at, layer.size() + 1);
  std::string out;
  bool gap = false;
  for (char c : s) {
    if (c == '\'') continue;  // the updated value: the optimizer scope says so
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.';
    if (!ok) {
      gap = true;
      continue;
    }
    if (gap && !out.empty()) out += '_';
    gap = false;
    out += c;
  }
  return out.empty() ? std::string("value") : out;
}

std::string scope_of(const Graph& g, const Node& n) {
  const Node* src = n.op == "cast_bf16" && !n.inputs.empty() ? &g.at(n.inputs[0]) : nullptr;
  if (n.op == "input" || (src && src->op == "input")) return "input";
  const std::string layer = n.layer < 0 ? std::string("flatten") : layer_name(g.spec, n.layer);
  if (n.op == "param" || (src && src->op == "param")) return "variables/" + layer;
  if (is_optimizer(n.op)) return "optimizer/" + layer;
  return (n.backward ? "backward/" : "forward/") + layer;
}

// One entry of NodeDef.attr (a map: repeated {key, value} messages).
void add_attr(Writer& node, const std::string& key, const Writer& value) {
  Writer entry;
  entry.bytes(kFieldMapKey, key);
  entry.message(kFieldMapValue, value);
  node.message(kFieldNodeAttr, entry);
}

void string_attr(Writer& node, const std::string& key, const std::string& value) {
  Writer attr;
  attr.bytes(kFieldAttrString, value);
  add_attr(node, key, attr);
}

std::string shape_text(const Node& n) {
  std::string s = "[";
  for (size_t i = 0; i < n.shape.size(); ++i) s += (i ? "," : "") + std::to_string(n.shape[i]);
  return s + "]";
}

}  // namespace

std::vector<std::string> graph_def_names(const Graph& g) {
  std::vector<std::string> names(g.nodes().size());
  std::set<std::string> taken;
  for (const Node& n : g.nodes()) {
    if (n.dead) continue;
    const std::string layer = n.layer < 0 ? std::string() : layer_name(g.spec, n.layer);
    std::string name = scope_of(g, n) + "/" + leaf_name(n.name, layer);
    if (taken.count(name)) name += "_" + std::to_string(n.id);  // (names are unique in practice)
    taken.insert(name);
    names[n.id] = name;
  }
  return names;
}

std::string graph_def_bytes(const Graph& g) {
  const std::vector<std::string> names = graph_def_names(g);
  Writer graph;
  for (const Node& n : g.nodes()) {
    if (n.dead) continue;
    Writer node;
    node.bytes(kFieldNodeName, names[n.id]);
    node.bytes(kFieldNodeOp, n.op);
    for (int i : n.inputs) {
      if (g.at(i).dead)
        throw std::logic_error("graph_def: " + n.name + " reads the removed node " + g.at(i).name);
      node.bytes(kFieldNodeInput, names[i]);
    }
    Writer shape, list, shapes, dtype;  // _output_shapes: list(shape), the one output's
    for (uint32_t d : n.shape) {
      Writer dim;
      dim.int64(kFieldDimSize, d);
      shape.message(kFieldShapeDim, dim);
    }
    list.message(kFieldListShape, shape);
    shapes.message(kFieldAttrList, list);
    add_attr(node, "_output_shapes", shapes);
    dtype.varint(kFieldAttrType, n.dtype == DType::kBf16  ? kDtBfloat16
                                 : n.dtype == DType::kI32 ? kDtInt32
                                                          : kDtFloat);
    add_attr(node, "dtype", dtype);
    string_attr(node, "output", shape_text(n) + " " + dtype_name(n.dtype));
    string_attr(node, "phase", n.phase);
    string_attr(node, "units", n.units);
    string_attr(node, "layer", layer_name(g.spec, n.layer));
    string_attr(node, "value", n.name);
    if (!n.attrs.empty()) string_attr(node, "note", n.attrs);
    graph.message(kFieldGraphNode, node);
  }
  return graph.str();
}

}  // namespace tessera::compiler
