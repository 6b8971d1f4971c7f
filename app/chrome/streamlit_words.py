"""The words Streamlit 1.67 writes itself, in English, put in the page's language: the name a
screen reader gives each help icon ("Help for <label>"), and the file uploader's button, size
line, drop hint, add and remove buttons, and the errors it finds itself (a file's type or size).
Streamlit has no setting for its own words (streamlit#1353, #13500), so one small script per
page rewrites them where the browser draws them, with the catalogs' translations, as React adds
them (a MutationObserver). The CSS that paints some of them before the script runs
(i18n.streamlit_chrome_css, uploaders_css) stays: a first visit never shows the English;
the script then makes the page's own text say it too.
"""
from __future__ import annotations

import json

import streamlit as st

from minigpt import N_

from app.chrome.i18n import SOURCE, _, language, painted_css

KEY = "chrome_text"            # the hidden container the script is drawn in
SENT_KEY = "chrome_text_sent"  # session_state: a script has run in this tab, so English must undo its words
# (where, the English as Streamlit 1.67 writes it (a JavaScript pattern), our message with the same fields)
RULES = (
    ("aria-label", r"^Help for (?<label>[\s\S]+)$", N_("Help for {label}")),
    ("aria-label", r"^Help$", N_("Help")),
    ("aria-label", r"^Remove (?<name>[\s\S]+)$", N_("Remove {name}")),
    ("aria-label", r"^Add files$", N_("Add files")),
    ("uploader", r"^Upload$", N_("Upload")),
    ("uploader", r"^(?<size>\d+(?:\.\d+)?)MB per file • (?<types>.+)$", N_("At most {size} MB per file · {types}")),
    ("uploader", r"^Drag and drop a file here$", N_("Drag and drop a file here")),
    ("uploader", r"^Drag and drop files here$", N_("Drag and drop files here")),
    ("uploader", r"^Error: (?<type>.*) files are not allowed\.$", N_("Error: {type} files are not allowed.")),
    ("uploader", r"^Error: File must be (?<size>.+) or smaller\.$", N_("Error: the file must be {size} or smaller.")),
)
# Idempotent: the observer is made once per tab; a later page, or a language switch, only replaces
# the rules. Each rewritten element keeps its English (data-chrome-en) and what it was given
# (data-chrome-to), so that English restores it and React's own later changes are read afresh.
# Rewritten text drops the CSS paint over it, or a screen reader would read both; fields fill as written.
SCRIPT = """(() => {
const lab = window.minigptChromeText ||= {};
lab.rules = RULES;
const fill = (rule, m) => rule.to.replace(/\\{(\\w+)\\}/g, (_, k) => (m.groups || {})[k] ?? '');
const said = english => { for (const rule of lab.rules) { const m = rule.re && english.match(new RegExp(rule.re));
  if (m && rule.to) return [rule, fill(rule, m)]; } return [null, english]; };
const redo = (el, now, where, write) => {
  const english = el.dataset.chromeTo === now && el.dataset.chromeEn !== undefined ? el.dataset.chromeEn : now;
  const [rule, text] = said(english);
  if (rule && rule.where !== where) return;
  if (text !== now) write(text);
  if (text === english) {
    delete el.dataset.chromeEn; delete el.dataset.chromeTo;
    if (el.hasAttribute('data-chrome-text')) { el.removeAttribute('data-chrome-text'); el.style.fontSize = ''; }
  } else {
    el.dataset.chromeEn = english; el.dataset.chromeTo = text;
    if (where === 'uploader' && getComputedStyle(el).fontSize === '0px') unpaint(el);
  }
};
const unpaint = el => {  // painted over by CSS: its own size back (read off a twin), the painted words off
  const twin = document.createElement('i');
  twin.className = el.className;
  el.parentNode.appendChild(twin);
  el.style.fontSize = getComputedStyle(twin).fontSize;
  twin.remove();
  el.setAttribute('data-chrome-text', '');
};
const apply = () => {
  lab.queued = false;
  for (const el of document.querySelectorAll('[aria-label]'))
    redo(el, el.getAttribute('aria-label'), 'aria-label', text => el.setAttribute('aria-label', text));
  for (const el of document.querySelectorAll('[data-testid=stFileUploader] *')) {
    const nodes = [...el.childNodes];
    if (!nodes.length || nodes.some(n => n.nodeType !== Node.TEXT_NODE)) continue;
    redo(el, el.textContent, 'uploader', text => nodes.forEach((n, i) => { n.nodeValue = i ? '' : text; }));
  }
};
if (!lab.observer) {
  const style = document.createElement('style');
  style.textContent = '[data-chrome-text]::after { content: none !important }';
  document.head.appendChild(style);
  lab.observer = new MutationObserver(() => { if (!lab.queued) { lab.queued = true; requestAnimationFrame(apply); } });
  lab.observer.observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true,
                                      attributeFilter: ['aria-label']});
}
apply();
})();"""


def rules() -> list[dict]:
    """The rules in the page's language; in English, none (each rewritten word goes back)."""
    if language() == SOURCE:
        return []
    return [{"where": where, "re": pattern, "to": _(message)} for where, pattern, message in RULES]


def script() -> str:
    # the rules go in as JSON with every "<" escaped: no message can end the <script> early, and
    # st.html's sanitizer (DOMPurify) drops a script whose text holds "<" before a letter, "/" or "!"
    return SCRIPT.replace("RULES", json.dumps(rules(), ensure_ascii=False).replace("<", "\\u003c"))


def translate_streamlit_words() -> None:
    """On every page outside English (and in English once a tab has had the script, to undo it):
    the script, in a container that takes no room (its own CSS hides it as it arrives)."""
    if language() == SOURCE and not st.session_state.get(SENT_KEY):
        return
    st.session_state[SENT_KEY] = True
    with st.container(key=KEY):
        st.html(f"<style>.st-key-{KEY} {{ display: none }}</style><script>{script()}</script>",
                unsafe_allow_javascript=True)


CORPUS_UPLOAD, CHECKPOINT_UPLOAD = "corpus_upload", "checkpoint_upload"  # Home's uploaders' widget keys
TYPES = {CORPUS_UPLOAD: ["txt"], CHECKPOINT_UPLOAD: ["zip"]}  # what each uploader takes


def uploaders_css() -> str:
    """Outside English, CSS that paints the button and the size line Streamlit 1.67 writes in English
    over in the catalog's words, scoped to each uploader's container. It goes out with the page's
    own CSS (navigation), so that a first visit never shows the English before it."""
    if language() == SOURCE:
        return ""
    css = []
    for key, types in TYPES.items():
        box = f".st-key-uploader_{key}"
        limit = _("At most {size} MB per file · {types}", size=st.get_option("server.maxUploadSize"),
                  types=", ".join(t.upper() for t in types))
        css += [painted_css(f"{box} button [data-testid=stMarkdownContainer] p", _("Upload"), "0.875rem"),
                painted_css(f"{box} [data-testid=stFileUploaderDropzoneInstructions] span", limit, "0.8rem")]
    return "".join(css)
