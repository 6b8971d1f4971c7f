"""End to end in a real browser: `streamlit run` on a free loopback port, driven by Debian's chromium.

What only a browser shows: the pages render, training updates the live chart, the address
bar carries the run so a refresh reattaches, text streams, heatmap hover labels. A
screenshot of every page lands in the module's temporary folder, and `measurements.txt` there
records the server's memory. Every wait is for a condition on the page (helpers.browser), never
a pause. CI installs chromium (.ci/run); without it these tests skip, and in CI they fail.

    pytest tests/cross/test_browser.py
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.views import glossary
from app.chrome import i18n
from app.state.lesson_file import builtin_lesson
from helpers.browser import (CHART, PROJECTOR, VISIBLE_TEXT, LiveServer, start_class, drawn, form_settings, fresh, main_button, new_context,
                             screenshot_whole, settled, wait_for_settings, wait_rendered)
from helpers.language import english_words
from app.state.train_settings import RANGES, to_param
from minigpt import DEFAULT_CORPUS, GPTConfig, TrainConfig, load_pretrained, load_zip


pytestmark = pytest.mark.browser
STEPS = builtin_lesson("en").steps  # the built-in lesson, as the app reads it
TRAINING_MS = 180_000  # how long a short run may take to finish on a busy machine before it counts as stuck


def note(shots: Path, text: str) -> None:
    """A figure measured on the way, kept beside the screenshots (measurements.txt) and printed."""
    with (shots / "measurements.txt").open("a") as f:
        f.write(text + "\n")
    print(text)


def open_page(browser):
    # Streamlit scrolls inside its main section, so a full-page screenshot is only as tall as the window
    return new_context(browser, viewport={"width": 1400, "height": 2200}).new_page()


def go(page, label: str, heading: str) -> None:
    """Follow the sidebar's link (the app draws its own navigation)."""
    page.get_by_test_id("stSidebar").get_by_role("link", name=re.compile(re.escape(label) + "$")).click()
    wait_rendered(page, heading)


def test_every_page_renders_and_generate_streams(browser, server, shots):
    page = open_page(browser)
    page.goto(server.url, wait_until="domcontentloaded")
    wait_rendered(page, "MiniGPT Lab")
    note(shots, f"server RSS idle (after the Home page): {server.rss_mb():.0f} MB")
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == DEFAULT_CORPUS
    page.screenshot(path=shots / "1_home.png", full_page=True)

    go(page, "Train", "Train")
    page.screenshot(path=shots / "2_train.png", full_page=True)

    go(page, "Generate", "Generate")
    main_button(page, "Generate").click()
    page.wait_for_function("() => { const c = document.querySelector('[data-testid=stCode] code');"
                           " return c && c.innerText.length > 40 }")
    page.wait_for_selector('[data-testid="stDataFrame"]')  # the step-by-step table
    page.screenshot(path=shots / "3_generate.png", full_page=True)

    go(page, "Attention", "Attention")
    page.wait_for_selector(".js-plotly-plot .hm image")
    page.screenshot(path=shots / "4_attention.png", full_page=True)

    go(page, "√d_k scaling", "√d_k scaling")
    page.wait_for_selector(".js-plotly-plot")
    page.screenshot(path=shots / "5_scaling.png", full_page=True)
    page.close()


def test_training_updates_the_live_chart_and_a_refresh_reattaches(browser, server, shots):
    page = open_page(browser)
    page.goto(server.url + "/Train", wait_until="domcontentloaded")
    wait_rendered(page, "Train")
    for label in ("d_model", "num_layers"):  # the smallest model: their sliders' minimum
        page.locator('[data-testid="stSlider"]', has_text=label).get_by_role("slider").press("Home")
    eval_every = page.get_by_role("spinbutton", name="Evaluate every … steps")
    eval_every.fill("50")
    eval_every.press("Enter")
    # the most steps the form takes: the run trains until the test presses Stop, however busy the machine
    most = RANGES["max_steps"][1]
    steps = page.get_by_role("spinbutton", name="Steps", exact=True)
    steps.fill(str(most))
    steps.press("Enter")
    wait_for_settings(page, "d_model:16", "num_layers:1", "eval_interval:50", f"max_steps:{most}")  # the server has them
    main_button(page, "Start").click()
    page.wait_for_function("() => { const p = document.querySelector('.js-plotly-plot');"
                           " return p && p.data && p.data[0].x.length >= 5 }", timeout=TRAINING_MS)
    note(shots, f"server RSS while training: {server.rss_mb():.0f} MB")
    assert "run=" in page.url and "key=" in page.url
    page.screenshot(path=shots / "6_train_running.png", full_page=True)

    page.reload(wait_until="domcontentloaded")
    pause = main_button(page, "Pause")
    pause.wait_for()
    assert pause.is_enabled()  # the owner's key came back with the address: control, not just a view

    page.wait_for_function("() => { const p = document.querySelector('.js-plotly-plot');"
                           " return p && p.data && p.data[1].x.length >= 1 }", timeout=TRAINING_MS)  # an evaluation
    go(page, "Attention", "Attention")
    page.wait_for_selector(f"{CHART} >> nth=1")  # the time-lapse frame, not a chart left stale
    page.screenshot(path=shots / "7_attention_timelapse.png", full_page=True)
    page.get_by_test_id("stSidebar").get_by_role("link", name=re.compile("Train$")).click()
    stop = main_button(page, "Stop")
    stop.wait_for()
    stop.click()
    page.get_by_text("stopped", exact=True).wait_for()
    drawn(page)  # no polling now
    with page.expect_download() as download:
        main_button(page, "Download checkpoint (.zip)", exact=False).click()
    checkpoint = load_zip(Path(download.value.path()).read_bytes())  # what Home's upload accepts
    assert checkpoint.model.config.d_model == 16 and checkpoint.meta["corpus"] == DEFAULT_CORPUS
    page.close()


def test_hovering_a_heatmap_cell_names_query_key_and_weight(browser, server):
    page = open_page(browser)
    page.goto(server.url + "/Attention", wait_until="domcontentloaded")
    wait_rendered(page, "Attention")
    page.wait_for_selector(".js-plotly-plot .hm image")
    box = page.locator(".js-plotly-plot .nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + 0.1 * box["width"], box["y"] + 0.9 * box["height"])  # lower left: in the past
    label = page.locator(".hoverlayer .hovertext").first
    label.wait_for()
    text = label.text_content()
    assert "query" in text and "key" in text and "weight" in text, text
    page.close()


SCREENS = {"phone": {"width": 390, "height": 844}, "projector": {"width": 1280, "height": 720}}

PAGES = [("", "MiniGPT Lab"), ("/Train", "Train"), ("/Generate", "Generate"), ("/Attention", "Attention"),
         ("/Scaling", "√d_k scaling"), ("/Inside", "Inside attention"),
         ("/Model", "Inside the model"), ("/Experiments", "Experiments"), ("/Glossary", "Glossary"),
         ("/Lesson", "Lesson"), ("/Board", "Class board")]

OVERFLOW = "() => document.documentElement.scrollWidth - window.innerWidth"
WIDER = f"() => ({OVERFLOW})() > 1 ? [({OVERFLOW})()] : []"  # the page's width past the screen's, if any
# pairs of charts whose boxes overlap
OVERLAP = """() => { const boxes = [...document.querySelectorAll('[data-testid=stPlotlyChart]')].map(c => c.getBoundingClientRect());
  const found = [];
  boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b, j) => {
    if (a.right > b.left && b.right > a.left && a.bottom > b.top && b.bottom > a.top) found.push([i, i + 1 + j]); }));
  return found; }"""

# every tick label, title and annotation a chart draws, that runs past its chart's left or right edge:
# the fast figures fix their margins from the labels' estimated width instead of letting plotly grow them
CLIPPED = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => {
  const box = plot.getBoundingClientRect();
  return [...plot.querySelectorAll('text')].filter(t => t.textContent.trim()).map(t => [t, t.getBoundingClientRect()])
    .filter(([t, r]) => r.width > 0 && (r.left < box.left - 1 || r.right > box.right + 1))
    .map(([t, r]) => `${t.textContent} (${Math.round(r.left - box.left)}..${Math.round(r.right - box.left)} of ${Math.round(box.width)})`);
})"""

# a page link's words cut off at the end of its box (Streamlit keeps a link's label on one line by default)
LINK_CUT = """() => [...document.querySelectorAll('[data-testid=stMain] [data-testid=stPageLink-NavLink] span:has(> [data-testid=stMarkdownContainer])')]
  .filter(s => s.scrollWidth > s.clientWidth + 1).map(s => s.textContent)"""


# a displayed formula wider than its box (KaTeX's struts reach a pixel or two past it)
FORMULA_CUT = """() => [...document.querySelectorAll('[data-testid=stMain] .katex-display')]
  .filter(f => f.scrollWidth > f.clientWidth + 3).map(f => `${f.textContent.slice(0, 40)} (${f.scrollWidth} > ${f.clientWidth})`)"""
# a metric's value cut off with an ellipsis (Streamlit keeps it on one line)
METRIC_CUT = """() => [...document.querySelectorAll('[data-testid=stMain] [data-testid=stMetricValue] div')]
  .filter(v => v.scrollWidth > v.clientWidth + 1).map(v => v.textContent)"""
# a table whose columns run past its box with no visible line just before it saying it scrolls sideways
TABLE_CUT = """() => [...document.querySelectorAll('[data-testid=stMain] [data-testid=stDataFrame]')].filter(grid => {
    const s = grid.querySelector('.dvn-scroller');
    if (!s || s.scrollWidth <= s.clientWidth + 1) return false;
    const box = grid.closest('[data-testid=stElementContainer]'), before = box && box.previousElementSibling;
    const hint = before && (before.matches('[class*=st-key-swipe_hint]') ? before : before.querySelector('[class*=st-key-swipe_hint]'));
    return !(hint && hint.offsetHeight > 0);
  }).map(grid => (grid.closest('[class*=st-key-]')?.className.match(/st-key-\\S+/) || ['a table'])[0])"""


@pytest.mark.parametrize("screen", SCREENS)
def test_every_page_fits_a_phone_and_a_projector(browser, server, shots, screen):
    """Issue B4: at 390 px the √d_k charts' titles overlapped, heatmaps shrank to 53 px and tables
    ran off the edge. Every page now fits the screen's width, charts never sit on each other, and
    a heatmap cell stays readable; a screenshot of each page at each size is kept."""
    phone = screen == "phone"
    context = new_context(browser, viewport=SCREENS[screen], is_mobile=phone, has_touch=phone)
    page = context.new_page()
    for path, heading in PAGES:
        page.goto(server.url + path, wait_until="domcontentloaded")
        wait_rendered(page, heading)
        if path in ("/Generate", "/Attention", "/Scaling", "/Inside", "/Model", "/Experiments", "/Lesson"):
            page.wait_for_selector(".js-plotly-plot .main-svg")
        # Plotly lays out again after its first frame: each check is polled until the layout settles
        assert not settled(page, WIDER), f"{path or '/'} is wider than the {screen} screen"
        assert not (cut := settled(page, CLIPPED)), f"{path}: chart text cut off at its edge: {cut}"
        assert not (cut := settled(page, LINK_CUT)), f"{path or '/'}: a link's words cut off: {cut}"
        assert not (laid := settled(page, OVERLAP)), f"{path}: charts on top of each other: {laid}"
        assert not (cut := settled(page, FORMULA_CUT)), f"{path}: a formula cut off: {cut}"
        assert not (cut := settled(page, METRIC_CUT)), f"{path}: a metric's value cut off: {cut}"
        assert not (cut := settled(page, TABLE_CUT)), f"{path}: a table's columns cut off, nothing says it scrolls: {cut}"
        if path == "/Attention":
            text = page.get_by_role("textbox", name="Text").input_value()
            plot = page.locator(".js-plotly-plot .nsewdrag").first.bounding_box()
            assert plot["width"] / len(text) >= 14, f"heatmap cells of {plot['width'] / len(text):.0f} px"
        screenshot_whole(page, shots / f"{screen}_{(path or '/home').strip('/').lower()}.png", SCREENS[screen])
    page.goto(server.url + "/Generate", wait_until="domcontentloaded")
    wait_rendered(page, "Generate")
    prompt = page.get_by_role("textbox", name="Prompt")
    prompt.fill("注意力")
    prompt.press("Enter")  # issue Low: Enter in the prompt box did nothing
    page.wait_for_function("() => { const c = document.querySelector('[data-testid=stCode] code');"
                           " return c && c.innerText.startsWith('注意力') && c.innerText.length > 40 }")
    assert page.evaluate(OVERFLOW) <= 1
    screenshot_whole(page, shots / f"{screen}_generate_answer.png", SCREENS[screen])
    context.close()


GLOSSED = {english.lower() for english, _meaning in glossary.TERMS}

# the main area's text a reader sees: not icon ligatures, formulas (notation, the same in every language: the
# lesson's test checks their words), code (learner text), nor a data grid's cells (data: the glossary's English
# column is English on purpose; st.dataframe draws on a canvas and fills its accessible copy of the cells in the
# DOM only at times, so reading it made this check depend on timing; the grids' headers are checked in
# tests/cross/test_i18n.py), nor words drawn at font-size 0 (the uploader's English, painted over in the page's
# language)
ZH_PAGES = [("", "MiniGPT Lab"), ("/Train", "训练"), ("/Generate", "生成"), ("/Attention", "注意力"),
            ("/Scaling", "√d_k 缩放"), ("/Inside", "注意力内部"),
            ("/Model", "模型内部"), ("/Experiments", "实验"), ("/Glossary", "术语表"), ("/Lesson", "课程"),
            ("/Board", "班级看板")]


def test_a_lang_zh_link_opens_every_page_in_chinese(browser, server, shots):
    """A teacher's ?lang=zh link: every page in Chinese whatever the browser's own language, the
    sidebar's links stay in Chinese, and a Chinese browser gets Chinese without the parameter.
    A screenshot of each page (zh_*.png) shows the Chinese rendered in real glyphs."""
    viewport = SCREENS["projector"]
    context = new_context(browser, viewport=viewport, locale="en-US")
    page = context.new_page()
    for path, heading in ZH_PAGES:
        page.goto(f"{server.url}{path}?lang=zh", wait_until="domcontentloaded")
        wait_rendered(page, heading)
        if path in ("/Attention", "/Scaling", "/Inside", "/Model", "/Experiments", "/Lesson"):
            page.wait_for_selector(".js-plotly-plot .main-svg")
        assert page.title().startswith(heading if path else "首页"), page.title()
        page.wait_for_function(f"() => document.querySelectorAll('[data-testid=stSidebar] a[href]').length "
                               f">= {len(ZH_PAGES)}")
        links = page.locator("[data-testid=stSidebar] a[href]").all()
        assert len(links) == len(ZH_PAGES) and all("lang=zh" in link.get_attribute("href") for link in links)
        assert not (cut := settled(page, CLIPPED)), f"{path}: chart text cut off at its edge: {cut}"
        assert not (cut := settled(page, METRIC_CUT)), f"{path}: a metric's value cut off: {cut}"  # 已训练… once
        shown = page.evaluate(VISIBLE_TEXT)  # what the page itself shows, Streamlit's own words included
        assert not english_words(shown, GLOSSED), f"{path or '/'}: {english_words(shown, GLOSSED)}"
        screenshot_whole(page, shots / f"zh_{(path or '/home').strip('/').lower()}.png", viewport)
    page.goto(f"{server.url}/?lang=zh", wait_until="domcontentloaded")
    wait_rendered(page, "MiniGPT Lab")
    button = page.get_by_test_id("stFileUploaderDropzone").first.locator("button p")
    # the upload button reads 上传: Streamlit's own word rewritten in the page (app.chrome.streamlit_words), to a screen
    # reader too; until that script has run, the CSS paints it over (never English, not even at first)
    page.wait_for_function("(p) => p.textContent === '上传' && getComputedStyle(p, '::after').content === 'none'",
                           arg=button.element_handle())
    page.goto(f"{server.url}/Train?lang=zh", wait_until="domcontentloaded")
    wait_rendered(page, "训练")
    main_button(page, "开始").wait_for()  # a known Chinese label, drawn
    page.get_by_test_id("stSidebar").get_by_role("link", name="生成").click()
    wait_rendered(page, "生成")
    assert "lang=zh" in page.url and page.get_by_role("textbox", name="提示词").is_visible()
    page.get_by_test_id("stSidebar").get_by_text("English", exact=True).click()
    wait_rendered(page, "Generate")
    assert "lang=en" in page.url
    context.close()

    chinese = new_context(browser, viewport=viewport, locale="zh-CN")
    page = chinese.new_page()
    page.goto(server.url, wait_until="domcontentloaded")
    wait_rendered(page, "MiniGPT Lab")
    page.get_by_text("第一次来？").first.wait_for()  # Home's "new here? start the lesson"
    chinese.close()


TASK_WORDS = {
    "en": {"corpus": "Corpus", "train": "Train", "attention": "Attention", "preset": "Task", "start": "Start",
           "steps": "Steps", "finished": "finished", "of_600": "Step (of 600)"},
    "zh": {"corpus": "语料", "train": "训练", "attention": "注意力", "preset": "任务", "start": "开始",
           "steps": "步数", "finished": "已完成", "of_600": "步数（共 600 步）"},
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_task_model_shows_its_right_keys_and_a_task_run_its_accuracy(browser, server, shots, lang):
    """The reverse task, chosen on Home: the shipped model's Attention outlines the right keys
    (the anti-diagonal) and scores the heads; a short run draws its accuracy beside the loss
    and the time-lapse's right-key score. Screenshots {lang}_task_*.png."""
    words, viewport = TASK_WORDS[lang], SCREENS["projector"]
    context = new_context(browser, viewport=viewport, locale="en-US")
    page = context.new_page()
    page.goto(f"{server.url}/?lang={lang}", wait_until="domcontentloaded")
    wait_rendered(page, "MiniGPT Lab")
    box = page.get_by_role("combobox", name=re.compile(words["corpus"]))
    box.click()
    box.fill("task-reverse")
    box.press("Enter")
    page.get_by_test_id("stMetricValue").filter(has_text=re.compile("^task-reverse$")).wait_for()  # loaded
    go(page, words["attention"], words["attention"])
    page.wait_for_selector(".js-plotly-plot .hm image")
    # the six answer rows' right keys, outlined on the first heatmap
    assert page.locator(".js-plotly-plot").first.locator(".scatterlayer .point").count() == 6
    page.get_by_test_id("stMarkdownContainer").filter(has_text=re.compile("task|任务")).first.wait_for()
    if lang == "zh":
        probe = load_pretrained("task-reverse").meta["probe_text"]
        shown = page.evaluate(VISIBLE_TEXT).replace(probe, " ")  # the task line is data, not words
        assert not english_words(shown, GLOSSED), english_words(shown, GLOSSED)
    screenshot_whole(page, shots / f"{lang}_task_attention.png", viewport)

    go(page, words["train"], words["train"])
    main_button(page, words["preset"]).click()
    steps = page.get_by_role("spinbutton", name=words["steps"], exact=True)
    page.wait_for_function("el => el.value === '1200'", arg=steps.element_handle())  # the preset's
    drawn(page)
    steps.fill("600")  # the first evaluation at 100% comes at step 600 (bench.presets)
    steps.press("Enter")
    wait_for_settings(page, "max_steps:600")  # the server has it
    main_button(page, words["start"]).click()
    page.get_by_text(words["of_600"]).wait_for()  # the run took the 600 steps
    page.get_by_test_id("stMetricValue").get_by_text(words["finished"], exact=True).wait_for(timeout=TRAINING_MS)
    drawn(page)
    # the accuracy chart by what it is (its axis in percent), not by its place: Plotly draws each chart
    # of a page in its own time, and on a busy machine the one after the loss may not be there yet
    accuracy = page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')]"
                                      ".find(p => p.layout && p.layout.yaxis && p.layout.yaxis.tickformat === '.0%')")
    assert accuracy.evaluate("p => p.data[0].x") == [0, 100, 200, 300, 400, 500, 600]
    screenshot_whole(page, shots / f"{lang}_task_train.png", viewport)
    go(page, words["attention"], words["attention"])
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot')].some(p => p.data &&"
                           " p.data.length >= 2 && p.data[0].mode === 'lines+markers' && p.data[0].x.length >= 7)")  # the right-key score over the run's evaluations
    screenshot_whole(page, shots / f"{lang}_task_timelapse.png", viewport)
    context.close()


EXPERIMENT_WORDS = {
    "en": {"heading": "Experiments", "heads": "Zero these heads (layer · head)", "knocked": "Val loss, knocked out",
           "measure": "Measure every head", "race": "Race", "verdict": "After 200 steps without the scaling"},
    "zh": {"heading": "实验", "heads": "把这些头置零（层 · 头）", "knocked": "验证损失：消融之后",
           "measure": "测量每个头", "race": "开始比赛", "verdict": "不缩放训练 200 步后"},
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_knockout_the_head_importance_and_a_race_on_the_experiments_page(browser, server, shots, lang):
    """Zero a head: the knocked-out loss moves off the whole model's; measure every head: the
    layer × head grid; race scaled against unscaled: three live charts and the verdict in numbers.
    Screenshot {lang}_experiments.png."""
    words, viewport = EXPERIMENT_WORDS[lang], SCREENS["projector"]
    context = new_context(browser, viewport=viewport, locale="en-US")
    page = context.new_page()
    page.goto(f"{server.url}/Experiments?lang={lang}", wait_until="domcontentloaded")
    wait_rendered(page, words["heading"])
    knocked = page.get_by_test_id("stMetric").filter(has_text=words["knocked"])
    assert knocked.count() == 0  # nothing knocked out yet
    page.get_by_test_id("stMultiSelect").first.click()
    select_all = page.locator('[role=option][data-key="__select_all__"] > div')  # Streamlit's own English
    assert select_all.evaluate("el => getComputedStyle(el, '::after').content") == \
        {"en": "none", "zh": '"全选"'}[lang]
    page.get_by_role("option", name="1 · 1", exact=True).click()
    page.keyboard.press("Escape")
    knocked.get_by_test_id("stMetricDelta").wait_for()
    whole = page.get_by_test_id("stMetricValue").first.inner_text()
    assert knocked.get_by_test_id("stMetricValue").inner_text() != whole
    main_button(page, words["measure"]).click()
    page.wait_for_selector('.js-plotly-plot text:text-matches("^[+−-]0\\\\.\\\\d{3}$")')
    main_button(page, words["race"]).click()
    page.get_by_text(words["verdict"]).wait_for(timeout=TRAINING_MS)
    drawn(page)
    # 2 layers' attention, the grid, the race's three: Plotly draws each in its own time after the script ends
    page.wait_for_function("(chart) => document.querySelectorAll(chart).length >= 6", arg=CHART)
    grid = page.locator(CHART).nth(2)
    grid.hover()  # Plotly's save-as-PNG button, its tooltip in the page's language
    save = grid.locator(".modebar-btn").first
    save.wait_for()
    assert save.get_attribute("data-title") == {"en": "Download plot as a PNG", "zh": "把图下载为 PNG 图片"}[lang]
    assert not (cut := settled(page, CLIPPED)), cut
    screenshot_whole(page, shots / f"{lang}_experiments.png", viewport)
    context.close()


def test_two_kept_runs_compare_on_the_experiments_page_and_the_link_shows_them_elsewhere(browser, server, shots,
                                                                                        tmp_path):
    """Train the Tiny preset twice, the second with a larger learning rate, keep both under names,
    and compare: both runs' curves on one chart, the learning rate the one setting highlighted;
    the chart saved as HTML opens with the network cut off; the comparison's link opens the same
    runs in a fresh browser. Screenshot en_compare.png."""
    viewport = SCREENS["projector"]
    context = new_context(browser, viewport=viewport, locale="en-US")
    page = context.new_page()
    page.goto(f"{server.url}/Train?lang=en", wait_until="domcontentloaded")
    wait_rendered(page, "Train")
    main_button(page, "Tiny").click()  # once: the second run keeps the form's settings, and changes one
    # the preset applied (an idle page may not have rerun yet)
    page.wait_for_function("() => document.querySelector('input[aria-label=\"Steps\"]')?.value === '300'")
    drawn(page)
    for name, lr_key in (("first", None), ("faster", "End")):
        # (clicking Tiny again before the second run raced the slider under load: a preset applied after
        # the slider moved put the learning rate back, the two runs trained alike, and no setting differed)
        if lr_key:  # the learning rate's slider to its largest value, in the folded Hyperparameters
            page.get_by_test_id("stExpander").filter(has_text="Hyperparameters").locator("summary").click()
            preset_lr = next(p for p in form_settings(page).split("?train=")[1].split(",") if p.startswith("lr:"))
            page.locator('[data-testid="stSlider"]', has_text="Learning rate").get_by_role("slider").press(lr_key)
            page.wait_for_function("(lr) => [...document.querySelectorAll('[data-testid=stCode] code')].some("
                                   "c => c.textContent.includes('?train=') && !c.textContent.includes(lr + ','))",
                                   arg=preset_lr)  # the server has the new learning rate
        before = page.url
        main_button(page, "Start" if name == "first" else "Start a new run").click()
        page.wait_for_function("(old) => location.href.includes('run=') && location.href !== old",
                               arg=before)  # the new run's id in the address
        run_id = re.search(r"run=([^&]+)", page.url).group(1)
        page.get_by_test_id("stMainBlockContainer").get_by_test_id("stMarkdown").filter(
            has_text=f"Run {run_id}").first.wait_for()  # its panel, drawn after the old run's
        # the new run's numbers, not the stale ones of the run before, which stay on the page until the
        # script reaches them (waiting on those, Keep was pressed on a run only just started)
        step = fresh(page).get_by_test_id("stMetric").filter(has_text="Step (of 300)").get_by_test_id("stMetricValue")
        try:
            step.filter(has_text=re.compile(r"^300$")).wait_for(timeout=TRAINING_MS)  # all of the Tiny preset's steps
        except Exception:
            screenshot_whole(page, shots / f"en_compare_{name}_failed.png", viewport)
            raise
        fresh(page).get_by_test_id("stMetricValue").filter(has_text="finished").wait_for()
        box = page.get_by_role("textbox", name="Name for the comparison")
        box.fill(name)
        box.press("Enter")  # Keep's click below carries the committed name; its toast says which
        main_button(page, "Keep for comparison").click()
        page.get_by_text(f"Kept “{name}”").first.wait_for()  # the toast: kept before we leave
        drawn(page)
    page.get_by_test_id("stSidebar").get_by_role("link", name="Experiments").click()
    wait_rendered(page, "Experiments")
    try:  # the legend of the chart as drawn, read once it has the second run
        legend = page.wait_for_function("(chart) => { const names = [...document.querySelectorAll(chart + ' .legendtext')]"
                                        ".map(e => e.textContent); return names.includes('faster · val loss') && names }",
                                        arg=CHART).json_value()
    except Exception:
        screenshot_whole(page, shots / "en_compare_failed.png", viewport)  # what the page showed instead
        raise
    assert legend.count("first · val loss") == 1, legend
    assert not [name for name in legend if "this run" in name], legend  # kept as it is: not shown twice
    try:
        page.get_by_test_id("stDataFrame").nth(1).wait_for(state="attached")  # the settings that differ, the results
    except Exception:
        screenshot_whole(page, shots / "en_compare_tables_failed.png", viewport)  # which table is missing, and why
        raise
    chart = page.locator(CHART).filter(has=page.locator(".legendtext", has_text="faster · val loss"))
    chart.hover()  # Plotly's own toolbar: save the chart as a PNG, in the browser
    chart.locator('.modebar-btn[data-title="Download plot as a PNG"]').wait_for()
    link = page.get_by_test_id("stCode").filter(has_text="compare=").inner_text().strip()
    screenshot_whole(page, shots / "en_compare.png", viewport)
    with page.expect_download() as download:
        main_button(page, "Save as HTML", exact=False).click()
    saved = tmp_path / download.value.suggested_filename
    download.value.save_as(saved)
    context.close()

    offline = new_context(browser, viewport=viewport, offline=True)  # the saved page needs no network
    opened = offline.new_page()
    opened.goto(saved.as_uri(), wait_until="load")
    opened.locator(".js-plotly-plot .legendtext").filter(has_text="faster · val loss").wait_for()
    assert opened.locator(".js-plotly-plot .legendtext").filter(has_text="first · val loss").count() == 1
    offline.close()

    elsewhere = new_context(browser, viewport=viewport, locale="en-US")
    other = elsewhere.new_page()
    other.goto(link, wait_until="domcontentloaded")
    wait_rendered(other, "Experiments")
    other.locator(f"{CHART} .legendtext").filter(has_text="faster · val loss").wait_for()
    elsewhere.close()


def test_the_lesson_in_chinese_from_a_teachers_link_with_next_through_every_step(browser, server, shots):
    """?lesson=1&lang=zh, then Next through all the steps: each step's heading in Chinese, its live
    view drawn, no English word and no chart text cut off; a screenshot of each (zh_lesson_01.png to
    zh_lesson_15.png)."""
    viewport = SCREENS["projector"]
    context = new_context(browser, viewport=viewport, locale="en-US")
    page = context.new_page()
    page.goto(f"{server.url}/Lesson?lesson=1&lang=zh", wait_until="domcontentloaded")
    wait_rendered(page, "课程")
    for n, step in enumerate(builtin_lesson("zh").steps, start=1):  # the Chinese lesson's own file
        page.get_by_role("heading", name=f"{n}. {step.title}", level=2).wait_for()
        drawn(page)
        assert re.search(rf"lesson={n}(&|$)", page.url) and "lang=zh" in page.url
        if step.view not in ("embed", "head", "loss", "fit", "kv", "pages", "train"):  # the views with charts
            page.wait_for_selector(".js-plotly-plot .main-svg")
        shown = page.evaluate(VISIBLE_TEXT)
        assert not english_words(shown, GLOSSED), f"step {n}: {english_words(shown, GLOSSED)}"
        assert not (cut := settled(page, CLIPPED)), f"step {n}: chart text cut off at its edge: {cut}"
        screenshot_whole(page, shots / f"zh_lesson_{n:02d}.png", viewport)
        if n < len(STEPS):
            main_button(page, "下一步 →").first.click()
            page.wait_for_function("(n) => new URL(location.href).searchParams.get('lesson') === String(n)",
                                   arg=n + 1)
    assert main_button(page, "下一步 →").first.is_disabled()
    context.close()


def test_on_a_phone_in_chinese_formulas_and_tables_fit_and_the_embedding_picker_labels_a_few(browser, server, shots):
    """Issue: on a phone the lesson's formulas ran off the edge (KaTeX up to 650 px at 390 px) with no
    sign that they scroll, Generate's table cut its columns, and the embedding scatter labelled all
    689 characters. Every formula of the lesson now fits; Generate's table fits; a table wider than
    the screen says so above it; the scatter labels the text's characters and a picked one's nearest.
    Screenshots zh_phone_*.png."""
    viewport = SCREENS["phone"]
    context = new_context(browser, viewport=viewport, is_mobile=True, has_touch=True, locale="zh-CN")
    page = context.new_page()
    for n, step in enumerate(STEPS, start=1):
        if step.formula is None:
            continue
        page.goto(f"{server.url}/Lesson?lesson={n}&lang=zh", wait_until="domcontentloaded")
        wait_rendered(page, "课程")
        page.wait_for_selector(".katex-display")
        assert not (cut := settled(page, FORMULA_CUT)), f"step {n}: a formula cut off: {cut}"
        assert not settled(page, WIDER), f"step {n} is wider than the phone"
        if n in (5, 11):
            screenshot_whole(page, shots / f"zh_phone_lesson_{n:02d}.png", viewport)
    page.goto(f"{server.url}/Generate?lang=zh", wait_until="domcontentloaded")
    wait_rendered(page, "生成")
    page.get_by_role("textbox", name="提示词").press("Enter")
    page.wait_for_selector('[data-testid="stDataFrame"]')
    drawn(page)
    scroller = page.locator("[data-testid=stDataFrame] .dvn-scroller").first
    assert scroller.evaluate("s => s.scrollWidth <= s.clientWidth + 1"), "Generate's table is wider than the phone"
    screenshot_whole(page, shots / "zh_phone_generate.png", viewport)
    page.goto(f"{server.url}/Inside?lang=zh", wait_until="domcontentloaded")
    wait_rendered(page, "注意力内部")
    assert page.locator("[data-testid=stDataFrame] .dvn-scroller").first.evaluate("s => s.scrollWidth > s.clientWidth")
    assert not (cut := settled(page, TABLE_CUT)), cut  # wider than the phone, and it says so
    page.locator("[class*=st-key-swipe_hint]").first.wait_for()
    screenshot_whole(page, shots / "zh_phone_inside.png", viewport)
    page.goto(f"{server.url}/Model?lang=zh", wait_until="domcontentloaded")
    wait_rendered(page, "模型内部")
    scatter = page.locator("[data-testid=stPlotlyChart]").filter(has=page.locator(".scatterlayer")).nth(0)
    page.wait_for_selector(".js-plotly-plot .scatterlayer .textpoint")
    labels = page.locator(".js-plotly-plot .scatterlayer .textpoint").count()
    assert 0 < labels < 40, f"{labels} labels on the embedding scatter"
    scatter.scroll_into_view_if_needed()
    screenshot_whole(page, shots / "zh_phone_model.png", viewport)
    context.close()


def test_a_fresh_server_draws_home_before_torch_and_a_cold_link_opens_its_page(browser, tmp_path):
    """A fresh server's first visitor: Home draws while torch loads beside it (the device box a
    stand-in), then draws again with this server's devices. Another fresh server whose first request
    is a teacher's link to Attention in Chinese: the page loads the library itself and draws."""
    with LiveServer({"OMP_NUM_THREADS": "1"}, log=tmp_path / "home.log") as fresh:
        page = open_page(browser)
        page.goto(fresh.url, wait_until="domcontentloaded")
        wait_rendered(page, "MiniGPT Lab")
        # drawn again once torch has said which devices there are: a new box, enabled
        page.wait_for_function("() => { const box = document.querySelector('input[aria-label=Device]');"
                               " return box && !box.disabled }")
        assert page.get_by_role("combobox", name="Device").input_value() == "cpu"
        page.context.close()
    with LiveServer({"OMP_NUM_THREADS": "1"}, log=tmp_path / "link.log") as fresh:
        page = open_page(browser)
        page.goto(f"{fresh.url}/Attention?lang=zh", wait_until="domcontentloaded")
        wait_rendered(page, "注意力")
        page.wait_for_selector(".js-plotly-plot .hm image")
        assert page.get_by_test_id("stSidebar").get_by_role("link", name=re.compile("训练$")).count() == 1
        page.context.close()




def legend_is(page, names: list[str]) -> None:
    """Wait until the chart's legend lists exactly `names`, in order (Plotly redraws it in steps: a
    count read at one instant may catch a redraw half done), in the chart as drawn now (CHART)."""
    shown = "(chart) => [...document.querySelectorAll(chart + ' .legendtext')].map(e => e.textContent)"
    try:
        page.wait_for_function(f"([chart, names]) => JSON.stringify(({shown})(chart)) === JSON.stringify(names)",
                               arg=[CHART, names])
    except Exception:
        raise AssertionError(f"the legend shows {page.evaluate(shown, CHART)}, not {names}") from None


def test_a_class_board_in_chinese_on_a_projector_and_a_phone(browser, server, shots):
    """Issue 28, in a real browser: a teacher starts a class on a 1920×1080 projector; two learners, one
    on a phone, open its link with a short run's settings, train and post under Chinese names; the
    teacher's board draws both runs live, one colour and one legend entry each, in large type, in
    Chinese; one learner, back after a refresh, withdraws their run and the projector drops it; the
    board fits the phone. Screenshots zh_board_projector.png and zh_board_phone.png."""
    teacher_context, teacher, code = start_class(browser, server, "zh")
    link = teacher.get_by_test_id("stCode").filter(has_text=f"class={code}").first.inner_text().strip()
    assert "teacher=" not in link and "teacher=" not in teacher.url  # the projected address carries no key

    settings = to_param(GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
                        TrainConfig(max_steps=60, eval_interval=20, batch_size=4, block_size=16))
    learners = {}
    faster = to_param(GPTConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=32),
                      TrainConfig(max_steps=60, eval_interval=20, batch_size=4, block_size=16, lr=1e-2))
    for name, viewport, settings in (("小明", SCREENS["phone"], settings), ("小红", SCREENS["projector"], faster)):
        phone = viewport is SCREENS["phone"]
        context = new_context(browser, viewport=viewport, locale="zh-CN", is_mobile=phone, has_touch=phone)
        page = context.new_page()
        page.goto(f"{link.replace('/Board?', '/Train?')}&train={settings}", wait_until="domcontentloaded")
        wait_rendered(page, "训练")
        main_button(page, "开始").click()
        box = page.get_by_role("textbox", name="在班级看板上的名字")
        box.wait_for()  # the run has started: its panel has the post button
        drawn(page)  # typed into and clicked on the page as drawn, not into a run still drawing it
        box.fill(name)
        box.press("Enter")
        drawn(page)
        main_button(page, "发布到班级看板").click()
        try:  # what stays under the button (the toast may go before it is seen, when the run's end redraws the page)
            page.get_by_text(f"你的运行已在班级 {code} 的看板上，名字是 {name}").wait_for()
        except Exception:
            screenshot_whole(page, shots / f"zh_board_post_failed_{len(learners)}.png", viewport)
            raise
        page.get_by_test_id("stMetricValue").filter(has_text="已完成").wait_for(timeout=TRAINING_MS)
        learners[name] = (context, page)

    legend = teacher.locator(f"{CHART} .legendtext")  # not the chart before, left stale by a full rerun
    try:
        for name in learners:
            legend.filter(has_text=name).wait_for()  # the board redraws on its own: nobody pressed anything
    except Exception:
        screenshot_whole(teacher, shots / "zh_board_failed.png", PROJECTOR)
        raise
    # both runs' validation curves reach their last evaluation, step 60, on the projector's chart
    teacher.wait_for_function("(chart) => { const plot = document.querySelector(chart);"
                              " const val = (plot?.data || []).filter(t => t.showlegend !== false);"
                              " return val.length === 2 && val.every(t => t.x[t.x.length - 1] === 60) }", arg=CHART)
    legend_is(teacher, list(learners))  # one entry per run, not one per curve
    # read off the chart as drawn: while a redraw has not reached it no chart is fresh, so the read waits
    shown = teacher.wait_for_function(
        "(chart) => { const plot = document.querySelector(chart);"
        " const texts = plot ? [...plot.querySelectorAll('.legendtext, .xtick text')] : [];"
        " return plot?.data && texts.length > 0 && {sizes: texts.map(e => parseFloat(getComputedStyle(e).fontSize)),"
        " colours: plot.data.map(t => t.line.color)} }", arg=CHART).json_value()
    assert min(shown["sizes"]) >= 16, shown["sizes"]  # the legend and the axis read from the back of the room
    assert len(set(shown["colours"])) == 2
    assert not settled(teacher, WIDER)
    words = english_words(teacher.evaluate(VISIBLE_TEXT).replace(code, ""), GLOSSED)
    assert not words, f"the board shows English: {words}"
    screenshot_whole(teacher, shots / "zh_board_projector.png", PROJECTOR)
    teacher.set_viewport_size(PROJECTOR)
    for button, suffix in (("下载表格（.csv）", ".csv"), ("另存为 HTML 网页", ".html")):  # the teacher's exports
        with teacher.expect_download() as download:
            main_button(teacher, button, exact=False).click()
        assert download.value.suggested_filename == f"minigpt-class-{code}{suffix}"
        saved = Path(download.value.path()).read_text(encoding="utf-8")
        # the CSV has the names as they are; the HTML as the chart's JSON writes them (\u escapes)
        assert all(name in saved or json.dumps(name)[1:-1] in saved for name in learners), saved[-300:]

    # 小红 comes back from her address (the run's key keeps it hers) and withdraws her run
    _context, red = learners["小红"]
    red.goto(red.url.replace("/Train?", "/Board?"), wait_until="domcontentloaded")
    wait_rendered(red, "班级看板")
    main_button(red, "撤回").click()
    legend_is(teacher, ["小明"])

    _context, ming = learners["小明"]  # on the phone: the board fits its width
    ming.goto(link, wait_until="domcontentloaded")
    wait_rendered(ming, "班级看板")
    ming.locator(f"{CHART} .legendtext").filter(has_text="小明").wait_for()
    assert not settled(ming, WIDER), "the board is wider than the phone"
    assert not (cut := settled(ming, CLIPPED)), f"the board's chart text cut off at its edge: {cut}"
    assert not (cut := settled(ming, TABLE_CUT)), f"the board's table cut off, nothing says it scrolls: {cut}"
    screenshot_whole(ming, shots / "zh_board_phone.png", SCREENS["phone"])
    for context, _page in learners.values():
        context.close()
    teacher_context.close()
