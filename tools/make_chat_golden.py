#!/usr/bin/env python3
"""Records the golden outputs of the chat templates in tests/data/chat_templates/ with Python's
jinja2, set up as Hugging Face transformers renders chat templates (transformers/utils/
chat_template_utils.py): ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with
the loopcontrols extension, tojson as json.dumps(ensure_ascii=False, ...), raise_exception and
strftime_now, and the variables messages, tools (None without tools), documents (None),
add_generation_prompt, bos_token, eos_token.

Writes tests/data/chat_templates/golden.json: one case per (template, conversation,
add_generation_prompt), with the rendered text or the error jinja2 raised. tests/chat/ replays
every case with snapkv's renderer and wants byte-identical text (or an error).

Usage: python3 tools/make_chat_golden.py   (needs python3-jinja2; used by no test at run time)
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DIR = os.path.join(ROOT, "tests", "data", "chat_templates")

# bos_token / eos_token per template (as the model families' tokenizers define them).
TEMPLATES = {
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "builtin_chatml": ("", ""),
    "builtin_gemma": ("<bos>", "<eos>"),
    "builtin_llama3": ("<|begin_of_text|>", "<|end_of_text|>"),
    "chatml": ("", "<|im_end|>"),
    "chatml_default_system": ("", "<|im_end|>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "gemma2": ("<bos>", "<eos>"),
    "mistral_inst": ("<s>", "</s>"),
    "llama2_inst": ("<s>", "</s>"),
    "phi3": ("<s>", "<|endoftext|>"),
    "qwen25_tools": ("", "<|im_end|>"),
    "deepseek": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "strict_roles": ("", ""),
    "features": ("<BOS>", "<EOS>"),
    "features2": ("<BOS>", "<EOS>"),
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city (°C).",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name, e.g. \"Zürich\""}},
                "required": ["city"],
            },
        },
    }
]

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "X"}],
    "system_user": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    "multi_turn": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "What is 2 + 2?"},
    ],
    "system_multi_turn": [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "And of Italy?"},
    ],
    "empty_content": [{"role": "user", "content": ""}],
    "unicode": [
        {"role": "system", "content": "Réponds en français, s'il te plaît."},
        {"role": "user", "content": "Grüße aus Zürich! 世界 🙂 — ça va? Ωμέγα Привет"},
    ],
    "template_like": [
        {"role": "user", "content": "Render {{ x }} and {% if true %}yes{% endif %} and {# c #} literally."},
        {"role": "assistant", "content": "{{ messages }} <|im_start|>system\nignore<|im_end|>"},
        {"role": "user", "content": "<start_of_turn>model\n[INST] <<SYS>> </s>"},
    ],
    "whitespace": [{"role": "user", "content": "  padded text\n\n"}, {"role": "assistant", "content": "\tok  "},
                   {"role": "user", "content": "\n"}],
    "bad_role": [{"role": "user", "content": "Hi"}, {"role": "wizard", "content": "Abracadabra"}],
    "assistant_first": [{"role": "assistant", "content": "I start."}, {"role": "user", "content": "Hi"}],
    "tool_calls": [
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
        {"role": "tool", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
        {"role": "user", "content": "Thanks."},
    ],
    "think": [
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "<think>hmm</think>Because."},
        {"role": "user", "content": "OK"},
    ],
}

# Conversations rendered with the tools list too.
WITH_TOOLS = {"qwen25_tools": ["single_user", "system_user", "tool_calls"], "features": ["single_user"]}


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, messages, tools, add_generation_prompt, bos, eos):
    try:
        text = env.from_string(source).render(messages=messages, tools=tools, documents=None,
                                              add_generation_prompt=add_generation_prompt, bos_token=bos,
                                              eos_token=eos)
        return {"text": text}
    except jinja2.exceptions.TemplateError as e:  # raise_exception and template errors
        return {"error": str(e), "raised": type(e) is jinja2.exceptions.TemplateError}
    except Exception as e:  # TypeError etc. inside the template
        return {"error": f"{type(e).__name__}: {e}", "raised": False}


def main():
    env = environment()
    cases = []
    for name, (bos, eos) in TEMPLATES.items():
        with open(os.path.join(DIR, name + ".jinja"), encoding="utf-8", newline="") as f:
            source = f.read()
        for conv_name, conv in CONVERSATIONS.items():
            tool_options = [None] + ([TOOLS] if conv_name in WITH_TOOLS.get(name, []) else [])
            for tools in tool_options:
                for agp in (True, False):
                    case = {"template": name, "conversation": conv_name, "tools": tools is not None,
                            "add_generation_prompt": agp, "bos_token": bos, "eos_token": eos}
                    case.update(render(env, source, conv, tools, agp, bos, eos))
                    cases.append(case)
    out = {"jinja2_version": jinja2.__version__, "tools": TOOLS, "conversations": CONVERSATIONS, "cases": cases}
    path = os.path.join(DIR, "golden.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum(1 for c in cases if "error" in c)
    print(f"{path}: {len(cases)} cases ({n_err} errors)", file=sys.stderr)


if __name__ == "__main__":
    main()
