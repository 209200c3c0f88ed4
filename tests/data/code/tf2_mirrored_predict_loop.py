"""TensorFlow 2 with MirroredStrategy, a tf.data pipeline and a predict loop (as users write it)."""
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
print("replicas:", strategy.num_replicas_in_sync)

ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).batch(64)

with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, 3, activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dropout(0.2),
        tf.keras.layers.Dense(10),
    ])
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=True)

model.fit(ds, epochs=5, callbacks=[tf.keras.callbacks.ModelCheckpoint("ckpt/model.keras")])

for image in images:
    scores = model.predict(image[None])
    print(np.argmax(scores))
