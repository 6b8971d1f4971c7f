"""Home: what MiniGPT Lab is, the loaded model, and the choice of corpus, model and device."""
import streamlit as st

from app import choices, corpora, models, navigation, runs, uploads
from minigpt import BUILTIN_CORPORA, DEFAULT_CORPUS, available_devices

navigation.setup_page(__file__)

st.title("MiniGPT Lab")
st.markdown(
    "A tiny character-level GPT you can train, sample and look inside, in your browser. "
    "A small model ships with the app, so **Generate** and **Attention** work right away; "
    "**Train** grows your own while you watch, and **√d_k scaling** shows why attention divides by √d_k."
)
st.info("**First time here?** Open **Train** and press **Start**: the default *Small* preset learns the built-in "
        "course text's style in about half a minute. Then write with it on **Generate** and watch where it looks "
        "on **Attention**.")

summary = st.container(border=True)

st.subheader("Choose what to work with")
corpus_col, model_col, device_col = st.columns(3)

with corpus_col:
    corpus = st.selectbox("Corpus", corpora.corpus_options(), index=list(BUILTIN_CORPORA).index(DEFAULT_CORPUS),
                          key=choices.CORPUS, persist_state="session",
                          help="The text new runs train on. The shipped models learned the built-in corpora.")
    st.caption(corpora.corpus_description(corpus))
    st.file_uploader("…or upload a .txt file (UTF-8)", type=["txt"], key=uploads.CORPUS_UPLOAD,
                     on_change=uploads.on_corpus_upload)
    if error := uploads.upload_error(uploads.CORPUS_UPLOAD):
        st.error(error)

with model_col:
    entry, _ = runs.session_run()
    sources = [s for s in choices.MODEL_SOURCES if s != choices.TRAINED or entry is not None]
    if st.session_state.get(choices.MODEL_SOURCE) not in sources:
        st.session_state[choices.MODEL_SOURCE] = choices.SHIPPED
    source = st.radio("Model", sources, key=choices.MODEL_SOURCE, persist_state="session",
                      help="The model Generate and Attention use.")
    if source == choices.UPLOADED:
        st.file_uploader("Checkpoint (.zip from the Train page's download)", type=["zip"],
                         key=uploads.CHECKPOINT_UPLOAD, on_change=uploads.on_checkpoint_upload)
        if error := uploads.upload_error(uploads.CHECKPOINT_UPLOAD):
            st.error(error)

with device_col:
    st.selectbox("Device", available_devices(), key=choices.DEVICE, persist_state="session",
                 help="Only devices available on this server are listed.")

with summary:
    st.subheader("The loaded model")
    try:
        model = models.loaded_model()
    except models.ModelUnavailable as reason:
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
for col, (script, label, icon, offer) in zip(st.columns(4), navigation.PAGES[1:]):
    col.page_link(script, label=f"**{label}**", icon=icon)
    col.caption(offer)
