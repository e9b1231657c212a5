// Sequential's views of the compiled step for a TensorBoard callback (tessera/keras.h): the
// training step's graph as a GraphDef, and the last step's gradients from the gradient vector.
#include <cstring>
#include <stdexcept>

#include "sw/compiler/graph_def.h"
#include "tessera/keras.h"

namespace tessera::keras {
namespace {

std::vector<uint8_t> device_read(void* ctx, uint64_t addr, size_t bytes) {
  return static_cast<driver::Device*>(ctx)->read(addr, bytes);
}

// A replica's gradients as one byte record (every tensor's fp32 values in a fixed order), and
// back into `into`, whose tensors have the sizes to fill.
std::vector<uint8_t> to_record(const compiler::DenseParams& g) {
  std::vector<uint8_t> rec;
  for (size_t j = 0; j < g.kernel.size(); ++j)
    for (const std::vector<float>* v : {&g.kernel[j], &g.bias[j]}) {
      const auto* b = reinterpret_cast<const uint8_t*>(v->data());
      rec.insert(rec.end(), b, b + v->size() * 4);
    }
  return rec;
}

void from_record(const std::vector<uint8_t>& rec, compiler::DenseParams& into) {
  size_t at = 0;
  for (size_t j = 0; j < into.kernel.size(); ++j)
    for (std::vector<float>* v : {&into.kernel[j], &into.bias[j]}) {
      if (at + v->size() * 4 > rec.size()) throw std::logic_error("get_gradients: short record");
      std::memcpy(v->data(), rec.data() + at, v->size() * 4);
      at += v->size() * 4;
    }
  if (at != rec.size()) throw std::logic_error("get_gradients: record size");
}

}  // namespace

compiler::DenseParams Sequential::get_gradients() {
  check_compiled("get_gradients");
  if (!train_->replication().split())
    throw std::logic_error(
        "get_gradients: the one-chip step updates the weights from the gradients in the "
        "accumulators and keeps none; compile with DeviceOptions::keep_gradients = true");
  if (!cluster_) return train_->read_gradients(device_read, dev_);
  // Chip r holds the all-reduced sum of gradient-vector chunk (r + 1) mod P only: each process
  // reads its chips' vectors, gather() brings every chip's to every process, and the step takes
  // each element from the chip that summed it.
  const int P = replicas();
  std::vector<std::vector<uint8_t>> mine(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r)
    if (cluster_->local(r))
      mine[static_cast<size_t>(r)] = to_record(
          steps_[static_cast<size_t>(r)]->read_gradients(device_read, &cluster_->chip(r)));
  const std::vector<std::vector<uint8_t>> all = cluster_->gather(std::move(mine));
  std::vector<compiler::DenseParams> gs(static_cast<size_t>(P),
                                        compiler::zero_opt_state(spec_).m);  // the tensors' sizes
  for (size_t r = 0; r < gs.size(); ++r) from_record(all.at(r), gs[r]);
  return train_->merge_replica_gradients(gs);
}

std::string Sequential::graph_def() const {
  check_compiled("graph_def");
  return compiler::graph_def_bytes(train_->graph());
}

}  // namespace tessera::keras
