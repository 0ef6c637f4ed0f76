#!/usr/bin/env python3
"""A simulated-cluster run is recorded and replayed like any other run.

moe-engine --backend sim serves Qwen3-235B-A22B on 8 x H200 on a virtual clock
that jumps (unpaced), starting paused so the headless console is subscribed
before the first step. The console records until the engine's stop event; the
stored run then lists, replays headless and renders its views with the sim's
model, its eight devices, the priced kernels and simulated (not wall) time.
"""
import os
import re
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SIM_SECONDS = 20


def console(*args):
    r = subprocess.run([harness.console_bin(), *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, f"moe-console {' '.join(args)} exited {r.returncode}: {r.stderr}"
    return r.stdout


def main():
    tmp = harness.tmpdir()
    tel, ctl = harness.endpoints()
    db = os.path.join(tmp, "runs.db")
    rec = harness.Proc([harness.console_bin(), "--headless", "--connect", tel, "--control", ctl,
                        "--db", db, "--exit-on-stop"], os.path.join(tmp, "console.log"))
    engine = harness.Proc([harness.engine_bin(), "--backend", "sim", "--hardware", "h200",
                           "--model", "qwen3-235b-a22b", "--devices", "8", "--workload",
                           "poisson", "--rate", "8", "--duration", str(SIM_SECONDS),
                           "--prompt-len", "lognormal:512:0.8", "--output-len",
                           "lognormal:128:0.8", "--telemetry", tel, "--control", ctl,
                           "--paused"], os.path.join(tmp, "engine.log"))
    control = harness.Control(ctl)
    try:
        def recorded():
            if not os.path.exists(db):
                return False
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                    return c.execute("select count(*) from runs").fetchone()[0] == 1
            except sqlite3.Error:
                return False
        harness.wait_for(recorded, 20, "console to record the sim run's Meta")
        assert control.call("resume")["ok"]
        harness.wait_for(lambda: not engine.alive(), 120, "sim engine to finish and exit")
        assert engine.wait(1) == 0, engine.tail()
        assert rec.wait(20) == 0, rec.tail()
    finally:
        control.close()
        engine.kill()
        rec.kill()

    listing = console("--replay", db, "--list")
    assert "qwen3-235b-a22b" in listing and re.search(r"\b8\b", listing), listing

    summary = console("--replay", db, "--headless")
    m = re.search(r"replay run \S+: \d+ messages, (\d+) steps, (\d+) requests, \d+ spans, "
                  r"(\d+) gaps, ([0-9.]+)s", summary)
    assert m, summary
    steps, requests, gaps, seconds = int(m[1]), int(m[2]), int(m[3]), float(m[4])
    assert steps > 100 and requests > 100, summary
    assert gaps == 0, "the console missed messages of an unpaced sim run: " + summary
    # Simulated time, not the few wall seconds the run took: the arrivals'
    # 20 s plus the drain of the last requests (~45 ms steps with H200's
    # measured kernels, lognormal outputs).
    assert SIM_SECONDS * 0.9 <= seconds <= SIM_SECONDS * 3, summary

    overview = console("--replay", db, "--render-view", "overview", "--size", "120x36")
    assert re.search(r"REPLAY ([0-9.m]+s)/\1", overview), overview
    assert "qwen3-235b-a22b" in overview and "8 dev" in overview, overview
    kernels = console("--replay", db, "--render-view", "kernels", "--size", "120x36")
    assert re.search(r"expert_ffn +compute", kernels) and "dispatch" in kernels, kernels
    memory = console("--replay", db, "--render-view", "memory", "--size", "120x36")
    assert "dev7" in memory, memory
    experts = console("--replay", db, "--render-view", "experts", "--size", "120x36")
    assert "balancedness" in experts, experts
    print(f"ok: sim run of {seconds:.1f} simulated s, {steps} steps, {requests} requests "
          "recorded and replayed")


if __name__ == "__main__":
    main()
