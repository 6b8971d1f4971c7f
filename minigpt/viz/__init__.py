"""Figure builders: pure functions from plain data to Plotly figures (and one table), one module
per view. Pages only call these and hand the result to Streamlit, so every chart is tested
without a server (and its axes as plotly.js draws them, in tests/minigpt/viz/test_viz_drawn.py).
How a builder is written, and how it is translated, is said once, in `_layout`'s docstring.

- `training`: loss curves, the learning-rate schedule, a task's accuracy, runs side by side;
- `attention`: attention heatmaps, a task's right keys over training, head importance;
- `generate`: the next-character distribution, the generated steps, where a step looked;
- `inside`: how one attention weight is made, positions, embeddings, the logit lens;
- `scaling`: the √d_k experiment and the scaled/unscaled race;
- `export`: figures as one offline HTML page.
"""
from ._layout import english, position_labels
from .attention import (POSITIONS_PER_HEATMAP, attention_heatmap, attention_panels, importance_figure,
                        right_key_figure)
from .export import figures_html
from .generate import beliefs_figure, step_attention_figure, steps_table
from .inside import (attention_row_figure, embeddings_figure, keys_figure, logit_lens_figure, positions_figure,
                     similarity_figure, values_figure, weight_figure)
from .scaling import race_figure, score_std_figure, scaling_figure
from .training import (BOARD_ALL, BOARD_BAND, BOARD_BEST, BoardChoice, board_band, board_choice, board_figure,
                       board_title, compare_figure, loss_figure, lr_figure, task_figure)

__all__ = [
    "BOARD_ALL", "BOARD_BAND", "BOARD_BEST", "POSITIONS_PER_HEATMAP", "BoardChoice", "attention_heatmap",
    "attention_panels", "attention_row_figure", "beliefs_figure", "board_band", "board_choice", "board_figure",
    "board_title", "compare_figure", "embeddings_figure", "english", "figures_html", "importance_figure", "keys_figure",
    "logit_lens_figure", "loss_figure", "lr_figure", "position_labels", "positions_figure", "race_figure",
    "right_key_figure", "scaling_figure", "score_std_figure", "similarity_figure", "step_attention_figure",
    "steps_table", "task_figure", "values_figure", "weight_figure",
]
