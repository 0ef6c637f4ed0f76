"""Shared helpers for the integration tests: real processes, real sockets.

Each test starts moe-engine (and moe-console where needed) on free loopback
ports chosen here, so tests can run in parallel under ctest.
"""
import atexit
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

import zmq


class Tmux:
    """A tmux server of one's own (its socket under `tmp`), one session "sy"."""

    def __init__(self, tmp):
        self.sock = os.path.join(tmp, "tmux.sock")

    def run(self, *args, check=True):
        return subprocess.run(["tmux", "-S", self.sock, *args], check=check,
                              capture_output=True, text=True)

    def screen(self):
        r = self.run("capture-pane", "-p", "-t", "sy", check=False)
        return r.stdout if r.returncode == 0 else ""

    def keys(self, *keys):
        self.run("send-keys", "-t", "sy", *keys)

    def alive(self):
        return self.run("has-session", "-t", "sy", check=False).returncode == 0


def wait_screen(tmux, pattern, timeout, what):
    """Waits for `pattern` on the tmux screen; prints the screen if it never comes."""
    try:
        return wait_for(lambda: re.search(pattern, tmux.screen()), timeout, what)
    except AssertionError:
        print("---- screen ----\n" + tmux.screen(), file=sys.stderr)
        raise


def query(db, sql, args=()):
    """A fresh read-only connection, as any reader beside the Writer (WAL)."""
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return c.execute(sql, args).fetchall()
    finally:
        c.close()


def query_or_none(db, sql, args=()):
    """query(), or None while the file is missing or not yet migrated."""
    try:
        return query(db, sql, args) if os.path.exists(db) else None
    except sqlite3.Error:
        return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def endpoints():
    return f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"


def wait_for(predicate, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Control:
    """A REQ client, as docs/PROTOCOL.md describes."""

    def __init__(self, endpoint):
        self.ctx = zmq.Context.instance()
        self.endpoint = endpoint
        self.next_id = 1
        self._open()

    def _open(self):
        self.sock = self.ctx.socket(zmq.REQ)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(self.endpoint)

    def call(self, cmd, args=None, timeout_ms=5000):
        req = {"id": self.next_id, "cmd": cmd, "args": args or {}}
        self.next_id += 1
        self.sock.send(json.dumps(req).encode())
        if not self.sock.poll(timeout_ms):
            # A REQ socket that lost its reply is stuck; start a fresh one.
            self.sock.close()
            self._open()
            raise AssertionError(f"no reply to {cmd} within {timeout_ms} ms")
        reply = json.loads(self.sock.recv())
        assert reply["id"] == req["id"], reply
        return reply

    def close(self):
        self.sock.close()


class Proc:
    """A child process that is always reaped, killed if need be."""

    def __init__(self, args, log_path, env=None):
        # Engines under test serve HTTP only when a test asks for it (on a
        # port of its own): the default port would collide between tests.
        if args and args[0] == engine_bin() and not any(a.startswith("--http-port") for a in args):
            args = list(args) + ["--http-port", "0"]
        self.args = args
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=env)
        # A failed assertion skips the test's own kill(): without this its
        # engine and console outlive the test (seen: an hour and a half).
        atexit.register(self.kill)

    def alive(self):
        return self.p.poll() is None

    def wait(self, timeout):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.args[0]} did not exit within {timeout}s; log:\n"
                                 + self.tail())

    def tail(self, n=40):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")

    def kill(self):
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()


def build_dir():
    for i, a in enumerate(sys.argv):
        if a == "--build" and i + 1 < len(sys.argv):
            return os.path.abspath(sys.argv[i + 1])
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "build"))


def engine_bin():
    return os.path.join(build_dir(), "engine", "server", "moe-engine")


def console_bin():
    return os.path.join(build_dir(), "console", "moe-console")


def tmpdir():
    """A fresh directory, removed when the test exits unless it failed.

    A failed test ends on an uncaught exception (sys.last_type is then set),
    and keeps its directory (logs, databases) for a look; SY_KEEP_TMP=1
    keeps every one. Registered before the test's Procs, so it runs after
    their kill() (atexit is last in, first out): nothing is still writing.
    """
    d = tempfile.mkdtemp(prefix="switchyard-it-")

    def remove():
        if getattr(sys, "last_type", None) is None and os.environ.get("SY_KEEP_TMP") != "1":
            shutil.rmtree(d, ignore_errors=True)
        else:
            print(f"kept {d}", file=sys.stderr)
    atexit.register(remove)
    return d
