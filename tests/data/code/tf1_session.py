# TensorFlow 1.x, as written in 2018: a session, towers by hand, Python 2 prints.
import tensorflow as tf
from keras.utils import multi_gpu_model
from keras.layers import Dense, LSTM, BatchNormalization, Input
from keras.models import Model

config = tf.ConfigProto()
config.gpu_options.allow_growth = True
sess = tf.Session(config=config)

inputs = Input(shape=(20, 8))
x = LSTM(64)(inputs)
x = BatchNormalization()(x)
outputs = Dense(1)(x)
model = Model(inputs, outputs)
parallel = multi_gpu_model(model)
parallel.compile(optimizer=tf.train.AdamOptimizer(0.001), loss="mse")

for fold in range(5):
    print "fold", fold
    parallel.fit(x_train, y_train, batch_size=256, epochs=3, validation_split=0.1)
    model.save_weights("fold_%d.h5" % fold)

try:
    sess.close()
except Exception, e:
    print e
