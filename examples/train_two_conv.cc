// A second model in the Keras-style API, data-parallel on two chips: the two-conv network
// (examples/models/two_conv_cnn.json) written in code, built under TPUStrategy(2) — the same
// layer list trains on one chip with TPUStrategy(1), or without a strategy. As in TensorFlow:
//
//   strategy = tf.distribute.TPUStrategy(resolver)          # 2 replicas
//   with strategy.scope():
//       model = keras.Sequential([
//           layers.Conv2D(32, 3, activation="relu", input_shape=(28, 28, 1)),
//           layers.MaxPooling2D(2),
//           layers.Conv2D(64, 3, activation="relu"),
//           layers.MaxPooling2D(2),
//           layers.Flatten(),
//           layers.Dense(128, activation="relu"),
//           layers.Dropout(0.5),
//           layers.Dense(10, activation="softmax")])
//   model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
//                 loss="sparse_categorical_crossentropy", metrics=["accuracy"])
//   model.fit(x_train, y_train, batch_size=128, epochs=1)
//   model.evaluate(x_test, y_test)
//
// Build: `ninja -C build train_two_conv`; run: `build/bin/train_two_conv [rtl|functional]
// [steps] [chips]` (default functional, 20 steps, 2 chips).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tessera/keras.h"

namespace keras = tessera::keras;
namespace data = tessera::data;

int main(int argc, char** argv) {
  const std::string backend = argc > 1 ? argv[1] : "functional";
  const uint64_t steps = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20;
  const int chips = argc > 3 ? std::atoi(argv[3]) : 2;

  const data::Dataset train = data::load_mnist(data::default_data_dir(), data::Split::kTrain);
  data::Dataset test = data::load_mnist(data::default_data_dir(), data::Split::kTest);

  const keras::TPUStrategy strategy(chips);  // the model built under it is replicated
  keras::Sequential model({keras::Conv2D(32, 3, "relu", {28, 28, 1}), keras::MaxPool2D(2),
                           keras::Conv2D(64, 3, "relu"), keras::MaxPool2D(2), keras::Flatten(),
                           keras::Dense(128, "relu"), keras::Dropout(0.5f),
                           keras::Dense(10, "softmax")},
                          strategy);
  keras::DeviceOptions device;
  device.backend = tessera::driver::parse_backend(backend);
  model.compile(keras::SGD(0.05f, 0.9f), "sparse_categorical_crossentropy", {"accuracy"}, device,
                /*batch_size=*/128);  // the global batch: 128 / chips on each replica
  std::printf("%s%d replica(s), %u images each a step\n", model.summary().c_str(),
              model.replicas(), model.train_step().batch());

  keras::FitOptions fit;
  fit.steps = steps;  // fit.epochs = 1 for a whole epoch
  const keras::History h = model.fit(train, fit);
  std::printf("last step: loss %.4f, accuracy %.3f\n", h.loss.back(), h.accuracy.back());

  test.count = 1000;  // the first 1,000 test images (evaluation runs on one chip)
  test.images.resize(size_t{test.count} * test.rows * test.cols);
  test.labels.resize(test.count);
  const keras::EvalResult ev = model.evaluate(test);
  std::printf("test (%llu images): loss %.4f, accuracy %.4f\n",
              static_cast<unsigned long long>(ev.samples), ev.loss, ev.accuracy);
  return 0;
}
