#!/usr/bin/env python3
"""A client written only from docs/PROTOCOL.md (tests/python/switchyard_client.py)
decodes every stream of the real engine and sends commands to it.

The engine starts at trace level `summary`; the client's `trace full` command
must take effect for the `spans` topic to appear.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

CLIENT = os.path.join(os.path.dirname(__file__), "..", "python", "switchyard_client.py")
TOPICS = "meta,step,spans,kstats,occupancy,experts,request,event,heartbeat"


def main():
    tmp = harness.tmpdir()
    tel, ctl = harness.endpoints()
    engine = harness.Proc([harness.engine_bin(), "--telemetry", tel, "--control", ctl,
                           "--devices", "4", "--trace", "summary", "--rate", "20",
                           "--output-len", "4-16"], os.path.join(tmp, "engine.log"))
    try:
        r = subprocess.run([sys.executable, CLIENT, "--telemetry", tel, "--control", ctl,
                            "--expect-topics", TOPICS, "--seconds", "30", "--command", "status",
                            "--command", "describe", "--command", 'trace {"level":"full"}'],
                           capture_output=True, text=True, timeout=90)
        print(r.stdout)
        assert r.returncode == 0, f"client failed:\n{r.stdout}\n{r.stderr}\n{engine.tail()}"
        assert engine.alive(), engine.tail()
    finally:
        engine.kill()
    print("ok: the PROTOCOL.md client decoded every topic of the real engine")


if __name__ == "__main__":
    main()
