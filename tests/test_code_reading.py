"""`check --code PATH`: the user's training code read with Python's parser, never run; the strategy,
layers and usage words it shows, each with its file and line, decide the known issues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mgpu_doctor.cli import main
from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.training.code_rules import DECIDED, NOT_DECIDED, read_source

CODE = Path(__file__).parent / "data" / "code"

# One line (or a few) as users write them, for every usage word code can show.
USAGE_SNIPPETS: dict[str, str] = {
    "list_local_devices": "from tensorflow.python.client import device_lib\nprint(device_lib.list_local_devices())",
    "custom_training_loop": "with tf.GradientTape() as tape:\n    loss = f(x)\nopt.apply_gradients(zip(g, v))",
    "estimator": "est = tf.estimator.Estimator(model_fn, config=tf.estimator.RunConfig(train_distribute=s))",
    "save_model": "model.save('out/model.keras')",
    "load_weights": "model.load_weights('ckpt')",
    "checkpoint": "ckpt = tf.train.Checkpoint(model=model)",
    "mixed_precision": "tf.keras.mixed_precision.set_global_policy('mixed_float16')",
    "jit_compile": "model.compile('adam', 'mse', jit_compile=True)",
    "private_threadpool": "options.threading.private_threadpool_size = 8",
    "distribute_dataset": "dist = strategy.experimental_distribute_dataset(ds)",
    "python_generator": "class Batches(tf.keras.utils.Sequence):\n    pass",
    "run_eagerly": "model.compile('adam', 'mse', run_eagerly=True)",
    "sparse_input": "x = tf.sparse.SparseTensor(indices, values, shape)",
    "predict_evaluate": "model.evaluate(test_ds)",
    "sample_weight": "model.fit(x, y, class_weight={0: 1.0, 1: 5.0})",
    "memory_growth": "tf.config.experimental.set_memory_growth(gpu, True)",
    "logical_gpus": "tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(1024)])",
    "device_subset": "strategy = tf.distribute.MirroredStrategy(devices=['/gpu:0', '/gpu:1'])",
    "several_models": "a = tf.keras.Sequential([d])\nb = tf.keras.models.load_model('b.keras')",
    "nccl_all_reduce": "s = tf.distribute.MirroredStrategy(cross_device_ops=tf.distribute.NcclAllReduce())",
    "legacy_optimizer": "opt = tf.keras.optimizers.legacy.Adam(1e-3)",
    "tf1_session": "sess = tf.compat.v1.Session()",
    "tensorboard_profiler": "cb = tf.keras.callbacks.TensorBoard(log_dir='logs', profile_batch=(10, 20))",
    "custom_op": "ops = tf.load_op_library('./my_op.so')",
    "custom_metric": "class F1(tf.keras.metrics.Metric):\n    pass",
    "string_input": "inp = tf.keras.Input(shape=(), dtype=tf.string)",
    "fixed_batch_size": "ds = ds.batch(64, drop_remainder=True)",
    "train_on_batch": "for x, y in batches:\n    model.train_on_batch(x, y)",
    "named_outputs": "model.compile('adam', loss={'age': 'mse', 'gender': 'bce'})",
    "gpus_inferred": "parallel = multi_gpu_model(model)",
    "predict_in_loop": "for x in frames:\n    y = model.predict(x)",
    "fit_in_loop": "for fold in folds:\n    model.fit(fold.x, fold.y)",
    "eager_tensors_in_loop": "for i in range(2000):\n    c = tf.constant(5.0)",
    "strings_split_map": "ds = ds.map(lambda line: tf.strings.split(line, ','))",
    "recurrent_dropout": "x = tf.keras.layers.LSTM(64, dropout=0.2, recurrent_dropout=0.2)(x)",
    "metric_average_callback": "callbacks = [hvd.callbacks.MetricAverageCallback()]",
    "batchnorm_renorm": "x = tf.keras.layers.BatchNormalization(renorm=True)(x)",
    "model_reload": "for path in paths:\n    m = tf.keras.models.load_model(path)",
    "dataset_shuffle": "ds = ds.shuffle(10000)",
    "py_function": "ds = ds.map(lambda x: tf.py_function(decode, [x], tf.float32))",
    "eager_random": "for step in range(100):\n    noise = tf.random.normal([64, 100])",
    "summary_writer": "writer = tf.summary.create_file_writer('logs')",
    "multiprocessing_workers": "model.fit(seq, workers=8, use_multiprocessing=True)",
    "input_signature": "@tf.function(input_signature=[tf.TensorSpec([None, 4])])\ndef step(x):\n    return x",
    "validation_data": "model.fit(ds, validation_data=val_ds)",
    "model_garden": "from official.vision import registry_imports",
    "masked_sequences": "x = tf.keras.layers.Masking(mask_value=0.0)(inputs)",
    "alltoall": "out = hvd.alltoall(tensor)",
    "custom_loss": "def my_loss(y, p):\n    return y - p\nmodel.compile('adam', loss=my_loss)",
    "tf32_disabled": "tf.config.experimental.enable_tensor_float_32_execution(False)",
    "fft": "spec = tf.signal.stft(audio, 256, 128)",
    "python_threads": "t = threading.Thread(target=serve)",
    "stateful_rnn": "x = tf.keras.layers.LSTM(32, stateful=True)(x)",
    "precision_recall_metrics": "model.compile('adam', 'bce', metrics=[tf.keras.metrics.Precision()])",
    "resume_training": "model = tf.keras.models.load_model('last.keras')\nmodel.fit(ds, initial_epoch=5)",
    "h5_weights": "model.save_weights('weights.h5')",
    "load_weights_by_name": "model.load_weights('imagenet.h5', by_name=True)",
    "frozen_nested_model": "base = tf.keras.applications.VGG16(include_top=False)\nbase.trainable = False",
    "mask_rcnn_parallel_model": "import mrcnn.model\nclass C(Config):\n    GPU_COUNT = 2",
    "autotune_map_batch_one": "ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(1)",
    "datasets_from_function": "dist = strategy.distribute_datasets_from_function(dataset_fn)",
    "accuracy_string_sparse_loss": "model.compile('adam', loss=tf.keras.losses.SparseCategoricalCrossentropy("
                                   "from_logits=True),\n              metrics=['accuracy'])",
    "model_add_weight": "class Scaled(tf.keras.Model):\n    def build(self, shape):\n"
                        "        self.scale = self.add_weight(shape=(1,), name='scale')",
    "infinite_pydataset": "class Stream(keras.utils.PyDataset):\n    @property\n    def num_batches(self):\n"
                          "        return None",
    "top_k_metric": "model.compile('adam', 'mse', metrics=[keras.metrics.SparseTopKCategoricalAccuracy(k=5)])",
}
# Words code shows when present only (set in the shell as often), shown by a line all the same.
PRESENT_ONLY_SNIPPETS: dict[str, str] = {
    "memory_growth": "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'true'",
    "cuda_malloc_async": "os.environ['TF_GPU_ALLOCATOR'] = 'cuda_malloc_async'",
    "op_determinism": "tf.config.experimental.enable_op_determinism()",
    "cudnn_autotune_off": "os.environ['TF_CUDNN_USE_AUTOTUNE'] = '0'",
    "nccl_algo_nvls": "os.environ['NCCL_ALGO'] = 'NVLS'",
    "jit_compile": "tf.config.optimizer.set_jit(True)",
    "channels_first": "x = tf.keras.layers.Conv2D(32, 3, data_format='channels_first')(x)",
    "dataset_rebuilt": "for fold in folds:\n    ds = tf.data.Dataset.from_generator(make(fold), output_signature=s)",
    "permuted_visible_devices": "os.environ['CUDA_VISIBLE_DEVICES'] = '1,2,3,0'",
    "retracing": "for shape in shapes:\n    f = tf.function(step)",
    "sparse_gradients": "e = tf.keras.layers.Embedding(1000, 64)",
    "nested_model": "base = tf.keras.applications.ResNet50(include_top=False)\ninputs = tf.keras.Input((224, 224, 3))\n"
                    "x = base(inputs, training=False)",
    "fewer_files_than_workers": "s = tf.distribute.MultiWorkerMirroredStrategy()\n"
                                "ds = tf.data.TFRecordDataset('train.tfrecord')",
}


def words(source: str, key: str = "usage") -> set[str]:
    facts, _ = read_source(source, "train.py")
    return {f.word for f in facts if f.key == key}


def test_every_usage_word_is_read_from_code_or_said_to_be_undecidable() -> None:
    readable = set(USAGE_SNIPPETS) | set(PRESENT_ONLY_SNIPPETS)
    assert set(vocab.USAGES) - readable <= NOT_DECIDED, set(vocab.USAGES) - readable - NOT_DECIDED
    assert set(DECIDED) == set(vocab.USAGES) - NOT_DECIDED


@pytest.mark.parametrize("word", sorted(USAGE_SNIPPETS))
def test_a_usage_word_is_read_with_its_line(word: str) -> None:
    source = "import tensorflow as tf\n" + USAGE_SNIPPETS[word]
    facts, whole = read_source(source, "train.py")
    assert whole
    mine = [f for f in facts if f.word == word]
    assert mine, [str(f) for f in facts]
    assert all(f.file == "train.py" and 2 <= f.line <= source.count("\n") + 1 for f in mine)


@pytest.mark.parametrize("word", sorted(PRESENT_ONLY_SNIPPETS))
def test_a_word_set_outside_python_as_often_is_read_where_the_code_sets_it(word: str) -> None:
    assert word in words("import os\nimport tensorflow as tf\n" + PRESENT_ONLY_SNIPPETS[word])
    assert word in NOT_DECIDED  # absent from the code, it stays unknown: the shell may set it


def test_a_loop_holds_only_what_runs_in_it() -> None:
    assert "predict_in_loop" not in words("model.predict(x)\nfor i in range(3):\n    print(i)")
    # a function defined in a loop runs where it is called, not in the loop
    assert "predict_in_loop" not in words("for i in range(3):\n    def f():\n        model.predict(x)")
    assert "eager_random" not in words("@tf.function\ndef step():\n    for i in range(3):\n"
                                       "        tf.random.normal([2])")


# What the narrower words leave out: the same call, argument or class without the trigger.
WITHOUT_THE_TRIGGER: list[tuple[str, str]] = [
    ("datasets_from_function", "dist = strategy.experimental_distribute_dataset(ds)"),
    ("accuracy_string_sparse_loss", "model.compile('adam', 'categorical_crossentropy', metrics=['accuracy'])"),
    ("accuracy_string_sparse_loss", "model.compile('adam', 'sparse_categorical_crossentropy', "
                                    "metrics=['sparse_categorical_accuracy'])"),
    ("model_add_weight", "class Scale(tf.keras.layers.Layer):\n    def build(self, shape):\n"
                         "        self.scale = self.add_weight(shape=(1,), name='scale')"),
    ("infinite_pydataset", "class Batches(keras.utils.PyDataset):\n    def __len__(self):\n        return 10"),
    ("top_k_metric", "model.compile('adam', 'mse', metrics=['accuracy'])"),
    # a model called on data in a loop is inference, not a model nested in another
    ("nested_model", "model = tf.keras.Sequential([tf.keras.layers.Dense(2)])\nfor x in ds:\n"
                     "    y = model(x, training=False)"),
    # keras.Model(...) inside a subclass to print a summary nests nothing
    ("nested_model", "class Net(tf.keras.Model):\n    def graph(self, x):\n"
                     "        return tf.keras.Model(inputs=[x], outputs=self.call(x))"),
    ("fewer_files_than_workers", "s = tf.distribute.MultiWorkerMirroredStrategy()\n"
                                 "ds = tf.data.TFRecordDataset(tf.io.gfile.glob('train-*.tfrecord'))"),
    ("fewer_files_than_workers", "s = tf.distribute.MultiWorkerMirroredStrategy()\n"
                                 "ds = tf.data.TFRecordDataset('train.tfrecord')\noptions = tf.data.Options()\n"
                                 "options.experimental_distribute.auto_shard_policy = AutoShardPolicy.DATA"),
]


@pytest.mark.parametrize(("word", "source"), WITHOUT_THE_TRIGGER)
def test_a_narrow_word_is_not_read_without_its_trigger(word: str, source: str) -> None:
    assert word not in words("import tensorflow as tf\n" + source)


def test_the_narrow_words_are_read_where_the_trigger_is_built_otherwise() -> None:
    # the loss and metrics through names, positionally
    assert "accuracy_string_sparse_loss" in words("loss_fn = 'sparse_categorical_crossentropy'\n"
                                                  "model.compile('adam', loss_fn, ['acc'])")
    # a Model subclass built inside another, and a model in a Sequential list
    assert "nested_model" in words("class Block(tf.keras.Model):\n    pass\n"
                                   "class ResNet(tf.keras.Model):\n    def __init__(self):\n        self.b = Block()")
    assert "nested_model" in words("m = tf.keras.Sequential([tf.keras.applications.MobileNetV2(), Dense(10)])")
    assert "model_add_weight" in words("class Base(tf.keras.Model):\n    pass\nclass Mine(Base):\n"
                                       "    def __init__(self):\n        self.w = self.add_weight(shape=(2,))")
    assert "top_k_metric" in words("model.compile('adam', 'cce', metrics=['sparse_top_k_categorical_accuracy'])")


def test_cudnn_s_own_recurrent_layers_are_cudnn_rnn_and_keras_s_are_their_cell_too() -> None:
    assert words("lstm = tf.contrib.cudnn_rnn.CudnnLSTM(1, 128)", "layers") == {"cudnn_rnn"}
    assert words("x = tf.compat.v1.keras.layers.CuDNNGRU(32)(x)", "layers") == {"gru", "cudnn_rnn"}
    assert words("cell = tf.contrib.rnn.LSTMCell(128)", "layers") == {"lstm"}


@pytest.mark.parametrize(("script", "expected"), [
    ("tf1_session.py", {"strategy": {"multi_gpu_model"}, "layers": {"lstm", "batchnorm", "dense"},
                        "usage": {"tf1_session", "fit_in_loop", "gpus_inferred", "legacy_optimizer",
                                  "h5_weights", "validation_data", "memory_growth"}}),
    ("tf2_mirrored_predict_loop.py", {"strategy": {"mirrored"}, "layers": {"conv2d", "pooling", "dropout", "dense"},
                                      "usage": {"predict_in_loop", "predict_evaluate", "jit_compile",
                                                "checkpoint", "dataset_shuffle", "accuracy_string_sparse_loss"}}),
    ("keras3_custom_train_step.py", {"strategy": {"multi_worker_mirrored"},
                                     "layers": {"embedding", "gru", "dense"},
                                     "usage": {"custom_training_loop", "custom_loss", "mixed_precision",
                                               "masked_sequences", "validation_data", "sparse_gradients"}}),
])
def test_three_training_scripts_as_users_write_them(script: str, expected: dict[str, set[str]]) -> None:
    facts, whole = read_source((CODE / script).read_text(), script)
    assert whole  # Python 2 prints and `except E, e` included
    for key, wanted in expected.items():
        assert {f.word for f in facts if f.key == key} == wanted, (key, [str(f) for f in facts])


def test_a_fragment_from_a_paste_is_read_block_by_block() -> None:
    fragment = (">>> strategy = tf.distribute.MirroredStrategy()\n"
                "        for x in data:\n            preds = model.predict(x)\n"
                "def broken(:\n    model.fit(x, epochs=1)\n")
    facts, whole = read_source(fragment, "paste")
    assert not whole
    found = {(f.word, f.line) for f in facts}
    assert ("mirrored", 1) in found and ("predict_in_loop", 3) in found, found


def findings(capsys, *argv: str) -> dict:
    code = main(["check", "--quick", "--format", "json", "--no-redact", *argv])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return json.loads(out)


def test_check_code_decides_the_entries_that_depend_on_how_you_train(capsys, tmp_path: Path) -> None:
    script = CODE / "tf2_mirrored_predict_loop.py"
    report = findings(capsys, "--code", str(script))
    [code] = [c for c in report["checks"] if c["name"] == "code"]
    lines = code["findings"][0]["evidence"]
    assert "tf2_mirrored_predict_loop.py:24 model.predict() inside the loop at line 23 -> predict_in_loop" in lines
    observed = report["training"]["observed"]
    assert observed["strategy"] == "mirrored" and "predict_in_loop" in observed["usage"]
    assert report["training"]["observed_from"]["usage"] == f"code: {script}"


def test_a_code_path_that_cannot_be_read_is_bad_input(capsys, tmp_path: Path) -> None:
    assert main(["check", "--quick", "--code", str(tmp_path / "nope.py")]) == 2
    assert "--code" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["check", "--quick", "--code", str(tmp_path / "empty")]) == 2
    assert "no Python file" in capsys.readouterr().err


def test_a_paste_s_code_block_shows_what_it_shows_and_rules_out_nothing(capsys, tmp_path: Path) -> None:
    paste = tmp_path / "issue.md"
    paste.write_text("It hangs:\n\n```python\nstrategy = tf.distribute.MirroredStrategy()\nwith strategy.scope():\n"
                     "    model = build()\nfor x in frames:\n    out = model.predict(x)\n```\n\ntensorflow==2.4.1\n")
    report = findings(capsys, "--from", str(paste))
    [code] = [c for c in report["checks"] if c["name"] == "code"]
    assert "the pasted text:8 model.predict() inside the loop at line 7 -> predict_in_loop" in \
        code["findings"][0]["evidence"]
    observed = report["training"]["observed"]
    assert observed["strategy"] == "mirrored" and set(observed["usage"]) == {"predict_evaluate", "predict_in_loop"}
    assert not observed.get("layers")  # a fragment's layers are not the model's whole list


def test_profile_code_prints_the_table_for_pyproject_and_it_reads_back(capsys, tmp_path: Path) -> None:
    import tomllib

    assert main(["profile", "--code", str(CODE / "tf2_mirrored_predict_loop.py")]) == 0
    text = capsys.readouterr().out
    assert "    \"predict_in_loop\",  # tf2_mirrored_predict_loop.py:24 model.predict() inside the loop at line 23" in text
    table = tomllib.loads(text)["tool"]["mgpu-doctor"]["training"]
    assert table["strategy"] == "mirrored" and "predict_in_loop" in table["usage"]
    (tmp_path / "pyproject.toml").write_text(text)  # the project's own file, as the table says
    assert main(["profile", "--code", str(CODE / "tf1_session.py"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["strategy"] == "multi_gpu_model" and {"line": 21, "word": "fit_in_loop"}.items() <= next(
        f for f in data["facts"] if f["word"] == "fit_in_loop").items()


def test_a_file_of_thousands_of_broken_blocks_is_read_by_names_past_the_first_two_thousand():
    # Issue 40's sweep: 1 MiB of blocks that do not parse took 5.5 s, one parse per block; past
    # MAX_BLOCKS_PARSED the lines are read for the names they call, as a block that fails is.
    from mgpu_doctor.training.code_rules import MAX_BLOCKS_PARSED, read_source

    text = "def f(:\n  s = tf.distribute.MirroredStrategy()\n" * (MAX_BLOCKS_PARSED + 500)
    facts, whole = read_source(text, "x.py")
    assert not whole and len(facts) == MAX_BLOCKS_PARSED + 500
    assert {f.word for f in facts} == {"mirrored"} and facts[-1].line == 2 * (MAX_BLOCKS_PARSED + 500)


def test_an_estimator_s_train_called_in_a_loop_is_fit_in_loop_whatever_its_name() -> None:
    """tensorflow#24047: `classifier.train(...)` once per epoch; `train` of something that is no
    Estimator (a script without tf.estimator) is not read as training again and again."""
    estimator = ("import tensorflow as tf\n"
                 "classifier = tf.estimator.DNNClassifier(hidden_units=[10], feature_columns=cols)\n"
                 "for epoch in range(10):\n"
                 "    classifier.train(input_fn=train_input_fn)\n")
    assert {"estimator", "fit_in_loop"} <= words(estimator)
    assert "fit_in_loop" not in words(estimator.replace("for epoch in range(10):\n    ", ""))
    plain = "import tensorflow as tf\nfor step in range(10):\n    trainer.train()\n"
    assert "fit_in_loop" not in words(plain)


def test_a_switch_left_off_is_not_its_word() -> None:
    """recurrent_dropout=0 and renorm=False are the defaults said aloud, not the trigger."""
    assert "recurrent_dropout" not in words("x = tf.keras.layers.GRU(8, recurrent_dropout=0.0)(x)")
    assert "batchnorm_renorm" not in words("x = tf.keras.layers.BatchNormalization(renorm=False)(x)")
    assert "recurrent_dropout" in words("x = tf.keras.layers.GRU(8, recurrent_dropout=cfg.rdrop)(x)")


def test_channels_first_is_read_where_the_code_sets_it_and_channels_last_is_not() -> None:
    assert "channels_first" in words("tf.keras.backend.set_image_data_format('channels_first')")
    assert "channels_first" not in words("x = tf.keras.layers.Conv2D(8, 3, data_format='channels_last')(x)")


def test_a_dataset_built_once_is_not_rebuilt() -> None:
    assert "dataset_rebuilt" not in words("ds = tf.data.Dataset.from_tensor_slices(x)\nfor e in range(3):\n"
                                          "    model.fit(ds)")
    assert "dataset_rebuilt" not in words("for e in range(3):\n    ds = ds.shuffle(100)")  # a transformation


def test_a_tensor_created_in_a_traced_loop_is_not_eager() -> None:
    assert "eager_tensors_in_loop" not in words("@tf.function\ndef step():\n    for i in range(3):\n"
                                                "        c = tf.constant(1.0)\n")
    assert "eager_tensors_in_loop" not in words("c = tf.constant(1.0)\nfor i in range(3):\n    print(c)")
