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


# Small templates, each rendered for the conversation "single_user" with bos "<s>", eos "</s>":
# expressions, whitespace control and edge cases one at a time.
SNIPPETS = [
    "{{ messages[0]['content'] * 2 }}",
    "{% for m in messages %}{{ loop.index }}{% if not loop.last %},{% endif %}{% endfor %}",
    "{{ 'a' if false }}|",
    "{{ none ~ '' }}",
    "{{ [1,2,3][::-1] }} {{ [1,2,3][-2:] }} {{ 'abcdef'[1:5:2] }}",
    "{{ {'a': 1}['a'] }} {{ {'a': 1}.a }}",
    "{{ 1 == true }} {{ 0 == false }} {{ 1.0 == 1 }}",
    "{{ 'x' in ['x', 'y'] }} {{ 'z' in {'z': 1} }}",
    "{{ messages | length > 0 and messages[0].role == 'user' }}",
    "{% set x = [] %}{{ x | length }}{{ x is iterable }}",
    "  {% for i in [1,2] %}\n    {{ i }}\n  {% endfor %}\n",
    "{% if true %}\n  yes\n{% endif %}\nafter",
    "{%- for i in [1,2] -%}\n {{ i }} \n{%- endfor -%}",
    "a\n  {#- c -#}\n  b",
    "{{ '%s' }}",
    "{{ 3 | string | length }}",
    "{{ ' '.join(['a', 'b']) }}",
    "{{ 'abc'.startswith(('x', 'a')) }}",
    # sum's start, int's base (and jinja2's fallback to int(float(v))), round of an int, and the
    # start / end of str methods, in code points (session 52: these were ignored).
    "{{ [1,2,3]|sum(start=10) }} {{ [1,2,3]|sum(none, 10) }} {{ [1,2,3]|sum(start=0.5) }} {{ 42|round }} "
    "{{ 42|round(2) }} {{ 2.5|round }}",
    "{{ '0x1A'|int(base=16) }} {{ '1A'|int(0, 16) }} {{ '0b101'|int(base=0) }} {{ '0o17'|int(base=8) }} "
    "{{ '1_000'|int(base=0) }} {{ 'zz'|int(7, 16) }} {{ '12'|int(base=1) }} {{ '010'|int(base=0) }} "
    "{{ ' -0b11 '|int(base=2) }} {{ '+0x_ff'|int(base=16) }} {{ '1__0'|int(base=0) }} {{ '_1'|int(base=10) }} "
    "{{ '7fffffffffffffff'|int(base=16) }} {{ '-9223372036854775808'|int }} {{ '1e3'|int }}",
    "{{ 'abc'.startswith('a', 1) }} {{ 'abc'.startswith('b', 1) }} {{ 'abc'.startswith('', 3) }} "
    "{{ 'abc'.startswith('', 4) }} {{ 'abc'.endswith('b', 0, 2) }} {{ 'abc'.endswith(('x', 'b'), 0, -1) }} "
    "{{ 'héllo'.startswith('é', 1) }}",
    "{{ 'abc'.find('a', 1) }} {{ 'abc'.find('c', -1) }} {{ 'abc'.find('', 3) }} {{ 'abc'.find('', 4) }} "
    "{{ 'abcabc'.find('b', 2, 4) }} {{ 'abcabc'.find('bc', 2, 5) }} {{ 'abc'.count('a', 1) }} "
    "{{ 'abcabc'.count('bc', 1) }} {{ 'abc'.count('', 1) }} {{ 'abc'.count('', 5) }} {{ 'héllo'.find('l', 3) }} "
    "{{ 'héllo'.count('l', -2) }} {{ 'abcabc'.index('c', 3) }}",
    "{{ 'abc'.index('a', 1) }}",
    "{{ 'abc'.find('a', 'x') }}",
    "{{ 2.0 is even }} {{ 3.0 is odd }} {{ 2.5 is even }} {{ -1.0 is odd }} {{ 4 is even }} {{ 2 ** -1 }} {{ 4 ** 0.5 }} "
    "{{ (-8) ** 2.0 }} {{ 0.0 ** 0 }}",
    "{{ 'abc'.startswith('', 2, 1) }} {{ 'abc'.endswith('', 2, 1) }} {{ 'abc'.find('', 2, 1) }} "
    "{{ 'abc'.find('', 3, 2) }} {{ 'abc'.count('', 2, 1) }} {{ 'abc'.find('', 1, 1) }} {{ 'abc'.count('', 1, 1) }} "
    "{{ '1_000.5'|int }} {{ '0_1'|int(base=0) }} {{ '1__0.5'|int(7) }} {{ '1_000.5'|float }} {{ '_1.5'|float(2) }} "
    "{{ (-9223372036854775807 - 1)|float|int }} {{ '-9.2233720368547758e18'|int }} {{ 0.0 ** (-1e400) }}",
    "{{ 'nan(1)'|float(-1) }} {{ 'nan'|float }} {{ ' inf '|float }} {{ '1e5'|float }}",
    "{{ 'abc'.startswith(['a']) }}",
    "{{ 0 ** -1 }}",
    "{{ 10 ** 400.0 }}",
    r"{{ '\101\0102\7x\12y' }}|{{ '\08' }}|{{ '\777' }}|{{ '\u00e9\U0001F600' }}",  # octal escapes: code points
    "{{ messages[0].content.split('e') }}",
    "{{ 10 // 3 * 3 + 10 % 3 }}",
    "{{ 2 ** 3 ** 2 }}",
    "{{ -2 ** 2 }}",
    "{{ not true == false }}",
    "{{ 1 if 0 else 2 if 0 else 3 }}",
    "{{ 'a' ~ 1 + 2 }}",
    "{{ [1, 2] | join }}{{ (1, 2) | list }}",
    "{{ {'b': 1, 'a': 2} | tojson }}{{ [] | tojson }}{{ 'x' | tojson }}",
    "{{ 1.0 }} {{ 100.0 }} {{ 1e20 }} {{ 123456789012345678.0 }} {{ 0.000123 }}",
    "{{ 'Hello World' | lower | replace('o', '0') }}",
    "{% macro m(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(b=5, a=0) }}",
    "{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a * 2 %}{% endfor %}{{ ns.a }}",
    "{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}",
    "{% for c in 'héllo' %}[{{ c }}]{% endfor %}",
    "{{ 'héllo' | length }} {{ 'héllo'[1] }} {{ 'héllo' | upper }} {{ 'héllo' | reverse }}",
    "{{ messages | selectattr('role', 'eq', 'user') | list | length }}",
    "{{ messages | map(attribute='role') | join('|') }}",
    "{{ [3, 1] | sort | first }} {{ 'abc' | first }} {{ 'abc' | last }}",
    "{{ '' is string }} {{ none is string }} {{ 1 is string }} {{ 'a' is not none }}",
    "{{ true and 'x' }} {{ false or 'y' }} {{ 0 or '' }}|{{ none and 1 }}",
    "{{ 'a' < 'B' }} {{ [1, 2] < [1, 3] if false else 'skip' }}",
    "{% set t = (1, 2) %}{{ t[0] }}{{ t | length }}",
    "{{ '\\n' | tojson }}{{ 'é' | tojson }}{{ '</script>' | tojson }}",
    "{{ 7.0 / 2 }} {{ 7 / 7 }} {{ 1 / 8 }}",
    "{{ 'a  b'.split(' ') }}",
    "{{ '  x  ' | trim('x ') }}|{{ 'xxaxx'.strip('x') }}",
    "{{ 'abc' | capitalize }}{{ 'ABC DEF' | title }}{{ 'a-b c(d' | title }}",
    "{{ 4 | float }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 1.25 | round(1) }} {{ 2.1 | round(0, 'ceil') }} {{ -2.5 | round }}",
    "{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}",
    "{{ messages[0] }}",
    "{{ messages[0].role.upper() }}{{ messages[0]['role'] | upper }}",
    "{% if true %}  a  {% endif %}",
    "x  {% if true %}\n\ny{% endif %}",
    "\t{% if true %}\n\ty\n\t{% endif %}\n",
    "line1\n    {{ 'v' }}\n    {% set a = 1 %}\n    {{ a }}",
    "{% for i in [1] %}{{ i }}\n{% endfor %}end",
    "{% for i in [1] +%}\n{{ i }}{% endfor %}",
    "  {%+ if true %}a{% endif %}",
    "a {#- x #} b {# y -#} c",
    "{{- ' lead' -}}  \n  {{- 'trail ' }}",
    "{% raw %}\n{{ x }}\n{% endraw %}\n",
    "  {% raw %}{% if %}{% endraw %}",
    "{%- set x = 'a' -%}\n\n{{ x }}\n\n",
    "\r\nwin{% if true %}\r\nline\r\n{% endif %}\r\n",
    "trailing newline\n",
    "two trailing\n\n",
    "{% for m in messages %}{% set content = m.content %}{% if loop.first %}{% set content = 'F:' + content %}{% endif %}{{ content }}{% endfor %}",
    "{% macro outer() %}{{ inner() }}{% endmacro %}{% macro inner() %}in{% endmacro %}{{ outer() }}",
    "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% for i in [1] %}{% set x = 2 %}{{ m() }}{% endfor %}",
    "{% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}{% endfor %}",
    "{{ messages[0].get('content') }} {{ messages[0].get('nope', 'd') }} {{ messages[0].get('nope') }}",
    "{{ messages[0].keys() | list }} {{ messages[0] | items | list }}",
    "{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}",
    "{{ messages[0].tool_calls is defined }} {{ messages[0].tool_calls }}|",
    "{{ messages[0].content is not string }}",
    "{% if messages[0].content is mapping %}m{% elif messages[0].content is sequence %}s{% endif %}",
    "{{ 'abc' ~ 'd' | upper }}",
    "{{ ('ab' ~ 'cd')[1:3] }}",
    "{{ [1,2,3] | length * 2 }}",
    "{{ -1 | abs }} {{ (1 - 2) | abs }}",
    "{{ \"it's\" }} {{ 'say \"hi\"' }} {{ ['it\\'s', \"q\\\"\"] }}",
    "{{ '\\u4e16\\U0001F642' }}",
    "{{ 1_000 }} {{ 1.5e3 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 0xff_ff }}",
    "{% raw %}a{% endraw %}\nb",
    "  {% raw %}a  {% endraw %}  \nb",
    "{%- raw %} a {% endraw -%} b",
    "{% raw -%}  a  {%- endraw %}b",
    "x\n  {% raw %}\n  y\n  {% endraw %}\nz"
]


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
    snippets = []
    for source in SNIPPETS:
        snippet = {"source": source}
        snippet.update(render(env, source, CONVERSATIONS["single_user"], None, True, "<s>", "</s>"))
        snippets.append(snippet)
    out = {"jinja2_version": jinja2.__version__, "tools": TOOLS, "conversations": CONVERSATIONS, "cases": cases,
           "snippets": snippets}
    path = os.path.join(DIR, "golden.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum(1 for c in cases if "error" in c)
    print(f"{path}: {len(cases)} cases ({n_err} errors), {len(snippets)} snippets", file=sys.stderr)


if __name__ == "__main__":
    main()
