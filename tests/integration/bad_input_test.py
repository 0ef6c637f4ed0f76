#!/usr/bin/env python3
"""Bad input gets a clear error and loses nothing.

1. The engine's control socket is fed garbage (not JSON, not an object, no
   cmd, unknown command, bad arguments, oversized body, extra frames) from
   REQ and DEALER peers: each gets a precise error reply and the engine keeps
   serving; its state is unchanged.
2. The console's telemetry socket is fed malformed messages by a rogue
   publisher between well-formed ones: the console counts them, keeps
   recording, and the well-formed ones reach the db.
"""
import json
import os
import sqlite3
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402


def engine_part(tmp):
    tel, ctl = harness.endpoints()
    engine = harness.Proc([harness.engine_bin(), "--telemetry", tel, "--control", ctl,
                           "--devices", "2", "--rate", "20"], os.path.join(tmp, "engine.log"))
    ctx = zmq.Context.instance()
    try:
        control = harness.Control(ctl)
        harness.wait_for(lambda: control.call("status")["ok"], 10, "engine to answer")
        before = control.call("status")["result"]

        req = ctx.socket(zmq.REQ)
        req.setsockopt(zmq.LINGER, 0)
        req.connect(ctl)

        def raw(body):
            req.send(body)
            assert req.poll(5000), f"no reply to {body[:40]!r}"
            return json.loads(req.recv())

        cases = [
            (b"this is not json", "INVALID_ARGUMENT", "JSON"),
            (b"[1,2,3]", "INVALID_ARGUMENT", "object"),
            (b'{"id": 1}', "INVALID_ARGUMENT", "cmd"),
            (b'{"id": 2, "cmd": 7}', "INVALID_ARGUMENT", "cmd"),
            (b'{"id": 3, "cmd": "explode"}', "NOT_FOUND", "explode"),
            (b'{"id": 4, "cmd": "trace", "args": {"level": "loud"}}', "INVALID_ARGUMENT", "full"),
            (b'{"id": 5, "cmd": "trace"}', "INVALID_ARGUMENT", "level"),
            (b'{"id": 6, "cmd": "pause", "args": [1]}', "INVALID_ARGUMENT", "args"),
            (b"\xff\xfe\x00garbage", "INVALID_ARGUMENT", "JSON"),
            (b"{" * 2 + b"x" * (2 << 20), "INVALID_ARGUMENT", "limit"),
        ]
        for body, code, word in cases:
            r = raw(body)
            assert r["ok"] is False, (body[:40], r)
            assert r["error"]["code"] == code, (body[:40], r)
            assert word.lower() in r["error"]["message"].lower(), (body[:40], r)

        # A DEALER peer that forgets the empty delimiter, and one sending extra frames.
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(ctl)
        dealer.send_multipart([b"", b'{"id": "d1", "cmd": "status"}'])
        assert dealer.poll(5000)
        frames = dealer.recv_multipart()
        assert json.loads(frames[-1])["ok"] is True, frames
        dealer.send_multipart([b"", b"junk", b"more junk"])
        if dealer.poll(2000):
            frames = dealer.recv_multipart()
            assert json.loads(frames[-1])["ok"] is False, frames
        dealer.close()

        after = control.call("status")
        assert after["ok"] and engine.alive(), engine.tail()
        assert after["result"]["state"] == before["state"] == "running", (before, after)
        assert after["result"]["trace_level"] == before["trace_level"], (before, after)
        harness.wait_for(lambda: control.call("status")["result"]["step"] > before["step"], 10,
                         "engine to keep stepping")
        req.close()
        control.close()
    finally:
        engine.kill()


def console_part(tmp):
    tel, ctl = harness.endpoints()
    db = os.path.join(tmp, "console.db")
    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    pub.bind(tel)
    console = harness.Proc([harness.console_bin(), "--headless", "--connect", tel, "--control",
                            ctl, "--db", db, "--duration", "4"], os.path.join(tmp, "console.log"))
    try:
        time.sleep(1.0)  # slow joiner: let the SUB connect
        good = lambda seq: [b"event", json.dumps({
            "v": 1, "run": "rogue-run", "seq": seq, "t": 1000 + seq, "kind": "lifecycle",
            "name": "note", "phase": "", "message": f"good {seq}", "detail": {}}).encode()]
        bad = [
            [b"event", b"not json"],
            [b"event", b'{"v": 1}'],
            [b"nosuchtopic", b"{}"],
            [b"step", json.dumps({"v": 99, "run": "x", "seq": 0, "t": 0}).encode()],
            [b"lonely-frame"],
            [b"event", b"a", b"b"],
        ]
        seq = 0
        for b in bad:
            pub.send_multipart(good(seq))
            seq += 1
            pub.send_multipart(b)
        pub.send_multipart(good(seq))
        seq += 1
        assert console.wait(20) == 0, console.tail()
    finally:
        console.kill()
        pub.close(0)
    out = console.tail()
    c = sqlite3.connect(db)
    msgs = [r[0] for r in c.execute(
        "select e.message from events e join runs r on r.rid = e.run where r.id='rogue-run' "
        "order by e.seq")]
    assert msgs == [f"good {i}" for i in range(seq)], (msgs, out)
    assert "malformed" in out.lower(), out
    assert c.execute("pragma integrity_check").fetchone()[0] == "ok"


def main():
    tmp = harness.tmpdir()
    engine_part(tmp)
    console_part(tmp)
    print("ok: engine answered every bad command precisely and kept serving; console skipped "
          "malformed messages and recorded the rest")


if __name__ == "__main__":
    main()
