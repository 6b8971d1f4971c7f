"""Regenerate shipped_logits.json: the shipped checkpoints' logits, computed by the reference
demo's own MiniGPT class, not by ours.

    python tests/cross/golden/make_golden.py PATH/TO/seed_demo.py

Only the demo's class definitions run (the file up to its dataset section): its training and
plots do not. Our weights are copied into the demo's modules name by name, W_QKV split into the
demo's W_Q, W_K and W_V. Run it once when a shipped checkpoint is retrained; never in CI.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import safetensors.torch
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROMPTS = {"course-zh": ["注意力", "深度学习是", "训练的时候，"], "demo-zh": ["深度学习", "注意力机制是", "自然语言处理的"],
           "pydoc-en": ["The list ", "def f(x):\n    ", "import "]}


def demo_classes(path: Path) -> dict:
    source = path.read_text("utf-8")
    head = source[: source.index("# 构建数据集")]
    head = head.replace("import matplotlib.pyplot as plt", "").replace("import seaborn as sns", "")
    head = "\n".join(line for line in head.splitlines() if "matplotlib" not in line and "_IMAGES" not in line)
    namespace = {"__file__": str(path), "__name__": "seed_demo"}
    exec(compile(head, str(path), "exec"), namespace)
    return namespace


def demo_model(namespace: dict, folder: Path):
    config = json.loads((folder / "config.json").read_text("utf-8"))
    m = config["model"]
    weights = next(folder.glob("model*.safetensors"))
    ours = safetensors.torch.load_file(weights)
    model = namespace["MiniGPT"](vocab_size=m["vocab_size"], d_model=m["d_model"], num_heads=m["num_heads"],
                                 num_layers=m["num_layers"], d_ff=m["d_ff"], max_len=m["max_len"], dropout=0.0)
    theirs = {}
    d = m["d_model"]
    for name, tensor in ours.items():
        if name.endswith("self_attn.W_QKV.weight"):
            prefix = name[: -len("W_QKV.weight")]
            for i, part in enumerate(("W_Q", "W_K", "W_V")):
                theirs[f"{prefix}{part}.weight"] = tensor[i * d : (i + 1) * d]
        else:
            theirs[name] = tensor
    theirs["lm_head.weight"] = theirs["token_embed.weight"]
    missing, unexpected = model.load_state_dict(theirs, strict=False)
    assert set(missing) <= {"pos_encoding.pe", "causal_mask"} and not unexpected, (missing, unexpected)
    return model.eval(), config["vocab"]


def main(demo: str) -> None:
    namespace = demo_classes(Path(demo))
    golden = {"source": "reference demo's MiniGPT class with the shipped weights", "checkpoints": {}}
    for corpus, prompts in PROMPTS.items():
        model, vocab = demo_model(namespace, ROOT / "minigpt" / "pretrained" / corpus)
        stoi = {c: i for i, c in enumerate(vocab)}
        rows = []
        for prompt in prompts:
            with torch.no_grad():
                logits, _ = model(torch.tensor([[stoi[c] for c in prompt]]))
            rows.append({"prompt": prompt, "last_logits": [round(float(v), 5) for v in logits[0, -1]]})
        golden["checkpoints"][corpus] = rows
    (HERE / "shipped_logits.json").write_text(json.dumps(golden, ensure_ascii=False) + "\n", "utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
