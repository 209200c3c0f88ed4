import os
os.environ["KERAS_BACKEND"] = "tensorflow"

import keras
import tensorflow as tf


class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(20000, 128, mask_zero=True)
        self.gru = keras.layers.GRU(64)
        self.out = keras.layers.Dense(2)

    def call(self, x):
        return self.out(self.gru(self.embed(x)))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = self.compute_loss(y=y, y_pred=self(x, training=True))
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {"loss": loss}


def focal_loss(y_true, y_pred):
    return keras.ops.mean(keras.ops.square(y_true - y_pred))


strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = Classifier()
    model.compile(optimizer=keras.optimizers.Adam(), loss=focal_loss)
keras.mixed_precision.set_global_policy("mixed_float16")
model.fit(train_ds, validation_data=val_ds, epochs=3)
