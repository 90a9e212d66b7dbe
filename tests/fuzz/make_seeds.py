#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: tests/fuzz/corpus/<target>/.

Each target gets a handful of small inputs, valid ones (so the fuzzer starts from files the
readers accept and mutates them into near-misses) and invalid ones (one per documented error, so
every error path is reached from the first run). The input formats are in fuzz_inputs.h.

    python3 tests/fuzz/make_seeds.py      # rewrites the seed folders; the files are committed

Only the standard library: the safetensors files are written by hand, as the format describes
(8-byte little-endian header length, JSON header padded to 8 bytes, data), with the
"scratchformer.checksum" metadata that train/checkpoint/safetensors.cpp writes.
"""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SEEDS = HERE / "corpus"


def write(target, name, data):
    folder = SEEDS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


# ---- safetensors ----

def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "fnv1a64:%016x" % h


def safetensors(tensors, metadata=None, checksum=True, header_override=None, data_override=None):
    """tensors: [(name, dtype, shape, bytes)] in data order -> the file's bytes."""
    header, data, offset = {}, b"", 0
    meta = dict(metadata or {})
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    if checksum:
        meta["scratchformer.checksum"] = fnv1a64(data)
    if meta:
        header = {"__metadata__": meta, **header}
    text = header_override if header_override is not None else json.dumps(header, separators=(",", ":"))
    text = text.encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + (data if data_override is None else data_override)


def f32(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def f64(*xs):
    return struct.pack("<%dd" % len(xs), *xs)


def i64(*xs):
    return struct.pack("<%dq" % len(xs), *xs)


def safetensors_seeds():
    t = "safetensors"
    weight = ("encoder.embed.weight", "F32", [2, 3], f32(0.5, -1.0, 2.0, 3.25, 0.0, -0.125))
    write(t, "ok_one_f32", safetensors([weight], {"step": "1200"}))
    write(t, "ok_no_tensors", safetensors([]))
    write(t, "ok_three_dtypes", safetensors([
        ("a", "F32", [2], f32(1.0, 2.0)),
        ("b", "F64", [1, 2], f64(3.0, -4.5)),
        ("step", "I64", [], i64(1200)),  # a 0-d tensor
    ], {"step": "1200", "optimizer": "adam"}))
    write(t, "ok_zero_size", safetensors([("empty", "F32", [0, 4], b""), ("x", "I64", [3], i64(1, -2, 3))]))
    write(t, "ok_no_checksum", safetensors([("w", "F64", [2, 2], f64(1, 2, 3, 4))], checksum=False))
    write(t, "bad_checksum", safetensors([weight], data_override=f32(0.5, -1.0, 2.0, 3.25, 0.0, 0.125)))
    write(t, "bad_truncated", safetensors([weight])[:-5])
    write(t, "bad_dtype", safetensors([("w", "BF16", [2], b"\0\0\0\0")], checksum=False))
    write(t, "bad_overlap", safetensors([], checksum=False, data_override=f32(1, 2, 3),
                                        header_override='{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                                        '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'))
    write(t, "bad_shape_bytes", safetensors([], checksum=False, data_override=f32(1, 2),
                                            header_override='{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}'))
    write(t, "bad_header_len", struct.pack("<Q", 1 << 40) + b"{}")
    write(t, "bad_json", safetensors([], checksum=False, header_override='{"a": {"dtype": "F32", "shape": [1,'))


# ---- config ----

def config_seeds():
    t = "config"
    reverse = (ROOT / "configs" / "reverse.toml").read_text(encoding="utf-8")
    write(t, "ok_reverse", reverse)
    # The same settings without comments: a shorter start for mutations.
    plain = "\n".join(line.split("  #")[0].rstrip() for line in reverse.splitlines()
                      if not line.startswith("#")).strip() + "\n"
    write(t, "ok_reverse_plain", plain)
    required = ('[data]\ntrain_src = "train.de"\ntrain_tgt = "train.en"\nvalid_src = "valid.de"\n'
                'valid_tgt = "valid.en"\n\n[run]\ndir = "runs/x"\n')
    write(t, "ok_required_only", required)
    write(t, "ok_overrides", "#set train.lr=0.5\n#set model.norm=rmsnorm\n#set run.dir=\"runs/try 2\"\n"
                             "#set model.share_embeddings=false\n" + required +
                             "\n[model]\nd_model = 128\nn_heads = 8\nn_kv_heads = 2\npositional = \"rope\"\n"
                             "activation = 'swiglu'\ndropout = 1e-1\n\n[train]\nschedule = \"noam\"\n"
                             "warmup_steps = 4_000\nlr = 2\nmin_lr = 0.0\n")
    write(t, "bad_typo_key", required + "\n[model]\nd_modle = 64\n")
    write(t, "bad_type", required + "\n[model]\nd_model = \"64\"\n")
    write(t, "bad_syntax", required + "\n[train]\nlr = = 0.5\n")
    write(t, "bad_divisible", required + "\n[model]\nd_model = 250\nn_heads = 8\n")
    write(t, "bad_missing_required", '[data]\ntrain_src = "a"\n')
    write(t, "bad_unknown_section", required + "\n[modle]\nd_model = 64\n")
    write(t, "bad_override", "#set train.lr\n#set nosuch.key=1\n" + required)
    write(t, "bad_toml_kinds", required + '\n[train]\nseed = 1979-05-27T07:32:00Z\nlr = inf\n'
                                          'beta1 = [0.9, 0.99]\neps = { a = 1 }\nmax_steps = 0x1F\n'
                                          "optimizer = '''\nadam'''\n")
    write(t, "bad_array_of_tables", required + "\n[[train]]\nseed = 1\n")


# ---- corpus ----

def corpus_seeds():
    t = "corpus"
    sep = b"\xff"
    de = "Zwei junge weiße Männer sind im Freien.\nEin kleines Mädchen klettert.\n"
    en = "Two young, White males are outside.\nA little girl climbing.\n"
    write(t, "ok_de_en", de.encode() + sep + en.encode())
    write(t, "ok_zh_en", "嗨。\n你好。\n你用跑的。\n".encode() + sep + b"Hi.\nHi.\nRun.\n")
    write(t, "ok_crlf_bom_no_final_newline", b"\xef\xbb\xbfbe wa ra\r\nzu wa ra" + sep + b"ra wa be\nra wa zu\n")
    write(t, "ok_same_file", "emoji 😀 and € and ä\nsecond line\n".encode())  # no separator: both sides
    write(t, "bad_overlong", b"ok\n\xc0\x80\n" + sep + b"a\nb\n")
    write(t, "bad_surrogate", b"a\n" + sep + b"\xed\xa0\x80\n")
    write(t, "bad_above_max", b"\xf4\x90\x80\x80\n" + sep + b"a\n")
    write(t, "bad_cut_short", b"a\nb \xe2\x82" + sep + b"a\nb\n")
    write(t, "bad_line_counts", b"one\ntwo\nthree\n" + sep + b"one\ntwo\n")
    write(t, "bad_empty", sep)


if __name__ == "__main__":
    safetensors_seeds()
    config_seeds()
    corpus_seeds()
