"""A class on one server: learners' sessions speaking Streamlit's own protocol, beside runs training.

Each session is one websocket that says what a browser says (BackMsg.rerun_script: the page,
the address's query string, the widgets that changed) and reads what the server sends back
(ForwardMsg deltas) until its script_finished, exactly as the frontend waits. A widget is found
by its key, the end of its element id. One Python process plays thirty such sessions for the CPU
of a few (it prints its own CPU time), so a class fits beside the server on this box: with
`--cpus 0` the server runs in a control group on core 0 and the bench is pinned to the others.

Two runs train throughout, each started and watched by a session of its own on Train (which
keeps them from being released as abandoned, and reruns the live fragment as a browser does).
Their steps per second are read off the Train page's step metric, during the scenario and then
"alone": the same sessions start their runs again, with the same settings, and the new runs train
with nobody else on the server for as long; each speed is taken over the same stretch of time
since its run started (a run slows as its live chart's history grows, so this is the fair match).

Scenarios:
    steady  N learners, each one action about every 10 s (a page from the sidebar, a slider,
            40 characters generated, Attention opened, a lesson step), for --minutes;
    burst   N learners press Generate or open Attention at the same instant, --bursts times;
    one     a single learner doing the steady mix.

    python -m bench.class_load --scenario steady --learners 30 --minutes 5 --memory-mb 690 --cpus 0
    python -m bench.class_load --scenario burst --learners 10 --memory-mb 690 --cpus 0 --before ../old

--before CHECKOUT serves another checkout of the app in turn, after this one, the same way, for a
before/after in one run. It reports p50 and p95 per action, errors, each run's steps/s alone and
during, the server's CPU seconds, its RSS at the end and peak, and the control group's peak memory
and OOM kills. It asserts nothing.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import resource
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from app.train_form import EARLY_STOP, RANGES
from bench.common import print_header, print_table
from bench.live_server import APP_DIR, Box, LiveServer, percentile

STEP_LABEL = re.compile(r"^Step \(of [\d,]+\)$")  # the Train page's step metric, in English
ACTIONS = ("open a page", "move a slider", "generate 40 characters", "open Attention", "take a lesson step")
SIDEBAR = ("", "Generate", "Inside", "Model", "Glossary", "Scaling")  # url paths: Home, then pages
TRAIN_STEPS = RANGES["max_steps"][1]  # the most the Train form takes: the runs train for the whole bench


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
        return await self._rerun([])

    async def set(self, key: str, **value) -> float:
        """Change one widget (by its key's start), e.g. set("temperature", double_array_value=[0.9])."""
        state = WidgetState(id=self.widget(key))
        for name, v in value.items():
            target = getattr(state, name)
            if isinstance(v, list):
                target.data.extend(v)
            else:
                setattr(state, name, v)
        return await self._rerun([state])

    async def click(self, key: str) -> float:
        return await self.set(key, trigger_value=True)

    def widget(self, key: str) -> str:
        found = [wid for k, wid in self.widgets.items() if k == key or k.startswith(key + ":")]
        if not found:
            raise LookupError(f"no widget {key!r} on {self.page or 'Home'}: {sorted(self.widgets)}")
        return found[0]

    async def _rerun(self, states: list[WidgetState], fragment: str = "") -> float:
        message = BackMsg()
        rerun = message.rerun_script
        rerun.query_string = self.query
        rerun.page_script_hash = self.pages.get(self.page, "")
        rerun.page_name = self.page
        rerun.widget_states.widgets.extend(states)
        if fragment:
            rerun.fragment_id, rerun.is_auto_rerun = fragment, True
        self.finished.clear()
        started = time.perf_counter()
        await self.ws.send(message.SerializeToString())
        await self.finished.wait()
        return time.perf_counter() - started

    async def _read(self) -> None:
        async for data in self.ws:
            msg = ForwardMsg()
            msg.ParseFromString(data)
            kind = msg.WhichOneof("type")
            if kind == "navigation":
                self.pages = {page.url_pathname: page.page_script_hash for page in msg.navigation.app_pages}
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                name = element.WhichOneof("type")
                body = getattr(element, name)
                if name == "exception":
                    self.errors.append(f"{self.page}: {body.type}: {body.message}")
                elif name == "metric":
                    self.metrics.append((body.label, body.body))
                widget_id = getattr(body, "id", "")
                if isinstance(widget_id, str) and widget_id.startswith("$$ID-"):
                    self.widgets[widget_id.split("-", 2)[2]] = widget_id
            elif kind == "auto_rerun":
                self.auto[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
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


class Trainer:
    """A session that starts a run on Train and watches it, rerunning the live fragment as a
    browser does; its step, read off the page, over time."""

    def __init__(self, url: str):
        self.session = Session(url)
        self.samples: list[tuple[float, int]] = []
        self.task: asyncio.Task | None = None

    async def start(self) -> None:
        s = self.session
        await s.open("Train")
        await s.set("max_steps", int_value=TRAIN_STEPS)
        await s.set(EARLY_STOP, bool_value=False)  # else a run stops when its val loss stalls, long before the end
        await s.click("start")
        self.task = asyncio.create_task(self._watch())

    async def restart(self) -> float:
        """Start again: a new run with the same settings replaces this session's run. Returns the
        moment it started."""
        await self.session.click("start")
        return time.monotonic()

    async def _watch(self) -> None:
        s = self.session
        while True:
            await asyncio.sleep(min(s.auto.values(), default=2.0))
            fragment = next(iter(s.auto), "")
            s.metrics.clear()
            await s._rerun([], fragment=fragment)
            if (step := s.step()) is not None:
                self.samples.append((time.monotonic(), step))

    def speed(self, since: float, until: float) -> float | None:
        """Steps per second between two moments, from the samples around them."""
        inside = [(t, s) for t, s in self.samples if since <= t <= until]
        if len(inside) < 2 or inside[-1][0] == inside[0][0]:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
        await self.session.close()


async def act(session: Session, action: str, rng: random.Random) -> float:
    """One action of a learner's mix; seconds the learner waited."""
    if action == "open a page":
        return await session.go(rng.choice([p for p in SIDEBAR if p != session.page]))
    if action == "move a slider":
        if session.page != "Generate":
            await session.go("Generate")
        return await session.set("temperature", double_array_value=[round(rng.uniform(0.2, 1.6), 2)])
    if action == "generate 40 characters":
        if session.page != "Generate":
            await session.go("Generate")
        await session.set("max_new_tokens", int_value=40)
        return await session.click("generate")
    if action == "open Attention":
        if session.page == "Attention":
            await session.go("")
        return await session.go("Attention")
    if action == "take a lesson step":
        if session.page != "Lesson":
            await session.go("Lesson", f"lesson={rng.randint(1, 14)}")
        return await session.click("lesson_next")
    raise ValueError(action)


async def learner(url: str, seed: int, until: float, waits: dict, errors: list, period: float) -> None:
    rng = random.Random(seed)
    session = Session(url)
    waits["open Home"].append(await session.open())
    await asyncio.sleep(rng.uniform(0, period))  # a class does not click in step
    while time.monotonic() < until:
        action = rng.choice(ACTIONS)
        try:
            waits[action].append(await act(session, action, rng))
        except LookupError as missing:
            errors.append(str(missing))
        await asyncio.sleep(rng.uniform(0.5, 1.5) * period)
    errors.extend(session.errors)
    await session.close()


async def burst(url: str, learners: int, rounds: int, waits: dict, errors: list) -> None:
    """Everyone ready on Generate (half) or elsewhere (half, to open Attention); then all at once."""
    sessions = [Session(url) for _ in range(learners)]
    for s in sessions:
        await s.open("Generate")
        await s.set("max_new_tokens", int_value=40)
    for _ in range(rounds):
        jobs = []
        for i, s in enumerate(sessions):
            if i % 2:
                await s.go("")
                jobs.append(("burst: open Attention", s.go("Attention")))
            else:
                if s.page != "Generate":
                    await s.go("Generate")
                jobs.append(("burst: generate 40 characters", s.click("generate")))
        done = await asyncio.gather(*(job for _, job in jobs))
        for (name, _), seconds in zip(jobs, done):
            waits[name].append(seconds)
    for s in sessions:
        errors.extend(s.errors)
        await s.close()


async def play(url: str, args) -> tuple[dict, list, list[tuple[float | None, float | None]]]:
    waits, errors = defaultdict(list), []
    trainers = [Trainer(url) for _ in range(args.training_runs)]
    for t in trainers:
        await t.start()
    started = time.monotonic()
    await asyncio.sleep(args.warmup)  # the runs' first steps, before learners come
    t1 = time.monotonic()
    if args.scenario == "burst":
        await burst(url, args.learners, args.bursts, waits, errors)
    else:
        count = 1 if args.scenario == "one" else args.learners
        until = time.monotonic() + args.minutes * 60
        await asyncio.gather(*(learner(url, seed, until, waits, errors, args.period) for seed in range(count)))
    t2 = time.monotonic()
    during = [t.speed(t1, t2) for t in trainers]
    again = [await t.restart() for t in trainers]  # the same runs again, with nobody else on the server
    await asyncio.sleep(t2 - started + 3)
    alone = [t.speed(s + (t1 - started), s + (t2 - started)) for t, s in zip(trainers, again)]
    speeds = list(zip(alone, during))
    for t in trainers:
        errors.extend(t.session.errors)
        await t.stop()
    return waits, errors, speeds


def _sample_anon(box: Box, into: list[float], done: threading.Event) -> None:
    while not done.wait(0.5):
        into.append(box.anon_mb() or 0)


def serve_and_play(app_dir: Path, args, env: dict[str, str]) -> dict:
    env = {"MINIGPT_MAX_RUNS": str(max(2, args.training_runs)), **env}
    with Box(args.memory_mb, args.cpus) as box, LiveServer(env, box=box, app_dir=app_dir) as server:
        cpu0 = server.cpu_seconds()
        anon, done = [], threading.Event()
        sampler = threading.Thread(target=_sample_anon, args=(box, anon, done))
        sampler.start()
        try:
            waits, errors, speeds = asyncio.run(play(server.url, args))
        finally:
            done.set()
            sampler.join()
        return {"waits": waits, "errors": errors, "speeds": speeds, "server_cpu": server.cpu_seconds() - cpu0,
                "rss": server.rss_mb(), "children_rss": server.children_rss_mb(), "peak_rss": server.peak_rss_mb(), "box_peak": box.peak_mb(), "anon_peak": max(anon, default=0),
                "oom": box.oom_kills(), "alive": server.proc.poll() is None}


def report(name: str, result: dict) -> None:
    print(f"\n## {name}\n")
    rows = []
    for action, waits in sorted(result["waits"].items()):
        rows.append([action, len(waits), f"{percentile(waits, 50):.2f}", f"{percentile(waits, 95):.2f}",
                     f"{max(waits):.2f}"])
    print_table(["action", "n", "p50 s", "p95 s", "max s"], rows)
    for i, (alone, during) in enumerate(result["speeds"]):
        said = "–" if not alone or during is None else f"{during / alone:.2f}"
        print(f"run {i + 1}: {alone or 0:.1f} steps/s alone, {during or 0:.1f} during (× {said})")
    print(f"server CPU {result['server_cpu']:.0f} s; RSS {result['rss']:.0f} MB at the end, peak {result['peak_rss']:.0f} MB"
          f" (its child processes, summed, {result['children_rss']:.0f} MB at the end);"
          f" control group peak {result['box_peak'] or 0:.0f} MB (its anonymous memory's peak, sampled every 0.5 s,"
          f" {result['anon_peak']:.0f} MB; the rest is page cache), OOM kills {result['oom']}; "
          f"server {'alive' if result['alive'] else 'DEAD'}")
    if result["errors"]:
        print(f"{len(result['errors'])} errors, first: {result['errors'][:3]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=("steady", "burst", "one"), default="steady")
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=5.0, help="how long the steady scenario runs")
    parser.add_argument("--period", type=float, default=10.0, help="seconds between a learner's actions, on average")
    parser.add_argument("--bursts", type=int, default=3, help="rounds of the burst scenario")
    parser.add_argument("--training-runs", type=int, default=2)
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds the runs train before learners come")
    parser.add_argument("--memory-mb", type=int, default=None)
    parser.add_argument("--cpus", default=None, help='the server\'s cores, e.g. "0"; the bench takes the others')
    parser.add_argument("--before", type=Path, default=None, help="another checkout, served after this one")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for this checkout's server; repeat --env-b for a second "
                             "serving of this checkout with other settings")
    parser.add_argument("--env-b", action="append", default=None, metavar="NAME=VALUE",
                        help="serve this checkout a second time with these variables instead (e.g. "
                             "MINIGPT_TRAIN_NICE=0), in turn")
    args = parser.parse_args()
    print_header(f"A class on one server: {args.scenario}")
    if args.cpus:  # the bench's own work stays off the server's cores
        served = {int(c) for c in args.cpus.split(",")}
        others = set(range(os.cpu_count() or 1)) - served
        if others:
            os.sched_setaffinity(0, others)
    def variables(pairs: list[str]) -> dict[str, str]:
        return dict(pair.split("=", 1) for pair in pairs)

    servings = [(f"this checkout {' '.join(args.env)}".strip(), APP_DIR, variables(args.env))]
    if args.env_b is not None:
        servings.append((f"this checkout {' '.join(args.env_b)}".strip(), APP_DIR, variables(args.env_b)))
    if args.before:
        servings.append(("before", args.before.resolve(), {}))
    for name, app_dir, env in servings:
        before = resource.getrusage(resource.RUSAGE_SELF)
        result = serve_and_play(app_dir, args, env)
        after = resource.getrusage(resource.RUSAGE_SELF)
        report(f"{name} ({app_dir.name})", result)
        print(f"the bench's own CPU: {after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime:.1f} s")


if __name__ == "__main__":
    main()
