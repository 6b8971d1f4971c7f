"""The class's QR code as the projector shows it, read back by a second library (zxing-cpp), never
by encoding the link again with the one that drew it.

A teacher on a 1920×1080 projector starts a class, in English and in Chinese, and presses "Show
the class's QR code". A screenshot of the window (what the room sees) reads back as the learners'
link, exactly, with no teacher's key and no language in it; its modules are at least MIN_MODULE_PX
screen pixels; and the screenshot scaled to a quarter of its size (a phone's photo of the screen
from the back row) still reads. The dialog passes axe-core's WCAG A and AA rules, its image named by
its alt text; closed, it stays closed through the page's next run. Screenshots land in the module's
folder.

    pytest tests/cross/test_browser_qr.py
"""
from __future__ import annotations

import io
import math
from urllib.parse import parse_qs, urlsplit

import pytest
import zxingcpp
from axe_playwright_python.sync_playwright import Axe
from PIL import Image

from app.state import classroom
from helpers.browser import drawn, main_button, start_class

pytestmark = pytest.mark.browser
MIN_MODULE_PX = 20                        # a module's side on the 1080p screen: legible from the back row
PHONE_SHARE = 4                           # the photo: a quarter of the screenshot's width and height
BUTTON = {"en": "Show the class's QR code", "zh": "显示班级二维码"}
TITLE = {"en": "Scan to join the class", "zh": "扫码加入班级"}
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]  # as tests/cross/test_browser_a11y.py checks every page
LOADED = "(img) => img.complete && img.naturalWidth > 0"


def qr_codes(image: Image.Image) -> list:
    return [found for found in zxingcpp.read_barcodes(image) if found.format == zxingcpp.BarcodeFormat.QRCode]


def module_px(found) -> float:
    """A module's side in the image's pixels: the symbol's side between the outer corners the reader
    found, over its modules (a version-v code is 17 + 4v modules a side, v as the reader decoded it)."""
    corners = found.position
    side = math.dist((corners.top_left.x, corners.top_left.y), (corners.top_right.x, corners.top_right.y))
    return side / (17 + 4 * int(found.extra["Version"]))


def teacher_key(context, code: str) -> str:
    found = [c["value"] for c in context.cookies() if c["name"] == classroom.COOKIE_PREFIX + code]
    assert found, "the teacher's browser keeps no key for the class"
    return found[0]


def show_code(page, lang: str, shots):
    """The teacher presses the button; the window as the room sees it, once the code is drawn, and the code's image."""
    assert not page.get_by_role("dialog").count(), "the QR code is drawn only on demand"
    main_button(page, BUTTON[lang]).click()
    image = page.get_by_role("dialog").get_by_role("img")
    image.wait_for()
    page.wait_for_function(LOADED, arg=image.element_handle())
    drawn(page)
    return Image.open(io.BytesIO(page.screenshot(path=shots / f"qr_projector_{lang}.png"))), image


def closes_for_good(page, lang: str) -> None:
    """Escape closes the code, and it stays closed through the page's next full run (a tab change)."""
    page.keyboard.press("Escape")
    page.get_by_role("dialog").wait_for(state="detached")
    for tab in (1, 0):
        page.get_by_role("tab").nth(tab).click()
        drawn(page)
    main_button(page, BUTTON[lang]).wait_for()
    assert not page.get_by_role("dialog").count()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_projected_qr_code_reads_back_as_the_learners_link_and_from_a_phone_photo(browser, server, shots, lang):
    context, page, code = start_class(browser, server, lang)
    page.wait_for_function("(name) => document.cookie.includes(name + '=')", arg=classroom.COOKIE_PREFIX + code)
    key = teacher_key(context, code)
    shot, image = show_code(page, lang, shots)

    found = qr_codes(shot)
    learners_link = f"{server.url}/Board?class={code}"
    assert [f.text for f in found] == [learners_link]
    assert key not in found[0].text
    assert parse_qs(urlsplit(found[0].text).query) == {"class": [code]}  # no teacher's key, no language
    assert module_px(found[0]) >= MIN_MODULE_PX, module_px(found[0])

    photo = shot.resize((shot.width // PHONE_SHARE, shot.height // PHONE_SHARE), Image.Resampling.LANCZOS)
    photo.save(shots / f"qr_phone_{lang}.png")
    assert [f.text for f in qr_codes(photo)] == [learners_link]

    alt = image.get_attribute("alt")
    assert learners_link in alt and key not in alt
    page.get_by_role("dialog").get_by_text(TITLE[lang], exact=True).wait_for()
    checked = Axe().run(page, context="[role=dialog]",
                        options={"runOnly": {"type": "tag", "values": WCAG_AA}, "resultTypes": ["violations"]})
    assert not checked.response["violations"], [v["id"] for v in checked.response["violations"]]
    closes_for_good(page, lang)
    context.close()
