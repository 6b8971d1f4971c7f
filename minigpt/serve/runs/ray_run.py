"""A run in a Ray actor, as the dashboard holds it: `RayRun`, a remote.RemoteRun steered through an
`ActorChannel` (actor calls), its actor placed and handed back by cluster.Cluster.

Between the dashboard and the actor only Ray travels:
- news (logged steps, evaluations, checkpoints, state) comes back through one waiting call at a time,
  which the actor answers as soon as something changed, or after NEWS_WAIT seconds;
- commands leave one at a time, in order, from a thread of the run's own, so a page never waits on
  the cluster except where it asks for an answer (weights), and then at most WEIGHTS_TIMEOUT.
What a Ray run does beyond any remote run: it lets its actor go as soon as it ends (its weights kept
here), and a run whose machine leaves the cluster goes on from its last checkpoint on another one.
"""
from __future__ import annotations

import contextlib
import queue
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

from ...messages import Message
from .recipe import resume_spec
from .remote import WEIGHTS_TIMEOUT, RemoteRun
from .run import ENDED_STATES, EvalRecord

if TYPE_CHECKING:
    from .recipe import RunSpec


class ActorPool(Protocol):
    """What a RayRun asks of whatever places its actors (cluster.Cluster): this module names no
    cluster, so that the cluster, which hands its runs out, imports it and not the other way."""

    def place(self, spec: RunSpec) -> tuple[Any, dict]:
        """An actor with `spec`'s run loaded on a machine that has room, and what it said when ready."""

    def give_back(self, actor: Any) -> None:
        """The actor's run has ended: it goes back to the pool, warm, for the next run."""

    def machine_left(self, node_id: str, err: Exception) -> bool:
        """Whether the actor died because its machine left the cluster (then the run moves)."""

NEWS_WAIT = 0.5  # the longest the actor holds a call for news before it answers "nothing new"
_HAND_BACK = "hand back"  # the command thread's last item: the actor goes back to the cluster


def first_line(err: Exception) -> str:
    """What an error says in one line, for a learner's sentence."""
    text = str(err).strip().splitlines()  # Ray's errors go on with a traceback from the actor's machine
    return text[0] if text else type(err).__name__


class ActorChannel:
    """The dashboard's end of a run's actor (remote.Channel): a command thread that calls `command`
    on the actor, one at a time, in order, and a news thread that keeps one call to `news` waiting."""

    where = "actor"  # what the run's weights could not be read from, in an error

    def __init__(self, cluster: ActorPool, actor):
        self.cluster, self.actor = cluster, actor  # the actor changes as the run moves (under the run's lock)
        self._commands: queue.SimpleQueue = queue.SimpleQueue()
        self._handing: Future | None = None  # the actor going back to the cluster (the command thread does it, last)

    def listen(self, run: RayRun) -> None:
        """Start the run's two threads; they end once it is closed (or its actor handed back)."""
        self.run = run
        threading.Thread(target=self._send_commands, name=f"minigpt-ray-{run.run_id}", daemon=True).start()
        threading.Thread(target=self._listen, name=f"minigpt-ray-news-{run.run_id}", daemon=True).start()

    def send(self, op: str, number: int, args: tuple) -> Future:
        done: Future = Future()  # set by the command thread: the actor's answer, or what Ray raised
        self._commands.put((op, number, args, done))  # never blocks: the run's locks are not held long
        return done

    def let_go(self, kill: bool, timeout: float | None) -> None:
        """Have the command thread give the actor back once the commands before are done (once, whoever
        asks first: the run's end, or close); wait up to `timeout` for it."""
        if self._handing is None:  # the run's _send_lock is held: one asks at a time
            self._handing = Future()
            self._commands.put((_HAND_BACK, 0, (kill,), self._handing))
        if timeout != 0.0:  # close(): back in the pool (or ended) when it returns, whoever asked first
            with contextlib.suppress(Exception):
                self._handing.result(timeout)

    def lost(self, cause: Any, step: int) -> Message:
        return Message("the cluster lost this run at step {step} ({reason}). The other runs go on; train again, "
                       "perhaps with a smaller model or batch.", step=step, reason=first_line(cause))

    def _send_commands(self) -> None:
        """The command thread: each command in order, one at a time, its status applied; last, the
        actor handed back, once every command before has been done on it."""
        import ray

        run = self.run
        while True:
            op, number, args, done = self._commands.get()
            if op == _HAND_BACK:  # last: every command before it has been done on the actor
                self._give_actor_back(kill=args[0])
                done.set_result(True)
                return  # the thread ends with the run's hold on its actor
            with run._lock:  # read together: a move changes both in one step
                actor, generation = self.actor, run._generation
            try:
                answer, status = ray.get(actor.command.remote(op, number, *args), timeout=WEIGHTS_TIMEOUT)
            except Exception as err:  # noqa: BLE001 - the actor has gone, or is too slow
                done.set_exception(err)
                continue
            with run._lock:
                if generation == run._generation:  # an answer from an actor the run has left says nothing of it
                    run._take_status(status)
                run._lock.notify_all()
            done.set_result(answer)

    def _give_actor_back(self, kill: bool) -> None:
        import ray

        with self.run._lock:
            actor = self.actor
        if kill:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        else:
            self.cluster.give_back(actor)

    def _listen(self) -> None:
        """The news thread: one waiting call at a time until the run is closed. A machine that left
        moves the run; an actor that failed ends it."""
        try:
            self._listen_until_closed()
        except Exception as err:  # noqa: BLE001 - what Ray raised that nothing here expects: the run fails, said
            self.run._ended(err)

    def _listen_until_closed(self) -> None:
        import ray

        run = self.run
        while True:
            with run._lock:
                if run._dead:
                    return
                actor, generation, cursor = self.actor, run._generation, run._cursor
            try:
                news = ray.get(actor.news.options(concurrency_group="news").remote(*cursor), timeout=WEIGHTS_TIMEOUT)
            except (ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnavailableError):
                time.sleep(NEWS_WAIT)  # a machine that is slow or briefly away: asked again
                continue
            except ray.exceptions.RayError as err:
                with run._lock:
                    if run._closing or run._dead or generation != run._generation:
                        continue  # closed meanwhile, or an old actor's failure: the run has moved on
                if not run._move_if_machine_left(err):
                    run._ended(err)
                continue
            run._apply(news, generation)


class RayRun(RemoteRun):
    """A TrainingRun in a Ray actor. Thread-safe, like TrainingRun; see the module docstring.

    Building it waits until Ray has placed the actor and the run is built: a moment on a warm actor,
    about 3 s on a new one (bench/RESULTS.md), at most PLACE_SECONDS where no machine has room (the
    registry builds a run on the page that pressed Start when a slot is free, else on its dispatcher
    thread). Starting it is not waited for; pause, run_steps, stop and close return once the actor
    has done them (at most `timeout`)."""

    def __init__(self, spec, cluster: ActorPool, *, history: list = (), evals: list[EvalRecord] = ()):
        """`history`, `evals`: what a resumed run had logged up to its checkpoint (run.Resume)."""
        from .thread import register

        self.cluster = cluster  # its pool: where it is placed, and where a move places it again
        # what it goes on from if its machine leaves: its newest checkpoint (the one it was resumed from)
        self._last_checkpoint: tuple[int, dict[str, bytes] | None] = (history[-1].step if history else 0, spec.resume)
        actor, facts = cluster.place(spec)  # waits for a machine; the run's own ConfigError is raised here
        self._open(spec, ActorChannel(cluster, actor), facts, history, evals)
        self._stamp = facts["stamp"]  # the newest status taken: an older one arriving later is dropped
        self._cursor = (0, 0, 0, 0)  # the actor's history and evals received, checkpoints acknowledged, version seen
        self._generation = 0  # bumped when the run moves to a new actor: answers from the old one are dropped
        self.channel.listen(self)
        register(self)  # stopped as the server exits, like every run

    @property
    def _actor(self):  # the actor it trains in now (the tests end it as the out-of-memory killer would)
        return self.channel.actor

    def is_alive(self) -> bool:
        """Its training thread is alive, or a command sent to it is not done yet, or it has ended and
        its weights are on their way to the dashboard (then it is read from there)."""
        with self._lock:
            return not self._dead and (self._status["alive"] or self._status["done"] < self._sent
                                       or self._state in ENDED_STATES)

    def inference_model(self):
        return self._weights("weights")[0].eval()  # on the CPU: the dashboard may have no GPU

    def _answer(self, op: str) -> dict | None:
        """The actor's answer to `op`, or the weights the dashboard kept as the run ended."""
        answer = None
        for _ in range(2):  # the run may end between the two looks: then its weights are here
            with self._lock:
                final = self._final
            if final is not None:  # a failed run kept its weights alone: no checkpoint can be made from them
                return final if op == "weights" or "optimizer_state" in final else None
            answer = self._command(op, timeout=WEIGHTS_TIMEOUT)
            if answer is not None:
                break
        return answer

    def _take_status(self, status: dict) -> None:
        # statuses come by two ways (a command's answer, the news): the actor stamps each look in order
        if status["stamp"] <= self._stamp:  # an older look than one already taken (the other channel's)
            return
        self._stamp = status["stamp"]
        super()._take_status(status)

    def _apply(self, news: dict, generation: int) -> None:
        """News, in the order a run in a child process sends it: the steps and evaluations, then the
        checkpoints made at them (to the sink, outside the lock: it may write to disk), then the state."""
        with self._lock:
            if generation != self._generation or self._dead:  # an old actor's, or a closed run's
                return
            history_from, evals_from, acknowledged, _ = self._cursor
            last_step = self._history[-1].step if self._history else -1
            last_eval = self._evals[-1].step if self._evals else -1
            # a run that moved trains the steps since its checkpoint again: the same numbers, kept once
            self._history.extend(e for e in news["history"] if e.step > last_step)
            if self._state != "closed":
                self._evals.extend(r for r in news["evals"] if r.step > last_eval)
            checkpoints = news["checkpoints"]
            # the next call asks from here; the checkpoints received are acknowledged, so the actor drops them
            self._cursor = (history_from + len(news["history"]), evals_from + len(news["evals"]),
                            checkpoints[-1][0] if checkpoints else acknowledged, news["version"])
        for _, step, files in checkpoints:
            self._last_checkpoint = (step, files)  # what a move goes on from
            self._checkpoint_made(step, files)
        with self._lock:
            if generation != self._generation or self._dead:
                return
            self._take_status(news["status"])
            self._lock.notify_all()
            ended = (self._state in ENDED_STATES and not self._status["alive"] and self._status["done"] >= self._sent)
        if ended:
            self._let_actor_go()

    def _let_actor_go(self) -> None:
        """The run trains no more: its weights come to the dashboard, and its actor goes back to the
        cluster, so that its CPU trains the next run (a run that ends holds no slot; it may still be
        read: Generate, Attention, the download, the registry's small form)."""
        final = self._command("checkpoint", timeout=WEIGHTS_TIMEOUT)
        if final is None:  # a failed run whose optimizer cannot be had: its weights alone
            final = self._command("weights", timeout=WEIGHTS_TIMEOUT)
        with self._lock:
            if self._dead:  # closed meanwhile: close hands the actor back
                return
            self._final, self._dead = final, True
            self._lock.notify_all()
        self._let_go(kill=final is None)

    def _move_if_machine_left(self, err: Exception) -> bool:
        """Where the run's machine has left the cluster, go on from its last checkpoint on another
        machine, in the state it was in; False where the machine is still there."""
        with self._lock:
            node, state, lost = self._status.get("node"), self._state, self._status["step"]
        if state not in ("running", "paused", "idle") or not self.cluster.machine_left(node, err):
            return False
        resumed_from, files = self._last_checkpoint
        try:
            actor, facts = self.cluster.place(resume_spec(self.spec, files))
        except Exception as err:  # noqa: BLE001 - no machine could take it: the run ends, and says why
            self._ended(err)
            return True
        # _send_lock first, as every sender takes it: the command that restates the run leaves before any later one
        with self._send_lock, self._lock:
            if self._closing:
                self.cluster.give_back(actor)
                return True
            self.channel.actor, self._generation, self._cursor = actor, self._generation + 1, (0, 0, 0, 0)
            self._stamp = facts["stamp"]  # the new actor's looks are numbered afresh
            # its `done` (0) is behind the commands sent: the state stays ours until it starts
            self._status.update(facts)
            self._notice = Message("The machine that trained this run left the cluster at step {lost}; the run went on "
                                   "from its checkpoint at step {step} on another machine.", lost=lost,
                                   step=resumed_from)
            self._restate()
        return True

    def _restate(self) -> None:
        """Tell a new actor the state the run is in now (its owner may have paused or stopped it meanwhile),
        in one step with the actor's change (both locks held), so that nothing pressed in between is undone."""
        state = self._state
        if state in ("running", "paused"):
            follow = ("start", (state == "paused", self._wants_checkpoints))
        elif state in ENDED_STATES:  # stopped meanwhile: said to the new actor, which then goes back
            follow = ("stop", ())
        else:
            return  # idle: nothing to say until its owner starts it
        self._sent = number = next(self._ids)
        self.channel.send(follow[0], number, follow[1])
