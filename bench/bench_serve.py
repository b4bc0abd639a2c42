#!/usr/bin/env python3
"""Load benchmark of `snapkv serve` (issue 8), and of llama-cpp-python's OpenAI server as the peer.

Scenario `load` (default): starts one server on 127.0.0.1, fires --requests streaming
POST /v1/completions at once (each a distinct prompt of exactly --prompt-tokens tokens, greedy,
--gen tokens with end-of-generation suppressed so every request generates exactly --gen), reads
every stream to its end and reports: requests admitted at once (snapkv: the max of
snapkv_requests_running polled from /metrics and snapkv_requests_running_peak; both servers: the
most streams that had their first token and not yet their last, seen by the client), total
output tokens/s (all generated tokens / time from the first request sent to the last [DONE]),
decode-phase tokens/s (generated tokens after each request's first / the time during which at
least one stream was between its first and last token), p50/p99 of TTFT, inter-token latency
(every gap between two text chunks of a stream, all streams pooled) and end-to-end time.

Scenario `prefill-itl`: --streams short requests decode; when each has --itl-warmup tokens a
--prompt-tokens request arrives (its press from --big-press); reported: the running streams'
inter-token gaps before it arrived and while it was prefilled (until its first token), and its
prefill time.

The load client is a small asyncio HTTP/1.1 client (the standard library only), so that it costs
the 2-core machine as little CPU as possible; see docs/benchmarks.md (issue 8) for why not aiperf.
Prompts are slices of the texts in /usr/share/common-licenses (each starting at a different
place), cut to the exact token count with the snapkv server's POST /tokenize and cached under
build/sbench/prompts/. Run it (and so the servers) under `chrt -f 50` on a shared machine.

Usage (from the repository root):
    chrt -f 50 python3 bench/bench_serve.py -m smollm2 --server snapkv --press none --kv-memory-budget 232MiB
    chrt -f 50 python3 bench/bench_serve.py -m smollm2 --server snapkv --press snapkv --kv-memory-budget 232MiB
    chrt -f 50 python3 bench/bench_serve.py -m smollm2 --server llamacpp --flash-attn on
    chrt -f 50 python3 bench/bench_serve.py -m smollm2 --scenario prefill-itl --big-press none
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import benchlib as bl

MODELS = {"smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3": "gemma-3-270m-q4_k_m.gguf"}
LICENSES = pathlib.Path("/usr/share/common-licenses")
SBENCH = bl.ROOT / "build" / "sbench"
WARM_TEXT = "The quick brown fox jumps over the lazy dog. " * 8


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="load benchmark of snapkv serve / llama-cpp-python's server")
    ap.add_argument("--snapkv", type=pathlib.Path, default=bl.ROOT / "build" / "snapkv")
    ap.add_argument("-m", "--model", default="smollm2", help="smollm2, gemma3 or a GGUF path")
    ap.add_argument("--server", choices=["snapkv", "llamacpp"], default="snapkv")
    ap.add_argument("--scenario", choices=["load", "prefill-itl"], default="load")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-c", "--ctx", type=int, default=8192, help="context per request on both servers")
    ap.add_argument("--port", type=int, default=0, help="server port (0: a free one for each server started)")
    ap.add_argument("-N", "--requests", type=int, default=16, help="concurrent requests (scenario load)")
    ap.add_argument("--prompt-tokens", type=int, default=4096)
    ap.add_argument("--gen", type=int, default=128, help="generated tokens per request")
    # snapkv serve
    ap.add_argument("--press", default="none", help="snapkv: server default press (none or snapkv)")
    ap.add_argument("--budget", type=int, default=1024, help="snapkv: --budget of the snapkv press")
    ap.add_argument("--kv-memory-budget", default="0", help="snapkv: --kv-memory-budget")
    ap.add_argument("--prefill-rows", type=int, default=None, help="snapkv: --prefill-rows (default: the server's)")
    # llama-cpp-python
    ap.add_argument("--python", type=pathlib.Path, default=bl.ROOT / "build" / "bench-venv" / "bin" / "python",
                    help="python with llama-cpp-python[server] (llamacpp)")
    ap.add_argument("--flash-attn", choices=["on", "off"], default="off")
    ap.add_argument("--n-batch", type=int, default=2048)
    ap.add_argument("--n-ubatch", type=int, default=512)
    # prefill-itl
    ap.add_argument("--streams", type=int, default=4, help="prefill-itl: running streams")
    ap.add_argument("--stream-prompt-tokens", type=int, default=256)
    ap.add_argument("--stream-gen", type=int, default=320)
    ap.add_argument("--itl-warmup", type=int, default=24, help="prefill-itl: tokens each stream has before the big prompt")
    ap.add_argument("--big-press", default="none", help="prefill-itl: the big request's press spec")
    ap.add_argument("--io-prio", type=int, default=60,
                    help="under SCHED_FIFO: priority of the client and the server's non-compute threads (0: leave)")
    ap.add_argument("--timeout", type=float, default=1200, help="bound on the whole load (seconds)")
    ap.add_argument("--json-out", type=pathlib.Path, default=None)
    ap.add_argument("--report", type=pathlib.Path, nargs="+", default=None,
                    help="print Markdown tables of these raw JSON files (no benchmark)")
    return ap.parse_args()


def model_path(m: str) -> pathlib.Path:
    if m in MODELS:
        cache = os.environ.get("SNAPKV_MODELS") or str(pathlib.Path.home() / ".cache" / "snapkv" / "models")
        return bl.require_file(pathlib.Path(cache) / MODELS[m], "model", f"scripts/get-model.sh {m}")
    return bl.require_file(pathlib.Path(m), "model", "a GGUF path")


# ---------------------------------------------------------------------------------------------
# A minimal asyncio HTTP/1.1 client: one connection per request, Content-Length or chunked
# responses; `events` yields (arrival time, SSE data line) as the bytes arrive.


class Http:
    def __init__(self, port: int):
        self.port = port

    async def _open(self, method: str, path: str, body: bytes | None):
        r, w = await asyncio.open_connection("127.0.0.1", self.port)
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nConnection: close\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        w.write(head.encode() + b"\r\n" + (body or b""))
        await w.drain()
        status = int((await r.readline()).split()[1])
        headers = {}
        while True:
            line = await r.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        return r, w, status, headers

    @staticmethod
    async def _pieces(r: asyncio.StreamReader, headers: dict):
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await r.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    return
                data = await r.readexactly(size)
                await r.readline()
                yield data
        elif "content-length" in headers:
            yield await r.readexactly(int(headers["content-length"]))
        else:
            while data := await r.read(65536):
                yield data

    async def request(self, method: str, path: str, obj=None) -> tuple[int, bytes]:
        r, w, status, headers = await self._open(method, path, None if obj is None else json.dumps(obj).encode())
        try:
            return status, b"".join([p async for p in self._pieces(r, headers)])
        finally:
            w.close()

    async def events(self, path: str, obj):
        """Yields (perf_counter at arrival, data string) for each server-sent event."""
        r, w, status, headers = await self._open("POST", path, json.dumps(obj).encode())
        try:
            if status != 200:
                body = b"".join([p async for p in self._pieces(r, headers)])
                raise RuntimeError(f"HTTP {status}: {body[:300]!r}")
            buf = b""
            async for piece in self._pieces(r, headers):
                now = time.perf_counter()
                buf += piece.replace(b"\r\n", b"\n")
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    for line in ev.split(b"\n"):
                        if line.startswith(b"data:"):
                            yield now, line[5:].strip().decode()
        finally:
            w.close()


def http_sync(port: int, method: str, path: str, obj=None, timeout: float = 60) -> tuple[int, bytes]:
    return asyncio.run(asyncio.wait_for(Http(port).request(method, path, obj), timeout))


# ---------------------------------------------------------------------------------------------
# Servers


class Server:
    """A server process in its own process group; stopped by PID (SIGINT, then SIGKILL)."""

    def __init__(self, argv: list[str], port: int, log: pathlib.Path, ready_path: str):
        self.argv, self.port, self.log = argv, port, log
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log, "w")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                bl.fail(f"server exited with {self.proc.returncode}; see {log}")
            try:
                if http_sync(port, "GET", ready_path, timeout=5)[0] == 200:
                    break
            except (OSError, asyncio.TimeoutError, IndexError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                bl.fail(f"server not ready after 120 s; see {log}")
            time.sleep(0.5)

    def cpu_seconds(self) -> float:
        """User + system CPU of the server process so far (all its threads)."""
        try:
            f = pathlib.Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def thread_cpu(self) -> dict[int, float]:
        """CPU seconds of each thread of the server."""
        out = {}
        for t in pathlib.Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                f = (t / "stat").read_text().rsplit(")", 1)[1].split()
                out[int(t.name)] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError, ValueError):
                pass
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def free_port(a) -> int:
    """--port, or a port nobody uses now (also not in TIME_WAIT, which uvicorn cannot bind over)."""
    if a.port:
        return a.port
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_snapkv(a, model: pathlib.Path, kv_budget: str, press: str, log: pathlib.Path) -> Server:
    port = free_port(a)
    argv = [str(a.snapkv), "serve", "-m", str(model), "--port", str(port), "-t", str(a.threads), "-c", str(a.ctx),
            "--kv-memory-budget", kv_budget, "--metrics", "--press", press]
    if press == "snapkv":
        argv += ["--budget", str(a.budget)]
    if a.prefill_rows is not None:
        argv += ["--prefill-rows", str(a.prefill_rows)]
    return Server(argv, port, log, "/health")


def start_llamacpp(a, model: pathlib.Path, log: pathlib.Path) -> Server:
    port = free_port(a)
    argv = [str(a.python), "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
            "--port", str(port), "--n_threads", str(a.threads), "--n_threads_batch", str(a.threads),
            "--n_ctx", str(a.ctx), "--n_batch", str(a.n_batch), "--n_ubatch", str(a.n_ubatch),
            "--flash_attn", "true" if a.flash_attn == "on" else "false",
            # Without this the server ends a running stream as soon as another request waits.
            "--interrupt_requests", "false", "--verbose", "false"]
    return Server(argv, port, log, "/v1/models")


def warm_up_and_split_priorities(a, srv: Server, prompt: str, extra: dict) -> dict:
    """One short request (page faults, thread creation); then, when this script runs at a
    SCHED_FIFO priority P, every server thread that did not compute during it is raised to
    --io-prio (and so is this client), while the compute threads stay at P. Under SCHED_FIFO a
    busy or spinning thread is never preempted by one of the same priority, so without this the
    threads that write the streamed chunks wait until the engine idles."""
    before = srv.thread_cpu()
    load = Load(a, srv.port, extra, metrics=False)

    async def go():
        return await load.one(-1, load.body(prompt, 8))

    asyncio.run(go())
    after = srv.thread_cpu()
    delta = {t: after.get(t, 0) - before.get(t, 0) for t in after}
    top = max(delta.values()) if delta else 0
    compute = sorted(t for t, d in delta.items() if top > 0 and d >= 0.2 * top)
    info = {"compute_threads": compute, "threads": len(after), "compute_cpu_s": [delta[t] for t in compute]}
    if os.sched_getscheduler(0) != os.SCHED_FIFO or a.io_prio <= 0:
        info["io_prio"] = None
        return info
    prio = os.sched_getparam(0).sched_priority
    for t in after:
        if t not in compute:
            try:
                os.sched_setscheduler(t, os.SCHED_FIFO, os.sched_param(a.io_prio))
            except OSError:
                pass
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(a.io_prio))
    info.update({"io_prio": a.io_prio, "compute_prio": prio})
    return info


def eog_token_ids(a, model: pathlib.Path) -> list[int]:
    """End-of-generation token ids of `model`, as llama.cpp sees them (for llama-cpp-python's logit_bias)."""
    code = (
        "import sys, llama_cpp\n"
        "l = llama_cpp.Llama(sys.argv[1], vocab_only=True, verbose=False)\n"
        "v = llama_cpp.llama_model_get_vocab(l.model)\n"
        "print([i for i in range(l.n_vocab()) if llama_cpp.llama_vocab_is_eog(v, i)])\n"
    )
    out = subprocess.run([str(a.python), "-c", code, str(model)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        bl.fail(f"listing EOG tokens failed: {out.stderr[-500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# Prompts


def corpus() -> str:
    """The distinct texts of /usr/share/common-licenses (symlinked duplicates dropped), joined."""
    seen, texts = set(), []
    for p in sorted(LICENSES.iterdir()):
        if not p.is_file():
            continue
        t = p.read_text(errors="replace").strip()
        if t and t not in seen:
            seen.add(t)
            texts.append(t)
    return "\n\n".join(texts)


def build_prompts(a, model: pathlib.Path, n: int, tokens: int, tag: str) -> list[str]:
    """n distinct texts of exactly `tokens` tokens (the snapkv server's count, special tokens
    included), starting at n evenly spaced line starts of the corpus (wrapping around)."""
    cache = SBENCH / "prompts" / f"{model.stem}-{tag}-{n}x{tokens}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    text = corpus()
    starts = []
    for i in range(n):
        s = i * len(text) // n
        s = text.rfind("\n", 0, s) + 1 if s else 0
        starts.append(s)
    srv = start_snapkv(a, model, "0", "none", SBENCH / "logs" / "tokenize.log")
    try:
        def count(t: str) -> list[int]:
            st, body = http_sync(srv.port, "POST", "/tokenize", {"content": t, "add_special": True})
            if st != 200:
                bl.fail(f"/tokenize: HTTP {st}")
            return json.loads(body)["tokens"]

        out = []
        for s in starts:
            src = text[s:] + "\n\n" + text
            while len(src) < tokens * 8:
                src += "\n\n" + text
            src = src[: tokens * 8]
            ids = count(src)
            if len(ids) < tokens:
                bl.fail("corpus too short")
            # Cut at a character position near the token boundary, then adjust by characters.
            lo, hi = 0, len(src)
            while lo < hi:  # the shortest prefix with >= tokens tokens
                mid = (lo + hi) // 2
                if len(count(src[:mid])) >= tokens:
                    hi = mid
                else:
                    lo = mid + 1
            cut = src[:lo]
            if len(count(cut)) != tokens:
                bl.fail(f"could not cut a prompt of exactly {tokens} tokens (got {len(count(cut))})")
            out.append(cut)
    finally:
        srv.stop()
    if len(set(out)) != len(out):
        bl.fail("prompts are not distinct")
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(out))
    return out


# ---------------------------------------------------------------------------------------------
# Load


def pct(xs: list[float], p: float) -> float | None:
    """Percentile with linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * p / 100
    f = int(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    ev = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    cur = best = 0
    for _, d in ev:
        cur += d
        best = max(best, cur)
    return best


class Load:
    def __init__(self, a, port: int, body_extra: dict, metrics: bool):
        self.a, self.http, self.extra, self.metrics = a, Http(port), body_extra, metrics
        self.samples: list[tuple[float, dict]] = []
        self.prompt_tokens: dict[str, int] = {}  # for servers that do not stream usage
        self.t0 = 0.0

    def body(self, prompt: str, max_tokens: int, extra: dict | None = None) -> dict:
        b = {"model": "m", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
             "stream_options": {"include_usage": True}, "ignore_eos": True, **self.extra}
        b.update(extra or {})
        return b

    async def one(self, i: int, body: dict, on_token=None) -> dict:
        rec = {"i": i, "sent": time.perf_counter(), "tokens": [], "usage": None, "snapkv": None}
        async for now, data in self.http.events("/v1/completions", body):
            if data == "[DONE]":
                rec["done"] = now
                break
            j = json.loads(data)
            if "error" in j:
                raise RuntimeError(f"request {i}: {j['error']}")
            if j.get("usage"):
                rec["usage"] = j["usage"]
            if j.get("snapkv"):
                rec["snapkv"] = j["snapkv"]
            for c in j.get("choices") or []:
                if c.get("finish_reason"):
                    rec["finish_reason"] = c["finish_reason"]
                if c.get("text"):
                    rec["tokens"].append(now)
                    if on_token:
                        on_token(i, len(rec["tokens"]))
        rec.setdefault("done", time.perf_counter())
        if rec["usage"] is None:
            # llama-cpp-python streams no usage: a stream that ended by length made max_tokens tokens.
            n = body["max_tokens"] if rec.get("finish_reason") == "length" else len(rec["tokens"])
            rec["usage"] = {"completion_tokens": n, "prompt_tokens": self.prompt_tokens.get(body["prompt"]),
                            "from": "finish_reason/chunks"}
        return rec

    async def poll_metrics(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                st, body = await self.http.request("GET", "/metrics")
                if st == 200:
                    m = {}
                    for line in body.decode().splitlines():
                        if line.startswith("snapkv_") and " " in line and "{" not in line:
                            k, v = line.rsplit(" ", 1)
                            m[k] = float(v)
                    self.samples.append((time.perf_counter(), m))
            except (OSError, ValueError, IndexError):
                pass
            try:
                await asyncio.wait_for(stop.wait(), 0.25)
            except asyncio.TimeoutError:
                pass

    async def run(self, coros) -> list[dict]:
        stop = asyncio.Event()
        poller = asyncio.create_task(self.poll_metrics(stop)) if self.metrics else None
        self.t0 = time.perf_counter()
        try:
            return await asyncio.wait_for(asyncio.gather(*coros), self.a.timeout)
        finally:
            stop.set()
            if poller:
                await poller


def summarize_load(recs: list[dict], t0: float, samples) -> dict:
    gen = sum(r["usage"]["completion_tokens"] for r in recs)
    end = max(r["done"] for r in recs)
    ttft = [r["tokens"][0] - r["sent"] for r in recs]
    itl = [b - a for r in recs for a, b in zip(r["tokens"], r["tokens"][1:])]
    s_itl_mean = sum(itl) / len(itl) if itl else None
    e2e = [r["done"] - r["sent"] for r in recs]
    spans = [(r["tokens"][0], r["tokens"][-1]) for r in recs]
    decode_time = union_length(spans)
    per_stream = [(len(r["tokens"]) - 1) / (r["tokens"][-1] - r["tokens"][0]) for r in recs if len(r["tokens"]) > 1]
    s = {
        "requests": len(recs),
        "prompt_tokens": sorted({r["usage"]["prompt_tokens"] for r in recs}),
        "completion_tokens": sorted({r["usage"]["completion_tokens"] for r in recs}),
        "chunks_per_request": sorted({len(r["tokens"]) for r in recs}),
        "makespan_s": end - t0,
        "total_out_tok_s": gen / (end - t0),
        "decode_phase_s": decode_time,
        "decode_phase_tok_s": sum(len(r["tokens"]) - 1 for r in recs) / decode_time,
        "per_stream_decode_tok_s_p50": pct(per_stream, 50),
        "ttft_p50_s": pct(ttft, 50), "ttft_p99_s": pct(ttft, 99),
        "itl_p50_s": pct(itl, 50), "itl_p99_s": pct(itl, 99), "itl_mean_s": s_itl_mean,
        "e2e_p50_s": pct(e2e, 50), "e2e_p99_s": pct(e2e, 99),
        "client_decoding_at_once_max": max_overlap(spans),
    }
    if samples:
        s["running_max_polled"] = max(m.get("snapkv_requests_running", 0) for _, m in samples)
        s["running_peak_gauge"] = samples[-1][1].get("snapkv_requests_running_peak")
        s["kv_bytes_in_use_peak"] = samples[-1][1].get("snapkv_kv_cache_bytes_in_use_peak")
        s["kv_bytes_reserved_max"] = max(m.get("snapkv_kv_cache_bytes_reserved", 0) for _, m in samples)
        s["kv_bytes_budget"] = samples[-1][1].get("snapkv_kv_cache_bytes_budget")
        last = samples[-1][1]
        if last.get("snapkv_inter_token_latency_seconds_count"):
            s["server_itl_mean_s"] = (last["snapkv_inter_token_latency_seconds_sum"] /
                                      last["snapkv_inter_token_latency_seconds_count"])
    sk = [r["snapkv"] for r in recs if r["snapkv"]]
    if sk:
        s["kv_cache_bytes_reserved_per_request"] = sorted({x["kv_cache_bytes_reserved"] for x in sk})
        s["kv_cache_bytes_per_request"] = sorted({x["kv_cache_bytes"] for x in sk})
        s["server_prefill_ms_p50"] = pct([x["prefill_ms"] for x in sk], 50)
        s["press"] = sorted({x["press"] for x in sk})
    return s


def scenario_load(a, model: pathlib.Path, prompts: list[str], srv: Server, extra: dict) -> dict:
    load = Load(a, srv.port, extra, metrics=a.server == "snapkv")
    if a.server == "llamacpp":
        for p in prompts:  # its own count of the prompt's tokens
            st, body = http_sync(srv.port, "POST", "/extras/tokenize", {"input": p})
            load.prompt_tokens[p] = len(json.loads(body)["tokens"]) if st == 200 else None

    async def go():
        return await load.run([load.one(i, load.body(p, a.gen)) for i, p in enumerate(prompts)])

    cpu0, busy0, w0 = srv.cpu_seconds() + sum(os.times()[:2]), bl._busy_jiffies(), time.perf_counter()
    recs = asyncio.run(go())
    cpu1, busy1, wall = srv.cpu_seconds() + sum(os.times()[:2]), bl._busy_jiffies(), time.perf_counter() - w0
    s = summarize_load(recs, load.t0, load.samples)
    if busy0 is not None and busy1 is not None:
        busy = (busy1 - busy0) / os.sysconf("SC_CLK_TCK")
        s["others_cpu_share"] = max(0.0, (busy - (cpu1 - cpu0)) / (wall * (os.cpu_count() or 1)))
        s["server_cpu_share"] = (cpu1 - cpu0) / (wall * (os.cpu_count() or 1))
    bad = [r["i"] for r in recs if r["usage"]["completion_tokens"] != a.gen or r["usage"]["prompt_tokens"] != a.prompt_tokens]
    if bad:
        print(f"warning: requests {bad} did not have {a.prompt_tokens} prompt / {a.gen} generated tokens", file=sys.stderr)
    return {"summary": s, "requests": [{**r, "tokens": [t - load.t0 for t in r["tokens"]], "sent": r["sent"] - load.t0,
                                        "done": r["done"] - load.t0} for r in recs]}


def scenario_prefill_itl(a, model: pathlib.Path, streams: list[str], big: str, srv: Server) -> dict:
    load = Load(a, srv.port, {}, metrics=True)
    ready = asyncio.Event()
    counts = [0] * len(streams)
    mark = {}

    def on_token(i, n):
        counts[i] = n
        if min(counts) >= a.itl_warmup:
            ready.set()

    async def big_request():
        if streams:
            await ready.wait()
        mark["arrive"] = time.perf_counter()
        extra = {} if a.big_press == "none" else {"kv_compression": a.big_press}
        rec = await load.one(len(streams), load.body(big, 8, extra))
        mark["first"] = rec["tokens"][0]
        return rec

    async def go():
        return await load.run([load.one(i, load.body(p, a.stream_gen), on_token) for i, p in enumerate(streams)] +
                              [big_request()])

    recs = asyncio.run(go())
    bigrec, srecs = recs[-1], recs[:-1]
    before, during, after = [], [], []
    warm_end = max((r["tokens"][4] for r in srecs), default=0)  # skip each stream's first gaps (others still prefilling)
    for r in srecs:
        for x, y in zip(r["tokens"], r["tokens"][1:]):
            if x >= warm_end and y <= mark["arrive"]:
                before.append(y - x)
            elif y > mark["arrive"] and x < mark["first"]:
                during.append(y - x)
            elif x >= mark["first"]:
                after.append(y - x)
    if srecs and min(r["tokens"][-1] for r in srecs) < mark["first"]:
        print("warning: a stream ended before the big prompt's first token (raise --stream-gen)", file=sys.stderr)
    s = {
        "streams": len(srecs), "big_prompt_tokens": bigrec["usage"]["prompt_tokens"],
        "big_press": bigrec["snapkv"]["press"] if bigrec["snapkv"] else None,
        "big_ttft_s": mark["first"] - mark["arrive"],
        "big_server_prefill_ms": bigrec["snapkv"]["prefill_ms"] if bigrec["snapkv"] else None,
        "itl_before_n": len(before), "itl_before_p50_s": pct(before, 50), "itl_before_p99_s": pct(before, 99),
        "itl_during_n": len(during), "itl_during_p50_s": pct(during, 50), "itl_during_p99_s": pct(during, 99),
        "itl_during_max_s": max(during) if during else None,
        "itl_after_p50_s": pct(after, 50),
        "prefill_rows": a.prefill_rows,
    }
    return {"summary": s, "requests": [{**r, "tokens": [t - load.t0 for t in r["tokens"]]} for r in recs]}


def label(cfg: dict) -> str:
    if cfg["server"] == "llamacpp":
        return f"llama-cpp-python (flash_attn {cfg['flash_attn']})"
    return "snapkv none" if cfg["press"] == "none" else f"snapkv snapkv:budget={cfg['budget']}"


def report(files: list[pathlib.Path]) -> None:
    runs = [json.loads(f.read_text()) for f in files]
    load = [r for r in runs if r["config"]["scenario"] == "load"]
    ms = lambda x: "-" if x is None else f"{x * 1000:.0f}"  # noqa: E731
    if load:
        print("| model | server | admitted at once | KV reserved / request | output tok/s | decode-phase tok/s "
              "| TTFT p50 / p99 s | ITL p50 / p99 ms | e2e p50 / p99 s | all done s | others' CPU |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in load:
            c, s = r["config"], r["summary"]
            adm = (f"{s['running_max_polled']:.0f} (peak gauge {s['running_peak_gauge']:.0f})"
                   if "running_max_polled" in s else f"1 (decoding at once: {s['client_decoding_at_once_max']})")
            res = s.get("kv_cache_bytes_reserved_per_request")
            res = f"{res[0] / 2**20:.2f} MiB" if res and len(res) == 1 else (str(res) if res else "-")
            print(f"| {c['model_file'].split('.')[0].split('-q4')[0]} | {label(c)} | {adm} | {res} "
                  f"| {s['total_out_tok_s']:.2f} | {s['decode_phase_tok_s']:.1f} "
                  f"| {s['ttft_p50_s']:.1f} / {s['ttft_p99_s']:.1f} | {ms(s['itl_p50_s'])} / {ms(s['itl_p99_s'])} "
                  f"| {s['e2e_p50_s']:.1f} / {s['e2e_p99_s']:.1f} | {s['makespan_s']:.1f} "
                  f"| {s.get('others_cpu_share', 0) * 100:.0f}% |")
    itl = [r for r in runs if r["config"]["scenario"] == "prefill-itl"]
    if itl:
        print()
        print("| model | streams | 4K request's press | --prefill-rows | ITL before: p50 / p99 ms | ITL during its prefill: "
              "p50 / p99 / max ms (gaps) | its prefill (TTFT) s | server prefill_ms |")
        print("|---|---|---|---|---|---|---|---|")
        for r in itl:
            c, s = r["config"], r["summary"]
            rows = c["prefill_rows"] if c["prefill_rows"] != "None" else "4096 (default)"
            print(f"| {c['model_file'].split('.')[0]} | {s['streams']} | {s['big_press'].split(',')[0]} | {rows} "
                  f"| {ms(s['itl_before_p50_s'])} / {ms(s['itl_before_p99_s'])} "
                  f"| {ms(s['itl_during_p50_s'])} / {ms(s['itl_during_p99_s'])} / {ms(s['itl_during_max_s'])} "
                  f"({s['itl_during_n']}) | {s['big_ttft_s']:.1f} | {s['big_server_prefill_ms']:.0f} |")


def main() -> None:
    a = parse_args()
    # SIGTERM (e.g. from timeout) unwinds like SIGINT, so that the server is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.report:
        report(a.report)
        return
    model = model_path(a.model)
    SBENCH.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    if a.scenario == "load":
        prompts = build_prompts(a, model, a.requests, a.prompt_tokens, "load")
    else:
        streams = build_prompts(a, model, a.streams, a.stream_prompt_tokens, "streams") if a.streams else []
        big = build_prompts(a, model, 1, a.prompt_tokens, "big")[0]
    tag = f"{model.stem}-{a.scenario}-{a.server}"
    extra: dict = {}
    if a.server == "snapkv":
        tag += f"-{a.press}"
        srv = start_snapkv(a, model, a.kv_memory_budget if a.scenario == "load" else "0", a.press,
                           SBENCH / "logs" / f"{tag}.log")
    else:
        tag += f"-fa{a.flash_attn}"
        eog = eog_token_ids(a, model)
        # llama-cpp-python has no ignore_eos: bias every end-of-generation token away.
        extra = {"logit_bias": {str(t): -100.0 for t in eog}}
        srv = start_llamacpp(a, model, SBENCH / "logs" / f"{tag}.log")
    try:
        prio = warm_up_and_split_priorities(a, srv, WARM_TEXT, extra)
        if a.scenario == "load":
            res = scenario_load(a, model, prompts, srv, extra)
        else:
            res = scenario_prefill_itl(a, model, streams, big, srv)
    finally:
        srv.stop()
    res["config"] = {k: str(v) for k, v in vars(a).items()}
    res["config"]["priorities"] = prio
    res["config"]["model_file"] = model.name
    res["config"]["server_argv"] = " ".join(srv.argv)
    res["config"]["git"] = bl.git_rev()
    res["config"]["started"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t_start))
    res["config"]["sched"] = {0: "other", 1: "fifo", 2: "rr"}.get(os.sched_getscheduler(0), "?")
    out = a.json_out or SBENCH / f"{tag}.json"
    out.write_text(json.dumps(res, indent=1))
    print(json.dumps(res["summary"], indent=1))
    print(f"raw: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
