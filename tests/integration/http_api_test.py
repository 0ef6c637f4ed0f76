#!/usr/bin/env python3
"""The OpenAI-compatible HTTP API of the real engine (docs/HTTP.md).

Starts `moe-engine serve --model tiny --devices 2 --workload none
--http-port PORT`, so every request comes from this test, and checks with
curl and Python's standard library only:
  completions (text and token-id prompts), streaming and not; chat,
  streaming and not; /v1/models; /health; the OpenAI error bodies (malformed
  JSON, wrong type, context too long, unknown model, unknown route); greedy
  determinism; and /metrics, parsed with prometheus_client, whose counters
  move with the requests.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

MODEL = "tiny"


class Api:
    def __init__(self, port):
        self.port = port
        self.base = f"http://127.0.0.1:{port}"

    def request(self, method, path, body=None, raw=None, timeout=60):
        """(status, parsed JSON or text) for one request."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, ctype, text = r.status, r.headers.get("Content-Type", ""), r.read()
        except urllib.error.HTTPError as e:
            status, ctype, text = e.code, e.headers.get("Content-Type", ""), e.read()
        text = text.decode()
        return status, (json.loads(text) if ctype.startswith("application/json") else text)

    def post(self, path, body=None, raw=None):
        return self.request("POST", path, body=body, raw=raw)

    def get(self, path):
        return self.request("GET", path)

    def stream(self, path, body):
        """The `data:` payloads of a streaming response, in order, decoded
        (the final "[DONE]" kept as a string); comment lines skipped."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200, (r.status, r.read())
        assert r.getheader("Content-Type").startswith("text/event-stream"), r.getheaders()
        events, buf = [], b""
        while True:
            chunk = r.read1(65536)
            if not chunk:
                break
            buf += chunk
        conn.close()
        text = buf.decode()
        assert text.endswith("\n\n"), text[-200:]
        for block in text.split("\n\n")[:-1]:
            if block.startswith(":"):
                continue
            assert block.startswith("data: "), block
            payload = block[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
        assert events and events[-1] == "[DONE]", events[-3:]
        assert "[DONE]" not in events[:-1], events
        return events[:-1]

    def metrics(self):
        status, text = self.request("GET", "/metrics")
        assert status == 200, (status, text)
        samples = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                assert s.labels.get("model_name") == MODEL, s
                key = (s.name, tuple(sorted((k, v) for k, v in s.labels.items()
                                            if k != "model_name")))
                samples[key] = s.value
        return samples


def check_error(result, status, param=None, code=None, words=""):
    got_status, body = result
    assert got_status == status, result
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert err["type"] == ("server_error" if status >= 500 else "invalid_request_error"), err
    assert err["param"] == param, err
    assert err["code"] == code, err
    assert words.lower() in err["message"].lower(), err


def check_usage(usage):
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0, usage
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"], usage


def completions(api):
    req = {"model": MODEL, "prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0}
    status, a = api.post("/v1/completions", req)
    assert status == 200, a
    assert a["object"] == "text_completion" and a["id"].startswith("cmpl-"), a
    assert a["model"] == MODEL and isinstance(a["created"], int), a
    choice = a["choices"][0]
    assert choice["index"] == 0 and isinstance(choice["text"], str), a
    assert choice["finish_reason"] in ("stop", "length"), a
    check_usage(a["usage"])
    assert a["usage"]["completion_tokens"] <= 12, a
    if choice["finish_reason"] == "length":
        assert a["usage"]["completion_tokens"] == 12, a

    # Greedy is deterministic: the same request gives the same text.
    status, b = api.post("/v1/completions", req)
    assert status == 200 and b["choices"][0]["text"] == choice["text"], (a, b)
    assert b["id"] != a["id"], (a["id"], b["id"])

    # Streaming: the pieces join to the same text; the last chunk finishes.
    events = api.stream("/v1/completions", dict(req, stream=True,
                                                stream_options={"include_usage": True}))
    usage = events[-1]
    assert usage["choices"] == [] and usage["usage"] == a["usage"], (usage, a)
    chunks = events[:-1]
    assert all(c["object"] == "text_completion" and c["id"] == chunks[0]["id"] for c in chunks)
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]), chunks
    assert chunks[-1]["choices"][0]["finish_reason"] == choice["finish_reason"], chunks[-1]
    assert "".join(c["choices"][0]["text"] for c in chunks) == choice["text"], chunks

    # A token-id prompt is the same prompt as its text (BOS + bytes).
    ids = [256] + list("The quick brown fox".encode())
    status, c = api.post("/v1/completions", dict(req, prompt=ids))
    assert status == 200 and c["choices"][0]["text"] == choice["text"], (a, c)
    assert c["usage"]["prompt_tokens"] == len(ids), c

    # curl, as a user would type it.
    out = subprocess.run(["curl", "-sS", "-N", f"{api.base}/v1/completions",
                          "-H", "Content-Type: application/json",
                          "-d", json.dumps(dict(req, stream=True))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("data: [DONE]"), out.stdout[-200:]
    text = "".join(json.loads(line[len("data: "):])["choices"][0]["text"]
                   for line in out.stdout.splitlines()
                   if line.startswith("data: {"))
    assert text == choice["text"], (text, choice["text"])


def chat(api):
    req = {"model": MODEL, "max_tokens": 10, "temperature": 0, "seed": 7,
           "messages": [{"role": "system", "content": "You are terse."},
                        {"role": "user", "content": "Say hello."}]}
    status, a = api.post("/v1/chat/completions", req)
    assert status == 200, a
    assert a["object"] == "chat.completion" and a["id"].startswith("chatcmpl-"), a
    msg = a["choices"][0]["message"]
    assert msg["role"] == "assistant" and isinstance(msg["content"], str), a
    assert a["choices"][0]["finish_reason"] in ("stop", "length"), a
    check_usage(a["usage"])
    template = "<|system|>\nYou are terse.\n<|user|>\nSay hello.\n<|assistant|>\n"
    assert a["usage"]["prompt_tokens"] == 1 + len(template.encode()), a["usage"]

    events = api.stream("/v1/chat/completions", dict(req, stream=True))
    assert events[0]["object"] == "chat.completion.chunk", events[0]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}, events[0]
    last = events[-1]["choices"][0]
    assert last["delta"] == {} and last["finish_reason"] == a["choices"][0]["finish_reason"]
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events[1:-1])
    assert text == msg["content"], (text, msg["content"])


def errors(api):
    check_error(api.post("/v1/completions", raw=b"{not json"), 400, words="JSON")
    check_error(api.post("/v1/chat/completions", raw=b"[1,2]"), 400, words="object")
    check_error(api.post("/v1/completions", {"prompt": "x", "max_tokens": "ten"}), 400,
                param="max_tokens", words="integer")
    check_error(api.post("/v1/chat/completions", {"messages": "hi"}), 400, param="messages",
                words="array")
    check_error(api.post("/v1/completions", {"prompt": "x", "temperature": 5}), 400,
                param="temperature", words="between 0 and 2")
    check_error(api.post("/v1/completions", {"prompt": ["a", "b"]}), 400, param="prompt",
                words="batched")
    check_error(api.post("/v1/completions", {"prompt": [256, 99999]}), 400, param="prompt",
                words="vocabulary")
    check_error(api.post("/v1/completions", {"prompt": "x", "max_tokens": 1000000}), 400,
                param="prompt", code="context_length_exceeded",
                words="maximum context length")
    check_error(api.post("/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "x" * 5000}]}), 400,
                param="messages", code="context_length_exceeded", words="in the messages")
    check_error(api.post("/v1/completions", {"prompt": "x", "model": "gpt-4o"}), 404,
                param="model", code="model_not_found", words="gpt-4o")
    check_error(api.get("/v2/nothing"), 404, words="unknown route")


def disconnect(api):
    """A streaming client that hangs up mid-stream cancels its request."""
    def cancelled():
        return api.metrics()[("switchyard:num_requests_total", (("finish_reason", "cancelled"),))]

    before = cancelled()
    generated = api.metrics()[("switchyard:generation_tokens_total", ())]
    body = json.dumps({"prompt": "x", "stream": True, "ignore_eos": True,
                       "max_tokens": 1000}).encode()
    s = socket.create_connection(("127.0.0.1", api.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
              + body)
    got = b""
    while b"data: " not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    s.close()
    harness.wait_for(lambda: cancelled() == before + 1, 10, "the request to be cancelled")
    # It stopped early: far fewer than its 1000 tokens were generated.
    more = api.metrics()[("switchyard:generation_tokens_total", ())] - generated
    assert 0 < more < 500, more


def main():
    tmp = harness.tmpdir()
    tel, ctl = harness.endpoints()
    port = harness.free_port()
    engine = harness.Proc([harness.engine_bin(), "serve", "--model", MODEL, "--devices", "2",
                           "--workload", "none", "--http-port", str(port), "--telemetry", tel,
                           "--control", ctl], os.path.join(tmp, "engine.log"))
    api = Api(port)
    try:
        def healthy():
            if not engine.alive():
                raise AssertionError("engine exited:\n" + engine.tail())
            try:
                return api.get("/health")
            except OSError:
                return None

        status, body = harness.wait_for(lambda: (r := healthy()) and r[0] == 200 and r, 60,
                                        "/health to answer 200")
        assert body == {"status": "ok"}, body

        status, models = api.get("/v1/models")
        assert status == 200 and models["object"] == "list", models
        assert [m["id"] for m in models["data"]] == [MODEL], models
        assert models["data"][0]["object"] == "model", models
        assert models["data"][0]["owned_by"] == "switchyard", models

        before = api.metrics()
        completions(api)
        chat(api)
        errors(api)
        disconnect(api)
        after = harness.wait_for(
            lambda: (m := api.metrics())[("switchyard:num_requests_total",
                                          (("finish_reason", "eos"),))] +
            m[("switchyard:num_requests_total", (("finish_reason", "length"),))] >= 7 and m,
            10, "finished requests to be counted")

        def moved(name, labels=()):
            return after[(name, labels)] - before.get((name, labels), 0)

        assert moved("switchyard:prompt_tokens_total") > 0, after
        assert moved("switchyard:generation_tokens_total") > 0, after
        assert moved("switchyard:time_to_first_token_seconds_count") >= 7, after
        assert moved("switchyard:e2e_request_latency_seconds_count") >= 7, after
        assert after[("switchyard:e2e_request_latency_seconds_bucket", (("le", "+Inf"),))] == \
            after[("switchyard:e2e_request_latency_seconds_count", ())], after
        assert ("switchyard:num_running_reqs", ()) in after, sorted(after)[:10]
        assert ("switchyard:token_usage", ()) in after, sorted(after)[:10]
        assert engine.alive(), engine.tail()
    finally:
        engine.kill()
    print("http_api_test: ok")


if __name__ == "__main__":
    main()
