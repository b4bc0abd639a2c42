#!/usr/bin/env python3
"""Expected token ids for tests/tokenizer, from the trusted peer llama.cpp.

Tokenizes a fixed list of hard strings with llama-cpp-python (llama.cpp's tokenizer, vocab_only) and
a cached model, and writes for each case the text (also as hex bytes: the authoritative input),
add_bos (llama_tokenize's add_special: BOS only where the model's metadata asks for it),
parse_special and the token ids:

    --model gemma3  (default)  gemma-3-270m-q4_k_m.gguf        -> tests/data/tokenizer/gemma3_tokens.json
    --model smollm2            SmolLM2-135M-Instruct.Q4_1.gguf -> tests/data/tokenizer/smollm2_tokens.json

The test suite reads only the JSON; it does not need llama-cpp-python.

Reproduce from the repository root:

    pip install llama-cpp-python==0.3.16
    bash scripts/get-model.sh all
    python3 tools/make_tokenizer_golden.py && python3 tools/make_tokenizer_golden.py --model smollm2
"""

from __future__ import annotations

import argparse
import json
import pathlib

import llama_cpp

from golden_common import ggml_commit, model_cache, sha256_of

MODEL_FILES = {"gemma3": "gemma-3-270m-q4_k_m.gguf", "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf"}
OUT_DIR = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "tokenizer"

# (name, text as bytes, parse_special): Gemma 3's cases (SPM with user-defined whitespace/HTML tokens).
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


# SmolLM2 (byte-level BPE, pre-tokenizer "smollm": every digit apart, GPT-2 style words): the
# Gemma cases that are plain text for it, then ChatML and its other special tokens, code, digits
# and whitespace.
SMOLLM2_CASES: list[tuple[str, bytes, bool]] = [
    c
    for c in CASES
    if c[0] not in ("turns_plain", "turns_special", "control_plain", "control_special")
] + [
    ("chatml_plain", "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n".encode(), False),
    ("chatml_special", "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n".encode(), True),
    (
        "chatml_system",
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n".encode(),
        True,
    ),
    ("specials_plain", "<|endoftext|> <file_sep>x<repo_name>y <|im_end|>".encode(), False),
    ("specials_special", "<|endoftext|> <file_sep>x<repo_name>y <|im_end|>".encode(), True),
    ("digits", "0123456789 00000 3.14 1e-5 12,345 v2.0.1 #42 $9.99 100% 2024-12-01".encode(), False),
    ("contractions", "I'm you're he's we'll they'd can't WON'T It'S o'clock".encode(), False),
    (
        "code_python",
        'for i in range(10):\n\tif i % 2 == 0:\n\t\tprint(f"{i:03d}")  # even\n    else: pass\n'.encode(),
        False,
    ),
    ("code_json", '{"key": [1, 2.5, -3e10], "s": "a\\nb", "nested": {"x": null}}'.encode(), False),
    ("code_cpp", "template <typename T>\nT* f(const std::vector<T>& v) { return &v[0]; }\n".encode(), False),
    ("whitespace_mix", " \t \n \r\n  x  \u00a0 y\u3000z\n\n\n \t".encode(), False),
    ("url_email", "https://example.com/path?q=1&x=y_z user.name@mail.example.org".encode(), False),
    ("combining", "e\u0301 n\u0303 \u00c5 A\u030a \ufb01 \u2126".encode(), False),
    ("repeats", ("a" * 40 + " " + "-" * 40 + " " + "ab" * 20).encode(), False),
    ("rtl", "مرحبا بالعالم שלום עולם".encode(), False),
    ("devanagari", "नमस्ते दुनिया".encode(), False),
]
# Whole files tokenized as well (SmolLM2 only; skipped when absent): the demo's document.
SMOLLM2_FILES = [pathlib.Path("/usr/share/common-licenses/GPL-3")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODEL_FILES), default="gemma3", help="cached model (scripts/get-model.sh NAME)")
    ap.add_argument("--model-path", type=pathlib.Path, help="GGUF file (default: the cached model)")
    ap.add_argument("--out", type=pathlib.Path, help="default: tests/data/tokenizer/<model>_tokens.json")
    args = ap.parse_args()
    model_path = args.model_path or model_cache() / MODEL_FILES[args.model]
    out = args.out or OUT_DIR / f"{args.model}_tokens.json"

    llm = llama_cpp.Llama(model_path=str(model_path), vocab_only=True, verbose=False)
    cases = []
    for name, data, special in CASES if args.model == "gemma3" else SMOLLM2_CASES:
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
    file_cases = []
    for path in SMOLLM2_FILES if args.model == "smollm2" else []:
        if path.is_file():
            ids = llm.tokenize(path.read_bytes(), add_bos=True, special=False)
            file_cases.append({"path": str(path), "sha256": sha256_of(path), "add_bos": True, "parse_special": False,
                               "n_tokens": len(ids), "token_ids": ids})
    doc = {
        "generator": "tools/make_tokenizer_golden.py",
        "peer": {"llama_cpp_python_version": llama_cpp.__version__, "ggml_commit": ggml_commit()},
        "model": {"file": model_path.name, "sha256": sha256_of(model_path), "n_vocab": llm.n_vocab()},
        "note": "hex is the authoritative input (text is its UTF-8 decoding with U+FFFD for invalid bytes); "
        "token_ids = llama_tokenize(hex bytes, add_special=add_bos, parse_special)",
        "cases": cases,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        # One case per line keeps the diff of a regenerated file readable.
        f.write("{\n")
        for k in ("generator", "peer", "model", "note"):
            f.write(f"  {json.dumps(k)}: {json.dumps(doc[k], ensure_ascii=False)},\n")
        f.write('  "cases": [\n')
        f.write(",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n  ]")
        if file_cases:
            f.write(',\n  "file_cases": [\n')
            f.write(",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in file_cases))
            f.write("\n  ]")
        f.write("\n}\n")
    print(f"wrote {out} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
