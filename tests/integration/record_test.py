#!/usr/bin/env python3
"""Engine and console over real loopback sockets: what the engine sent is what
the console's database holds.

A third-party subscriber (this script) captures the streams beside the
console. The engine starts paused so that both subscribers are connected
before the first step; then it serves a fixed number of requests with full
tracing. Every step, span batch and request the
script saw must be in the db, with the same contents, and nothing else.
"""
import json
import os
import sqlite3
import sys

import zmq

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

REQUESTS = 12


def main():
    tmp = harness.tmpdir()
    tel, ctl = harness.endpoints()
    db = os.path.join(tmp, "runs.db")

    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.connect(tel)

    console = harness.Proc([harness.console_bin(), "--headless", "--connect", tel, "--control",
                            ctl, "--db", db, "--exit-on-stop"], os.path.join(tmp, "console.log"))
    engine = harness.Proc([harness.engine_bin(), "--telemetry", tel, "--control", ctl,
                           "--devices", "4", "--trace", "full", "--requests", str(REQUESTS),
                           "--rate", "50", "--paused"], os.path.join(tmp, "engine.log"))
    control = harness.Control(ctl)
    seen = {}  # topic -> list of bodies
    try:
        def drain(timeout_ms=50):
            while sub.poll(timeout_ms):
                topic, body = sub.recv_multipart()
                seen.setdefault(topic.decode(), []).append(json.loads(body))
                timeout_ms = 0

        # Both subscribers are connected once heartbeats reach us and the
        # console has recorded the run (its meta is in the db).
        harness.wait_for(lambda: (drain(), "heartbeat" in seen)[1], 10, "first heartbeat")
        run_id = seen["heartbeat"][0]["run"]

        def console_has_run():
            if not os.path.exists(db):
                return False
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
                    return c.execute("select count(*) from runs where id=?",
                                     (run_id,)).fetchone()[0] == 1
            except sqlite3.Error:
                return False
        harness.wait_for(lambda: (drain(), console_has_run())[1], 10, "console to record run")

        assert control.call("resume")["ok"]

        # With --requests N the engine stops by itself once all N are done
        # (a lifecycle "stop" event), and the console follows (--exit-on-stop).
        harness.wait_for(lambda: (drain(), not engine.alive())[1], 60,
                         f"engine to finish {REQUESTS} requests and exit")
        assert engine.wait(1) == 0, engine.tail()
        drain(300)
        assert console.wait(15) == 0, console.tail()
    finally:
        control.close()
        engine.kill()
        console.kill()

    c = sqlite3.connect(db)
    (rid, status, devices, model) = c.execute(
        "select rid, status, devices, model from runs where id=?", (run_id,)).fetchone()
    assert devices == 4 and model == "tiny", (devices, model)

    steps_seen = {m["seq"]: m for m in seen["step"]}
    steps_db = {row[0]: row for row in c.execute(
        "select seq, step, dur_us, prefill_tokens, decode_tokens from steps where run=?", (rid,))}
    assert set(steps_seen) == set(steps_db), (len(steps_seen), len(steps_db))
    for seq, m in steps_seen.items():
        assert steps_db[seq][1:] == (m["step"], m["dur_us"], m["prefill_tokens"],
                                     m["decode_tokens"]), (m, steps_db[seq])

    spans_seen = sum(len(m["spans"]) for m in seen["spans"])
    spans_db = c.execute("select count(*) from spans where run=?", (rid,)).fetchone()[0]
    assert spans_seen == spans_db and spans_seen > 0, (spans_seen, spans_db)
    devices_seen = {s["device"] for m in seen["spans"] for s in m["spans"]}
    assert devices_seen == {0, 1, 2, 3}, devices_seen
    one = seen["spans"][-1]["spans"][0]
    row = c.execute("select device, layer, name, kind, start_us, dur_us, flops, bytes from spans_v "
                    "where run_id=? and step=? and start_us=? and device=? and name=?",
                    (run_id, seen["spans"][-1]["step"], one["start_us"], one["device"],
                     one["name"])).fetchone()
    assert row is not None and row[6] == one["flops"] and row[7] == one["bytes"], (row, one)

    reqs_seen = {m["id"]: m for m in seen["request"]}
    reqs_db = {r[0]: r for r in c.execute(
        "select req_id, output_tokens, ttft_us, e2e_us from requests where run=?", (rid,))}
    assert len(reqs_seen) == REQUESTS and set(reqs_seen) == set(reqs_db), (reqs_seen, reqs_db)
    for rid_, m in reqs_seen.items():
        assert reqs_db[rid_][1:] == (m["output_tokens"], m["ttft_us"], m["e2e_us"])
        assert 0 < m["ttft_us"] <= m["e2e_us"], m

    occ = c.execute("select count(*) from occupancy where run=?", (rid,)).fetchone()[0]
    assert occ == len(seen.get("occupancy", [])), (occ, len(seen.get("occupancy", [])))
    cmds = [r[0] for r in c.execute("select name from events where run=? and kind='command' "
                                    "and phase='done'", (rid,))]
    assert "resume" in cmds, cmds
    stops = c.execute("select count(*) from events where run=? and kind='lifecycle' and "
                      "name='stop'", (rid,)).fetchone()[0]
    assert stops == 1 and status == 1, (stops, status)  # 1: ended (docs/STORE.md)
    assert c.execute("pragma integrity_check").fetchone()[0] == "ok"
    print(f"ok: run {run_id}: {len(steps_db)} steps, {spans_db} spans, {len(reqs_db)} requests, "
          f"{occ} occupancy rows match what the engine published")


if __name__ == "__main__":
    main()
