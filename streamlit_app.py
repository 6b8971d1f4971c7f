"""Home: what MiniGPT Lab is, the loaded model, and the choice of corpus, model and device."""
import streamlit as st

import app_state
from minigpt import BUILTIN_CORPORA, DEFAULT_CORPUS, available_devices

app_state.setup_page(__file__)

st.title("MiniGPT Lab")
st.markdown(
    "A tiny character-level GPT you can train, sample and look inside, in your browser. "
    "A small model ships with the app, so **Generate** and **Attention** work right away; "
    "**Train** grows your own while you watch, and **√d_k scaling** shows why attention divides by √d_k."
)

summary = st.container(border=True)

st.subheader("Choose what to work with")
corpus_col, model_col, device_col = st.columns(3)

with corpus_col:
    corpus = st.selectbox("Corpus", app_state.corpus_options(), index=list(BUILTIN_CORPORA).index(DEFAULT_CORPUS),
                          key=app_state.CORPUS, persist_state="session",
                          help="The text new runs train on. The shipped models learned the built-in corpora.")
    st.caption(app_state.corpus_description(corpus))
    st.file_uploader("…or upload a .txt file (UTF-8)", type=["txt"], key=app_state.CORPUS_UPLOAD,
                     on_change=app_state.on_corpus_upload)
    if error := app_state.upload_error(app_state.CORPUS_UPLOAD):
        st.error(error)

with model_col:
    entry, _ = app_state.session_run()
    sources = [s for s in app_state.MODEL_SOURCES if s != app_state.TRAINED or entry is not None]
    if st.session_state.get(app_state.MODEL_SOURCE) not in sources:
        st.session_state[app_state.MODEL_SOURCE] = app_state.SHIPPED
    source = st.radio("Model", sources, key=app_state.MODEL_SOURCE, persist_state="session",
                      help="The model Generate and Attention use.")
    if source == app_state.UPLOADED:
        st.file_uploader("Checkpoint (.zip from the Train page's download)", type=["zip"],
                         key=app_state.CHECKPOINT_UPLOAD, on_change=app_state.on_checkpoint_upload)
        if error := app_state.upload_error(app_state.CHECKPOINT_UPLOAD):
            st.error(error)

with device_col:
    st.selectbox("Device", available_devices(), key=app_state.DEVICE, persist_state="session",
                 help="Only devices available on this server are listed.")

with summary:
    st.subheader("The loaded model")
    try:
        model = app_state.loaded_model()
    except app_state.ModelUnavailable as reason:
        st.info(str(reason))
    else:
        cols = st.columns(5)
        cols[0].metric("Corpus", model.corpus)
        cols[1].metric("Parameters", f"{model.num_params:,}")
        cols[2].metric("Device", model.device)
        cols[3].metric("Status", model.status)
        cols[4].metric("Steps trained", model.steps)
        st.caption(f"{model.detail[0].upper()}{model.detail[1:]}: {model.describe()}.")

st.subheader("Where next")
for col, (script, label, icon, offer) in zip(st.columns(4), app_state.PAGES[1:]):
    col.page_link(script, label=f"**{label}**", icon=icon)
    col.caption(offer)
