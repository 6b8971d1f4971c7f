"""app/state/lesson_file.py: a lesson file read into its steps, the built-in lesson read from its
files exactly as it was written in the code before (a golden file), and every kind of broken file
refused with its line and what to fix, in English and in Chinese.

The golden files tests/app/golden/lesson_{en,zh}.json were taken before the lesson became files,
from app/state/lesson_text.py as it stood (commit 07d43b1): for each step its view, its page's
script, and the templates of its words (braces unfilled), in English as written there and in
Chinese as app/locales/zh's catalog translated each one (gettext.translation on app/locales, as
app.chrome.i18n.catalog reads it), with the formula, the options and the index of the right one.

    pytest tests/app/test_lesson_file.py
"""
from __future__ import annotations

import json
import re
import string

import pytest

from app.chrome import i18n
from app.chrome.site import GENERATE, MODEL, PAGES
from app.state import lesson_file
from app.state.lesson_file import LessonFileError, TrainStart, builtin_lesson, parse_lesson, read_lesson
from app.state.lesson_numbers import KINDS, numbers, quoted_numbers
from helpers import ROOT
from minigpt import LabError, Message
from minigpt.serve import MAX_OPTIONS

GOLDEN = ROOT / "tests" / "app" / "golden"

TWO_STEPS = """\
# Poems and probabilities

## What comes next in a poem

view: next
page: Generate

A language model reads a poem one character at a time and guesses the **next** one.
Your model knows {vocab} characters.

> Try this: Type the first half of a line you know by heart.

## Sampling a poem

view: sampling
page: Generate
train: preset=tiny, corpus=course-zh, steps=300

$$
p_i = \\frac{e^{z_i/T}}{\\sum_j e^{z_j/T}}
$$

### Check

? What does a temperature above 1 do?

- [ ] It always picks the likeliest character
- [x] It flattens the distribution
- [ ] It stops the model after one line

because: Dividing the scores by a larger T shrinks the gaps between them,
  so softmax spreads the probability.
"""


def as_shown(step) -> dict:
    return dict(view=step.view, page=step.page.script if step.page else None, title=step.title, body=list(step.body),
                formula=step.formula, try_this=step.try_this, question=step.question, options=list(step.options),
                answer=step.answer, explanation=step.explanation)


# ------------------------------------------------------------------------------ the built-in lesson

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_built_in_lesson_read_from_its_file_is_the_lesson_as_the_code_wrote_it(lang):
    golden = json.loads((GOLDEN / f"lesson_{lang}.json").read_text(encoding="utf-8"))
    read = builtin_lesson(lang)
    assert len(read.steps) == len(golden) == 15
    for n, (step, expected) in enumerate(zip(read.steps, golden), start=1):
        assert as_shown(step) == expected, n


def test_the_chinese_and_english_lessons_have_the_same_steps_views_pages_options_and_answers():
    en, zh = builtin_lesson("en"), builtin_lesson("zh")
    assert len(en.steps) == len(zh.steps)
    for n, (a, b) in enumerate(zip(en.steps, zh.steps), start=1):
        assert (a.view, a.page, a.formula, len(a.options), a.answer, a.train) == \
               (b.view, b.page, b.formula, len(b.options), b.answer, b.train), n
        for english, chinese in zip(a.texts(), b.texts()):
            assert english != chinese and fields(english) == fields(chinese), (n, english)


def test_every_language_of_the_app_has_its_built_in_lesson_and_another_reads_english():
    assert {path.stem for path in lesson_file.BUILTIN.glob("*.md")} == set(i18n.languages())
    assert builtin_lesson("fr") == builtin_lesson("en") and builtin_lesson("../en") == builtin_lesson("en")


def fields(text: str) -> set[tuple[str, str]]:
    return {(name, spec) for _text, name, spec, _conv in string.Formatter().parse(text) if name is not None}


def test_the_names_a_file_may_quote_are_the_numbers_the_code_fills_in_with_their_kinds():
    """KINDS is what a file is checked against before any model is loaded: the same names, and each a
    whole number or not as the number filled in is (a {d:d} format would fail on a float)."""
    model = type("Loaded", (), {})()
    config = type("Config", (), dict(d_model=64, d_k=16, num_heads=4, num_layers=2))()
    model.model, model.tokenizer, model.block_size = type("M", (), {"config": config})(), type("T", (), {
        "vocab_size": 500})(), 128
    filled = numbers(model) | quoted_numbers()
    assert set(filled) == set(KINDS)
    assert {name: type(value) for name, value in filled.items()} == KINDS


def test_the_views_a_file_may_name_are_the_views_the_lesson_draws():
    from app.views.lesson import VIEWS
    assert tuple(VIEWS) == lesson_file.VIEWS


# ------------------------------------------------------------------------------ a teacher's file

def test_a_teachers_two_step_file_reads_into_its_steps():
    lesson = read_lesson(TWO_STEPS.encode("utf-8"))
    assert lesson.title == "Poems and probabilities" and len(lesson.steps) == 2
    first, second = lesson.steps
    assert (first.view, first.page, first.title) == ("next", GENERATE, "What comes next in a poem")
    assert first.body == ("A language model reads a poem one character at a time and guesses the **next** one. "
                          "Your model knows {vocab} characters.",)
    assert first.try_this == "Type the first half of a line you know by heart."
    assert first.question is None and first.options == () and first.answer is None and first.formula is None
    assert second.train == TrainStart("tiny", "course-zh", 300)
    assert second.formula == r"p_i = \frac{e^{z_i/T}}{\sum_j e^{z_j/T}}"
    assert second.question == "What does a temperature above 1 do?"
    assert second.options == ("It always picks the likeliest character", "It flattens the distribution",
                              "It stops the model after one line")
    assert second.answer == 1
    assert second.explanation == ("Dividing the scores by a larger T shrinks the gaps between them, so softmax "
                                  "spreads the probability.")


def test_windows_line_ends_a_byte_order_mark_and_chinese_colons_read_the_same():
    windows = ("\ufeff" + TWO_STEPS.replace("view: next", "view： next")).replace("\n", "\r\n").encode("utf-8")
    assert read_lesson(windows) == read_lesson(TWO_STEPS.encode("utf-8"))


def test_chinese_lines_join_without_a_space_and_lists_keep_their_lines():
    lesson = parse_lesson("## 一步\n\n这是第一行，\n这是第二行。\n\nThree things:\n- one\n- two\n")
    assert lesson.steps[0].body == ("这是第一行，这是第二行。", "Three things:\n- one\n- two")


def test_a_page_is_named_by_its_sidebar_name_or_its_address():
    for name in ("Inside the model", "inside  the model", "Model"):
        assert parse_lesson(f"## A\nview: embed\npage: {name}\n").steps[0].page == MODEL
    assert {page.label for page in PAGES} >= {"Generate", "√d_k scaling"}


def test_markdown_bold_italics_and_an_escaped_brace_are_kept_as_written():
    step = parse_lesson("## A\n\n**bold**, *italics*, `code`, x < y, and {{literal}}.\n").steps[0]
    assert step.body == ("**bold**, *italics*, `code`, x < y, and {{literal}}.",)


def test_a_file_of_the_largest_size_and_step_count_reads():
    steps = "".join(f"## Step {n}\n\nWords.\n\n" for n in range(lesson_file.MAX_STEPS))
    assert len(parse_lesson(steps).steps) == lesson_file.MAX_STEPS
    padded = steps + "x" * (lesson_file.MAX_BYTES - len(steps.encode()))
    assert len(padded.encode()) == lesson_file.MAX_BYTES and parse_lesson(padded)


def test_the_options_a_file_may_have_are_the_ones_the_class_counts():
    options = "".join(f"- [{'x' if n == 0 else ' '}] option {n}\n" for n in range(MAX_OPTIONS))
    step = parse_lesson(f"## A\n### Check\n? Which?\n{options}because: so.\n").steps[0]
    assert len(step.options) == MAX_OPTIONS


# ------------------------------------------------------------------------------ broken files

def in_language(error: LabError | Message, lang: str) -> str:
    """A message as the app shows it in `lang`: its template through the catalog, nested messages too."""
    catalog = i18n.catalog(lang)
    params = {name: in_language(value, lang) if isinstance(value, (LabError, Message)) else value
              for name, value in error.params.items()}
    template = catalog.gettext(error.template)
    return template.format(**params) if params else template


def refused(text: str | bytes) -> LessonFileError:
    with pytest.raises(LessonFileError) as caught:
        read_lesson(text if isinstance(text, bytes) else text.encode("utf-8"))
    return caught.value


CHECK = "### Check\n\n? Which one?\n\n- [ ] one\n- [x] two\n\nbecause: two is right.\n"

# (what is wrong, the file, its line, words of the English message, words of the Chinese message)
BROKEN = [
    ("unknown view", "## A\n\nview: nxt\n", 3, "“nxt” is not a view of the lesson", "不是课程的视图"),
    ("unknown page", "## A\n\npage: Nowhere\n", 3, "“Nowhere” is not a page of the app", "不是应用里的页面"),
    ("missing answer", "## A\n\n### Check\n\n? Which?\n\n- [ ] one\n- [ ] two\n\nbecause: so.\n", 5,
     "No option is marked right", "没有选项被标为正确"),
    ("two right answers", "## A\n\n### Check\n\n? Which?\n\n- [x] one\n- [x] two\n\nbecause: so.\n", 8,
     "A second option is marked right (the first is on line 7)", "第一个在第 7 行"),
    ("two options alike", "## A\n\n### Check\n\n? Which?\n\n- [x] One  thing\n- [ ] one thing\n\nbecause: so.\n", 8,
     "the same as the one on line 7", "和第 7 行的一样"),
    ("one option only", "## A\n\n### Check\n\n? Which?\n\n- [x] one\n\nbecause: so.\n", 5,
     "A check has 2 to 8 options", "小测验要有 2 到 8 个选项"),
    ("too many options", "## A\n\n### Check\n\n? Which?\n\n" + "".join(f"- [{'x' if n == 0 else ' '}] o{n}\n"
                                                                      for n in range(9)) + "\nbecause: so.\n", 15,
     "this one has 9", "这里有 9 个"),
    ("no question", "## A\n\n### Check\n\n- [x] one\n- [ ] two\n\nbecause: so.\n", 3,
     "The check has no question", "小测验没有问题"),
    ("no explanation", "## A\n\n### Check\n\n? Which?\n\n- [x] one\n- [ ] two\n", 3,
     "The check says no “because: …”", "小测验缺少“because: …”"),
    ("an empty explanation", "## A\n\n### Check\n\n? Which?\n\n- [x] one\n- [ ] two\n\nbecause:\n", 10,
     "The check says no “because: …”", "小测验缺少“because: …”"),
    ("an option without its box", "## A\n\n### Check\n\n? Which?\n\n- one\n", 7,
     "An option is written “- [ ] its words”", "选项的写法是"),
    ("a key the format does not know", "## A\n\nview: next\nanswer: 2\n", 4,
     "“answer:” is not a key a lesson knows", "“answer:”不是课程认识的键"),
    ("a step's key in the check", "## A\n\n" + CHECK + "\nview: next\n", 12,
     "“view:” belongs above the step's “### Check”", "应该写在这一步的“### Check”上方"),
    ("the check's key above it", "## A\n\nbecause: so.\n", 3, "“because:” belongs in the step's “### Check”",
     "应该写在这一步的“### Check”里"),
    ("a line the check does not know", "## A\n\n" + CHECK + "\nMore words.\n", 12,
     "this line is none of them", "这一行都不是"),
    ("an unknown section", "## A\n\n### Notes\n", 3, "“### Notes” is no part of a step", "不是步骤的组成部分"),
    ("two views", "## A\n\nview: next\nview: embed\n", 4, "has its “view:” already, on line 3", "已经有“view:”了，在第 3 行"),
    ("two formulas", "## A\n\n$$ x $$\n\n$$ y $$\n", 5, "has its “$$” already, on line 3", "在第 3 行"),
    ("a formula not closed", "## A\n\n$$\nx\n", 3, "The formula opened here is not closed", "公式没有结束"),
    ("a formula that links", "## A\n\n$$ \\href{javascript:alert(1)}{x} $$\n", 3, "A formula shows no links",
     "公式里不显示链接"),
    ("unknown {name}", "## A\n\nYour model knows {vocabulary} characters.\n", 3,
     "{vocabulary} is not a number the lesson knows", "{vocabulary} 不是课程认识的数字"),
    ("a bad number format", "## A\n\nThe share: {val_share:d}.\n", 3, "{val_share:d} cannot be written so",
     "{val_share:d} 不能这样写"),
    # a width of a billion would have every learner's page write a billion spaces
    ("a number a billion wide", "## A\n\nWe know {vocab:>1000000000}.\n", 3,
     "{vocab:>1000000000} cannot be written so", "{vocab:>1000000000} 不能这样写"),
    ("a lone brace", "## A\n\nA set {a, b.\n", 3, "A brace stands alone", "落单的花括号"),
    ("a number in a title", "## {vocab} characters\n", 1, "A title cannot quote a number ({vocab})",
     "标题里不能引用数字（{vocab}）"),
    ("raw HTML", "## A\n\nSee <script>alert(1)</script>.\n", 3, "“<script>” starts HTML", "是 HTML 的开头"),
    ("an HTML comment", "## A\n\n<!-- note -->\n", 3, "starts HTML", "HTML"),
    ("a link that runs", "## A\n\n[click](javascript:alert(1))\n", 3, "A lesson shows no links or images",
     "课程不显示链接或图片"),
    ("an image", "## A\n\n### Check\n\n? ![x](y)\n", 5, "A lesson shows no links or images", "课程不显示链接或图片"),
    ("a link's definition", "## A\n\nWords [here][1].\n\n[1]: javascript:alert(1)\n", 5,
     "A lesson shows no links or images", "课程不显示链接或图片"),
    ("a bidi override", "## A\n\nabc\u202edcba\n", 3, "(U+202E) that turns the direction", "（U+202E），它会改变文字的书写方向"),
    ("a bidi isolate in a title", "## A\u2066B\n", 1, "(U+2066)", "（U+2066）"),
    ("a NUL byte", b"## A\n\nab\x00cd\n", 3, "a control character (U+0000)", "控制字符（U+0000）"),
    ("bad encoding", "## A\n\n中文\n".encode("gbk"), 3, "This is not UTF-8 text", "这不是 UTF-8 文本"),
    ("UTF-16", "## A\n".encode("utf-16"), 1, "This is not UTF-8 text", "这不是 UTF-8 文本"),
    ("words before the first step", "# T\n\nHello.\n\n## A\n", 3, "Words before the first step", "第一步之前有文字"),
    ("a title after a step", "## A\n\n# T\n", 3, "The lesson's title, “# …”, comes once", "课程标题"),
    ("a step without a title", "## A\n\n##\n", 3, "A step needs a title", "每一步都需要标题"),
    ("an unknown preset", "## A\n\ntrain: preset=huge\n", 3, "“huge” is not a preset", "“huge”不是预设"),
    ("an unknown corpus", "## A\n\ntrain: corpus=poems\n", 3, "“poems” is not a built-in corpus", "不是内置语料"),
    ("an unknown train setting", "## A\n\ntrain: lr=3\n", 3, "“lr=3” is not one of them", "“lr=3”不是其中之一"),
    ("a right-to-left mark", "## A\n\nThe \u200fend.\n", 3, "The text holds an invisible character (U+200F)",
     "（U+200F）"),
    ("steps not a number", "## A\n\ntrain: steps=many\n", 3, "“many” is not a whole number of steps", "不是一个整数步数"),
    # more digits than Python reads into a whole number: a message, not a crash
    ("steps of 5000 digits", "## A\n\ntrain: steps=" + "9" * 5000 + "\n", 3, "is not a whole number of steps",
     "不是一个整数步数"),
    ("settings that cannot train", "## A\n\ntrain: steps=0\n", 3, "These settings cannot train: max_steps",
     "这些设置无法训练"),
]


@pytest.mark.parametrize("what, text, line, english, chinese", BROKEN, ids=[case[0] for case in BROKEN])
def test_a_broken_file_is_refused_with_its_line_and_what_to_fix_in_english_and_chinese(what, text, line, english,
                                                                                      chinese):
    error = refused(text)
    assert error.line == line
    assert str(error).startswith(f"Line {line}: ") and english in str(error), str(error)
    assert in_language(error, "en") == str(error)
    shown = in_language(error, "zh")
    assert shown.startswith(f"第 {line} 行：") and chinese in shown, shown


@pytest.mark.parametrize("what, text, english, chinese", [
    ("empty", "", "The lesson file is empty", "课程文件是空的"),
    ("blank lines only", "\n  \n\t\n", "The lesson file is empty", "课程文件是空的"),
    ("a title without steps", "# Only a title\n", "The lesson file has no step", "课程文件里没有任何一步"),
    ("too long", "## A\n\n" + "x" * lesson_file.MAX_BYTES, "100,006 bytes long; a lesson may have at most 100,000",
     "100,006 字节；一份课程最多 100,000 字节"),
])
def test_a_file_wrong_as_a_whole_says_so_without_a_line(what, text, english, chinese):
    error = refused(text)
    assert error.line is None and english in str(error), str(error)
    assert chinese in in_language(error, "zh")


def test_a_lesson_of_too_many_steps_is_refused_at_the_first_step_too_many():
    steps = "".join(f"## Step {n}\n" for n in range(lesson_file.MAX_STEPS + 1))
    error = refused(steps)
    assert error.line == lesson_file.MAX_STEPS + 1 and f"at most {lesson_file.MAX_STEPS} steps" in str(error)
    assert f"最多 {lesson_file.MAX_STEPS} 步" in in_language(error, "zh")


def test_an_error_in_a_step_names_the_line_of_the_part_that_is_wrong_not_of_the_next_step():
    text = TWO_STEPS.replace("view: sampling", "view: sampler") + "\n## A third\n"
    assert refused(text).line == TWO_STEPS.splitlines().index("view: sampling") + 1


def test_a_course_term_in_the_english_lesson_is_the_glossarys_word_in_the_chinese_one():
    """What tests/cross/test_i18n.py checks of every message in the catalogs, for the lesson's files,
    which the catalogs no longer hold: a term of the Glossary is always the same Chinese word."""
    from app.views import glossary

    problems = []
    for english, _meaning in glossary.TERMS:
        if english in {"key", "value"}:  # also a URL's key and a number's value
            continue
        word = glossary.term(english, "zh").split("（")[0].replace(" 函数", "")
        pattern = re.compile(rf"(?<![\w-]){re.escape(english)}(?![\w-])", re.I)
        for a, b in zip(builtin_lesson("en").steps, builtin_lesson("zh").steps):
            for text, chinese in zip(a.texts(), b.texts()):
                if pattern.search(re.sub(r"\{[^}]*\}", " ", text)) and word not in chinese:
                    problems.append(f"{english} → {word}, but {text[:60]!r} → {chinese[:60]!r}")
    assert not problems, "\n".join(problems)


def test_the_example_in_the_manual_reads_as_it_says():
    manual = (ROOT / "docs" / "lessons.md").read_text(encoding="utf-8")
    example = re.search(r"```markdown\n(.*?)```", manual, flags=re.S)[1]
    lesson = parse_lesson(example)
    assert [step.title for step in lesson.steps] == ["What comes next in a poem", "Sampling a poem"]
    assert [step.question is not None for step in lesson.steps] == [False, True]
    assert lesson.steps[1].train == TrainStart("tiny", "course-zh", 300)
