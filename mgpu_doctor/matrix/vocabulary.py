"""The words a known-issue entry and a `matrix query` share: one table per concept.

Each table maps a value to how a finding says it ("if you ..."), so the schema check, the
query parser, the matcher and the README read the same list. Adding a value = one line here
(a layer the smoke engine trains names its word here in its row of `smoke/layers.py`).
"""

from __future__ import annotations

# Layers an entry can name; `layers=` in a query. The smoke engine trains some of them.
LAYERS: dict[str, str] = {
    "dense": "Dense",
    "conv1d": "Conv1D",
    "conv2d": "Conv2D",
    "conv3d": "Conv3D",
    "conv_transpose": "Conv2DTranspose / Conv3DTranspose",
    "depthwise_conv": "DepthwiseConv2D / SeparableConv2D",
    "pooling": "pooling layers",
    "lstm": "LSTM",
    "gru": "GRU",
    "simple_rnn": "SimpleRNN",
    # cuDNN's fused RNN kernel and nothing else; Keras's CuDNNLSTM is `lstm` too
    "cudnn_rnn": "tf.contrib.cudnn_rnn CudnnLSTM / CudnnGRU or Keras CuDNNLSTM / CuDNNGRU",
    "bidirectional": "Bidirectional",
    "time_distributed": "TimeDistributed",
    "batchnorm": "BatchNormalization",
    "sync_batchnorm": "BatchNormalization(synchronized=True) / SyncBatchNormalization",
    "layernorm": "LayerNormalization",
    "groupnorm": "GroupNormalization",
    "dropout": "Dropout",
    "embedding": "Embedding",
    "attention": "MultiHeadAttention / Attention",
    "lambda": "Lambda",
    "preprocessing": "preprocessing layers (TextVectorization, StringLookup, Normalization, ...)",
    "custom_layer": "a custom layer (a Layer subclass)",
}

# How the model is distributed; `strategy=` in a query.
STRATEGIES: dict[str, str] = {
    "mirrored": "tf.distribute.MirroredStrategy",
    "multi_worker_mirrored": "tf.distribute.MultiWorkerMirroredStrategy",
    "central_storage": "tf.distribute.experimental.CentralStorageStrategy",
    "parameter_server": "tf.distribute.ParameterServerStrategy",
    "one_device": "tf.distribute.OneDeviceStrategy",
    "multi_gpu_model": "keras.utils.multi_gpu_model",
    "keras_data_parallel": "keras.distribution.DataParallel (Keras 3)",
    "keras_model_parallel": "keras.distribution.ModelParallel (Keras 3)",
    "horovod": "Horovod",
    "torch_ddp": "torch.nn.parallel.DistributedDataParallel around a Keras model (torch backend)",
}
# In an entry only: any of the strategies above (the problem is in distributed training as such).
ANY_STRATEGY = "any"

# Ways of training that an entry may depend on; `usage=` in a query. The phrase completes
# "applies if you ...". A machine's snapshot never shows them.
USAGES: dict[str, str] = {
    "list_local_devices": "call device_lib.list_local_devices()",
    "custom_training_loop": "train with a custom loop (strategy.run with GradientTape and "
                            "optimizer.apply_gradients) instead of model.fit",
    "estimator": "train with tf.estimator (RunConfig(train_distribute=...))",
    "save_model": "save the distributed model (model.save, tf.saved_model.save)",
    "load_weights": "load weights or a saved model into a model under the strategy "
                    "(load_weights, load_model)",
    "checkpoint": "write or restore checkpoints during distributed training (tf.train.Checkpoint, "
                  "ModelCheckpoint, BackupAndRestore)",
    "mixed_precision": "train with mixed precision (mixed_float16 / mixed_bfloat16, LossScaleOptimizer)",
    "jit_compile": "compile with XLA (jit_compile=True, TF_XLA_FLAGS auto-jit)",
    "private_threadpool": "give tf.data a private thread pool (threading.private_threadpool_size)",
    "distribute_dataset": "distribute a tf.data pipeline yourself (experimental_distribute_dataset, "
                          "distribute_datasets_from_function)",
    # one way to distribute_dataset, which code showing it shows too
    "datasets_from_function": "distribute a tf.data pipeline from an input function "
                              "(strategy.distribute_datasets_from_function, "
                              "experimental_distribute_datasets_from_function)",
    "python_generator": "feed training from a Python generator or keras.utils.Sequence",
    "run_eagerly": "run the model eagerly (run_eagerly=True, run_functions_eagerly)",
    "sparse_input": "feed sparse or ragged tensors",
    "predict_evaluate": "call model.predict or model.evaluate under the strategy",
    "sample_weight": "pass sample_weight or class_weight",
    "memory_growth": "enable GPU memory growth (set_memory_growth, TF_FORCE_GPU_ALLOW_GROWTH)",
    "logical_gpus": "split a GPU into logical devices (set_logical_device_configuration)",
    "device_subset": "restrict training to some of the machine's GPUs from Python (MirroredStrategy("
                     "devices=[...]), OneDeviceStrategy, tf.config.set_visible_devices) instead of "
                     "CUDA_VISIBLE_DEVICES",
    "several_models": "build or train several models in one process",
    "nccl_all_reduce": "choose NCCL all-reduce explicitly (NcclAllReduce, CommunicationImplementation.NCCL)",
    "legacy_optimizer": "use a legacy optimizer (tf.keras.optimizers.legacy, tf.compat.v1.train)",
    "tf1_session": "build graphs with TensorFlow 1.x sessions (tf.compat.v1.Session)",
    "tensorboard_profiler": "profile with the TensorBoard callback (profile_batch) or tf.profiler",
    "custom_op": "use a custom op",
    "container": "train inside a container (Docker, Kubernetes, enroot/pyxis under Slurm)",
    "infiniband": "let NCCL use InfiniBand / RoCE (an IB adapter in the machine, or multi-node "
                  "training over it)",
    "custom_metric": "compile the model with a custom metric (a keras.metrics.Metric subclass, "
                     "or add_metric)",
    "string_input": "feed string (tf.string) features through the distributed input pipeline",
    "strings_split_map": "split strings with tf.strings.split in the input pipeline (a Dataset.map function)",
    "fixed_batch_size": "rely on a fixed batch size in the input pipeline or the model (batch(..., "
                        "drop_remainder=True) with code that uses it, batch_input_shape)",
    "train_on_batch": "train batch by batch with Model.train_on_batch / test_on_batch",
    "named_outputs": "refer to model outputs by name (per-output loss/metrics dicts, labels fed "
                     "as a dict keyed by output name, monitoring a per-output metric)",
    "gpus_inferred": "let the library count the GPUs itself (multi_gpu_model(model) without gpus=)",
    "shared_submodel": "call one sub-model or layer several times in the model (Siamese networks, "
                       "a GAN's discriminator on real and fake inputs)",
    "predict_in_loop": "call model.predict (or predict_on_batch / evaluate) over and over in one process",
    "fit_in_loop": "call model.fit (or an Estimator's train) over and over in one process (folds, trials, "
                   "epochs, one model after another)",
    "retracing": "let a tf.function trace again and again (new input shapes, Python arguments, a "
                 "tf.function or model created inside a loop)",
    "model_reload": "load models over and over in one process (load_model, tf.saved_model.load in a loop)",
    "dataset_rebuilt": "build tf.data datasets over and over in one process (a new pipeline per fold, "
                       "trial or call)",
    "dataset_shuffle": "shuffle a tf.data pipeline (Dataset.shuffle) and iterate it epoch after epoch",
    "py_function": "call Python code from the graph with tf.py_function (in a layer, a Dataset.map "
                   "or eagerly)",
    "eager_random": "call tf.random ops eagerly, outside a tf.function, over and over (with or without "
                    "tf.random.set_seed)",
    # eager_random is one case of it, which naming eager_random names too
    "eager_tensors_in_loop": "create tensors eagerly in a Python loop, outside a tf.function (tf.constant, "
                             "tf.convert_to_tensor, tf.random ops), over and over",
    "summary_writer": "write TensorBoard summaries (tf.summary writers, FileWriter, the TensorBoard "
                      "callback)",
    "multiprocessing_workers": "feed fit from a generator, Sequence or PyDataset with workers > 1 or "
                               "use_multiprocessing=True",
    "input_signature": "decorate the training step with tf.function(input_signature=...)",
    "validation_data": "pass validation data to model.fit (validation_data, validation_split)",
    "sparse_gradients": "train variables whose gradients are sparse (tf.IndexedSlices: Embedding "
                        "layers, tf.gather on a variable)",
    "iommu": "run with the IOMMU or PCIe ACS switched on between the GPUs (AMD platforms, "
             "virtualised hosts)",
    "strategy_created_late": "create the optimizer or other variables outside the strategy's scope, "
                             "or the strategy after them",
    "model_garden": "train with the TensorFlow Model Garden's own training code (tensorflow/models: "
                    "the Object Detection API, official/ models)",
    "masked_sequences": "feed padded sequences with a mask to recurrent layers (Masking, "
                        "Embedding(mask_zero=True))",
    "cuda_malloc_async": "use CUDA's stream-ordered allocator (TF_GPU_ALLOCATOR=cuda_malloc_async)",
    "mig_instances": "give one process several MIG instances (A100/H100 slices) as its GPUs",
    "huge_tensors": "work with single tensors of more than 2^31 elements (large embedding tables, "
                    "big activations)",
    "large_batched_matmul": "multiply batched matrices or matrix-vector products with very large "
                            "dimensions (a batch of 2^16 or more, or millions of rows)",
    "conda_cuda": "use the CUDA toolkit and cuDNN installed with conda (cudatoolkit, cudnn) rather than "
                  "the pip nvidia-* wheels or a system CUDA",
    "alltoall": "call all-to-all collectives (hvd.alltoall, or all-to-all in custom layers such as "
                "sharded embeddings)",
    "custom_loss": "compile the model with a custom loss (your own function, registered with "
                   "register_keras_serializable, or a keras.losses.Loss subclass)",
    "op_determinism": "ask for deterministic ops (tf.config.experimental.enable_op_determinism, "
                      "TF_DETERMINISTIC_OPS=1)",
    "cudnn_autotune_off": "turn cuDNN autotuning off (TF_CUDNN_USE_AUTOTUNE=0)",
    "tf32_disabled": "turn TensorFloat-32 off "
                     "(tf.config.experimental.enable_tensor_float_32_execution(False))",
    "fft": "call FFT ops on the GPU (tf.signal.fft, rfft, stft, spectrogram layers)",
    "python_threads": "build, load or call models from Python threads other than the main one (a web "
                      "server's request threads, a thread pool, a QThread, a data generator's threads)",
    "stateful_rnn": "build a recurrent layer (LSTM, GRU, SimpleRNN) with stateful=True, which keeps "
                    "its state between batches",
    "precision_recall_metrics": "track Precision, Recall or metrics built on their counts (F1, "
                                "SensitivityAtSpecificity, PrecisionAtRecall) under the strategy",
    "resume_training": "load a saved model (load_model) and go on training it, expecting the "
                       "optimizer to continue where it stopped",
    "h5_weights": "save or load weights in the HDF5 format (save_weights / load_weights with a .h5 "
                  "file, ModelCheckpoint to .h5)",
    "load_weights_by_name": "load weights by layer name (load_weights(..., by_name=True)), for example "
                            "pretrained weights into a model of your own",
    "frozen_nested_model": "nest a model that has frozen layers (trainable=False) inside another model, "
                           "as when fine-tuning a pretrained base such as VGG16",
    "permuted_visible_devices": "list the GPUs out of order in CUDA_VISIBLE_DEVICES (for example "
                                "1,2,3,4,5,6,7,0)",
    "nccl_algo_nvls": "force NCCL's NVLink SHARP algorithm (NCCL_ALGO=NVLS)",
    "mask_rcnn_parallel_model": "train Matterport's Mask_RCNN on several GPUs (GPU_COUNT > 1 wraps the "
                                "model in its own mrcnn ParallelModel, a Model subclass)",
    "accuracy_string_sparse_loss": "compile with metrics=['accuracy'] (the string, which Keras resolves by "
                                   "the loss) and a sparse categorical cross-entropy loss (integer labels)",
    "model_add_weight": "create weights with self.add_weight directly in a keras.Model subclass, not in one "
                        "of its layers",
    "nested_model": "nest a model inside another model (a keras.Model or Model subclass used as a block or "
                    "layer of a bigger one)",
    "fewer_files_than_workers": "read the training data from fewer files than there are workers under "
                                "tf.data's default (AUTO) auto-shard policy, which shards by file (a "
                                "dataset in one TFRecord file)",
    "metric_average_callback": "average the metrics over Horovod's workers with "
                               "hvd.callbacks.MetricAverageCallback",
    "recurrent_dropout": "give recurrent layers a recurrent dropout (LSTM or GRU with recurrent_dropout > 0)",
    "batchnorm_renorm": "use batch renormalisation (BatchNormalization(renorm=True))",
    "channels_first": "lay image tensors out channels-first (data_format='channels_first', NCHW), in the "
                      "layers or in keras.json",
    "tensor_to_numpy": "pass TensorFlow tensors straight to NumPy functions (np.array(t), np.sum(t)) "
                       "instead of converting them with t.numpy() first",
    "cpu_only_worker": "include a worker without a GPU (CPU only) in the multi-worker cluster",
    "mixed_cpu_vendors": "run one job across hosts of both CPU vendors (Intel and AMD nodes together)",
    "bootstrap_port_traffic": "run where other traffic reaches NCCL's bootstrap ports (a security or "
                              "port scanner, a health check that connects and closes)",
    "infinite_pydataset": "feed fit from an infinite PyDataset (its num_batches returns None) with "
                          "steps_per_epoch",
    "top_k_metric": "track a top-k accuracy metric (TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy, "
                    "'top_k_categorical_accuracy')",
    "autotune_map_batch_one": "map a tf.data pipeline with num_parallel_calls=AUTOTUNE and batch it one "
                              "example at a time (batch(1))",
}

# When the last batch is short: how batches fall on the replicas; `scenario=` in a query.
SCENARIOS: dict[str, str] = {
    "uneven_final_batch": "the dataset size is not a multiple of the global batch size "
                          "(the last batch leaves a replica short or empty)",
    # one case of uneven_final_batch, which naming it names too
    "final_batch_of_one": "the last batch holds exactly one sample (the dataset size is one more than a "
                          "multiple of the batch size)",
    "even": "every batch is full",
}
# A scenario that is one case of a broader one: an entry that needs the broader one holds for it.
BROADER_SCENARIO: dict[str, str] = {"final_batch_of_one": "uneven_final_batch"}

PLATFORMS: dict[str, str] = {"linux": "Linux", "windows": "Windows", "wsl": "WSL 2"}
CPU_VENDORS: dict[str, str] = {"amd": "AMD CPUs", "intel": "Intel CPUs"}
# The host's CPU architecture (Python's platform.machine(), arm64 read as aarch64).
CPU_ARCHS: dict[str, str] = {"x86_64": "an x86-64 host", "aarch64": "an aarch64 (ARM) host such as Grace"}
INTERCONNECTS: dict[str, str] = {"nvlink": "NVLink between the GPUs", "pcie": "PCIe only between the GPUs"}
# Whether the GPUs can read each other's memory directly (NVML's P2P status between each pair):
# "unsupported" when some pair cannot (a cloud VM's L4s or T4s, a chipset that forbids it).
PEER_ACCESS: dict[str, str] = {"unsupported": "GPUs without peer-to-peer access between some pair",
                               "supported": "peer-to-peer access between every pair of GPUs"}
# Keras 3's backend (KERAS_BACKEND); `backend=` in a query.
DEFAULT_BACKEND = "tensorflow"  # Keras 3 without KERAS_BACKEND
BACKENDS: dict[str, str] = {"tensorflow": "the TensorFlow backend", "jax": "the JAX backend",
                            "torch": "the PyTorch backend"}


# A usage word that is one case of a broader word: naming it names the broader one too
# (`usage=datasets_from_function` is distributing a dataset yourself).
BROADER_USAGE: dict[str, str] = {
    "datasets_from_function": "distribute_dataset",
    "frozen_nested_model": "nested_model",
    "eager_random": "eager_tensors_in_loop",
}


def with_broader(words: tuple[str, ...]) -> tuple[str, ...]:
    """``words`` and the broader words they are cases of (:data:`BROADER_USAGE`), each once."""
    return tuple(dict.fromkeys([*words, *(BROADER_USAGE[w] for w in words if w in BROADER_USAGE)]))


def usage_phrase(tag: str) -> str:
    return USAGES.get(tag, tag)


def strategy_phrase(value: str) -> str:
    return STRATEGIES.get(value, value)
