"""pytest fixtures: the real `mnemo` daemon on a free port, and clients for it.

Nothing is built here: the daemon binary comes from ``$MNEMO_BIN`` (default
``target/debug/mnemo`` in the repository; CI runs ``cargo build`` first).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from mnemo_client import MnemoClient

REPO_ROOT = Path(__file__).resolve().parents[3]
STARTUP_SECONDS = 30.0
SHUTDOWN_SECONDS = 20.0
KEPT_LOG_LINES = 200  # the tail shown when the daemon misbehaves
_LISTENING = re.compile(r"mnemo listening on (\S+:\d+)")
_API_KEY = re.compile(r"\bmnemo_[0-9a-f]{64}\b")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Daemon:
    """A running `mnemo serve` subprocess and everything it wrote to stderr.

    `args` are extra `mnemo serve` arguments, e.g. ``["--config", path]``.
    """

    def __init__(self, binary: Path, data_dir: Path, args: Sequence[str] = ()) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("MNEMO_CONFIG", "MNEMO_STORE")}
        env["MNEMO_LOG"] = "info"  # the address is announced at info level
        self.process = subprocess.Popen(
            [str(binary), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            errors="replace",
        )
        self.stderr_lines: deque[str] = deque(maxlen=KEPT_LOG_LINES)
        self.address: str | None = None
        self._listening = threading.Event()
        self._stderr_closed = False
        # Drains stderr for the daemon's whole life so the pipe never fills
        # and blocks it.
        self._reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._reader.start()

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None  # Popen was given stderr=PIPE
        for line in self.process.stderr:
            line = _ANSI.sub("", line.rstrip("\n"))
            self.stderr_lines.append(line)
            match = _LISTENING.search(line)
            if match and self.address is None:
                self.address = match.group(1)
                self._listening.set()
        self._stderr_closed = True  # EOF: the daemon exited; wake the waiter
        self._listening.set()

    def wait_listening(self) -> str:
        self._listening.wait(STARTUP_SECONDS)
        if self.address is None:
            if self._stderr_closed:
                why = f"exited with {self.process.wait(SHUTDOWN_SECONDS)}"
            else:
                why = f"was silent for {STARTUP_SECONDS}s"
            self.stop()
            tail = "\n".join(list(self.stderr_lines)[-20:])
            pytest.fail(f"mnemo {why} before announcing its address:\n{tail}")
        return self.address

    def stop(self) -> int:
        """SIGTERM, then wait; the daemon drains, syncs and exits 0."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(SHUTDOWN_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        return self.process.returncode


def _binary() -> Path:
    binary = Path(os.environ.get("MNEMO_BIN") or REPO_ROOT / "target" / "debug" / "mnemo")
    if not binary.is_absolute():
        binary = REPO_ROOT / binary
    if not os.access(binary, os.X_OK):
        pytest.fail(f"no mnemo binary at {binary}: run `cargo build` or set MNEMO_BIN")
    return binary


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(_binary(), tmp_path_factory.mktemp("mnemo-data"))
    d.wait_listening()
    yield d
    code = d.stop()
    assert code == 0, "mnemo did not exit cleanly on SIGTERM:\n" + "\n".join(list(d.stderr_lines)[-20:])


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Starts a daemon of the test's own with extra `mnemo serve` arguments
    (e.g. a config file with small limits); each is stopped, and must exit
    cleanly, when the test ends."""
    started: list[Daemon] = []

    def start(*args: str) -> Daemon:
        data_dir = tmp_path / f"mnemo-data-{len(started)}"
        data_dir.mkdir()
        d = Daemon(_binary(), data_dir, args)
        started.append(d)
        d.wait_listening()
        return d

    yield start
    for d in started:
        code = d.stop()
        assert code == 0, "mnemo did not exit cleanly on SIGTERM:\n" + "\n".join(list(d.stderr_lines)[-20:])


@pytest.fixture(scope="session")
def make_key() -> Callable[[str, str], tuple[str, str]]:
    """Makes an API key with `mnemo key create --namespace NS --role ROLE`: returns the
    key and the ``[[auth.keys]]`` lines that make a daemon's config file accept it."""
    binary = _binary()

    def make(namespace: str, role: str) -> tuple[str, str]:
        args = ["key", "create", "--namespace", namespace, "--role", role, "--name", f"{role}@{namespace}"]
        out = subprocess.run(
            [str(binary), *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        key = _API_KEY.search(out)
        assert key is not None and "[[auth.keys]]" in out, f"unexpected `mnemo key create` output:\n{out}"
        return key.group(0), out[out.index("[[auth.keys]]") :]

    return make


@pytest.fixture
def client(daemon: Daemon) -> Iterator[MnemoClient]:
    assert daemon.address is not None  # set by wait_listening
    with MnemoClient(daemon.address, timeout=10.0) as c:
        yield c


@pytest.fixture
def namespace() -> str:
    """A namespace of its own for each test, so tests cannot see each other's sessions."""
    return f"pytest-{uuid.uuid4().hex[:12]}"
