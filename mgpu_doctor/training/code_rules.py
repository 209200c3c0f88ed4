"""The user's training code, read and never run: the strategy, the layers and the usage words it
shows, each with its file and line ("train.py:41 model.predict inside the loop at line 38").

Pure: a source text in, facts out. Python's own parser reads it; Python 2 code (``print x``,
``except E, e``) is converted first, and a fragment that still does not parse (a paste's code
block cut mid-function, ``>>>`` prompts) is read block by block, and line by line by name where
a block cannot be parsed at all (no loop context there).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.record import record
from mgpu_doctor.training.observed import ALSO_LAYER_WORDS, LAYER_WORDS

# Usage words that code cannot show, or shows only when present (set from the shell or the
# launcher as often as from Python): absent from the code, they stay unknown.
NOT_DECIDED = frozenset({
    "container", "infiniband", "iommu", "mig_instances", "huge_tensors", "large_batched_matmul", "conda_cuda",
    "shared_submodel", "strategy_created_late", "retracing", "sparse_gradients", "permuted_visible_devices",
    "memory_growth", "cuda_malloc_async", "op_determinism", "cudnn_autotune_off", "nccl_algo_nvls",
    "jit_compile",  # TF_XLA_FLAGS=--tf_xla_auto_jit=2 in the shell
    "nested_model",  # a library's model (KerasCV, KerasHub backbones) nests sub-models the code never shows
    "fewer_files_than_workers",  # how many files the data is in is the data's, not the code's
    "bootstrap_port_traffic",  # the network's, not the code's
    "cpu_only_worker", "mixed_cpu_vendors",  # the cluster's machines, not the code's
    "tensor_to_numpy",  # np.sum(x) does not show whether x is a tensor
    "channels_first",  # ~/.keras/keras.json's image_data_format sets it outside the code
    "dataset_rebuilt",  # read in a loop; a helper that builds the dataset, called in a loop, is not followed
})
DECIDED = tuple(w for w in vocab.USAGES if w not in NOT_DECIDED)

STRATEGY_CALLS = {
    "MirroredStrategy": "mirrored", "MultiWorkerMirroredStrategy": "multi_worker_mirrored",
    "CollectiveAllReduceStrategy": "multi_worker_mirrored", "CentralStorageStrategy": "central_storage",
    "ParameterServerStrategy": "parameter_server", "OneDeviceStrategy": "one_device",
    "multi_gpu_model": "multi_gpu_model", "DistributedDataParallel": "torch_ddp",
}
# A call's last name -> the usage word it shows.
USAGE_CALLS = {
    "list_local_devices": "list_local_devices",
    "load_weights": "load_weights", "load_model": "load_weights",
    "Checkpoint": "checkpoint", "CheckpointManager": "checkpoint", "ModelCheckpoint": "checkpoint",
    "MetricAverageCallback": "metric_average_callback",
    "BackupAndRestore": "checkpoint",
    "LossScaleOptimizer": "mixed_precision",
    "experimental_distribute_dataset": "distribute_dataset",
    "distribute_datasets_from_function": "distribute_dataset",
    "experimental_distribute_datasets_from_function": "distribute_dataset",
    "fit_generator": "python_generator", "from_generator": "python_generator",
    "run_functions_eagerly": "run_eagerly",
    "SparseTensor": "sparse_input", "RaggedTensor": "sparse_input",
    "predict": "predict_evaluate", "evaluate": "predict_evaluate", "predict_on_batch": "predict_evaluate",
    "set_memory_growth": "memory_growth",
    "set_logical_device_configuration": "logical_gpus", "set_virtual_device_configuration": "logical_gpus",
    "LogicalDeviceConfiguration": "logical_gpus", "VirtualDeviceConfiguration": "logical_gpus",
    "set_visible_devices": "device_subset", "OneDeviceStrategy": "device_subset",
    "NcclAllReduce": "nccl_all_reduce",
    "Session": "tf1_session", "InteractiveSession": "tf1_session",
    "load_op_library": "custom_op",
    "add_metric": "custom_metric",
    "StringLookup": "string_input", "TextVectorization": "string_input",
    "train_on_batch": "train_on_batch", "test_on_batch": "train_on_batch",
    "shuffle": "dataset_shuffle",
    "py_function": "py_function", "numpy_function": "py_function", "py_func": "py_function",
    "create_file_writer": "summary_writer", "FileWriter": "summary_writer", "TensorBoard": "summary_writer",
    "Masking": "masked_sequences",
    "alltoall": "alltoall",
    "enable_op_determinism": "op_determinism",
    "Thread": "python_threads", "ThreadPoolExecutor": "python_threads",
    "Precision": "precision_recall_metrics", "Recall": "precision_recall_metrics",
    "F1Score": "precision_recall_metrics", "FBetaScore": "precision_recall_metrics",
    "SensitivityAtSpecificity": "precision_recall_metrics",
    "SpecificityAtSensitivity": "precision_recall_metrics",
    "PrecisionAtRecall": "precision_recall_metrics", "RecallAtPrecision": "precision_recall_metrics",
    "TopKCategoricalAccuracy": "top_k_metric", "SparseTopKCategoricalAccuracy": "top_k_metric",
    "top_k_categorical_accuracy": "top_k_metric", "sparse_top_k_categorical_accuracy": "top_k_metric",
}
# The calls of distribute_dataset that are also datasets_from_function (a narrower word).
FROM_FUNCTION_CALLS = ("distribute_datasets_from_function", "experimental_distribute_datasets_from_function")
# A keyword argument -> the usage word it shows when its value is true (or, for ``workers``, above 1).
USAGE_KEYWORDS = {
    "jit_compile": "jit_compile", "experimental_compile": "jit_compile", "run_eagerly": "run_eagerly",
    "sparse": "sparse_input", "ragged": "sparse_input", "sample_weight": "sample_weight",
    "class_weight": "sample_weight", "private_threadpool_size": "private_threadpool",
    "profile_batch": "tensorboard_profiler", "drop_remainder": "fixed_batch_size",
    "batch_input_shape": "fixed_batch_size", "use_multiprocessing": "multiprocessing_workers",
    "workers": "multiprocessing_workers", "input_signature": "input_signature",
    "validation_data": "validation_data", "validation_split": "validation_data",
    "mask_zero": "masked_sequences", "stateful": "stateful_rnn", "by_name": "load_weights_by_name",
    "train_distribute": "estimator", "renorm": "batchnorm_renorm",
}
# Keywords whose mere presence shows the word (their value is data, not a switch).
PRESENCE_KEYWORDS = frozenset({"validation_data", "validation_split", "sample_weight", "class_weight",
                               "input_signature", "train_distribute", "batch_input_shape", "profile_batch"})
# Text in a string constant -> the usage word (environment variables set from Python).
USAGE_STRINGS = {
    "mixed_float16": "mixed_precision", "mixed_bfloat16": "mixed_precision",
    "TF_FORCE_GPU_ALLOW_GROWTH": "memory_growth", "cuda_malloc_async": "cuda_malloc_async",
    "TF_DETERMINISTIC_OPS": "op_determinism", "TF_CUDNN_USE_AUTOTUNE": "cudnn_autotune_off",
    "tf_xla_auto_jit": "jit_compile",
    "top_k_categorical_accuracy": "top_k_metric",  # metrics=['top_k_categorical_accuracy'], also sparse_
    "channels_first": "channels_first",  # data_format='channels_first', set_image_data_format(...)
}
BASE_CLASSES = {"Layer": ("layers", "custom_layer"), "Metric": ("usage", "custom_metric"),
                "Loss": ("usage", "custom_loss"), "Sequence": ("usage", "python_generator"),
                "PyDataset": ("usage", "python_generator")}
MODEL_BUILDERS = ("Model", "Sequential", "clone_model", "load_model", "model_from_json")
# Calls that build a new tf.data dataset from data (not a transformation of another dataset).
DATASET_BUILDERS = ("from_tensor_slices", "from_tensors", "from_generator", "TFRecordDataset",
                    "TextLineDataset", "FixedLengthRecordDataset", "list_files",
                    "image_dataset_from_directory", "text_dataset_from_directory",
                    "timeseries_dataset_from_array")
_PY2_PRINT = re.compile(r"^(\s*)print\s+(?![\s(=])(.*)$")
_PY2_EXCEPT = re.compile(r"^(\s*except\s+[\w.]+)\s*,\s*(\w+)\s*:")
_PROMPT = re.compile(r"^(\s*)(?:>>>|\.\.\.)(?: |$)")
_NAME_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


@record
class CodeFact:
    """One word the code shows: ``key`` (strategy, layers, usage), the word, where, and why."""

    key: str
    word: str
    file: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.why} -> {self.word}"


def read_source(text: str, file: str, offset: int = 0) -> tuple[list[CodeFact], bool]:
    """The facts a source text shows, and whether all of it could be parsed; ``offset``: the lines
    before it in its file (a code block of a paste), added to every line number."""
    source = _as_python3(text)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _read_in_blocks(source, file, offset), False
    return _Reader(file, offset=offset).read(tree), True


def _as_python3(text: str) -> str:
    """Python 2 statements and interpreter prompts rewritten so that Python 3 parses them (line
    numbers kept)."""
    lines = []
    for line in text.replace("\r\n", "\n").split("\n"):
        line = _PROMPT.sub(r"\1", line)
        line = _PY2_PRINT.sub(r"\1print(\2)", line)
        line = _PY2_EXCEPT.sub(r"\1 as \2:", line)
        lines.append(line)
    return "\n".join(lines)


def _read_in_blocks(source: str, file: str, offset: int = 0) -> list[CodeFact]:
    """A fragment: each top-level block parsed alone (dedented); a block that still fails is read
    line by line for the names it calls."""
    lines = source.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() and not line[:1].isspace()] or [0]
    facts: list[CodeFact] = []
    bounds = list(zip(starts, starts[1:] + [len(lines)], strict=True))
    if bounds and bounds[0][0] > 0:
        bounds.insert(0, (0, bounds[0][0]))
    for number, (first, end) in enumerate(bounds):
        if number < MAX_BLOCKS_PARSED:
            facts += _read_block(lines[first:end], offset + first, file)
        else:  # a file of thousands of broken blocks: the names each line calls, without a parse each
            facts += _read_names(lines[first:end], offset + first, file)
    return facts


MAX_BLOCKS_PARSED = 2000  # top-level blocks of a file that does not parse, each parsed on its own
MAX_RETRIED_LINES = 200  # a block that does not parse is retried without its first line up to this


def _read_block(lines: list[str], offset: int, file: str) -> list[CodeFact]:
    """A block parsed whole (dedented); else its first line by names and the rest retried, so an
    indented loop under a stray line is still read as a loop."""
    facts: list[CodeFact] = []
    while lines:
        try:
            tree = ast.parse(_dedent("\n".join(lines)))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            if len(lines) > MAX_RETRIED_LINES:
                return facts + _read_names(lines, offset, file)
            facts += _read_names(lines[:1], offset, file)
            lines, offset = lines[1:], offset + 1
            continue
        return facts + _Reader(file, offset=offset).read(tree)
    return facts


def _dedent(block: str) -> str:
    import textwrap

    return textwrap.dedent(block)


def _read_names(lines: list[str], offset: int, file: str) -> list[CodeFact]:
    facts = []
    for i, line in enumerate(lines):
        for name in _NAME_CALL.findall(line.split("#", 1)[0]):
            for key, word, why in _call_words(name, name):
                facts.append(CodeFact(key, word, file, offset + i + 1, why))
    return facts


def _call_words(last: str, dotted: str) -> Iterator[tuple[str, str, str]]:
    """What a call of ``dotted`` (last name ``last``) shows, by its name alone."""
    if last in STRATEGY_CALLS:
        yield "strategy", STRATEGY_CALLS[last], f"{dotted}()"
    if last in ("DataParallel", "ModelParallel") and "distribution" in dotted:
        word = "keras_data_parallel" if last == "DataParallel" else "keras_model_parallel"
        yield "strategy", word, f"{dotted}()"
    if last in LAYER_WORDS:
        yield "layers", LAYER_WORDS[last], f"{dotted}()"
    if last in ALSO_LAYER_WORDS:
        yield "layers", ALSO_LAYER_WORDS[last], f"{dotted}()"
    if last in USAGE_CALLS:
        yield "usage", USAGE_CALLS[last], f"{dotted}()"
    if last in FROM_FUNCTION_CALLS:
        yield "usage", "datasets_from_function", f"{dotted}()"
    if last == "init" and dotted.split(".")[0] in ("hvd", "horovod"):
        yield "strategy", "horovod", f"{dotted}()"
    if "estimator." in dotted or last == "RunConfig":
        yield "usage", "estimator", f"{dotted}()"
    if "optimizers.legacy." in dotted or (re.search(r"\btrain\.\w*Optimizer$", dotted) is not None):
        yield "usage", "legacy_optimizer", f"{dotted}()"
    if "profiler" in dotted.split("."):
        yield "usage", "tensorboard_profiler", f"{dotted}()"
    if ".sparse." in f".{dotted}" or ".ragged." in f".{dotted}":
        yield "usage", "sparse_input", f"{dotted}()"
    if dotted.startswith(("tf.signal.", "signal.")) and any(k in last for k in ("fft", "stft", "spectro")):
        yield "usage", "fft", f"{dotted}()"


class _Reader(ast.NodeVisitor):
    """One pass over a parsed module: facts, with the loops and tf.functions around each call."""

    def __init__(self, file: str, offset: int = 0) -> None:
        self.file, self.offset = file, offset
        self.facts: list[CodeFact] = []
        self.loops: list[int] = []  # the lines of the loops around the node
        self.in_tf_function = 0
        self.functions: set[str] = set()  # names defined here (a custom loss is one of them)
        self.models_built: list[int] = []
        self.calls: dict[str, int] = {}  # last name -> first line called
        self.model_classes: set[str] = set()  # the keras.Model subclasses defined here
        self.assigned: dict[str, ast.expr] = {}  # a plain name -> the value last assigned to it

    def read(self, tree: ast.AST) -> list[CodeFact]:
        self.functions = {n.name for n in ast.walk(tree)
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        self.assigned = {n.targets[0].id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                         and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
        self.model_classes = _model_classes(tree)
        self.visit(tree)
        self._combined()
        return self.facts

    def add(self, key: str, word: str, node: ast.AST, why: str) -> None:
        line = getattr(node, "lineno", 0) + self.offset
        self.facts.append(CodeFact(key, word, self.file, line, why))

    def _loop(self, node: ast.For | ast.While | ast.AsyncFor) -> None:
        self.loops.append(node.lineno + self.offset)
        self.generic_visit(node)
        self.loops.pop()

    visit_For = visit_While = visit_AsyncFor = _loop

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        traced = any(_dotted(d.func if isinstance(d, ast.Call) else d).endswith("function")
                     for d in node.decorator_list)
        if traced and self.loops:
            self.add("usage", "retracing", node, f"@tf.function def {node.name} inside the loop at line "
                     f"{self.loops[-1]}")
        # a function body runs where it is called: the loops around its definition do not hold it
        loops, self.loops = self.loops, []
        self.in_tf_function += traced
        self.generic_visit(node)
        self.in_tf_function -= traced
        self.loops = loops

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            last = _dotted(base).split(".")[-1]
            if last in BASE_CLASSES:
                key, word = BASE_CLASSES[last]
                self.add(key, word, node, f"class {node.name}({_dotted(base)})")
                if last == "Layer":
                    continue
        if node.name in self.model_classes:
            self._model_subclass(node)
        if any(_dotted(base).split(".")[-1] == "PyDataset" for base in node.bases):
            for item in node.body:
                returns = [r for r in ast.walk(item) if isinstance(r, ast.Return)]
                if isinstance(item, ast.FunctionDef) and item.name == "num_batches" and any(
                        r.value is None or _none(r.value) for r in returns):
                    self.add("usage", "infinite_pydataset", item, f"{node.name}.num_batches returns None")
        self.generic_visit(node)

    def _model_subclass(self, node: ast.ClassDef) -> None:
        """A keras.Model subclass: weights added on the model itself, models built inside it."""
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            func = call.func
            last = _dotted(func).split(".")[-1]
            if last == "add_weight" and isinstance(func, ast.Attribute) and _dotted(func.value) == "self":
                self.add("usage", "model_add_weight", call, f"self.add_weight() in {node.name}(Model)")
            elif self._is_model(call) and last != "Model":  # keras.Model(...) there prints a summary
                self.add("usage", "nested_model", call, f"{_dotted(func)}() inside {node.name}(Model)")

    def _is_model(self, node: ast.AST | None, depth: int = 0) -> bool:
        """Whether an expression builds or names a Keras model (a name followed once)."""
        if isinstance(node, ast.Name) and depth == 0:
            return self._is_model(self.assigned.get(node.id), depth + 1)
        if not isinstance(node, ast.Call):
            return False
        dotted = _dotted(node.func)
        last = dotted.split(".")[-1]
        return last in MODEL_BUILDERS or last in self.model_classes or "applications." in dotted

    def _is_input(self, node: ast.AST | None) -> bool:
        if isinstance(node, ast.Name):
            node = self.assigned.get(node.id)
        return isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] == "Input"

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        for name in names:
            root = name.split(".")[0]
            if root == "horovod":
                self.add("strategy", "horovod", node, f"import {name}")
            if root in ("official", "object_detection"):
                self.add("usage", "model_garden", node, f"import {name}")
            if root == "mrcnn":
                self.calls.setdefault("import mrcnn", node.lineno + self.offset)

    visit_ImportFrom = visit_Import

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Attribute) and target.attr == "trainable" and _false(node.value):
                self.add("usage", "frozen_nested_model", node, f"{_dotted(target)} = False")
            if isinstance(target, ast.Name) and target.id == "GPU_COUNT" and _int(node.value) > 1:
                self.calls.setdefault("GPU_COUNT > 1", node.lineno + self.offset)
            if isinstance(target, ast.Subscript) and _string(target.slice) == "CUDA_VISIBLE_DEVICES":
                ids = [s.strip() for s in (_string(node.value) or "").split(",") if s.strip()]
                if ids and ids != sorted(ids, key=lambda s: (len(s), s)):
                    self.add("usage", "permuted_visible_devices", node,
                             f"CUDA_VISIBLE_DEVICES = {','.join(ids)!r}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        if dotted.endswith(("CommunicationImplementation.NCCL", "CollectiveCommunication.NCCL")):
            self.add("usage", "nccl_all_reduce", node, dotted)
        elif dotted in ("tf.string", "tf.dtypes.string"):
            self.add("usage", "string_input", node, dotted)
        elif node.attr == "allow_growth":
            self.add("usage", "memory_growth", node, dotted)
        elif node.attr == "private_threadpool_size":
            self.add("usage", "private_threadpool", node, dotted)
        elif node.attr == "auto_shard_policy":
            self.calls.setdefault("auto_shard_policy", node.lineno + self.offset)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and len(node.value) < 400:
            for text, word in USAGE_STRINGS.items():
                if text in node.value:
                    self.add("usage", word, node, repr(node.value)[:60])
            if "NCCL_ALGO" in node.value or node.value == "NVLS":
                self.calls.setdefault(f"str:{node.value}", node.lineno + self.offset)

    def visit_Call(self, node: ast.Call) -> None:
        dotted = _dotted(node.func)
        last = dotted.split(".")[-1]
        self.calls.setdefault(last, node.lineno + self.offset)
        for key, word, why in _call_words(last, dotted):
            self.add(key, word, node, why)
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        for name, value in keywords.items():
            shows = USAGE_KEYWORDS.get(name)
            if shows is None:
                continue
            if name == "workers" and _int(value) <= 1:
                continue
            if name in PRESENCE_KEYWORDS or _true(value):
                self.add("usage", shows, node, f"{dotted}({name}=...)")
        self._call_rules(node, dotted, last, keywords)
        self.generic_visit(node)

    def _call_rules(self, node: ast.Call, dotted: str, last: str, keywords: dict[str, ast.expr]) -> None:
        loop = f" inside the loop at line {self.loops[-1]}" if self.loops else ""
        if last in ("MirroredStrategy", "MultiWorkerMirroredStrategy") and \
                (node.args or "devices" in keywords):
            self.add("usage", "device_subset", node, f"{dotted}(devices=...)")
        dropout = keywords.get("recurrent_dropout")
        if dropout is not None and not (isinstance(dropout, ast.Constant) and not dropout.value):
            self.add("usage", "recurrent_dropout", node, f"{dotted}(recurrent_dropout=...)")
        if last == "BatchNormalization" and _true(keywords.get("synchronized")):
            self.add("layers", "sync_batchnorm", node, f"{dotted}(synchronized=True)")
        if last == "multi_gpu_model" and "gpus" not in keywords and len(node.args) < 2:
            self.add("usage", "gpus_inferred", node, f"{dotted}() without gpus=")
        if last == "save" and ("model" in dotted.lower() or dotted.startswith("saved_model")):
            self.add("usage", "save_model", node, f"{dotted}()")
        if last == "save_model":
            self.add("usage", "save_model", node, f"{dotted}()")
        if last == "load" and "saved_model" in dotted:
            self.add("usage", "load_weights", node, f"{dotted}()")
            if self.loops:
                self.add("usage", "model_reload", node, f"{dotted}(){loop}")
        if last == "set_jit" and node.args and (_true(node.args[0]) or _string(node.args[0])):
            self.add("usage", "jit_compile", node, f"{dotted}(...)")
        if last == "enable_tensor_float_32_execution" and node.args and _false(node.args[0]):
            self.add("usage", "tf32_disabled", node, f"{dotted}(False)")
        if last == "compile":
            loss = keywords.get("loss")
            if isinstance(loss, ast.Dict) or isinstance(keywords.get("metrics"), ast.Dict):
                self.add("usage", "named_outputs", node, f"{dotted}(loss={{...}})")
            if isinstance(loss, ast.Lambda) or (isinstance(loss, ast.Name) and loss.id in self.functions) or \
                    (isinstance(loss, ast.Call) and _dotted(loss.func).split(".")[-1] in self.functions):
                self.add("usage", "custom_loss", node, f"{dotted}(loss={_dotted(loss) or 'lambda'})")
            self._accuracy_string(node, dotted, keywords)
        if last == "Sequential" and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)) and \
                any(self._is_model(e) for e in node.args[0].elts):
            self.add("usage", "nested_model", node, f"{dotted}([a model, ...])")
        if self._is_model(node.func) and node.args and self._is_input(node.args[0]):
            self.add("usage", "nested_model", node, f"{_dotted(node.func) or 'a model'}(an Input)")
        if last == "TFRecordDataset" and node.args and _one_file(node.args[0]):
            self.calls.setdefault("one TFRecord file", node.lineno + self.offset)
        if last in ("save_weights", "load_weights", "ModelCheckpoint", "save", "load_model") and any(
                text.endswith((".h5", ".hdf5")) for a in node.args for text in _strings_in(a)) \
                or _string(keywords.get("save_format")) == "h5":
            self.add("usage", "h5_weights", node, f"{dotted}('....h5')")
        if last in ("predict", "predict_on_batch", "evaluate") and self.loops:
            self.add("usage", "predict_in_loop", node, f"{dotted}(){loop}")
        if self.loops and (last in ("fit", "fit_generator") or last == "train" and (
                "estimator" in dotted.lower() or any(f.word == "estimator" for f in self.facts))):
            self.add("usage", "fit_in_loop", node, f"{dotted}(){loop}")
        if last in MODEL_BUILDERS:
            self.models_built.append(node.lineno + self.offset)
            if self.loops:
                self.add("usage", "several_models", node, f"{dotted}(){loop}")
            if last == "load_model" and self.loops:
                self.add("usage", "model_reload", node, f"{dotted}(){loop}")
        if dotted.endswith("strings.split"):  # the map function is often defined apart from its map()
            self.add("usage", "strings_split_map", node, f"{dotted}()")
        if last in DATASET_BUILDERS and self.loops and not self.in_tf_function:
            self.add("usage", "dataset_rebuilt", node, f"{dotted}(){loop}")
        if last == "function" and self.loops and dotted.endswith("tf.function"):
            self.add("usage", "retracing", node, f"{dotted}(){loop}")
        if dotted.startswith(("tf.random.", "random.")) and "tf.random." in f"tf.{dotted}" and self.loops \
                and not self.in_tf_function:
            self.add("usage", "eager_random", node, f"{dotted}() eagerly{loop}")
        if dotted.endswith(("tf.constant", "tf.convert_to_tensor")) and self.loops \
                and not self.in_tf_function:
            self.add("usage", "eager_tensors_in_loop", node, f"{dotted}() eagerly{loop}")
        if last == "map" and _dotted(keywords.get("num_parallel_calls")).endswith("AUTOTUNE"):
            self.calls.setdefault("map AUTOTUNE", node.lineno + self.offset)
        if last == "batch" and node.args and _int(node.args[0]) == 1:
            self.calls.setdefault("batch(1)", node.lineno + self.offset)
        if last == "GradientTape":
            self.calls.setdefault("GradientTape", node.lineno + self.offset)

    def _accuracy_string(self, node: ast.Call, dotted: str, keywords: dict[str, ast.expr]) -> None:
        """compile(loss=<sparse categorical cross-entropy>, metrics=['accuracy']): Keras picks the
        accuracy by the loss, which a reloaded model of TF 2.3 did not."""
        def argument(name: str, position: int) -> ast.expr | None:
            value = keywords.get(name, node.args[position] if len(node.args) > position else None)
            if isinstance(value, ast.Name):
                return self.assigned.get(value.id, value)
            return value

        loss, metrics = argument("loss", 1), argument("metrics", 2)
        if loss is None or metrics is None:
            return
        named = _string(loss) or _dotted(loss.func if isinstance(loss, ast.Call) else loss)
        sparse = "sparsecategoricalcrossentropy" in named.lower().replace("_", "")
        if sparse and any(_string(m) in ("accuracy", "acc") for m in ast.walk(metrics)):
            self.add("usage", "accuracy_string_sparse_loss", node,
                     f"{dotted}(loss={named.split('.')[-1]}, metrics=['accuracy'])")

    def _combined(self) -> None:
        """Words that need two things in the same code."""
        def at(line: int, key: str, word: str, why: str) -> None:
            self.facts.append(CodeFact(key, word, self.file, line, why))

        if "GradientTape" in self.calls and "apply_gradients" in self.calls:
            at(self.calls["apply_gradients"], "usage", "custom_training_loop",
               f"apply_gradients() with a GradientTape (line {self.calls['GradientTape']})")
        if len(self.models_built) > 1:
            lines = ", ".join(map(str, self.models_built))
            at(self.models_built[1], "usage", "several_models",
               f"{len(self.models_built)} models built or loaded (lines {lines})")
        if "load_model" in self.calls and "fit" in self.calls:
            at(self.calls["fit"], "usage", "resume_training",
               f"fit() on a model loaded with load_model() (line {self.calls['load_model']})")
        if "map AUTOTUNE" in self.calls and "batch(1)" in self.calls:
            at(self.calls["batch(1)"], "usage", "autotune_map_batch_one",
               f"batch(1) after map(num_parallel_calls=AUTOTUNE) (line {self.calls['map AUTOTUNE']})")
        if "import mrcnn" in self.calls and "GPU_COUNT > 1" in self.calls:
            at(self.calls["GPU_COUNT > 1"], "usage", "mask_rcnn_parallel_model", "mrcnn with GPU_COUNT > 1")
        nccl = [v for k, v in self.calls.items() if k.startswith("str:") and ("NVLS" in k)]
        if nccl and any(k.startswith("str:") and "NCCL_ALGO" in k for k in self.calls):
            at(nccl[0], "usage", "nccl_algo_nvls", "NCCL_ALGO set to NVLS")
        multi_worker = {"MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy"} & set(self.calls)
        if "one TFRecord file" in self.calls and multi_worker and "auto_shard_policy" not in self.calls:
            at(self.calls["one TFRecord file"], "usage", "fewer_files_than_workers",
               "one TFRecord file under MultiWorkerMirroredStrategy, auto_shard_policy left AUTO")
        embedding = [f for f in self.facts if f.key == "layers" and f.word == "embedding"]
        if embedding:
            at(embedding[0].line, "usage", "sparse_gradients", "an Embedding layer (sparse gradients)")


def _dotted(node: ast.AST | None) -> str:
    """``tf.distribute.MirroredStrategy`` for the expression naming a callee; "" for others."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        inner = _dotted(node.func)
        if inner:
            parts.append(inner + "()")
    return ".".join(reversed(parts))


def _model_classes(tree: ast.AST) -> set[str]:
    """The classes defined in ``tree`` that derive from keras.Model, directly or through another."""
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    found: set[str] = set()
    while True:
        more = {c.name for c in classes if c.name not in found and any(
            _dotted(b).split(".")[-1] in found | {"Model"} for b in c.bases)}
        if not more:
            return found
        found |= more


def _one_file(node: ast.AST) -> bool:
    """A single file name, not a pattern nor a list of several (``TFRecordDataset('train.tfrecord')``)."""
    if isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) == 1:
        node = node.elts[0]
    text = _string(node)
    return text is not None and not any(c in text for c in "*?[")


def _none(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _false(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _int(node: ast.AST | None) -> int:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else 0


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _strings_in(node: ast.AST) -> Iterator[str]:
    """The string constants inside an expression (``"fold_%d.h5" % fold``, an f-string's parts)."""
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child.value
