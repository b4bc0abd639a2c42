#!/usr/bin/env python3
"""Expected Gemma 3 token ids for tests/tokenizer, from the trusted peer llama.cpp.

Tokenizes a fixed list of hard strings with llama-cpp-python (llama.cpp's tokenizer, vocab_only) and
the default model gemma-3-270m-q4_k_m.gguf, and writes tests/data/tokenizer/gemma3_tokens.json:
for each case the text (also as hex bytes: the authoritative input), add_bos, parse_special and the
token ids. The test suite reads only the JSON; it does not need llama-cpp-python.

Reproduce from the repository root:

    pip install llama-cpp-python==0.3.16
    bash scripts/get-model.sh
    python3 tools/make_tokenizer_golden.py
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import pathlib

import llama_cpp

MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "tokenizer" / "gemma3_tokens.json"

# (name, text as bytes, parse_special)
CASES: list[tuple[str, bytes, bool]] = [
    ("capital", "The capital of France is".encode(), False),
    ("leading_space", " Hello world".encode(), False),
    ("space_runs", "Hello  world   with    runs     of spaces".encode(), False),
    ("leading_trailing", "  leading and trailing  ".encode(), False),
    ("only_spaces", "   ".encode(), False),
    ("newlines", "line one\nline two\n\nline three\n\n\n\nend\n".encode(), False),
    ("only_newline", "\n".encode(), False),
    ("tabs", "\tindented\n\t\tcode\t\t\tx".encode(), False),
    ("code", "def f(x):\n    return x**2  # square\n\nprint(f(3))".encode(), False),
    ("latin", "Führer, naïve café, Ærøskøbing, Cửa Việt".encode(), False),
    ("cyrillic", "нещо на Български".encode(), False),
    ("cjk", "我想在apple工作1314151天～ こんにちは 안녕하세요".encode(), False),
    ("khmer", "កាន់តែពិសេសអាចខលចេញ".encode(), False),
    ("emoji", "🦙.cpp 🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅".encode(), False),
    ("rare_chars", "Rare: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \U000E0041 \uE000 ꙮ 𓀀 \U0001FBF9".encode(), False),
    ("numbers", "3.14159 1234567890 1,000,000 2^32=4294967296".encode(), False),
    ("punctuation", "'' \"\"\" ``` ...!!! ??? ---=== I've 'RE you sure?".encode(), False),
    ("html_user_defined", "<table><tr><td>cell</td></tr></table> <b>bold</b> [multimodal] <s>x</s>".encode(), False),
    ("turns_plain", "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n".encode(), False),
    ("turns_special", "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n".encode(), True),
    ("control_plain", "<unused0> <mask> <eos> <bos>x".encode(), False),
    ("control_special", "<unused0> <mask> <eos> <bos>x".encode(), True),
    ("empty", b"", False),
    ("invalid_utf8", b"ab\xffcd\xc3 e\x80f \xe2\x82", False),
    (
        "paragraph",
        (
            "The GNU General Public License is a free, copyleft license for software and other kinds "
            "of works.\n\n  The licenses for most software and other practical works are designed\n"
            "to take away your freedom to share and change the works.  By contrast,\n"
        ).encode(),
        False,
    ),
]


def default_model() -> pathlib.Path:
    cache = os.environ.get("SNAPKV_MODELS") or str(pathlib.Path.home() / ".cache" / "snapkv" / "models")
    return pathlib.Path(cache) / MODEL_NAME


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=pathlib.Path, default=default_model())
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    args = ap.parse_args()

    llm = llama_cpp.Llama(model_path=str(args.model), vocab_only=True, verbose=False)
    cases = []
    for name, data, special in CASES:
        ids = llm.tokenize(data, add_bos=True, special=special)
        cases.append(
            {
                "name": name,
                "text": data.decode("utf-8", errors="replace"),
                "hex": data.hex(),
                "add_bos": True,
                "parse_special": special,
                "token_ids": ids,
            }
        )
    doc = {
        "generator": "tools/make_tokenizer_golden.py",
        "peer": {"llama_cpp_python_version": llama_cpp.__version__, "ggml_commit": ggml_commit()},
        "model": {"file": args.model.name, "sha256": sha256_of(args.model), "n_vocab": llm.n_vocab()},
        "note": "hex is the authoritative input (text is its UTF-8 decoding with U+FFFD for invalid bytes); "
        "token_ids = llama_tokenize(hex bytes, add_special=add_bos, parse_special)",
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        # One case per line keeps the diff of a regenerated file readable.
        f.write("{\n")
        for k in ("generator", "peer", "model", "note"):
            f.write(f"  {json.dumps(k)}: {json.dumps(doc[k], ensure_ascii=False)},\n")
        f.write('  "cases": [\n')
        f.write(",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n  ]\n}\n")
    print(f"wrote {args.out} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
