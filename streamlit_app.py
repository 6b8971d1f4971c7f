"""Home: what MiniGPT Lab is, the loaded model, and the choice of corpus, model and device.

Home draws without torch, which a fresh server's first visitor would otherwise wait seconds for:
it describes the shipped model from its config.json and lists the devices a CPU build of torch
offers; torch loads once the browser has drawn Home (app.state.warmup), and the other pages wait for it."""
import streamlit as st

from minigpt import BUILTIN_CORPORA, DEFAULT_CORPUS, DEFAULT_PRESET, PRESETS

from app import navigation
from app.chrome import site, url
from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _, language, number
from app.parts import lesson_links
from app.state import choices, corpora, loaded_model, runs, warmup
from app.views import uploads

# the browser goes on drawing Home for about this long after the script ends; torch's import meanwhile
# took the CPU it drew with, and the first load took longer (bench/dashboard_latency.py, bench/RESULTS.md)
HOME_DRAWN_S = 1.0

navigation.setup_page(site.HOME.script)

st.title("MiniGPT Lab")
st.markdown(_(
    "A tiny character-level GPT you can train, sample and look inside, in your browser. A small model ships with "
    "the app, so **Generate** and **Attention** work right away; **Train** grows your own while you watch, and "
    "**√d_k scaling** shows why attention divides by √d_k."))
steps = len(lesson_links.lesson().steps)  # the class's lesson, or the built-in one
st.page_link(site.LESSON.script, label=_("**New here? Start the lesson:** {steps} short steps through the model, from "
                                        "what it predicts to training your own", steps=steps), icon="🎓",
             query_params={url.LESSON: "1", url.LANG: language()})
st.info(_("**Or find your own way:** open **Train** and press **Start**: the default *{preset}* preset learns the "
          "built-in course text's style, and its ETA says how long that takes on this server. Then write with it "
          "on **Generate** and watch where it looks on **Attention**. The **Glossary** gives every term in Chinese "
          "and English.", preset=_(PRESETS[DEFAULT_PRESET].label)))

summary = st.container(border=True)

st.subheader(_("Choose what to work with"))
corpus_col, model_col, device_col = st.columns(3)

with corpus_col:
    corpus = st.selectbox(_("Corpus"), corpora.corpus_options(), index=list(BUILTIN_CORPORA).index(DEFAULT_CORPUS),
                          format_func={k: corpora.corpus_option_label(k) for k in corpora.corpus_options()}.get,
                          key=choices.CORPUS, **REMEMBERED,
                          help=_("The text new runs train on. The shipped models learned the built-in corpora."))
    st.caption(corpora.corpus_description(corpus))
    uploads.uploader(_("…or upload a .txt file (UTF-8, UTF-16 or GBK)"), uploads.CORPUS_UPLOAD, uploads.on_corpus_upload)
    if error := uploads.upload_error(uploads.CORPUS_UPLOAD):
        st.error(error)

with model_col:
    entry, _owner = runs.session_run()
    sources = [s for s in choices.MODEL_SOURCES if s != choices.TRAINED or entry is not None]
    if st.session_state.get(choices.MODEL_SOURCE) not in sources:
        st.session_state[choices.MODEL_SOURCE] = choices.SHIPPED
    source = st.radio(_("Model"), sources, format_func={s: choices.model_source_label(s) for s in sources}.get,
                      key=choices.MODEL_SOURCE,
                      **REMEMBERED, help=_("The model Generate and Attention use."))
    if source == choices.UPLOADED:
        uploads.uploader(_("Checkpoint (.zip from the Train page's download)"), uploads.CHECKPOINT_UPLOAD,
                         uploads.on_checkpoint_upload)
        if error := uploads.upload_error(uploads.CHECKPOINT_UPLOAD):
            st.error(error)

with device_col:
    if (usable := choices.known_devices()) is not None:
        st.selectbox(_("Device"), usable, key=choices.DEVICE, **REMEMBERED,
                     help=_("Only devices available on this server are listed."))
    else:  # a stand-in until torch can say which devices there are; then the page draws again
        st.selectbox(_("Device"), [choices.device_label()], disabled=True,
                     help=_("Only devices available on this server are listed."))
        warmup.rerun_when_ready()

with summary:
    st.subheader(_("The loaded model"))
    try:
        model = loaded_model.session_facts()
    except loaded_model.ModelUnavailable as reason:
        st.info(str(reason))
    else:
        for col, (label, value) in zip([*st.columns(3), *st.columns(3)], (  # two rows: no value cut off
                (_("Corpus"), model.corpus), (_("Parameters"), number(model.num_params)), (_("Steps trained"), model.steps),
                (_("Status"), model.status), (_("Device"), model.device))):
            col.metric(label, value)
        st.caption(_("Loaded: {source}; {description}.", source=model.detail, description=model.description))

st.subheader(_("Where next"))
links = [page for page in site.PAGES if page != site.HOME]
for col, page in zip(st.columns(len(links)), links):
    col.page_link(page.script, label=f"**{_(page.label)}**", icon=page.icon, query_params={url.LANG: language()})
    col.caption(navigation.offer(page))

warmup.start(after=HOME_DRAWN_S, then=runs.prepare_training)  # once the browser has drawn the page, or at once when a page needs it (warmup.wait)
