"""A class on one server: learners' sessions speaking Streamlit's own protocol, beside runs training.

Each session is one websocket that says what a browser says (BackMsg.rerun_script: the page,
the address's query string, the widgets that changed) and reads what the server sends back
(ForwardMsg deltas) until its script_finished, exactly as the frontend waits. A widget is found
by its key, the end of its element id. One Python process plays thirty such sessions for the CPU
of a few (it prints its own CPU time), so a class fits beside the server on this box: with
`--cpus 0` the server runs in a control group on core 0 and the bench is pinned to the others
(with `--cpus 0,1` on a 2-core box there are no others: the bench shares the server's cores).

Except in `train`, two runs train throughout, each started and watched by a session of its own on
Train (which keeps them from being released as abandoned, and reruns the live fragment as a
browser does).
Their steps per second are read off the Train page's step metric, during the scenario and then
"alone": the same sessions start their runs again, with the same settings, and the new runs train
with nobody else on the server for as long; each speed is taken over the same stretch of time
since its run started (a run slows as its live chart's history grows, so this is the fair match).

Scenarios:
    steady  N learners, each one action about every 10 s (a page from the sidebar, a slider,
            40 characters generated, Attention opened, a lesson step), for --minutes;
    burst   N learners press Generate or open Attention at the same instant, --bursts times;
    one     a single learner doing the steady mix;
    train   a class trains: N learners open the teacher's ?train= link (the default preset, 300 steps,
            early stopping off) and press Start over --spread seconds; each tab then reruns the live
            fragment as the server's timer says, so waiting runs keep their place and start by
            themselves; --others learners do the steady mix until every run has ended. No runs beside
            them, and the server's own number of slots. Reported: who was refused (an st.error, or
            Start drawn disabled), each run's wait, the place and estimated start read off the page at
            every look against the real start (first as 1st or 2nd in line), the time from the first
            Start to the last run's end, and the class's steps/s against the bare loop's
            (bench.bare_loop) on the same cores, one process per core at once, before and after.

    python -m bench.class_load --scenario steady --learners 30 --minutes 5 --memory-mb 690 --cpus 0
    python -m bench.class_load --scenario burst --learners 10 --memory-mb 690 --cpus 0 --before ../old
    python -m bench.class_load --scenario train --learners 30 --memory-mb 690 --cpus 0 --before ../old

--before CHECKOUT serves another checkout of the app in turn, after this one, the same way, for a
before/after in one run. It reports p50 and p95 per action, errors, each run's steps/s alone and
during, the server's CPU seconds, its RSS at the end and peak, and the control group's peak memory
and OOM kills. It asserts nothing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from app.parts.train_form import EARLY_STOP, RANGES, to_param
from app.chrome.url import TRAIN as TRAIN_PARAM
from bench.common import EMPTY, WAIT_HEADERS, cpu_seconds, percentile, print_header, print_table, wait_row
from bench.live_server import APP_DIR, Box, LiveServer
from bench.session import STEP_LABEL, Session
from minigpt import DEFAULT_CORPUS, DEFAULT_PRESET, PRESETS

PLACE = re.compile(r"\*\*(\d+)(?:st|nd|rd|th) in line\*\*: (.*)", re.S)  # app/parts/line.py's place_text
WAIT = re.compile(r"it starts in about ((?:\d+ (?:h|min|s) ?)+)")
DURATION_PART = re.compile(r"(\d+) (h|min|s)\b")
UNITS = {"h": 3600, "min": 60, "s": 1}
SLOTS = re.compile(r"(\d+) training slots? on this server")                # app/parts/line.py's server_line
SLOTS_BEFORE = re.compile(r"\d+ of (\d+) training slots in use on this server")  # the Train page before the line
ENDED = ("finished", "stopped", "error")
CHALLENGE_STEPS = 300  # the class challenge: the default preset for 300 steps, early stopping off
ACTIONS = ("open a page", "move a slider", "generate 40 characters", "open Attention", "take a lesson step")
SIDEBAR = ("", "Generate", "Inside", "Model", "Glossary", "Scaling")  # url paths: Home, then pages
TRAIN_STEPS = RANGES["max_steps"][1]  # the most the Train form takes: the runs train for the whole bench


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
        await s.set("max_steps", int_value=TRAIN_STEPS)  # the form's most: the run outlasts the bench
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
            await asyncio.sleep(min(s.auto.values(), default=2.0))  # the live view's own timer, as a tab keeps it
            fragment = next(iter(s.auto), "")
            await s.rerun([], fragment=fragment)
            if (step := s.step()) is not None:
                self.samples.append((time.monotonic(), step))

    def speed(self, since: float, until: float) -> float | None:
        """Steps per second between two moments, from the samples around them."""
        inside = [(t, s) for t, s in self.samples if since <= t <= until]
        if len(inside) < 2 or inside[-1][0] == inside[0][0]:  # one sample, or two at once: no speed to tell
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
        await self.session.close()


async def act(session: Session, action: str, rng: random.Random) -> float:
    """One action of a learner's mix; seconds the learner waited."""
    if action == "open a page":
        # another page: the same one would not rerun
        return await session.go(rng.choice([p for p in SIDEBAR if p != session.page]))
    if action == "move a slider":
        if session.page != "Generate":
            await session.go("Generate")
        # the slider's range
        return await session.set("temperature", double_array_value=[round(rng.uniform(0.2, 1.6), 2)])
    if action == "generate 40 characters":
        if session.page != "Generate":
            await session.go("Generate")
        await session.set("max_new_tokens", int_value=40)
        return await session.click("generate")
    if action == "open Attention":
        if session.page == "Attention":  # away and back: Attention computes only when opened
            await session.go("")
        return await session.go("Attention")
    if action == "take a lesson step":
        if session.page != "Lesson":
            await session.go("Lesson", f"lesson={rng.randint(1, 14)}")  # any step with a Next after it
        return await session.click("lesson_next")
    raise ValueError(action)


async def rest(done: asyncio.Event, seconds: float) -> None:
    """Wait `seconds`, or until `done` is set."""
    try:
        await asyncio.wait_for(done.wait(), seconds)
    except asyncio.TimeoutError:
        pass


async def learner(url: str, seed: int, done: asyncio.Event, waits: dict, errors: list, period: float) -> None:
    """The steady mix, one action about every `period` seconds, until `done` is set."""
    rng = random.Random(seed)
    session = Session(url)
    waits["open Home"].append(await session.open())
    await rest(done, rng.uniform(0, period))  # a class does not click in step
    while not done.is_set():
        action = rng.choice(ACTIONS)
        try:
            waits[action].append(await act(session, action, rng))
        except LookupError as missing:  # a widget the page did not draw: counted, the learner goes on
            errors.append(str(missing))
        await rest(done, rng.uniform(0.5, 1.5) * period)  # about every period, never in lockstep
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
            if i % 2:  # half open Attention, half generate: the two heaviest waits
                await s.go("")
                jobs.append(("burst: open Attention", s.go("Attention")))
            else:
                if s.page != "Generate":
                    await s.go("Generate")
                jobs.append(("burst: generate 40 characters", s.click("generate")))
        done = await asyncio.gather(*(job for _, job in jobs))  # all at once: the burst
        for (name, _), seconds in zip(jobs, done):
            waits[name].append(seconds)
    for s in sessions:
        errors.extend(s.errors)
        await s.close()


# ---------------------------------------------------------------- train: a class trains together
@dataclass
class Look:
    """What one rerun of a class learner's Train page showed."""

    sent: float                # time.monotonic() when the rerun was asked for
    at: float                  # ... and when its script had finished
    place: int | None = None   # "3rd in line"
    wait: float | None = None  # "it starts in about 2 min 05 s", seconds after `at`
    rough: bool = False
    state: str | None = None   # the State metric, or waiting/starting from the line's info
    step: int | None = None


def read_look(session: Session, sent: float) -> Look:
    """The place, estimate, state and step in what the session's last rerun drew."""
    look = Look(sent, time.monotonic())
    for kind, text in session.texts:
        if (found := PLACE.search(text)) is not None:
            # the line's own words
            look.place, look.state, look.rough = int(found[1]), "waiting", "rough estimate" in text
            if (when := WAIT.search(found[2])) is not None:
                # "2 min 05 s" in seconds
                look.wait = sum(int(n) * UNITS[unit] for n, unit in DURATION_PART.findall(when[1]))
        elif "Your turn has come" in text:
            look.state = "starting"
    for label, value in session.metrics:
        if label == "State":
            look.state = value
        elif STEP_LABEL.match(label):
            look.step = int(value.replace(",", ""))
    return look


def slots_shown(session: Session) -> int | None:
    """The server's training slots, from the Train page's caption (this checkout's or the older one's)."""
    for _kind, text in session.texts:
        if (found := SLOTS.search(text)) is not None:
            return int(found[1])
        if (found := SLOTS_BEFORE.search(text)) is not None:
            return int(found[1])
    return None


def challenge_query() -> str:
    """The teacher's ?train= link: the default preset, CHALLENGE_STEPS steps, early stopping off."""
    preset = PRESETS[DEFAULT_PRESET]
    train = replace(preset.train, max_steps=CHALLENGE_STEPS, early_stop_patience=0)
    return f"{TRAIN_PARAM}={to_param(preset.model, train)}"


class ClassLearner:
    """A learner of the class challenge: opens the teacher's link on Train, presses Start, then keeps
    the tab open, rerunning the live fragment whenever the server's timer says, until the run ends."""

    def __init__(self, url: str):
        self.session = Session(url)
        self.looks: list[Look] = []
        self.refused: str | None = None
        self.said: list[str] = []      # the errors and notes the page showed right after Start
        self.slots: int | None = None
        self.pressed = self.started = self.ended_at = None
        self.ended: str | None = None  # finished, error, stopped; lost (no run on the page), gave up
        self.unpolled = 0              # reruns the bench asked for with no timer from the server

    async def open(self, query: str) -> float:
        seconds = await self.session.open("Train", query)
        self.slots = slots_shown(self.session)
        return seconds

    async def press(self) -> None:
        s = self.session
        if s.disabled.get("start"):  # the page said no before the press: full, or already training
            self.refused = "Start disabled"
            return
        self.pressed = time.monotonic()
        try:
            await s.click("start")
        except LookupError:
            self.refused = "no Start button"
            return
        look = read_look(s, self.pressed)
        self.said = [text for kind, text in s.texts if kind in ("error", "info")]  # what the learner read after Start
        if any(kind == "error" for kind, _text in s.texts):
            self.refused = "st.error"
        elif look.state is None:  # the press redrew the page with Start disabled, and no run
            self.refused = "Start disabled" if s.disabled.get("start") else "no run on the page"
        else:
            self._seen(look)

    async def follow(self, deadline: float) -> None:
        s = self.session
        due = time.monotonic()
        while self.ended is None:
            live = min(s.auto, key=s.auto.get, default=None)  # the live view's fragment: the shortest timer
            interval = s.auto[live] if live is not None else 2.0
            due = max(due + interval, time.monotonic()) if live is not None else time.monotonic() + interval
            await asyncio.sleep(due - time.monotonic())
            if time.monotonic() > deadline:
                self.ended = "gave up"
                break
            self.unpolled += live is None  # no timer from the server: the bench reruns on its own, and says how often
            sent = time.monotonic()
            await s.rerun([], fragment=live or "")
            if s.address:
                s.query = s.address  # what the address bar holds now, as a browser sends it
            self._seen(read_look(s, sent))

    def _seen(self, look: Look) -> None:
        before = self.looks[-1] if self.looks else None
        self.looks.append(look)
        since = before.at if before is not None else look.sent
        if self.started is None and (look.step is not None or look.state in ENDED):
            self.started = (since + look.at) / 2  # between the last look without a step and the first with one
        if look.state in ENDED:
            self.ended, self.ended_at = look.state, (since + look.at) / 2
        elif look.state is None and len(self.looks) >= 3 and all(k.state is None for k in self.looks[-3:]):
            self.ended = "lost"  # three looks without a run on the page

    @property
    def steps(self) -> int:
        return max((look.step or 0 for look in self.looks), default=0)

    def estimate_error(self, near: int | None = None) -> tuple[float, float, float] | None:
        """(shown, real, relative error) of the start estimate shown first at a place <= near (any
        place when None): shown and real are seconds from that look to the run's start."""
        if self.started is None:
            return None
        for look in self.looks:
            if look.place is not None and look.wait is not None and (near is None or look.place <= near):
                real = self.started - look.at
                return look.wait, real, (look.wait - real) / real if real > 0 else float("inf")
        return None


async def class_trains(url: str, args, waits: dict, errors: list) -> dict:
    """N learners open the challenge's link and press Start over --spread seconds; M others do the
    steady mix until every run that started has ended."""
    query = challenge_query()
    pupils = [ClassLearner(url) for _ in range(args.learners)]
    drained = asyncio.Event()
    others = [asyncio.create_task(learner(url, 1000 + seed, drained, waits, errors, args.period))
              for seed in range(args.others)]
    for pupil, seconds in zip(pupils, await asyncio.gather(*(p.open(query) for p in pupils))):
        waits["class: open Train by the link"].append(seconds)
    first = time.monotonic() + 1.0
    gap = args.spread / max(1, args.learners - 1)
    deadline = first + args.give_up * 60

    async def one(pupil: ClassLearner, at: float) -> None:
        await asyncio.sleep(max(0.0, at - time.monotonic()))
        await pupil.press()
        if pupil.refused is None:
            await pupil.follow(deadline)

    await asyncio.gather(*(one(p, first + i * gap) for i, p in enumerate(pupils)))
    drained.set()
    await asyncio.gather(*others)
    for pupil in pupils:
        errors.extend(pupil.session.errors)
        await pupil.session.close()
    return {"pupils": pupils, "first": min((p.pressed for p in pupils if p.pressed), default=first),
            "spread": args.spread}


async def play(url: str, args) -> tuple[dict, list, list[tuple[float | None, float | None]], dict]:
    waits, errors = defaultdict(list), []
    if args.scenario == "train":  # the class's own runs are all the training
        return waits, errors, [], await class_trains(url, args, waits, errors)
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
        done = asyncio.Event()
        asyncio.get_running_loop().call_later(args.minutes * 60, done.set)
        await asyncio.gather(*(learner(url, seed, done, waits, errors, args.period) for seed in range(count)))
    t2 = time.monotonic()
    during = [t.speed(t1, t2) for t in trainers]
    again = [await t.restart() for t in trainers]  # the same runs again, with nobody else on the server
    await asyncio.sleep(t2 - started + 3)
    alone = [t.speed(s + (t1 - started), s + (t2 - started)) for t, s in zip(trainers, again)]
    speeds = list(zip(alone, during))
    for t in trainers:
        errors.extend(t.session.errors)
        await t.stop()
    return waits, errors, speeds, {}


def _sample_anon(box: Box, into: list[float], done: threading.Event) -> None:
    while not done.wait(0.5):
        into.append(box.anon_mb() or 0)


def core_jiffies() -> dict[int, tuple[int, int]]:
    """Each core's (busy, total) clock ticks since boot, from /proc/stat."""
    ticks = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            counts = [int(v) for v in values[:8]]  # user nice system idle iowait irq softirq steal
            ticks[int(name[3:])] = (sum(counts) - counts[3] - counts[4], sum(counts))
    return ticks


def tree_cpu_seconds(server: LiveServer) -> float:
    """CPU seconds of the server and every process under it, those that ended and were waited for
    included (a run's process is counted in its fork server's children's time)."""
    return cpu_seconds([server.proc.pid, *server.descendants()], children=True)


def log_problems(log: Path) -> list[str]:
    """The server log's lines that tell of an exception or an error, each once, in order."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    found = [line.strip() for line in lines if re.search(r"Traceback|Error|Exception|Killed", line)]
    return list(dict.fromkeys(found))


def serve_and_play(app_dir: Path, args, env: dict[str, str]) -> dict:
    if args.scenario != "train":  # a class's runs get the slots the server gives itself
        env = {"MINIGPT_MAX_RUNS": str(max(2, args.training_runs)), **env}
    with Box(args.memory_mb, args.cpus) as box, LiveServer(env, box=box, app_dir=app_dir) as server:
        cpu0, tree0, ticks0, load0 = server.cpu_seconds(), tree_cpu_seconds(server), core_jiffies(), os.getloadavg()
        own0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        anon, done = [], threading.Event()
        sampler = threading.Thread(target=_sample_anon, args=(box, anon, done))
        sampler.start()
        try:
            waits, errors, speeds, extra = asyncio.run(play(server.url, args))
        finally:
            done.set()
            sampler.join()
        own, ticks = resource.getrusage(resource.RUSAGE_SELF), core_jiffies()
        machine = {"seconds": time.monotonic() - wall0, "load": (load0, os.getloadavg()),
                   "busy": {c: (ticks[c][0] - ticks0[c][0]) / max(1, ticks[c][1] - ticks0[c][1]) for c in ticks},
                   "tree_cpu": tree_cpu_seconds(server) - tree0,
                   "bench_cpu": own.ru_utime + own.ru_stime - own0.ru_utime - own0.ru_stime}
        result = {"waits": waits, "errors": errors, "speeds": speeds, "server_cpu": server.cpu_seconds() - cpu0,
                  "rss": server.rss_mb(), "children_rss": server.children_rss_mb(), "peak_rss": server.peak_rss_mb(),
                  "box_peak": box.peak_mb(), "anon_peak": max(anon, default=0), "oom": box.oom_kills(),
                  "alive": server.proc.poll() is None, "machine": machine, **extra}
    result["log"], result["log_problems"] = server.log, log_problems(server.log)
    return result


def seconds(value: float | None, spec: str = ".0f") -> str:
    return EMPTY if value is None else format(value, spec)


def class_summary(result: dict, bare: float | None) -> dict:
    """The class's figures: refusals, waits, the estimates against the real starts, the time to the
    last run's end and the training throughput against the bare loop's on the same cores."""
    pupils, first = result["pupils"], result["first"]
    ran = [p for p in pupils if p.refused is None]
    ran_not = [p for p in pupils if p.refused is not None]
    started = [p.started - p.pressed for p in ran if p.started is not None]
    near = [e for e in (p.estimate_error(2) for p in ran) if e is not None]
    every = [(look.wait - (p.started - look.at)) / (p.started - look.at) for p in ran if p.started is not None
             for look in p.looks if look.wait is not None and p.started - look.at > 0]
    ends = [p.ended_at for p in ran if p.ended_at is not None and p.ended == "finished"]
    span = max(ends) - first if ends else None
    steps = sum(p.steps for p in ran)
    gaps = [b.at - a.at for p in ran for a, b in zip(p.looks, p.looks[1:])]
    zero = [(p, look) for p in ran if p.started is not None for look in p.looks
            if look.wait == 0 and p.started - look.at >= 5]
    return {"learners": len(pupils), "slots": next((p.slots for p in pupils if p.slots), None),
            "refused": len(pupils) - len(ran),
            "how": ", ".join(f"{n} {why}" for why, n in sorted(Counter(p.refused for p in ran_not).items())),
            "followed": len(ran), "finished": len(ends), "ended": sorted({p.ended or EMPTY for p in ran}),
            "start_p50": percentile(started, 50) if started else None, "start_max": max(started, default=None),
            "near_n": len(near), "near_within": sum(abs(e) <= 0.25 for _s, _r, e in near),
            "near_p50": percentile([e for *_x, e in near], 50) if near else None,
            "near_abs_p95": percentile([abs(e) for *_x, e in near], 95) if near else None,
            "every_abs_p50": percentile([abs(e) for e in every], 50) if every else None,
            "span": span, "steps": steps, "throughput": steps / span if span else None, "bare": bare,
            "gap_p50": percentile(gaps, 50) if gaps else None, "gap_p95": percentile(gaps, 95) if gaps else None,
            "unpolled": sum(p.unpolled for p in ran), "zero_looks": len(zero),
            "zero_learners": len({id(p) for p, _look in zero})}


def report_class(result: dict, summary: dict) -> None:
    pupils, first = result["pupils"], result["first"]
    rows = []
    for i, p in enumerate(pupils):
        shown = next((look for look in p.looks if look.place is not None), None)
        near = p.estimate_error(2)
        rows.append([i + 1, seconds(p.pressed - first if p.pressed else None, ".1f"), p.refused or p.ended or EMPTY,
                     shown.place if shown else EMPTY, seconds(shown.wait if shown else None)
                     + ("~" if shown and shown.rough else ""),
                     seconds(near[0] if near else None), seconds(near[1] if near else None),
                     f"{near[2]:+.0%}" if near else EMPTY,
                     seconds(p.started - p.pressed if p.started is not None else None),
                     seconds(p.ended_at - p.started if p.ended_at is not None and p.started is not None else None),
                     p.steps if p.refused is None else EMPTY, len(p.looks)])
    print_table(["learner", "Start at s", "outcome", "1st place", "its estimate s", "estimate at <=2nd s",
                 "real then s", "error", "wait to start s", "start to end s", "steps", "looks"], rows)
    s = summary
    print(f"the link: ?{challenge_query()}")
    print(f"{s['learners']} learners pressed Start over {result.get('spread', 0):.0f} s; the page said "
          f"{s['slots']} training slot(s) on this server. Refused: {s['refused']} ({s['how'] or 'none'}); followed "
          f"{s['followed']}, finished {s['finished']} (ends: {', '.join(s['ended'])}).")
    print(f"wait from Start to the run's start: p50 {seconds(s['start_p50'])} s, max {seconds(s['start_max'])} s; "
          f"the page read every {seconds(s['gap_p50'], '.2f')} s (p95 {seconds(s['gap_p95'], '.2f')} s), so a start "
          f"or an end is known to half that; {s['unpolled']} reruns asked for with no timer from the server")
    print(f"the estimate shown when first 1st or 2nd in line, against the real start: {s['near_within']} of "
          f"{s['near_n']} within ±25% (goal: all), error p50 {seconds(s['near_p50'], '+.0%')}, |error| p95 "
          f"{seconds(s['near_abs_p95'], '.0%')}; over every look with an estimate, |error| p50 "
          f"{seconds(s['every_abs_p50'], '.0%')}; \"about 0 s\" shown {s['zero_looks']} times, to "
          f"{s['zero_learners']} learners, with the real start 5 s or more away")
    ratio = f"{s['throughput'] / s['bare']:.2f}" if s["throughput"] and s["bare"] else EMPTY
    print(f"first Start to the last run's end: {seconds(s['span'])} s; {s['steps']} steps trained, "
          f"{seconds(s['throughput'], '.1f')} steps/s against the bare loop's {seconds(s['bare'], '.1f')} on the same "
          f"cores (× {ratio})")


def other_cores(result: dict) -> float:
    """Cores' worth of work on the machine that was neither the server's nor this bench's, on average."""
    m = result["machine"]
    return max(0.0, sum(m["busy"].values()) - (m["tree_cpu"] + m["bench_cpu"]) / m["seconds"])


def report_machine(result: dict) -> None:
    m = result["machine"]
    busy = ", ".join(f"core {c} {b:.0%}" for c, b in sorted(m["busy"].items()))
    cores = sum(m["busy"].values())
    rest = cores * m["seconds"] - m["tree_cpu"] - m["bench_cpu"]
    print(f"the machine over the {m['seconds']:.0f} s served: {busy} busy; the server and its processes "
          f"{m['tree_cpu']:.0f} CPU s, this bench {m['bench_cpu']:.0f} s, other work {max(0.0, rest):.0f} s "
          f"({other_cores(result):.2f} of a core); load average {m['load'][0][0]:.1f} -> {m['load'][1][0]:.1f}")
    problems = result["log_problems"]
    print(f"server log {result['log']}: {len(problems)} distinct lines telling of an error"
          + (":\n  " + "\n  ".join(problems[:8]) if problems else ""))


def report(name: str, result: dict, summary: dict | None = None) -> None:
    print(f"\n## {name}\n")
    if summary is not None:
        report_class(result, summary)
        print("\nthe other learners' steady mix while the line drained:")
    print_table(["action", *WAIT_HEADERS],
                [wait_row(action, waits) for action, waits in sorted(result["waits"].items())])
    for i, (alone, during) in enumerate(result["speeds"]):
        said = EMPTY if not alone or during is None else f"{during / alone:.2f}"
        print(f"run {i + 1}: {alone or 0:.1f} steps/s alone, {during or 0:.1f} during (× {said})")
    print(f"server CPU {result['server_cpu']:.0f} s; RSS {result['rss']:.0f} MB at the end, peak {result['peak_rss']:.0f} MB"
          f" (its child processes, summed, {result['children_rss']:.0f} MB at the end);"
          f" control group peak {result['box_peak'] or 0:.0f} MB (its anonymous memory's peak, sampled every 0.5 s,"
          f" {result['anon_peak']:.0f} MB; the rest is page cache), OOM kills {result['oom']}; "
          f"server {'alive' if result['alive'] else 'DEAD'}")
    if result["errors"]:
        print(f"{len(result['errors'])} errors, first: {result['errors'][:3]}")
    report_machine(result)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=("steady", "burst", "one", "train"), default="steady")
    parser.add_argument("--learners", type=int, default=30, help="the class (train: the learners who press Start)")
    parser.add_argument("--others", type=int, default=5,
                        help="train: learners doing the steady mix while the line drains")
    parser.add_argument("--spread", type=float, default=10.0, help="train: seconds over which the class presses Start")
    parser.add_argument("--dump", type=Path, default=None,
                        help="train: write every look of every learner here, one JSON object per learner and serving")
    parser.add_argument("--give-up", type=float, default=40.0,
                        help="train: minutes after the first Start when the bench stops following the runs")
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
    return parser.parse_args()


def servings_of(args: argparse.Namespace) -> list[tuple[str, Path, dict[str, str]]]:
    """What is served, in turn: this checkout, again under --env-b's settings, and --before's checkout."""
    def variables(pairs: list[str]) -> dict[str, str]:
        return dict(pair.split("=", 1) for pair in pairs)

    servings = [(f"this checkout {' '.join(args.env)}".strip(), APP_DIR, variables(args.env))]
    if args.env_b is not None:
        servings.append((f"this checkout {' '.join(args.env_b)}".strip(), APP_DIR, variables(args.env_b)))
    if args.before:
        servings.append(("before", args.before.resolve(), {}))
    return servings


def main() -> None:
    args = parse_args()
    print_header(f"A class on one server: {args.scenario}")
    served = sorted(int(c) for c in args.cpus.split(",")) if args.cpus else sorted(os.sched_getaffinity(0))
    bare = [bare_reference(served)] if args.scenario == "train" else []
    if args.cpus:  # the bench's own work stays off the server's cores
        served = {int(c) for c in args.cpus.split(",")}
        others = set(range(os.cpu_count() or 1)) - served
        if others:
            os.sched_setaffinity(0, others)
    results = []
    for name, app_dir, env in servings_of(args):
        before = resource.getrusage(resource.RUSAGE_SELF)
        results.append((f"{name} ({app_dir.name})", serve_and_play(app_dir, args, env)))
        after = resource.getrusage(resource.RUSAGE_SELF)
        if args.scenario != "train":
            report(*results[-1])
        print(f"the bench's own CPU: {after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime:.1f} s")
    if args.scenario == "train":  # the bare loop again, and each serving's figures against the mean of both
        bare.append(bare_reference(served))
        print(f"\nthe bare loop (bench.bare_loop) on cores {served}, one process each at once, summed: "
              f"{bare[0]:.1f} steps/s before the servings, {bare[1]:.1f} after")
        summaries = [(name, class_summary(result, sum(bare) / len(bare))) for name, result in results]
        for (name, result), (_name, summary) in zip(results, summaries):
            report(name, result, summary)
        if args.dump:
            dump_looks(args.dump, results)
        compare_servings(summaries, results)


def dump_looks(path: Path, results: list[tuple[str, dict]]) -> None:
    """Every learner's looks, times in seconds from the serving's first Start."""
    with path.open("w") as out:
        for name, result in results:
            first = result["first"]
            for i, p in enumerate(result["pupils"]):
                def since(t: float | None) -> float | None:
                    return None if t is None else round(t - first, 3)
                looks = [{**asdict(look), "sent": since(look.sent), "at": since(look.at)} for look in p.looks]
                out.write(json.dumps({"serving": name, "learner": i + 1, "refused": p.refused, "said": p.said,
                                      "ended": p.ended,
                                      "pressed": since(p.pressed), "started": since(p.started),
                                      "ended_at": since(p.ended_at), "looks": looks}) + "\n")
    print(f"every look: {path}")


def bare_reference(cores: list[int]) -> float:
    """Steps/s of the bare loop (bench.bare_loop: the challenge's model, batch and block, nothing but
    optimizer steps) in a fresh process on each of `cores` at once, summed: what the cores can train."""
    from bench.bare_loop import timed_case
    from minigpt.serve.runs.recipe import CHILD_NICE

    with ThreadPoolExecutor(len(cores)) as pool:  # the app's runs train at CHILD_NICE: so does the reference
        done = list(pool.map(lambda core: timed_case("bare", DEFAULT_CORPUS, CHALLENGE_STEPS, core, CHILD_NICE),
                             cores))
    return sum(r["steps"] / r["seconds"] for r in done)


def compare_servings(summaries: list[tuple[str, dict]], results: list[tuple[str, dict]]) -> None:
    """One table, a column per serving: the class's figures, the other learners' p50/p95, memory."""
    def row(label: str, value) -> list[str]:
        return [label] + [value(s, r) for (_n, s), (_m, r) in zip(summaries, results)]

    rows = [row("training slots the page showed", lambda s, r: str(s["slots"])),
            row("refused (goal 0)", lambda s, r: f"{s['refused']} of {s['learners']}"),
            row("runs followed / finished", lambda s, r: f"{s['followed']} / {s['finished']}"),
            row("wait until start, p50 / max s", lambda s, r: f"{seconds(s['start_p50'])} / {seconds(s['start_max'])}"),
            row("estimate at 1st/2nd within ±25%", lambda s, r: f"{s['near_within']} of {s['near_n']}"),
            row("  its error p50, |error| p95", lambda s, r: f"{seconds(s['near_p50'], '+.0%')}, "
                                                       f"{seconds(s['near_abs_p95'], '.0%')}"),
            row("  every look's |error| p50", lambda s, r: seconds(s["every_abs_p50"], ".0%")),
            row("  \"about 0 s\" shown, the start 5 s+ away", lambda s, r: f"{s['zero_looks']} looks, "
                                                                         f"{s['zero_learners']} learners"),
            row("first Start to last run's end, s", lambda s, r: seconds(s["span"])),
            row("class steps/s (× bare loop)", lambda s, r: f"{seconds(s['throughput'], '.1f')} (× "
                f"{s['throughput'] / s['bare']:.2f})" if s["throughput"] and s["bare"] else EMPTY)]
    actions = sorted({a for _n, r in results for a in r["waits"]})
    for action in actions:
        rows.append(row(f"{action}, p50 / p95 s", lambda s, r, a=action: (
            f"{percentile(r['waits'][a], 50):.2f} / {percentile(r['waits'][a], 95):.2f} (n {len(r['waits'][a])})"
            if r["waits"].get(a) else EMPTY)))
    rows.append(row("control group peak MB, OOM kills", lambda s, r: f"{r['box_peak'] or 0:.0f}, {r['oom']}"))
    rows.append(row("other work on the machine, cores", lambda s, r: f"{other_cores(r):.2f}"))
    print("\n## The class, side by side\n")
    print_table(["figure"] + [name for name, _s in summaries], rows)


if __name__ == "__main__":
    main()
