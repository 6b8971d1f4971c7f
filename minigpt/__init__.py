"""MiniGPT Lab's library: a tiny character-level GPT to train, sample, save and look inside.

The public API is re-exported here; the app imports only from this module. Each name is
imported from its module on first use (PEP 562), so `python -m minigpt train` starts without
loading plotly and pandas, which only the figures and tables need.
"""
from __future__ import annotations

import importlib

_MODULES = {  # module -> the public names it holds
    "archive": ("checkpoint_zip", "folder_zip", "load_zip"),
    "checkpoint": ("Checkpoint", "CheckpointError", "checkpoint_files", "from_pretrained",
        "latest_checkpoint", "load_files", "save_checkpoint", "save_pretrained"),
    "config": ("DEFAULT_PRESET", "PRESETS", "ConfigError", "GPTConfig", "Preset", "TrainConfig",
        "check_memory_budget", "training_memory_bytes"),
    "data": ("BUILTIN_CORPORA", "DEFAULT_CORPUS", "DEMO_PROMPTS", "DEMO_SENTENCE", "MAX_CORPUS_BYTES",
        "CorpusError", "check_corpus_fits", "decode_corpus", "decode_corpus_as", "demo_prompts", "get_batch",
        "load_corpus", "probe_text"),
    "explain": ("PATTERNS", "AttentionRow", "Beliefs", "HeadStats", "attention_row", "beliefs",
        "character_table", "embedding_pca", "head_stats", "head_table", "last_query_attention", "logit_lens",
        "nearest_rows",
        "next_logits", "position_similarity", "surprisal"),
    "diagnosis": ("Overfitting", "UnseenCharacters", "overfitting", "top_key_changes", "uniform_loss",
        "unseen_validation_chars"),
    "device": ("DeviceError", "available_devices", "resolve_device"),
    "messages": ("N_", "LabError", "Message"),
    "model": ("KVCache", "MiniGPT"),
    "pretrained": ("load_pretrained", "pretrained_dir"),
    "registry": ("NotOwnerError", "RunEntry", "RunLimitError", "RunRegistry"),
    "runner": ("EvalRecord", "RunSnapshot", "TrainingRun", "stop_all_runs", "stop_orphaned_runs"),
    "sample": ("MAX_NEW_TOKENS", "REFILL_KEPT", "SamplingError", "Step", "check_sampling", "generate", "prepare_prompt",
        "stream"),
    "scaling": ("DEMO_D_KS", "DEMO_SEED", "DEMO_SEQ_LEN", "scaling_experiment"),
    "tasks": ("TASK_CORPORA", "TASKS", "Task", "TaskScore", "find_task", "right_key_chance",
        "right_key_mask", "right_key_scores", "task_for_corpus"),
    "tokenizer": ("CharTokenizer", "UnknownCharactersError"),
    "train": ("Trainer", "TrainEvent", "TrainingDiverged", "build_model", "estimate_loss", "lr_at",
        "validation_windows"),
    "comparison": ("RunRecord", "RunShelf", "attention_npz", "differing_settings", "history_table",
        "results_table"),
    "race": ("RacePoint", "scaling_race", "softmax_signal"),
    "knockout": ("Knockout", "KnockoutError", "head_importance", "knocked_out"),
    "viz": ("PAGE", "attention_heatmap", "attention_panels", "attention_row_figure", "beliefs_figure",
        "embeddings_figure", "figures_html", "lr_figure", "importance_figure", "compare_figure",
        "race_figure", "keys_figure", "logit_lens_figure", "positions_figure", "similarity_figure",
        "values_figure", "weight_figure", "loss_figure", "position_labels", "right_key_figure",
        "scaling_figure", "score_std_figure", "step_attention_figure", "steps_table", "task_figure"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
