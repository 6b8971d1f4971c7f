"""app/chrome/streamlit_words.py: the words Streamlit writes itself (its controls' names and placeholders, the
uploader's button, size line and drop hint, the dialog and status line of a restart) rewritten in the page's
language by one script per page. The script runs
only in a browser; here, what each page sends it, and that it reads what Streamlit 1.67 writes.

    pytest tests/app/test_streamlit_words.py
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit

from app.chrome import streamlit_words
from app.chrome.i18n import catalog
from helpers.apptest import home

BUNDLE = Path(streamlit.__file__).parent / "static" / "static" / "js"


def sent_rules(at) -> list[list[dict]]:
    """The rules each streamlit_words script on the page carries."""
    scripts = [h.value for h in at.get("html") if "minigptChromeText" in h.value]
    return [json.loads(re.search(r"lab\.rules = (\[.*?\]);\n", s, re.S).group(1)) for s in scripts]


def test_a_chinese_page_sends_the_catalogs_words_for_streamlits_own_once_and_hidden():
    at = home("zh")
    scripts = [h.value for h in at.get("html") if "minigptChromeText" in h.value]
    assert len(scripts) == 1 and scripts[0].startswith(f"<style>.st-key-{streamlit_words.KEY} {{ display: none }}</style>")
    # st.html's sanitizer drops a script whose text holds "<" before a letter, "/" or "!"
    assert not re.search(r"<[/\w!]", scripts[0].split("<script>", 1)[1].removesuffix("</script>"))
    (rules,) = sent_rules(at)
    zh = catalog("zh")
    assert [rule["to"] for rule in rules] == [zh.gettext(message) for _where, _re, message in streamlit_words.RULES]
    words = {rule["re"]: rule["to"] for rule in rules}
    assert words["^Upload$"] == "上传"
    assert "每个文件最大 {size} MB" in words[r"^(?<size>\d+(?:\.\d+)?)MB per file • (?<types>.+)$"]


def test_an_english_page_sends_nothing_until_the_tab_has_had_another_language():
    at = home("en")
    assert sent_rules(at) == []
    at.radio(key="lang_choice").set_value("zh").run()
    assert sent_rules(at)[0][0]["to"] == catalog("zh").gettext("Help for {label}")
    at.radio(key="lang_choice").set_value("en").run()
    assert sent_rules(at) == [[]]  # no rules: each rewritten word goes back to Streamlit's English


@pytest.mark.parametrize("english, fields", [
    ("Help for 在班级看板上的名字", {"label": "在班级看板上的名字"}), ("Help", {}),
    ("Remove 语料.txt", {"name": "语料.txt"}), ("Add files", {}), ("Upload", {}),
    ("25MB per file • TXT", {"size": "25", "types": "TXT"}), ("Drag and drop a file here", {}),
    ("Error: application/zip files are not allowed.", {"type": "application/zip"}),
    ("Error: File must be 25.0MB or smaller.", {"size": "25.0MB"}), ("Choose an option", {}), ("Increment", {}),
    ("Collapse sidebar", {}), ("Show/hide columns", {}), ("Connection error", {}), ("Connecting", {}),
    ("Streamlit server is not responding. Are you connected to the internet?", {}),
])
def test_each_rule_reads_the_english_streamlit_writes_and_fills_its_message(english, fields):
    matched = [(re.match(pattern.replace("(?<", "(?P<"), english), message)
               for _where, pattern, message in streamlit_words.RULES]
    match, message = next((m, message) for m, message in matched if m)
    assert match.groupdict() == fields and set(re.findall(r"\{(\w+)\}", message)) == set(fields)


def literal(pattern: str) -> str | None:
    """The English a rule without fields reads, as written: "^Main menu$" is "Main menu"."""
    if "(?<" in pattern:
        return None
    return re.sub(r"\\(.)", r"\1", pattern.removeprefix("^").removesuffix("$"))


def test_streamlits_bundle_still_writes_the_english_the_rules_read():
    """Streamlit 1.67's frontend: an upgrade that rewords these leaves the rules reading nothing."""
    code = "".join(path.read_text(encoding="utf-8", errors="ignore") for path in BUNDLE.glob("*.js"))
    literals = {literal(pattern) for _where, pattern, _message in streamlit_words.RULES} - {None}
    assert "Are you connected to the internet?" in " ".join(literals)  # the dialog of a restart is read
    for written in literals:
        assert f"`{written}`" in code, written  # each word Streamlit writes as one string in its code
    for written in ("`Help for ${", "`Help`", "`Remove ${", "`Add files`", "`Upload`",
                    " per file`", "`Drag and drop a file here`", "`Drag and drop files here`",
                    "`Error: `", " files are not allowed.`", "`File must be ${", " or smaller.`"):
        assert written in code, written


def test_a_restarts_words_are_read_in_the_dialog_and_status_line_only():
    """The connection dialog's words are rewritten where Streamlit draws them (its dialog, the status
    widget), never in the page's own elements: a learner's text that says "Stop" is theirs."""
    chrome = {literal(pattern) for where, pattern, _message in streamlit_words.RULES if where == "chrome"}
    assert {"Connection error", "Connecting",
            "Streamlit server is not responding. Are you connected to the internet?"} <= chrome
    assert streamlit_words.CHROME_TEXT.split(", ") == ["[role=dialog]", "[data-testid=stStatusWidget]",
                                                       "[data-testid=stTooltipContent]"]
    sent = streamlit_words.script()
    assert '"[role=dialog] *, [data-testid=stStatusWidget] *, [data-testid=stTooltipContent] *"' in sent
