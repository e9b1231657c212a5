// The weight export (a run's weights/ folder: every layer's tensors in Keras's layouts with a
// manifest; docs/training.md, "Weight export") and `tessera evaluate`: exported weights checked
// against the model file, then the test set through the evaluation program on the chip, with
// the softmax of every image (tests/reference/dense_export_check.py reproduces them in PyTorch).
#include "sw/tools/evaluate_tool.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "sw/compiler/graph.h"
#include "sw/numerics/fp_ref.h"
#include "sw/runlog/file_util.h"
#include "sw/tools/run_folder.h"
#include "sw/tools/run_options.h"
#include "sw/tools/step_report.h"
#include "tessera/checkpoint.h"
#include "tessera/data.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tessera/isa_gen.h"
#include "tessera/keras.h"
#include "tessera/metrics.h"
#include "tessera/model_file.h"
#include "tessera/plot.h"
#include "tessera/tfevents.h"
#include "tessera/weight_manifest.h"

namespace tessera::tools {
namespace {


std::string g9(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string f32_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t b = fp::bits(v[i]);
    for (int k = 0; k < 4; ++k) s[i * 4 + k] = static_cast<char>(b >> (8 * k));
  }
  return s;
}

// The activation a layer's export, signature and manifest check name: a conv's relu or linear,
// a Dense layer's relu or linear, the last one's softmax.
const char* conv_activation(const compiler::FeatureLayerSpec& f) {
  return f.relu ? "relu" : "linear";
}
const char* dense_activation(const compiler::DenseStackSpec& spec, size_t l) {
  return l + 1 == spec.layers.size() ? "softmax" : spec.layers[l].relu ? "relu" : "linear";
}

// The export's "normalization" line (Keras's Normalization as the model's first layer), or
// nothing.
std::string normalization_json(const compiler::DenseStackSpec& spec) {
  if (!spec.norm.on) return "";
  return "  \"normalization\": {\"mean\": " + g9(spec.norm.mean) +
         ", \"variance\": " + g9(spec.norm.variance) + "},\n";
}


// A compiled step on a device: the program and its HBM.


}  // namespace

// A model with layers before Flatten: format "tessera-sequential-weights-1", every layer in
// order (Conv2D, pools, Flatten, Dense, Dropout) with its arguments and tensors.
void export_sequential_weights(const std::string& dir, const std::string& model_name,
                               const compiler::DenseStackSpec& spec,
                               const compiler::DenseParams& p) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  const auto shapes = compiler::weight_shapes(spec);
  const auto& is = spec.input_shape;
  std::ostringstream m;
  m << "{\n  \"format\": \"tessera-sequential-weights-1\",\n  \"model\": \"" << model_name
    << "\",\n  \"input_shape\": [" << is.h << ", " << is.w << ", " << is.c << "],\n"
    << normalization_json(spec) << "  \"layers\": [\n";
  size_t j = 0;
  auto tensors = [&](const std::string& stem, const std::string& kshape, uint32_t units) {
    const std::string k = stem + "_kernel.f32", b = stem + "_bias.f32";
    runlog::write_file_atomically(dir + "/" + k, f32_bytes(p.kernel[j]));
    runlog::write_file_atomically(dir + "/" + b, f32_bytes(p.bias[j]));
    ++j;
    return ", \"kernel\": {\"file\": \"" + k + "\", \"shape\": [" + kshape +
           "]}, \"bias\": {\"file\": \"" + b + "\", \"shape\": [" + std::to_string(units) + "]}";
  };
  uint32_t c = is.c;
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const auto& f = spec.features[i];
    if (f.kind == Kind::kConv) {
      const std::string ks = std::to_string(f.kernel) + ", " + std::to_string(f.kernel) + ", " +
                             std::to_string(c) + ", " + std::to_string(f.filters);
      m << "    {\"class_name\": \"Conv2D\", \"filters\": " << f.filters
        << ", \"kernel_size\": " << f.kernel << ", \"strides\": " << f.stride << ", \"padding\": \""
        << (f.same ? "same" : "valid") << "\", \"activation\": \"" << conv_activation(f) << "\""
        << tensors("conv" + std::to_string(j), ks, f.filters) << "},\n";
      c = f.filters;
    } else {
      m << "    {\"class_name\": \""
        << (f.kind == Kind::kMaxPool ? "MaxPool2D" : "AveragePooling2D")
        << "\", \"pool_size\": " << f.pool << "},\n";
    }
  }
  m << "    {\"class_name\": \"Flatten\"},\n";
  uint32_t in = spec.inputs;
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& d = spec.layers[l];
    const bool last = l + 1 == spec.layers.size();
    m << "    {\"class_name\": \"Dense\", \"units\": " << d.units << ", \"activation\": \""
      << dense_activation(spec, l) << "\""
      << tensors("dense" + std::to_string(j), std::to_string(in) + ", " + std::to_string(d.units),
                 d.units)
      << "}" << (last && d.dropout == 0 ? "\n" : ",\n");
    if (d.dropout > 0) m << "    {\"class_name\": \"Dropout\", \"rate\": " << d.dropout << "},\n";
    (void)shapes;
    in = d.units;
  }
  m << "  ]\n}\n";
  runlog::write_file_atomically(dir + "/manifest.json", m.str());
}

void export_dense_weights(const std::string& dir, const std::string& model_name,
                          const compiler::DenseStackSpec& spec, const compiler::DenseParams& p) {
  runlog::make_dirs(dir);
  if (!spec.features.empty()) return export_sequential_weights(dir, model_name, spec, p);
  std::ostringstream m;
  m << "{\n  \"format\": \"tessera-dense-weights-1\",\n  \"model\": \"" << model_name
    << "\",\n  \"inputs\": " << spec.inputs << ",\n"
    << normalization_json(spec) << "  \"layers\": [\n";
  uint32_t in = spec.inputs;
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& d = spec.layers[l];
    const std::string k = "dense" + std::to_string(l) + "_kernel.f32",
                      b = "dense" + std::to_string(l) + "_bias.f32";
    runlog::write_file_atomically(dir + "/" + k, f32_bytes(p.kernel[l]));
    runlog::write_file_atomically(dir + "/" + b, f32_bytes(p.bias[l]));
    const bool last = l + 1 == spec.layers.size();
    m << "    {\"class_name\": \"Dense\", \"units\": " << d.units << ", \"activation\": \""
      << dense_activation(spec, l) << "\", \"kernel\": {\"file\": \"" << k << "\", \"shape\": ["
      << in << ", " << d.units << "]}, \"bias\": {\"file\": \"" << b << "\", \"shape\": ["
      << d.units << "]}}" << (last ? "\n" : ",\n");
    in = d.units;
  }
  m << "  ]\n}\n";
  runlog::write_file_atomically(dir + "/manifest.json", m.str());
}

namespace {

// The tensors of an export folder, checked against what the model description gives its
// layers (parse_weight_manifest: classes, activations, exact shapes, the Normalization); every
// error names the file.
compiler::DenseParams load_export(const std::string& dir, const compiler::DenseStackSpec& spec) {
  // what the model says the export holds
  runlog::ExpectedWeights want;
  const auto fshapes = compiler::feature_shapes(spec);
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const auto& f = spec.features[i];
    if (f.kind != compiler::FeatureLayerSpec::Kind::kConv) continue;
    want.layers.push_back(
        {"Conv2D", conv_activation(f), {f.kernel, f.kernel, fshapes[i].c, f.filters}});
  }
  uint32_t in = spec.inputs;
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    want.layers.push_back({"Dense", dense_activation(spec, l), {in, spec.layers[l].units}});
    in = spec.layers[l].units;
  }
  want.normalization = spec.norm.on;
  want.mean = spec.norm.mean;
  want.variance = spec.norm.variance;
  const std::string mpath = dir + "/manifest.json";
  std::ifstream mf(mpath, std::ios::binary);
  if (!mf) throw std::invalid_argument(mpath + ": cannot open (a weights export folder holds it)");
  const std::string text((std::istreambuf_iterator<char>(mf)), std::istreambuf_iterator<char>());
  compiler::DenseParams p;
  auto read = [&](const runlog::ManifestTensor& t) {
    const std::string file = dir + "/" + t.file;
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(file, ec);
    if (ec) throw std::invalid_argument(file + ": cannot open: " + ec.message());
    if (size != t.count() * 4) {
      std::string shape;
      for (uint64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
      throw std::invalid_argument(file + ": " + std::to_string(size) + " bytes, its shape [" +
                                  shape + "] needs " + std::to_string(t.count() * 4));
    }
    const std::string bytes = runlog::read_file(file);
    if (bytes.size() != size) throw std::invalid_argument(file + ": changed while read");
    std::vector<float> v(t.count());
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = fp::f32(static_cast<uint32_t>(runlog::get_le(bytes, i * 4, 4)));
    return v;
  };
  for (const auto& l : runlog::parse_weight_manifest(text, mpath, want)) {
    p.kernel.push_back(read(l.kernel));
    p.bias.push_back(read(l.bias));
  }
  return p;
}

}  // namespace

int evaluate_dense(const EvaluateOptions& opt, std::ostream& out, std::ostream& err) {
  auto refuse = [&](const std::string& why) {
    err << "tessera evaluate: " << why << "\n";
    return 2;
  };
  if (opt.model.empty()) return refuse("--model: the model description file is required");
  if (opt.weights.empty()) return refuse("--weights: the export folder is required");
  compiler::DenseStackSpec spec;
  keras::ModelDescription model;
  compiler::DenseParams p;
  data::Dataset test_ds;
  std::unique_ptr<keras::Sequential> seq;  // the model on the chip, the weights loaded
  try {
    if (opt.array < 4 || (opt.array & (opt.array - 1)) != 0)
      return refuse("--array " + std::to_string(opt.array) +
                    ": the chip's array size N is a power of two from 4");
    model = keras::load_model_description(opt.model);
    spec = keras::dense_stack_spec(model.layers);
    compiler::compile_graph(spec, compiler::OptimizerSpec::Kind::kAdam,
                            driver::chip_for_array(opt.array), opt.batch);  // refuses, naming
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  try {
    p = load_export(opt.weights, spec);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  try {
    const std::string dir = opt.data.empty() ? data::default_data_dir() : opt.data;
    test_ds = data::load_mnist(dir, data::Split::kTest);
    const auto in = model.layers.front().input_shape;
    const std::string bad = image_size_error(dir, "t10k-images-idx3-ubyte", test_ds, in[0], in[1]);
    if (!bad.empty()) return refuse(bad);
    if (in[2] != 1)
      return refuse(opt.model + ": input_shape " + std::to_string(in[0]) + "x" +
                    std::to_string(in[1]) + "x" + std::to_string(in[2]) +
                    ": the dataset's images have one channel");
    const uint32_t total_images =
        opt.eval_samples
            ? static_cast<uint32_t>(std::min<uint64_t>(opt.eval_samples, test_ds.count))
            : test_ds.count;
    for (uint32_t i = 0; i < total_images; ++i)
      if (test_ds.labels[i] >= spec.classes()) {
        return refuse(idx_path(dir, "t10k-labels-idx1-ubyte") + ": label " +
                      std::to_string(test_ds.labels[i]) + " of image " + std::to_string(i) +
                      ": the model has " + std::to_string(spec.classes()) + " classes");
      }
    keras::DeviceOptions d;
    d.backend = driver::parse_backend(opt.backend);
    d.arith = driver::parse_arith(opt.arith);
    d.array = opt.array;
    d.channels = opt.channels;
    seq = std::make_unique<keras::Sequential>(model.layers);
    seq->compile(compiler::OptimizerSpec{}, "sparse_categorical_crossentropy", {"accuracy"}, d,
                 opt.batch);
    seq->set_state(p, compiler::zero_opt_state(spec));
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  const uint32_t total =
      opt.eval_samples ? static_cast<uint32_t>(std::min<uint64_t>(opt.eval_samples, test_ds.count))
                       : test_ds.count;
  test_ds.count = total;
  test_ds.images.resize(size_t{total} * test_ds.rows * test_ds.cols);
  test_ds.labels.resize(total);
  keras::EvalResult ev;
  std::vector<float> probs;
  try {  // the one loop's evaluate and predict (keras::Sequential)
    ev = seq->evaluate(test_ds, opt.batch);
    if (!opt.probs.empty()) probs = seq->predict(test_ds, opt.batch);
  } catch (const std::exception& e) {
    err << "tessera evaluate: evaluation: " << e.what() << "\n";
    return 1;
  }
  if (!opt.probs.empty()) {
    try {
      runlog::write_file_atomically(opt.probs, f32_bytes(probs));
    } catch (const std::exception& e) {
      return refuse(e.what());
    }
  }
  out << "test accuracy " << ev.accuracy << " loss " << ev.loss << " (" << total << " images)\n";
  return 0;
}

}  // namespace tessera::tools
