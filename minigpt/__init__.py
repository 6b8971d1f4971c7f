"""MiniGPT Lab's library: a tiny character-level GPT to train, sample, save and look inside.

The public API is re-exported here; the app imports only from this module.
"""
from .archive import checkpoint_zip, folder_zip, load_zip
from .checkpoint import (Checkpoint, CheckpointError, checkpoint_files, from_pretrained, latest_checkpoint,
                         load_files, save_checkpoint, save_pretrained)
from .config import (DEFAULT_PRESET, PRESETS, ConfigError, GPTConfig, Preset, TrainConfig, check_memory_budget,
                     training_memory_bytes)
from .data import (
    BUILTIN_CORPORA,
    DEFAULT_CORPUS,
    DEMO_PROMPTS,
    DEMO_SENTENCE,
    MAX_CORPUS_BYTES,
    CorpusError,
    check_corpus_fits,
    decode_corpus,
    decode_corpus_as,
    demo_prompts,
    get_batch,
    load_corpus,
    probe_text,
)
from .explain import (PATTERNS, AttentionRow, Beliefs, HeadStats, attention_row, beliefs, character_table,
                      embedding_pca, head_stats, head_table, last_query_attention, logit_lens, next_logits,
                      position_similarity, surprisal)
from .diagnosis import (Overfitting, UnseenCharacters, overfitting, top_key_changes, uniform_loss,
                        unseen_validation_chars)
from .device import DeviceError, available_devices, resolve_device
from .messages import N_, LabError, Message
from .model import KVCache, MiniGPT
from .pretrained import load_pretrained, pretrained_dir
from .registry import NotOwnerError, RunEntry, RunLimitError, RunRegistry
from .runner import EvalRecord, RunSnapshot, TrainingRun, stop_all_runs, stop_orphaned_runs
from .sample import MAX_NEW_TOKENS, SamplingError, Step, check_sampling, generate, prepare_prompt, stream
from .scaling import DEMO_D_KS, DEMO_SEED, DEMO_SEQ_LEN, scaling_experiment
from .tasks import (TASK_CORPORA, TASKS, Task, TaskScore, find_task, right_key_chance, right_key_mask,
                    right_key_scores, task_for_corpus)
from .tokenizer import CharTokenizer, UnknownCharactersError
from .train import Trainer, TrainEvent, TrainingDiverged, build_model, lr_at
from .comparison import RunRecord, RunShelf, attention_npz, differing_settings, history_table, results_table
from .race import RacePoint, scaling_race, softmax_signal
from .knockout import Knockout, KnockoutError, head_importance, knocked_out, mean_loss, validation_windows
from .viz import (
    PAGE,
    attention_heatmap,
    attention_panels,
    attention_row_figure,
    beliefs_figure,
    embeddings_figure,
    figures_html,
    lr_figure,
    importance_figure,
    compare_figure,
    race_figure,
    keys_figure,
    logit_lens_figure,
    positions_figure,
    similarity_figure,
    values_figure,
    weight_figure,
    loss_figure,
    position_labels,
    right_key_figure,
    scaling_figure,
    score_std_figure,
    step_attention_figure,
    steps_table,
    task_figure,
)

__all__ = [
    "PATTERNS", "AttentionRow", "HeadStats", "attention_row", "head_stats", "head_table", "attention_row_figure",
    "keys_figure", "values_figure", "weight_figure", "Beliefs", "beliefs", "last_query_attention", "next_logits", "beliefs_figure",
    "step_attention_figure", "embedding_pca", "logit_lens", "position_similarity", "embeddings_figure",
    "logit_lens_figure", "positions_figure", "similarity_figure", "importance_figure", "figures_html", "lr_figure",
    "character_table", "surprisal", "race_figure", "compare_figure",
    "RunRecord", "RunShelf", "attention_npz", "differing_settings", "history_table", "results_table",
    "scaling_race", "softmax_signal", "RacePoint",
    "Knockout", "KnockoutError", "head_importance", "knocked_out", "mean_loss", "validation_windows",
    "DEFAULT_PRESET", "PRESETS", "Preset", "Overfitting", "UnseenCharacters", "overfitting", "top_key_changes", "uniform_loss",
    "unseen_validation_chars",
    "BUILTIN_CORPORA", "DEFAULT_CORPUS", "DEMO_D_KS", "DEMO_SEED", "DEMO_SEQ_LEN", "DEMO_PROMPTS", "DEMO_SENTENCE", "MAX_CORPUS_BYTES",
    "MAX_NEW_TOKENS",
    "CharTokenizer", "Checkpoint", "CheckpointError", "ConfigError", "CorpusError", "DeviceError", "EvalRecord",
    "GPTConfig", "KVCache", "LabError", "Message", "MiniGPT", "N_", "NotOwnerError", "RunEntry", "RunLimitError", "RunRegistry", "RunSnapshot",
    "SamplingError", "Step", "TrainConfig", "TrainEvent", "Trainer", "TrainingDiverged", "TrainingRun",
    "UnknownCharactersError",
    "PAGE", "attention_heatmap", "attention_panels", "available_devices", "build_model", "check_corpus_fits", "check_memory_budget",
    "check_sampling", "checkpoint_files", "checkpoint_zip", "decode_corpus", "decode_corpus_as", "demo_prompts", "folder_zip",
    "from_pretrained", "generate", "get_batch", "latest_checkpoint", "load_corpus", "load_files", "load_pretrained",
    "load_zip", "loss_figure", "lr_at", "position_labels", "prepare_prompt", "pretrained_dir", "probe_text",
    "resolve_device", "save_checkpoint", "save_pretrained", "scaling_experiment", "scaling_figure",
    "score_std_figure", "steps_table", "stop_all_runs", "stop_orphaned_runs", "stream",
    "training_memory_bytes",
    "TASK_CORPORA", "TASKS", "Task", "TaskScore", "find_task", "right_key_chance", "right_key_mask",
    "right_key_scores", "task_for_corpus", "right_key_figure", "task_figure",
]
