"""Server hygiene: XSRF stays on, uploads are capped twice, no user input becomes a path, a page
session writes nowhere but its temporary folder (never the repository or the package), and
SIGTERM ends a server that is training, cleanly.

Writes are caught with an audit hook (sys.addaudithook): every open-for-writing, mkdir, rename
and removal this process makes, from any thread, is recorded while a test watches.

    pytest tests/cross/test_hygiene.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import minigpt
from app.state import choices, runs
from app.state.train_settings import RANGES
from app.views import uploads
from helpers import ROOT
from helpers.apptest import home, own_run, page, start_tiny_run, wait_for_step
from helpers.browser import LiveServer, main_button, new_context, wait_for_settings, wait_rendered
from minigpt.archive import folder_zip
from minigpt.corpus import MAX_CORPUS_BYTES
from minigpt.pretrained import pretrained_dir
from app.chrome.site import ATTENTION, GENERATE, SCALING, TRAIN

PACKAGE = Path(minigpt.__file__).resolve().parent

CONFIG = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC

# event -> [(index of a path argument, index of its dir_fd argument or None), ...]
PATH_EVENTS = {"os.mkdir": [(0, 2)], "os.rename": [(0, 2), (1, 3)], "os.remove": [(0, 1)], "os.rmdir": [(0, 1)],
               "os.truncate": [(0, None)], "os.symlink": [(1, 2)], "os.link": [(1, 3)], "os.chmod": [(0, 2)],
               "os.utime": [(0, 3)], "shutil.rmtree": [(0, 1)]}


class WriteAudit:
    """Records the paths this process writes to while `active`. An audit hook cannot be removed,
    so it is installed once, on first use, and stays inert when not active."""

    def __init__(self) -> None:
        self.active = self.installed = False
        self.paths: list[tuple[str, str]] = []

    def watch(self) -> None:
        if not self.installed:
            sys.addaudithook(self)
            self.installed = True
        self.paths.clear()
        self.active = True

    def __call__(self, event: str, args: tuple) -> None:
        if not self.active:
            return
        if event == "open":
            path, mode, flags = args
            writes = mode is not None and any(c in mode for c in "wax+") or \
                mode is None and isinstance(flags, int) and flags & WRITE_FLAGS
            paths = [(path, None)] if writes else []
        elif event in PATH_EVENTS:
            paths = [(args[i], args[fd] if fd is not None and fd < len(args) else None) for i, fd in PATH_EVENTS[event]]
        else:
            return
        for path, dir_fd in paths:
            if isinstance(path, (str, bytes, os.PathLike)):
                resolved = _resolve(os.fsdecode(path), dir_fd)
                if "__pycache__" not in resolved:  # bytecode caches are the interpreter's, not the app's
                    self.paths.append((event, resolved))


def _resolve(path: str, dir_fd: int | None) -> str:
    """An absolute path; a relative one with a dir_fd (as shutil.rmtree uses) is relative to that folder."""
    if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(path):
        try:
            return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        except OSError:
            pass
    return os.path.abspath(path)


AUDIT = WriteAudit()


@pytest.fixture
def writes(tmp_path, monkeypatch):
    """Every temporary file or folder goes to tmp_path/tmp; yields the audit, watching."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    AUDIT.watch()
    try:
        yield AUDIT
    finally:
        AUDIT.active = False


def leftovers(folder: Path) -> list[str]:
    """What is left in the temporary folder, less torch's own once-per-process compiler cache."""
    return [p.name for p in folder.iterdir() if not p.name.startswith("torchinductor_")]


def outside(paths: list[tuple[str, str]], folder: Path) -> list[tuple[str, str]]:
    return [(event, path) for event, path in paths if not Path(path).is_relative_to(folder)]


def repo_files() -> dict[str, tuple[int, int]]:
    """The app's own files (not tests/ and bench/, which others may be editing) with size and mtime."""
    skip = {".git", "__pycache__", ".pytest_cache", ".venv", "tests", "bench"}
    found = {}
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.is_file() and not skip & set(parts):
            found[str(path.relative_to(ROOT))] = (path.stat().st_size, path.stat().st_mtime_ns)
    return found


def test_the_write_audit_sees_writes_from_any_thread(writes, tmp_path):
    import shutil
    import threading

    target = tmp_path / "elsewhere"
    thread = threading.Thread(target=lambda: (target.mkdir(), (target / "f.txt").write_text("x"),
                                              shutil.rmtree(target)))
    thread.start()
    thread.join()
    seen = {(event, Path(path).name) for event, path in writes.paths}
    assert {("os.mkdir", "elsewhere"), ("open", "f.txt"), ("os.remove", "f.txt")} <= seen
    assert outside(writes.paths, tmp_path / "tmp")


def test_xsrf_protection_is_on_and_errors_show_no_details():
    assert CONFIG["server"]["enableXsrfProtection"] is True
    assert CONFIG["client"]["showErrorDetails"] == "none"
    assert CONFIG["server"]["runOnSave"] is False


def test_the_upload_limit_in_the_config_is_the_one_the_code_enforces():
    limit = CONFIG["server"]["maxUploadSize"] * 2**20  # Streamlit counts megabytes of 2**20 bytes
    assert uploads.MAX_CHECKPOINT_BYTES == limit
    assert MAX_CORPUS_BYTES <= limit


def test_an_upload_over_the_limit_is_refused_again_in_code():
    at = home()
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    big = b"PK" + bytes(uploads.MAX_CHECKPOINT_BYTES)  # AppTest, like a forged request, skips the server's cap
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("big.zip", big, "application/zip")).run()
    assert not at.exception
    assert any("the limit is 25 MB" in e.value for e in at.error)


def test_no_uploaded_name_becomes_a_path(writes, tmp_path):
    shipped = folder_zip(pretrained_dir("demo-zh"))
    at = home()
    text = "a corpus whose file name tries to climb out of the upload folder.\n" * 10
    at.file_uploader(key=uploads.CORPUS_UPLOAD).set_value(("../../evil.txt", text.encode(), "text/plain")).run()
    at.radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("../../evil.zip", shipped, "application/zip")).run()
    assert not at.exception and not at.error
    assert at.session_state[choices.CORPUS] == "../../evil.txt (uploaded)"  # a label, nothing more
    assert {m.label: m.value for m in at.metric}["Corpus"] == "demo-zh"  # the uploaded checkpoint is loaded
    assert not [p for _, p in writes.paths if "evil" in p]
    data = Path(os.environ["MINIGPT_DATA_DIR"])  # the server's database, and nothing of the uploads in it
    assert [p for p in outside(writes.paths, tmp_path / "tmp") if not Path(p[1]).is_relative_to(data)] == []
    assert leftovers(tmp_path / "tmp") == []  # the zip was read in memory


HEAVY_FOR_HOME = ("pandas", "app.views.lesson", "minigpt.viz")


@pytest.mark.slow
def test_home_and_the_sidebar_draw_without_pandas_or_the_lessons_views():
    """The first load waits for every import Home makes: pandas (about half a second here) and the
    lesson's views are for other pages. Streamlit itself brings in Plotly, so that is not counted."""
    code = ("import runpy, sys\n"
            "import streamlit\n"
            "runpy.run_path('streamlit_app.py', run_name='__main__')\n"
            f"print(sorted(m for m in {HEAVY_FOR_HOME!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


@pytest.mark.trains
@pytest.mark.slow
def test_a_page_session_writes_nothing_at_all(writes, tmp_path):
    before = repo_files()
    at = home()
    for path in (GENERATE.script, ATTENTION.script, SCALING.script):
        assert not page(at, path).exception
    at = start_tiny_run(eval_interval=5)
    wait_for_step(at, 6)
    entry = runs.registry().get(own_run(at)[0])
    download = runs.run_checkpoint_zip(entry)  # what the Train page's download button serves
    page(at, GENERATE.script).session_state["stream_delay"] = 0
    at.number_input(key="max_new_tokens").set_value(5)
    at.button(key="generate").click().run()
    assert not page(at, ATTENTION.script).exception
    page(at, "streamlit_app.py").radio(key=choices.MODEL_SOURCE).set_value(choices.UPLOADED).run()
    at.file_uploader(key=uploads.CHECKPOINT_UPLOAD).set_value(("mine.zip", download, "application/zip")).run()
    assert not at.exception and not at.error
    page(at, TRAIN.script).button(key="stop").click().run()
    assert at.metric[0].value == "stopped"
    probe = tmp_path / "tmp" / "audit-probe"
    probe.write_text("the audit records this write")
    data = Path(os.environ["MINIGPT_DATA_DIR"])  # the server's store: the run's rows and checkpoints
    written = [p for _, p in writes.paths
               if "torchinductor_" not in p and not Path(p).is_relative_to(data)]  # torch's once-per-process cache
    assert written == [str(probe)]  # beyond its store, the session wrote nothing: downloads and uploads stay in memory
    probe.unlink()
    assert not [p for _, p in writes.paths if Path(p).is_relative_to(ROOT) or Path(p).is_relative_to(PACKAGE)]
    assert repo_files() == before
    assert leftovers(tmp_path / "tmp") == []


@pytest.mark.slow
def test_the_server_refuses_an_upload_without_the_xsrf_token(tmp_path):
    with LiveServer({"OMP_NUM_THREADS": "1"}, log=tmp_path / "streamlit.log") as server:
        request = urllib.request.Request(server.url + "/_stcore/upload_file/some-session/some-file", data=b"x",
                                         method="PUT")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 403 and b"XSRF" in refused.value.read()


@pytest.mark.browser
def test_sigterm_while_training_exits_cleanly(browser, tmp_path):
    """A daemon thread inside a torch op at exit aborts the process ("terminate called without an
    active exception"); the atexit hook stops every run first. A server that hangs instead is
    killed after a minute, which reads as a failure too (its exit code is not 0)."""
    log_path = tmp_path / "streamlit.log"
    with LiveServer({"OMP_NUM_THREADS": "1"}, log=log_path) as server:
        context = new_context(browser, viewport={"width": 1400, "height": 2200})
        page_ = context.new_page()
        page_.goto(server.url + "/Train", wait_until="domcontentloaded")
        wait_rendered(page_, "Train")
        for label in ("d_model", "num_layers"):  # the smallest model: their sliders' minimum
            page_.locator('[data-testid="stSlider"]', has_text=label).get_by_role("slider").press("Home")
        steps = page_.get_by_role("spinbutton", name="Steps", exact=True)  # training still when the server stops
        steps.fill(str(RANGES["max_steps"][1]))
        steps.press("Enter")
        wait_for_settings(page_, "d_model:16", "num_layers:1", f"max_steps:{RANGES['max_steps'][1]}")
        main_button(page_, "Start").click()
        page_.wait_for_function(
            "() => { const m = document.querySelectorAll('[data-testid=stMetricValue]');"
            " return m.length >= 2 && m[0].innerText === 'running' && parseInt(m[1].innerText) >= 5 }")
        code, seconds = server.stop(timeout=60)  # SIGTERM by PID: the server we started, nothing else
        context.close()
    log = log_path.read_text()
    print(f"SIGTERM while training: exit code {code} after {seconds:.2f} s")
    assert code == 0, log[-2000:]
    assert "terminate called" not in log and "Traceback" not in log, log[-2000:]


def test_every_chart_offers_plotlys_png_download():
    """Every st.plotly_chart in the app passes the shared config (app/chrome/charts.py), whose toolbar has
    Plotly's own save-as-PNG button, its tooltip in the page's language: a chart added without it
    could not be exported."""
    import ast

    missing = []
    for path in [ROOT / "streamlit_app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "app").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "plotly_chart":
                config = next((ast.unparse(k.value) for k in node.keywords if k.arg == "config"), None)
                if config not in ("charts.config()", "chart_config()"):
                    missing.append(f"{path.name}:{node.lineno}")
    assert not missing, missing


def test_the_stress_and_mutant_scripts_name_files_that_exist_and_every_mutant_applies():
    """tests/stress.py's suites and tests/mutants.py's files are paths typed into the scripts, and each
    mutant is an exact edit. After the redesign the threaded suite named moved files (pytest ran
    nothing, exit 4, every run 'failed'), and a race-page mutant matched nothing, which stopped the
    mutant run after 113 mutants."""
    import importlib.util

    def script(name):
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    stress, mutants = script("stress"), script("mutants")
    paths = [arg for suite in stress.SUITES.values() for arg in suite if not arg.startswith("-") and "/" in arg]
    paths += [path for path, _edits in mutants.MUTANTS.values()] + mutants.REST
    assert paths and not [path for path in paths if not (ROOT / path).exists()]
    for name, (path, edits) in mutants.MUTANTS.items():  # each edit still matches its file's text, once
        mutants.mutated((ROOT / path).read_text(encoding="utf-8"), name, path, edits)
