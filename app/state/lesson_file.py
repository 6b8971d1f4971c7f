"""A lesson as a teacher writes it: a Markdown file of steps (the format: docs/lessons.md), read into
a Lesson. The built-in lesson is such a file too, one per language (app/lessons/<language>.md).

A file that is wrong is refused whole with a LessonFileError: what to fix and on which line, as a
message the page translates. What a file says is shown as text: Markdown's bold, italics and code
work; HTML, links, images and the invisible characters that turn text around are refused with the
line they stand on, never cleaned away behind the teacher's back. Plain Python: no Streamlit.
"""
from __future__ import annotations

import functools
import re
import string
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from minigpt import BUILTIN_CORPORA, DEFAULT_PRESET, PRESETS, ConfigError, LabError, Message, N_
from minigpt.serve import MAX_OPTIONS  # a check's options, at most: the server keeps answers up to it

from app.chrome.site import LESSON, PAGES, Page
from app.state.lesson_numbers import KINDS

MAX_BYTES = 100_000  # a lesson file, at most: the built-in 15 steps take about a fifth of it
MAX_STEPS = 60
MIN_OPTIONS = 2
# the live views a step may stand beside (app.views.lesson draws them; its test says they are these)
VIEWS = ("next", "embed", "positions", "qkv", "scaling", "mask", "heads", "ffn", "head", "loss", "train", "fit",
         "sampling", "kv", "pages")
STEP_FIELDS = ("view", "page", "train")   # key lines of a step, above its check
CHECK_FIELDS = ("because",)                # key lines of a check
TRAIN_KEYS = ("preset", "corpus", "steps")
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# a format a number may be written with in braces ({val_share:.0%}, {tiny_lr:g}, {steps:,}): a short width at most
NUMBER_FORMAT = re.compile(r"(?:[<>^=]?[+ -]?\d{0,2}[,_]?(?:\.\d{1,2})?[deEfFgG%n]?)")
# what makes Markdown run or point somewhere: a tag or an autolink (<b>, </p>, <!--, <https://…>), a link
# or an image ([text](address), ![alt](address)), a link's definition ([name]: address)
HTML = re.compile(r"<[A-Za-z!/?]")
TAG = re.compile(r"<[^>\s]{1,20}>?")  # the start of a tag, as a message quotes it
LINK = re.compile(r"\]\s*\(|!\[|^\s*\[[^\]]*\]:")
LATEX_LINKS = re.compile(r"\\(?:href|url|html\w*|includegraphics)\b")  # KaTeX's commands that link or add HTML
BLOCK_MARK = re.compile(r"(?:[-*+]|\d+[.)]|#{1,6})\s|[>|]")  # a body line that starts a list, quote, table or heading
HEADING = re.compile(r"(#{1,3})(?:\s+(.*?))?\s*$")
FIELD = re.compile(r"([A-Za-z][\w-]*)\s*[:：](?:\s+|$)(.*)$")  # a Chinese keyboard types the wide colon
TRY = re.compile(r">\s*try this\s*[:：]\s*(.*)$", re.IGNORECASE)
OPTION = re.compile(r"[-*+]\s+\[(.?)\]\s*(.*)$")
LOOSE_OPTION = re.compile(r"[-*+]\s")
CHECK_TITLES = ("check", "quick check")


@dataclass(frozen=True)
class TrainStart:
    """Train settings a step starts from: a preset, a built-in corpus, a number of steps (None: as
    the preset or the session has them)."""

    preset: str | None = None
    corpus: str | None = None
    steps: int | None = None


@dataclass(frozen=True)
class LessonStep:
    """One step of a lesson, as its file says it: words are templates, their braces filled in when shown."""

    view: str | None           # VIEWS: the live view beside the words
    page: Page | None          # the tool page that goes further, linked from the step and linking back
    title: str
    body: tuple[str, ...]      # paragraphs, Markdown
    formula: str | None        # LaTeX
    try_this: str | None
    question: str | None       # the quick check: None when the step has none
    options: tuple[str, ...]
    answer: int | None         # index into options
    explanation: str | None    # shown after an answer, right or wrong
    train: TrainStart | None = None

    def texts(self) -> tuple[str, ...]:
        """Every text of the step that is shown as words."""
        return tuple(t for t in (self.title, *self.body, self.try_this, self.question, *self.options,
                                 self.explanation) if t)


@dataclass(frozen=True)
class Lesson:
    """A lesson file, read."""

    title: str                      # "" when the file names none
    steps: tuple[LessonStep, ...]


class LessonFileError(LabError, ValueError):
    """A lesson file that cannot be read: `problem` says what to fix, `line` where (None: the whole file)."""

    def __init__(self, problem: Message, line: int | None = None):
        if line is None:
            super().__init__(problem.template, **problem.params)
        else:
            super().__init__(N_("Line {line}: {problem}"), line=line, problem=problem)
        self.problem, self.line = problem, line


# ------------------------------------------------------------------------------ reading a file

def read_lesson(raw: bytes) -> Lesson:
    """A lesson from a file's bytes."""
    return parse_lesson(decode_lesson(raw))


def decode_lesson(raw: bytes) -> str:
    """A lesson file's text: UTF-8 (a byte-order mark allowed), within MAX_BYTES."""
    if len(raw) > MAX_BYTES:
        raise too_long(len(raw))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise LessonFileError(Message("This is not UTF-8 text. Save the file as UTF-8 (most editors offer it "
                                      "under “Save as”, as the encoding)."),
                              raw[:err.start].count(b"\n") + 1) from None


def too_long(size: int) -> LessonFileError:
    return LessonFileError(Message("The lesson file is {size:,} bytes long; a lesson may have at most {limit:,}.",
                                   size=size, limit=MAX_BYTES))


def parse_lesson(text: str) -> Lesson:
    """A lesson from its text (docs/lessons.md)."""
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise too_long(len(text.encode("utf-8")))
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate(lines, start=1):
        check_characters(line, number)
    if not any(line.strip() for line in lines):
        raise LessonFileError(Message("The lesson file is empty: write at least one step, a line “## Its title” "
                                      "and its words."))
    return _Reader().read(lines)


def check_characters(line: str, number: int) -> None:
    """No control characters (a NUL says the file is not text), no bidi overrides or isolates, and no
    other invisible format character."""
    for c in line:
        if c in BIDI:
            raise LessonFileError(Message("The text holds an invisible character ({char}) that turns the "
                                          "direction of the text around, so that it can read otherwise than it "
                                          "shows: delete it.", char=code_point(c)), number)
        if unicodedata.category(c) == "Cf" and c != "\u200d":  # the joiner alone: it makes one emoji of several
            # marks, spaces and joiners of no width (U+200B, U+200E, U+2060, …): two lines that look alike differ
            raise LessonFileError(Message("The text holds an invisible character ({char}): delete it.",
                                          char=code_point(c)), number)
        if unicodedata.category(c) == "Cc" and c != "\t":
            raise LessonFileError(Message("The text holds a control character ({char}), which no text file "
                                          "has: is this a text file? A lesson is plain text, .md or .txt.",
                                          char=code_point(c)), number)


def check_text(text: str, number: int, fields: bool = True) -> None:
    """A line of words as the page shows them: no HTML, no link, numbers by names the lesson knows."""
    tag = HTML.search(text)
    if tag:
        raise LessonFileError(Message("“{tag}” starts HTML, which a lesson does not show: write **bold** or "
                                      "*italics* in Markdown, and put a space after a “<” that compares.",
                                      tag=TAG.match(text, tag.start())[0]), number)
    if LINK.search(text):
        raise LessonFileError(Message("A lesson shows no links or images ([words](address)): write the words "
                                      "alone."), number)
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        raise LessonFileError(Message("A brace stands alone: a number is written as its name in braces, such as "
                                      "{example}; write {double} for a brace of its own.",
                                      example="{vocab}", double="{{"), number) from None
    for _literal, name, spec, conversion in parsed:
        if name is None:
            continue
        if not fields:
            raise LessonFileError(Message("A title cannot quote a number ({field}): it is shown where no model is "
                                          "loaded. Quote it in the step's words.", field=braced(name)), number)
        check_field(name, spec, conversion, number)


def check_field(name: str, spec: str, conversion: str | None, number: int) -> None:
    if name not in KINDS:
        raise LessonFileError(Message("{field} is not a number the lesson knows. It knows: {names}.",
                                      field=braced(name), names=", ".join(KINDS)), number)
    try:
        # a number's own format, and a short one: a width of a billion would make the server write a billion
        # spaces on every learner's page
        if conversion or not NUMBER_FORMAT.fullmatch(spec):
            raise ValueError
        format(KINDS[name](1), spec)
    except ValueError:
        written = braced(name + ("!" + conversion if conversion else "") + ":" + spec)
        raise LessonFileError(Message("{field} cannot be written so: write it as {plain}, or with a number's "
                                      "format such as {example}.", field=written, plain=braced(name),
                                      example=braced(name + ":.2f")), number) from None


def braced(name: str) -> str:
    return "{" + name + "}"


def code_point(c: str) -> str:
    return "U+%04X" % ord(c)


# ------------------------------------------------------------------------------ the steps

@dataclass
class _Draft:
    """A step as it is read: its parts, and the line each was written on (for the messages)."""

    title: str
    line: int
    fields: dict[str, tuple[str, int]] = field(default_factory=dict)
    body: list[str] = field(default_factory=list)
    formula: tuple[str, int] | None = None
    try_this: tuple[str, int] | None = None
    check: int | None = None                      # the line of "### Check"
    question: tuple[str, int] | None = None
    options: list[tuple[str, bool, int]] = field(default_factory=list)

    def step(self) -> LessonStep:
        view, page, train = (self.fields.get(name) for name in STEP_FIELDS)
        question, options, answer, explanation = self.quick_check()
        return LessonStep(view=view_named(*view) if view else None, page=page_named(*page) if page else None,
                          title=self.title, body=tuple(self.body),
                          formula=self.formula[0] if self.formula else None,
                          try_this=self.try_this[0] if self.try_this else None, question=question,
                          options=options, answer=answer, explanation=explanation,
                          train=train_named(*train) if train else None)

    def quick_check(self) -> tuple[str | None, tuple[str, ...], int | None, str | None]:
        if self.check is None:
            return None, (), None, None
        if self.question is None:
            raise LessonFileError(Message("The check has no question: write it on a line that starts with “? ”."),
                                  self.check)
        answer = self.right_option()
        because = self.fields.get("because")
        if because is None or not because[0]:
            raise LessonFileError(Message("The check says no “because: …”: why the right answer is right, shown "
                                          "after an answer."), self.check if because is None else because[1])
        return self.question[0], tuple(text for text, _right, _line in self.options), answer, because[0]

    def right_option(self) -> int:
        """The index of the one option marked right, among MIN_OPTIONS to MAX_OPTIONS that differ."""
        where = self.question[1]
        if not MIN_OPTIONS <= len(self.options) <= MAX_OPTIONS:
            too_many = len(self.options) > MAX_OPTIONS
            raise LessonFileError(Message("A check has {low} to {high} options, one a line “- [ ] …”, the right "
                                          "one “- [x] …”; this one has {n}.", low=MIN_OPTIONS, high=MAX_OPTIONS,
                                          n=len(self.options)), self.options[MAX_OPTIONS][2] if too_many else where)
        right = [line for _text, is_right, line in self.options if is_right]
        if not right:
            raise LessonFileError(Message("No option is marked right: mark the right one “- [x] …”."), where)
        if len(right) > 1:
            raise LessonFileError(Message("A second option is marked right (the first is on line {first}): a check "
                                          "has one right answer.", first=right[0]), right[1])
        seen: dict[str, int] = {}
        for text, _right, line in self.options:
            same = " ".join(text.casefold().split())  # alike to a learner: case and spacing aside
            if same in seen:
                raise LessonFileError(Message("This option is the same as the one on line {first}: each option "
                                              "must say something else.", first=seen[same]), line)
            seen[same] = line
        return next(i for i, (_text, is_right, _line) in enumerate(self.options) if is_right)


def view_named(name: str, line: int) -> str:
    if name not in VIEWS:
        raise LessonFileError(Message("“{view}” is not a view of the lesson. The views are: {views}.",
                                      view=name, views=", ".join(VIEWS)), line)
    return name


def page_named(name: str, line: int) -> Page:
    """A page by its English name or its address: "Inside the model" or "Model"."""
    pages = [page for page in PAGES if page != LESSON]
    wanted = " ".join(name.split()).casefold()
    for page in pages:
        if wanted in (page.label.casefold(), PurePosixPath(page.script).stem.casefold()):
            return page
    raise LessonFileError(Message("“{page}” is not a page of the app. The pages are: {pages}.", page=name,
                                  pages=", ".join(page.label for page in pages)), line)


def train_named(value: str, line: int) -> TrainStart:
    """`preset=tiny, corpus=demo-zh, steps=300`: each optional, each checked as Train would."""
    found: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        key, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or key not in TRAIN_KEYS or key in found:
            raise LessonFileError(Message("Train settings are written “{example}”, each at most once; “{item}” is "
                                          "not one of them.", example="preset=tiny, corpus=demo-zh, steps=300",
                                          item=item[:40]), line)
        found[key] = raw
    preset = found.get("preset")
    if preset is not None and preset not in PRESETS:
        raise LessonFileError(Message("“{value}” is not a preset. The presets are: {known}.", value=preset,
                                      known=", ".join(PRESETS)), line)
    corpus = found.get("corpus")
    if corpus is not None and corpus not in BUILTIN_CORPORA:
        raise LessonFileError(Message("“{value}” is not a built-in corpus. The corpora are: {known}.", value=corpus,
                                      known=", ".join(BUILTIN_CORPORA)), line)
    steps = found.get("steps")
    # at most 7 digits: Python refuses to read a whole number of thousands of them, and no lesson trains that long
    if steps is not None and not (steps.isascii() and steps.isdigit() and len(steps) <= 7):
        raise LessonFileError(Message("“{value}” is not a whole number of steps.", value=steps), line)
    start = TrainStart(preset, corpus, int(steps) if steps is not None else None)
    chosen = PRESETS[preset or DEFAULT_PRESET]
    try:
        steps = chosen.train.max_steps if start.steps is None else start.steps
        replace(chosen.train, max_steps=steps).validate(chosen.model)
    except ConfigError as err:
        raise LessonFileError(Message("These settings cannot train: {error}", error=err), line) from None
    return start


class _Reader:
    """Reads a file's lines in order; `open` is the part that a next line, not blank, goes on with."""

    def __init__(self):
        self.title: str | None = None
        self.steps: list[LessonStep] = []
        self.draft: _Draft | None = None
        self.open: str | None = None               # "body", "try", "question", "option", "because"
        self.formula: list[str] | None = None      # the lines of a $$ block not closed yet
        self.formula_line = 0

    def read(self, lines: list[str]) -> Lesson:
        for number, line in enumerate(lines, start=1):
            if self.formula is not None:
                self.formula_goes_on(line, number)
            elif not line.strip():
                self.open = None
            else:
                self.line(line, number)
        if self.formula is not None:
            raise LessonFileError(Message("The formula opened here is not closed: end it with a line “$$”."),
                                  self.formula_line)
        self.finish()
        if not self.steps:
            raise LessonFileError(Message("The lesson file has no step: begin each step with a line “## Its "
                                          "title”, then its words."))
        return Lesson(self.title or "", tuple(self.steps))

    def line(self, line: str, number: int) -> None:
        stripped = line.strip()
        heading = HEADING.match(stripped)
        if heading:
            self.heading(len(heading[1]), (heading[2] or "").strip(), number)
        elif self.draft is None:
            raise LessonFileError(Message("Words before the first step: a step begins with a line “## Its title” "
                                          "above its words."), number)
        elif self.draft.check is not None:
            self.check_line(stripped, number)
        else:
            self.step_line(line, stripped, number)

    def heading(self, level: int, text: str, number: int) -> None:
        if level == 1:
            if self.draft is not None or self.title is not None:
                raise LessonFileError(Message("The lesson's title, “# …”, comes once, above its first step; a "
                                              "step begins with “## ”."), number)
            check_text(text, number, fields=False)
            self.title = text
        elif level == 2:
            self.finish()
            if len(self.steps) == MAX_STEPS:
                raise LessonFileError(Message("A lesson has at most {limit} steps; this is step {n}.",
                                              limit=MAX_STEPS, n=MAX_STEPS + 1), number)
            if not text:
                raise LessonFileError(Message("A step needs a title: write it after “## ”."), number)
            check_text(text, number, fields=False)
            self.draft = _Draft(text, number)
        elif self.draft is None:
            raise LessonFileError(Message("Words before the first step: a step begins with a line “## Its title” "
                                          "above its words."), number)
        elif text.rstrip(":：").strip().casefold() in CHECK_TITLES:
            self.once("### Check", self.draft.check, number)
            self.draft.check = number
        else:
            raise LessonFileError(Message("“### {heading}” is no part of a step: a step's one “###” part is "
                                          "“### Check”, its quick check.", heading=text[:40]), number)
        self.open = None

    def finish(self) -> None:
        if self.draft is not None:
            self.steps.append(self.draft.step())
            self.draft = None

    def once(self, part: str, first: tuple | int | None, number: int) -> None:
        if first is not None:
            line = first if isinstance(first, int) else first[-1]
            raise LessonFileError(Message("This step has its “{part}” already, on line {first}: one to a step.",
                                          part=part, first=line), number)

    # -- above the check -------------------------------------------------------------------------
    def step_line(self, line: str, stripped: str, number: int) -> None:
        draft = self.draft
        if stripped.startswith("$$"):
            self.once("$$", draft.formula, number)
            self.formula, self.formula_line, self.open = [], number, None
            self.formula_goes_on(stripped[2:], number)
            return
        tried = TRY.match(stripped)
        if tried:
            self.once("> Try this:", draft.try_this, number)
            check_text(tried[1], number)
            draft.try_this, self.open = (tried[1].strip(), number), "try"
            return
        if self.open is None and self.field(stripped, number, STEP_FIELDS):
            return
        check_text(stripped, number)
        if self.open == "try":
            text, first = draft.try_this
            draft.try_this = (joined(text, re.sub(r"^>\s?", "", stripped)), first)
        elif self.open == "body":
            marked = BLOCK_MARK.match(stripped)
            draft.body[-1] += "\n" + line.rstrip() if marked else separator(draft.body[-1], stripped) + stripped
        else:
            draft.body.append(stripped)
            self.open = "body"

    def formula_goes_on(self, line: str, number: int) -> None:
        text = line.rstrip()
        closed = text.endswith("$$")
        if closed:
            text = text[:-2]
        self.formula.append(text)
        if closed:
            formula = "\n".join(self.formula).strip()
            if LATEX_LINKS.search(formula):
                raise LessonFileError(Message("A formula shows no links or HTML ({command}): write the maths "
                                              "alone.", command=LATEX_LINKS.search(formula)[0]), self.formula_line)
            if not formula:
                raise LessonFileError(Message("The formula is empty: write its LaTeX between the “$$” lines."),
                                      self.formula_line)
            self.draft.formula, self.formula = (formula, self.formula_line), None

    def field(self, stripped: str, number: int, here: tuple[str, ...]) -> bool:
        """A key line (`view: next`) that belongs `here`: kept, and True. A key line of another part, or
        a key the format does not know, is an error; words that only look like one are words (False)."""
        match = FIELD.match(stripped)
        if not match:
            return False
        key, value = match[1].casefold(), match[2].strip()
        if key in here:
            self.once(key + ":", self.draft.fields.get(key), number)
            if key == "because":
                check_text(value, number)
                self.open = "because"
            self.draft.fields[key] = (value, number)
            return True
        if key in STEP_FIELDS:
            raise LessonFileError(Message("“{field}” belongs above the step's “### Check”.", field=key + ":"), number)
        if key in CHECK_FIELDS:
            raise LessonFileError(Message("“{field}” belongs in the step's “### Check”, below its options.",
                                          field=key + ":"), number)
        if match[1].isascii() and match[1].islower():
            raise LessonFileError(Message("“{field}” is not a key a lesson knows. A step's keys are view:, page: "
                                          "and train:; its check's is because:.", field=match[1] + ":"), number)
        return False

    # -- the check -------------------------------------------------------------------------------
    def check_line(self, stripped: str, number: int) -> None:
        draft = self.draft
        option = OPTION.match(stripped)
        if stripped.startswith("?"):
            self.once("?", draft.question, number)
            text = stripped[1:].strip()
            if not text:
                raise LessonFileError(Message("The check has no question: write it on a line that starts with “? ”."),
                                      number)
            check_text(text, number)
            draft.question, self.open = (text, number), "question"
        elif option or LOOSE_OPTION.match(stripped):
            if not option or option[1] not in ("", " ", "x", "X") or not option[2].strip():
                raise LessonFileError(Message("An option is written “- [ ] its words” (a wrong one) or “- [x] its "
                                              "words” (the right one)."), number)
            check_text(option[2], number)
            draft.options.append((option[2].strip(), option[1] in ("x", "X"), number))
            self.open = "option"
        elif self.key_line(stripped) and self.field(stripped, number, CHECK_FIELDS):
            return
        elif self.open is None:
            raise LessonFileError(Message("A check holds its question (“? …”), its options (“- [ ] …”, the right "
                                          "one “- [x] …”) and “because: …”; this line is none of them."), number)
        else:
            check_text(stripped, number)
            self.go_on(stripped)

    def key_line(self, stripped: str) -> bool:
        """In a check, a key of the format starts a line even inside a part (an option goes on no further
        than `because:`); any other word and a colon is one only where a part begins."""
        match = FIELD.match(stripped)
        return bool(match) and (self.open is None or match[1].casefold() in STEP_FIELDS + CHECK_FIELDS)

    def go_on(self, stripped: str) -> None:
        draft = self.draft
        if self.open == "question":
            draft.question = (joined(draft.question[0], stripped), draft.question[1])
        elif self.open == "option":
            text, right, line = draft.options[-1]
            draft.options[-1] = (joined(text, stripped), right, line)
        else:
            text, line = draft.fields["because"]
            draft.fields["because"] = (joined(text, stripped), line)


def separator(before: str, after: str) -> str:
    """What a line break inside a sentence becomes: a space, except between Chinese characters."""
    wide = ("W", "F")
    return "" if unicodedata.east_asian_width(before[-1]) in wide or unicodedata.east_asian_width(after[0]) in wide \
        else " "


def joined(before: str, after: str) -> str:
    return before + separator(before, after) + after if before else after


# ------------------------------------------------------------------------------ the built-in lesson

BUILTIN = Path(__file__).parents[1] / "lessons"   # app/lessons/<language>.md
BUILTIN_LANGUAGE = "en"                          # a language without a file of its own reads this one


def builtin_path(lang: str) -> Path:
    path = BUILTIN / f"{lang}.md" if re.fullmatch(r"\w+", lang) else BUILTIN
    return path if path.is_file() else BUILTIN / f"{BUILTIN_LANGUAGE}.md"


@functools.cache
def builtin_lesson(lang: str) -> Lesson:
    """The built-in lesson in `lang` (English where it has none), read once per process."""
    return read_lesson(builtin_path(lang).read_bytes())
