"""MiniGPT Lab's library: a tiny character-level GPT to train, sample, save and look inside.

The public API is re-exported here; the Streamlit pages import only from this module.
"""
from .checkpoint import Checkpoint, CheckpointError, checkpoint_to_zip, from_pretrained, load_zip, save_pretrained
from .config import ConfigError, GPTConfig, TrainConfig, check_memory_budget, training_memory_bytes
from .data import (
    BUILTIN_CORPORA,
    DEFAULT_CORPUS,
    MAX_CORPUS_BYTES,
    CorpusError,
    check_corpus_fits,
    decode_corpus,
    get_batch,
    load_corpus,
)
from .device import DeviceError, available_devices, resolve_device
from .model import KVCache, MiniGPT
from .pretrained import load_pretrained, pretrained_dir
from .runner import EvalRecord, RunSnapshot, TrainingRun, stop_all_runs, stop_orphaned_runs
from .sample import (
    MAX_NEW_TOKENS,
    SamplingError,
    Step,
    check_sampling,
    context_window,
    generate,
    prepare_prompt,
    stream,
)
from .scaling import DEMO_D_KS, scaling_experiment
from .tokenizer import CharTokenizer, UnknownCharactersError
from .train import Trainer, TrainEvent, TrainingDiverged, build_model, lr_at
from .viz import (
    attention_figure,
    loss_figure,
    position_labels,
    scaling_figure,
    score_std_figure,
    steps_table,
    timelapse_frame,
)

__all__ = [
    "BUILTIN_CORPORA", "DEFAULT_CORPUS", "MAX_CORPUS_BYTES", "MAX_NEW_TOKENS", "DEMO_D_KS",
    "CharTokenizer", "Checkpoint", "CheckpointError", "ConfigError", "CorpusError", "DeviceError", "EvalRecord", "GPTConfig", "KVCache",
    "MiniGPT", "RunSnapshot", "SamplingError", "Step", "TrainConfig", "TrainEvent", "Trainer",
    "TrainingDiverged", "TrainingRun", "UnknownCharactersError", "available_devices", "build_model",
    "check_corpus_fits", "check_memory_budget", "training_memory_bytes", "check_sampling", "context_window", "checkpoint_to_zip", "from_pretrained", "load_pretrained", "load_zip", "pretrained_dir",
    "save_pretrained", "decode_corpus", "generate", "get_batch", "load_corpus", "lr_at", "prepare_prompt",
    "resolve_device", "scaling_experiment", "stop_all_runs", "stop_orphaned_runs", "stream",
    "attention_figure", "loss_figure", "position_labels", "scaling_figure", "score_std_figure", "steps_table",
    "timelapse_frame",
]
