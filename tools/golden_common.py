"""Helpers shared by the golden-data recorders (tools/make_*_golden.py).

They drive llama.cpp through llama-cpp-python; dev tools only, never imported by the test suite.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import pathlib

import numpy as np
import llama_cpp


def model_cache() -> pathlib.Path:
    """$SNAPKV_MODELS or ~/.cache/snapkv/models (where scripts/get-model.sh stores models)."""
    cache = os.environ.get("SNAPKV_MODELS") or str(pathlib.Path.home() / ".cache" / "snapkv" / "models")
    return pathlib.Path(cache)


def sha256_of(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def ggml_commit() -> str | None:
    """The commit of the llama.cpp/ggml tree llama-cpp-python was built from, if exported."""
    lib = pathlib.Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"
    try:
        f = ctypes.CDLL(str(lib)).ggml_commit
        f.restype = ctypes.c_char_p
        return f().decode()
    except (OSError, AttributeError):
        return None


def f32_json(x: float) -> float:
    """Shortest decimal that round-trips the float32 value (keeps the JSON compact)."""
    return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


def prefix_by_tokens(llm: llama_cpp.Llama, text: str, min_tokens: int) -> str:
    """The shortest whole-line prefix of `text` whose tokenization (add_special) has >= min_tokens."""
    out = ""
    for line in text.splitlines(keepends=True):
        out += line
        if len(llm.tokenize(out.encode(), add_bos=True)) >= min_tokens:
            return out
    raise SystemExit(f"text has fewer than {min_tokens} tokens")


def dump_json(obj, level: int = 0) -> str:
    """JSON with one key per line, but lists of numbers (or of number pairs) kept on one line."""

    def flat(x) -> bool:
        return isinstance(x, list) and all(
            isinstance(e, (int, float)) or (isinstance(e, list) and all(isinstance(v, (int, float)) for v in e))
            for e in x
        )

    pad, pad1 = " " * level, " " * (level + 1)
    if isinstance(obj, dict):
        items = [f"{pad1}{json.dumps(k)}: {dump_json(v, level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and not flat(obj):
        return "[\n" + ",\n".join(pad1 + dump_json(v, level + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def last_logits(llm: llama_cpp.Llama) -> np.ndarray:
    """Copy of the logits of the last evaluated position (n_vocab float32)."""
    p = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(p, shape=(llm.n_vocab(),)).astype(np.float32, copy=True)


def top_k(logits: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Top-k (id, logit), descending logit, ties broken by the lower id."""
    order = np.lexsort((np.arange(logits.size), -logits))[:k]
    return [(int(i), float(logits[i])) for i in order]
