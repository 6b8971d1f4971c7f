"""The app's pages, each defined once: its script, its name in the sidebar, its icon and what
it offers. The sidebar, Home's links, the lesson's links, the comparison and the tests all use
these objects, so renaming a page file is a change of one line here. A new page is a file in
pages/ and one `Page` in `PAGES`, whose order is the sidebar's: the files carry no number, so a
page added between two renames no other. Light on purpose: no Streamlit."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from minigpt import N_


@dataclass(frozen=True)
class Page:
    script: str  # from the repository root: what st.page_link, st.switch_page and AppTest take
    label: str   # marked for the catalogs: the sidebar's words and the page's title
    icon: str
    offer: str   # marked for the catalogs: what Home's link says it offers

    @property
    def url_path(self) -> str:
        """The page's address after the host: "" for Home, else the file's name ("pages/Train.py"
        is /Train), as Streamlit's pages/ convention makes it. The files were once numbered
        ("2_Train.py"): Streamlit left the number out of the address, so every shared link still
        opens its page."""
        return "" if self.script == HOME.script else PurePosixPath(self.script).stem


HOME = Page("streamlit_app.py", N_("Home"), "🏠", N_("The loaded model; corpus, model and device"))
LESSON = Page("pages/Lesson.py", N_("Lesson"), "🎓", N_("A guided path through your own model, in {steps} steps"))
TRAIN = Page("pages/Train.py", N_("Train"), "🏋️", N_("Train a model and watch it learn"))
GENERATE = Page("pages/Generate.py", N_("Generate"), "✍️", N_("Write text, one character at a time"))
ATTENTION = Page("pages/Attention.py", N_("Attention"), "🔍", N_("See where each character looks"))
SCALING = Page("pages/Scaling.py", N_("√d_k scaling"), "📐", N_("Why attention divides by √d_k"))
INSIDE = Page("pages/Inside.py", N_("Inside attention"), "🔬",
              N_("How one attention weight is made; what each head does"))
MODEL = Page("pages/Model.py", N_("Inside the model"), "🧩",
             N_("Positions, embeddings, and the prediction layer by layer"))
EXPERIMENTS = Page("pages/Experiments.py", N_("Experiments"), "🧪",
                   N_("Take a part of the model out and measure what it did"))
BOARD = Page("pages/Board.py", N_("Class board"), "📊",
             N_("Every learner's run on one chart: a class trains together"))
GLOSSARY = Page("pages/Glossary.py", N_("Glossary"), "📖", N_("The course's terms, Chinese and English"))

PAGES = (HOME, LESSON, TRAIN, GENERATE, ATTENTION, SCALING, INSIDE, MODEL, EXPERIMENTS, GLOSSARY, BOARD)  # sidebar order


def page_of(script: str) -> Page:
    """The page whose script is `script` (a page passes its __file__): by file name."""
    name = PurePosixPath(script.replace("\\", "/")).name
    return next(page for page in PAGES if PurePosixPath(page.script).name == name)
