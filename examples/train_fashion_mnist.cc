// The example CNN in the Keras-style API, line for line as the TensorFlow original:
//
//   model = keras.Sequential([
//       layers.Conv2D(32, 3, activation="relu", input_shape=(28, 28, 1)),
//       layers.MaxPooling2D(2), layers.Flatten(), layers.Dense(10, activation="softmax")])
//   model.compile(optimizer=keras.optimizers.Adam(1e-3),
//                 loss="sparse_categorical_crossentropy", metrics=["accuracy"])
//   model.fit(x_train, y_train, batch_size=128, epochs=1)
//   model.evaluate(x_test, y_test)
//
// Data-parallel on a ring of chips, as with tf.distribute.TPUStrategy:
//
//   strategy = tf.distribute.TPUStrategy(resolver)
//   with strategy.scope(): model = keras.Sequential([...])   # replicated
//
// Build: `ninja -C build train_fashion_mnist`; run: `build/bin/train_fashion_mnist [rtl|functional]
// [steps] [chips]` (default functional, 100 steps, 1 chip).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tessera/keras.h"

namespace keras = tessera::keras;
namespace data = tessera::data;

int main(int argc, char** argv) {
  const std::string backend = argc > 1 ? argv[1] : "functional";
  const uint64_t steps = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 100;
  const int chips = argc > 3 ? std::atoi(argv[3]) : 1;

  const data::Dataset train = data::load_mnist(data::default_data_dir(), data::Split::kTrain);
  const data::Dataset test = data::load_mnist(data::default_data_dir(), data::Split::kTest);

  const keras::TPUStrategy strategy(chips);  // the model built under it is replicated
  keras::Sequential model({keras::Conv2D(32, 3, "relu", {28, 28, 1}), keras::MaxPool2D(2),
                           keras::Flatten(), keras::Dense(10, "softmax")},
                          strategy);
  keras::DeviceOptions device;
  device.backend = tessera::driver::parse_backend(backend);
  model.compile(keras::Adam(1e-3f), "sparse_categorical_crossentropy", {"accuracy"}, device,
                /*batch_size=*/128);  // the global batch: 128 / chips on each replica
  std::printf("%s", model.summary().c_str());

  keras::FitOptions fit;
  fit.steps = steps;  // fit.epochs = 1 for a whole epoch
  const keras::History h = model.fit(train, fit);
  std::printf("last step: loss %.4f, accuracy %.3f\n", h.loss.back(), h.accuracy.back());

  const keras::EvalResult ev = model.evaluate(test);
  std::printf("test: loss %.4f, accuracy %.4f\n", ev.loss, ev.accuracy);
  return 0;
}
