"""The app in Chinese and English: complete catalogs, no shown string around the translation
layer, every page in Chinese without English words, one word per term, the choice of language,
and the library's errors in Chinese.

    pytest tests/cross/test_i18n.py
"""
from __future__ import annotations

import ast
import gettext
import importlib
import pkgutil
import re
import string
import tomllib

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_keywords
from babel.messages.pofile import read_po

import minigpt
from app.state import choices, runs
from app.views import glossary, uploads
from app.chrome import i18n
from app.state.lesson_file import builtin_lesson
from helpers import ROOT
from helpers.apptest import PAGES, home, own_run, page, start_tiny_run, tiny_settings, wait_for_step
from helpers.checkpoints import make_zip
from helpers.language import GLOSSED, assert_chinese, english_words
from minigpt import LabError, load_pretrained
from app.chrome.site import ATTENTION, GENERATE, GLOSSARY, LESSON, TRAIN

STEPS = builtin_lesson("en").steps  # the built-in lesson, as the app reads it
LANGS = [code for code in i18n.languages() if code != i18n.SOURCE]

SOURCES = [ROOT / "streamlit_app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "app").rglob("*.py"))]


def source_messages() -> dict[str | tuple[str, str], str]:
    """Every message the code marks for translation, extracted as `pybabel extract` does with
    the project's own keywords; value: where it is."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["babel"]["mappings"][0]
    keywords = {"_": None, "N_": None, **parse_keywords(config["keywords"].split())}
    method_map = [(pattern, "python") for pattern in ("streamlit_app.py", "pages/**.py", "app/**.py", "minigpt/**.py")]
    found = {}
    for filename, lineno, message, _comments, _context in extract_from_dir(str(ROOT), method_map, keywords=keywords):
        if message and (message if isinstance(message, str) else message[0]):
            found[message] = f"{filename}:{lineno}"
    return found


def fields(text: str) -> set[tuple[str, str, str]]:
    """A template's fields with their format spec and conversion: {x:.2f} and {x} are not the same."""
    return {(name, spec, conv or "") for _lit, name, spec, conv in string.Formatter().parse(text) if name is not None}


def catalog_of(lang: str):
    with open(i18n.LOCALES / lang / "LC_MESSAGES" / f"{i18n.DOMAIN}.po", "rb") as po:
        return read_po(po, locale=lang)


def test_there_is_a_chinese_catalog():
    assert "zh" in LANGS
    assert i18n.display_name("zh") == "中文" and i18n.display_name("en") == "English"


@pytest.mark.parametrize("lang", LANGS)
def test_every_message_in_the_code_has_a_translation_with_the_same_fields(lang):
    catalog = catalog_of(lang)
    messages = source_messages()
    assert len(messages) > 300
    problems = []
    for message, where in messages.items():
        entry = catalog.get(message)
        if entry is None or entry.fuzzy:
            problems.append(f"{where}: no translation of {message!r}")
            continue
        singular = message if isinstance(message, str) else message[0]
        translations = [entry.string] if isinstance(entry.string, str) else list(entry.string)
        wanted = fields(message) if isinstance(message, str) else fields(message[1])
        counts = {("n", "", "")}  # a plural's count may be left out of a language's single form
        for text in translations:
            if not text.strip():
                problems.append(f"{where}: empty translation of {singular!r}")
            elif fields(text) - wanted - counts or wanted - counts - fields(text):
                problems.append(f"{where}: {text!r} does not keep the fields of {singular!r} exactly")
    assert not problems, "\n".join(problems)


CJK_PUNCTUATION = "：？。，；！）」”、"


def test_chinese_bold_closes_where_markdown_sees_it():
    """Markdown closes ** only where it is right-flanking: "**试试：**改" shows its asterisks, since
    the closing ** has punctuation before it and a character after. Close the bold before the colon."""
    problems = []
    for entry in catalog_of("zh"):
        for text in ([entry.string] if isinstance(entry.string, str) else list(entry.string or ())):
            marks = [m.start() for m in re.finditer(r"\*\*", text)]
            for k in marks[1::2]:  # every second ** closes
                before, after = text[k - 1], text[k + 2: k + 3]
                if before in CJK_PUNCTUATION and after and not after.isspace() and after not in CJK_PUNCTUATION:
                    problems.append(text[max(0, k - 20): k + 10])
    assert not problems, problems


@pytest.mark.parametrize("lang", LANGS)
def test_the_compiled_catalog_is_the_po_file(lang):
    with open(i18n.LOCALES / lang / "LC_MESSAGES" / f"{i18n.DOMAIN}.mo", "rb") as mo:
        compiled = gettext.GNUTranslations(mo)
    for entry in catalog_of(lang):
        if not entry.id:
            continue
        if isinstance(entry.id, str):
            assert compiled.gettext(entry.id) == entry.string, entry.id
        else:
            assert compiled.ngettext(entry.id[0], entry.id[1], 2) == entry.string[compiled.plural(2)], entry.id


SHOWN_ARGUMENTS = {"label", "help", "placeholder", "text", "body", "value", "caption"}

SHOWING = {"title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success", "toast",
           "button", "download_button", "form_submit_button", "page_link", "metric", "selectbox", "radio", "slider",
           "select_slider", "number_input", "text_input", "text_area", "checkbox", "toggle", "file_uploader",
           "multiselect", "expander", "spinner", "progress", "tabs", "write", "NumberColumn", "ProgressColumn"}


def literal_words(node: ast.AST) -> list[str]:
    """The English words of a string literal or of an f-string's literal parts."""
    parts = [node] if isinstance(node, ast.Constant) else node.values if isinstance(node, ast.JoinedStr) else []
    words = []
    for part in parts:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            words += english_words(part.value, set())
    return words


def test_no_page_shows_a_string_that_skips_the_translation_layer():
    problems = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SHOWING):
                continue
            shown = node.args[:1] + [k.value for k in node.keywords if k.arg in SHOWN_ARGUMENTS]
            if node.func.attr == "tabs" and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
                shown = list(node.args[0].elts)
            for argument in shown:
                if words := literal_words(argument):
                    problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.attr}(...) shows {words}")
    assert not problems, "\n".join(problems)


# widgets whose empty state shows Streamlit's own English words unless given a placeholder
DEFAULT_PLACEHOLDERS = {"multiselect": "Choose options"}


def test_no_widget_falls_back_to_streamlits_english_placeholder():
    problems = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in DEFAULT_PLACEHOLDERS
                    and not any(k.arg == "placeholder" for k in node.keywords)):
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.attr}(...) would show "
                                f"{DEFAULT_PLACEHOLDERS[node.func.attr]!r}")
    assert not problems, "\n".join(problems)


MARKERS = {"_", "n_", "N_", "Message"}


def test_every_marked_message_is_written_where_babel_can_read_it():
    """_(f"…{x}") or _("a" + b) would reach no catalog: Babel extracts string literals only. A
    variable is fine where it holds an N_-marked literal (a table of labels)."""
    problems = []
    for path in [*SOURCES, *sorted((ROOT / "minigpt").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in MARKERS:
                first = node.args[0] if node.args else None
                if isinstance(first, (ast.JoinedStr, ast.BinOp)) or first is None:
                    problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.id}() of a built string")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "tr" and node.args
                    and isinstance(node.args[0], ast.Constant)):  # a figure builder's words: _ = tr, then _("…")
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: tr() of a literal, which Babel does not read")
            if isinstance(node, ast.JoinedStr):
                for value in node.values:
                    call = value.value if isinstance(value, ast.FormattedValue) else None
                    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in MARKERS
                            and call.args and isinstance(call.args[0], ast.Constant)):
                        problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {call.func.id}() inside an f-string")
    assert not problems, "\n".join(problems)


def library_errors() -> set[str]:
    """The name of every error class whose first argument is a message template: LabError and all
    its subclasses, found by importing every module of the library, not by reading a list."""
    for module in pkgutil.walk_packages(minigpt.__path__, "minigpt."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found, todo = set(), [LabError]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return found


def babel_keywords() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["babel"]["mappings"][0]
    return {keyword.split(":")[0] for keyword in config["keywords"].split()}


def test_extraction_knows_every_library_error():
    """Babel extracts a raised error's template only when its class is one of the keywords: an error
    class missing from them would reach no catalog and show in English to a Chinese learner."""
    errors = library_errors()
    assert {"LabError", "CheckpointError", "TrainingDiverged"} <= errors  # the walk finds them at all
    assert not errors - babel_keywords(), f"add to pyproject.toml's Babel keywords: {sorted(errors - babel_keywords())}"


def test_every_library_error_is_a_literal_template_the_catalogs_can_hold():
    classes = library_errors() | {"Message"}
    problems = []
    for path in sorted((ROOT / "minigpt").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes
                    and node.args and not (isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str))):
                problems.append(f"{path.name}:{node.lineno}: {node.func.id}(...) without a literal template")
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def zh_run():
    """A tiny run trained in Chinese to a few evaluations, then paused: every part of Train and
    the Attention time-lapse has something to show."""
    at = start_tiny_run(lang="zh", eval_interval=5)
    wait_for_step(at, 12)
    at.button(key="pause").click().run()
    yield at
    runs.registry().stop_all()


@pytest.mark.slow
def test_every_page_in_chinese_shows_no_english_words(zh_run):
    at = zh_run
    assert at.title[0].value == "训练"
    assert_chinese(at, "Train with a run")
    assert any("验证损失" in m.label for m in at.metric)
    deltas = [m.proto.delta for m in at.metric if m.proto.delta]
    assert deltas and all(d[0] in "+-" for d in deltas), deltas  # Streamlit reads the arrow from the sign
    for path in PAGES[1:]:
        assert_chinese(page(at, path), path)
    assert_chinese(page(at, "streamlit_app.py"), "Home")


@pytest.mark.slow
def test_generate_and_the_unscaled_attention_in_chinese():
    at = page(home("zh"), GENERATE.script)
    at.button(key="generate").click().run()
    assert at.dataframe and at.code
    assert_chinese(at, "Generate after a generation")
    at = page(at, ATTENTION.script)
    at.checkbox(key="attention_unscaled").check().run()
    at.radio(key="attention_view").set_value("grid").run()
    assert_chinese(at, "Attention without scaling, every head")
    assert any("第 1 层" in c.value for c in at.caption)


@pytest.mark.parametrize("lang", ["en", *LANGS])
@pytest.mark.parametrize("path", [None, *PAGES])
def test_every_page_renders_in_every_language(lang, path):
    at = home(lang)
    if path:
        at = page(at, path)
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[i18n.LANG_KEY] == lang and at.query_params["lang"] == lang


EVERYDAY = {"attention", "parameters"}  # 注意力 and 参数 name pages and metrics before any sentence can gloss them


@pytest.mark.slow
def test_each_term_is_introduced_with_its_english_name_on_every_page():
    """On its first use on a page (a step of the lesson counts as a page), a course term is followed
    by the English in brackets."""
    terms = [(glossary.term(english, "zh"), english) for english, _meaning in glossary.TERMS if english not in EVERYDAY]
    terms = [(zh, en) for zh, en in terms if len(zh) >= 2  # one-character words (键, 值, 熵) occur inside others
             and zh.lower() != en.lower()]                # a symbol kept as it is (logits) needs no gloss
    at = home("zh")
    problems = []
    lesson_steps = [(LESSON.script, n) for n in range(1, len(STEPS) + 1)]  # each step reads like a page
    for path, step in [(None, None), *[(p, None) for p in PAGES if p != LESSON.script], *lesson_steps]:
        if step == 1:
            at = page(at, path)
        elif step is not None:
            at.button(key="lesson_next:top").click().run()
        else:
            at = page(at, path) if path else at
        if step is not None:
            path = f"{path}, step {step}"
        prose = [t for t in shown_texts_in_order(at)]
        for zh, en in terms:
            longer = [z for z, _ in terms if zh in z and z != zh]
            first = next((t for t in prose if zh in _without(t, longer)), None)
            if first is not None and f"{zh}（{en}）".lower() not in first.lower():
                problems.append(f"{path or 'Home'}: first {zh} without （{en}）: {first[:80]!r}")
    assert not problems, "\n".join(problems)


PROSE = {"title", "header", "subheader", "markdown", "caption", "info", "warning", "success", "error"}


def shown_texts_in_order(at) -> list[str]:
    """The page's sentences and headings, in the order they stand, without tooltips and figures."""
    texts = []

    def walk(node) -> None:
        if getattr(node, "type", None) in PROSE:
            texts.append(node.value)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return texts


def _without(text: str, longer: list[str]) -> str:
    for word in longer:
        text = text.replace(word, "")
    return text


AMBIGUOUS = {"key", "value"}  # also a URL's key and a number's value


@pytest.mark.parametrize("lang", LANGS)
def test_a_term_is_the_same_word_in_every_message(lang):
    catalog = catalog_of(lang)
    problems = []
    for english, _meaning in glossary.TERMS:
        if english in AMBIGUOUS:
            continue
        word = glossary.term(english, lang)
        pattern = re.compile(rf"(?<![\w-]){re.escape(english)}(?![\w-])", re.I)
        for entry in catalog:
            ids = [re.sub(r"\{[^}]*\}", " ", i) for i in ([entry.id] if isinstance(entry.id, str) else entry.id or [])]
            strings = [entry.string] if isinstance(entry.string, str) else list(entry.string)
            if entry.id and entry.id != english and any(pattern.search(i) for i in ids):
                if not all(word.split("（")[0].replace(" 函数", "") in s for s in strings):
                    problems.append(f"{english} → {word}, but {ids[0][:60]!r} → {strings[0][:60]!r}")
    assert not problems, "\n".join(problems)


def test_the_glossary_goes_both_ways():
    at = page(home("zh"), GLOSSARY.script)
    table = at.dataframe[0].value
    assert list(table.columns[:2]) == ["中文", "English"]
    row = table[table["English"] == "scaled dot-product attention"].iloc[0]
    assert row["中文"] == "缩放点积注意力"
    at.text_input(key="glossary_search").input("causal mask").run()
    assert list(at.dataframe[0].value["中文"]) == ["因果掩码"]
    at.text_input(key="glossary_search").input("困惑度").run()
    assert list(at.dataframe[0].value["English"]) == ["perplexity"]
    english = page(home("en"), GLOSSARY.script).dataframe[0].value
    assert list(english.columns[:2]) == ["English", "中文"]


def test_the_browser_language_is_the_default(monkeypatch):
    context = type(__import__("streamlit").context)
    monkeypatch.setattr(context, "locale", property(lambda self: "zh-CN"))
    at = home()
    assert at.session_state[i18n.LANG_KEY] == "zh" and at.title[0].value == "MiniGPT Lab"
    assert any("第一次来" in link.proto.label for link in at.get("page_link"))  # "new here? start the lesson"
    monkeypatch.setattr(context, "locale", property(lambda self: "fr-FR"))
    assert home().session_state[i18n.LANG_KEY] == "en"  # no French catalog: the source language


def test_a_lang_link_beats_the_browser_language(monkeypatch):
    monkeypatch.setattr(type(__import__("streamlit").context), "locale", property(lambda self: "zh-CN"))
    assert home("en").session_state[i18n.LANG_KEY] == "en"
    assert home("xx").session_state[i18n.LANG_KEY] == "zh"  # an unknown code falls back to the browser's
    assert home("ZH").session_state[i18n.LANG_KEY] == "zh" and home("zh-TW").session_state[i18n.LANG_KEY] == "zh"


@pytest.mark.trains
@pytest.mark.slow
def test_the_switch_changes_the_language_at_once_and_keeps_everything():
    text = "the quick brown fox jumps over the lazy dog. " * 20
    at = home("en")
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("fox.txt", text.encode(), "text/plain")).run()
    at = tiny_settings(page(at, TRAIN.script), max_steps=20_000)
    at.button(key="start").click().run()
    run = own_run(at)
    at = page(at, GENERATE.script)
    prompt_key = at.text_input[0].key
    at.text_input(key=prompt_key).set_value("the lazy")  # the prompt sits in a form: typed, then submitted
    at.button(key="generate").click().run()
    try:
        at.radio(key=i18n.LANG_WIDGET_KEY).set_value("zh").run()
        assert at.title[0].value == "生成" and at.query_params["lang"] == "zh"
        assert own_run(at) == run and at.session_state[prompt_key] == "the lazy"
        assert at.text_input(key=prompt_key).value == "the lazy"
        at = page(at, TRAIN.script)
        assert at.title[0].value == "训练" and own_run(at) == run
        assert at.session_state[choices.CORPUS] == "fox.txt (uploaded)"
        at = page(at, "streamlit_app.py")
        assert at.selectbox(key=choices.CORPUS).format_func(at.selectbox(key=choices.CORPUS).value) == \
            "fox.txt（已上传）"
        at.radio(key=i18n.LANG_WIDGET_KEY).set_value("en").run()
        assert at.subheader[0].value == "The loaded model" and own_run(at) == run
    finally:
        runs.registry().stop_all()


def test_numbers_are_written_the_languages_way(monkeypatch):
    at = home("zh")
    params = load_pretrained("course-zh").model.num_params()
    assert params > 1000 and at.metric[1].value == f"{params:,}"  # Chinese groups thousands with commas too
    formatter = i18n._NumberFormatter("de")  # a language that writes numbers differently
    assert formatter.format("{x:,.2f} {n:,} {d:+.2f} {lr:g} {p:.0%} {name}", x=1234.5, n=143232, d=-0.5, lr=0.003,
                            p=0.42, name="a.b") == "1.234,50 143.232 -0,50 0,003 42% a.b"


def test_a_tiny_or_huge_number_is_written_as_a_textbook_writes_it(monkeypatch):
    """0 as 0 (not 0.0e+00), small learning rates plainly, and only far-out magnitudes with a
    power of ten, in the language's decimal symbol."""
    monkeypatch.setattr(i18n, "language", lambda: "en")
    assert [i18n.textbook(v) for v in (0.0, 0.0004, 0.5, 3.2e-8, -2.5e-9, 123456.0)] == \
        ["0", "0.0004", "0.5", "3.2 × 10⁻⁸", "-2.5 × 10⁻⁹", "1.2 × 10⁵"]
    monkeypatch.setattr(i18n, "language", lambda: "de")
    assert i18n.textbook(3.2e-8) == "3,2 × 10⁻⁸"


def test_a_bad_corpus_upload_is_refused_in_chinese():
    at = home("zh")
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("empty.txt", b"", "text/plain")).run()
    assert at.error and at.error[0].value == "empty\\.txt 是空的。"
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("junk.txt", b"\x00\x01\x02binary", "text/plain")).run()
    assert "二进制" in at.error[0].value and not english_words(besides(at.error[0].value, "junk.txt"), GLOSSED)


def test_a_malformed_checkpoint_is_refused_in_chinese():
    at = home("zh")
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("model.zip", b"not a zip", "application/zip")).run()
    assert at.error and "压缩包" in at.error[0].value
    assert not english_words(besides(at.error[0].value, "model.zip"), GLOSSED), at.error[0].value
    at.radio(key=i18n.LANG_WIDGET_KEY).set_value("en").run()  # the refusal is kept as an error, not as words
    assert "not a zip archive" in at.error[0].value


def test_an_error_inside_an_error_is_translated_too():
    """The library names the upload as a Message inside its CheckpointError: both are translated."""
    at = home("zh")
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    zipped = make_zip({"notes.txt": b"not a checkpoint"})
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("model.zip", zipped, "application/zip")).run()
    assert [e.value for e in at.error] == ["model\\.zip: 压缩包 中没有 config\\.json，所以它不是 MiniGPT 检查点。"]


def besides(shown: str, name: str) -> str:
    """A message without the file name it quotes (as markdown escaped it)."""
    return shown.replace("\\", "").replace(name, "")


@pytest.mark.slow
def test_an_unknown_prompt_character_is_shown_in_place_and_removed_in_one_click():
    at = page(home("zh"), GENERATE.script)
    prompt_key = at.text_input[0].key
    at.text_input(key=prompt_key).set_value("深度学习😀是")
    at.button(key="generate").click().run()
    assert any("😀" in w.value and "从没见过" in w.value for w in at.warning)
    assert any(":red-background[**😀**]" in m.value for m in at.markdown)
    at.button(key=f"fit:{prompt_key}").click().run()
    assert at.session_state[prompt_key] == "深度学习是"
    at.button(key="generate").click().run()
    assert not at.warning and at.code[0].value.startswith("深度学习是")


@pytest.mark.slow
def test_a_generation_note_follows_a_language_switch():
    at = page(home("en"), GENERATE.script)
    at.text_input[0].set_value("")
    at.number_input(key="top_k").set_value(5000)
    at.button(key="generate").click().run()
    captions = [c.value.replace("\\", "") for c in at.caption]
    assert any("empty prompt" in c for c in captions) and any("top-k 5000" in c for c in captions)
    at.radio(key=i18n.LANG_WIDGET_KEY).set_value("zh").run()
    notes = [c.value for c in at.caption if c.value.startswith("说明")]
    assert len(notes) == 2 and any("提示词为空" in n for n in notes), notes
    assert not any(english_words(n, GLOSSED) for n in notes), notes


@pytest.mark.slow
def test_chinese_prompts_a_learner_types_work():
    at = page(home("zh"), GENERATE.script)
    prompt_key = at.text_input[0].key
    for prompt in ("什么是注意力？", "我爱深度学习", "注意力，就是：「看哪里」！", "GPT 的注意力"):
        at.text_input(key=prompt_key).set_value(prompt)
        at.button(key="generate").click().run()
        assert not at.warning and not at.error, (prompt, [w.value for w in at.warning])
        assert at.code[0].value.startswith(prompt)


def test_look_alike_punctuation_is_swapped_for_the_width_the_model_knows():
    at = page(home("zh"), ATTENTION.script)
    key = at.text_input[0].key
    at.text_input(key=key).set_value("什么是注意力?").run()  # a half-width question mark
    assert at.warning
    at.button(key=f"fit:{key}").click().run()
    assert at.session_state[key] == "什么是注意力？" and not at.warning
    assert at.get("plotly_chart")
