#!/usr/bin/env python3
"""Checkpoints end to end, through the moe-engine binary.

1. `make-checkpoint --preset tiny-hybrid` writes a Ling3-layout directory;
   `score --model DIR` prints exactly the logits of `score --preset`.
2. Damaged checkpoints fail with a message naming what is wrong: an extra
   key, a missing key, a wrong shape, a truncated file, an existing target.
3. `moe-engine --model DIR` serves a bounded workload and drains.
The safetensors edits are done here by hand (8-byte header length, JSON
header, data), which also checks that our files follow the public format.
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

TOKENS = "256,72,101,108,108,111,32,119,111,114,108,100"


def run(args, timeout=120):
    if args and args[0] not in ("make-checkpoint", "score", "bench"):
        args = args + ["--http-port", "0"]
    p = subprocess.run([harness.engine_bin()] + args, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def write_st(path, header, data):
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.write(data)


def shard_with(ckpt, name):
    for path in sorted(glob.glob(os.path.join(ckpt, "*.safetensors"))):
        header, _ = read_st(path)
        if name in header:
            return path
    raise AssertionError(f"{name} not in any shard of {ckpt}")


def damaged(src, tmp, tag, edit):
    dst = os.path.join(tmp, tag)
    shutil.copytree(src, dst)
    edit(dst)
    code, _, err = run(["score", "--model", dst, "--tokens", "1,2,3"])
    assert code != 0, f"{tag}: a damaged checkpoint was accepted"
    return err


def main():
    tmp = harness.tmpdir()
    ckpt = os.path.join(tmp, "ckpt")
    code, _, err = run(["make-checkpoint", "--preset", "tiny-hybrid", "--out", ckpt])
    assert code == 0, err
    assert os.path.exists(os.path.join(ckpt, "config.json"))
    config = json.load(open(os.path.join(ckpt, "config.json")))
    assert config["model_type"] == "bailing_hybrid", config
    assert glob.glob(os.path.join(ckpt, "*.safetensors")), os.listdir(ckpt)

    code, out_preset, err = run(["score", "--preset", "tiny-hybrid", "--tokens", TOKENS])
    assert code == 0, err
    code, out_ckpt, err = run(["score", "--model", ckpt, "--tokens", TOKENS])
    assert code == 0, err
    a, b = json.loads(out_preset)["logits"], json.loads(out_ckpt)["logits"]
    assert len(a) == len(TOKENS.split(",")) and len(a[0]) == 260, (len(a), len(a[0]))
    assert a == b, "checkpoint logits differ from the in-memory preset"

    code, _, err = run(["make-checkpoint", "--preset", "tiny-hybrid", "--out", ckpt])
    assert code != 0 and ckpt in err, err

    norm = "model.layers.0.input_layernorm.weight"

    def extra_key(d):
        path = shard_with(d, norm)
        header, data = read_st(path)
        entry = dict(header[norm])
        header["model.layers.0.attention.surprise.weight"] = entry  # shares bytes: still valid
        write_st(path, header, data)

    err = damaged(ckpt, tmp, "extra", extra_key)
    assert "model.layers.0.attention.surprise.weight" in err, err

    def missing_key(d):
        path = shard_with(d, norm)
        header, data = read_st(path)
        del header[norm]
        write_st(path, header, data)

    err = damaged(ckpt, tmp, "missing", missing_key)
    assert norm in err, err

    proj = "model.layers.0.attention.b_proj.weight"  # [heads, H]: not square

    def wrong_shape(d):
        path = shard_with(d, proj)
        header, data = read_st(path)
        header[proj]["shape"] = list(reversed(header[proj]["shape"]))
        write_st(path, header, data)

    err = damaged(ckpt, tmp, "shape", wrong_shape)
    assert proj in err and "shape" in err, err

    def truncated(d):
        path = sorted(glob.glob(os.path.join(d, "*.safetensors")))[-1]
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.truncate(size - 1000)

    err = damaged(ckpt, tmp, "truncated", truncated)
    assert "truncated" in err, err

    code, _, err = run(["--model", os.path.join(tmp, "nowhere")])
    assert code == 2 and "nowhere" in err, (code, err)

    tel, ctl = harness.endpoints()
    code, out, err = run(["--model", ckpt, "--devices", "2", "--requests", "6", "--rate", "50",
                          "--prompt-len", "8-40", "--output-len", "4-12", "--telemetry", tel,
                          "--control", ctl], timeout=120)
    assert code == 0, err
    print("checkpoint_test: ok")


if __name__ == "__main__":
    main()
