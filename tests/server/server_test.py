#!/usr/bin/env python3
"""Process tests of `snapkv serve`: real servers on 127.0.0.1 (a free port), the official `openai`
client and raw HTTP. Each case is bounded in time; every server is stopped by the PID started here.

  server_test.py --bin build/snapkv --case openai|concurrency|concurrency16|admission|disconnect|hostile|nginx|sessions
"""
import argparse
import http.client
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("SNAPKV_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")
MODELS = os.environ.get("SNAPKV_MODELS", os.path.expanduser("~/.cache/snapkv/models"))
SMOLLM2 = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")

# stories260K: 5 layers, 4 KV heads of dim 8, F16 cache: 128 bytes per token per layer.
STORIES_LAYERS, STORIES_BYTES = 5, 4 * 2 * 8 * 2


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVERS = []  # every server started, for their logs when a case fails


class Server:
    """A `snapkv serve` process on a free loopback port."""

    def __init__(self, binary, model, *args, ready_timeout=60, env=None, preexec_fn=None):
        # free_port() only finds a port free for now: another test of a parallel ctest run may bind
        # it before the server does; then the server says so and exits, and a new port is tried.
        SERVERS.append(self)
        for attempt in range(5):
            self.port = free_port()
            self.log = tempfile.NamedTemporaryFile(prefix="snapkv-serve-", suffix=".log", delete=False)
            cmd = [binary, "serve", "-m", model, "--host", "127.0.0.1", "--port", str(self.port), "-t", "1",
                   "--metrics", *args]
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                         env={**os.environ, **env} if env else None, preexec_fn=preexec_fn)
            if self._wait_ready(ready_timeout, last=attempt == 4):
                return
            self.log.close()
            os.unlink(self.log.name)  # that attempt's log only says the port was taken

    def _wait_ready(self, ready_timeout, last):
        """True once /health answers 200; False when the port was taken (and not `last`)."""
        deadline = time.time() + ready_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                if not last and "cannot listen on" in self.output():
                    return False
                fail(f"server exited early ({self.proc.returncode}): {self.output()}")
            try:
                # Only once this server has bound the port: before, another one may answer there.
                if (f"listening on http://127.0.0.1:{self.port}" in self.full_log()
                        and self.request("GET", "/health")[0] == 200):
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        self.kill()
        fail(f"server not ready in {ready_timeout}s: {self.output()}")

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def full_log(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def output(self):
        return self.full_log()[-3000:]

    def report(self):
        """The log from a sanitizer's first report on (it may be long), else its last lines."""
        with open(self.log.name, errors="replace") as f:
            text = f.read()
        at = text.find("==================\nWARNING: ThreadSanitizer")
        if at < 0:
            at = text.find("Sanitizer")
        return text[at:at + 20000] if at >= 0 else text[-3000:]

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def post(self, path, obj, **kw):
        status, headers, body = self.request("POST", path, obj, {"Content-Type": "application/json"}, **kw)
        return status, headers, json.loads(body) if body else None

    def metrics(self, headers=None):
        status, _, body = self.request("GET", "/metrics", headers=headers)
        check(status == 200, f"/metrics: {status}")
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def wait_metric(self, name, pred, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            v = self.metrics().get(name, 0.0)
            if pred(v):
                return v
            time.sleep(0.05)
        fail(f"{name} = {self.metrics().get(name)} did not reach the expected value in {timeout}s")

    def stop(self, timeout=30):
        """SIGTERM, then the exit status (the process is killed by its PID after `timeout`)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                fail(f"server did not exit within {timeout}s of SIGTERM")
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def cli_greedy(binary, model, prompt, n, press=None, chat=False, extra=()):
    cmd = [binary, "run", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "--json", "-t", "1", *extra]
    if press:
        cmd += ["--press", press]
    if chat:
        cmd.append("--chat")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    check(out.returncode == 0, f"{cmd}: {out.stderr}")
    return json.loads(out.stdout)


def stream_text(srv, body, timeout=120, headers=None, times=None):
    """POSTs a streaming completion (a body with "messages": a chat completion) to srv.port;
    returns (text, last chunk). `times`, a list, gets the arrival time of every text chunk."""
    chat = "messages" in body
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    conn.request("POST", "/v1/chat/completions" if chat else "/v1/completions", body=json.dumps({**body, "stream": True}),
                 headers={"Content-Type": "application/json", **(headers or {})})
    r = conn.getresponse()
    if r.status != 200:
        fail(f"stream status {r.status}: {r.read()[:300]!r}")
    text, last, done = "", None, False
    for raw in r:
        line = raw.decode().strip()
        if not line:
            continue
        check(line.startswith("data: "), f"not an SSE data line: {line!r}")
        data = line[6:]
        if data == "[DONE]":
            done = True
            break
        chunk = json.loads(data)
        check("error" not in chunk, f"stream error: {chunk}")
        c = chunk["choices"][0]
        piece = (c["delta"].get("content") or "") if chat else c["text"]
        if piece and times is not None:
            times.append(time.time())
        text += piece
        last = chunk
    conn.close()
    check(done, "the stream did not end with data: [DONE]")
    return text, last


def stories_prompt(i, words):
    names = ["Lily", "Tom", "Sue", "Max", "Ben", "Amy", "Sam", "Mia", "Tim", "Zoe"]
    base = f"Once upon a time, {names[i % len(names)]} had a red ball. "
    return (base * (words // len(base.split()) + 1)).strip()


# ---------------------------------------------------------------------------------------------

def case_openai(binary):
    from openai import OpenAI, BadRequestError, AuthenticationError

    # Tiny model, with an API key: completions non-streaming / streaming equal the CLI's greedy output.
    srv = Server(binary, STORIES, "--api-key", "sekret")
    try:
        client = OpenAI(base_url=srv.base + "/v1", api_key="sekret", max_retries=0, timeout=60)
        models = client.models.list()
        check(len(models.data) == 1, f"models: {models}")
        prompt = "Once upon a time, there was a little girl"
        want = cli_greedy(binary, STORIES, prompt, 24)
        r = client.completions.create(model="x", prompt=prompt, max_tokens=24, temperature=0)
        check(r.choices[0].text == want["text"], f"completion {r.choices[0].text!r} != CLI {want['text']!r}")
        check(r.usage.prompt_tokens == want["n_prompt_tokens"], f"usage {r.usage} vs {want['n_prompt_tokens']}")
        check(r.usage.completion_tokens == len(want["generated_token_ids"]), f"usage {r.usage}")
        pieces = [c.choices[0].text for c in client.completions.create(model="x", prompt=prompt, max_tokens=24,
                                                                      temperature=0, stream=True)]
        check("".join(pieces) == want["text"], f"streamed {''.join(pieces)!r} != {want['text']!r}")
        check(len([p for p in pieces if p]) > 1, "the stream came in one piece")
        # stream_options.include_usage: OpenAI's extra last chunk, with no choices and the usage.
        chunks = list(client.completions.create(model="x", prompt=prompt, max_tokens=24, temperature=0, stream=True,
                                                stream_options={"include_usage": True}))
        check(chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(want["generated_token_ids"]),
              f"usage chunk {chunks[-1]}")
        check("".join(c.choices[0].text for c in chunks[:-1]) == want["text"], "streamed text with include_usage")
        check(all(c.usage is None for c in chunks[:-1]), "usage before the last chunk with include_usage")
        # A compressed prompt: the same press as the CLI's.
        long_prompt = stories_prompt(3, 120)
        press = "snapkv:budget=24,window=4"
        want = cli_greedy(binary, STORIES, long_prompt, 16, press=press)
        r = client.completions.create(model="x", prompt=long_prompt, max_tokens=16, temperature=0,
                                      extra_body={"kv_compression": {"press": "snapkv", "budget": 24, "window": 4}})
        ext = r.model_extra["snapkv"]
        check(r.choices[0].text == want["text"], f"snapkv completion {r.choices[0].text!r} != CLI {want['text']!r}")
        check(ext["compressed"] is True and ext["kv_cache_bytes"] < ext["kv_cache_bytes_full"], f"extension {ext}")
        check(ext["kv_cache_bytes"] == want["kv_cache_bytes"], f"kv bytes {ext['kv_cache_bytes']} vs CLI {want['kv_cache_bytes']}")
        # A prompt too short for the press is served whole, with the note.
        r = client.completions.create(model="x", prompt="Hi", max_tokens=2, temperature=0,
                                      extra_body={"kv_compression": "snapkv:budget=64"})
        ext = r.model_extra["snapkv"]
        check(ext["compressed"] is False and "note" in ext, f"short prompt extension {ext}")
        # A ratio that would keep fewer tokens than the window (32) of a prompt a little longer than it:
        # kept whole with the note as well, not refused.
        r = client.completions.create(model="x", prompt=stories_prompt(0, 30), max_tokens=2, temperature=0,
                                      extra_body={"compression_ratio": 0.5})
        ext = r.model_extra["snapkv"]
        check(32 < r.usage.prompt_tokens < 64, f"test set-up: {r.usage.prompt_tokens} prompt tokens")
        check(ext["compressed"] is False and "window=32" in ext.get("note", ""), f"ratio on a short prompt: {ext}")
        # Errors through the client.
        for kwargs in ({"n": 2}, {"max_tokens": -3}, {"extra_body": {"kv_compression": "nosuch"}}):
            try:
                client.completions.create(model="x", prompt=prompt, **{"max_tokens": 4, **kwargs})
                fail(f"{kwargs} accepted")
            except BadRequestError as e:
                check(e.body and "message" in e.body, f"error body {e.body}")
        try:
            client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
            fail("chat on a base model without a chat format accepted")
        except BadRequestError:
            pass
        try:
            OpenAI(base_url=srv.base + "/v1", api_key="wrong", max_retries=0).models.list()
            fail("wrong API key accepted")
        except AuthenticationError:
            pass
        check(srv.request("GET", "/health")[0] == 200, "/health needs no key")
    finally:
        rc = srv.stop()
    check(rc == 0, f"exit status {rc} after SIGTERM")

    if not os.path.exists(SMOLLM2):
        print(f"SKIP (SmolLM2 part): {SMOLLM2} missing (scripts/get-model.sh smollm2)")
        return
    srv = Server(binary, SMOLLM2, "-c", "1024")
    try:
        client = OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0, timeout=300)
        question = "What is the capital of France?"
        want = cli_greedy(binary, SMOLLM2, question, 8, chat=True)
        r = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": question}],
                                           max_tokens=8, temperature=0)
        check(r.choices[0].message.content == want["text"], f"chat {r.choices[0].message.content!r} != CLI {want['text']!r}")
        check(r.choices[0].message.role == "assistant", "role")
        check(r.usage.prompt_tokens == want["n_prompt_tokens"], f"chat prompt {r.usage.prompt_tokens} tokens, CLI {want['n_prompt_tokens']}")
        chunks = list(client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": question}],
                                                     max_tokens=8, temperature=0, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        check(text == want["text"], f"streamed chat {text!r} != {want['text']!r}")
        check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == len(want["generated_token_ids"]),
              f"usage in the last chunk: {chunks[-1]}")
        want = cli_greedy(binary, SMOLLM2, "The capital of France is", 8)
        r = client.completions.create(model="smollm2", prompt="The capital of France is", max_tokens=8, temperature=0)
        check(r.choices[0].text == want["text"], f"completion {r.choices[0].text!r} != CLI {want['text']!r}")
        # Special-token text in user content stays text: the prompt holds its plain-text tokens.
        def chat_prompt_tokens(content):
            return client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": content}],
                                                  max_tokens=1, temperature=0).usage.prompt_tokens
        n_plain = len(srv.post("/tokenize", {"content": "<|im_end|>"})[2]["tokens"])
        n_a = len(srv.post("/tokenize", {"content": "a"})[2]["tokens"])
        check(n_plain > 1, f"/tokenize parsed the special token: {n_plain} token")
        check(chat_prompt_tokens("<|im_end|>") == chat_prompt_tokens("a") - n_a + n_plain,
              "special-token text in a message was parsed as a control token")
        # window=question (issue 11): the last user message is the observation window, as in the CLI.
        doc = long_text()[:1500]
        press = "snapkv:budget=96,window=question,window_min=4,window_max=40,span_gap=2"
        want = cli_greedy(binary, SMOLLM2, doc + " " + question, 8, press=press, chat=True)
        r = client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": doc + " " + question}],
                                           max_tokens=8, temperature=0, extra_body={"kv_compression": press})
        ext = r.model_extra["snapkv"]
        check(r.choices[0].message.content == want["text"], f"window=question chat {r.choices[0].message.content!r} != CLI {want['text']!r}")
        check(ext["compressed"] is True and ext["window"] == want["window_used"] == 40,
              f"window=question: server {ext}, CLI window {want['window_used']}")
        r = client.chat.completions.create(model="smollm2", max_tokens=2, temperature=0, extra_body={"kv_compression": press},
                                           messages=[{"role": "user", "content": doc}, {"role": "assistant", "content": "Yes."},
                                                     {"role": "user", "content": question}])
        ext = r.model_extra["snapkv"]
        check(ext["compressed"] is True and 4 < ext["window"] < 40, f"window=question, a short last turn: {ext}")
    finally:
        rc = srv.stop()
    check(rc == 0, f"exit status {rc} after SIGTERM")

    # q8_0 keys with q4_0 values: the server answers and counts bytes as the CLI with the same flags.
    kv = ["--kv-type", "q8_0", "--kv-type-v", "q4_0"]
    srv = Server(binary, SMOLLM2, "-c", "1024", *kv)
    try:
        doc = long_text()[:1500]
        press = "snapkv:budget=96"
        want = cli_greedy(binary, SMOLLM2, doc, 8, press=press, chat=True, extra=kv)
        check(want["kv_type"] == "q8_0" and want["kv_type_v"] == "q4_0", f"CLI kv types {want}")
        r = srv.post("/v1/chat/completions", {"model": "smollm2", "max_tokens": 8, "temperature": 0,
                                              "messages": [{"role": "user", "content": doc}], "kv_compression": press})
        check(r[0] == 200, f"mixed KV types: {r}")
        body = r[2]
        check(body["choices"][0]["message"]["content"] == want["text"], f"mixed KV chat {body} != CLI {want['text']!r}")
        check(body["snapkv"]["kv_cache_bytes"] == want["kv_cache_bytes"],
              f"mixed KV bytes {body['snapkv']} vs CLI {want['kv_cache_bytes']}")
    finally:
        rc = srv.stop()
    check(rc == 0, f"exit status {rc} after SIGTERM")


def case_concurrency(binary):
    presses = [None, "snapkv:budget=24,window=4", "pyramidkv:budget=32,window=4", "streamingllm:budget=20,window=8",
               "knorm:budget=28,window=4", "snapkv:ratio=0.5,window=8", "tova:budget=24,window=4", None]
    bodies = []
    for i, p in enumerate(presses):
        b = {"prompt": stories_prompt(i, 40 + 15 * i), "max_tokens": 40, "temperature": 0, "ignore_eos": True}
        if p:
            b["kv_compression"] = p
        bodies.append(b)
    # 5 ms per step: each request lasts >= 200 ms, so the eight clients overlap on a loaded host.
    srv = Server(binary, STORIES, "--max-queue", "16", "--debug-step-delay-ms", "5")
    try:
        alone = [stream_text(srv, b)[0] for b in bodies]
        results = [None] * len(bodies)

        def worker(i):
            results[i] = stream_text(srv, bodies[i])

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for i, r in enumerate(results):
            check(r is not None, f"client {i} did not finish")
            check(r[0] == alone[i], f"client {i} ({presses[i]}): together {r[0]!r} != alone {alone[i]!r}")
            check(r[1]["usage"]["completion_tokens"] == 40, f"client {i} usage {r[1]['usage']}")
        m = srv.metrics()
        check(m["snapkv_requests_running_peak"] >= 2, f"never more than one running: {m['snapkv_requests_running_peak']}")
        # Every client has its answer, and a request leaves the gauges before its answer goes out.
        for name in ["snapkv_requests_running", "snapkv_kv_cache_bytes_in_use", "snapkv_kv_cache_bytes_reserved"]:
            check(m[name] == 0, f"{name} = {m[name]} once every client had its answer")
    finally:
        rc = srv.stop()
    check(rc == 0, f"exit status {rc}")


def long_text():
    """Natural English text for long prompts: the GPL-3 (Debian base-files), else the repository's docs."""
    path = "/usr/share/common-licenses/GPL-3"
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    else:
        names = [os.path.join(ROOT, "README.md")] + sorted(os.path.join(ROOT, "docs", n) for n in os.listdir(os.path.join(ROOT, "docs")))
        text = " ".join(open(n, encoding="utf-8").read() for n in names if n.endswith(".md"))
    return re.sub(r"\s+", " ", text)


def case_concurrency16(binary):
    """16 clients at once on SmolLM2: different prompts (up to ~2K tokens), different presses, both
    routes; each stream equals the same request run alone; the KV bytes return to 0."""
    if not os.path.exists(SMOLLM2):
        print(f"SKIP: {SMOLLM2} missing (scripts/get-model.sh smollm2)")
        return
    # (approximate prompt tokens, press: a spec string, an object, or a compression_ratio, route)
    plan = [
        (16, None, "cmpl"), (24, "snapkv:budget=64,window=8", "chat"), (40, {"compression_ratio": 0.5}, "cmpl"),
        (64, "streamingllm:budget=48,window=8", "cmpl"), (96, "tova:budget=48,window=8", "chat"),
        (128, "knorm:budget=64,window=8", "cmpl"), (160, None, "chat"), (200, "h2o:budget=96,window=16", "cmpl"),
        (256, "snapkv:ratio=0.75,window=16", "cmpl"),
        (320, {"kv_compression": {"press": "pyramidkv", "budget": 128, "window": 16}}, "chat"),
        (400, "adakv:budget=160,window=16", "cmpl"), (512, "random:budget=128,window=8,seed=7", "cmpl"),
        (640, "snapkv:budget=256,window=32,kernel=5,pool=avg", "chat"), (900, "streamingllm:ratio=0.5", "cmpl"),
        (1300, None, "cmpl"), (1900, "snapkv:budget=1024", "cmpl"),
    ]
    gen = 12
    text = long_text()
    bodies = []
    for i, (n, press, route) in enumerate(plan):
        start = (i * 4099) % (len(text) // 2)
        doc = text[start:start + int(n * 5.1)]  # ~5.1 characters per token
        if route == "chat":
            b = {"messages": [{"role": "user", "content": doc + "\n\nSummarize the text above."}]}
        else:
            b = {"prompt": doc}
        b.update({"max_tokens": gen, "temperature": 0, "ignore_eos": True})
        if isinstance(press, str):
            b["kv_compression"] = press
        elif press:
            b.update(press)
        bodies.append(b)
    # With AVX2 or AVX-512 VNNI, a quantized matmul of >= 8 rows (16 decode rows, a prefill chunk) runs the
    # token-lane kernels, whose results differ from the decode kernels' (one row alone) by f32
    # rounding (src/quant/quant.h, "Determinism"); that flips greedy near-ties (measured: 1 and 5 of
    # the 16 streams differed in two runs). SNAPKV_TOKEN_LANES=0 keeps every call on the decode
    # kernels, whose per-token results are bitwise the same in any batch: "equal to alone" is exact.
    srv = Server(binary, SMOLLM2, "-c", "2560", "--max-queue", "32", env={"SNAPKV_TOKEN_LANES": "0"})
    try:
        t0 = time.time()
        alone = [stream_text(srv, b, timeout=300) for b in bodies]
        t_alone = time.time() - t0
        n_prompt = [a[1]["usage"]["prompt_tokens"] for a in alone]
        print(f"prompt tokens {n_prompt}; alone, one at a time: {t_alone:.1f}s")
        check(max(n_prompt) >= 1700 and min(n_prompt) <= 40, f"prompt lengths {n_prompt} do not span up to ~2K")
        n_compressed = 0
        for i, (_, last) in enumerate(alone):
            x = last["snapkv"]
            if plan[i][1] is None or not x["compressed"]:  # no press, or a prompt too short for it (with the note)
                check(not x["compressed"] and x["kv_cache_bytes"] == x["kv_cache_bytes_full"], f"{i}: {x}")
                check(plan[i][1] is None or x.get("note"), f"{i} ({plan[i][1]}): kept whole without a note: {x}")
            else:
                check(x["kv_cache_bytes"] < x["kv_cache_bytes_full"], f"{i} ({plan[i][1]}): {x}")
                n_compressed += 1
        print(f"{n_compressed} of 16 prompts compressed")
        check(n_compressed >= 10, f"only {n_compressed} prompts were compressed")
        results = [None] * len(bodies)
        errors = []

        def worker(i):
            try:
                results[i] = stream_text(srv, bodies[i], timeout=300)
            except BaseException as e:  # fail() raises SystemExit in a thread: keep it for the main one
                errors.append(f"client {i}: {e!r}")

        t0 = time.time()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        t_together = time.time() - t0
        print(f"16 at once: {t_together:.1f}s")
        check(not errors, f"clients failed: {errors}")
        for i, r in enumerate(results):
            check(r is not None, f"client {i} did not finish")
            check(r[0] == alone[i][0], f"client {i} ({plan[i][1]}): together {r[0]!r} != alone {alone[i][0]!r}")
            check(r[1]["usage"] == alone[i][1]["usage"], f"client {i} usage {r[1]['usage']} vs {alone[i][1]['usage']}")
            check(r[1]["usage"]["completion_tokens"] == gen, f"client {i} usage {r[1]['usage']}")
            for k in ("kv_cache_bytes", "kv_cache_bytes_full", "press", "compressed"):
                check(r[1]["snapkv"][k] == alone[i][1]["snapkv"][k], f"client {i}: {k} {r[1]['snapkv']} vs alone")
        m = srv.metrics()
        peak = m["snapkv_requests_running_peak"]
        print(f"peak running {int(peak)}, peak KV bytes {int(m['snapkv_kv_cache_bytes_in_use_peak'])}")
        check(peak >= 12, f"the 16 clients did not run together: peak running {peak}")
        srv.wait_metric("snapkv_kv_cache_bytes_in_use", lambda v: v == 0)
        srv.wait_metric("snapkv_kv_cache_bytes_reserved", lambda v: v == 0)
        m = srv.metrics()
        check(m["snapkv_requests_running"] == 0 and m["snapkv_requests_waiting"] == 0, "requests still running")
        check(m['snapkv_requests_finished_total{reason="length"}'] == 32, "finished requests")
        trims, trim_s = m["snapkv_heap_trims_total"], m["snapkv_heap_trim_seconds_total"]
        print(f"malloc_trim: {int(trims)} calls, {1000 * trim_s:.1f} ms in all; RSS {rss_kib(srv.proc.pid) // 1024} MiB")
        check(trims >= 2, f"freed memory was returned to the OS {trims} times (malloc_trim after requests end)")
    finally:
        rc = srv.stop()
    check(rc == 0, f"exit status {rc}")


def reserve_bytes(n_prompt, max_tokens, capacity=None):
    """project_kv for stories260K (no sliding-window layers)."""
    kept = min(n_prompt, capacity) if capacity else n_prompt
    peak = (STORIES_LAYERS - 1) * kept + n_prompt
    final = STORIES_LAYERS * (kept + max_tokens)
    return max(peak, final) * STORIES_BYTES


def case_admission(binary):
    prompt = stories_prompt(1, 200)
    g = 64
    probe = Server(binary, STORIES)
    try:
        n_prompt = len(probe.post("/tokenize", {"content": prompt, "add_special": True})[2]["tokens"])
    finally:
        probe.stop()
    r_none = reserve_bytes(n_prompt, g)
    r_snap = reserve_bytes(n_prompt, g, capacity=32)
    budget = int(2.5 * r_none)  # two `none` sessions fit, not three
    print(f"prompt {n_prompt} tokens: none reserves {r_none} B, snapkv:budget=32 {r_snap} B, budget {budget} B")
    check(budget // r_snap >= 6, "test set-up: the budget should fit >= 6 snapkv sessions")
    # 40 ms steps: the two running requests take ~2.6 s, the window in which the sixth request must
    # find the queue still full (at 20 ms it was ~1 s after the metrics read, thin on a loaded host).
    common = ["--kv-memory-budget", str(budget), "--debug-step-delay-ms", "40"]
    body = {"prompt": prompt, "max_tokens": g, "temperature": 0, "ignore_eos": True}

    def run_clients(srv, n, extra):
        out = [None] * n

        def w(i):
            out[i] = srv.post("/v1/completions", {**body, **extra}, timeout=120)

        ts = [threading.Thread(target=w, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
            time.sleep(0.05)
        return ts, out

    srv = Server(binary, STORIES, *common, "--max-queue", "3")
    try:
        ts, out = run_clients(srv, 5, {})
        srv.wait_metric("snapkv_requests_waiting", lambda v: v == 3)
        m = srv.metrics()
        check(m["snapkv_requests_running"] == 2, f"running {m['snapkv_requests_running']} (want 2 under the budget)")
        check(m["snapkv_kv_cache_bytes_reserved"] == 2 * r_none, f"reserved {m['snapkv_kv_cache_bytes_reserved']}")
        status, headers, err = srv.post("/v1/completions", body)
        check(status == 429, f"full queue answered {status}")
        check(int(headers.get("Retry-After", "0")) >= 1, f"Retry-After {headers}")
        check(err["error"]["type"] == "rate_limit_error", f"429 body {err}")
        for t in ts:
            t.join(120)
        for i, (status, _, res) in enumerate(out):
            check(status == 200 and res["usage"]["completion_tokens"] == g, f"queued request {i}: {status} {res}")
            check(res["snapkv"]["kv_cache_bytes_reserved"] == r_none, f"reserved {res['snapkv']}")
        m = srv.metrics()
        check(m["snapkv_requests_running_peak"] == 2, f"none: peak running {m['snapkv_requests_running_peak']}")
        check(m['snapkv_admission_rejections_total{reason="queue_full"}'] == 1, "rejection counter")
        srv.wait_metric("snapkv_kv_cache_bytes_in_use", lambda v: v == 0)
        srv.wait_metric("snapkv_kv_cache_bytes_reserved", lambda v: v == 0)
        # A request that could never fit alone: 400, not a queue slot.
        status, _, err = srv.post("/v1/completions", {**body, "max_tokens": 2000})
        check(status == 400 and err["error"]["code"] == "kv_budget_exceeded", f"too large: {status} {err}")
    finally:
        check(srv.stop() == 0, "exit status")

    srv = Server(binary, STORIES, *common, "--max-queue", "8")
    try:
        ts, out = run_clients(srv, 8, {"kv_compression": {"press": "snapkv", "budget": 32, "window": 4}})
        for t in ts:
            t.join(120)
        for i, (status, _, res) in enumerate(out):
            check(status == 200 and res["snapkv"]["compressed"], f"snapkv request {i}: {status} {res}")
            check(res["snapkv"]["kv_cache_bytes_reserved"] == r_snap, f"reserved {res['snapkv']} vs {r_snap}")
        peak = srv.metrics()["snapkv_requests_running_peak"]
        check(peak >= 6, f"snapkv: peak running {peak}, want >= 6 (3x the none sessions) under the same budget")
        print(f"same budget: none ran 2 at once, snapkv {int(peak)}")
    finally:
        check(srv.stop() == 0, "exit status")


def case_disconnect(binary):
    srv = Server(binary, STORIES, "--debug-step-delay-ms", "20", "--shutdown-grace", "2")
    try:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        body = json.dumps({"prompt": stories_prompt(0, 30), "max_tokens": 100000, "stream": True, "ignore_eos": True,
                           "temperature": 0}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        got = b""
        while got.count(b"data: ") < 3:
            got += s.recv(4096)
        srv.wait_metric("snapkv_requests_running", lambda v: v == 1)
        check(srv.metrics()["snapkv_kv_cache_bytes_in_use"] > 0, "a running stream holds KV bytes")
        s.close()
        srv.wait_metric("snapkv_requests_running", lambda v: v == 0, timeout=20)
        srv.wait_metric("snapkv_kv_cache_bytes_in_use", lambda v: v == 0)
        check(srv.metrics().get('snapkv_requests_finished_total{reason="cancelled"}') == 1, "cancel counted")
        # A stream still running at SIGTERM: the server ends it at the grace deadline and exits 0.
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        got = b""
        while got.count(b"data: ") < 2:
            got += s.recv(4096)
        t0 = time.time()
        rc = srv.stop(timeout=30)
        check(rc == 0, f"exit status {rc} after SIGTERM with a running stream")
        check(time.time() - t0 < 15, f"shutdown took {time.time() - t0:.1f}s")
        s.close()
    finally:
        srv.kill()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def hostile_cases():
    """(path, body bytes, HTTP status, error code or None) of complete hostile requests."""
    J = lambda o: json.dumps(o).encode()  # noqa: E731
    cmpl, chat = "/v1/completions", "/v1/chat/completions"
    ok = {"prompt": "Once upon a time", "max_tokens": 1}
    msgs = [{"role": "user", "content": "hi"}]
    cases = []
    # Broken JSON.
    for b in [b"{", b"}", b"", b" ", b"{\"prompt\":}", b'{"prompt":"a",}', b"{'prompt': 'a'}", b'{"prompt": "a" "n": 1}',
              b'{"prompt":"a"' + b" " * 10, b'{"prompt":"a"}trailing', b'{"prompt":"\\u12"}', b'{"prompt":"\\ud800"}',
              b'{"prompt":"a","max_tokens":NaN}', b'{"prompt":"a","max_tokens":Infinity}', b"\x00\x01\x02",
              b"[" * 5000, b'{"a":' * 3000]:
        cases += [(cmpl, b, 400, "invalid_json"), (chat, b, 400, "invalid_json")]
    # Valid JSON, but not an object, or deeply nested.
    for b in [b"null", b"[]", b'"x"', b"42", b"true", b'[{"prompt":"a"}]', b"[" * 5000 + b"]" * 5000]:
        cases.append((cmpl, b, 400, "invalid_type"))
    cases.append((cmpl, b'{"prompt":"a","x":' + b'{"a":' * 3000 + b"1" + b"}" * 3001, 200, None))
    # Invalid UTF-8 anywhere in the body (strings, keys, unknown fields).
    for bad in [b"\xff\xfe", b"\xc3\x28", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"\x80",
                b"\xf4\x90\x80\x80"]:
        cases += [(cmpl, b'{"prompt":"' + bad + b'"}', 400, "invalid_json"),
                  (cmpl, b'{"prompt":"a","stop":["' + bad + b'"]}', 400, "invalid_json"),
                  (cmpl, b'{"prompt":"a","kv_compression":"' + bad + b'"}', 400, "invalid_json"),
                  (cmpl, b'{"prompt":"a","unknown":"' + bad + b'"}', 400, "invalid_json"),
                  (cmpl, b'{"' + bad + b'":1,"prompt":"a"}', 400, "invalid_json"),
                  (chat, b'{"messages":[{"role":"user","content":"' + bad + b'"}]}', 400, "invalid_json")]
    # Missing fields and wrong types.
    for o in [{}, {"max_tokens": 1}, {"prompt": 5}, {"prompt": None}, {"prompt": ["a", "b"]}, {"prompt": [5]},
              {"prompt": {"text": "a"}}, {"prompt": ""},
              {**ok, "max_tokens": "9"}, {**ok, "max_tokens": True}, {**ok, "max_tokens": [1]}, {**ok, "max_tokens": 1.5},
              {**ok, "max_completion_tokens": "x"}, {**ok, "temperature": "0"}, {**ok, "temperature": [0]},
              {**ok, "top_p": "1"}, {**ok, "top_k": 1.5}, {**ok, "seed": "x"}, {**ok, "seed": 1.5}, {**ok, "stream": 1},
              {**ok, "stream": "true"}, {**ok, "stop": 5}, {**ok, "stop": [1]}, {**ok, "stop": {"x": 1}},
              {**ok, "stop": [""]}, {**ok, "stop": ["x"] * 17}, {**ok, "stop": ["x" * 5000]}, {**ok, "n": 5},
              {**ok, "n": 0}, {**ok, "n": "1"}, {**ok, "ignore_eos": "yes"}, {**ok, "stream_options": 5},
              {**ok, "stream_options": {"include_usage": "yes"}}, {**ok, "kv_compression": 5},
              {**ok, "kv_compression": []}, {**ok, "kv_compression": ["snapkv"]}, {**ok, "kv_compression": True}]:
        cases.append((cmpl, J(o), 400, None))
    for o in [{}, {"messages": "hi"}, {"messages": []}, {"messages": [5]}, {"messages": [{"role": 5, "content": "x"}]},
              {"messages": [{"role": "user"}]}, {"messages": [{"role": "wizard", "content": "x"}]},
              {"messages": [{"role": "user", "content": 5}]}, {"messages": [{"role": "user", "content": [{"type": "image"}]}]},
              {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
              {"messages": msgs, "max_tokens": -1}, {"messages": msgs, "n": 2}]:
        cases.append((chat, J(o), 400, None))
    # Huge and negative numbers, out-of-range values.
    for o in [{**ok, "max_tokens": -1}, {**ok, "max_tokens": 0}, {**ok, "max_tokens": -2 ** 63},
              {**ok, "max_tokens": 10 ** 30}, {**ok, "max_tokens": 2 ** 64}, {**ok, "temperature": 1e308},
              {**ok, "temperature": -1}, {**ok, "temperature": 101}, {**ok, "top_p": -1}, {**ok, "top_p": 0},
              {**ok, "top_p": 1.5}, {**ok, "top_k": -1}, {**ok, "top_k": 10 ** 20}, {**ok, "seed": 2 ** 64},
              {**ok, "seed": -2 ** 63 - 1}, {**ok, "compression_ratio": 2}, {**ok, "compression_ratio": -0.1},
              {**ok, "compression_ratio": "half"}]:
        cases.append((cmpl, J(o), 400, None))
    for b in [b'{"prompt":"a","max_tokens":1e999}', b'{"prompt":"a","temperature":-1e999}',
              b'{"prompt":"a","max_tokens":' + b"9" * 400 + b"}", b'{"prompt":"a","seed":-' + b"9" * 40 + b"}"]:
        cases.append((cmpl, b, 400, None))
    # Unknown presses and bad press parameters.
    for press in ["nosuchpress", "", "snapkv:budget=abc", "snapkv:budget=-5", "snapkv:kernel=4", "snapkv:pool=median",
                  "none:budget=5", "snapkv:ratio=1.0", "snapkv:ratio=-0.5", "snapkv:budget=8,ratio=0.5",
                  "streamingllm:kernel=3", "snapkv:window=0", "snapkv:alloc=foo", "snapkv:budget=10,window=16",
                  "snapkv:budget=1e9999", "snapkv:zzz=1", "snapkv:budget", "snapkv:budget=32,budget=64", "SNAPKV",
                  {"press": 5}, {"press": "nosuch"}, {"budget": 32}, {"press": "snapkv", "window": 0},
                  {"press": "snapkv", "budget": 10 ** 40}, {"press": "snapkv", "zzz": 1}, {"press": "snapkv", "budget": "x"},
                  {"press": "snapkv:budget=32"}, {"press": "tova", "kernel": 3}]:
        cases.append((cmpl, J({**ok, "kv_compression": press}), 400, "invalid_press"))
    # Longer than the context (-c 256): 400 with n_prompt_tokens and n_ctx.
    cases += [(cmpl, J({"prompt": "word " * 400, "max_tokens": 1}), 400, "context_length_exceeded"),
              (cmpl, J({"prompt": "Once upon a time " * 100}), 400, "context_length_exceeded")]
    # Larger than --max-body 65536: 413.
    cases += [(cmpl, b"{" * 100000, 413, "payload_too_large"), (cmpl, J({"prompt": "a" * 70000}), 413, "payload_too_large"),
              (chat, J({"messages": [{"role": "user", "content": "b" * 66000}]}), 413, "payload_too_large")]
    # Unknown fields are ignored: these succeed.
    cases += [(cmpl, J({**ok, "unknown_field": [1, 2, {"x": None}]}), 200, None),
              (cmpl, J({**ok, "logit_bias": {}, "user": "u-1", "frequency_penalty": 0, "zzz": "\u00e9"}), 200, None),
              (cmpl, J({**ok, "kv_compression": None, "stop": None, "seed": None}), 200, None),
              (cmpl, J({**ok, "prompt": ["Once upon a time"], "max_completion_tokens": 2}), 200, None)]
    # Fields that would change the answer and are not implemented: refused, not ignored.
    cases += [(cmpl, J({**ok, "logit_bias": {"50256": -100}}), 400, "unsupported_parameter"),
              (chat, J({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}}),
               400, "unsupported_parameter"),
              (chat, J({"messages": [{"role": "user", "content": "hi"}], "logprobs": True}), 400, "unsupported_parameter")]
    return cases


def read_answer(sock, ends=()):
    """Reads one HTTP answer from `sock` until its Content-Length is complete or the peer closes
    (or an exception in `ends` is raised); returns (HTTP status or None, body bytes)."""
    got = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ends:
            break
        if not chunk:
            break
        got += chunk
        head, sep, body = got.partition(b"\r\n\r\n")
        m = re.search(rb"Content-Length: (\d+)", head, re.I)
        if sep and m and len(body) >= int(m.group(1)):
            break
    m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
    return (int(m.group(1)) if m else None), got.partition(b"\r\n\r\n")[2]


def raw_exchange(port, data, timeout=10):
    """Sends raw bytes; returns (HTTP status or None, body bytes) of the answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        return read_answer(s, ends=(ConnectionResetError, socket.timeout))
    finally:
        s.close()


def check_error_shape(resp, want_status, want_code, what):
    try:
        err = json.loads(resp)["error"]
    except (ValueError, KeyError, TypeError):
        fail(f"{what}: not OpenAI's error shape: {resp[:200]!r}")
    check(isinstance(err.get("message"), str) and err["message"] and err.get("type") and err.get("code"),
          f"{what}: error shape {err}")
    want_type = {401: "authentication_error", 404: "not_found_error"}.get(want_status, "invalid_request_error")
    check(err["type"] == want_type, f"{what}: error type {err}")
    if want_code:
        check(err["code"] == want_code, f"{what}: code {err['code']!r}, want {want_code!r}: {err}")
    return err


class SlowClient(threading.Thread):
    """A client that holds a connection: sends `first`, then `rest` one byte every `gap` seconds,
    then waits for the answer or the close. Records the time it took and the status it got."""

    def __init__(self, port, first, rest=b"", gap=0.0):
        super().__init__(daemon=True)
        self.port, self.first, self.rest, self.gap = port, first, rest, gap
        self.status, self.body, self.elapsed, self.error = None, b"", None, None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # one segment per byte, now
        self.t0 = time.time()

    def run(self):
        t0 = self.t0
        try:
            self.sock.sendall(self.first)
            for i in range(len(self.rest)):
                time.sleep(self.gap)
                self.sock.sendall(self.rest[i:i + 1])
            self.status, self.body = read_answer(self.sock)
        except OSError as e:
            self.error = e
        finally:
            self.elapsed = time.time() - t0
            self.sock.close()


def case_hostile(binary):
    read_timeout = 3
    srv = Server(binary, STORIES, "--max-body", "65536", "--api-key", "k", "-c", "256", "--read-timeout",
                 str(read_timeout))
    auth = {"Authorization": "Bearer k", "Content-Type": "application/json"}
    ok_body = {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}

    def normal_request(what):
        t0 = time.time()
        status, _, resp = srv.request("POST", "/v1/completions", json.dumps(ok_body), auth, timeout=30)
        dt = time.time() - t0
        check(status == 200 and json.loads(resp)["usage"]["completion_tokens"] == 4, f"normal request {what}: {status}")
        return dt

    try:
        normal_request("at start")
        rss0 = rss_kib(srv.proc.pid)
        n = 0
        cases = hostile_cases()
        t0 = time.time()
        for rep in range(4):
            for path, body, want, code in cases:
                status, _, resp = srv.request("POST", path, body, auth)
                what = f"{path} {body[:80]!r}"
                check(status == want, f"{what}: {status} (want {want}) {resp[:200]!r}")
                if want != 200:
                    err = check_error_shape(resp, want, code, what)
                    if code == "context_length_exceeded":
                        check(err["n_ctx"] == 256 and err["n_prompt_tokens"] > 256, f"{what}: {err}")
                n += 1
            # Routes, methods, authentication.
            for method, path, headers, want in [
                    ("GET", "/nope", auth, 404), ("POST", "/v2/completions", auth, 404), ("GET", "/v1/completions", auth, 404),
                    ("DELETE", "/v1/models", auth, 405), ("POST", "/v1/completions/x", auth, 404),
                    ("GET", "/../../etc/passwd", auth, 404), ("GET", "/v1/models/../../x", auth, 404),
                    ("POST", "/v1/completions", {}, 401), ("POST", "/v1/completions", {"Authorization": "Bearer wrong"}, 401),
                    ("POST", "/v1/completions", {"Authorization": "k"}, 401),
                    ("POST", "/v1/completions", {"Authorization": "Basic k"}, 401),
                    ("POST", "/v1/completions", {"Authorization": "Bearer  k"}, 401),
                    ("POST", "/v1/completions", {"Authorization": "Bearer kk"}, 401),
                    ("POST", "/v1/completions", {"Authorization": "Bearer " + "k" * 4000}, 401),
                    ("GET", "/v1/models", {"Authorization": "Bearer wrong"}, 401), ("GET", "/metrics", {}, 401),
                    ("POST", "/tokenize", {}, 401), ("GET", "/v1/models", auth, 200), ("POST", "/detokenize", auth, 400),
                    ("GET", "/health", {}, 200)]:
                status, _, resp = srv.request(method, path, b"{}" if method == "POST" else None, headers)
                check(status == want, f"{method} {path} {headers}: {status} (want {want})")
                if want >= 400:
                    check_error_shape(resp, want, None, f"{method} {path}")
                n += 1
            for body, want in [({"tokens": [1, 2, 3]}, 200), ({"tokens": [-1]}, 400), ({"tokens": [10 ** 12]}, 400),
                               ({"tokens": [2 ** 64]}, 400), ({"tokens": ["a"]}, 400), ({"tokens": 5}, 400),
                               ({"content": 5}, 400), ({"content": "a", "add_special": "no"}, 400),
                               ({"content": "Once"}, 200)]:
                path = "/tokenize" if "content" in body else "/detokenize"
                status, _, resp = srv.request("POST", path, json.dumps(body), auth)
                check(status == want, f"{path} {body}: {status} (want {want})")
                if want != 200:
                    check_error_shape(resp, want, None, f"{path} {body}")
                n += 1
        # Mutated valid bodies (seeded): every one a 200 or a 400 in the error shape.
        rng = random.Random(8)
        seeds = [json.dumps(ok_body).encode(),
                 json.dumps({"prompt": "Lily", "max_tokens": 3, "kv_compression": {"press": "snapkv", "budget": 8, "window": 2},
                             "stop": ["x"], "seed": 5}).encode()]
        for i in range(200):
            b = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 4)):
                op, pos = rng.randrange(3), rng.randrange(len(b))
                if op == 0:
                    b[pos] = rng.randrange(256)
                elif op == 1:
                    b.insert(pos, rng.choice(b'{}[]",:0123456789-e.\\\xff\xc3 tfn'))
                else:
                    del b[pos]
            status, _, resp = srv.request("POST", "/v1/completions", bytes(b), auth)
            check(status in (200, 400), f"mutated body {bytes(b)!r}: {status} {resp[:200]!r}")
            if status == 400:
                check_error_shape(resp, 400, None, f"mutated body {bytes(b)!r}")
            n += 1
        # Raw HTTP: a bad request line, a URI too long, a header too long, garbage, a huge Content-Length.
        port = srv.port
        for data, want in [(b"GARBAGE\r\n\r\n", 400), (b"GET / HTTP/9.9\r\n\r\n", 400),
                           (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
                           (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 9000 + b"\r\n\r\n", 400),
                           (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
                            b"Content-Length: -5\r\n\r\n", 400),  # not a decimal number (cpp-httplib: 2^64 - 5)
                           (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
                            b"Content-Length: 99999999999999999999999\r\n\r\n", 413)]:
            status, _ = raw_exchange(port, data)
            check(status == want or (want == 400 and status is None), f"raw {data[:60]!r}: {status} (want {want})")
            n += 1
        # Bodies without a Content-Length (chunked, or read until the client closes) are refused
        # before they are read: cpp-httplib would read them whole, past --max-body.
        # The answer comes at once, from the headers: a client that would send gigabytes is not read.
        chunk = b"ea60\r\n" + b"x" * 1000  # the start of a 60000-byte chunk
        post = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
        for data in [post + b"Transfer-Encoding: chunked\r\n\r\n" + chunk,
                     post + b"Transfer-Encoding: gzip, chunked\r\n\r\n" + chunk,
                     post + b"Transfer-Encoding: chunked\r\nContent-Length: 10\r\n\r\n" + chunk,
                     post + b"Connection: close\r\n\r\n" + b"x" * 1000]:
            t1 = time.time()
            status, resp = raw_exchange(port, data)
            check(status == 411 and time.time() - t1 < read_timeout, f"a body without a length: {status} {resp[:200]!r}")
            check_error_shape(resp, 411, "length_required", "a body without a length")
            n += 1
        # Two Content-Length fields (equal or not, in any case), or one that is not a plain decimal
        # number, are refused from the headers (request smuggling: a proxy and this server could
        # read different bodies); the answer closes the connection, so the unread body is never
        # taken for a request of its own.
        body = json.dumps(ok_body).encode()
        n_body = len(body)
        for fields in [[f"Content-Length: {n_body}", f"Content-Length: {n_body}"],
                       [f"Content-Length: {n_body}", "Content-Length: 5"], ["Content-Length: 5", f"Content-Length: {n_body}"],
                       [f"content-length: {n_body}", f"Content-Length: {n_body}"], [f"Content-Length: {n_body}, {n_body}"],
                       [f"Content-Length: +{n_body}"], [f"Content-Length: {n_body}abc"], [f"Content-Length: 0x{n_body:x}"]]:
            data = (post + b"Content-Type: application/json\r\n"
                    + b"".join(f"{f}\r\n".encode() for f in fields) + b"\r\n" + body)
            status, resp = raw_exchange(port, data)
            check(status == 400, f"Content-Length fields {fields}: {status} {resp[:200]!r}")
            check_error_shape(resp, 400, "invalid_content_length", f"Content-Length fields {fields}")
            n += 1
        # Every refusal of a request that carries a body ends the connection after the answer,
        # so a body left unread is never parsed as a request (here each body ends with a request
        # of its own, past cpp-httplib's 4 KiB read buffer): one answer, then the server closes.
        smuggled = b"x" * 20000 + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        length = f"Content-Length: {len(smuggled)}\r\n".encode()
        unauthorized = post.replace(b"Bearer k", b"Bearer wrong")
        for what, data, want, code in [
                ("two lengths", post + length + length + b"\r\n" + smuggled, 400, "invalid_content_length"),
                ("a GET with a body", b"GET /health HTTP/1.1\r\nHost: x\r\n" + length + b"\r\n" + smuggled, 400,
                 "unexpected_body"),
                ("a gzip body", post + b"Content-Encoding: gzip\r\n" + length + b"\r\n" + smuggled, 415,
                 "unsupported_content_encoding"),
                ("a multipart body", post + b"Content-Type: multipart/form-data\r\n" + length + b"\r\n" + smuggled,
                 415, "unsupported_media_type"),
                ("a chunked body", post + b"Transfer-Encoding: chunked\r\n\r\n4e20\r\n" + smuggled, 411,
                 "length_required"),
                ("a length over --max-body", post + b"Content-Length: 100000000\r\n\r\n" + smuggled, 413,
                 "payload_too_large"),
                ("a refusal asking for a Range", post + b"Range: bytes=0-100000000\r\nContent-Encoding: gzip\r\n"
                 + length + b"\r\n" + smuggled, 415, "unsupported_content_encoding"),
                ("a HEAD with a body", b"HEAD /health HTTP/1.1\r\nHost: x\r\n" + length + b"\r\n" + smuggled, 400,
                 "unexpected_body"),
                ("two lengths, the first 0", post + b"Content-Length: 0\r\n" + length + b"\r\n" + smuggled, 400,
                 "invalid_content_length"),
                ("a method cpp-httplib refuses itself", b"PROPFIND /health HTTP/1.1\r\nHost: x\r\n" + length
                 + b"\r\n" + smuggled, 400, "http_error"),
                # cpp-httplib would read a PRI body without a length until the client closes.
                ("a PRI without a length", b"PRI /health HTTP/1.1\r\nHost: x\r\n\r\n" + smuggled, 405,
                 "method_not_allowed"),
                ("a PUT", b"PUT /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n" + length + b"\r\n"
                 + smuggled, 405, "method_not_allowed")]:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            t1 = time.time()
            got, closed = b"", False
            try:
                sock.sendall(data)
                while True:
                    try:
                        chunk = sock.recv(65536)
                    except socket.timeout:
                        break
                    except ConnectionResetError:
                        closed = True
                        break
                    if not chunk:
                        closed = True
                        break
                    got += chunk
            finally:
                sock.close()
            answers = re.findall(rb"HTTP/1\.1 (\d{3})", got)
            head, _, body_bytes = got.partition(b"\r\n\r\n")
            check(answers == [str(want).encode()], f"{what}: answers {answers} {got[:300]!r}")
            check(closed and time.time() - t1 < 4, f"{what}: the connection was not closed after the answer")
            check(re.search(rb"^Connection: close\r$", head, re.M | re.I) is not None, f"{what}: no Connection: close")
            if data.startswith(b"HEAD "):
                check(body_bytes == b"", f"{what}: the answer to a HEAD has a body: {body_bytes[:100]!r}")
            else:
                check_error_shape(body_bytes, want, code, what)
            n += 1
        # A Range is ignored: the whole answer, 200.
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1,0-,0-\r\n\r\n")
            status, resp = read_answer(sock, ends=(ConnectionResetError, socket.timeout))
        finally:
            sock.close()
        check(status == 200 and json.loads(resp).get("status") == "ok", f"a GET with a Range: {status} {resp[:200]!r}")
        n += 1
        # A request whose body was read whole keeps its connection, answered well or not (a wrong
        # key on a body route, bad JSON): the next request on it is answered as itself.
        for first, want in [(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 200),
                            (unauthorized + length + b"\r\n" + smuggled, 401), (post + length + b"\r\n" + smuggled, 400)]:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                sock.sendall(first)
                status1, _ = read_answer(sock, ends=(ConnectionResetError, socket.timeout))
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                status2, _ = read_answer(sock, ends=(ConnectionResetError, socket.timeout))
            finally:
                sock.close()
            check((status1, status2) == (want, 200), f"{first[:40]!r} then /health on one connection: {status1}, {status2}")
            n += 1
        print(f"{n} complete hostile requests in {time.time() - t0:.1f}s")
        check(n >= 1000, f"only {n} hostile requests")

        # Slow clients, several at once: half the headers then a stall; a connection that says
        # nothing; a body that stops halfway; a Content-Length whose body never comes; bodies sent
        # byte by byte (each byte within the read timeout, the whole body not). Requests made
        # meanwhile are served at once; the stalled ones are dropped by the read timeout (one that
        # never sent a byte: by the keep-alive timeout, 5 s), with a 400 where a request had begun;
        # one whose length is over --max-body is answered 413 at once.
        keep_alive_timeout = 5
        body = json.dumps(ok_body).encode()
        head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode())
        kinds = {"half headers": ([SlowClient(port, head[:40]) for _ in range(6)], read_timeout, 400),
                 "silent": ([SlowClient(port, b"") for _ in range(6)], keep_alive_timeout, None),
                 "half body": ([SlowClient(port, head + body[:20]) for _ in range(4)], read_timeout, 400),
                 "missing body": ([SlowClient(port, head.replace(f"{len(body)}".encode(), b"60000"))
                                   for _ in range(2)], read_timeout, 400),
                 # A length over --max-body is answered from the headers, at once.
                 "too long body": ([SlowClient(port, head.replace(f"{len(body)}".encode(), b"100000000"))
                                    for _ in range(2)], 0, 413)}
        dribblers = [SlowClient(port, head, body, gap=(read_timeout + 1) / len(body)) for _ in range(4)]
        stalled = [c for cs, _, _ in kinds.values() for c in cs]
        t0 = time.time()
        for c in stalled + dribblers:
            c.start()
        worst, n_meanwhile = 0.0, 0
        while time.time() - t0 < keep_alive_timeout + 1:
            worst = max(worst, normal_request("while slow clients hold connections"))
            n_meanwhile += 1
            time.sleep(0.2)
        for c in stalled + dribblers:
            c.join(60)
            check(not c.is_alive(), "a slow client was never answered nor dropped")
        print(f"slow clients: {n_meanwhile} normal requests meanwhile took at most {worst:.2f}s; dropped after "
              + ", ".join(f"{k} {min(c.elapsed for c in cs):.1f}..{max(c.elapsed for c in cs):.1f}s"
                          for k, (cs, _, _) in kinds.items())
              + f"; byte-by-byte ones answered after {min(c.elapsed for c in dribblers):.1f}s")
        check(worst < 2.0, f"a normal request took {worst:.2f}s while slow clients held connections")
        for kind, (cs, timeout, status) in kinds.items():
            for c in cs:
                check(c.error is None or isinstance(c.error, ConnectionResetError), f"{kind} client: {c.error!r}")
                check(timeout - 0.5 <= c.elapsed <= timeout + 4, f"a {kind} client was dropped after {c.elapsed:.1f}s")
                check(c.status == status, f"a {kind} client was answered {c.status}, want {status}")
                if status:
                    check_error_shape(c.body, status, None, f"{kind} client")
        for c in dribblers:
            check(c.status == 200 and json.loads(c.body)["usage"]["completion_tokens"] == 4,
                  f"byte-by-byte client: {c.status} {c.body[:200]!r} {c.error!r}")
            check(c.elapsed > read_timeout, f"test set-up: a byte-by-byte body took only {c.elapsed:.1f}s")
        n += len(dribblers)

        # More idle connections than a fixed pool of max_running + max_queue + 8 = 136 threads (the
        # server's before): normal requests still go through at once.
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(200)]
        time.sleep(0.5)
        dts = []
        for _ in range(5):
            dts.append(normal_request("with 200 idle connections open"))
            time.sleep(0.3)
        for s in idle:
            s.close()
        print(f"with 200 idle connections open, normal requests took at most {max(dts):.2f}s")
        check(max(dts) < 2.0, f"200 idle connections blocked the server: a normal request took {max(dts):.2f}s")

        normal_request("after")
        rss1 = rss_kib(srv.proc.pid)
        print(f"{n} hostile requests; RSS {rss0} KiB -> {rss1} KiB")
        check(rss1 < rss0 + 16 * 1024, f"RSS grew from {rss0} to {rss1} KiB")
        check(srv.proc.poll() is None, "the server died")
        m = srv.metrics(auth)
        check(m["snapkv_requests_running"] == 0 and m["snapkv_kv_cache_bytes_in_use"] == 0, "requests left running")
    finally:
        rc = srv.stop()
    check(rc == 0, f"exit status {rc}")


def find_nginx():
    for path in [shutil.which("nginx"), "/usr/sbin/nginx"]:
        if path and os.access(path, os.X_OK):
            return path
    return None


class Nginx:
    """nginx in front of replicas: deploy/nginx/snapkv.conf.in filled in, run from its own prefix
    in a temporary directory (conf, pid, logs, temp files there; nothing under /var)."""

    def __init__(self, binary, replicas, ready_timeout=30):
        self.dir = tempfile.mkdtemp(prefix="snapkv-nginx-")
        os.chmod(self.dir, 0o755)  # workers run as nobody when the master is root
        self.port = free_port()
        self.access_log = os.path.join(self.dir, "access.log")
        with open(os.path.join(ROOT, "deploy", "nginx", "snapkv.conf.in")) as f:
            site = f.read()
        servers = " ".join(f"server 127.0.0.1:{r.port} max_fails=1 fail_timeout=30s;" for r in replicas)
        site = (site.replace("@LISTEN@", f"127.0.0.1:{self.port}").replace("@REPLICAS@", servers)
                .replace("@ACCESS_LOG@", self.access_log))
        check("@" not in re.sub(r"#.*", "", site), "a placeholder left in the nginx config")
        with open(os.path.join(self.dir, "snapkv.conf"), "w") as f:
            f.write(site)
        d = self.dir
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(f"""worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 512; }}
http {{
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    include {d}/snapkv.conf;
}}
""")
        cmd = [binary, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-e", os.path.join(d, "error.log"),
               "-g", "daemon off;"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.time() + ready_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                fail(f"nginx exited early ({self.proc.returncode}): {self.error_log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        fail(f"nginx not listening in {ready_timeout}s: {self.error_log()}")

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "error.log"), errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def log_lines(self):
        """(session key, replica port of the answer, replica ports tried, status) of each request."""
        out = []
        with open(self.access_log) as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # a line nginx is still writing
                m = re.search(r'session="([^"]*)" upstream=(\S+(?:, \S+)*) status=(\d+)', line)
                check(m, f"access log line {line!r}")
                tried = [int(a.rsplit(":", 1)[1]) for a in m.group(2).split(", ") if ":" in a]
                out.append((m.group(1), tried[-1] if tried else None, tried, int(m.group(3))))
        return out

    def wait_lines(self, n, timeout=10.0):
        """log_lines() once it holds at least n lines: nginx writes a request's line after the
        response's last byte has left, so a client that has read the response may look too soon."""
        deadline = time.time() + timeout
        lines = self.log_lines()
        while len(lines) < n and time.time() < deadline:
            time.sleep(0.02)
            lines = self.log_lines()
        check(len(lines) >= n, f"nginx's access log has {len(lines)} lines after {timeout} s, expected {n}")
        return lines

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: the master stops its workers
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def requests_served(srv):
    m = srv.metrics()
    return sum(v for k, v in m.items() if k.startswith("snapkv_requests_finished_total"))


def case_nginx(binary):
    ngx_bin = find_nginx()
    if ngx_bin is None:
        print("SKIP: nginx is not installed (scripts/deps.sh installs the Debian package)")
        return
    replicas = [Server(binary, STORIES, "--debug-step-delay-ms", "10") for _ in range(2)]
    ngx = None
    try:
        ngx = Nginx(ngx_bin, replicas)
        by_port = {r.port: r for r in replicas}
        prompt = "Once upon a time, there was a little girl"
        body = {"prompt": prompt, "max_tokens": 2, "temperature": 0}
        keys = [f"session-{i:03d}" for i in range(48)]
        before = [requests_served(r) for r in replicas]
        lock = threading.Lock()
        answers = []

        def send(key):
            status, _, res = ngx_post(ngx, body, key)
            with lock:
                answers.append((key, status, res))

        # Three rounds over all keys, eight clients at a time.
        for _ in range(3):
            ts = []
            for key in keys:
                ts.append(threading.Thread(target=send, args=(key,)))
                ts[-1].start()
                if len(ts) % 8 == 0:
                    for t in ts[-8:]:
                        t.join(60)
            for t in ts:
                t.join(60)
        check(len(answers) == 3 * len(keys), f"{len(answers)} answers")
        want_text = answers[0][2]["choices"][0]["text"]
        for key, status, res in answers:
            check(status == 200 and res["choices"][0]["text"] == want_text, f"{key}: {status} {res}")
        # Requests without the header are keyed by the client's address: all on one replica.
        for _ in range(6):
            status, _, res = ngx_post(ngx, body, None)
            check(status == 200, f"no session key: {status} {res}")
        served = [requests_served(r) - b for r, b in zip(replicas, before)]
        log = ngx.wait_lines(3 * len(keys) + 6)
        check(len(log) == 3 * len(keys) + 6, f"{len(log)} access log lines")
        replica_of = {}
        for key, port, tried, status in log:
            check(status == 200 and len(tried) == 1 and port in by_port, f"log: {key} {tried} {status}")
            replica_of.setdefault(key, set()).add(port)
        split = {key: ports for key, ports in replica_of.items() if len(ports) > 1}
        check(not split, f"requests with the same key reached different replicas: {split}")
        counts = {p: sum(1 for key, port, _, _ in log if port == p) for p in by_port}
        print(f"replicas {list(by_port)}: {counts} requests (metrics: {served}); keys per replica "
              f"{[sum(1 for k in keys if replica_of[k] == {p}) for p in by_port]}")
        check(all(s > 0 for s in served), f"a replica served nothing: {served}")
        check([counts[r.port] for r in replicas] == served, f"access log {counts} vs the replicas' metrics {served}")

        # Streaming through nginx: the same text as straight from the replica, token by token.
        key = keys[0]
        home = by_port[next(iter(replica_of[key]))]
        sbody = {"prompt": prompt, "max_tokens": 40, "temperature": 0, "ignore_eos": True}
        direct, _ = stream_text(home, sbody)
        conn = http.client.HTTPConnection("127.0.0.1", home.port, timeout=60)
        conn.request("POST", "/v1/completions", body=json.dumps({**sbody, "stream": True}),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        check(r.getheader("X-Accel-Buffering") == "no", f"stream headers {r.getheaders()}")  # nginx: do not buffer
        r.read()
        conn.close()
        times = []
        n_log = len(log)  # access log lines so far
        t0 = time.time()
        text, last = stream_text(ngx, sbody, headers={"X-Session-Id": key}, times=times)
        check(text == direct and last["usage"]["completion_tokens"] == 40, f"through nginx {text!r} != {direct!r}")
        spread = times[-1] - times[0]
        print(f"stream through nginx: {len(times)} text chunks over {spread:.2f}s (first after {times[0] - t0:.2f}s)")
        check(len(times) >= 20 and spread >= 0.2, "the stream came through nginx in one burst (buffered?)")
        n_log += 1
        check(ngx.wait_lines(n_log)[-1][1] == home.port, "the stream went to another replica than its key's")

        # The openai client with the session key as a default header.
        try:
            from openai import OpenAI
        except ImportError:
            OpenAI = None
            print("note: the openai package is not installed; its part of the nginx case is skipped")
        if OpenAI:
            client = OpenAI(base_url=f"http://127.0.0.1:{ngx.port}/v1", api_key="none", max_retries=0, timeout=60,
                            default_headers={"X-Session-Id": key})
            r = client.completions.create(model="x", prompt=prompt, max_tokens=2, temperature=0)
            check(r.choices[0].text == want_text, f"openai through nginx: {r.choices[0].text!r}")
            n_log += 1
            line = ngx.wait_lines(n_log)[-1]
            check(line[:2] == (key, home.port), f"openai request routed {line}")

        # A replica dies: its keys go to the other replica (nginx tries the next one on the ring).
        dead = replicas[0]
        moved = [k for k in keys if replica_of[k] == {dead.port}]
        kept = [k for k in keys if replica_of[k] == {replicas[1].port}]
        check(moved and kept, "test set-up: both replicas should own keys")
        check(dead.stop() == 0, "replica exit status")
        for k in moved[:8] + kept[:4]:
            status, _, res = ngx_post(ngx, body, k)
            check(status == 200 and res["choices"][0]["text"] == want_text, f"after a replica died, {k}: {status} {res}")
        for k, port, tried, status in ngx.wait_lines(n_log + len(moved[:8] + kept[:4]))[n_log:]:
            check(port == replicas[1].port, f"after a replica died, {k} answered by {port} (tried {tried})")
        print(f"replica {dead.port} stopped: {len(moved[:8])} of its keys answered by {replicas[1].port}")
    finally:
        if ngx:
            ngx.stop()
        for r in replicas:
            r.stop()


def ngx_post(ngx, body, key, path="/v1/completions"):
    conn = http.client.HTTPConnection("127.0.0.1", ngx.port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["X-Session-Id"] = key
        conn.request("POST", path, body=json.dumps(body), headers=headers)
        r = conn.getresponse()
        data = r.read()
        try:
            res = json.loads(data) if data else None
        except ValueError:  # nginx's own error pages are HTML
            res = {"raw": data.decode("utf-8", "replace")[:200]}
        return r.status, dict(r.getheaders()), res
    finally:
        conn.close()


def needle_document():
    """Two needles in a noise haystack (about 1,200 SmolLM2 tokens)."""
    parts = []
    for i in range(60):
        parts.append("The grass is green. The sky is blue. The sun is yellow. Here we go.")
        if i == 15:
            parts.append("The special magic number for river is 4817265.")
        if i == 45:
            parts.append("The special magic number for mountain is 9034512.")
    return " ".join(parts)


def case_sessions(binary):
    """Requests naming a "session" (issue 10): the first compresses and stores the document, the
    next ones fork it and re-select from its cold tier: the same answers as `snapkv run --question
    Q1 --question Q2 --cold-tier int8` on one compressed document; another document under the id
    is rebuilt; the least recently used context goes first under --session-budget; sessions off
    is a clear 400."""
    if not os.path.exists(SMOLLM2):
        print(f"SKIP: {SMOLLM2} missing (scripts/get-model.sh smollm2)")
        return
    doc = needle_document()
    q1 = "What is the special magic number for river?"
    q2 = "What is the special magic number for mountain?"
    press = ["--press", "snapkv", "--budget", "128"]
    cmd = [binary, "run", "-m", SMOLLM2, "--chat", "-p", doc, *press, "--cold-tier", "int8", "--question", q1,
           "--question", q2, "-n", "12", "--temp", "0", "--json", "-t", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    check(out.returncode == 0, f"{cmd}: {out.stderr}")
    cli = [a["text"] for a in json.loads(out.stdout)["answers"]]
    check("4817" in cli[0] and "9034" in cli[1], f"the CLI's answers {cli}")

    def ask(srv, q, sid, d=doc, want=200):
        body = {"model": "smollm2", "messages": [{"role": "user", "content": d}, {"role": "user", "content": q}],
                "max_tokens": 12, "temperature": 0, "session": sid}
        status, _, j = srv.post("/v1/chat/completions", body, timeout=300)
        check(status == want, f"session {sid}: status {status}: {j}")
        return j

    srv = Server(binary, SMOLLM2, *press)
    try:
        r1 = ask(srv, q1, "doc")
        s1 = r1["snapkv"]["session"]
        check(s1["id"] == "doc" and not s1["reused"] and s1["stored"] and s1["kv_cold_bytes"] > 0, s1)
        check(r1["choices"][0]["message"]["content"] == cli[0], f"{r1['choices'][0]} vs the CLI's {cli[0]!r}")
        r2 = ask(srv, q2, "doc")
        s2 = r2["snapkv"]["session"]
        check(s2["reused"] and not s2["stored"], s2)
        check(r2["choices"][0]["message"]["content"] == cli[1], f"{r2['choices'][0]} vs the CLI's {cli[1]!r}")
        check(r2["snapkv"]["kv_cache_bytes"] == r1["snapkv"]["kv_cache_bytes"], "the same hot budget")
        r3 = ask(srv, q1, "doc")
        check(r3["snapkv"]["session"]["reused"] and r3["choices"][0]["message"]["content"] == cli[0], r3)
        r4 = ask(srv, q1, "doc", d=doc + " The end.")  # another document under the same id
        check(not r4["snapkv"]["session"]["reused"] and r4["snapkv"]["session"]["stored"], r4["snapkv"])
        # Validation: a session needs the document's user message and the question's.
        ask(srv, q1, "bad id", want=400)
    finally:
        srv.stop()

    # Room for one stored context (hot + cold ~ 17.6 MB here): "b" evicts "a".
    one = s1["kv_cold_bytes"] + r1["snapkv"]["kv_cache_bytes"]
    srv = Server(binary, SMOLLM2, *press, "--session-budget", str(int(one * 1.5)))
    try:
        check(ask(srv, q1, "a")["snapkv"]["session"]["stored"], "a stored")
        check(ask(srv, q1, "b")["snapkv"]["session"]["stored"], "b stored")
        check(not ask(srv, q2, "a")["snapkv"]["session"]["reused"], "a was evicted by b")
    finally:
        srv.stop()
    srv = Server(binary, STORIES, "--session-budget", "0")
    try:
        j = ask(srv, q1, "doc", want=400)
        check("--session-budget 0" in j["error"]["message"], j)
    finally:
        srv.stop()

    # A full --session-cold-tier disk (RLIMIT_FSIZE: the server's files stop at 64 KiB, its small
    # log included) fails the session request alone, 500 naming the directory, while a plain request
    # decoding in the same steps finishes (before, every request of the failing step got a 500).
    cold_dir = tempfile.mkdtemp(prefix="snapkv-cold-full-")

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    srv = Server(binary, SMOLLM2, *press, "--session-cold-tier", f"disk:{cold_dir}", "--debug-step-delay-ms", "20",
                 preexec_fn=small_files)
    try:
        plain = {}

        def run_plain():
            plain["r"] = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 150,
                                                      "temperature": 0, "ignore_eos": True}, timeout=300)
            plain["done"] = time.time()

        t = threading.Thread(target=run_plain)
        t.start()
        srv.wait_metric("snapkv_requests_running", lambda v: v == 1)
        j = ask(srv, q1, "full", want=500)
        failed_at = time.time()
        check(f"cold tier file in {cold_dir}" in j["error"]["message"], j)
        t.join(300)
        check(plain["done"] > failed_at, "test set-up: the plain request ended before the session request failed")
        status, _, res = plain["r"]
        check(status == 200 and res["usage"]["completion_tokens"] == 150, f"the plain request beside it: {status} {res}")
        check(ask(srv, q2, "other", want=500)["error"]["type"] == "server_error", "a second session request")
    finally:
        check(srv.stop() == 0, "exit status")
        shutil.rmtree(cold_dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--case", required=True,
                    choices=["openai", "concurrency", "concurrency16", "admission", "disconnect", "hostile", "nginx",
                             "sessions"])
    a = ap.parse_args()
    if not os.path.exists(STORIES):
        print(f"SKIP: {STORIES} missing")
        return
    try:
        globals()["case_" + a.case](os.path.abspath(a.bin))
    except BaseException:
        # A server that died (a sanitizer report ends it with status 66) leaves only a client
        # error here: show what each server wrote.
        for srv in SERVERS:
            print(f"--- log of the server on port {srv.port} (exit status {srv.proc.poll()}):\n{srv.report()}",
                  flush=True)
        raise
    print(f"PASS: {a.case}")


if __name__ == "__main__":
    main()
