"""What the tests share, one module per job, so that test modules never import each other.

- `maths`: the forward pass, the learning rate and the demo's numbers written out by hand:
  references that share no code with minigpt;
- `tiny`: tiny models, tokenizers and corpora for the library tests;
- `checkpoints`: checkpoint folders and zips, good and bad;
- `figures`: a Plotly figure's arrays as numbers;
- `waiting`: wait on a condition, never on time passing;
- `apptest`: Streamlit's AppTest on our pages;
- `browser`: a live server and a real chromium;
- `postgres`: a throwaway PostgreSQL server, and the databases the store's tests run on;
- `language`: what a page shows, as words, and the check that a Chinese page shows no English.

Only `apptest`, `browser` and `language` import Streamlit or the app: the library's tests
(tests/minigpt) import none of the three.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
