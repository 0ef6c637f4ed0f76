#!/usr/bin/env python3
"""The README's main command in a real terminal.

Runs scripts/run inside tmux (80x24, the smallest size we promise), reads the
screen with capture-pane, checks the dashboard moves, sends `:pause` and
`:resume` as an operator would and checks both the screen and the engine's own
status, looks at the kernel lanes of all 4 devices, quits with `q`, and then
checks that no engine is left behind and the run is recorded.
"""
import os
import re
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def main():
    tmp = harness.tmpdir()
    tel, ctl = harness.endpoints()
    db = os.path.join(tmp, "runs.db")
    env = dict(os.environ, SWITCHYARD_TELEMETRY=tel, SWITCHYARD_CONTROL=ctl, SWITCHYARD_DB=db,
               SWITCHYARD_BUILD_DIR=harness.build_dir(), SWITCHYARD_NO_BUILD="1",
               XDG_DATA_HOME=tmp, TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8")
    tmux = harness.Tmux(tmp)
    cmd = f"{ROOT}/scripts/run --rate 30 --http-port 0; echo SCRIPT-EXIT=$?; sleep 30"
    subprocess.run(["tmux", "-S", tmux.sock, "new-session", "-d", "-s", "sy", "-x", "80",
                    "-y", "24", cmd], check=True, env=env)
    control = harness.Control(ctl)
    try:
        harness.wait_screen(tmux, r"RUNNING", 30, "dashboard header RUNNING")
        # Moving numbers: the step counter on screen advances.
        first = tmux.screen()
        time.sleep(1.5)
        assert tmux.screen() != first, "screen did not change in 1.5 s:\n" + first

        tmux.keys(":")
        tmux.keys("pause", "Enter")
        harness.wait_screen(tmux, r"PAUSED", 10, "header PAUSED after :pause")
        st = control.call("status")
        assert st["ok"] and st["result"]["state"] == "paused", st
        step = st["result"]["step"]
        time.sleep(0.5)
        assert control.call("status")["result"]["step"] == step, "engine kept stepping while paused"

        tmux.keys(":")
        tmux.keys("resume", "Enter")
        harness.wait_screen(tmux, r"RUNNING", 10, "header RUNNING after :resume")
        harness.wait_for(lambda: control.call("status")["result"]["step"] > step, 10,
                         "engine to step again")

        # Resize: the frame is redrawn to the new size, header and status intact.
        tmux.run("resize-window", "-t", "sy", "-x", "120", "-y", "36")
        harness.wait_screen(tmux, r"(?s)switchyard.*RUNNING.*live", 10, "redraw at 120x36")
        assert len(tmux.screen().splitlines()) >= 35, tmux.screen()
        tmux.run("resize-window", "-t", "sy", "-x", "80", "-y", "24")
        harness.wait_screen(tmux, r"(?s)switchyard.*RUNNING.*live", 10, "redraw at 80x24")

        tmux.keys("2")  # kernels view: one lane per device
        for d in range(4):
            harness.wait_screen(tmux, rf"(dev|d|gpu)\s?{d}\b", 10, f"kernel lane of device {d}")

        # A disruptive command asks first; y runs it.
        tmux.keys(":")
        tmux.keys("switch tp", "Enter")
        harness.wait_screen(tmux, r"\(y/n\)|\[y/N\]|y/n", 10, "confirmation question for :switch tp")
        tmux.keys("y")
        harness.wait_for(lambda: control.call("status")["result"].get("layout") == "TP", 30,
                         "engine to switch to TP after confirming")
        harness.wait_screen(tmux, r"TP", 10, "layout TP on screen")

        # Log view, filtered: only lines naming the switch remain, and the
        # title says what the filter is.
        tmux.keys("5")
        tmux.keys("/")
        tmux.keys("switch", "Enter")
        harness.wait_screen(tmux, r"filter /switch", 10, "Log title with the filter")
        for line in tmux.screen().splitlines()[3:-3]:
            assert "resume" not in line, "filtered Log still shows :resume\n" + tmux.screen()
        tmux.keys("q")
        harness.wait_screen(tmux, r"SCRIPT-EXIT=0", 20, "scripts/run to exit 0 after q")
    finally:
        control.close()
        screen = tmux.screen()
        tmux.run("kill-server", check=False)

    # q left no engine behind: its control port can be bound again.
    import zmq
    s = zmq.Context.instance().socket(zmq.ROUTER)
    try:
        harness.wait_for(lambda: _can_bind(s, ctl), 10, "engine to release its port")
    finally:
        s.close(0)
    leftover = subprocess.run(["pgrep", "-f", f"moe-engine.*{ctl}"], capture_output=True,
                              text=True).stdout.strip()
    assert not leftover, f"engine processes left behind: {leftover}\n{screen}"

    c = sqlite3.connect(db)
    runs = c.execute("select id, n_steps from runs").fetchall()
    assert len(runs) == 1 and runs[0][1] > 0, runs
    c.close()

    # The stored run replays through the same views.
    tmux.run("kill-server", check=False)
    subprocess.run(["tmux", "-S", tmux.sock, "new-session", "-d", "-s", "sy", "-x", "80",
                    "-y", "24", f"{harness.console_bin()} --replay {db}; sleep 30"],
                   check=True, env=env)
    try:
        harness.wait_screen(tmux, r"REPLAY [0-9.]+s/[0-9.]+s", 10, "replay header")
        tmux.keys("End")
        harness.wait_screen(tmux, r"REPLAY ([0-9.]+)s/\1s", 10, "seek to the end")
        tmux.keys("2")
        harness.wait_screen(tmux, r"dev3", 10, "kernel lanes in replay")
        # Back to the start, then the second event: the message line names it.
        tmux.keys("Home")
        tmux.keys("n")
        harness.wait_screen(tmux, r"@ [0-9.]+s", 10, "first event named")
        def named():
            return [l.strip() for l in tmux.screen().splitlines() if re.search(r"@ [0-9.]+s", l)]
        first_event = named()
        tmux.keys("n")
        try:
            harness.wait_for(lambda: named() and named() != first_event, 10, "second event named")
        except AssertionError:
            raise AssertionError("second event not named; first was " + repr(first_event) +
                                 "\n" + tmux.screen())
        tmux.keys("q")
        harness.wait_for(lambda: "moe-console" not in _panes(tmux), 10, "replay console to quit")
    finally:
        tmux.run("kill-server", check=False)
    print(f"ok: dashboard ran, paused, resumed and resized; run {runs[0][0]} recorded "
          f"with {runs[0][1]} steps and replayed")


def _panes(tmux):
    return tmux.run("list-panes", "-a", "-F", "#{pane_current_command}", check=False).stdout


def _can_bind(sock, endpoint):
    try:
        sock.bind(endpoint)
        return True
    except Exception:  # zmq.ZMQError: address in use
        return False


if __name__ == "__main__":
    main()
