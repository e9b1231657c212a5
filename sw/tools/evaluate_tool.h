// The weight export and tessera evaluate (sw/tools/evaluate_tool.cc; docs/training.md).
#pragma once

#include <ostream>
#include <string>

#include "sw/tools/train_tool.h"
#include "tessera/dense_step.h"
#include "tessera/model_file.h"

namespace tessera::tools {

// The weight export (docs/training.md, "Weight export"): DIR/manifest.json (format
// "tessera-dense-weights-1", the layers with units, activation and their tensors' files and
// shapes) and one raw little-endian fp32 file per tensor, kernels [inputs][units] (Keras's
// layout; PyTorch's Linear.weight is its transpose).
void export_dense_weights(const std::string& dir, const std::string& model_name,
                          const compiler::DenseStackSpec& spec, const compiler::DenseParams& p);

// tessera evaluate: a general-compiler model's exported weights (a run's weights/ folder, or
// any folder in the export format) on the chip: the test set's loss and accuracy, and with
// `probs` the softmax of every evaluated image ([images][classes] raw little-endian fp32).
struct EvaluateOptions {
  std::string model;    // the model description file the weights were trained from
  std::string weights;  // the export folder (manifest.json and the tensor files)
  std::string backend = "functional";  // rtl | functional (the same bits)
  std::string arith = "rtl";
  int array = 16, channels = 1;
  uint32_t batch = 128;
  uint64_t eval_samples = 0;  // 0: the whole test set
  std::string data;           // default: Debian's dataset-fashion-mnist
  std::string probs;          // optional output file
};
// Exit status 0; 2 for bad input (the model, the weights folder or a tensor file not matching
// the model, the dataset), naming the file; 1 for a chip fault.
int evaluate_dense(const EvaluateOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace tessera::tools
