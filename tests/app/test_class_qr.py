"""app/parts/class_qr.py: the class's QR code, read back by a second library (zxing-cpp), never by
encoding the link again with the one that drew it; and the button that shows it only on demand.

    pytest tests/app/test_class_qr.py
"""
from __future__ import annotations

import base64
import io
import re

import pytest
import zxingcpp
from PIL import Image
from streamlit.testing.v1 import AppTest

from app.parts import class_qr

LINKS = ["http://localhost:8501/Board?class=K7Q2",                          # a laptop
         "https://minigpt-lab.streamlit.app/Board?class=Z9XM",                # Community Cloud
         "https://a-rather-long-school-server-name.example.edu:8443/Board?class=HP3D"]


def read(png: bytes) -> list:
    return zxingcpp.read_barcodes(Image.open(io.BytesIO(png)))


@pytest.mark.parametrize("link", LINKS)
def test_the_png_reads_back_as_the_link_exactly(link):
    found = read(class_qr.qr_png(link))
    assert [(f.format, f.text) for f in found] == [(zxingcpp.BarcodeFormat.QRCode, link)]
    assert found[0].ec_level in ("M", "Q", "H")  # never below the level asked for


def test_the_code_keeps_its_quiet_zone_and_its_module_size():
    png = class_qr.qr_png(LINKS[1])
    found = read(png)[0]
    modules = 17 + 4 * int(found.extra["Version"])
    margin = class_qr.QUIET_ZONE * class_qr.PNG_SCALE
    corner = found.position.top_left
    assert (corner.x, corner.y) == (margin, margin)
    assert Image.open(io.BytesIO(png)).size == ((modules + 2 * class_qr.QUIET_ZONE) * class_qr.PNG_SCALE,) * 2


def test_the_page_draws_the_link_it_is_given_and_says_what_it_is_in_the_image_alt():
    html = class_qr.qr_html(LINKS[0])
    data = re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1)
    assert [f.text for f in read(base64.b64decode(data))] == [LINKS[0]]
    assert re.search(r'alt="[^"]*' + re.escape(LINKS[0]), html)
    assert "image-rendering:pixelated" in html  # scaled up on a projector, each module stays a sharp square


def _board(link: str) -> None:
    from app.parts import class_qr

    class_qr.qr_button(link)


def test_the_code_is_drawn_only_when_the_teacher_asks():
    at = AppTest.from_function(_board, args=(LINKS[0],), default_timeout=30).run()
    assert not at.exception
    assert class_qr.SHOW_KEY not in at.session_state
    assert not [h for h in at.get("html") if "data:image/png" in h.proto.body]
    at.button(key="board_qr").click().run()
    assert not at.exception
    drawn = [h.proto.body for h in at.get("html") if "data:image/png" in h.proto.body]
    assert len(drawn) == 1 and LINKS[0] in drawn[0]
    assert any(LINKS[0] in c.value for c in at.caption)


@pytest.mark.parametrize("link, warned", [(LINKS[0], True), ("http://127.0.0.1:8600/Board?class=K7Q2", True),
                                          ("http://[::1]:8501/Board?class=K7Q2", True), (LINKS[1], False),
                                          ("http://192.168.1.20:8501/Board?class=K7Q2", False)])
def test_a_link_to_this_computer_itself_is_said_to_open_nothing_on_a_phone(link, warned):
    at = AppTest.from_function(_board, args=(link,), default_timeout=30).run()
    at.button(key="board_qr").click().run()
    assert not at.exception
    assert bool([w for w in at.warning if "names this computer itself" in w.value]) == warned
