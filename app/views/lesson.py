"""The guided lesson, step by step through the loaded model: each step's words, a formula, a live
view made of the app's own views and figures, a "try this", Train settings to start from and a
check question, as the lesson's file says (app.state.lesson_file: the built-in lesson's, or a
teacher's). The step is in the address (?lesson=5), so that a teacher can send a class to one
(app.parts.lesson_links: the lesson followed, the address, Back and Next, and the tool pages' links)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import streamlit as st

from minigpt import DEFAULT_PRESET, PRESETS, REFILL_KEPT, ConfigError, Sampling, SamplingError, generate, lr_schedule
from minigpt.lab.diagnosis import overfitting, uniform_loss
from minigpt.lab.embeddings import position_similarity
from minigpt.lab.predictions import character_table, surprisal
from minigpt.lab.scaling import DEMO_D_KS, DEMO_SEED, DEMO_SEQ_LEN, scaling_experiment
from minigpt.viz import (
    attention_panels,
    loss_figure,
    lr_figure,
    position_labels,
    positions_figure,
    scaling_figure,
    similarity_figure,
)

from app.chrome import url
from app.chrome.charts import config as chart_config
from app.chrome.charts import shared_figure
from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _, error_text, language, n_, number, textbook
from app.chrome.site import HOME, LESSON, PAGES, TRAIN
from app.chrome.text import md, word_list
from app.parts import beliefs, class_lesson, heatmaps, lesson_links, line, one_weight, prompts, sampling
from app.parts.lens import logit_lens_view
from app.state import kept_runs, loaded_model, runs, shared_results, train_settings
from app.state.choices import CORPUS
from app.state.corpora import builtin_corpus, current_corpus
from app.state.lesson_numbers import KV_CHARS, OVERFIT_CORPUS, PRESET, quoted
from app.state.lesson_file import LessonStep, TrainStart
from app.state.loaded_model import LoadedModel

KV_SHOWN_KEY = "lesson_kv_shown"   # session_state: the last timing of generation with and without the cache
MODELS_OWN = Sampling(temperature=1.0)  # the model's own next-character distribution: nothing tempered or cut off


def show(step: LessonStep, n: int, loaded: LoadedModel) -> None:
    """Step n of the lesson followed: its words with the loaded model's numbers, and what it draws."""
    params = quoted(loaded)
    st.header(f"{n}. {step.title}")
    for paragraph in step.body:
        st.markdown(lesson_links.words(paragraph, params))
    if step.formula:
        st.latex(step.formula)
    if step.try_this:
        st.info(_("**Try this:** {action}", action=lesson_links.words(step.try_this, params)), icon="👉")
    if step.view:
        VIEWS[step.view](loaded)
    if step.train:
        train_start(step.train)
    class_lesson.question(n, step, params)
    if step.page is not None:
        st.page_link(step.page.script, label=_("Go further on the {page} page", page=_(step.page.label)), icon="➡️",
                     query_params={url.LANG: language()})


def train_start(start: TrainStart) -> None:
    """The step's Train settings: a button that opens Train with its form holding them."""
    preset = start.preset or DEFAULT_PRESET
    said = [_("the {preset} preset", preset=_(PRESETS[preset].label))]
    if start.corpus:
        said.append(_("the corpus {corpus}", corpus=start.corpus))
    if start.steps:
        said.append(n_("{n:,} step", "{n:,} steps", start.steps))
    if st.button(_("Open Train with this step's settings: {settings}", settings=word_list(said)),
                 key="lesson_train_start"):
        model, train = PRESETS[preset].model, PRESETS[preset].train
        train = replace(train, max_steps=train.max_steps if start.steps is None else start.steps)
        if train_settings.in_class():  # a class would otherwise train bit-identical runs
            train = replace(train, seed=train_settings.own_seed())
        try:  # the form's own ranges, which a file may go beyond
            model, train = train_settings.from_param(train_settings.to_param(model, train))
        except ConfigError as err:
            st.warning(_("These settings cannot go into the Train form: {error}", error=error_text(err)))
            return
        train_settings.fill(model, train)
        if start.corpus:
            st.session_state[CORPUS] = start.corpus
        st.switch_page(TRAIN.script, query_params={url.LANG: language()})


# ----------------------------------------------------------------- the live views, one per step

def _text(loaded: LoadedModel, least: int = 1) -> str | None:
    """The learner's text, the one Attention and Inside attention show (or None, the page said why)."""
    text, key = prompts.attention_text(loaded)
    text = prompts.readable(text, loaded, key)
    if text and len(text) < least:
        st.info(n_("Type at least {n} character.", "Type at least {n} characters.", least))
        return None
    return text


def _prompt(loaded: LoadedModel) -> str | None:
    """The lesson's prompt (its own: a widget key shared with Generate's form would lose its text)."""
    key = f"lesson_prompt:{loaded.vocab_id}"
    st.session_state.setdefault(key, loaded_model.first_prompt(loaded))
    prompt = st.text_input(_("Prompt"), key=key, **REMEMBERED)
    if not prompt:
        st.info(_("Type a prompt."))
        return None
    return prompt if prompts.known_or_explain(prompt, loaded.tokenizer, key) else None


def next_view(loaded: LoadedModel) -> None:
    prompt = _prompt(loaded)
    if prompt:
        beliefs.next_character(loaded, prompt, MODELS_OWN)


def embed_view(loaded: LoadedModel) -> None:
    text = _text(loaded)
    if not text:
        return
    table = character_table(loaded.model, loaded.tokenizer.encode(text), list(text))
    table.insert(0, "position", position_labels(text))
    st.dataframe(table.drop(columns="char"), hide_index=True, key="lesson_characters", column_config={
        "position": st.column_config.TextColumn(_("character")), "id": st.column_config.NumberColumn(_("id")),
        "length": st.column_config.NumberColumn(_("length of its embedding row"), format="%.3f"),
        "scaled": st.column_config.NumberColumn(_("length × √d_model"), format="%.3f"),
    })
    d_model = loaded.model.config.d_model
    st.caption(_("√d_model = √{d_model} = {root:.2f}. The position's encoding added next is √(d_model / 2) = {pe:.2f} "
                 "long.", d_model=d_model, root=d_model ** 0.5, pe=(d_model / 2) ** 0.5))


def positions_view(loaded: LoadedModel) -> None:
    pe = loaded.model.pos_encoding[: loaded.block_size].cpu().numpy()
    pe_col, sim_col = st.columns(2)
    pe_col.plotly_chart(shared_figure(positions_figure, pe), key="lesson_pe", config=chart_config())
    sim_col.plotly_chart(shared_figure(similarity_figure, position_similarity(pe)), key="lesson_pe_similarity",
                         config=chart_config())


def qkv_view(loaded: LoadedModel) -> None:
    text = _text(loaded, least=2)
    if text:
        one_weight.weight_view(loaded, text, False, prefix="lesson")


@st.cache_data(show_spinner=False, max_entries=4)
def _random_scaling():
    return scaling_experiment(DEMO_D_KS, seq_len=DEMO_SEQ_LEN, seed=DEMO_SEED)


def scaling_view(loaded: LoadedModel) -> None:
    text = _text(loaded, least=2)
    if text:
        unscaled = st.checkbox(_("Without 1/√d_k scaling"), key="lesson_unscaled")
        one_weight.weight_view(loaded, text, unscaled, prefix="lesson")
    st.markdown(_("**Random queries and keys** (the demo's experiment: d_k {low} to {high}, {seq_len} keys per query):",
                  low=min(DEMO_D_KS), high=max(DEMO_D_KS), seq_len=DEMO_SEQ_LEN))
    table = _random_scaling()
    entropy_col, max_col = st.columns(2)
    entropy_col.plotly_chart(shared_figure(scaling_figure, table, "entropy"), key="lesson_scaling_entropy",
                             config=chart_config())
    max_col.plotly_chart(shared_figure(scaling_figure, table, "max_weight"), key="lesson_scaling_max",
                         config=chart_config())


def mask_view(loaded: LoadedModel) -> None:
    text = _text(loaded)
    if not text:
        return
    attention = shared_results.attention_maps(loaded, text)
    span = heatmaps.pick_page(len(text), key=f"lesson_mask_page:{len(text)}")
    heatmaps.draw_panels([(_("layer {layer} · head {head}", layer=1, head=1), attention[0, 0])], text, span,
                         key="lesson_mask")
    sums = attention[0, 0].sum(axis=-1)
    above = float(np.triu(attention[0, 0], k=1).sum())
    st.caption(_("Every row adds up to {low:.4f}–{high:.4f}; all the weight above the diagonal together: {above}.",
                 low=float(sums.min()), high=float(sums.max()), above=textbook(above)))


def heads_view(loaded: LoadedModel) -> None:
    text = _text(loaded)
    if not text:
        return
    config = loaded.model.config
    layer = st.selectbox(_("Layer"), range(config.num_layers), format_func=lambda i: str(i + 1),
                         key=f"lesson_heads_layer:{config.num_layers}")
    attention = shared_results.attention_maps(loaded, text)
    span = heatmaps.pick_page(len(text), key=f"lesson_heads_page:{len(text)}")
    heatmaps.draw_panels(attention_panels(attention, view="heads", layer=layer, tr=_), text, span, key="lesson_heads")


def ffn_view(loaded: LoadedModel) -> None:
    text = _text(loaded)
    if text:
        logit_lens_view(loaded, text, key="lesson_lens")


def head_view(loaded: LoadedModel) -> None:
    model = loaded.model
    tied = model.lm_head.weight is model.token_embed.weight
    st.metric(_("The output layer's weights are the embedding table"), _("yes") if tied else _("no"))
    prompt = _prompt(loaded)
    if not prompt:
        return
    logits = shared_results.next_logits(loaded, prompt)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    top = np.argsort(-logits)[:8]
    st.dataframe({_("next character"): [repr(loaded.tokenizer.chars[i])[1:-1] for i in top],
                  _("logit"): [round(float(logits[i]), 3) for i in top],
                  _("probability"): [round(float(probs[i]), 4) for i in top]}, hide_index=True, key="lesson_logits")
    beliefs.next_character(loaded, prompt, MODELS_OWN)


def loss_view(loaded: LoadedModel) -> None:
    text = _text(loaded, least=2)
    if not text:
        return
    ids = loaded.tokenizer.encode(text)
    nats = surprisal(loaded.model, ids)
    labels = position_labels(text)
    st.dataframe({_("after"): labels[:-1], _("next character"): [repr(c)[1:-1] for c in text[1:]],
                  _("its probability p"): np.round(np.exp(-nats), 4), _("−ln p (nats)"): np.round(nats, 3)},
                 hide_index=True, key="lesson_surprisal")
    mean_col, uniform_col = st.columns(2)
    mean_col.metric(_("Mean: the loss on your text"), number(float(nats.mean()), ".3f"))
    uniform_col.metric(_("Guessing uniformly: ln {vocab}", vocab=loaded.tokenizer.vocab_size),
                       number(uniform_loss(loaded.tokenizer.vocab_size), ".3f"))


def _train(corpus_key: str | None, label: str, key: str) -> None:
    """One click: the Tiny preset on this corpus (None: the session's), as this session's run. The
    learner is told first that it becomes the model every page uses; the Train page's form keeps
    its own settings."""
    st.caption(_("The button trains a new run and makes it the model every page uses, the lesson's next steps "
                 "too; a run of yours it replaces is kept for comparison. The sidebar's button brings back the "
                 "shipped model in one click."))
    if not st.button(label, key=key, type="primary"):
        return
    corpus = builtin_corpus(corpus_key) if corpus_key else current_corpus()
    entry, owner = runs.session_run()
    preset = PRESETS[PRESET]
    train_settings.ensure_filled(runs.run_settings(entry) if entry is not None and owner else None)  # before it changes
    # in a class, a seed of the learner's own: the preset's one seed would give the class identical runs
    train = replace(preset.train, seed=train_settings.own_seed()) if train_settings.in_class() else preset.train
    kept_runs.start_run_keeping_the_last(corpus, preset.model, train)


def _live_curves(key: str) -> None:
    """The session's run, its loss curves redrawn every second while it trains."""
    entry, _owner = runs.session_run()
    if entry is None:
        st.caption(_("No run yet: press the button above."))
        return
    shown = entry.run.state
    running = shown in ("running", "waiting", "starting")

    @st.fragment(run_every=1.0 if running else None)
    def curves() -> None:
        current, owner = runs.session_run()
        if current is None:
            st.rerun()  # released: a full rerun says so and stops the polling
        if current.run.state != shown and shown in ("waiting", "starting"):
            st.rerun()  # its turn came: draw it training
        if current.run.state == "waiting":
            line.waiting_view(current, owner)
            return
        snap = current.run.snapshot()
        if snap.error:
            st.error(_("Training stopped: {error}", error=md(error_text(snap.error))))
        st.caption(_("Run `{run}` on {corpus}: step {step:,} of {total:,}", run=current.run_id,
                     corpus=md(current.corpus), step=snap.step, total=snap.max_steps))
        over = overfitting([(e.step, e.train_loss, e.val_loss) for e in snap.evals])  # marked as on Train
        st.plotly_chart(loss_figure(snap.history, uniform=uniform_loss(current.run.trainer.tokenizer.vocab_size),
                                    overfit=over, tr=_), key=key, config=chart_config())
        if running and snap.state != shown:
            st.rerun()

    curves()


def train_view(loaded: LoadedModel) -> None:
    schedule = PRESETS[PRESET].train
    st.plotly_chart(shared_figure(lr_figure, lr_schedule(schedule), schedule.warmup_steps), key="lesson_lr",
                    config=chart_config())
    _train(None, _("Train the Tiny preset on {corpus}", corpus=current_corpus().label), "lesson_train")
    _live_curves("lesson_train_curves")


def fit_view(loaded: LoadedModel) -> None:
    _train(OVERFIT_CORPUS, _("Train the Tiny preset on the demo's {chars} characters",
                             chars=len(builtin_corpus(OVERFIT_CORPUS).text)), "lesson_overfit")
    _live_curves("lesson_fit_curves")


def sampling_view(loaded: LoadedModel) -> None:
    chosen = sampling.sliders(st.columns(sampling.COLUMNS), loaded.tokenizer.vocab_size, prefix="lesson_")
    prompt = _prompt(loaded)
    if prompt and chosen is not None:
        beliefs.next_character(loaded, prompt, chosen)
        beliefs.three_temperatures(loaded, prompt, 0, chosen)


def kv_view(loaded: LoadedModel) -> None:
    prompt = _prompt(loaded)
    if not prompt:
        return
    if st.button(_("Write {n} characters both ways", n=KV_CHARS), key="lesson_kv"):
        settings = dict(sampling=Sampling(temperature=0.8), seed=0, block_size=loaded.block_size)
        seconds, texts = {True: [], False: []}, {}
        try:
            for cache in (True, False):  # warm-up: the first call of each pays for allocations
                generate(loaded.model, loaded.tokenizer, prompt, max_new_tokens=8, use_cache=cache, **settings)
            for cache in (True, False, False, True):  # ABBA: drift on a busy machine evens out
                start = time.perf_counter()
                text = generate(loaded.model, loaded.tokenizer, prompt, max_new_tokens=KV_CHARS, use_cache=cache, **settings)
                seconds[cache].append(time.perf_counter() - start)
                texts[cache] = text
        except SamplingError as err:
            st.warning(error_text(err))
            return
        timed = [(min(seconds[cache]), texts[cache]) for cache in (True, False)]
        st.session_state[KV_SHOWN_KEY] = (loaded.vocab_id, prompt, timed)
    shown = st.session_state.get(KV_SHOWN_KEY)
    if shown and shown[:2] == (loaded.vocab_id, prompt):
        (cached, text_cached), (rerun, text_rerun) = shown[2]
        cols = st.columns(3)
        cols[0].metric(_("With the KV cache"), _("{seconds:.3f} s", seconds=cached))
        cols[1].metric(_("Without: the whole context again for each character"), _("{seconds:.3f} s", seconds=rerun))
        cols[2].metric(_("Faster with the cache"), _("{ratio:.1f}×", ratio=rerun / max(cached, 1e-9)))
        same = next((i for i, (a, b) in enumerate(zip(text_cached, text_rerun)) if a != b), len(text_cached))
        if text_cached == text_rerun:
            st.caption(_("The same prompt, seed and settings both ways: the two texts are the same."))
            st.code(text_cached, language=None, wrap_lines=True)
        else:
            st.caption(n_("The same prompt, seed and settings both ways: the texts agree for their first {n} "
                          "character, as long as everything fits in the {block} positions the model reads. After that "
                          "the cached way starts again from the last {refill:.0%} of the context, while the other way "
                          "always rereads all {block}, so the two part.",
                          "The same prompt, seed and settings both ways: the texts agree for their first {n} "
                          "characters, as long as everything fits in the {block} positions the model reads. After that "
                          "the cached way starts again from the last {refill:.0%} of the context, while the other way "
                          "always rereads all {block}, so the two part.", same, block=loaded.block_size, refill=REFILL_KEPT))
            for label, text in ((_("With the KV cache"), text_cached), (_("Without the cache"), text_rerun)):
                st.markdown(f"**{label}**")
                st.code(text, language=None, wrap_lines=True)


def pages_view(loaded: LoadedModel) -> None:
    for page in PAGES:
        if page not in (HOME, LESSON):
            st.page_link(page.script, label=_("**{page}**: {offer}", page=_(page.label), offer=_(page.offer)),
                         icon=page.icon, query_params={url.LANG: language()})


VIEWS: dict[str, Callable[[LoadedModel], None]] = {
    "next": next_view, "embed": embed_view, "positions": positions_view, "qkv": qkv_view, "scaling": scaling_view,
    "mask": mask_view, "heads": heads_view, "ffn": ffn_view, "head": head_view, "loss": loss_view,
    "train": train_view, "fit": fit_view, "sampling": sampling_view, "kv": kv_view, "pages": pages_view,
}
