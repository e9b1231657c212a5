# The TPU + TensorFlow article's program (../shared/seed-program.py in the project's brief),
# as written, with `import tensorflow as tf` replaced by `import tessera as tf`: the example
# CNN trained for one epoch on the simulated chips, then evaluated.
#
#   make python                                   # once: builds the extension, sets the path
#   /usr/bin/python3 examples/seed_tpu_example.py
#
# TPUClusterResolver(tpu='') takes the system from TESSERA_TPU, by default the one `make train`
# uses (two N = 16 rtl chips, host-arithmetic build: ~20 minutes for the epoch). Faster:
#   TESSERA_TPU=backend=functional,chips=2 /usr/bin/python3 examples/seed_tpu_example.py
# TESSERA_STEPS=N stops the epoch after N steps (the tests run it so); TESSERA_LOGS=DIR puts the
# TensorBoard logs and checkpoints there (default runs/seed_tpu_example).
import os

import tessera as tf

(x_train, y_train), (x_test, y_test) = tf.keras.datasets.fashion_mnist.load_data()
STEPS = int(os.environ["TESSERA_STEPS"]) if os.environ.get("TESSERA_STEPS") else None
LOGS = os.environ.get("TESSERA_LOGS", "runs/seed_tpu_example")

# Discover and connect to the TPU
resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='')
tf.config.experimental_connect_to_cluster(resolver)
tf.tpu.experimental.initialize_tpu_system(resolver)

# Enable the TPU strategy
strategy = tf.distribute.TPUStrategy(resolver)

# bfloat16 mixed precision (the chip's arithmetic: bf16 operands, fp32 sums and weights)
tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')

with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, 3, activation='relu'),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(10, activation='softmax')
    ])
    model.compile(
        optimizer='adam',
        loss='sparse_categorical_crossentropy',
        metrics=['accuracy']
    )

def get_dataset():
    dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    dataset = dataset.shuffle(60000, seed=1)           # shuffled reads
    batch_size = 128 * strategy.num_replicas_in_sync  # adapts to the number of replicas
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.cache()                          # caching
    dataset = dataset.prefetch(tf.data.AUTOTUNE)      # asynchronous prefetch
    return dataset

callbacks = [
    tf.keras.callbacks.TensorBoard(log_dir=LOGS + '/tensorboard', histogram_freq=1),
    tf.keras.callbacks.ModelCheckpoint(LOGS + '/checkpoints/epoch{epoch:02d}.tsr'),
]
history = model.fit(get_dataset(), epochs=1, steps_per_epoch=STEPS, callbacks=callbacks)
model.summary()
test_loss, test_accuracy = model.evaluate(x_test, y_test, batch_size=1000, verbose=0)
print(f"test accuracy {test_accuracy:.4f}, loss {test_loss:.4f}")
