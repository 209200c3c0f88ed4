"""The user's model as training facts: the child's class and option names in the matrix's words
(layers and usage), and the report's outcome for the model (what was seen, or how it failed).

Pure: the observation comes from ``probes/user_model.py``.
"""

from __future__ import annotations

from mgpu_doctor.matrix import vocabulary as vocab
from mgpu_doctor.model.findings import CheckOutcome, Finding, Severity, status_for
from mgpu_doctor.model.training import TrainingFacts, TrainingProfile
from mgpu_doctor.model.user_model import MODEL_CHECK, ModelObservation
from mgpu_doctor.record import replace

CHECK_NAME = MODEL_CHECK
CODES = ("user-model.observed", "user-model.import-failed", "user-model.build-failed",
         "user-model.not-a-model", "user-model.hang", "user-model.crash", "user-model.data-failed",
         "user-model.threads-left")
MAX_STACK_LINES = 40

# Keras layer classes -> the matrix's layer words (vocabulary.LAYERS); cells count as their layer.
LAYER_WORDS: dict[str, str] = {
    "Dense": "dense", "EinsumDense": "dense",
    "Conv1D": "conv1d", "Conv2D": "conv2d", "Conv3D": "conv3d", "Convolution1D": "conv1d",
    "Convolution2D": "conv2d", "Convolution3D": "conv3d",
    "Conv1DTranspose": "conv_transpose", "Conv2DTranspose": "conv_transpose",
    "Conv3DTranspose": "conv_transpose",
    "DepthwiseConv1D": "depthwise_conv", "DepthwiseConv2D": "depthwise_conv",
    "SeparableConv1D": "depthwise_conv", "SeparableConv2D": "depthwise_conv",
    "LSTM": "lstm", "LSTMCell": "lstm", "CuDNNLSTM": "lstm", "ConvLSTM1D": "lstm", "ConvLSTM2D": "lstm",
    "ConvLSTM3D": "lstm",
    "GRU": "gru", "GRUCell": "gru", "CuDNNGRU": "gru",
    "CudnnLSTM": "cudnn_rnn", "CudnnGRU": "cudnn_rnn", "CudnnRNNTanh": "cudnn_rnn",
    "CudnnRNNRelu": "cudnn_rnn",
    "SimpleRNN": "simple_rnn", "SimpleRNNCell": "simple_rnn",
    "Bidirectional": "bidirectional", "TimeDistributed": "time_distributed",
    "BatchNormalization": "batchnorm", "SyncBatchNormalization": "sync_batchnorm",
    "LayerNormalization": "layernorm", "GroupNormalization": "groupnorm",
    "Dropout": "dropout", "SpatialDropout1D": "dropout", "SpatialDropout2D": "dropout",
    "SpatialDropout3D": "dropout", "AlphaDropout": "dropout", "GaussianDropout": "dropout",
    "Embedding": "embedding",
    "MultiHeadAttention": "attention", "Attention": "attention", "AdditiveAttention": "attention",
    "GroupQueryAttention": "attention",
    "Lambda": "lambda",
    "TextVectorization": "preprocessing", "StringLookup": "preprocessing",
    "IntegerLookup": "preprocessing", "Normalization": "preprocessing", "Hashing": "preprocessing",
    "Discretization": "preprocessing", "CategoryEncoding": "preprocessing",
    "Rescaling": "preprocessing", "Resizing": "preprocessing", "CenterCrop": "preprocessing",
}
# Classes that are two layer words at once: Keras's cuDNN-only LSTM is an LSTM and a cuDNN RNN.
ALSO_LAYER_WORDS: dict[str, str] = {"CuDNNLSTM": "cudnn_rnn", "CuDNNGRU": "cudnn_rnn"}
for _pool in ("MaxPooling", "AveragePooling", "GlobalMaxPooling", "GlobalAveragePooling"):
    for _dim in ("1D", "2D", "3D"):
        LAYER_WORDS[_pool + _dim] = "pooling"

# The usage words one observation decides (present or absent) when the fact behind it was read.
DECIDED_BY = {
    "mixed_precision": ("policies", "optimizer"),
    "jit_compile": ("jit_compile",),
    "run_eagerly": ("run_eagerly",),
    "legacy_optimizer": ("optimizer",),
    "custom_metric": ("metrics",),
    "named_outputs": ("outputs",),
    "shared_submodel": ("layers",),
    "nested_model": ("layers",),
    "string_input": ("inputs",),
    "sparse_input": ("inputs",),
}


def layer_words(facts: dict) -> tuple[str, ...]:
    """The matrix's layer words for the model's layers (``custom_layer`` for a Layer subclass of
    the user's, plus the word of the built-in layer it extends)."""
    words: list[str] = []
    for layer in facts.get("layers") or []:
        if not isinstance(layer, dict):
            continue
        name = str(layer.get("class", ""))
        if layer.get("builtin"):
            word = LAYER_WORDS.get(name)
            if word == "batchnorm" and layer.get("synchronized"):
                word = "sync_batchnorm"
            if word:
                words.append(word)
            if name in ALSO_LAYER_WORDS:
                words.append(ALSO_LAYER_WORDS[name])
        elif not layer.get("model"):
            words.append("custom_layer")
            base = LAYER_WORDS.get(str(layer.get("base", "")))
            if base:
                words.append(base)
    return tuple(w for w in dict.fromkeys(words) if w in vocab.LAYERS)


def usage_words(facts: dict, data: dict) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the usage words the model shows, the usage words the observation decided)."""
    optimizer = facts.get("optimizer") if isinstance(facts.get("optimizer"), dict) else None
    inputs = [i for i in facts.get("inputs") or [] if isinstance(i, dict)]
    metrics = [m for m in facts.get("metrics") or [] if isinstance(m, dict)]
    present = {
        "mixed_precision": any(str(p).startswith("mixed_") for p in facts.get("policies") or [])
        or bool(optimizer and optimizer.get("loss_scale")),
        "jit_compile": facts.get("jit_compile") is True,
        "run_eagerly": facts.get("run_eagerly") is True,
        "legacy_optimizer": bool(optimizer and optimizer.get("legacy")),
        "custom_metric": any(m.get("custom") for m in metrics),
        "named_outputs": bool(facts.get("loss_dict") or facts.get("metrics_dict") or data.get("dict_labels")),
        "shared_submodel": bool(facts.get("shared")),
        "nested_model": any(isinstance(x, dict) and x.get("model") for x in facts.get("layers") or []),
        "string_input": any(i.get("dtype") == "string" for i in inputs) or bool(data.get("string")),
        "sparse_input": any(i.get("sparse") or i.get("ragged") for i in inputs) or bool(data.get("sparse")),
    }
    read = {key for key in ("policies", "jit_compile", "run_eagerly", "optimizer", "metrics", "layers",
                            "inputs") if facts.get(key) not in (None, "")}
    if facts.get("outputs") is not None:
        read.add("outputs")
    decided = tuple(w for w, keys in DECIDED_BY.items() if all(k in read for k in keys) or present[w])
    return tuple(w for w in DECIDED_BY if present[w]), decided


def with_observed(profile: TrainingProfile, observation: ModelObservation) -> TrainingProfile:
    """The profile with what the model showed as observed facts (unchanged when it was not seen)."""
    if not observation.seen:
        return profile
    layers = layer_words(observation.facts)
    usage, decided = usage_words(observation.facts, observation.data)
    source = f"model: {observation.request.model}"
    observed = TrainingFacts(layers=layers, usage=usage)
    sources = {k: source for k in observed.known()}
    return replace(profile, observed=observed, observed_from=sources, usage_checked=decided)


def model_outcome(observation: ModelObservation) -> CheckOutcome:
    """The report's line for the user's model: its observed facts, or its failure as a finding."""
    title = f"Your model ({observation.request.model}): built and read under the strategy"
    findings = ([_observed(observation)] if observation.stage == "data" else []) + [_finding(observation)]
    findings += [_threads_left(observation)] if observation.threads else []
    return CheckOutcome(CHECK_NAME, title, status_for(findings), findings)


def _observed(observation: ModelObservation) -> Finding:
    facts = observation.facts
    layers = layer_words(facts)
    usage, decided = usage_words(facts, observation.data)
    optimizer = facts.get("optimizer") if isinstance(facts.get("optimizer"), dict) else None
    classes = sorted({str(layer.get("class")) for layer in facts.get("layers") or []
                      if isinstance(layer, dict)})
    evidence = [f"layer classes: {', '.join(classes) or '(none)'}",
                f"layers (the matrix's words): {', '.join(layers) or '(none it names)'}",
                f"usage seen: {', '.join(usage) or '(none)'}",
                f"usage ruled out: {', '.join(w for w in decided if w not in usage) or '(none)'}",
                f"dtype policies: {', '.join(facts.get('policies') or []) or 'not read'}",
                f"optimizer: {_optimizer(optimizer)}",
                f"jit_compile: {facts.get('jit_compile')}; run_eagerly: {facts.get('run_eagerly')}"]
    metrics = [m for m in facts.get("metrics") or [] if isinstance(m, dict)]
    if metrics:
        evidence.append("metrics: " + ", ".join(f"{m.get('class')}{' (custom)' if m.get('custom') else ''}"
                                                for m in metrics))
    if observation.data:
        evidence.append(f"data: {observation.data.get('kind')}")
    if observation.framework:
        evidence.append(f"framework: {observation.framework}")
    shown = ", ".join(layers + usage)
    return Finding(
        code="user-model.observed", severity=Severity.OK,
        title=f"observed: {shown or 'no layer or usage the matrix names'}",
        evidence=evidence,
        fix="",
    )


def _optimizer(optimizer: dict | None) -> str:
    if not optimizer:
        return "none (the model is not compiled)"
    name = str(optimizer.get("class"))
    if optimizer.get("inner"):
        name += f" around {optimizer.get('inner')}"
    return name + (" (legacy)" if optimizer.get("legacy") else "")


def _finding(observation: ModelObservation) -> Finding:
    ref, stage = observation.request.model, observation.stage
    stack = _head(observation.stack)
    raised = f"{observation.error_type}: {observation.error_message}".strip(": ")
    if stage == "done":
        return _observed(observation)
    if stage == "data":
        return Finding(
            code="user-model.data-failed", severity=Severity.ERROR,
            title=f"Your data function {observation.request.data} raised "
                  f"{observation.error_type or 'an error'}",
            evidence=[f"raised: {raised}", "its stack:", *stack],
            fix="Run the data function on its own (`python -c 'import m; m.f()'`) and fix the error; "
                "it must return a tf.data.Dataset or (x, y) arrays.",
        )
    if stage == "import" and _names_the_module(observation):
        return _not_found(observation, raised)
    if stage in ("import", "tensorflow"):
        what = "TensorFlow" if stage == "tensorflow" else f"the module of {ref}"
        return Finding(
            code="user-model.import-failed", severity=Severity.ERROR,
            title=f"Your model: importing {what} raised {observation.error_type or 'an error'}",
            evidence=[f"raised: {raised}", "its stack:", *stack],
            fix="Check the MODULE:FUNCTION name and give the directory that holds the module with "
                "--model-path DIR (it is put first on the child's sys.path).",
        )
    if stage == "build":
        return Finding(
            code="user-model.build-failed", severity=Severity.ERROR,
            title=f"Your model function {ref} raised {observation.error_type or 'an error'} under the "
                  "strategy",
            evidence=[f"raised: {raised}", "its stack (innermost last):", *stack],
            fix="The function was called inside MirroredStrategy().scope(), as a multi-GPU training "
                "calls it: fix the error above (it is your code's, not the doctor's).",
        )
    if stage == "returned":
        return Finding(
            code="user-model.not-a-model", severity=Severity.ERROR,
            title=f"Your model function {ref} returned a {observation.returned or 'value'}, not a "
                  "Keras model",
            evidence=[f"returned: an instance of {observation.returned or 'an unknown class'}"],
            fix="Return the compiled keras.Model (model.compile(...) then `return model`).",
        )
    if stage == "hang":
        return Finding(
            code="user-model.hang", severity=Severity.ERROR,
            title=f"{_hung(observation)}: the child {observation.error_message}",
            evidence=["stacks when it was stopped:", *stack],
            fix="The stacks show where it waited (a download, a lock, a data source). Raise the limit "
                "with --model-timeout S if building really takes that long.",
        )
    return Finding(
        code="user-model.crash", severity=Severity.ERROR,
        title=f"Your model function {ref}: the child building it {observation.error_message}",
        evidence=["its last output:", *_head(observation.stack, 20)],
        fix="Build the model outside the doctor (python -c 'import m; m.f()') to see the native error.",
    )


def _names_the_module(observation: ModelObservation) -> bool:
    """The module Python did not find is the one ``--model`` names (or a package above it), not
    one that module imports."""
    parts = observation.request.model.partition(":")[0].split(".")
    return observation.missing_module in {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def _not_found(observation: ModelObservation, raised: str) -> Finding:
    ref, missing = observation.request.model, observation.missing_module
    top = missing.split(".")[0]
    return Finding(
        code="user-model.import-failed", severity=Severity.ERROR,
        title=f"Your model {ref}: no module named {missing!r} where the child looked: pass "
              f"--model-path DIR, the folder that holds {top}/ (or {top}.py)",
        evidence=[f"raised: {raised}", "looked in, first to last:",
                  *[f"  {where}" for where in observation.request.searched],
                  "  then the interpreter's own sys.path (its site-packages)"],
        fix=f"Pass --model-path DIR (repeatable) with the folder that holds {top}/, run the doctor "
            "from your project's root (a src/ layout and the package folders of its pyproject.toml "
            "are found there), or install the project into the interpreter (pip install -e .).",
    )


def _hung(observation: ModelObservation) -> str:
    """What did not return, by the step the child was in when it was stopped."""
    ref, step = observation.request.model, observation.waiting_in
    if step == "calling the data function":
        return f"Your data function {observation.request.data} did not return"
    if step == "importing the model function":
        return f"Importing the module of {ref} did not finish"
    if step == "importing tensorflow":
        return "Importing TensorFlow did not finish"
    return f"Your model function {ref} did not return"


def _threads_left(observation: ModelObservation) -> Finding:
    names = ", ".join(observation.threads[:5]) + (", ..." if len(observation.threads) > 5 else "")
    return Finding(
        code="user-model.threads-left", severity=Severity.WARNING,
        title=f"Your model or data function returned but left {len(observation.threads)} thread(s) "
              f"running that are not daemons ({names}): a script that calls it cannot exit at its end",
        evidence=[f"threads still running after it returned: {', '.join(observation.threads)}"],
        fix="Start the thread with daemon=True, or stop and join() it before the function returns.",
    )


def _head(text: str, limit: int = MAX_STACK_LINES) -> list[str]:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    return lines[-limit:]
