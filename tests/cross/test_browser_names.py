"""A run's name is plain text wherever the app draws it, in a real browser: a class whose learners name
their runs with a URL (a spreadsheet's =HYPERLINK, www., an e-mail address), quotes and markup.

Streamlit's markdown makes links of URLs, www. and e-mail addresses in the text it has parsed, past
any escape; Plotly reads a little HTML in a legend and a hover label. So the test reads what the
browser drew: the board's ranking, the "trained exactly alike" caption, the chart's legend and hover,
the learners' own lines on Train and the board, and the comparison on Experiments. No link points
where a name says, no entity shows as text, no bold is made from a name, and each name reads as typed.

    pytest tests/cross/test_browser_names.py
"""
from __future__ import annotations

import re

import pytest

from app.state.train_settings import to_param
from helpers.browser import CHART, drawn, main_button, new_context, start_class, wait_rendered
from minigpt import GPTConfig, TrainConfig

pytestmark = pytest.mark.browser
TRAINING_MS = 180_000  # how long three tiny runs may take to finish on a busy machine
NAMES = ('=HYPERLINK("http://e.example","click")', "www.example.com <b>bold</b>", 'a@b.example "q"')
# the same settings and seed for all three: their curves coincide, and the board's caption names them all
SETTINGS = to_param(GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
                    TrainConfig(max_steps=40, eval_interval=20, batch_size=4, block_size=16, seed=7))

RANKED = re.compile(r"^(\d+)\. (.*): (\d+\.\d{3})$")  # a line of the challenge's ranking: "1. ada: 3.994"
# what a page draws of the names: links, entities shown as text, bold made from a name
READ = """() => {
  const main = document.querySelector('[data-testid=stMain]');
  const links = [...main.querySelectorAll('a[href]')].map(a => a.href)
    .filter(href => /e\\.example|example\\.com|b\\.example|mailto:/i.test(href));
  const text = main.innerText + '\\n' + [...main.querySelectorAll('svg text')].map(t => t.textContent).join('\\n');
  const entities = ['&quot;', '&lt;', '&gt;', '&amp;', '&#'].filter(entity => text.includes(entity));
  const bold = [...main.querySelectorAll('b, strong, svg [style*="bold"]')].filter(b => /bold/.test(b.textContent))
    .map(b => b.outerHTML);
  return {links, entities, bold, text};
}"""


def plain_everywhere(page, where: str) -> str:
    """The page's text, once it is checked: no link, entity or bold made from a name."""
    drawn_names = page.evaluate(READ)
    assert not drawn_names["links"], f"{where}: a name became a link: {drawn_names['links']}"
    assert not drawn_names["entities"], f"{where}: an entity shows as text: {drawn_names['entities']}"
    assert not drawn_names["bold"], f"{where}: a name made bold text: {drawn_names['bold']}"
    return drawn_names["text"]


def learner_trains(browser, server, code: str):
    context = new_context(browser, viewport={"width": 1280, "height": 1400}, locale="en-US")
    page = context.new_page()
    page.goto(f"{server.url}/Train?class={code}&train={SETTINGS}", wait_until="domcontentloaded")
    wait_rendered(page, "Train")
    main_button(page, "Start").click()
    page.get_by_role("textbox", name="Name on the class board").wait_for()
    return page


def fill(page, label: str, text: str) -> None:
    box = page.get_by_role("textbox", name=label)
    box.fill(text)
    box.press("Enter")
    drawn(page)


def go(page, title: str) -> None:
    """To another page by the sidebar, in the same session (its runs and posts with it)."""
    page.get_by_test_id("stSidebar").get_by_role("link", name=re.compile(re.escape(title) + "$")).click()
    wait_rendered(page, title)


def test_names_with_links_quotes_and_markup_are_plain_text_wherever_they_are_drawn(browser, server, shots):
    teacher_context, teacher, code = start_class(browser, server)
    teacher.get_by_role("tab", name="Teacher's controls").click()
    main_button(teacher, "Set the challenge").click()  # 300 steps, 150,000 parameters: the tiny runs meet it
    drawn(teacher)
    teacher.get_by_role("tab", name="Board").click()

    learners = [learner_trains(browser, server, code) for _name in NAMES]
    for page, name in zip(learners, NAMES):
        drawn(page)
        fill(page, "Name on the class board", name)
        main_button(page, "Post to the class board").click()
        page.get_by_text(f"Your run is on the board of class {code} as {name}.", exact=True).wait_for()
    for page in learners:
        page.get_by_test_id("stMetricValue").filter(has_text="finished").wait_for(timeout=TRAINING_MS)

    # the projector: every run evaluated, ranked (tied), said to coincide, one legend entry each
    teacher.get_by_text("trained exactly alike", exact=False).wait_for(timeout=TRAINING_MS)
    teacher.wait_for_function("([ranked, n]) => document.querySelector('[data-testid=stMain]').innerText"
                              ".split('\\n').filter(line => new RegExp(ranked).test(line)).length === n",
                              arg=[RANKED.pattern, len(NAMES)], timeout=TRAINING_MS)
    drawn(teacher)
    text = plain_everywhere(teacher, "the board")
    ranked = [RANKED.match(line).groups() for line in text.split("\n") if RANKED.match(line)]
    assert sorted(name for _place, name, _loss in ranked) == sorted(NAMES), ranked
    assert {place for place, _name, _loss in ranked} == {"1"}, ranked  # equal results: a tie, all first
    caption = next(line for line in text.split("\n") if "trained exactly alike" in line)
    assert all(name in caption for name in NAMES), caption
    legend = teacher.locator(f"{CHART} .legendtext").all_text_contents()
    assert sorted(legend) == sorted(NAMES), legend

    point = teacher.locator(f"{CHART} .scatterlayer .trace .points path").first.bounding_box()
    teacher.mouse.move(point["x"] + point["width"] / 2, point["y"] + point["height"] / 2)
    hover = teacher.locator(f"{CHART} .hoverlayer .hovertext").first
    hover.wait_for()
    said = hover.text_content()
    assert any(said.startswith(f"{name}: ") for name in NAMES), said
    plain_everywhere(teacher, "the board's hover label")
    teacher.screenshot(path=shots / "names_board.png", full_page=True)

    # each learner's own lines: on Train under the post button, on the board under "Your runs"
    for page, name in zip(learners, NAMES):
        assert f"as {name}" in plain_everywhere(page, "Train")
        go(page, "Class board")
        page.get_by_text("Your runs on the board:").wait_for()
        assert name in plain_everywhere(page, "a learner's board").split("Your runs on the board:")[1]

    # a run kept under a name, compared on Experiments: the legend, as typed
    keeper = learners[0]
    go(keeper, "Train")
    fill(keeper, "Name for the comparison", NAMES[1])
    main_button(keeper, "Keep for comparison").click()
    keeper.get_by_text("compare it on Experiments", exact=False).wait_for()
    plain_everywhere(keeper, "the toast of a kept run")
    go(keeper, "Experiments")
    keeper.locator(f"{CHART} .legendtext").filter(has_text="val loss").first.wait_for()
    legend = keeper.locator(f"{CHART} .legendtext").all_text_contents()
    assert f"{NAMES[1]} · val loss" in legend, legend
    plain_everywhere(keeper, "the comparison")
    for context in {teacher_context, *(page.context for page in learners)}:
        context.close()
