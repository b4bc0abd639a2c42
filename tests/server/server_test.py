#!/usr/bin/env python3
"""Process tests of `snapkv serve`: real servers on 127.0.0.1 (a free port), the official `openai`
client and raw HTTP. Each case is bounded in time; every server is stopped by the PID started here.

  server_test.py --bin build/snapkv --case openai|concurrency|concurrency16|admission|disconnect|hostile
"""
import argparse
import http.client
import json
import os
import re
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


class Server:
    """A `snapkv serve` process on a free loopback port."""

    def __init__(self, binary, model, *args, ready_timeout=60, env=None):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="snapkv-serve-", suffix=".log", delete=False)
        cmd = [binary, "serve", "-m", model, "--host", "127.0.0.1", "--port", str(self.port), "-t", "1", "--metrics", *args]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **env} if env else None)
        deadline = time.time() + ready_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                fail(f"server exited early ({self.proc.returncode}): {self.output()}")
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.kill()
        fail(f"server not ready in {ready_timeout}s: {self.output()}")

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()[-3000:]

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

    def metrics(self):
        status, _, body = self.request("GET", "/metrics")
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


def cli_greedy(binary, model, prompt, n, press=None, chat=False):
    cmd = [binary, "run", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "--json", "-t", "1"]
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
    srv = Server(binary, STORIES, "--max-queue", "16")
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
        srv.wait_metric("snapkv_kv_cache_bytes_in_use", lambda v: v == 0)
        srv.wait_metric("snapkv_kv_cache_bytes_reserved", lambda v: v == 0)
        check(m["snapkv_requests_running"] == 0, "requests still running")
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
    # With AVX-512 VNNI, a quantized matmul of >= 8 rows (16 decode rows, a prefill chunk) runs the
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
    common = ["--kv-memory-budget", str(budget), "--debug-step-delay-ms", "20"]
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
        check(m["snapkv_kv_cache_bytes_in_use"] == 0 and m["snapkv_kv_cache_bytes_reserved"] == 0, "bytes freed")
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


def case_hostile(binary):
    srv = Server(binary, STORIES, "--max-body", "65536", "--api-key", "k", "-c", "256")
    auth = {"Authorization": "Bearer k", "Content-Type": "application/json"}
    ok_body = {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}
    try:
        status, _, _ = srv.request("POST", "/v1/completions", json.dumps(ok_body), auth)
        check(status == 200, f"normal request {status}")
        rss0 = rss_kib(srv.proc.pid)
        cases = [
            (b"{", 400), (b"", 400), (b"null", 400), (b"[]", 400), (b'"x"', 400), (b"{\"prompt\":}", 400),
            (b'{"prompt":"\xff\xfe"}', 400), (b'{"prompt":"\xc3\x28"}', 400), (b'{"prompt":"a"' + b" " * 10, 400),
            (json.dumps({"prompt": 5}).encode(), 400), (json.dumps({"prompt": None}).encode(), 400),
            (json.dumps({"prompt": "a", "max_tokens": -1}).encode(), 400),
            (json.dumps({"prompt": "a", "max_tokens": 10 ** 30}).encode(), 400),
            (b'{"prompt":"a","max_tokens":1e999}', 400),
            (json.dumps({"prompt": "a", "max_tokens": "9"}).encode(), 400),
            (json.dumps({"prompt": "a", "temperature": 1e308}).encode(), 400),
            (json.dumps({"prompt": "a", "top_p": -1}).encode(), 400),
            (json.dumps({"prompt": "a", "n": 5}).encode(), 400),
            (json.dumps({"prompt": "a", "stop": {"x": 1}}).encode(), 400),
            (json.dumps({"prompt": "a", "stop": ["x" * 5000]}).encode(), 400),
            (json.dumps({"prompt": "a", "kv_compression": "nosuchpress"}).encode(), 400),
            (json.dumps({"prompt": "a", "kv_compression": {"press": "snapkv", "window": 0}}).encode(), 400),
            (json.dumps({"prompt": "a", "kv_compression": {"press": "snapkv", "budget": 10 ** 40}}).encode(), 400),
            (json.dumps({"prompt": "a", "kv_compression": {"press": "snapkv", "zzz": 1}}).encode(), 400),
            (json.dumps({"prompt": "a", "compression_ratio": 2}).encode(), 400),
            (json.dumps({"prompt": "a", "seed": "x"}).encode(), 400),
            (json.dumps({"prompt": "a", "stream": 1}).encode(), 400),
            (json.dumps({"prompt": "word " * 400, "max_tokens": 1}).encode(), 400),  # longer than -c 256
            (json.dumps({"prompt": "a", "unknown_field": [1, 2, 3], "max_tokens": 1}).encode(), 200),
            (b"{" * 100000, 413),
            (json.dumps({"prompt": "a" * 70000}).encode(), 413),
            (b"[" * 5000 + b"]" * 5000, 400),
        ]
        n = 0
        for rep in range(10):
            for body, want in cases:
                status, _, resp = srv.request("POST", "/v1/completions", body, auth)
                check(status == want, f"{body[:80]!r}: {status} (want {want}) {resp[:200]!r}")
                if want != 200:
                    err = json.loads(resp)["error"]
                    check(err["message"] and err["type"] and err["code"], f"error shape {err}")
                n += 1
            # Routes, methods, auth.
            for method, path, headers, want in [
                ("GET", "/nope", auth, 404), ("POST", "/v1/completions", {}, 401),
                ("POST", "/v1/completions", {"Authorization": "Bearer wrong"}, 401),
                ("POST", "/v1/completions", {"Authorization": "k"}, 401), ("GET", "/v1/models", auth, 200),
                ("POST", "/detokenize", auth, 400), ("GET", "/health", {}, 200)]:
                status, _, _ = srv.request(method, path, b"{}" if method == "POST" else None, headers)
                check(status == want, f"{method} {path}: {status} (want {want})")
                n += 1
            for body, want in [({"tokens": [1, 2, 3]}, 200), ({"tokens": [-1]}, 400), ({"tokens": [10 ** 12]}, 400),
                               ({"tokens": ["a"]}, 400), ({"content": 5}, 400)]:
                path = "/tokenize" if "content" in body else "/detokenize"
                status, _, _ = srv.request("POST", path, json.dumps(body), auth)
                check(status == want, f"{path} {body}: {status} (want {want})")
                n += 1
        # A client that sends half a body and goes away.
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Length: 1000\r\n\r\n{\"pro")
            s.close()
            n += 1
        status, _, resp = srv.request("POST", "/v1/completions", json.dumps(ok_body), auth)
        check(status == 200 and json.loads(resp)["usage"]["completion_tokens"] == 4, f"normal request after: {status}")
        rss1 = rss_kib(srv.proc.pid)
        print(f"{n} hostile requests; RSS {rss0} KiB -> {rss1} KiB")
        check(rss1 < rss0 + 64 * 1024, f"RSS grew from {rss0} to {rss1} KiB")
        check(srv.proc.poll() is None, "the server died")
    finally:
        rc = srv.stop()
    check(rc == 0, f"exit status {rc}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--case", required=True,
                    choices=["openai", "concurrency", "concurrency16", "admission", "disconnect", "hostile"])
    a = ap.parse_args()
    if not os.path.exists(STORIES):
        print(f"SKIP: {STORIES} missing")
        return
    globals()["case_" + a.case](os.path.abspath(a.bin))
    print(f"PASS: {a.case}")


if __name__ == "__main__":
    main()
