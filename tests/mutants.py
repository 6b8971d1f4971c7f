"""Seed known bugs into a copy of the code, one at a time, and report which test catches each.

    python tests/mutants.py                   # every mutant; prints a Markdown table
    python tests/mutants.py --only race --only L10n   # the mutants whose name contains "race" or "L10n"
    python tests/mutants.py --check           # only check that every mutant's edit applies

Each mutant is an exact text edit (it must match once) of one file. The suite runs on a copy of
the working tree with `-x`: first the tests that mirror the mutated file (tests/minigpt/test_X.py
for minigpt/X.py, the page's tests for a page), then every other test but the browser and
torchrun ones (they need minutes and catch other kinds of bug). The first failing test is the one
that caught the mutant; a mutant that no test catches is a hole in the suite. Not a test module
itself (pytest collects test_*.py only).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REST = ["tests/cross/test_maths.py", "tests/minigpt", "tests/app", "tests/cross"]  # after the mirrored tests
SELECTION = ["-m", "not browser and not torchrun",
             # it re-applies every mutant to the tree, which fails where this script has just applied one
             "--deselect=tests/cross/test_hygiene.py::"
             "test_the_stress_and_mutant_scripts_name_files_that_exist_and_every_mutant_applies"]
# app modules whose tests live with the page that shows them
APP_MIRRORS = {"lesson": "lesson_page", "lesson_file": "lesson_file", "lesson_links": "lesson_page",
               "lesson_numbers": "lesson_page", "class_lesson": "class_lesson",
               "one_weight": "inside_page", "train_form": "train_page", "training": "train_page",
               "beliefs": "generate_page", "generation": "generate_page", "prompts": "generate_page",
               "heatmaps": "attention_page", "timelapse": "attention_page", "knockouts": "experiments_page",
               "scaling_view": "scaling_page", "lens": "model_page", "corpora": "uploads", "choices": "home_page",
               "charts": "compare", "glossary": "lesson_page", "board": "board_page", "classroom": "board_page",
               "post": "board_page", "kept_runs": "compare", "train_settings": "train_page", "navigation": "navigation",
               "site": "navigation", "url": "navigation", "fields": "train_page"}


LIBRARY_MIRRORS = {"preload": "process",  # the fork server's preload is tested with the children it forks
                   "keys": "store", "stored": "store_restart"}  # the keys and the runs a store reads back, with it
# minigpt/serve/<room>/X.py: the serving wing's tests are one folder, a file per room or per backend
SERVE_MIRRORS = {"remote": "process", "trainer_side": "process",
                 "ray_run": "cluster", "run": "run_interface", "recipe": "store_restart", "kept": "registry",
                 "server": "server"}
ROOM_TESTS = {"runs": "process", "store": "store", "classes": "board", "line": "registry", "host": "capacity"}
# modules whose half that writes to the store is tested with the store, across a restart
ALSO_MIRRORED = {"registry": ["tests/minigpt/serve/test_store_restart.py"],
                 "keeping": ["tests/minigpt/serve/test_store_restart.py"]}


def mirror(path: str) -> list[str]:
    """The test files that mirror `path`, the ones a newcomer changing it would run first."""
    parts, folder, name = Path(path).parts, Path(path).parent.name, Path(path).stem
    name = LIBRARY_MIRRORS.get(name, name)
    if parts[:2] == ("minigpt", "serve"):  # minigpt/serve/<room>/X.py -> tests/minigpt/serve/test_<X or its room>.py
        own = SERVE_MIRRORS.get(Path(path).stem, name)
        room = ROOM_TESTS.get(parts[2], own) if len(parts) > 3 else own
        candidates = [f"tests/minigpt/serve/test_{own}.py", f"tests/minigpt/serve/test_{room}.py",
                      f"tests/app/test_{own}.py"]
    elif parts[0] == "minigpt":  # minigpt/X.py -> tests/minigpt/test_X.py, minigpt/lab/X.py -> tests/minigpt/lab/test_X.py
        inner = "/".join(parts[1:-1])
        candidates = [f"tests/minigpt/{inner + '/' if inner else ''}test_{name}.py",
                      f"tests/minigpt/{inner}/test_{inner}.py"]  # the figures' one file
    elif parts[0] == "app":  # app/navigation.py, app/<room>/X.py
        candidates = [f"tests/app/test_{APP_MIRRORS.get(name, name)}.py", f"tests/app/test_{name}.py"]
    elif folder == "pages":
        candidates = [f"tests/app/test_{name.lower()}_page.py"]
    else:  # streamlit_app.py
        candidates = ["tests/app/test_home_page.py"]
    candidates += ALSO_MIRRORED.get(name, [])
    return list(dict.fromkeys(c for c in candidates if (ROOT / c).is_file()))


# name -> (file, [(old, new), ...])
MUTANTS = {
    "attention scale 1/d_k": ("minigpt/model.py", [(
        "return 1.0 / math.sqrt(self.config.d_k) if scaled", "return 1.0 / self.config.d_k if scaled")]),
    "attention scale 1/sqrt(d_model)": ("minigpt/model.py", [(
        "return 1.0 / math.sqrt(self.config.d_k) if scaled", "return 1.0 / math.sqrt(self.config.d_model) if scaled")]),
    "post-LN block": ("minigpt/model.py", [(
        "attn_out, weights = self.self_attn(self.norm1(x), **attn_kwargs)\n"
        "        x = x + self.dropout(attn_out)\n"
        "        x = x + self.dropout(self.ffn(self.norm2(x)))",
        "attn_out, weights = self.self_attn(x, **attn_kwargs)\n"
        "        x = self.norm1(x + self.dropout(attn_out))\n"
        "        x = self.norm2(x + self.dropout(self.ffn(x)))")]),
    "sampling multiplies by temperature": ("minigpt/sample.py", [(
        "filter_logits(logits / sampling.temperature,", "filter_logits(logits * sampling.temperature,")]),
    "val loss on the training split": ("minigpt/train.py", [(
        "self.val_windows = eval_windows(self.val_data,", "self.val_windows = eval_windows(self.train_data,")]),
    "a page's val loss on the training split": ("minigpt/train.py", [(
        "    _, val = split_tokens(ids, cfg.val_fraction, cfg.block_size, period)\n    return eval_windows(val,",
        "    val, _ = split_tokens(ids, cfg.val_fraction, cfg.block_size, period)\n    return eval_windows(val,")]),
    "a page's windows ignore a task's lines": ("app/state/loaded_model.py", [(
        "task.line_length if task is not None else 1)", "1)")]),
    "a page's windows on another seed than training's": ("minigpt/train.py", [(
        "cfg.eval_iters, cfg.seed + VAL_EVAL_SEED, period)", "cfg.eval_iters, cfg.seed, period)")]),
    "generate: the attention row over the last block_size, not what was read": ("app/parts/beliefs.py", [(
        "window = context[-step.context:]", "window = context[-loaded.block_size:]")]),
    "a step's context counted before the cache refills": ("minigpt/sample.py", [(
        "read = state.cache.length if use_cache else", "read = min(len(state.ids), block_size) if use_cache else")]),
    "lr set after optimizer.step()": ("minigpt/train.py", [(
        '        lr = lr_at(self.step, self.cfg)\n        for group in self.optimizer.param_groups:\n'
        '            group["lr"] = lr\n        self.optimizer.step()',
        '        self.optimizer.step()\n        lr = lr_at(self.step, self.cfg)\n'
        '        for group in self.optimizer.param_groups:\n            group["lr"] = lr')]),
    "warmup one step too long (<=)": ("minigpt/train.py", [(
        "if step < cfg.warmup_steps:", "if step <= cfg.warmup_steps:")]),
    "warmup starts at 0 (step / W)": ("minigpt/train.py", [(
        "cfg.lr * (step + 1) / cfg.warmup_steps", "cfg.lr * step / cfg.warmup_steps")]),
    "Attention page checkbox wired backwards": ("pages/Attention.py", [(
        "scaled=False if unscaled else None", "scaled=None if unscaled else False")]),
    "no sqrt(d_model) embedding scale": ("minigpt/model.py", [(
        "self.token_embed(idx) * math.sqrt(self.config.d_model)", "self.token_embed(idx)")]),
    "ReLU instead of GELU": ("minigpt/model.py", [("F.gelu(self.linear1(x))", "F.relu(self.linear1(x))")]),
    "decode: GELU without its 1/2": ("minigpt/model.py", [("_SQRT_HALF)), alpha=0.5).add_(b_2)", "_SQRT_HALF))).add_(b_2)")]),
    "batch: a row sees the keys past its own length": ("minigpt/model.py", [(
        "hidden = torch.arange(span, device=tokens.device) > positions.view(B, 1, 1, 1)",
        "hidden = torch.zeros(B, 1, 1, span, dtype=torch.bool)")]),
    "batch: GELU without its 1/2": ("minigpt/model.py", [("W_2.t(), alpha=0.5)", "W_2.t())")]),
    "batch: a finished row's gap not closed up": ("minigpt/batching.py", [(
        "self._cache.move_row(len(active), row, last.length)", "pass")]),
    "batch: every learner draws from the first one's generator": ("minigpt/batching.py", [(
        "generator=requests[row].generator", "generator=requests[rows[0]].generator")]),
    "batch: a full context refilled whole": ("minigpt/batching.py", [(
        "request.ids[-refill_keep(request.block_size):-1]", "request.ids[-request.block_size:-1]")]),
    "batch: top-k keeps one token too many": ("minigpt/batching.py", [("[[max(c, 1) - 1] for c in k]", "[[min(c, V - 1)] for c in k]")]),
    "batch: every row cut at the first row's top-p": ("minigpt/batching.py", [(
        "[[settings[row].top_p] for row in cut]", "[[settings[cut[0]].top_p] for row in cut]")]),
    "batch: learners step one by one": ("minigpt/batching.py", [(
        "admitted, self._pending = self._pending[:room], self._pending[room:]",
        "admitted, self._pending = self._pending[:min(room, 1 - len(self._active))], "
        "self._pending[min(room, 1 - len(self._active)):]")]),
    "decode: no 1/sqrt(d_k) on the scores": ("minigpt/model.py", [("beta=0, alpha=w.scale)", "beta=0, alpha=1.0)")]),
    "decode: the key written one slot early": ("minigpt/model.py", [(
        "keys.narrow(1, pos, 1).copy_(k)", "keys.narrow(1, max(pos - 1, 0), 1).copy_(k)")]),
    "decode: the new token's own key left out": ("minigpt/model.py", [(
        "keys.narrow(1, 0, pos + 1).transpose(1, 2)", "keys.narrow(1, 0, max(pos, 1)).transpose(1, 2)")]),
    "sampling: the draw searches the wrong side": ("minigpt/sample.py", [(
        "torch.searchsorted(cumulative, u, right=True)", "torch.searchsorted(cumulative, u, right=False)")]),
    "sampling: cumulative probabilities unscaled": ("minigpt/sample.py", [(
        "generator=generator, device=probs.device).mul_(cumulative[-1])", "generator=generator, device=probs.device)")]),
    "sin and cos swapped in positions": ("minigpt/model.py", [
        ("pe[:, 0::2] = torch.sin(", "pe[:, 0::2] = torch.cos("), ("pe[:, 1::2] = torch.cos(", "pe[:, 1::2] = torch.sin(")]),
    "causal mask lets a query see the next key": ("minigpt/model.py", [(
        "return k_pos <= q_pos  #", "return k_pos <= q_pos + 1  #")]),
    "head not tied to the embedding": ("minigpt/model.py", [(
        "self.lm_head.weight = self.token_embed.weight  # weight tying", "pass")]),
    "softmax over the query axis": ("minigpt/model.py", [(
        "weights = F.softmax(scores, dim=-1)", "weights = F.softmax(scores, dim=-2)")]),
    "heads split without the transpose": ("minigpt/model.py", [(
        "t.view(B, T, self.num_heads, self.d_k).transpose(1, 2)", "t.view(B, self.num_heads, T, self.d_k)")]),
    "KV cache restarts positions at 0": ("minigpt/model.py", [(
        "self.pos_encoding[past : past + idx.size(1)]", "self.pos_encoding[: idx.size(1)]")]),
    "no final LayerNorm": ("minigpt/model.py", [(
        "self.lm_head(self.final_norm(x))", "self.lm_head(x)")]),
    "top-k keeps k + 1": ("minigpt/sample.py", [(
        "torch.topk(logits, sampling.top_k, dim=-1)",
        "torch.topk(logits, min(sampling.top_k + 1, logits.size(-1)), dim=-1)")]),
    "top-p drops the token that crosses p": ("minigpt/sample.py", [(
        "drop_sorted = mass_before >= sampling.top_p", "drop_sorted = mass_before + probs > sampling.top_p")]),
    "step probability after temperature": ("minigpt/sample.py", [(
        "model_probs = F.softmax(logits, dim=-1)", "model_probs = probs")]),
    "stream(seed=None) reseeds the global generator": ("minigpt/sample.py", [(
        "generator.seed()  #", "generator.manual_seed(torch.seed())  #")]),
    "dropout from the global generator": ("minigpt/train.py", [
        ("model.use_generator(self.dropout_rng)", "model.use_generator(None)"),
        ("self.dropout_rng.manual_seed(((self.cfg.seed", "torch.manual_seed(((self.cfg.seed")]),
    "AdamW ignores the configured betas": ("minigpt/train.py", [(
        "lr=cfg.lr, betas=tuple(cfg.betas), fused=fused)", "lr=cfg.lr, fused=fused)")]),
    "no gradient clipping": ("minigpt/train.py", [("if self.cfg.grad_clip > 0:", "if self.cfg.grad_clip < 0:")]),
    "weight decay on biases and LayerNorms": ("minigpt/train.py", [
        ("if p.dim() >= 2]", "if p.dim() >= 1]"), ("if p.dim() < 2]", "if p.dim() < 1]")]),
    "cosine decays to 0, not min_lr": ("minigpt/train.py", [(
        "return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.lr - cfg.min_lr)",
        "return 0.5 * (1.0 + math.cos(math.pi * progress)) * cfg.lr")]),
    "evaluation with dropout on": ("minigpt/model.py", [(
        "    was_training = model.training\n    model.eval()\n", "    was_training = model.training\n    model.train()\n")]),
    "targets not shifted": ("minigpt/data.py", [(
        "return windows[:, :-1], windows[:, 1:]", "return windows[:, :-1], windows[:, :-1]")]),
    "validation split is the head": ("minigpt/data.py", [(
        "return ids[:n_train], ids[n_train:]", "return ids[-n_train:], ids[:-n_train]")]),
    "Scaling figure shows scaled as unscaled": ("minigpt/viz/scaling.py", [(
        '"y": table[f"{metric}_unscaled"].to_numpy(), "name": _("no scaling")',
        '"y": table[f"{metric}_scaled"].to_numpy(), "name": _("no scaling")')]),
    "layer view shows the max over heads": ("minigpt/viz/attention.py", [(
        "attention[l].mean(axis=0)", "attention[l].max(axis=0)")]),
    "Generate page ignores the temperature": ("app/views/generation.py", [
        ("from dataclasses import dataclass\n", "from dataclasses import dataclass, replace\n"),
        ("shared_results.written(loaded, prepared, s.max_new, s.sampling,",
         "shared_results.written(loaded, prepared, s.max_new, replace(s.sampling, temperature=0.8),")]),
    "loader skips the sha256 check": ("minigpt/checkpoint.py", [(
        "if _sha256(data) != sha256:", "if False:")]),
    "run folder loads the oldest checkpoint": ("minigpt/checkpoint.py", [(
        "return max(folders, key=", "return min(folders, key=")]),
    # a learner's first hour
    "default corpus is the demo's paragraph": ("minigpt/corpus.py", [(
        'DEFAULT_CORPUS = "course-zh"', 'DEFAULT_CORPUS = "demo-zh"')]),
    "B1 default prompt ends in a space": ("app/state/loaded_model.py", [(
        'words[0][:8] + (" " if " " in model.tokenizer.stoi else "")', 'words[0][:8] + " "')]),
    "B2 uploaded model takes texts from the current corpus": ("app/state/loaded_model.py", [
        ('probe = checkpoint.meta.get("probe_text")', "probe = None"),
        ('if corpus in BUILTIN_CORPORA else ""', "if corpus in BUILTIN_CORPORA else current_corpus().text")]),
    "B5 form not filled from the reattached run": ("app/state/train_settings.py", [(
        "fill(*(run_configs or (", "fill(*(None or (")]),
    "B7 top-key changes miscounted": ("minigpt/lab/diagnosis.py", [(
        "changed = scaled.argmax(axis=-1) != unscaled.argmax(axis=-1)",
        "changed = scaled.argmax(axis=-1) != scaled.argmax(axis=-1)")]),
    "B9 old answer kept on a new request": ("app/views/generation.py", [(
        "    st.session_state.pop(GENERATION_KEY, None)\n", "")]),
    "B10 no successor for a replaced run": ("minigpt/serve/line/memory.py", [(
        "_remember(self._successors, entry.run_id, successor.run_id)", "pass")]),
    "B11 top-k above the vocabulary not said": ("app/views/generation.py", [(
        "if k >= loaded.tokenizer.vocab_size:", "if False:")]),
    "B12 GBK refused": ("minigpt/corpus.py", [(
        'text, encoding = _gbk_or_refuse(raw, source, err.start), "GBK"',
        'raise CorpusError(f"{source} is not valid UTF-8 (byte {err.start}).") from None')]),
    "a UTF-8 byte-order mark kept as the corpus's first character (issue 49)": ("minigpt/corpus.py", [(
        'text, encoding = raw.decode("utf-8-sig"), "UTF-8"', 'text, encoding = raw.decode("utf-8"), "UTF-8"')]),
    "B12 lr axis may go negative": ("minigpt/viz/training.py", [(
        '"range": [0, 1.05 * max_lr if max_lr > 0 else 1]', '"range": None')]),
    "step axes padded below step 0": ("minigpt/viz/_layout.py", [(
        'axis = {**axis_title(text), "rangemode": "nonnegative"}', 'axis = axis_title(text)')]),
    "a young run's steps ticked in fractions past its first step": ("minigpt/viz/_layout.py", [(
        "if max(steps, default=0) < WHOLE_STEPS:", "if max(steps, default=0) < 1:")]),
    "Start refused with every slot taken (issue 48)": ("app/views/training.py", [(
        'key="start", type="primary", disabled=not settings_ok,',
        'key="start", type="primary", disabled=not settings_ok or line_ahead,')]),
    "early stopping never stops": ("minigpt/train.py", [(
        "if evaluating and self.step < self.cfg.max_steps and self.patience_ran_out():", "if False:")]),
    "overfitting never reported": ("minigpt/lab/diagnosis.py", [(
        "if step > best[0] and val > best[2] + rise and train < best[1]:", "if False:")]),
    "unseen validation characters checked against the whole text": ("minigpt/lab/diagnosis.py", [(
        "seen = set(text[:n_train])", "seen = set(text)")]),
    "tokens/s is the last interval's": ("minigpt/serve/runs/run.py", [(
        "return statistics.median(speeds) if speeds else 0.0", "return speeds[-1] if speeds else 0.0")]),
    "tokens/s: the upper of the two middle speeds": ("minigpt/serve/runs/run.py", [(
        "return statistics.median(speeds) if speeds else 0.0",
        "return sorted(speeds)[len(speeds) // 2] if speeds else 0.0")]),
    "a step in flight lands after pause()": ("minigpt/train.py", [(
        "                if gate is not None and not gate.is_running():\n"
        "                    continue  # paused or stopped during forward/backward: drop this step\n", "")]),
    "pause() returns before the child has paused (worker)": ("minigpt/serve/runs/remote.py", [(
        'self._command("pause", change=lambda state: "paused" if state == "running" else state, timeout=timeout)',
        'self._command("pause", change=lambda state: "paused" if state == "running" else state)')]),
    "a run just started is not counted until its child says so (worker)": ("minigpt/serve/runs/remote.py", [(
        'return not self._dead and (self._status["alive"] or self._status["done"] < self._sent)',
        'return not self._dead and self._status["alive"]')]),
    "a run nobody keeps holds its child for good (worker)": ("minigpt/serve/runs/process.py", [(
        "args=(weakref.ref(self), self._conn, self._process)", "args=(lambda run=self: run, self._conn, self._process)")]),
    "a child that died leaves its run running (worker)": ("minigpt/serve/runs/remote.py", [(
        '            if self._state in ("running", "paused", "idle"):\n                self._state = "error"\n',
        '            if False:\n                self._state = "error"\n')]),
    "the child trains at the server's priority (worker)": ("minigpt/serve/runs/trainer_side.py", [(
        "run_id=spec.run_id, nice=spec.nice, history=history", "run_id=spec.run_id, history=history")]),
    "the fork server forks children without its warm-up (worker)": ("minigpt/serve/runs/preload.py", [(
        "    warm_up()\n", "    pass\n")]),
    "a failed warm-up ends the fork server (worker)": ("minigpt/serve/runs/preload.py", [(
        "except Exception:", "except ImportError:")]),
    "the fork server's warm-up leaves an OpenMP pool behind (worker)": ("minigpt/serve/runs/process.py", [(
        "    torch.set_num_threads(1)  # no OpenMP pool", "    pass  # no OpenMP pool")]),
    "a run closed mid-step is not closed (runner)": ("minigpt/serve/runs/thread.py", [(
        "            if self.is_alive():\n                self._release_on_exit = True\n                return\n",
        "            if self.is_alive():\n                self._state = \"stopped\"\n                return\n")]),
    "removed upload stays the corpus": ("app/views/uploads.py", [(
        "        forget_uploaded_corpus()\n", "        pass\n")]),
    "B8 key labels on their side": ("minigpt/viz/attention.py", [(
        '"ticktext": ticks, "tickangle": 0,', '"ticktext": ticks, "tickangle": 90,')]),
    "B8 long texts not paged": ("minigpt/viz/attention.py", [(
        "POSITIONS_PER_HEATMAP = 24  #", "POSITIONS_PER_HEATMAP = 1000  #")]),
    "1 layers": ("app/state/train_settings.py", [('layers=n_("{n} layer", "{n} layers", model.num_layers)',
                                                  'layers=_("{n} layers", n=model.num_layers)')]),
    "scaling caption claims the demo's numbers at any settings": ("app/views/scaling_view.py", [(
        "if demo_settings:", "if True:")]),
    "a kept knock-out's numbers shown for another knock-out": ("app/state/shared_results.py", [(
        "return _measured(loaded.identity, _knockout_key(knockout), prompt,",
        "return _measured(loaded.identity, knockout.empty, prompt,")]),
    "two uploads of the same name and step taken for one model": ("app/state/shared_results.py", [(
        "return _measured(loaded.identity, _knockout_key(knockout), prompt,",
        "return _measured((loaded.vocab_id, loaded.detail, loaded.steps), _knockout_key(knockout), prompt,")]),
    "the score-std chart left outside the scaling fragment, on the first settings": ("pages/Scaling.py", [(
        "\nscaling_view.experiment()\n",
        "\nscaling_view.experiment()\nimport streamlit as st\nfrom app.chrome.i18n import _\nfrom minigpt.viz import "
        "score_std_figure\nst.plotly_chart(score_std_figure(scaling_view.scaling_table(scaling_view.DEMO_D_KS, "
        "scaling_view.DEMO_SEQ_LEN, scaling_view.DEMO_SEED, 1), tr=_), key='score_std_chart')\n")]),
    "the score-std chart left outside the scaling fragment (view)": ("app/views/scaling_view.py", [(
        '        st.plotly_chart(score_std_figure(table, tr=_), key="score_std_chart", config=charts.config())\n',
        "        pass\n")]),
    # looking inside: each of these shows a learner a wrong number
    "a row's mask lets the query see the future (inside)": ("minigpt/lab/heads.py", [(
        "allowed = np.arange(len(ids)) <= query", "allowed = np.arange(len(ids)) >= 0")]),
    "a row divides by d_k, not its root (inside)": ("minigpt/lab/heads.py", [(
        "divisor = 1.0 / model.attention_scale(scale_attention)", "divisor = model.config.d_k")]),
    "previous-character score reads the same key (inside)": ("minigpt/lab/heads.py", [(
        "previous=float(w[t, t - 1].mean())", "previous=float(w[t, t].mean())")]),
    "next-character bars ignore top-k (inside)": ("minigpt/lab/predictions.py", [
        ("from dataclasses import dataclass\n", "from dataclasses import dataclass, replace\n"),
        ("final = next_token_distribution(logits, sampling).numpy()",
         "final = next_token_distribution(logits, replace(sampling, top_k=None)).numpy()")]),
    "logit lens skips the final LayerNorm (inside)": ("minigpt/lab/predictions.py", [(
        "model.lm_head(model.final_norm(x))[0]", "model.lm_head(x)[0]")]),
    # tasks whose answer is known: each of these scores a model wrongly, or trains it on broken lines
    "reverse's right key one to the right (task)": ("minigpt/lab/tasks.py", [(
        "return [[L - 1 - i] for i in range(L)]", "return [[L - i] for i in range(L)]")]),
    "task windows start anywhere (task)": ("minigpt/lab/tasks.py", [(
        '{"period": task.line_length, "scorer": TaskScorer(task)}', '{"scorer": TaskScorer(task)}')]),
    "accuracy reads the row after the answer's (task)": ("minigpt/lab/tasks.py", [(
        "guesses = logits[:, L: 2 * L].argmax(-1)", "guesses = logits[:, L + 1: 2 * L + 1].argmax(-1)")]),
    "right-key score averages every row (task)": ("minigpt/lab/tasks.py", [(
        "rows = mask.any(axis=1)\n", "rows = np.ones(T, dtype=bool)\n")]),
    "loss floor forgets the next line's first letter (task)": ("minigpt/lab/tasks.py", [(
        "if j % self.line_length < self.length)", "if 0 < j % self.line_length < self.length)")]),
    "time-lapse outlines nothing (task)": ("app/views/timelapse.py", [(
        'key="timelapse", expected=probe_line.mask if probe_line else None)', 'key="timelapse")')]),
    # knock-outs: each of these reports what a different part did
    "a zeroed head zeroes W_O's rows, not its columns (knock-out)": ("minigpt/lab/knockout.py", [(
        "W_O.weight[:, head * d_k : (head + 1) * d_k] = 0", "W_O.weight[head * d_k : (head + 1) * d_k, :] = 0")]),
    "the window lets one key too many through (knock-out)": ("minigpt/model.py", [(
        "[None, :] > q_pos - window", "[None, :] >= q_pos - window")]),
    "the shuffled head stays tied (knock-out)": ("minigpt/lab/knockout.py", [(
        "twin.lm_head.weight = torch.nn.Parameter(embedding[order.to(embedding.device)].clone())  # untied",
        "twin.token_embed.weight.data = embedding[order.to(embedding.device)].clone()")]),
    "knock-outs change the shared model (knock-out)": ("minigpt/lab/knockout.py", [(
        "twin = copy.deepcopy(model).eval()  # deepcopy", "twin = model.eval()  # deepcopy")]),
    # the lesson: each of these teaches a wrong number, or lets a wrong answer or a wrong step through
    "the loss table reads the character at the same position, not the next (lesson)": ("minigpt/lab/predictions.py", [(
        "torch.tensor(ids[1:])]).cpu()", "torch.tensor(ids[:-1])]).cpu()")]),
    "the embedding length left unscaled (lesson)": ("minigpt/lab/predictions.py", [(
        '"scaled": length * model.config.d_model ** 0.5}', '"scaled": length * model.config.d_model}')]),
    "the learning-rate chart one step late (lesson)": ("minigpt/train.py", [(
        "return [lr_at(step, cfg) for step in range(cfg.max_steps)]",
        "return [lr_at(max(step - 1, 0), cfg) for step in range(cfg.max_steps)]")]),
    "any answer is right (lesson)": ("app/parts/class_lesson.py", [(
        "if options.index(answer) == step.answer:", "if answer in options:")]),
    "Next skips a step (lesson)": ("app/parts/lesson_links.py", [(
        "on_click=go, args=(n + 1, on_move),", "on_click=go, args=(n + 2, on_move),")]),
    # the class follows the teacher (issue 49)
    "a follower stays on their own step (class lesson)": ("app/parts/class_lesson.py", [(
        "        if now.step != n and 1 <= now.step <= len(followed.steps):", "        if False:")]),
    "the answer shows before the reveal (class lesson)": ("app/parts/class_lesson.py", [(
        "    waiting = counted and not revealed  #", "    waiting = False  #")]),
    "the lesson's one-click run in a class takes the preset's seed (lesson)": ("app/views/lesson.py", [(
        "    kept_runs.start_run_keeping_the_last(corpus, preset.model, train)",
        "    kept_runs.start_run_keeping_the_last(corpus, preset.model, preset.train)")]),
    "a long pasted kept name is dropped, not cut (fields)": ("app/chrome/fields.py", [(
        "        st.session_state[key] = value[:limit]", "        st.session_state[key] = \"\"")]),
    "a reveal read for the teacher's step, not the learner's (class lesson)": ("app/parts/class_lesson.py", [(
        "    revealed = leading and n in now.revealed", "    revealed = leading and now.step in now.revealed")]),
    "a learner's tag not salted per class (keys)": ("minigpt/serve/store/keys.py", [(
        "    return hashlib.sha256(salt + value.encode()).digest()", "    return hashlib.sha256(value.encode()).digest()")]),
    "a browser's learner token ignored: every session a new learner (class lesson)": ("app/state/classroom.py", [(
        "        tokens[code] = sent if TOKEN.fullmatch(sent) else new_learner_token()",
        "        tokens[code] = new_learner_token()")]),
    "a revealed step's tally still moves (board)": ("minigpt/serve/classes/lesson.py", [(
        "            if step in board.revealed:", "            if False:")]),
    "the counts name no option right (class lesson)": ("minigpt/serve/classes/lesson.py", [(
        "        return [chosen.count(option) for option in range(options)]",
        "        return [len(chosen)] * options")]),
    "the teacher's key kept in clear (board)": ("minigpt/serve/classes/roster.py", [(
        "ClassBoard(code, keys.hashed(key), secrets.token_bytes(16), now, now)",
        "ClassBoard(code, key.encode(), secrets.token_bytes(16), now, now)"), (
        "        return keys.matches(key, self.teacher_key)",
        "        return isinstance(key, str) and key.encode() == self.teacher_key")]),
    "a refresh forgets the teacher (board)": ("app/state/classroom.py", [(
        "        become_teacher(code, cookies().get(COOKIE_PREFIX + code))", "        pass")]),
    "the learner's link carries the teacher's language (board)": ("app/views/board.py", [(
        "    link = url.link(**{url.CLASS: board.code})", "    link = url.link(**{url.CLASS: board.code, url.LANG: language()})")]),
    "identical runs not said to coincide (board)": ("minigpt/serve/classes/board.py", [(
        "    return len(both) >= 2 and all(ours[step] == theirs[step] for step in both)", "    return False")]),
    "emoji joiners dropped (board)": ("minigpt/serve/classes/posts.py", [(
        "        elif c in EMOJI_JOINERS and kept", "        elif c in () and kept")]),
    # the localisation: each of these shows English to a Chinese learner, or loses the choice
    "a note shown without the catalogs (L10n)": ("app/views/generation.py", [(
        'st.caption(_("Note: {note}", note=md(error_text(note))))', 'st.caption(f"Note: {note}")')]),
    "sidebar links untranslated (L10n)": ("app/navigation.py", [(
        "st.page_link(linked.script, label=_(linked.label)", "st.page_link(linked.script, label=linked.label")]),
    "upload refusal in English (L10n)": ("app/state/corpora.py", [(
        "    message = error_text(err)\n", "    message = str(err)\n")]),
    "figure axes untranslated (L10n)": ("app/views/training.py", [(
        "overfit=over, floor=floor, tr=_)", "overfit=over, floor=floor)")]),
    "numbers ignore the language (L10n)": ("app/chrome/i18n.py", [(
        'return text.translate(str.maketrans({".": decimal, ",": group}))', "return text")]),
    "?lang= ignored (L10n)": ("app/chrome/i18n.py", [(
        "from_code(st.query_params.get(url.LANG)) or ", "")]),
    "switch forgets the language across pages (L10n)": ("app/chrome/i18n.py", [(
        "    st.session_state[LANG_KEY] = st.session_state[LANG_WIDGET_KEY]\n", "")]),
    "look-alike punctuation dropped, not swapped (L10n)": ("minigpt/tokenizer.py", [(
        "            elif twin in self.stoi:\n                kept.append(twin)\n", "")]),
    "unknown characters not marked in place (L10n)": ("app/parts/prompts.py", [(
        "    box.markdown(highlighted(text, set(unknown)))\n", "")]),
    # the issue-24 audit's survivors: each now has a test against an independent reference
    "watchers keep an abandoned run alive (registry)": ("minigpt/serve/line/registry.py", [(
        "if entry is not None and entry.is_owner(key):\n                entry.last_seen",
        "if entry is not None:\n                entry.last_seen")]),
    "a save renamed into place before its files are on disk (checkpoint)": ("minigpt/checkpoint.py", [(
        "                out.flush()\n                os.fsync(out.fileno())\n", "                out.flush()\n")]),
    "a save's folder listing not on disk before the rename (checkpoint)": ("minigpt/checkpoint.py", [(
        "        _fsync_dir(staging)\n        os.replace(staging, target)", "        os.replace(staging, target)")]),
    "a zip's total unpacked size unchecked (archive)": ("minigpt/archive.py", [(
        "    if total > MAX_TOTAL_UNCOMPRESSED:", "    if False:")]),
    "the mask step's row sums taken down the columns (lesson)": ("app/views/lesson.py", [(
        "sums = attention[0, 0].sum(axis=-1)", "sums = attention[0, 0].sum(axis=0)")]),
    "the one-weight view scales an unscaled model's row (inside)": ("minigpt/lab/heads.py", [(
        "divisor = 1.0 / model.attention_scale(scale_attention)",
        "divisor = 1.0 / model.attention_scale(scale_attention is not False)")]),
    # the √d_k race, in the library
    "race: the score gradient without the softmax's Jacobian": ("minigpt/lab/scaling_race.py", [(
        "ds = w * (g - (w * g).sum(-1, keepdim=True))", "ds = w * g")]),
    "race: the Jacobian's norm with one cubic term": ("minigpt/lab/scaling_race.py", [(
        "(squares - 2 * (w ** 3).sum(-1) + squares ** 2)", "(squares - (w ** 3).sum(-1) + squares ** 2)")]),
    "race: both models scaled": ("minigpt/lab/scaling_race.py", [(
        "build_model(replace(config, scale_attention=scaled)", "build_model(replace(config, scale_attention=True)")]),
    # (summing over the queries instead of the keys is no bug: both means divide one total by B·H·T)
    "race: entropy averaged over the keys, not summed": ("minigpt/lab/scaling_race.py", [(
        "entropy.append(-(w * torch.log(w.clamp_min(1e-30))).sum(-1).mean().item())",
        "entropy.append(-(w * torch.log(w.clamp_min(1e-30))).mean(-1).mean().item())")]),
    # the √d_k race, on the Experiments page
    "race page: the verdict names the layer where scaling mattered least": ("app/views/scaling_race.py", [(
        "layer = int((scaled.jacobian / unscaled.jacobian.clip(min=1e-12)).argmax())",
        "layer = int((scaled.jacobian / unscaled.jacobian.clip(min=1e-12)).argmin())")]),
    "race page: two heads, so d_k is half the label's": ("app/views/scaling_race.py", [(
        "race_configs(tokenizer.vocab_size, d_k, layers, steps, lr, device=",
        "race_configs(tokenizer.vocab_size, d_k // 2, layers, steps, lr, heads=2, device=")]),
    "race page: races without waiting for its turn in the line": ("app/views/scaling_race.py", [(
        "if ticket is not None and race_turn(ticket):", "if ticket is not None:")]),
    "race page: the verdict's ratio upside down": ("app/views/scaling_race.py", [(
        "ratio = float(scaled.jacobian[layer] / max(unscaled.jacobian[layer], 1e-12))",
        "ratio = float(unscaled.jacobian[layer] / max(scaled.jacobian[layer], 1e-12))")]),
    # runs kept for comparison, in the library
    "comparison: two runs of one name share a column": ("minigpt/lab/run_records.py", [(
        'out.append(r.name if seen[r.name] == 1 else f"{r.name} ({seen[r.name]})")', "out.append(r.name)")]),
    "comparison: every setting listed as differing": ("minigpt/lab/run_records.py", [(
        "if len({repr(v) for v in values}) > 1}", "if len({repr(v) for v in values}) >= 1}")]),
    "comparison: the shelf lets the newest go": ("minigpt/lab/run_records.py", [(
        "self._records.popitem(last=False)", "self._records.popitem(last=True)")]),
    "comparison: best val loss is the last one": ("minigpt/lab/run_records.py", [(
        '"best_val": [min(r.val_loss) if r.val_loss', '"best_val": [r.val_loss[-1] if r.val_loss')]),
    "comparison: the last train loss is the first one logged (issue 49)": ("minigpt/lab/run_records.py", [(
        '"train_loss": [r.train_loss[-1] if r.train_loss', '"train_loss": [r.train_loss[0] if r.train_loss')]),
    # runs kept for comparison, on the pages
    "compare page: the newest kept run let go to make room": ("app/state/kept_runs.py", [(
        "        del kept[0]\n", "        del kept[-1]\n")]),
    "compare page: a run that never stepped is kept when replaced": ("app/state/kept_runs.py", [(
        "if step > 0 and (entry.run_id, step)", "if step >= 0 and (entry.run_id, step)")]),
    "compare page: Keep keeps a run that has not trained a step": ("app/parts/compare.py", [(
        "        if entry.run.snapshot().step == 0:", "        if entry.run.snapshot().step < 0:")]),
    "compare page: a third run of one name collides": ("app/state/kept_runs.py", [(
        '    while f"{name} ({n})" in taken:\n        n += 1\n    return f"{name} ({n})" if name else next_name()',
        '    return f"{name} ({n})" if name else next_name()')]),
    "compare page: a link's missing runs not said": ("app/state/kept_runs.py", [(
        "        if len(found) < len(linked):", "        if False:")]),
    # the run registry
    "registry: the cap lets one run too many train": ("minigpt/serve/line/book.py", [(
        "self._busy_locked() >= self.max_runs", "self._busy_locked() > self.max_runs")]),
    "registry: anyone may replace a run": ("minigpt/serve/line/book.py", [(
        "            if old is not None and not old.is_owner(replace[1]):\n                old = None\n", "")]),
    "line: last in, first out": ("minigpt/serve/line/book.py", [(
        "if e.is_waiting()), key=lambda e: e.order)", "if e.is_waiting()), key=lambda e: -e.order)")]),
    "line: a second Start sends the owner's waiting run to the back": ("minigpt/serve/line/book.py", [(
        "                entry.order = old.order\n", "                entry.order = next(self._orders)\n")]),
    "line: the places ignore the class": ("minigpt/serve/line/limit.py", [(
        "return max(WAITING_FLOOR, class_learners + slots)", "return max(WAITING_FLOOR, slots)")]),
    "line: a wait of any length is taken": ("minigpt/serve/line/limit.py", [(
        "found.seconds > LONGEST_WAIT_SECONDS", "found.seconds > 1000 * LONGEST_WAIT_SECONDS")]),
    "line: the busy note never speaks": ("minigpt/serve/line/slowdown.py", [(
        "pace >= SLOW_SHARE * usual.steps_per_sec", "pace >= 0")]),
    "line: the busy note's pace over the whole run": ("minigpt/serve/line/slowdown.py", [(
        "e.elapsed <= last.elapsed - PRESENT_SECONDS), history[0])", "False), history[0])")]),
    "line: no length limit": ("minigpt/serve/line/limit.py", [(
        "    if waiting >= places:\n        line_full(", "    if False:\n        line_full(")]),
    "line: an absent owner's waiting run waits as long as a run is kept": ("minigpt/serve/line/book.py", [(
        "(self.waiting_idle_seconds if entry.is_waiting() else self.idle_seconds)", "self.idle_seconds")]),
    "line: a waiting run takes the slot that frees last": ("minigpt/serve/line/waiting.py", [(
        "    return free[0]\n", "    return max(free)\n")]),
    "line: a whole run's pace is the latest, not the median of the last few": ("minigpt/serve/line/waiting.py", [(
        "return Pace(statistics.median(self._whole[shape]), True)", "return Pace(self._whole[shape][-1], True)")]),
    "line: a running run's time left forgets how long it has trained": ("minigpt/serve/line/waiting.py", [(
        "left = busy.max_steps / pace.steps_per_sec - busy.since", "left = busy.max_steps / pace.steps_per_sec")]),
    "line: a pace scaled the wrong way by the work": ("minigpt/serve/line/waiting.py", [(
        "paces[near] * work_per_step(near) / want", "paces[near] * want / work_per_step(near)")]),
    "line: a run that ended keeps its slot": ("minigpt/serve/line/entry.py", [(
        "        return self.run.state in ACTIVE_STATES and self.run.is_alive()",
        "        return self.run.state in ACTIVE_STATES or self.run.state in ENDED_STATES")]),
    "line: a paused run holds its slot for good while others wait": ("minigpt/serve/line/book.py", [(
        "and now - e.last_steered > self.paused_grace_seconds]", "and False]")]),
    "line: a granted slot nobody claims is held for good": ("minigpt/serve/line/book.py", [(
        "            return now - run.granted > CLAIM_SECONDS\n", "            return False\n")]),
    "line: a run cancelled while it is built trains all the same": ("minigpt/serve/line/registry.py", [(
        "if action in (\"cancel\", \"stop\") and run.state in (\"waiting\", \"starting\"):",
        "if action in (\"cancel\", \"stop\") and run.state == \"waiting\":")]),
    "kept: a big run's time-lapse never thinned": ("minigpt/serve/runs/kept.py", [(
        "        if max_bytes is not None:\n            self._thin(max_bytes)\n", "")]),
    "capacity: the larger of the affinity and the quota": ("minigpt/serve/host/capacity.py", [(
        "min(cpus, quota) if quota is not None else cpus", "max(cpus, quota) if quota is not None else cpus")]),
    "a run trains at the server's own priority (runner)": ("minigpt/serve/runs/thread.py", [(
        "        name_os_thread(THREAD_NAME)\n        lower_priority(self.nice)\n", "        name_os_thread(THREAD_NAME)\n")]),
    "a learner's run built without the priority the server is told (server)": ("minigpt/serve/server.py", [(
        "        spec = replace(spec, nice=default if self.settings.nice is None else self.settings.nice)",
        "        spec = replace(spec)")]),
    "cluster: a run that moved machines keeps the steps it trained again twice": ("minigpt/serve/runs/ray_run.py", [(
        '            self._history.extend(e for e in news["history"] if e.step > last_step)',
        '            self._history.extend(news["history"])')]),
    "cluster: an actor that dies on a machine that stays is moved as if its machine had left": (
        "minigpt/serve/runs/cluster.py", [(
            '        if "its node has died" in str(err):',
            '        if True:')]),
    "cluster: a run that ends keeps its actor's CPU until it is closed": ("minigpt/serve/runs/ray_run.py", [(
        "        if ended:\n            self._let_actor_go()",
        "        if False:\n            self._let_actor_go()")]),
    "cluster: the slots ignore the GPUs runs take a share of": ("minigpt/serve/runs/cluster.py", [(
        "        return min(by_cpu, int(self.gpus / gpu_per_run + 1e-9))",
        "        return by_cpu")]),
    "a learner's child trains at the library's priority whatever the server is told (server)": (
        "minigpt/serve/server.py", [(
            "nice=default if self.settings.nice is None else self.settings.nice)",
            "nice=default if self.settings.nice is None or where != \"thread\" else self.settings.nice)")]),
    "a learner's child trains at the server's priority when nothing is said (server)": ("minigpt/serve/server.py", [(
        "        default = CHILD_NICE if where != \"thread\" else DEFAULT_THREAD_NICE",
        "        default = DEFAULT_THREAD_NICE")]),
    "registry: kept runs trimmed the most recently seen first": ("minigpt/serve/line/memory.py", [(
        "if i in self._entries), key=lambda e: e.last_seen):", "if i in self._entries), key=lambda e: -e.last_seen):")]),
    # zips
    "archive: a bomb's compression ratio unchecked": ("minigpt/archive.py", [(
        "if info.file_size > _RATIO_FREE_BYTES and ratio > MAX_COMPRESSION_RATIO:", "if False:")]),
    "archive: '..' refused only at the start of a name": ("minigpt/archive.py", [(
        'if ".." in _parts(name):', 'if _parts(name)[:1] == [".."]:')]),
    # Not a mutant: "a header's size not believed while reading" (archive._read's cap without
    # info.file_size) behaves the same, because zipfile itself stops an entry at its declared size and
    # then checks the CRC ("Bad CRC-32"); the cap is a second wall, and no test can tell it is missing.
    "archive: one entry per file name not enforced": ("minigpt/archive.py", [(
        "    if duplicates:\n        raise", "    if False:\n        raise")]),
    "archive: the total unpacked size capped 1000 times too high (issue 49)": ("minigpt/archive.py", [(
        "MAX_TOTAL_UNCOMPRESSED = 128 * 2**20", "MAX_TOTAL_UNCOMPRESSED = 128 * 2**20 * 1000")]),
    # the lesson
    "the lesson quotes the Tiny preset's warmup as its steps (lesson)": ("app/state/lesson_numbers.py", [(
        "tiny_steps=tiny.max_steps,", "tiny_steps=tiny.warmup_steps,")]),
    "the mask step counts the diagonal as above it (lesson)": ("app/views/lesson.py", [(
        "above = float(np.triu(attention[0, 0], k=1).sum())", "above = float(np.triu(attention[0, 0], k=0).sum())")]),
    # the one-weight view
    "one weight: the checkbox wired backwards (inside)": ("app/state/shared_results.py", [(
        "scale_attention=False if unscaled else None)", "scale_attention=None if unscaled else False)")]),
    "one weight: the caption's divisor is always √d_k (inside)": ("app/parts/one_weight.py", [(
        "key=labels[top], divisor=row.divisor,", "key=labels[top], divisor=config.d_k ** 0.5,")]),
    "one weight: the caption's √d_k taken of d_model (inside)": ("app/parts/one_weight.py", [(
        "d_k=config.d_k, root=config.d_k ** 0.5)", "d_k=config.d_k, root=config.d_model ** 0.5)")]),
    "one weight: the view's key is the least attended (inside)": ("app/parts/one_weight.py", [(
        "top = int(row.weights.argmax())", "top = int(row.weights.argmin())")]),
    # a class's questions, answered once for every session
    "a class's attention keyed without its text (shared)": ("app/state/shared_results.py", [
        ("def _attention_maps(identity: str, text: str,", "def _attention_maps(identity: str, _text: str,"),
        ("_loaded.tokenizer.encode(text)], device", "_loaded.tokenizer.encode(_text)], device")]),
    "a knocked-out copy's attention shared as the whole model's (shared)": ("app/state/shared_results.py", [(
        "key = _knockout_key(knockout) if knockout is not None else None", "key = None")]),
    "the next character's scores keyed on the vocabulary, not the weights (shared)": ("app/state/shared_results.py", [(
        "return _next_logits(loaded.identity, prompt, loaded)", "return _next_logits(loaded.vocab_id, prompt, loaded)")]),
    "a generation kept without its seed (shared)": ("app/state/shared_results.py", [(
        "max_new_tokens, sampling, seed)\n    steps = _generations().get(key)",
        "max_new_tokens, sampling)\n    steps = _generations().get(key)")]),
    "a generation kept without its top-k (shared, issue 49)": ("app/state/shared_results.py", [(
        "tuple(prompt.ids), max_new_tokens, sampling, seed)",
        "tuple(prompt.ids), max_new_tokens, sampling.temperature, sampling.top_p, seed)")]),
    "a generation kept without its top-p (shared, issue 49)": ("app/state/shared_results.py", [(
        "tuple(prompt.ids), max_new_tokens, sampling, seed)",
        "tuple(prompt.ids), max_new_tokens, sampling.temperature, sampling.top_k, seed)")]),
    "a generation kept without its temperature (shared, issue 49)": ("app/state/shared_results.py", [(
        "tuple(prompt.ids), max_new_tokens, sampling, seed)",
        "tuple(prompt.ids), max_new_tokens, sampling.top_k, sampling.top_p, seed)")]),
    # the localisation
    "a nested error's own words left untranslated (L10n)": ("app/chrome/i18n.py", [(
        "    if isinstance(value, (LabError, Message)):\n        return error_text(value)\n", "")]),
    # the core and its instruments apart: each hook a caller hands the core, broken
    "the trainer never calls its scorer (train)": ("minigpt/train.py", [(
        "event.score = self.scorer(self)", "event.score = None")]),
    "a task scored on its training lines (task)": ("minigpt/lab/tasks.py", [(
        "lines = trainer.val_data[: count * period]", "lines = trainer.train_data[: count * period]")]),
    "eval_mode leaves a training model in eval mode (model)": ("minigpt/model.py", [(
        "    finally:\n        model.train(was_training)", "    finally:\n        pass")]),
    "the comparison's address keeper never runs (navigation)": ("app/navigation.py", [(
        "    kept_runs.read_and_sync_url()\n", "")]),
    "the class's address keeper never runs (navigation)": ("app/navigation.py", [(
        "    classroom.read_and_sync_url()  # the class", "    # the class")]),
    "a page's address is its file's whole name (site)": ("app/chrome/site.py", [(
        'else PurePosixPath(self.script).stem', 'else PurePosixPath(self.script).name')]),
    # a class on one small box: turns, and a first visit that does not wait for torch
    "turns: the last to come served first": ("minigpt/serve/host/turns.py", [(
        "self._running.append(self._waiting.pop(0))", "self._running.append(self._waiting.pop())")]),
    "turns: the requests running not counted ahead": ("minigpt/serve/host/turns.py", [(
        "return len(self._running) + self._waiting.index(ticket)", "return self._waiting.index(ticket)")]),
    "turns: a place given up is kept": ("minigpt/serve/host/turns.py", [(
        "            elif ticket in self._waiting:\n                self._waiting.remove(ticket)\n",
        "            elif False:\n                pass\n")]),
    "a question answered lately queues again (shared)": ("app/state/shared_results.py", [(
        "if _recent().get(question) is not None:", "if False:")]),
    "a computation runs beside the others, not in turn (shared)": ("app/state/shared_results.py", [(
        "        with in_turn():\n            answer = cached(*args)", "        if True:\n            answer = cached(*args)")]),
    "torch's objects left in the collector's walk (warmup)": ("app/state/warmup.py", [(
        "    torch.set_num_threads(1)\n    gc.freeze()\n", "    torch.set_num_threads(1)\n")]),
    "the first page leaves Streamlit's and plotly's objects in the collector's walk (navigation)": ("app/navigation.py", [(
        "    if not _process_configured:\n        gc.freeze()\n", "    if not _process_configured:\n")]),
    "Home loads the shipped model's weights to describe it (home)": ("app/state/loaded_model.py", [(
        "    if model_source() != SHIPPED:\n        return session_model().facts()",
        "    if True:\n        return session_model().facts()")]),
    "Home's parameters counted without the layers (header)": ("app/state/loaded_model.py", [(
        "return ModelFacts(corpus.key, header.model_config.num_params(),",
        "return ModelFacts(corpus.key, header.model_config.vocab_size * header.model_config.d_model,")]),
    # the class board
    "board: anyone posts a run (board)": ("minigpt/serve/classes/posts.py", [(
        "        if not entry.is_owner(run_key):\n", "        if False:\n")]),
    "board: any key withdraws a post (board)": ("minigpt/serve/classes/posts.py", [(
        "            if not (keys.matches(key, post.key) or keys.matches(key, post.run_key) or post.learner == tag):",
        "            if False:")]),
    "term: any learner withdraws another's post (term)": ("minigpt/serve/classes/posts.py", [(
        "keys.matches(key, post.run_key) or post.learner == tag):", "keys.matches(key, post.run_key) or bool(tag)):")]),
    "board: the challenge's steps read off the run's progress (board)": ("minigpt/serve/classes/board.py", [(
        "return self.misfits(corpus, record.model, record.train, class_corpus)",
        "return self.misfits(corpus, record.model, replace(record.train, max_steps=record.final_step), class_corpus)")]),
    "board: one post more per learner than the limit (board)": ("minigpt/serve/classes/posts.py", [(
        ">= self.max_per_learner:", "> self.max_per_learner:")]),
    "board: every viewer builds the view again (board)": ("minigpt/serve/classes/classes.py", [(
        "            if board._view is None or moved or board._view.key != key:",
        "            if True:")]),
    "board: a hidden run still on the chart (board)": ("minigpt/serve/classes/board.py", [(
        "        return [row for row in self.rows if not row.hidden]", "        return list(self.rows)")]),
    "board: the ranking worst first (board)": ("minigpt/serve/classes/board.py", [(
        "return sorted(fit, key=lambda row: row.best_val)", "return sorted(fit, key=lambda row: -row.best_val)")]),
    "board: characters seen forget the window (board)": ("minigpt/serve/classes/classes.py", [(
        "post.step * train.batch_size * train.block_size * train.grad_accum",
        "post.step * train.batch_size * train.grad_accum")]),
    "board: a class never ends (board)": ("minigpt/serve/classes/roster.py", [(
        "if b.opened < cutoff]\n", "if False]\n")]),
    "term: a class still ends when idle (term)": ("minigpt/serve/classes/roster.py", [(
        "if b.opened < cutoff]\n", "if b.last_active < cutoff]\n")]),
    "term: a stop and a resume within the hour start a new lesson session (term)": ("minigpt/serve/classes/lesson.py", [(
        "            started = step is not None and (now - board.led_at > SESSION_GAP_HOURS * 3600 or not board.sessions)",
        "            started = step is not None and (board.lesson_step is None or now - board.led_at > 0)")]),
    "term: closing a class hands back only its current posts' runs (term)": ("minigpt/serve/classes/roster.py", [(
        "            posted = list(dict.fromkeys([*posted, *board.runs]))\n", "")]),
    "term: a lesson file may ask for a number a billion wide (lesson file)": ("app/state/lesson_file.py", [(
        "        if conversion or not NUMBER_FORMAT.fullmatch(spec):", "        if conversion:")]),
    "term: a learner's notes are never trimmed (term)": ("minigpt/serve/classes/learners.py", [(
        "            dropped = theirs[:-MAX_NOTES]", "            dropped = []")]),
    "term: a new session keeps the last one's answers open (term)": ("minigpt/serve/classes/lesson.py", [(
        "        board.answers, board.revealed = {}, set()", "        board.revealed = set()")]),
    "term: a personal code's wrong tries are never counted (term)": ("minigpt/serve/classes/learners.py", [(
        "                    self._tries.setdefault((board.code, who), deque()).append(now)", "                    pass")]),
    "term: any code claims the class's first learner (term)": ("minigpt/serve/classes/learners.py", [(
        "            known = board.learner_tag(token) in board.learners", "            known = bool(board.learners)")]),
    "term: erasing a learner leaves their archived posts (term)": ("minigpt/serve/classes/learners.py", [(
        "            board.archive[number] = [post for post in posts if post.learner != tag]",
        "            board.archive[number] = posts")]),
    "term: erasing a learner leaves their answer rows (store)": ("minigpt/serve/store/classes.py", [(
        "            for table in (posts_table, answers_table, learners_table, learner_runs_table):",
        "            for table in (posts_table, learners_table, learner_runs_table):")]),
    "term: a new round leaves the old posts on the board (term)": ("minigpt/serve/classes/posts.py", [(
        "            board.posts.clear()\n", "")]),
    "term: the migration to version 3 forgets the answers' session (store)": ("minigpt/serve/store/migrations.py", [(
        "    rows = [dict(row._mapping, session=1) for row in connection.execute(sa.select(old))]",
        "    rows = [dict(row._mapping, session=0) for row in connection.execute(sa.select(old))]")]),
    "board: a name's markup reaches Plotly (viz)": ("minigpt/viz/training.py", [(
        "    name = plain(row.label)\n", "    name = row.label\n")]),
    "board: the teacher's key stays in the address (board page)": ("app/state/classroom.py", [(
        "    if url.TEACHER in st.query_params:\n        del st.query_params[url.TEACHER]\n", "")]),
    "board: a refreshed learner cannot withdraw (board page)": ("app/views/board.py", [(
        "mine.get(post_id) or (own[1] if own else None)", "mine.get(post_id)")]),

    # nothing lost when the server restarts (issue 51)
    "store: keys kept in clear (keys)": ("minigpt/serve/store/keys.py", [(
        "    return salt + hashlib.sha256(salt + key.encode()).digest()",
        "    return salt + key.encode().ljust(32, b\" \")[:32]"), (
        "    return hmac.compare_digest(hashlib.sha256(salt + key.encode()).digest(), bytes(kept[SALT_BYTES:]))",
        "    return hmac.compare_digest(key.encode().ljust(32, b\" \")[:32], bytes(kept[SALT_BYTES:]))")]),
    "store: the migration drops the answers (store)": ("minigpt/serve/store/migrations.py", [(
        "        if answers:\n            connection.execute(sa.insert(answers_2), answers)",
        "        if False:\n            connection.execute(sa.insert(answers_2), answers)")]),
    "store: the line comes back in reverse (store)": ("minigpt/serve/store/runs.py", [(
        ".where(where).order_by(runs_table.c.line_order, runs_table.c.created)",
        ".where(where).order_by(runs_table.c.line_order.desc(), runs_table.c.created)")]),
    "store: a write the database refused once is lost (store)": ("minigpt/serve/store/writer.py", [(
        "                    time.sleep(RETRY_SECONDS)\n                    continue",
        "                    item.ok = False\n                    break")]),
    "store: a resumed run starts again from step 0 (worker)": ("minigpt/serve/runs/trainer_side.py", [(
        "        trainer.load_state_dict(checkpoint.meta[\"trainer_state\"], checkpoint.optimizer_state)",
        "        pass")]),
    "store: the checkpoint does not record the thread count (runner)": ("minigpt/serve/runs/thread.py", [(
        "\"threads\": torch.get_num_threads()", "\"threads\": 1")]),
    "store: an interrupted run reads as still training (stored)": ("minigpt/serve/line/stored.py", [(
        "        return self._row.state if self._row.state in SETTLED_STATES else INTERRUPTED",
        "        return self._row.state")]),
    # each of these passed the whole suite once (issue 58)
    "line: after a restart, new Starts are numbered from 1 again (registry)": ("minigpt/serve/line/book.py", [(
        "            self._orders = itertools.count(store.runs.max_line_order() + 1)\n", "")]),
    "store: an owner opening their run never reaches the database (registry)": ("minigpt/serve/line/registry.py", [(
        "        if seen:\n            self.store.runs.seen([entry.run_id])\n", "")]),
    "kept: one run's small form may take the whole memory for kept runs (registry)": ("minigpt/serve/line/moving.py", [(
        "return KeptRun(run, max_bytes=kept_bytes // KEPT_SHARE)", "return KeptRun(run, max_bytes=kept_bytes)")]),
    "store: a checkpoint written before the steps it holds (registry)": ("minigpt/serve/line/keeping.py", [(
        "            self._save_entry(entry, self._clock(), force=True)\n"
        "            self.store.checkpoints.save(entry.run_id, step, files)\n",
        "            self.store.checkpoints.save(entry.run_id, step, files)\n"
        "            self._save_entry(entry, self._clock(), force=True)\n")]),
    "store: a resume forgets the checkpoint's own step and evaluation (store)": ("minigpt/serve/store/runs.py", [
        ("& (events_table.c.step > step)))", "& (events_table.c.step >= step)))"),
        ("& (evals_table.c.step > step)))", "& (evals_table.c.step >= step)))")]),
    "cluster: an older status arriving late overwrites a newer one": ("minigpt/serve/runs/ray_run.py", [(
        '        if status["stamp"] <= self._stamp:  # an older look', '        if False:  # an older look')]),
    "database: a URL SQLAlchemy refuses raises on every page (database)": ("minigpt/serve/server.py", [(
        "    except Exception as err:  # noqa: BLE001 - a URL SQLAlchemy refuses",
        "    except ImportError as err:  # noqa: BLE001 - a URL SQLAlchemy refuses")]),
    "database: a data folder that cannot be made raises on every page (database)": ("minigpt/serve/server.py", [
        ("    except StoreError as err:\n        return Database(problem=err)\n", ""),
        ("    except Exception as err:  # noqa: BLE001 - a URL SQLAlchemy refuses",
         "    except ImportError as err:  # noqa: BLE001 - a URL SQLAlchemy refuses")]),

}


def copy_tree(dest: Path) -> None:
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


def run_suite(tree: Path, first: list[str]) -> tuple[str | None, float]:
    """The first failing test's id, or None when the whole selection passes: `first` (the mirrored
    tests), then the rest without them."""
    started = time.monotonic()
    for tests in ([first] if first else []) + [[*REST, *(f"--ignore={path}" for path in first)]]:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *SELECTION,
                               *tests], cwd=tree, capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
        if proc.returncode != 0:
            failed = re.search(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, re.MULTILINE)
            return (failed.group(1) if failed else f"pytest exit {proc.returncode}"), time.monotonic() - started
    return None, time.monotonic() - started


def mutated(text: str, name: str, path: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        if text.count(old) != 1:
            raise SystemExit(f"mutant {name!r}: {old!r} occurs {text.count(old)} times in {path}")
        text = text.replace(old, new)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[],
                        help="run the mutants whose name contains this text (repeatable)")
    parser.add_argument("--check", action="store_true", help="only check that every edit applies once")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the unmutated run (when the suite has just passed on this tree)")
    args = parser.parse_args()
    chosen = {name: m for name, m in MUTANTS.items()
              if not args.only or any(word.lower() in name.lower() for word in args.only)}
    if args.check:
        for name, (path, edits) in chosen.items():
            mutated((ROOT / path).read_text(encoding="utf-8"), name, path, edits)
        print(f"{len(chosen)} mutants apply, in {len({path for path, _ in chosen.values()})} files")
        return 0
    with tempfile.TemporaryDirectory(prefix="minigpt-mutants-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        if not args.no_baseline:
            clean, seconds = run_suite(tree, [])
            if clean is not None:
                print(f"the unmutated suite fails ({clean}): fix it first", file=sys.stderr)
                return 1
            print(f"unmutated selection passes in {seconds:.0f} s\n", flush=True)
        print("| bug seeded | file | caught by | seconds |\n|---|---|---|---|")
        survivors = 0
        for name, (path, edits) in chosen.items():
            original = (tree / path).read_text(encoding="utf-8")
            (tree / path).write_text(mutated(original, name, path, edits), encoding="utf-8")
            try:
                caught, seconds = run_suite(tree, mirror(path))
            finally:
                (tree / path).write_text(original, encoding="utf-8")
            survivors += caught is None
            print(f"| {name} | `{path}` | {f'`{caught}`' if caught else '**nothing: survived**'} | {seconds:.0f} |",
                  flush=True)
    print(f"\n{len(chosen) - survivors} of {len(chosen)} caught")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
