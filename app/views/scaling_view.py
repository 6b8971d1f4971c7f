"""The √d_k page's experiment: random queries and keys of each head size, the softmax with and
without 1/√d_k, as the reference demo runs it, and why the division is there."""
from __future__ import annotations

import streamlit as st

from minigpt import N_
from minigpt.lab.scaling import DEMO_D_KS, DEMO_SEED, DEMO_SEQ_LEN, scaling_experiment
from minigpt.viz import scaling_figure, score_std_figure

from app.chrome import charts, fields
from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _


@st.cache_data(show_spinner=False, max_entries=64)
def scaling_table(d_ks: tuple[int, ...], seq_len: int, seed: int, num_samples: int):
    return scaling_experiment(d_ks, seq_len=seq_len, seed=seed, num_samples=num_samples)


WHY = N_(r"""
A score is a dot product of a query and a key: $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$.
If the components are independent with mean 0 and variance 1, each product $q_i k_i$ has
variance 1, and a sum of $d_k$ of them has

$$\operatorname{Var}(q \cdot k) = d_k, \qquad \operatorname{std}(q \cdot k) = \sqrt{d_k}.$$

So a head with $d_k = 256$ produces scores sixteen times wider than one with $d_k = 1$.
Dividing by $\sqrt{d_k}$ brings the variance back to 1 whatever the head size.

Without it, the softmax of wide scores is nearly one-hot: one key takes almost all the weight
(in the charts above, the red no-scaling bars at large d_k: max weight near 1, entropy near 0).
Its gradient, $p\,(1-p)$ for each weight, is then almost zero everywhere, so the attention
stops learning.
""")


@st.fragment
def experiment() -> None:
    """The settings and everything drawn from them: a change reruns only this, not the page."""
    r = REMEMBERED
    cols = st.columns([2, 1, 1, 1])
    d_ks = cols[0].multiselect(_("d_k values (head size)"), [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
                               default=list(DEMO_D_KS), key="scaling_d_ks", placeholder=_("Choose d_k values"),
                               **r)
    seq_len = cols[1].slider(_("seq_len (keys per query)"), 2, 128, value=DEMO_SEQ_LEN, key="scaling_seq_len", **r)
    seed = fields.whole_number(_("Seed"), 0, 2**31 - 1, value=DEMO_SEED, key="scaling_seed", where=cols[2], **r)
    num_samples = cols[3].slider(_("Samples"), 1, 64, value=1, key="scaling_samples",
                                 help=_("Independent (seq_len × d_k) draws averaged per d_k."), **r)

    if not d_ks:
        st.info(_("Choose at least one d_k."))
        return
    if seed is None:  # out of range: said under its box
        return
    table = scaling_table(tuple(sorted(d_ks)), int(seq_len), int(seed), int(num_samples))

    entropy_col, max_col = st.columns(2)  # side by side on a wide screen, one under the other on a phone
    entropy_col.plotly_chart(charts.shared_figure(scaling_figure, table, "entropy"), key="scaling_entropy",
                             config=charts.config())
    max_col.plotly_chart(charts.shared_figure(scaling_figure, table, "max_weight"), key="scaling_max_weight",
                         config=charts.config())
    demo_settings = (tuple(sorted(d_ks)), int(seq_len), int(seed), int(num_samples)) == (DEMO_D_KS, DEMO_SEQ_LEN,
                                                                                         DEMO_SEED, 1)
    demo = dict(d_ks=", ".join(str(d) for d in DEMO_D_KS), seq_len=DEMO_SEQ_LEN, seed=DEMO_SEED)
    if demo_settings:
        st.caption(_("At these settings (d_k {d_ks}, seq_len {seq_len}, seed {seed}, one sample) the numbers are the "
                     "ones the reference demo prints: the course's MiniGPT example program, whose experiment on "
                     "√d_k this page reruns.", **demo))
    else:
        st.caption(_("The reference demo (the course's MiniGPT example program, whose experiment on √d_k this page "
                     "reruns) prints its numbers at d_k {d_ks}, seq_len {seq_len}, seed {seed}, one sample.", **demo))
    # a plain table: four rows need no scrolling or sorting, and st.dataframe's grid takes longer to redraw
    # than the three charts together
    headers = {"score_std_unscaled": _("std of q·k"), "score_std_scaled": _("std of q·k/√d_k"),
               "entropy_unscaled": _("entropy, no scaling"), "entropy_scaled": _("entropy, scaled"),
               "max_weight_unscaled": _("max weight, no scaling"), "max_weight_scaled": _("max weight, scaled")}
    st.table(table.set_index("d_k").rename(columns=headers).style.format("{:.4f}"))

    st.subheader(_("Why √d_k"))
    text_col, plot_col = st.columns([1, 1])
    with text_col:
        st.markdown(_(WHY))
    with plot_col:
        st.plotly_chart(score_std_figure(table, tr=_), key="score_std_chart", config=charts.config())

