"""The class's QR code on the teacher's board: the learners' link drawn, on demand, as a QR code
that a phone reads from the back row of a classroom, on a projector's screen.

It draws only the link it is given, the one the board shows (?class=CODE: no teacher's key, no
language). It opens in a dialog over the board, so that the code alone fills the screen, and stays
open through the board's own redraws until the teacher closes it.

Its size: the code and its quiet zone fill QR_SHARE percent of the window's height. A class's link
on a server's address (`https://<app>.streamlit.app/Board?class=K7Q2`) takes a version-3 or -4 code
(29 or 33 modules a side, plus QUIET_ZONE on each side): on a 1920×1080 projector a module is
1080 × QR_SHARE% over 37 or 41 modules, over 20 screen pixels, which a phone reads from the back
row (measured in bench/RESULTS.md). The image is a PNG that the browser scales without smoothing,
so each module stays a sharp square; a PNG rather than an SVG so that the tests read back the very
bytes the page draws (tests/app/test_class_qr.py; tests/cross/test_browser_qr.py from a screenshot).
"""
from __future__ import annotations

import base64
import html
import io
import ipaddress
from urllib.parse import urlsplit

import segno
import streamlit as st

from app.chrome.i18n import _

SHOW_KEY = "board_qr_link"   # session_state: the link whose QR code is open, until the teacher closes it
ERROR_LEVEL = "m"            # 15% of the code may be lost (glare, a head in the way); segno raises it where it fits
QUIET_ZONE = 4               # modules of light margin on each side, as the QR standard asks
PNG_SCALE = 24               # image pixels a module: near its size on a 1080p screen
QR_SHARE = 80                # percent of the window's height (or width, if narrower) the code fills


def qr_png(link: str) -> bytes:
    """The link as a QR code: a black-and-white PNG, PNG_SCALE pixels a module, its quiet zone included."""
    code = segno.make(link, error=ERROR_LEVEL, micro=False)
    out = io.BytesIO()
    code.save(out, kind="png", scale=PNG_SCALE, border=QUIET_ZONE, dark="#000000", light="#ffffff")
    return out.getvalue()


def qr_html(link: str) -> str:
    """The code as an image, QR_SHARE of the window's height, scaled without blurring its edges."""
    data = base64.b64encode(qr_png(link)).decode("ascii")
    alt = html.escape(_("QR code of the class's link: {link}", link=link), quote=True)
    side = f"min({QR_SHARE}vh, {QR_SHARE}vw)"
    return (f'<div style="display:flex;justify-content:center">'
            f'<img src="data:image/png;base64,{data}" alt="{alt}" '
            f'style="width:{side};height:{side};image-rendering:pixelated"></div>')


def _close() -> None:
    st.session_state.pop(SHOW_KEY, None)


def only_here(link: str) -> bool:
    """Whether the link names this computer itself (localhost, 127.0.0.1, ::1): no phone can open it."""
    host = urlsplit(link).hostname or ""
    try:
        return ipaddress.ip_address(host).is_loopback or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return host == "localhost" or host.endswith(".localhost")


def _code(link: str) -> None:
    st.html(qr_html(link))
    if only_here(link):  # under the code: the code keeps its place and size on the screen
        st.warning(_("This address names this computer itself: a phone that scans it opens nothing. Open the app "
                     "by its address on the school's network (docs/deploying.md), then show the code again."))
    st.caption(_("Scan this code with a phone's camera to join the class: it opens {link}", link=f"`{link}`"))


def qr_button(link: str) -> None:
    """The teacher's button that shows the learners' `link` as a QR code; never drawn by default."""
    ss = st.session_state
    # no tooltip: the focus comes back to the button when the dialog closes, and its tooltip would cover the tabs
    if st.button(_("Show the class's QR code"), key="board_qr", icon=":material/qr_code_2:"):
        ss[SHOW_KEY] = link
    if ss.get(SHOW_KEY) == link:  # made at each run, not at import: its title is in the page's language
        st.dialog(_("Scan to join the class"), width="large", on_dismiss=_close)(_code)(link)
