"""The words Streamlit 1.67 writes itself, in English, put in the page's language: the names a
screen reader gives its controls (a help icon's "Help for <label>", the sidebar's buttons, a table's
toolbar, a number box's steppers, a select box's "Open" and "Choose an option"), the file uploader's
button, size line, drop hint, add and remove buttons, and the errors it finds itself (a file's type
or size), and what it shows while the server is away (the "Connection error" dialog during a
restart, the status widget's "Connecting"). Streamlit has no setting for its own words
(streamlit#1353, #13500), so one small script per page rewrites them where the browser draws them,
with the catalogs' translations, as React adds them (a MutationObserver). The script stays in the
page when the server goes: the words of a restart are rewritten too. The CSS that paints some of
them before the script runs (i18n.streamlit_chrome_css, uploaders_css) stays: a first visit never
shows the English; the script then makes the page's own text say it too.
"""
from __future__ import annotations

import functools
import json

import streamlit as st

from minigpt import N_

from app.chrome.i18n import SOURCE, _, language, painted_css

KEY = "chrome_text"            # the hidden container the script is drawn in
SENT_KEY = "chrome_text_sent"  # session_state: a script has run in this tab, so English must undo its words
# Where Streamlit writes text of its own while the server is away or a script runs: the connection dialog
# (Streamlit's only dialog with no key; ours say our words, which no rule reads), the status widget, a tooltip
CHROME_TEXT = "[role=dialog], [data-testid=stStatusWidget], [data-testid=stTooltipContent]"
NOT_ANSWERING = N_("The server is not answering: it may be restarting. This page reconnects by itself as soon as "
                   "it is back, and nothing you did is lost.")
# (where, the English as Streamlit 1.67 writes it (a JavaScript pattern), our message with the same fields).
# where: an attribute (aria-label, placeholder), or the text of an element in the uploader or in CHROME_TEXT
RULES = (
    ("aria-label", r"^Help for (?<label>[\s\S]+)$", N_("Help for {label}")),
    ("aria-label", r"^Help$", N_("Help")),
    ("aria-label", r"^Remove (?<name>[\s\S]+)$", N_("Remove {name}")),
    ("aria-label", r"^Add files$", N_("Add files")),
    ("aria-label", r"^file upload$", N_("Upload a file")),
    ("aria-label", r"^Sidebar$", N_("Sidebar")),
    ("aria-label", r"^Collapse sidebar$", N_("Collapse sidebar")),
    ("aria-label", r"^Expand sidebar$", N_("Expand sidebar")),
    ("aria-label", r"^Main menu$", N_("Main menu")),
    ("aria-label", r"^Link to heading$", N_("Link to this heading")),
    ("aria-label", r"^Open$", N_("Show the options")),
    ("aria-label", r"^Close$", N_("Close")),
    ("aria-label", r"^Clear all$", N_("Clear all")),
    ("aria-label", r"^Clear value$", N_("Clear")),
    ("aria-label", r"^Selected values$", N_("Chosen")),
    ("aria-label", r"^Increment$", N_("One more")),
    ("aria-label", r"^Decrement$", N_("One less")),
    ("aria-label", r"^Show password$", N_("Show the password")),
    ("aria-label", r"^Hide password$", N_("Hide the password")),
    ("aria-label", r"^Fullscreen$", N_("Full screen")),
    ("aria-label", r"^Close fullscreen$", N_("Leave full screen")),
    ("aria-label", r"^Copy to clipboard$", N_("Copy to the clipboard")),
    ("aria-label", r"^Show/hide columns$", N_("Show or hide columns")),
    ("aria-label", r"^Search$", N_("Search")),
    ("aria-label", r"^progress$", N_("Progress")),
    ("aria-label", r"^Running\.\.\.$", N_("Running…")),
    ("placeholder", r"^Choose an option$", N_("Choose an option")),
    ("placeholder", r"^Choose options$", N_("Choose options")),
    ("uploader", r"^Upload$", N_("Upload")),
    ("uploader", r"^(?<size>\d+(?:\.\d+)?)MB per file • (?<types>.+)$", N_("At most {size} MB per file · {types}")),
    ("uploader", r"^Drag and drop a file here$", N_("Drag and drop a file here")),
    ("uploader", r"^Drag and drop files here$", N_("Drag and drop files here")),
    ("uploader", r"^Error: (?<type>.*) files are not allowed\.$", N_("Error: {type} files are not allowed.")),
    ("uploader", r"^Error: File must be (?<size>.+) or smaller\.$", N_("Error: the file must be {size} or smaller.")),
    ("chrome", r"^Connection error$", N_("Connection lost")),
    ("chrome", r"^Streamlit server is not responding\. Are you connected to the internet\?$", NOT_ANSWERING),
    ("chrome", r"^Is Streamlit still running\? If you accidentally stopped Streamlit, just restart it in your "
               r"terminal:$", NOT_ANSWERING),
    ("chrome", r"^Connection timed out\.$", NOT_ANSWERING),
    ("chrome", r"^Connecting$", N_("Reconnecting")),
    ("chrome", r"^Stop$", N_("Stop")),
    ("chrome", r"^Stopping\.\.\.$", N_("Stopping…")),
    ("chrome", r"^Rerun$", N_("Run again")),
    ("chrome", r"^Always rerun$", N_("Always run again")),
    ("chrome", r"^File change\.$", N_("The app's code changed.")),
    ("chrome", r"^Fullscreen$", N_("Full screen")),
    ("chrome", r"^Close fullscreen$", N_("Leave full screen")),
    ("chrome", r"^Show/hide columns$", N_("Show or hide columns")),
    ("chrome", r"^Search$", N_("Search")),
)
# Idempotent: the observer is made once per tab; a later page, or a language switch, only replaces
# the rules. What each element said in English, and what it was given, is kept per place (an input has
# both an aria-label and a placeholder), so that English restores it and React's own later changes are
# read afresh. Rewritten uploader text drops the CSS paint over it, or a screen reader would read both;
# fields fill as written.
SCRIPT = """(() => {
const lab = window.minigptChromeText ||= {};
lab.rules = RULES;
const memo = lab.memo ||= new WeakMap();
const fill = (rule, m) => rule.to.replace(/\\{(\\w+)\\}/g, (_, k) => (m.groups || {})[k] ?? '');
const said = (english, where) => { for (const rule of lab.rules) { if (rule.where !== where) continue;
  const m = english.match(new RegExp(rule.re)); if (m && rule.to) return fill(rule, m); } return english; };
const redo = (el, now, where, write) => {
  const seen = memo.get(el) || {}, was = seen[where];
  const english = was && was.to === now ? was.en : now;
  const text = said(english, where);
  if (text !== now) write(text);
  if (text === english) {
    delete seen[where];
    if (where === 'uploader' && el.hasAttribute('data-chrome-text')) {
      el.removeAttribute('data-chrome-text'); el.style.fontSize = '';
    }
  } else {
    seen[where] = {en: english, to: text}; memo.set(el, seen);
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
const texts = (selector, where) => { for (const el of document.querySelectorAll(selector)) {
  const nodes = [...el.childNodes];
  if (!nodes.length || nodes.some(n => n.nodeType !== Node.TEXT_NODE)) continue;
  redo(el, el.textContent, where, text => nodes.forEach((n, i) => { n.nodeValue = i ? '' : text; }));
} };
const apply = () => {
  lab.queued = false;
  for (const name of ['aria-label', 'placeholder'])
    for (const el of document.querySelectorAll(`[${name}]`))
      redo(el, el.getAttribute(name), name, text => el.setAttribute(name, text));
  texts('[data-testid=stFileUploader] *', 'uploader');
  texts(CHROME, 'chrome');
};
if (!lab.observer) {
  const style = document.createElement('style');
  style.textContent = '[data-chrome-text]::after { content: none !important }';
  document.head.appendChild(style);
  lab.observer = new MutationObserver(() => { if (!lab.queued) { lab.queued = true; requestAnimationFrame(apply); } });
  lab.observer.observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true,
                                      attributeFilter: ['aria-label', 'placeholder']});
}
apply();
})();"""


def rules() -> list[dict]:
    """The rules in the page's language; in English, none (each rewritten word goes back)."""
    if language() == SOURCE:
        return []
    return [{"where": where, "re": pattern, "to": _(message)} for where, pattern, message in RULES]


def script() -> str:
    """The script in the page's language."""
    return _script(language())


@functools.cache  # per language: the catalogs and the rules do not change while the process runs
def _script(lang: str) -> str:
    # the rules go in as JSON with every "<" escaped: no message can end the <script> early, and
    # st.html's sanitizer (DOMPurify) drops a script whose text holds "<" before a letter, "/" or "!"
    chrome = CHROME_TEXT.split(", ")
    return (SCRIPT.replace("RULES", json.dumps(rules(), ensure_ascii=False).replace("<", "\\u003c"))
            .replace("CHROME", json.dumps(", ".join(f"{box} *" for box in chrome))))


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
CLASS_CORPUS_UPLOAD, LESSON_UPLOAD = "class_corpus_upload", "class_lesson_upload"  # the teacher's, on the board
TYPES = {CORPUS_UPLOAD: ["txt"], CHECKPOINT_UPLOAD: ["zip"], CLASS_CORPUS_UPLOAD: ["txt"],  # what each one takes
         LESSON_UPLOAD: ["md", "txt"]}


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
