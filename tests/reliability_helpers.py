"""Helpers for the reliability tests (faults, access, fuzzing, secret hygiene) and bench/soak.py.

- :class:`ServeProcess`: a real ``oracle-rag serve`` subprocess on 127.0.0.1
  (port chosen by the OS), every stdout/stderr line kept for inspection.
- :func:`http_request`: one HTTP request with the standard library, returning status,
  headers and the raw body (errors included), so tests see exactly what a
  client would.
- :func:`run_cli`: the installed ``oracle-rag`` console script as an operator
  runs it, in a clean environment (no ``ORACLE_RAG_*`` from the caller).
- :func:`tmpfs` and :func:`readonly_bind`: real file-system faults. Tests run
  as root in CI, and root ignores permission bits, so "read-only" and "disk
  full" cannot be made with chmod; a read-only bind mount and a size-limited
  tmpfs are the real thing (``EROFS`` / ``ENOSPC`` from the kernel). They
  need CAP_SYS_ADMIN (root here and in CI); elsewhere the test is skipped
  with the reason.
"""

from __future__ import annotations

import contextlib
import http.client as httpclient
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
_SCRIPT = Path(sys.executable).with_name("oracle-rag")
CLI = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "oracle_rag.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """The process environment without any ORACLE_RAG_* variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORACLE_RAG_")}
    env.update(extra)
    return env


def write_config(path: Path, data_dir: Path, **settings: Any) -> Path:
    """A TOML config file: ``data_dir`` plus the given settings (str, int, float, bool)."""
    lines = [f'data_dir = "{data_dir}"']
    for key, value in settings.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, int | float):
            lines.append(f"{key} = {value}")
        else:
            lines.append(f"{key} = {json.dumps(str(value))}")
    path.write_text("\n".join(lines) + "\n")
    return path


# -- HTTP -----------------------------------------------------------------------
@dataclass
class HttpResult:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def raw(self) -> str:
        """Everything a client received, for scanning (status line, headers, body)."""
        head = "\n".join(f"{k}: {v}" for k, v in self.headers.items())
        return f"{self.status}\n{head}\n\n{self.text}"


def http_request(
    base: str,
    method: str,
    path: str,
    body: bytes | str | dict | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 120,
) -> HttpResult:
    """One request to ``base`` (``host:port``); a dict body is sent as JSON."""
    host, port = base.rsplit(":", 1)
    conn = httpclient.HTTPConnection(host, int(port), timeout=timeout)
    hdrs = dict(headers or {})
    if isinstance(body, dict):
        body = json.dumps(body)
        hdrs.setdefault("Content-Type", "application/json")
    data = body.encode("utf-8") if isinstance(body, str) else body
    try:
        conn.request(method, path, body=data, headers=hdrs)
        response = conn.getresponse()
        payload = response.read()
        return HttpResult(response.status, {k.lower(): v for k, v in response.getheaders()}, payload)
    finally:
        conn.close()


def wait_until(predicate: Callable[[], Any], *, attempts: int = 600, pause: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy (bounded by a count, not a clock)."""
    event = threading.Event()
    for _ in range(attempts):
        value = predicate()
        if value:
            return value
        event.wait(pause)
    raise AssertionError(f"condition not reached after {attempts} polls")


# -- the server process ------------------------------------------------------------
@dataclass
class ServeProcess:
    """``oracle-rag [-v] --config CFG serve --port 0`` with every output line captured."""

    config: Path
    env: dict[str, str]
    cwd: Path
    verbose: bool = True
    extra_args: tuple[str, ...] = ()
    argv: list[str] | None = None  # replaces the CLI invocation (e.g. a DEBUG-logging wrapper)
    lines: list[str] = field(default_factory=list)
    address: str = ""

    def start(self, startup_polls: int = 1800) -> ServeProcess:
        argv = self.argv or [
            *CLI,
            *(["-v"] if self.verbose else []),
            "--config",
            str(self.config),
            "serve",
            "--port",
            "0",
            *self.extra_args,
        ]
        self.proc = subprocess.Popen(
            argv,
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        self._ready: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._pumps = [
            threading.Thread(target=self._pump, args=(stream,), daemon=True)
            for stream in (self.proc.stdout, self.proc.stderr)
        ]
        for pump in self._pumps:
            pump.start()
        for _ in range(startup_polls):
            try:
                line = self._ready.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("serve exited during start-up:\n" + "".join(self.lines))
            if line.startswith("serving on "):
                self.address = line.split()[2].split("//", 1)[1].rstrip("/")
                return self
        raise AssertionError("serve did not start:\n" + "".join(self.lines))

    def _pump(self, stream: Any) -> None:
        for line in iter(stream.readline, ""):
            with self._lock:
                self.lines.append(line)
            self._ready.put(line)
        self._ready.put(None)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> HttpResult:
        return http_request(self.address, method, path, body, headers, timeout)

    def get(self, path: str, headers: dict[str, str] | None = None) -> HttpResult:
        return self.request("GET", path, None, headers)

    def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> HttpResult:
        return self.request("POST", path, body, headers)

    def log(self) -> str:
        with self._lock:
            return "".join(self.lines)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        for pump in self._pumps:  # they read what is left, up to end of file (the bound is a hang guard)
            pump.join(120)
        return int(self.proc.returncode)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def run_cli(
    args: list[str],
    *,
    config: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    verbose: bool = False,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    argv = [*CLI, *(["-v"] if verbose else []), *(["--config", str(config)] if config else []), *args]
    return subprocess.run(
        argv,
        env=env if env is not None else clean_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
        check=False,
    )


# -- file-system faults ---------------------------------------------------------------
def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


def _umount(path: Path) -> None:
    for _ in range(50):
        done = subprocess.run(["umount", str(path)], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True, check=False)


def mounts_available(probe_dir: Path) -> str | None:
    """None when this process may mount (root with CAP_SYS_ADMIN), else why not."""
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "the mount/umount commands are not installed"
    probe_dir.mkdir(parents=True, exist_ok=True)
    done = _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe_dir))
    if done.returncode != 0:
        return f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})"
    _umount(probe_dir)
    return None


def require_mounts(tmp_path: Path) -> None:
    reason = mounts_available(tmp_path / "mount-probe")
    if reason:
        pytest.skip(f"file-system faults need mount privileges: {reason}")


@contextlib.contextmanager
def tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """A size-limited tmpfs at ``path`` (a real ENOSPC when it fills)."""
    path.mkdir(parents=True, exist_ok=True)
    done = _mount("-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield path
    finally:
        _umount(path)


@contextlib.contextmanager
def readonly_bind(path: Path) -> Iterator[Path]:
    """``path`` re-mounted read-only onto itself (writes fail with EROFS, even for root)."""
    done = _mount("--bind", str(path), str(path))
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount: {done.stderr.strip()}")
    try:
        done = _mount("-o", "remount,ro,bind", str(path))
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only: {done.stderr.strip()}")
        yield path
    finally:
        _umount(path)


def fill_disk(directory: Path, name: str = "filler") -> Path:
    """Write zeros into ``directory/name`` until the file system says ENOSPC (to the last byte)."""
    target = directory / name
    with open(target, "wb", buffering=0) as handle:
        for size in (1 << 20, 65536, 4096, 512, 1):
            block = b"\0" * size
            try:
                while True:
                    handle.write(block)
            except OSError:
                continue
    return target
