// keras::Sequential and what it takes (tessera/keras.h) for python/tessera/keras: the layers,
// the optimizer, the device; one training step, one evaluation batch, the weights as numpy
// arrays in Keras's shapes. The Python side owns the loop (fit's data, callbacks, Ctrl-C).
#include <pybind11/stl.h>

#include <chrono>

#include "sw/python/bindings.h"
#include "tessera/isa_gen.h"
#include "tessera/keras.h"

namespace tessera::python {
namespace {

using keras::Layer;
using keras::Sequential;

Layer::Kind parse_kind(const std::string& k) {
  for (auto kind : {Layer::Kind::kConv2D, Layer::Kind::kMaxPool2D, Layer::Kind::kAveragePool2D,
                    Layer::Kind::kFlatten, Layer::Kind::kDense, Layer::Kind::kDropout,
                    Layer::Kind::kNormalization})
    if (k == keras::kind_name(kind)) return kind;
  throw std::invalid_argument("unknown layer kind '" + k + "'");
}

// A step's logs as a dict: loss, accuracy, step, cycles, the PERF counters by name, wall time.
py::dict logs_dict(const keras::StepLogs& l) {
  py::dict d;
  d["loss"] = l.loss;
  d["accuracy"] = l.accuracy;
  d["step"] = l.step;
  d["cycles"] = l.report.cycles;
  d["macs"] = l.report.perf[isa::PERF_MACS];
  d["dma_busy"] = l.report.perf[isa::PERF_DMA_BUSY];
  d["mxu_busy"] = l.report.perf[isa::PERF_MXU_BUSY];
  d["vpu_busy"] = l.report.perf[isa::PERF_VPU_BUSY];
  d["hbm_read_bytes"] = l.report.perf[isa::PERF_HBM_RD];
  d["hbm_write_bytes"] = l.report.perf[isa::PERF_HBM_WR];
  d["wall_seconds"] = l.wall_seconds;
  return d;
}

// The staged images of a batch: uint8 pixels (p / 255, then the model's Normalization) or
// float32 values (as given, then the Normalization), as bf16 bits.
std::vector<uint16_t> stage(const Sequential& model, const py::array& images, size_t count) {
  const size_t values = model.input_values();
  if (static_cast<size_t>(images.size()) != count * values)
    throw std::invalid_argument("the batch holds " + std::to_string(images.size()) +
                                " input values, the model takes " + std::to_string(values) +
                                " per image (" + std::to_string(count) + " images)");
  const compiler::DenseStackSpec& spec = model.spec();
  if (images.dtype().is(py::dtype::of<uint8_t>())) {
    const auto px = Array<uint8_t>::ensure(images);
    data::Batch b;
    b.images.assign(px.data(), px.data() + px.size());
    return keras::model_images(spec, b);
  }
  const auto v = Array<float>::ensure(images);
  if (!v) throw std::invalid_argument("images must be uint8 pixels or float32 values");
  return spec.norm.on ? data::values_to_bf16(v.data(), v.size(), spec.norm.mean, spec.norm.variance)
                      : data::values_to_bf16(v.data(), v.size());
}

std::vector<uint8_t> labels_of(const Array<int64_t>& y) {
  std::vector<uint8_t> out(static_cast<size_t>(y.size()));
  for (py::ssize_t i = 0; i < y.size(); ++i) {
    const int64_t l = y.data()[i];
    if (l < 0 || l > 255)
      throw std::invalid_argument("label " + std::to_string(l) + " at index " + std::to_string(i) +
                                  ": labels are class indices 0..255");
    out[static_cast<size_t>(i)] = static_cast<uint8_t>(l);
  }
  return out;
}

// Keras's shapes of the weights: Dense kernel (K, U), Conv2D kernel (kh, kw, in, filters).
std::vector<std::vector<py::ssize_t>> kernel_shapes(const Sequential& m) {
  const compiler::DenseStackSpec& spec = m.spec();
  const auto shapes = compiler::weight_shapes(spec);
  std::vector<std::vector<py::ssize_t>> out;
  size_t conv = 0;
  for (const auto& [k, u] : shapes) {
    while (conv < spec.features.size() &&
           spec.features[conv].kind != compiler::FeatureLayerSpec::Kind::kConv)
      ++conv;
    if (conv < spec.features.size()) {
      const auto kk = static_cast<py::ssize_t>(spec.features[conv].kernel);
      out.push_back({kk, kk, static_cast<py::ssize_t>(k) / (kk * kk), static_cast<py::ssize_t>(u)});
      ++conv;
    } else {
      out.push_back({static_cast<py::ssize_t>(k), static_cast<py::ssize_t>(u)});
    }
  }
  return out;
}

// [kernel0, bias0, kernel1, ...] in Keras's shapes.
py::list keras_list(const Sequential& s, compiler::DenseParams&& p) {
  py::list out;
  const auto shapes = kernel_shapes(s);
  for (size_t j = 0; j < p.kernel.size(); ++j) {
    out.append(to_array(std::move(p.kernel[j]), shapes[j]));
    out.append(to_array(std::move(p.bias[j])));
  }
  return out;
}

py::list flat(compiler::DenseParams&& p) {
  py::list out;
  for (size_t j = 0; j < p.kernel.size(); ++j) {
    out.append(to_array(std::move(p.kernel[j])));
    out.append(to_array(std::move(p.bias[j])));
  }
  return out;
}

compiler::DenseParams unflat(const py::list& l) {
  compiler::DenseParams p;
  for (size_t i = 0; i < l.size(); ++i)
    (i % 2 ? p.bias : p.kernel).push_back(to_vector(py::cast<Array<float>>(l[i])));
  return p;
}

}  // namespace

void bind_keras(py::module_& m) {
  py::class_<Layer>(m, "Layer")
      .def(py::init([](const std::string& kind) {
             Layer l{};
             l.kind = parse_kind(kind);
             return l;
           }),
           py::arg("kind"))
      .def_property_readonly("kind", [](const Layer& l) { return keras::kind_name(l.kind); })
      .def_readwrite("units", &Layer::units)
      .def_readwrite("size", &Layer::size)
      .def_readwrite("strides", &Layer::strides)
      .def_readwrite("activation", &Layer::activation)
      .def_readwrite("padding", &Layer::padding)
      .def_readwrite("rate", &Layer::rate)
      .def_readwrite("seed", &Layer::seed)
      .def_readwrite("mean", &Layer::mean)
      .def_readwrite("variance", &Layer::variance)
      .def_readwrite("input_shape", &Layer::input_shape);
  // The layer list as the compiler takes it, or ValueError naming the layer and argument.
  m.def("check_layers", [](const std::vector<Layer>& layers) { keras::dense_stack_spec(layers); });

  py::class_<compiler::OptimizerSpec>(m, "OptimizerSpec")
      .def(py::init<>())
      .def_property(
          "kind",
          [](const compiler::OptimizerSpec& o) {
            return o.kind == compiler::OptimizerSpec::Kind::kAdam ? "adam" : "sgd";
          },
          [](compiler::OptimizerSpec& o, const std::string& k) {
            if (k != "adam" && k != "sgd") throw std::invalid_argument("optimizer '" + k + "'");
            o.kind = k == "adam" ? compiler::OptimizerSpec::Kind::kAdam
                                 : compiler::OptimizerSpec::Kind::kSgd;
          })
      .def_property(
          "schedule",
          [](const compiler::OptimizerSpec& o) { return compiler::schedule_name(o.schedule); },
          [](compiler::OptimizerSpec& o, const std::string& s) {
            o.schedule = compiler::parse_schedule(s);
          })
      .def_readwrite("learning_rate", &compiler::OptimizerSpec::lr)
      .def_readwrite("beta_1", &compiler::OptimizerSpec::beta1)
      .def_readwrite("beta_2", &compiler::OptimizerSpec::beta2)
      .def_readwrite("epsilon", &compiler::OptimizerSpec::epsilon)
      .def_readwrite("momentum", &compiler::OptimizerSpec::momentum)
      .def_readwrite("decay_steps", &compiler::OptimizerSpec::decay_steps)
      .def_readwrite("label_smoothing", &compiler::OptimizerSpec::label_smoothing)
      .def("lr_at", &compiler::OptimizerSpec::lr_at);

  py::class_<keras::DeviceOptions>(m, "DeviceOptions")
      .def(py::init<>())
      .def_property(
          "backend", [](const keras::DeviceOptions& d) { return driver::backend_name(d.backend); },
          [](keras::DeviceOptions& d, const std::string& b) { d.backend = driver::parse_backend(b); })
      .def_property(
          "arith", [](const keras::DeviceOptions& d) { return driver::arith_name(d.arith); },
          [](keras::DeviceOptions& d, const std::string& a) { d.arith = driver::parse_arith(a); })
      .def_readwrite("array", &keras::DeviceOptions::array)
      .def_readwrite("channels", &keras::DeviceOptions::channels)
      .def_readwrite("timeout_cycles", &keras::DeviceOptions::timeout_cycles)
      .def_readwrite("keep_gradients", &keras::DeviceOptions::keep_gradients);

  py::class_<Sequential>(m, "Sequential")
      .def(py::init([](std::vector<Layer> layers, int replicas, int threads) {
             return std::make_unique<Sequential>(std::move(layers),
                                                 keras::TPUStrategy(replicas, threads));
           }),
           py::arg("layers"), py::arg("replicas") = 1, py::arg("threads") = 0)
      .def(
          "compile",
          [](Sequential& s, const compiler::OptimizerSpec& opt, const keras::DeviceOptions& dev,
             uint32_t batch, uint64_t seed) {
            py::gil_scoped_release release;
            s.compile(opt, "sparse_categorical_crossentropy", {"accuracy"}, dev, batch, seed);
          },
          py::arg("optimizer"), py::arg("device"), py::arg("batch_size"), py::arg("seed"))
      // One training step on a global batch: images uint8 pixels or float32 values, batch x
      // the model's input values; labels class indices. Returns the step's logs.
      .def("train_on_batch",
           [](Sequential& s, const py::array& images, const Array<int64_t>& labels, uint64_t epoch,
              uint64_t index) {
             const std::vector<uint8_t> y = labels_of(labels);
             const std::vector<uint16_t> x = stage(s, images, y.size());
             keras::StepLogs logs;
             {
               py::gil_scoped_release release;
               const auto t0 = std::chrono::steady_clock::now();
               logs = s.train_on_images(x, y, epoch, index);
               logs.wall_seconds =
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
             }
             return logs_dict(logs);
           },
           py::arg("images"), py::arg("labels"), py::arg("epoch") = 0, py::arg("index") = 0)
      // One evaluation batch (any size): (mean loss, accuracy).
      .def("evaluate_batch",
           [](Sequential& s, const py::array& images, const Array<int64_t>& labels) {
             const std::vector<uint8_t> y = labels_of(labels);
             const std::vector<uint16_t> x = stage(s, images, y.size());
             py::gil_scoped_release release;
             const keras::EvalResult r = s.evaluate_images(x, y);
             return std::make_pair(r.loss, r.accuracy);
           })
      // The softmax outputs of a batch: (count, classes) float32.
      .def("predict_batch",
           [](Sequential& s, const py::array& images, uint32_t count) {
             const std::vector<uint16_t> x = stage(s, images, count);
             std::vector<float> p;
             {
               py::gil_scoped_release release;
               p = s.predict_images(x, count);
             }
             const auto classes = static_cast<py::ssize_t>(s.spec().classes());
             return to_array(std::move(p), {static_cast<py::ssize_t>(count), classes});
           })
      .def("get_weights",
           [](Sequential& s) {
             compiler::DenseParams p;
             {
               py::gil_scoped_release release;
               p = s.get_weights();
             }
             return keras_list(s, std::move(p));
           })
      // Keras's list [kernel0, bias0, kernel1, ...]; the optimizer state stays.
      .def("set_weights",
           [](Sequential& s, const py::list& weights) {
             const auto shapes = compiler::weight_shapes(s.spec());
             if (weights.size() != 2 * shapes.size())
               throw std::invalid_argument("set_weights: " + std::to_string(weights.size()) +
                                           " arrays, the model has " +
                                           std::to_string(2 * shapes.size()) +
                                           " (a kernel and a bias per layer with weights)");
             compiler::DenseParams p;
             const auto kshape = kernel_shapes(s);
             for (size_t j = 0; j < shapes.size(); ++j) {
               for (int b = 0; b < 2; ++b) {
                 const auto a = py::cast<Array<float>>(weights[2 * j + b]);
                 std::vector<py::ssize_t> want =
                     b ? std::vector<py::ssize_t>{static_cast<py::ssize_t>(shapes[j].second)}
                       : kshape[j];
                 std::vector<py::ssize_t> got(a.shape(), a.shape() + a.ndim());
                 if (got != want) {
                   auto str = [](const std::vector<py::ssize_t>& v) {
                     std::string o = "(";
                     for (size_t i = 0; i < v.size(); ++i)
                       o += (i ? ", " : "") + std::to_string(v[i]);
                     return o + (v.size() == 1 ? ",)" : ")");
                   };
                   throw std::invalid_argument("set_weights: array " + std::to_string(2 * j + b) +
                                               " has shape " + str(got) + ", the model's " +
                                               (b ? "bias" : "kernel") + " " + str(want));
                 }
                 (b ? p.bias : p.kernel).push_back(to_vector(a));
               }
             }
             py::gil_scoped_release release;
             compiler::DenseParams old;
             compiler::DenseOptState st;
             s.get_state(old, st);
             s.set_state(p, st);
           })
      // The whole training state (weights, optimizer slots, step count) as flat float32 arrays
      // in the compiler's order, for moving a model to another compiled batch or chip.
      .def("get_state",
           [](Sequential& s) {
             compiler::DenseParams p;
             compiler::DenseOptState st;
             {
               py::gil_scoped_release release;
               s.get_state(p, st);
             }
             py::dict d;
             d["weights"] = flat(std::move(p));
             d["m"] = flat(std::move(st.m));
             d["v"] = flat(std::move(st.v));
             d["beta1_power"] = st.beta1_power;
             d["beta2_power"] = st.beta2_power;
             d["steps"] = st.steps;
             return d;
           })
      .def("set_state",
           [](Sequential& s, const py::dict& d) {
             compiler::DenseParams p = unflat(d["weights"]);
             compiler::DenseOptState st;
             st.m = unflat(d["m"]);
             st.v = unflat(d["v"]);
             st.beta1_power = py::cast<float>(d["beta1_power"]);
             st.beta2_power = py::cast<float>(d["beta2_power"]);
             st.steps = py::cast<uint32_t>(d["steps"]);
             const compiler::DenseOptState zero = compiler::zero_opt_state(s.spec());
             for (const auto* t : {&p, &st.m, &st.v})
               for (size_t j = 0; j < zero.m.kernel.size(); ++j)
                 if (t->kernel.size() != zero.m.kernel.size() ||
                     t->kernel[j].size() != zero.m.kernel[j].size() ||
                     t->bias[j].size() != zero.m.bias[j].size())
                   throw std::invalid_argument("set_state: the state is of another model");
             py::gil_scoped_release release;
             s.set_state(p, st);
           })
      // The last step's global gradient, as get_weights (compiled with keep_gradients, or on
      // more than one chip).
      .def("get_gradients",
           [](Sequential& s) {
             compiler::DenseParams g;
             {
               py::gil_scoped_release release;
               g = s.get_gradients();
             }
             return keras_list(s, std::move(g));
           })
      // The compiled training graph as a TensorFlow GraphDef (bytes).
      .def("graph_def", [](const Sequential& s) { return py::bytes(s.graph_def()); })
      .def("save_weights", &Sequential::save_weights, py::call_guard<py::gil_scoped_release>())
      .def("load_weights", &Sequential::load_weights, py::call_guard<py::gil_scoped_release>())
      .def("summary", &Sequential::summary)
      .def("signature", &Sequential::signature)
      .def_property("step", &Sequential::step, &Sequential::set_step)
      .def_property_readonly("replicas", &Sequential::replicas)
      .def_property_readonly("batch_size", &Sequential::batch_size)
      .def_property_readonly("input_values", &Sequential::input_values)
      .def_property_readonly("classes", [](const Sequential& s) { return s.spec().classes(); })
      .def_property_readonly("array", [](Sequential& s) { return s.device().config().n; })
      // The compiled training step: instructions, the analytic bounds, per-phase statistics.
      .def("program_stats", [](const Sequential& s) {
        const compiler::DenseStackStep& st = s.train_step();
        py::dict d;
        d["instructions"] = st.stats().instructions;
        d["executed"] = st.stats().executed;
        d["macs"] = st.stats().macs;
        d["hbm_bytes"] = st.stats().hbm_bytes;
        d["mxu_bound_cycles"] = st.mxu_bound_cycles();
        d["vpu_bound_cycles"] = st.vpu_bound_cycles();
        d["dma_bound_cycles"] = st.dma_bound_cycles();
        d["hbm_bound_cycles"] = st.hbm_bound_cycles();
        d["ici_bound_cycles"] = st.ici_bound_cycles();
        d["seq_bound_cycles"] = st.seq_bound_cycles();
        d["bound_cycles"] = st.bound_cycles();
        py::list phases;
        for (const auto& p : st.stats().phases) {
          py::dict ph;
          ph["name"] = p.name;
          ph["instructions"] = p.instructions;
          const compiler::Roofline rf = compiler::roofline(p, st.chip().channels);
          ph["mxu_bound"] = rf.mxu;
          ph["vpu"] = rf.vpu;
          ph["dma_bound"] = rf.dma;
          ph["hbm_bound"] = rf.hbm;
          ph["ici_bound"] = rf.ici;
          ph["seq_bound"] = rf.seq;
          ph["roofline"] = rf.bound();
          ph["binds"] = rf.unit();
          ph["hbm_bytes"] = p.hbm_bytes;
          ph["macs"] = p.macs;
          phases.append(ph);
        }
        d["phases"] = phases;
        return d;
      });
}

}  // namespace tessera::python
