// The graph IR and its passes (graph.h).
#include "sw/compiler/graph.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

namespace tessera::compiler {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBf16:
      return "bf16";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

int Graph::add(const std::string& op, const std::string& name, std::vector<int> inputs,
               std::vector<uint32_t> shape, DType dtype, const std::string& attrs) {
  Node n;
  n.id = static_cast<int>(nodes_.size());
  n.op = op;
  n.name = name;
  n.inputs = std::move(inputs);
  n.shape = std::move(shape);
  n.dtype = dtype;
  n.attrs = attrs;
  nodes_.push_back(n);
  return n.id;
}

int Graph::find(const std::string& name) const {
  for (const auto& n : nodes_)
    if (!n.dead && n.name == name) return n.id;
  return -1;
}

size_t Graph::live() const {
  return static_cast<size_t>(
      std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return !n.dead; }));
}

std::string Graph::dump() const {
  std::ostringstream o;
  for (const auto& n : nodes_) {
    if (n.dead) continue;
    o << "  %" << n.id << " " << n.name << " = " << n.op << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i)
      o << (i ? ", " : "") << "%" << n.inputs[i] << " " << nodes_[n.inputs[i]].name;
    o << ") : [";
    for (size_t i = 0; i < n.shape.size(); ++i) o << (i ? "," : "") << n.shape[i];
    o << "] " << dtype_name(n.dtype);
    if (!n.attrs.empty()) o << "  {" << n.attrs << "}";
    if (!n.phase.empty()) o << "  -> " << n.phase << " [" << n.units << "]";
    o << "\n";
  }
  return o.str();
}

Graph build_forward(const CnnSpec& s, uint32_t batch) {
  Graph g;
  const uint32_t B = batch, F = s.filters, K = s.kernel, C = s.classes;
  const int x = g.add("input", "x", {}, {B, s.height, s.width, 1}, DType::kF32, "pixels / 255");
  const int labels = g.add("input", "labels", {}, {B}, DType::kI32);
  const int wc = g.add("param", "Wc", {}, {K, K, 1, F}, DType::kF32, "glorot_uniform");
  const int bc = g.add("param", "bc", {}, {F}, DType::kF32, "zeros");
  const int wd = g.add("param", "Wd", {}, {s.features(), C}, DType::kF32, "glorot_uniform");
  const int bd = g.add("param", "bd", {}, {C}, DType::kF32, "zeros");
  const int z1 = g.add("conv2d", "z1", {x, wc}, {B, s.conv_h(), s.conv_w(), F}, DType::kF32,
                       std::to_string(K) + "x" + std::to_string(K) + " valid stride 1");
  const int a1 = g.add("bias_add", "a1", {z1, bc}, g.at(z1).shape, DType::kF32);
  const int y1 = g.add("relu", "y1", {a1}, g.at(z1).shape, DType::kF32);
  const int p = g.add(
      "maxpool", "p", {y1}, {B, s.pool_h(), s.pool_w(), F}, DType::kF32,
      std::to_string(s.pool) + "x" + std::to_string(s.pool) + " stride " + std::to_string(s.pool));
  const int f = g.add("flatten", "f", {p}, {B, s.features()}, DType::kF32, "NHWC order");
  const int z2 = g.add("matmul", "z2", {f, wd}, {B, C}, DType::kF32);
  const int logits = g.add("bias_add", "logits", {z2, bd}, {B, C}, DType::kF32);
  g.add("softmax_cross_entropy", "loss", {logits, labels}, {}, DType::kF32, "mean over batch");
  g.add("accuracy", "acc", {logits, labels}, {}, DType::kF32, "argmax == label");
  return g;
}

void autodiff(Graph& g) {
  // Reverse mode over the forward nodes: grad[v] is the node holding dL/dv.
  std::map<int, int> grad;
  const int loss = g.find("loss");
  if (loss < 0) throw std::invalid_argument("autodiff: the graph has no loss");
  const int n_forward = static_cast<int>(g.nodes().size());
  auto in = [&](int id, int k) { return g.at(id).inputs.at(k); };
  auto shape = [&](int id) { return g.at(id).shape; };
  for (int id = n_forward - 1; id >= 0; --id) {
    const Node node = g.at(id);  // copy: add() may reallocate
    const std::string& op = node.op;
    if (op == "softmax_cross_entropy") {
      grad[in(id, 0)] = g.add("softmax_cross_entropy_grad", "dlogits", {in(id, 0), in(id, 1)},
                              shape(in(id, 0)), DType::kF32, "(softmax - onehot) / B");
      continue;
    }
    if (!grad.count(id)) continue;  // not on the loss's path (accuracy, inputs)
    const int dy = grad[id];
    if (op == "bias_add") {
      grad[in(id, 0)] = dy;  // identity
      grad[in(id, 1)] = g.add("reduce_sum", "d" + g.at(in(id, 1)).name, {dy}, shape(in(id, 1)),
                              DType::kF32, "over all but the last axis");
    } else if (op == "matmul") {
      const int a = in(id, 0), w = in(id, 1);
      const int at =
          g.add("transpose", g.at(a).name + "T", {a}, {shape(a)[1], shape(a)[0]}, g.at(a).dtype);
      grad[w] = g.add("matmul", "d" + g.at(w).name, {at, dy}, shape(w), DType::kF32);
      const int wt =
          g.add("transpose", g.at(w).name + "T", {w}, {shape(w)[1], shape(w)[0]}, g.at(w).dtype);
      grad[a] = g.add("matmul", "d" + g.at(a).name, {dy, wt}, shape(a), DType::kF32);
    } else if (op == "flatten") {
      grad[in(id, 0)] =
          g.add("reshape", "d" + g.at(in(id, 0)).name, {dy}, shape(in(id, 0)), DType::kF32);
    } else if (op == "maxpool") {
      grad[in(id, 0)] = g.add("maxpool_grad", "d" + g.at(in(id, 0)).name, {in(id, 0), id, dy},
                              shape(in(id, 0)), DType::kF32, "to the first max of each window");
    } else if (op == "relu") {
      grad[in(id, 0)] = g.add("relu_grad", "d" + g.at(in(id, 0)).name, {in(id, 0), dy},
                              shape(in(id, 0)), DType::kF32, "x > 0");
    } else if (op == "conv2d") {
      const int w = in(id, 1);
      grad[w] = g.add("conv2d_filter_grad", "d" + g.at(w).name, {in(id, 0), dy}, shape(w),
                      DType::kF32, "im2col(x)^T dz");
      // the input's gradient is not needed: x is an input
    } else if (op == "input" || op == "param") {
      // leaves
    } else {
      throw std::invalid_argument("autodiff: no gradient rule for op '" + op + "'");
    }
  }
  for (const char* p : {"Wc", "bc", "Wd", "bd"}) {
    const int w = g.find(p);
    if (w < 0 || !grad.count(w))
      throw std::invalid_argument(std::string("autodiff: no gradient for ") + p);
    g.add("adam", std::string(p) + "'", {w, grad[w]}, g.at(w).shape, DType::kF32,
          "Keras form: m, v, w; b1^t, b2^t");
  }
}

void insert_casts(Graph& g) {
  // Every MXU operand is bf16 (docs/numerics.md): one cast node per value cast; a transposed
  // operand is cast before its transpose (the DMA transposes bf16 elements).
  std::map<int, int> cast_of;
  auto cast = [&](int src) {
    if (!cast_of.count(src)) {
      const Node s = g.at(src);  // copy: add() may reallocate
      cast_of[src] = g.add("cast_bf16", s.name + ".bf16", {src}, s.shape, DType::kBf16, "RNE");
    }
    return cast_of[src];
  };
  const int n = static_cast<int>(g.nodes().size());
  for (int id = 0; id < n; ++id) {
    const std::string op = g.at(id).op;
    if (op != "conv2d" && op != "matmul" && op != "conv2d_filter_grad") continue;
    for (size_t k = 0; k < g.at(id).inputs.size(); ++k) {
      const int src = g.at(id).inputs[k];
      const bool transposed = g.at(src).op == "transpose";
      const int base = transposed ? g.at(src).inputs[0] : src;
      if (g.at(base).dtype == DType::kBf16) continue;
      const int c = cast(base);
      if (transposed) {
        g.at(src).inputs[0] = c;
        g.at(src).dtype = DType::kBf16;
      } else {
        g.at(id).inputs[k] = c;
      }
    }
  }
}

void fuse(Graph& g) {
  auto only = [&](const std::string& name) {
    const int id = g.find(name);
    if (id < 0) throw std::invalid_argument("fuse: expected a value named " + name);
    return id;
  };
  // conv2d -> bias_add -> relu -> maxpool: one epilogue, which also keeps the argmax
  const int z1 = only("z1"), a1 = only("a1"), y1 = only("y1"), p = only("p");
  const Node conv = g.at(z1);
  const int fused =
      g.add("fused.conv2d_bias_relu_maxpool", "p",
            {conv.inputs[0], conv.inputs[1], g.at(a1).inputs[1]}, g.at(p).shape, DType::kF32,
            "relu(max(z) + b) == max(relu(z + b)); also argmax: window position "
            "0..3 of the max, 4 where relu is off");
  const int argmax = g.add("output", "argmax", {fused}, g.at(p).shape, DType::kI32,
                           "kept for the backward pass: 3-bit codes, 10 to an int32 word");
  for (auto& n : g.nodes())
    for (int& i : n.inputs)
      if (i == p) i = fused;
  // maxpool_grad + relu_grad -> route d p to the argmax position
  const int dy1 = only("dy1"), da1 = only("da1");
  const int dp = g.at(dy1).inputs[2];
  const int route = g.add("fused.maxpool_relu_grad", "dz1", {argmax, dp}, g.at(da1).shape,
                          DType::kF32, "dz1 = dp at the argmax position, 0 elsewhere");
  for (auto& n : g.nodes())
    for (int& i : n.inputs)
      if (i == da1) i = route;
  for (int id : {z1, a1, y1, p, dy1, da1}) g.at(id).dead = true;
  // bias_add(z2) + softmax_cross_entropy + accuracy + its gradient: one VPU pass per sample
  const int logits = only("logits"), loss = only("loss"), acc = only("acc"), dl = only("dlogits");
  const int z2 = g.at(logits).inputs[0], bd = g.at(logits).inputs[1], labels = g.at(loss).inputs[1];
  const int sm = g.add("fused.bias_softmax_xent", "loss, acc, dlogits", {z2, bd, labels},
                       g.at(dl).shape, DType::kF32, "exp/log VPU sequences; dlogits to bf16");
  for (auto& n : g.nodes())
    for (int& i : n.inputs)
      if (i == dl || i == logits) i = sm;
  for (int id : {logits, loss, acc, dl}) g.at(id).dead = true;
  // bias gradients: a row of ones through the weight gradient's matmul, so on the MXU, of the
  // same bf16 operand
  for (const char* b : {"dbd", "dbc"}) {
    const int id = only(b);
    g.at(id).op = "matmul_ones";
    g.at(id).attrs = "a ones row beside the weight gradient's MXU pass";
    for (const auto& n : g.nodes())
      if (!n.dead && n.op == "cast_bf16" && n.inputs[0] == g.at(id).inputs[0]) {
        g.at(id).inputs[0] = n.id;
        break;
      }
  }
}

void lower(Graph& g) {
  struct Rule {
    const char* op;
    const char* phase;
    const char* units;
  };
  static const Rule rules[] = {
      {"input", "host", "staged into HBM"},
      {"param", "HBM", "state"},
      {"output", "HBM", "conv_fwd writes, conv_dw reads"},
      {"fused.conv2d_bias_relu_maxpool", "conv_fwd", "DMA im2col walk, MXU, VPU"},
      {"flatten", "-", "layout only (NHWC rows)"},
      {"reshape", "-", "layout only"},
      {"matmul", "dense_fwd | dense_dx | dense_dw", "MXU (+ DMA-streamed tiles)"},
      {"transpose", "dense_dx | dense_dw", "DMA: HBM rows, UB-to-UB transposing walk"},
      {"fused.bias_softmax_xent", "dense_fwd", "VPU"},
      {"matmul_ones", "dense_dw | conv_dw", "MXU"},
      {"fused.maxpool_relu_grad", "conv_dw", "VPU"},
      {"conv2d_filter_grad", "conv_dw", "DMA im2col^T walk, MXU (ACC over the batch)"},
      {"adam", "dense_dw | conv_dw", "VPU (gradient read from the ACC)"},
      {"cast_bf16", "-", "VPU.ST bf16 where the value is produced (pixels: the host)"},
  };
  for (auto& n : g.nodes()) {
    if (n.dead) continue;
    const Rule* r = nullptr;
    for (const auto& x : rules)
      if (n.op == x.op) r = &x;
    if (!r)
      throw std::invalid_argument("lower: no chip lowering for op '" + n.op + "' (" + n.name +
                                  "): the step compiler lowers Conv2D -> MaxPool2D -> Flatten -> "
                                  "Dense(softmax)");
    n.phase = r->phase;
    n.units = r->units;
    if (n.op == "matmul")
      n.phase = n.name == "z2" ? "dense_fwd" : n.name == "df" ? "dense_dx" : "dense_dw";
    if (n.op == "adam") n.phase = (n.name[1] == 'd') ? "dense_dw" : "conv_dw";
    if (n.op == "matmul_ones") n.phase = n.name == "dbd" ? "dense_dw" : "conv_dw";
    if (n.op == "transpose") n.phase = n.name == "fT" ? "dense_dw" : "dense_dx";
    if (n.op == "cast_bf16") {
      const std::string& from = g.at(n.inputs[0]).op;
      n.phase = from == "input"                     ? "host"
                : from == "param"                   ? "dense_dw | conv_dw"
                : from == "flatten"                 ? "conv_fwd"
                : from == "fused.bias_softmax_xent" ? "dense_fwd"
                                                    : "conv_dw";
      n.units = from == "input" ? "p / 255 rounded when a batch is staged"
                : from == "param"
                    ? "Adam writes the bf16 copy beside the fp32 weights (VPU.ST bf16)"
                    : "VPU.ST bf16 in the producing epilogue";
    }
  }
}

Graph compile_graph(const CnnSpec& spec, uint32_t batch,
                    std::vector<std::pair<std::string, std::string>>* dumps) {
  Graph g = build_forward(spec, batch);
  if (dumps) dumps->push_back({"build", g.dump()});
  autodiff(g);
  if (dumps) dumps->push_back({"autodiff", g.dump()});
  insert_casts(g);
  if (dumps) dumps->push_back({"numerics (bf16 casts)", g.dump()});
  fuse(g);
  if (dumps) dumps->push_back({"fuse", g.dump()});
  lower(g);
  if (dumps) dumps->push_back({"lower", g.dump()});
  return g;
}

}  // namespace tessera::compiler
