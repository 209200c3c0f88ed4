"""The input-bound probe, for smoke_worker.py: after the training, how many samples per second the
input pipeline delivers alone, and how many the same step on these devices consumes fed from
memory; measured in two rounds (pipeline, step, pipeline, step) so that the parent can tell a
shortfall from the machine's noise (mgpu_doctor/smoke/input_bound.py).

The pipeline is measured as it was given, bounded by time, never cut to a number of samples: a
`shuffle(1024)` cut to 264 samples and repeated would refill its buffer every few batches, which
the user's training never does. A finite dataset is iterated as is and, only when it ends before
the time is up, measured on as ``dataset.repeat()`` (``dataset_batches`` then says its length, and
the parent says so). Python 3.6+, standard library and TensorFlow (passed in).
"""

import time

import _mgpu_child

ROUNDS = 2
ROUND_S = 0.5  # each measurement, after its first batch (or step)
MIN_BATCHES = 4  # ... and at least this many batches (steps) after the first
MAX_ROUND_S = 10.0  # a pipeline slower than MIN_BATCHES in this long: what it delivered by then
MAX_STEPS = 256  # the step's rounds, where stop_training is not honoured (TensorFlow 1.x)


def leading_size(tf, element):
    """The samples in one element: the leading dimension of its first tensor."""
    first = tf.nest.flatten(element)[0]
    shape = getattr(first, "shape", ())
    return int(shape[0]) if len(shape) else 1


class Batches(object):
    """A dataset's batches, each as its number of samples: one pass over the dataset as it is, then
    (where it ended) over ``dataset.repeat()``; iterated eagerly, or by initialisable iterators in
    TensorFlow 1's graph mode (one set of ops for all rounds)."""

    def __init__(self, api, dataset):
        self.api, self.dataset = api, dataset
        if not api.eager:
            self.session = api.keras.backend.get_session()
            self.graph = dict((name, self._graph_iterator(d)) for name, d in
                              (("once", dataset), ("repeated", dataset.repeat())))

    def _graph_iterator(self, dataset):
        tf = self.api.tf
        iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
        return iterator.initializer, tf.shape(tf.nest.flatten(iterator.get_next())[0])[0]

    def sizes(self, repeated):
        tf = self.api.tf
        if self.api.eager:
            for element in (self.dataset.repeat() if repeated else self.dataset):
                yield leading_size(tf, element)
            return
        initializer, size = self.graph["repeated" if repeated else "once"]
        self.session.run(initializer)
        while True:
            try:
                yield int(self.session.run(size))
            except tf.errors.OutOfRangeError:
                return


def pipeline_round(batches):
    """One measurement of the pipeline alone: {samples, seconds, batches, dataset_batches}, or None
    when it delivered nothing after its first batch. The first batch is left out (it starts the
    iterator and fills the shuffle buffer). A dataset that ends before ROUND_S is measured on
    repeated (``dataset_batches``: its length; None when it did not end), the clock stopped while
    the repeated iterator starts."""
    samples = count = 0
    measured = 0.0  # seconds measured before the current stretch
    length = None
    for repeated in (False, True):
        start = None
        seen = 0
        for size in batches.sizes(repeated):
            now = time.perf_counter()
            seen += 1
            if start is None:  # the first batch starts the iterator (and fills buffers): left out
                start = now
                continue
            samples, count = samples + size, count + 1
            elapsed = measured + now - start
            if (elapsed >= ROUND_S and count >= MIN_BATCHES) or elapsed >= MAX_ROUND_S:
                return {"samples": samples, "seconds": round(elapsed, 6), "batches": count,
                        "dataset_batches": length}
        if start is None:
            break  # empty
        measured += time.perf_counter() - start
        if length is None:
            length = seen
    if count and measured > 0:
        return {"samples": samples, "seconds": round(measured, 6), "batches": count, "dataset_batches": length}
    return None


def step_round(keras, model, in_memory):
    """One measurement of the step fed from memory: its step times after the first, for ROUND_S
    (at least MIN_BATCHES steps)."""
    times = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self._began = time.perf_counter()
            if batch == 1:
                self._first = self._began

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self._began)
            _mgpu_child.heartbeat("probe step")
            if len(times) > MIN_BATCHES and time.perf_counter() - self._first >= ROUND_S:
                self.model.stop_training = True

    model.fit(in_memory, steps_per_epoch=MAX_STEPS, epochs=1, verbose=0, callbacks=[Timer()])
    return [round(t, 6) for t in times[1:]]  # the first reads the pipeline


def probe_input(api, model, pipeline, dataset, result):
    """The probe's rounds into ``result["input_rounds"]``: the pipeline as given (``pipeline``),
    then the step on one batch of the run's ``dataset`` kept in memory (`take(1).cache()`: the
    pipeline's element type, so the step is not traced again), twice."""
    _mgpu_child.heartbeat("input probe")
    batches = Batches(api, pipeline)
    in_memory = dataset.take(1).cache().repeat()
    rounds = []
    for _ in range(ROUNDS):
        measured = pipeline_round(batches) or {}
        _mgpu_child.heartbeat("input probe")
        measured["step_times_s"] = step_round(api.keras, model, in_memory)
        rounds.append(measured)
    result["input_rounds"] = rounds
