"""Every builder the tests share, in one place, so that test modules never import each other.

- tiny models and corpora for the library tests;
- the maths written out by hand (`hand_forward`, `hand_lr`): references that share no code
  with minigpt;
- checkpoint folders and zips, good and bad;
- AppTest helpers for the page tests, and the live server and browser for the browser tests.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import torch
from streamlit.testing.v1 import AppTest  # at import: it makes its temporary folder once per process

from app import glossary
from app.runs import OWN_RUN
from minigpt import CharTokenizer, GPTConfig, MiniGPT, save_pretrained
from minigpt.checkpoint import CONFIG_NAME, WEIGHTS_NAME

ROOT = Path(__file__).resolve().parents[1]

TEXT = "the cat sat on the mat. the dog sat on the log. " * 8


def tiny_config(vocab_size: int = 12, **overrides) -> GPTConfig:
    settings = dict(vocab_size=vocab_size, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=16, dropout=0.0)
    settings.update(overrides)
    return GPTConfig(**settings)


def tiny_model(seed: int = 0, **overrides) -> MiniGPT:
    torch.manual_seed(seed)
    return MiniGPT(tiny_config(**overrides)).eval()


def tiny_tokenizer() -> CharTokenizer:
    return CharTokenizer.from_text(TEXT)


def tiny_lm(seed: int = 0, **overrides) -> tuple[MiniGPT, CharTokenizer]:
    """A tiny untrained model over TEXT's characters, with its tokenizer."""
    tok = tiny_tokenizer()
    return tiny_model(seed, vocab_size=tok.vocab_size, **overrides), tok


# ---------------------------------------------------------------- the maths, written out by hand
# A second implementation of the forward pass that shares no code with minigpt/model.py: it reads
# only the weights and four numbers of the config, and spells out every formula of the reference
# demo in plain tensor arithmetic (no nn.functional). Tests compare the model against it.


def hand_positions(max_len: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same), one number at a time."""
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            angle = pos / 10000 ** (i / d_model)
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe


def hand_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased variance, as LayerNorm uses
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def hand_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def hand_softmax(scores: torch.Tensor) -> torch.Tensor:
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def hand_forward(model, ids: list[int], scale: bool | None = None, zero_heads=(), positions: bool = True,
                 window: int | None = None, head_weight: torch.Tensor | None = None) -> dict:
    """Logits (T, vocab), and per layer the attention weights (H, T, T), Q, K, V (H, T, d_k) and the
    attention output (T, d_model) before W_O, in float64. scale=None follows the model's config.

    The knock-outs, written out: zero_heads, (layer, head) pairs whose outputs are dropped;
    positions=False, no positional encoding; window, each query sees its last `window` keys;
    head_weight (vocab, d_model), an LM head of its own instead of the embedding."""
    w = {k: v.detach().double().cpu() for k, v in model.state_dict().items()}
    cfg = model.config
    d, H = cfg.d_model, cfg.num_heads
    d_k = d // H
    divide = cfg.scale_attention if scale is None else scale
    T = len(ids)
    x = w["token_embed.weight"][ids] * math.sqrt(d) + (hand_positions(T, d) if positions else 0)  # (T, d)
    allowed = torch.tensor([[k <= q and (window is None or q - k < window) for k in range(T)] for q in range(T)])
    layers = []
    for layer in range(cfg.num_layers):
        p = f"blocks.{layer}."
        h = hand_layer_norm(x, w[p + "norm1.weight"], w[p + "norm1.bias"])
        qkv = h @ w[p + "self_attn.W_QKV.weight"].T  # (T, 3d): W_Q, W_K, W_V stacked in that order
        Q, K, V = (qkv[:, i * d : (i + 1) * d].reshape(T, H, d_k).transpose(0, 1) for i in range(3))
        scores = Q @ K.transpose(1, 2)  # (H, T, T)
        if divide:
            scores = scores / math.sqrt(d_k)
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = hand_softmax(scores)
        heads = weights @ V  # (H, T, d_k)
        for zeroed in [h for l, h in zero_heads if l == layer]:
            heads[zeroed] = 0
        concat = heads.transpose(0, 1).reshape(T, d)
        x = x + concat @ w[p + "self_attn.W_O.weight"].T
        h = hand_layer_norm(x, w[p + "norm2.weight"], w[p + "norm2.bias"])
        hidden = hand_gelu(h @ w[p + "ffn.linear1.weight"].T + w[p + "ffn.linear1.bias"])
        x = x + hidden @ w[p + "ffn.linear2.weight"].T + w[p + "ffn.linear2.bias"]
        layers.append({"weights": weights, "Q": Q, "K": K, "V": V, "output": concat})
    x = hand_layer_norm(x, w["final_norm.weight"], w["final_norm.bias"])
    head = w["token_embed.weight"] if head_weight is None else head_weight.double().cpu()
    logits = x @ head.T  # the head is the embedding, transposed (weight tying)
    return {"logits": logits, "layers": layers}


def hand_lr(step: int, lr: float, min_lr: float, warmup: int, max_steps: int) -> float:
    """The learning rate of optimizer step `step` (0-based): the (step+1)-th of `warmup` equal
    increments up to lr, then half a cosine from lr down to min_lr at max_steps."""
    if step < warmup:
        return lr * (step + 1) / warmup
    done = (step - warmup) / (max_steps - warmup)
    return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * min(done, 1.0))) / 2


# Printed by the reference demo (seed_demo.py, section 6) at d_k 4/16/64/256, seq_len 16, seed 42:
# d_k -> (entropy unscaled, max weight unscaled, entropy scaled, max weight scaled)
DEMO_SCALING = {
    4: (1.9813, 0.3648, 2.5084, 0.1928),
    16: (0.8247, 0.7157, 2.2914, 0.2786),
    64: (0.4516, 0.8304, 2.4147, 0.2258),
    256: (0.2362, 0.9022, 2.3424, 0.2591),
}


# ---------------------------------------------------------------- checkpoints

CKPT_TEXT = "hello world, tiny checkpoints"
TOKENIZER = CharTokenizer.from_text(CKPT_TEXT)


def checkpoint_model(seed: int = 0, num_layers: int = 1) -> MiniGPT:
    """A tiny untrained model over CKPT_TEXT's characters."""
    config = GPTConfig(vocab_size=TOKENIZER.vocab_size, d_model=16, num_heads=2,
                       num_layers=num_layers, d_ff=32, max_len=16, dropout=0.0)
    return MiniGPT(config, seed=seed)


def logits_of(model: MiniGPT) -> torch.Tensor:
    ids = torch.tensor([TOKENIZER.encode("hello tiny")])
    model.eval()
    with torch.no_grad():
        return model(ids)[0]


def train_step(model: MiniGPT, optimizer: torch.optim.Optimizer) -> None:
    ids = torch.tensor([TOKENIZER.encode("tiny world, hello")])
    optimizer.zero_grad()
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    optimizer.step()


def saved(tmp_path: Path, seed: int = 0, name: str = "ckpt", **kwargs) -> Path:
    return save_pretrained(tmp_path / name, checkpoint_model(seed), TOKENIZER, **kwargs)


def read_config(path: Path) -> dict:
    return json.loads((path / CONFIG_NAME).read_text(encoding="utf-8"))


def write_config(path: Path, config: dict) -> None:
    (path / CONFIG_NAME).write_text(json.dumps(config), encoding="utf-8")


def weights_path(path: Path) -> Path:
    return path / WEIGHTS_NAME


def replace_weights(path: Path, data: bytes) -> None:
    """Swap in other weight bytes and make config.json's hash agree, to reach later checks."""
    weights_path(path).write_bytes(data)
    config = read_config(path)
    config["weights_sha256"] = hashlib.sha256(data).hexdigest()
    write_config(path, config)


def folder_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir()}


def make_zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def bomb_zip(tmp_path: Path, size: int = 200 * 2**20) -> bytes:
    """Zeros that deflate about 1000-fold."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("config.json", "w") as out:
            chunk = bytes(2**20)
            for _ in range(size // len(chunk)):
                out.write(chunk)
    return buffer.getvalue()


def edit(**changes):
    """A builder of a saved checkpoint whose config.json has `section__field=value` changed."""
    def build(tmp_path):
        path = saved(tmp_path)
        config = read_config(path)
        for key, value in changes.items():
            section, _, name = key.partition("__")
            (config[section] if name else config)[name or section] = value
        write_config(path, config)
        return path
    return build


def mutate(fn):
    """A builder of a saved checkpoint, then changed by fn(path)."""
    def build(tmp_path):
        path = saved(tmp_path)
        fn(path)
        return path
    return build


class RunsCode:
    """Unpickling this runs a shell command; a safe loader never does."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


# ---------------------------------------------------------------- pages (AppTest)

PAGES = ["pages/1_Train.py", "pages/2_Generate.py", "pages/3_Attention.py", "pages/4_Scaling.py", "pages/5_Inside.py",
         "pages/6_Model.py", "pages/7_Glossary.py", "pages/8_Experiments.py", "pages/9_Lesson.py"]


def home(lang: str | None = None, **params: str) -> AppTest:
    """Home in a fresh session; `lang` as a teacher's link gives it (?lang=zh), and any other
    query parameters of the address it opens with."""
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    if lang is not None:
        at.query_params["lang"] = lang
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


def page(at, path: str):
    return at.switch_page(path).run()


def tiny_settings(at, max_steps: int = 20_000, eval_interval: int = 25):
    """Train page widgets set to a model that steps in milliseconds."""
    at.select_slider(key="d_model").set_value(16)
    at.select_slider(key="num_heads").set_value(2)
    at.slider(key="num_layers").set_value(1)
    at.select_slider(key="d_ff").set_value(32)
    at.select_slider(key="max_len").set_value(32)
    at.slider(key="block_size").set_value(16)
    at.slider(key="batch_size").set_value(4)
    at.number_input(key="max_steps").set_value(max_steps)
    at.number_input(key="eval_interval").set_value(eval_interval)
    return at.run()


def start_tiny_run(lang: str | None = None, **settings):
    at = tiny_settings(page(home(lang), "pages/1_Train.py"), **settings)
    at.button(key="start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def step_of(at) -> int:
    return int(at.metric[1].value.split("/")[0].replace(",", ""))


def wait_for_step(at, minimum: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        at.run()
        if step_of(at) >= minimum:
            return step_of(at)
        time.sleep(0.2)
    raise AssertionError(f"the run did not reach step {minimum} in {timeout} s (at {step_of(at)})")


def unescaped(shown: str) -> str:
    """Markdown as it reads: the page escapes a message's specials (it may quote a file name)."""
    return re.sub(r"\\(.)", r"\1", shown)


def plotly_spec(at, index: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def plotly_array(value) -> np.ndarray:
    """A figure's array as plotly serialises it: a list, or base64 'bdata' with its dtype."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if isinstance(shape, str):  # "14, 14"
            shape = [int(n) for n in shape.split(",")]
        return array.reshape(shape) if shape else array
    return np.array(value, dtype=float)


def own_run(at) -> tuple[str, str]:
    return at.session_state[OWN_RUN]


def wait_finished(at, timeout: float = 60.0):
    """This session's run once it has finished (its last event logged); its registry entry."""
    from app import runs
    entry = runs.registry().get(*own_run(at))
    deadline = time.monotonic() + timeout
    while entry.run.state != "finished" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert entry.run.state == "finished", entry.run.state
    return entry


# ---------------------------------------------------------------- a live server and a real browser

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
CONNECTED = '[data-testid="stApp"][data-test-connection-state="CONNECTED"]'


def launch_server(log) -> tuple[str, subprocess.Popen]:
    """`streamlit run` on a free loopback port, logging to `log`; returns its URL and process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "streamlit_app.py", "--server.address=127.0.0.1",
         f"--server.port={port}", "--server.headless=true", "--browser.gatherUsageStats=false",
         "--server.fileWatcherType=none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return f"http://127.0.0.1:{port}", proc


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode} before serving")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=1) as response:
                if response.read() == b"ok":
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"streamlit did not answer on {url} within {timeout} s")


def wait_rendered(page, heading: str) -> None:
    page.wait_for_selector(CONNECTED, timeout=60_000)
    page.get_by_role("heading", name=heading, level=1).wait_for(timeout=60_000)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=60_000)


def main_button(page, name: str, exact: bool = True):
    """A button of the page itself: Streamlit's header shows a "Stop" of its own while a script runs."""
    return page.get_by_test_id("stMainBlockContainer").get_by_role("button", name=name, exact=exact)


# ---------------------------------------------------------------- what a page shows, as text

# Latin symbols a Chinese page may show: the maths' names, devices, encodings, the corpora's names
SYMBOLS = ("MiniGPT Lab", "MiniGPT", "d_model", "d_k", "d_ff", "num_heads", "num_layers", "max_len", "block_size",
           "batch_size", "seq_len", "vocab_size", "softmax", "top-k", "top-p", "Top-k", "Top-p", "AdamW", "GELU",
           "Pre-LN", "KV", "GPT", "ln", "exp", "std", "Var", "lr", "cpu", "cuda", "mps", "UTF-8", "UTF-16",
           "GB18030", "GBK", "HTML", "PNG", ".txt", ".zip", ".csv", ".npz", "numpy.load", "course-zh", "demo-zh", "pydoc-en", "task-reverse", "task-copy", "task-sort", "minGPT", "QKᵀ", "Transformer", "Python", "MB", "JSON", "logits", "W_O", "e^H", "PE", "pos", "sin", "cos", "logit", "LayerNorm", "English")  # English: the language switch names itself
_TEXT_FIELDS = {"label", "body", "help", "options", "placeholder", "text", "delta", "caption"}
_FIGURE_KEYS = {"text", "name", "hovertemplate", "title"}


def shown_texts(at) -> list[str]:
    """Every text the page's elements show: titles, prose, labels, help, options, metrics, table
    headers, and the figures' titles, axes, legends, annotations and hover templates. Not what
    the learner typed, nor code blocks (samples, links)."""
    texts: list[str] = []

    def from_proto(message) -> None:
        for field, value in message.ListFields():
            if field.name in ("spec", "code_text", "value", "default", "id", "form_id", "query_string"):
                continue
            repeated = not isinstance(value, (str, bytes)) and hasattr(value, "__len__") and not hasattr(value, "ListFields")
            if field.type == field.TYPE_MESSAGE:
                for item in (value if repeated else [value]):
                    from_proto(item)
            elif field.name in _TEXT_FIELDS:
                texts.extend(value if repeated else [value])

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ListFields"):
            from_proto(proto)
            if getattr(proto, "spec", None) and type(node).__name__ == "UnknownElement":
                texts.extend(_figure_texts(json.loads(proto.spec)))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    for frame in at.dataframe:  # the headers the browser shows: a column_config label, else the name
        config = json.loads(frame.proto.columns or "{}")
        texts.extend(config.get(str(c), {}).get("label") or str(c) for c in frame.value.columns)
    return [t for t in texts if isinstance(t, str) and t.strip()]


def _figure_texts(spec) -> list[str]:
    found = []
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key in _FIGURE_KEYS and isinstance(value, str):
                found.append(value)
            elif key not in ("ticktext", "x", "y", "z", "tickvals", "customdata"):
                found.extend(_figure_texts(value))
    elif isinstance(spec, list):
        for item in spec:
            found.extend(_figure_texts(item))
    return found


def english_words(text: str, glossed: set[str]) -> list[str]:
    """Latin words of `text` that are neither agreed symbols nor an English term in brackets
    after its Chinese name (`glossed`: the glossary's English terms, lower case)."""
    text = re.sub(r"<style>.*?</style>", " ", text, flags=re.S)         # css
    text = re.sub(r"%\{[^}]*\}|<[^>]+>", " ", text)                  # plotly fields, html tags
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)    # formulas
    text = re.sub(r"`[^`]*`", " ", text)                              # code spans (run ids)
    text = re.sub(r":\w+-background\[[^\]]*\]", " ", text)             # generated text, coloured
    text = text.replace("\\", "")
    for gloss in re.findall(r"（([^（）]*)）", text):
        if gloss.strip().lower() in glossed:
            text = text.replace(f"（{gloss}）", " ")
    for symbol in sorted(SYMBOLS, key=len, reverse=True):
        text = re.sub(rf"(?<![A-Za-z]){re.escape(symbol)}(?![A-Za-z])", " ", text)
    return re.findall(r"[A-Za-z]{2,}", text)


GLOSSED = {english.lower() for english, _meaning in glossary.TERMS}


def assert_chinese(at, where: str, besides: list[str] = ()) -> None:
    """No English word on the page outside the symbols and the glossary's bracketed English;
    `besides`: data the page quotes (a task line), left out."""
    assert not at.exception, [e.value for e in at.exception]
    texts = shown_texts(at)
    for data in besides:
        texts = [t.replace("\\", "").replace(data, " ") for t in texts]
    leaks = {text: words for text in texts if (words := english_words(text, GLOSSED))}
    assert not leaks, f"{where} shows English: " + "\n".join(f"{w} in {t!r}" for t, w in leaks.items())
