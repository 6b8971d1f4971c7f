"""A learner's session through Streamlit's own websocket protocol, with no browser: what a class of
30 does to a server, played by one process (bench/class_load.py, class_board.py, class_follow.py)."""
from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

import websockets
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState


STEP_LABEL = re.compile(r"^Step \(of [\d,]+\)$")  # the Train page's step metric, in English


@dataclass
class Session:
    """One browser tab's worth of Streamlit protocol on one websocket."""

    url: str
    lang: str = "en"
    ws: object = None
    pages: dict[str, str] = field(default_factory=dict)   # url path ("" for Home) -> page_script_hash
    page: str = ""                                         # the url path now shown
    query: str = ""
    widgets: dict[str, str] = field(default_factory=dict)  # key -> widget id, on the page now shown
    metrics: list[tuple[str, str]] = field(default_factory=list)  # (label, value) of the metrics drawn
    texts: list[tuple[str, str]] = field(default_factory=list)    # (kind, text) of the alerts and markdown drawn
    disabled: dict[str, bool] = field(default_factory=dict)       # key -> drawn disabled, on the page now shown
    errors: list[str] = field(default_factory=list)        # exceptions the page showed
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    auto: dict[str, float] = field(default_factory=dict)   # fragment id -> seconds between its reruns
    address: str = ""                                      # the query string the server last wrote
    reader: asyncio.Task | None = None

    async def open(self, path: str = "", query: str = "") -> float:
        self.ws = await websockets.connect(self.url.replace("http", "ws", 1) + "/_stcore/stream",
                                           subprotocols=["streamlit"], max_size=None, open_timeout=600,
                                           ping_interval=None)
        self.reader = asyncio.create_task(self._read())
        return await self.go(path, query)

    async def close(self) -> None:
        if self.reader:
            self.reader.cancel()
        if self.ws:
            await self.ws.close()

    async def go(self, path: str, query: str = "") -> float:
        """Open a page (as its sidebar link does); seconds until its script finished."""
        self.page, self.query, self.widgets = path, f"{query}&lang={self.lang}".lstrip("&"), {}
        self.disabled = {}
        return await self.rerun([])

    async def set(self, key: str, **value) -> float:
        """Change one widget (by its key's start), e.g. set("temperature", double_array_value=[0.9])."""
        state = WidgetState(id=self.widget(key))
        for name, v in value.items():
            target = getattr(state, name)
            if isinstance(v, list):
                target.data.extend(v)
            else:
                setattr(state, name, v)
        return await self.rerun([state])

    async def click(self, key: str) -> float:
        return await self.set(key, trigger_value=True)

    def widget(self, key: str) -> str:
        found = [wid for k, wid in self.widgets.items() if k == key or k.startswith(key + ":")]
        if not found:
            raise LookupError(f"no widget {key!r} on {self.page or 'Home'}: {sorted(self.widgets)}")
        return found[0]

    async def rerun(self, states: list[WidgetState], fragment: str = "") -> float:
        """A rerun with these widgets changed (a fragment's alone if named, as its timer asks); seconds
        until the script finished."""
        message = BackMsg()
        self.metrics.clear()  # what this rerun draws, and only that, is read after it
        self.texts.clear()
        rerun = message.rerun_script
        rerun.query_string = self.query
        rerun.page_script_hash = self.pages.get(self.page, "")
        rerun.page_name = self.page
        rerun.widget_states.widgets.extend(states)
        if fragment:
            rerun.fragment_id, rerun.is_auto_rerun = fragment, True
        self.finished.clear()  # set again by the reader when this rerun's script_finished arrives
        started = time.perf_counter()
        await self.ws.send(message.SerializeToString())
        await self.finished.wait()
        return time.perf_counter() - started

    async def _read(self) -> None:
        async for data in self.ws:
            msg = ForwardMsg()
            msg.ParseFromString(data)
            kind = msg.WhichOneof("type")
            if kind == "navigation":  # the pages and their hashes: a rerun names its page by hash
                self.pages = {page.url_pathname: page.page_script_hash for page in msg.navigation.app_pages}
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                name = element.WhichOneof("type")
                body = getattr(element, name)
                if name == "exception":
                    self.errors.append(f"{self.page}: {body.type}: {body.message}")
                elif name == "metric":
                    self.metrics.append((body.label, body.body))
                elif name == "alert":
                    self.texts.append((Alert.Format.Name(body.format).lower(), body.body))
                elif name == "markdown":
                    self.texts.append(("markdown", body.body))
                widget_id = getattr(body, "id", "")
                if isinstance(widget_id, str) and widget_id.startswith("$$ID-"):
                    key = widget_id.split("-", 2)[2]  # "$$ID-<hash>-<key>": the widget's user key
                    self.widgets[key] = widget_id
                    self.disabled[key] = bool(getattr(body, "disabled", False))
            elif kind == "delta" and msg.delta.WhichOneof("type") == "add_block":
                block = msg.delta.add_block  # a stateful block (tabs) is a widget too
                widget_id = block.tab_container.id if block.WhichOneof("type") == "tab_container" else ""
                if widget_id.startswith("$$ID-"):
                    self.widgets[widget_id.split("-", 2)[2]] = widget_id
            elif kind == "new_session" and not msg.metadata.run.fragment_ids:
                self.auto.clear()  # a full run: the frontend drops every timer, the run sets its own again
            elif kind == "auto_rerun":
                self.auto[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
            elif kind == "stop_auto_rerun":
                for fragment in msg.stop_auto_rerun.fragment_ids:
                    self.auto.pop(fragment, None)
            elif kind == "page_info_changed":
                self.address = msg.page_info_changed.query_string
            elif kind == "script_finished" and msg.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                self.finished.set()  # a run that st.rerun() cut short is followed by the one the learner waits for

    def step(self) -> int | None:
        """The run's step, from the Train page's metric last drawn."""
        for label, value in reversed(self.metrics):
            if STEP_LABEL.match(label):
                return int(value.replace(",", ""))
        return None
