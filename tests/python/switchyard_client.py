#!/usr/bin/env python3
"""Minimal third-party Switchyard client, written from docs/PROTOCOL.md alone.

Subscribes to the telemetry PUB socket, validates every message of every
topic against the documented schema (required fields and JSON types,
envelope, schema version), keeps the documented per-(run, topic) seq gap
accounting, and sends commands to the control ROUTER socket through a REQ
socket.

Needs only the Python 3 standard library and pyzmq (Debian: python3-zmq).

    switchyard_client.py --telemetry tcp://127.0.0.1:5555 \\
        --control tcp://127.0.0.1:5556 \\
        --expect-topics meta,step,occupancy,experts,heartbeat \\
        --seconds 10 --command status --command 'trace {"level":"full"}'

Commands are sent once the subscription is live (after the first message), so
a command such as trace, and the command events, show in what is checked.

Exit status 0 only if every expected topic was received at least once, no
message failed validation, and every command got an "ok": true reply.
"""

import argparse
import json
import sys
import time

import zmq

SCHEMA_VERSION = 1

# Type specs: "int" (JSON integer), "uint" (integer >= 0), "number" (any JSON
# number), "str", "bool", "object" (any JSON object), ("list", spec),
# ("map", spec) (object whose values all match spec), ("optional", spec) (a
# field that may be absent, meaning 0, but matches spec when present), or a
# dict of field -> spec (a nested object whose listed fields are required
# unless optional). Extra fields are allowed: later schema versions may add
# fields without bumping "v".
ENVELOPE = {"v": "int", "run": "str", "seq": "uint", "t": "int"}

MODEL = {
    "preset": "str", "vocab": "int", "hidden": "int", "layers": "int", "heads": "int",
    "head_dim": "int", "experts": "int", "top_k": "int", "expert_inter": "int",
    "shared_inter": "int", "max_seq": "int", "page_size": "int", "params": "int",
    "dtype": "str", "arch": "str", "attention": ("list", "str"),
}
ATTENTION_KINDS = {"mha", "mla", "kda", "gla"}
SPAN = {
    "device": "int", "layer": "int", "name": "str", "kind": "str", "start_us": "int",
    "dur_us": "int", "tokens": "int", "flops": "int", "bytes": "int",
}
KERNEL = {
    "device": "int", "name": "str", "kind": "str", "count": "int", "total_us": "int",
    "max_us": "int", "flops": "int", "bytes": "int",
}
DEVICE_OCC = {
    "device": "int", "kv_pages_used": "int", "kv_pages_total": "int", "running": "int",
    "state_slots_used": "int", "state_slots_total": "int", "kv_bytes_used": "int",
    "kv_bytes_total": "int", "state_bytes_used": "int", "state_bytes_total": "int",
    # Prefix cache; added after the first release of the message, so optional.
    "cache_tokens": ("optional", "int"), "cache_nodes": ("optional", "int"),
    "cache_slots": ("optional", "int"), "cache_hit_rate": ("optional", "number"),
    "cache_evicted_pages": ("optional", "int"),
}
REQUEST_PROGRESS = {
    "id": "int", "device": "int", "prompt_tokens": "int", "computed": "int",
    "generated": "int", "max_new_tokens": "int", "cached_tokens": "int", "preemptions": "int",
    "arrival_us": "int", "first_token_us": "int",
}

TOPICS = {
    "meta": {
        "model": MODEL, "devices": "int", "layout": "str", "trace_level": "str",
        "paused": "bool", "started_unix_ms": "int", "workload": "str",
        "expert_device": ("list", "int"), "kv_pages_per_device": "int",
        "state_slots_per_device": "int", "policy": ("optional", "object"),
    },
    "step": {
        "step": "int", "start_us": "int", "dur_us": "int", "prefill_tokens": "int",
        "decode_tokens": "int", "batch_requests": "int", "running": "int", "waiting": "int",
        "finished_total": "int", "generated_total": "int",
    },
    "spans": {"step": "int", "spans": ("list", SPAN)},
    "kstats": {"step": "int", "kernels": ("list", KERNEL)},
    "occupancy": {
        "step": "int", "devices": ("list", DEVICE_OCC), "running": "int", "waiting": "int",
        "prefill_tokens": "int", "decode_tokens": "int",
    },
    "experts": {"step": "int", "counts": ("list", ("list", "int")),
                "expert_device": ("list", "int"),
                "phy2log": ("optional", ("list", ("list", "int"))),
                "slot_device": ("optional", ("list", "int")),
                "balancedness": ("optional", ("list", "number"))},
    "request": {
        "id": "int", "device": "int", "prompt_tokens": "int", "output_tokens": "int",
        "arrival_us": "int", "ttft_us": "int", "tpot_us": "int", "e2e_us": "int",
        "finish": "str", "cached_tokens": ("optional", "int"),
        "preemptions": ("optional", "int"),
    },
    "requests": {
        "step": "int", "running": ("list", REQUEST_PROGRESS),
        "waiting": ("list", REQUEST_PROGRESS), "running_total": "int", "waiting_total": "int",
    },
    "event": {"kind": "str", "name": "str", "phase": "str", "message": "str",
              "detail": "object"},
    "heartbeat": {
        "interval_ms": "int", "state": "str", "sent_total": "int", "dropped_total": "int",
        "dropped": ("map", "int"), "step": "int",
    },
}

ENUMS = {
    ("meta", "layout"): {"EP", "TP"},
    ("meta", "trace_level"): {"off", "summary", "full"},
    ("heartbeat", "state"): {"running", "paused", "stopping"},
    ("request", "finish"): {"eos", "length", "cancelled"},
    ("event", "kind"): {"command", "lifecycle", "warning", "scheduler", "rebalance", "switch",
                        "policy", "calibrate"},
    ("event", "phase"): {"received", "done", "failed", "", "planned", "layer", "measured",
                         "skipped", "started", "refused"},
}


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def check(value, spec, path, errors):
    """Appends to errors every way value fails spec; path names the field."""
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            errors.append(f"{path}: expected object, got {type(value).__name__}")
            return
        for key, sub in spec.items():
            where = f"{path}.{key}" if path else key
            if key in value:
                check(value[key], sub, where, errors)
            elif not (isinstance(sub, tuple) and sub[0] == "optional"):
                errors.append(f"{where}: missing")
    elif isinstance(spec, tuple):
        kind, sub = spec
        if kind == "optional":
            check(value, sub, path, errors)
        elif kind == "list":
            if not isinstance(value, list):
                errors.append(f"{path}: expected array, got {type(value).__name__}")
                return
            for i, item in enumerate(value):
                check(item, sub, f"{path}[{i}]", errors)
        else:  # map
            if not isinstance(value, dict):
                errors.append(f"{path}: expected object, got {type(value).__name__}")
                return
            for key, item in value.items():
                check(item, sub, f"{path}.{key}", errors)
    elif spec == "int":
        if not is_int(value):
            errors.append(f"{path}: expected integer, got {value!r}")
    elif spec == "uint":
        if not is_int(value) or value < 0:
            errors.append(f"{path}: expected non-negative integer, got {value!r}")
    elif spec == "number":
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)):
            errors.append(f"{path}: expected number, got {value!r}")
    elif spec == "str":
        if not isinstance(value, str):
            errors.append(f"{path}: expected string, got {value!r}")
    elif spec == "bool":
        if not isinstance(value, bool):
            errors.append(f"{path}: expected boolean, got {value!r}")
    elif spec == "object":
        if not isinstance(value, dict):
            errors.append(f"{path}: expected object, got {type(value).__name__}")
    else:
        raise ValueError(f"bad spec {spec!r}")


def validate(topic, body):
    """Returns (message dict, []) or (None, [errors]) for one two-frame message."""
    if topic not in TOPICS:
        return None, [f"unknown topic {topic!r}"]
    try:
        msg = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return None, [f"{topic}: body is not UTF-8 JSON: {e}"]
    errors = []
    check(msg, ENVELOPE, "", errors)
    if errors:
        return None, [f"{topic}: {e}" for e in errors]
    if msg["v"] != SCHEMA_VERSION:
        return None, [f"{topic}: schema version {msg['v']}, client speaks {SCHEMA_VERSION}"]
    check(msg, TOPICS[topic], "", errors)
    for (t, field), allowed in ENUMS.items():
        if t == topic and not errors and msg[field] not in allowed:
            errors.append(f"{field}: {msg[field]!r} not one of {sorted(allowed)}")
    if topic == "meta" and not errors:
        model = msg["model"]
        for i, kind in enumerate(model["attention"]):
            if kind not in ATTENTION_KINDS:
                errors.append(f"model.attention[{i}]: {kind!r} not one of "
                              f"{sorted(ATTENTION_KINDS)}")
        if len(model["attention"]) != model["layers"]:
            errors.append(f"model.attention: {len(model['attention'])} entries for "
                          f"{model['layers']} layers")
    if topic == "requests" and not errors:
        for name in ("running", "waiting"):
            if msg[f"{name}_total"] < len(msg[name]):
                errors.append(f"{name}_total: {msg[name + '_total']} is below the "
                              f"{len(msg[name])} entries of {name}")
    if errors:
        return None, [f"{topic}: {e}" for e in errors]
    return msg, []


class GapCounter:
    """Documented rule: per (run, topic), next seq expected = last + 1; a
    larger seq counts the skipped numbers; a new run id or a smaller seq
    restarts tracking without counting."""

    def __init__(self):
        self.last = {}  # topic -> (run, seq)
        self.gaps = {}  # topic -> missing messages

    def see(self, topic, run, seq):
        prev = self.last.get(topic)
        if prev is not None and prev[0] == run and seq > prev[1] + 1:
            self.gaps[topic] = self.gaps.get(topic, 0) + seq - prev[1] - 1
        self.last[topic] = (run, seq)


def listen(endpoint, expected, seconds, verbose, on_first=None):
    """Validates messages until every expected topic was seen or time is up.

    on_first() runs once, after the first message arrives: the subscription is
    live from then on (PUB/SUB drops what is sent before a subscriber joins),
    so what it triggers (command events, trace changes) is observed.
    """
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"")  # all topics
    sub.connect(endpoint)
    counts, errors, gaps = {}, [], GapCounter()
    last_heartbeat = None
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if expected and all(counts.get(t, 0) > 0 for t in expected):
                break
            left_ms = max(1, int((deadline - time.monotonic()) * 1000))
            if not sub.poll(min(left_ms, 200)):
                continue
            frames = sub.recv_multipart()
            if on_first is not None:
                on_first()
                on_first = None
            if len(frames) != 2:
                errors.append(f"message with {len(frames)} frames, expected 2")
                continue
            try:
                topic = frames[0].decode("ascii")
            except UnicodeDecodeError:
                errors.append(f"topic frame is not ASCII: {frames[0]!r}")
                continue
            msg, errs = validate(topic, frames[1])
            if errs:
                errors.extend(errs)
                continue
            counts[topic] = counts.get(topic, 0) + 1
            gaps.see(topic, msg["run"], msg["seq"])
            if topic == "heartbeat":
                last_heartbeat = msg
            if verbose:
                print(f"  {topic:<10} seq={msg['seq']:<6} run={msg['run']}")
    finally:
        sub.close()
    return counts, errors, gaps.gaps, last_heartbeat


def call(endpoint, cmd, args, request_id, timeout_s):
    """One request over REQ; returns the decoded reply or raises TimeoutError."""
    ctx = zmq.Context.instance()
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(endpoint)
    try:
        req.send(json.dumps({"id": request_id, "cmd": cmd, "args": args}).encode("utf-8"))
        if not req.poll(int(timeout_s * 1000)):
            raise TimeoutError(f"no reply from {endpoint} within {timeout_s} s to {cmd!r}")
        return json.loads(req.recv().decode("utf-8"))
    finally:
        req.close()  # a REQ that timed out cannot be reused


def check_reply(reply, request_id):
    errors = []
    if not isinstance(reply, dict):
        return ["reply is not a JSON object"]
    if reply.get("id") != request_id:
        errors.append(f"reply id {reply.get('id')!r} != request id {request_id!r}")
    if not isinstance(reply.get("ok"), bool):
        errors.append("reply field 'ok' missing or not a boolean")
    elif reply["ok"]:
        if "result" not in reply:
            errors.append("ok reply without 'result'")
    else:
        err = reply.get("error")
        if not (isinstance(err, dict) and isinstance(err.get("code"), str)
                and isinstance(err.get("message"), str)):
            errors.append("error reply without error.code / error.message strings")
    return errors


def parse_command(text):
    """'trace {"level":"full"}' -> ("trace", {"level": "full"})."""
    name, _, rest = text.strip().partition(" ")
    args = json.loads(rest) if rest.strip() else {}
    if not isinstance(args, dict):
        raise argparse.ArgumentTypeError(f"args of {name!r} must be a JSON object")
    return name, args


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--telemetry", default="tcp://127.0.0.1:5555", help="PUB endpoint")
    ap.add_argument("--control", default="tcp://127.0.0.1:5556", help="ROUTER endpoint")
    ap.add_argument("--expect-topics", default="meta,heartbeat",
                    help="comma-separated topics that must each arrive at least once")
    ap.add_argument("--seconds", type=float, default=5.0,
                    help="listen at most this long (stops early once all expected arrived)")
    ap.add_argument("--command", action="append", default=[], type=parse_command,
                    help="command to send, optionally followed by JSON args; repeatable")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for a reply")
    ap.add_argument("-v", "--verbose", action="store_true")
    opts = ap.parse_args(argv)

    expected = [t for t in opts.expect_topics.split(",") if t]
    unknown = [t for t in expected if t not in TOPICS]
    if unknown:
        ap.error(f"unknown topics in --expect-topics: {unknown}")

    failures = []

    def send_commands():
        for i, (cmd, args) in enumerate(opts.command, start=1):
            try:
                reply = call(opts.control, cmd, args, i, opts.timeout)
            except (TimeoutError, ValueError) as e:
                failures.append(f"command {cmd!r}: {e}")
                print(f"command {cmd} -> {e}")
                continue
            print(f"command {cmd} {json.dumps(args)} -> {json.dumps(reply)}")
            bad = check_reply(reply, i)
            if bad:
                failures.append(f"command {cmd!r}: malformed reply: {'; '.join(bad)}")
            elif not reply["ok"]:
                failures.append(f"command {cmd!r} failed: {reply['error']['code']}: "
                                f"{reply['error']['message']}")

    counts, errors, gaps, heartbeat = listen(opts.telemetry, expected, opts.seconds,
                                             opts.verbose, on_first=send_commands)
    print(f"telemetry {opts.telemetry}:")
    for topic in TOPICS:
        mark = "expected" if topic in expected else ""
        print(f"  {topic:<10} {counts.get(topic, 0):>6} received  "
              f"{gaps.get(topic, 0):>4} missing by seq  {mark}")
    if heartbeat:
        print(f"  last heartbeat: state={heartbeat['state']} step={heartbeat['step']} "
              f"sent_total={heartbeat['sent_total']} dropped_total={heartbeat['dropped_total']}")
    for e in errors[:20]:
        print(f"  INVALID: {e}")
    if errors:
        failures.append(f"{len(errors)} invalid messages")
    missing = [t for t in expected if counts.get(t, 0) == 0]
    if missing:
        failures.append(f"expected topics never received: {','.join(missing)}")

    if failures:
        for f in failures:
            print(f"FAIL: {f}")
        return 1
    print("OK: all expected topics decoded and valid; all commands answered ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
