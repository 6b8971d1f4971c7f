"""Experiments: take a part of the loaded model out, and measure what it did."""
import streamlit as st

from app import charts, compare, heatmaps, lesson_links, models, navigation, prompts, race
from app.i18n import _, error_text, number
from minigpt import (Knockout, KnockoutError, SamplingError, attention_panels, estimate_loss, generate, head_importance,
                     importance_figure, knocked_out)

SAMPLE_SEED, SAMPLE_TOKENS, SAMPLE_TEMPERATURE = 0, 120, 0.8
IMPORTANCE = "head_importance_shown"  # session_state: the last importance grid, with the model it is of
MEASURED = "knockouts_measured"  # session_state: {(model, prompt, knock-out): (loss, sample)}, the latest few
KEEP_MEASURED = 16

navigation.setup_page(__file__)

st.title(_("Experiments"))
lesson_links.link(7)
st.markdown(_(
    "What does a part of the model do? Take it out and look. A knock-out works on a copy: the model the other "
    "pages use, and other learners' sessions, stay as they are. The loss is measured on the same validation "
    "windows before and after, so the change is the knock-out's alone."))

lm = models.require_model()
config = lm.model.config
st.caption(lm.summary())

st.subheader(_("Knock-outs"))
cells = [(layer, head) for layer in range(config.num_layers) for head in range(config.num_heads)]
heads = st.multiselect(_("Zero these heads (layer · head)"), cells, format_func=lambda c: f"{c[0] + 1} · {c[1] + 1}",
                       key=f"knockout_heads:{config.num_layers}x{config.num_heads}", placeholder=_("Choose heads"),
                       help=_("A zeroed head still computes its attention, but adds nothing to what the layer "
                              "passes on: its columns of W_O are set to 0."))
left, right = st.columns(2)
positions = left.checkbox(_("Remove the positional encoding"), key="knockout_positions",
                          help=_("Without it, nothing tells the model where a character stands: only which "
                                 "characters came before."))
shuffled = right.checkbox(_("Untie the LM head and shuffle its rows"), key="knockout_shuffled",
                          help=_("The head becomes a copy of the embedding in a random order: the model still "
                                 "reads characters the same way, but scores each one with another's vector."))
window = st.slider(_("Each character sees only its last n characters, itself included"), 1, lm.block_size,
                   lm.block_size, key=f"knockout_window:{lm.block_size}",
                   help=_("At {block}, the context the model was trained on, nothing is cut.", block=lm.block_size))
knockout = Knockout(heads=frozenset(heads), positions=positions, window=window if window < lm.block_size else None,
                    shuffled_head=shuffled)
try:
    twin = knocked_out(lm.model, knockout)
except KnockoutError as err:
    st.error(error_text(err))
    st.stop()

if knockout.empty:
    st.info(_("Nothing is knocked out yet: choose heads, the positions, a shorter window or the shuffled head above, "
              "and the loss, the sample and the attention of the knocked-out copy appear beside the whole model's."))
identity = lm.identity
prompt = models.first_prompt(lm)


def measure(model, windows) -> tuple[float | None, str | SamplingError]:
    """A model's loss on the windows (None without them) and its sample from the prompt and seed."""
    loss = estimate_loss(model, windows) if windows is not None else None
    try:
        sample = generate(model, lm.tokenizer, prompt, max_new_tokens=SAMPLE_TOKENS, temperature=SAMPLE_TEMPERATURE,
                          seed=SAMPLE_SEED, block_size=lm.block_size)
    except SamplingError as err:  # a model whose training diverged
        sample = err
    return loss, sample


windows = models.validation_windows(lm)
if windows is None:
    st.info(_("This model's corpus is not known here, so there is no validation text to measure its loss on; "
              "the samples and the attention below still show what the knock-out changed."))


def measured(model, knockout: Knockout) -> tuple[float | None, str | SamplingError]:
    """measure(), once per model, prompt and knock-out in this session: the same every time, and a learner
    turns a knock-out on and off to compare."""
    memo = st.session_state.setdefault(MEASURED, {})
    key = (identity, prompt, knockout)
    if key not in memo:
        memo[key] = measure(model, windows)
        while len(memo) > KEEP_MEASURED:
            del memo[next(iter(memo))]  # the oldest
    return memo[key]


whole = measured(lm.model, Knockout())
knocked = None if knockout.empty else measured(twin, knockout)
if windows is not None:
    base = whole[0]
    whole_col, knocked_col = st.columns(2)
    whole_col.metric(_("Val loss, whole model"), number(base, ".3f"), help=models.windows_said(lm, windows))
    if knocked is not None:
        after = knocked[0]
        knocked_col.metric(_("Val loss, knocked out"), number(after, ".3f"), delta=f"{after - base:+.3f}",
                           delta_color="inverse")

st.markdown(_("**The same prompt and seed** (temperature {temperature:g}), before and after:",
              temperature=SAMPLE_TEMPERATURE))
shown = [(whole[1], _("Whole model"))] + ([] if knocked is None else [(knocked[1], _("Knocked out"))])
for col, (sample, label) in zip(st.columns(2), shown):
    col.caption(label)
    if isinstance(sample, SamplingError):
        col.warning(error_text(sample))
    else:
        col.code(sample, language=None, wrap_lines=True)

st.markdown(_("**Where the knocked-out model looks** (each layer's mean over its heads):"))
text, text_key = prompts.attention_text(lm)
text = prompts.readable(text, lm, text_key)
if text:
    span = heatmaps.pick_page(len(text), key=f"knockout_page:{len(text)}")
    attention = models.attention_maps(twin, lm.tokenizer, text)
    heatmaps.draw_panels(attention_panels(attention, view="layers", tr=_), text, span, key="knockout_attention")

st.subheader(_("The importance of every head"))
st.markdown(_("Zero each head alone, in turn, and measure how much the validation loss rises: the heads the model "
              "leans on stand out."))
if windows is not None and st.button(_("Measure every head"), key="measure_heads"):
    with st.spinner(_("Zeroing each of the {count} heads in turn…", count=len(cells))):
        st.session_state[IMPORTANCE] = (identity, head_importance(lm.model, windows))
shown = st.session_state.get(IMPORTANCE)
if shown is not None and shown[0] == identity:
    rise = shown[1]
    figure = importance_figure(rise, tr=_)
    st.plotly_chart(figure, key="head_importance", config=charts.config())
    charts.html_button([figure], _("The importance of every head"), "importance")
    layer, head = divmod(int(rise.argmax()), rise.shape[1])
    st.caption(_("Zeroing layer {layer}'s head {head} costs the most: the loss rises by {rise:.3f} nats.",
                 layer=layer + 1, head=head + 1, rise=float(rise.max())))

race.race_section()
compare.compare_section()
