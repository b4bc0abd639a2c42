"""Shared helpers of the Python benchmark drivers in bench/ (not a benchmark itself).

- where things are: the snapkv CLI (build/snapkv), the cached Gemma model;
- the machine and versions, for the report header;
- prompts with an exact token count (whole-text prefixes of the GPL-3, repeated as needed);
- running `snapkv run --json` and the llama.cpp worker (llamacpp_worker.py), each in a
  fresh process; medians and Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Sequence

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"
GPL3 = pathlib.Path("/usr/share/common-licenses/GPL-3")
GOLDEN = ROOT / "tests" / "data" / "gemma3-270m" / "kv_f16" / "golden.json"


def fail(msg: str, code: int = 2) -> None:
    """Prints `<script>: error: msg` on stderr and exits with `code`."""
    print(f"{pathlib.Path(sys.argv[0]).name}: error: {msg}", file=sys.stderr)
    sys.exit(code)


def default_model() -> pathlib.Path:
    cache = os.environ.get("SNAPKV_MODELS") or str(pathlib.Path.home() / ".cache" / "snapkv" / "models")
    return pathlib.Path(cache) / MODEL_NAME


def require_file(path: pathlib.Path, what: str, hint: str) -> pathlib.Path:
    if not path.is_file():
        fail(f"{what} not found: {path} ({hint})")
    return path


def machine_info() -> dict:
    """CPU model, logical CPUs, physical cores, memory, OS, Python."""
    cpu, cores = platform.processor() or "?", set()
    phys, core = None, None
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k == "model name":
                cpu = v
            elif k == "physical id":
                phys = v
            elif k == "core id":
                core = v
            elif not line.strip() and core is not None:
                cores.add((phys, core))
                core = None
        if core is not None:
            cores.add((phys, core))
    except OSError:
        pass
    mem = "?"
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "physical_cores": len(cores) or None,
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def git_rev() -> str:
    try:
        r = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True)
        return r.stdout.strip() or "?"
    except OSError:
        return "?"


def snapkv_version(binary: pathlib.Path) -> str:
    try:
        r = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
        return (r.stdout.strip() or r.stderr.strip() or "?").splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def llama_cpp_versions() -> dict:
    """llama-cpp-python version and the ggml commit it was built from (None when absent)."""
    try:
        import ctypes

        import llama_cpp
    except ImportError:
        return {"llama_cpp_python": None, "ggml_commit": None}
    commit = None
    try:
        f = ctypes.CDLL(str(pathlib.Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so")).ggml_commit
        f.restype = ctypes.c_char_p
        commit = f().decode()
    except (OSError, AttributeError):
        pass
    return {"llama_cpp_python": llama_cpp.__version__, "ggml_commit": commit}


def warn_if_busy(threads: int) -> None:
    """Warns on stderr when other work already occupies the CPUs the benchmark will use."""
    load = os.getloadavg()[0]
    free = (os.cpu_count() or 1) - load
    if free < threads:
        print(f"warning: load average {load:.2f} on {os.cpu_count()} CPUs: fewer than {threads} idle; "
              "timings will be noisy", file=sys.stderr)


def header_lines(extra: dict) -> list[str]:
    """Markdown bullet lines describing machine and versions."""
    m = machine_info()
    lines = [
        f"- CPU: {m['cpu']} ({m['logical_cpus']} logical CPUs, {m['physical_cores']} physical cores), memory {m['memory']}",
        f"- OS: {m['os']}, Python {m['python']}",
        f"- snapkv: git {git_rev()}",
        "- load average (1/5/15 min) at report time: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    ]
    lines += [f"- {k}: {v}" for k, v in extra.items()]
    return lines


def source_text(path: pathlib.Path | None) -> str:
    """Benchmark prompt source: `path`, else the GPL-3, else the golden data's GPL-3 prefix."""
    if path is not None:
        return require_file(path, "text file", "--text").read_text()
    if GPL3.is_file():
        return GPL3.read_text()
    if GOLDEN.is_file():
        for p in json.loads(GOLDEN.read_text())["prompts"]:
            if p["name"] == "gpl3_long":
                return p["text"]
    fail(f"no prompt text: neither {GPL3} nor {GOLDEN} exists (pass --text FILE)")
    return ""


def repeated(text: str, n_chars: int) -> str:
    """`text` repeated (separated by a blank line) until it has at least n_chars characters."""
    out = text
    while len(out) < n_chars:
        out += "\n\n" + text
    return out


class LlamaTokenCounter:
    """Token counts (BOS included) with llama.cpp's tokenizer of `model` (vocab only)."""

    def __init__(self, model: pathlib.Path):
        import llama_cpp

        self._llm = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)

    def ids(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode(), add_bos=True, special=False)

    def __call__(self, text: str) -> int:
        return len(self.ids(text))

    def token_prefix(self, source: str, n_tokens: int) -> str | None:
        """The text of the first n_tokens tokens (BOS included) of `source` repeated, if it
        re-tokenizes to exactly those ids (a prompt that ends on a token boundary), else None."""
        big = repeated(source, 16 * n_tokens)
        ids = self.ids(big)
        if len(ids) < n_tokens:
            return None
        text = self._llm.detokenize(ids[1:n_tokens]).decode("utf-8", errors="strict")
        return text if self.ids(text) == ids[:n_tokens] else None


class SnapkvTokenCounter:
    """Token counts (BOS included) with `snapkv tokenize -f` (the text goes through a temporary
    file, so any length is counted exactly; argv would cap `-p` at 128 KiB)."""

    def __init__(self, binary: pathlib.Path, model: pathlib.Path):
        self.binary, self.model = binary, model

    def ids(self, text: str) -> list[int]:
        with tempfile.NamedTemporaryFile(prefix="snapkv-tokenize-", suffix=".txt") as f:
            f.write(text.encode())
            f.flush()
            r = subprocess.run(
                [str(self.binary), "tokenize", "-m", str(self.model), "-f", f.name, "--json"],
                capture_output=True,
                text=True,
            )
        if r.returncode != 0:
            raise RuntimeError(f"snapkv tokenize failed: {r.stderr.strip()}")
        return json.loads(r.stdout)["ids"]

    def __call__(self, text: str) -> int:
        return len(self.ids(text))


def text_with_tokens(count: Callable[[str], int], source: str, n_tokens: int) -> tuple[str, int]:
    """The shortest character prefix of `source` (repeated as needed) with >= n_tokens tokens.

    Binary search on the prefix length; returns (text, its token count), which equals
    n_tokens unless a merge swallows the boundary (then it is n_tokens + 1 at most, in practice).
    A counter with `token_prefix` (llama.cpp's) first tries a cut at a token boundary, so the
    prompt does not end inside a word.
    """
    if hasattr(count, "token_prefix"):
        try:
            text = count.token_prefix(source, n_tokens)
        except UnicodeDecodeError:
            text = None
        if text is not None:
            return text, n_tokens
    size = n_tokens  # grow the candidate prefix until it is long enough
    big = repeated(source, size)[:size]
    while count(big) < n_tokens:
        if size > 64 * n_tokens + 1_000_000:
            fail(f"could not build a prompt of {n_tokens} tokens from the source text")
        size *= 2
        big = repeated(source, size)[:size]
    lo, hi = size // 2 if size > n_tokens else 1, size
    while lo < hi:
        mid = (lo + hi) // 2
        if count(big[:mid]) >= n_tokens:
            hi = mid
        else:
            lo = mid + 1
    text = big[:lo]
    return text, count(text)


def _busy_jiffies() -> int | None:
    """Non-idle CPU time of the whole machine so far, in clock ticks (/proc/stat)."""
    try:
        f = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(f) - f[3] - (f[4] if len(f) > 4 else 0)  # minus idle and iowait


class Contention:
    """Measures how much CPU *other* processes used while a child process ran.

    share = (machine busy time - CPU time of our children) / (wall time x logical CPUs):
    0 on an idle machine, ~1 when other work kept every CPU busy. Use as a context manager;
    read `.share` afterwards (None when /proc/stat is unavailable).
    """

    def __enter__(self) -> "Contention":
        self._b0, self._c0, self._t0 = _busy_jiffies(), os.times(), time.perf_counter()
        self.share = None
        return self

    def __exit__(self, *exc) -> None:
        b1, c1, wall = _busy_jiffies(), os.times(), time.perf_counter() - self._t0
        if self._b0 is None or b1 is None or wall <= 0:
            return
        busy = (b1 - self._b0) / os.sysconf("SC_CLK_TCK")
        ours = (c1.children_user - self._c0.children_user) + (c1.children_system - self._c0.children_system)
        ours += (c1.user - self._c0.user) + (c1.system - self._c0.system)
        self.share = max(0.0, (busy - ours) / (wall * (os.cpu_count() or 1)))


def add_contention_args(ap: argparse.ArgumentParser) -> None:
    """--max-contention, --max-tries, --quiet-wait: how a peer-comparison script redoes runs that
    other processes disturbed (see wait_quiet and Contention)."""
    ap.add_argument("--max-contention", type=float, default=0.10,
                    help="redo a run when other processes used more than this share of all CPUs during it (1: never)")
    ap.add_argument("--max-tries", type=int, default=10, help="attempts per measurement under --max-contention")
    ap.add_argument("--quiet-wait", type=float, default=600,
                    help="before each attempt, wait up to this many seconds for a quiet moment (others under --max-contention)")


def wait_quiet(max_share: float, timeout_s: float, window_s: float = 3.0) -> float | None:
    """Sleeps until a window_s-long window in which all processes together used at most
    max_share of the CPUs, or until timeout_s passed; returns the last window's share."""
    deadline = time.monotonic() + timeout_s
    share = None
    while True:
        b0 = _busy_jiffies()
        time.sleep(window_s)
        b1 = _busy_jiffies()
        if b0 is None or b1 is None:
            return None
        share = (b1 - b0) / os.sysconf("SC_CLK_TCK") / (window_s * (os.cpu_count() or 1))
        if share <= max_share or time.monotonic() > deadline:
            return share


def add_prefill_attn_arg(ap: argparse.ArgumentParser) -> None:
    """--prefill-attn exact|bf16|int8: snapkv's prefill attention arithmetic (`snapkv run --prefill-attn`).
    Not given: the flag is not passed (the binary's default, exact), so older binaries still run."""
    ap.add_argument("--prefill-attn", choices=["exact", "bf16", "int8"], default=None,
                    help="snapkv's prefill attention arithmetic (default: the binary's, exact; bf16 needs AVX512-BF16, "
                         "int8 AVX2)")


def prefill_attn_args(a: argparse.Namespace) -> list[str]:
    """The `snapkv run` arguments of --prefill-attn (none when it was not given)."""
    return ["--prefill-attn", a.prefill_attn] if a.prefill_attn else []


def prefill_attn_name(a: argparse.Namespace) -> str:
    """--prefill-attn as it runs: the value given, else exact (the binary's default)."""
    return a.prefill_attn or "exact"


class RunError(RuntimeError):
    """A `snapkv run` that failed (non-zero exit, timeout or no JSON report)."""


def run_snapkv(binary: pathlib.Path, args: Sequence[str], timeout: float = 3600, check: bool = True) -> dict:
    """Runs `snapkv run ... --json` and returns the parsed report.

    On failure: exits with a message (check=True) or raises RunError (check=False).
    """
    cmd = [str(binary), "run", *map(str, args), "--json"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RunError(f"snapkv exited with {r.returncode}: {' '.join(cmd)}\n{r.stderr.strip()[-2000:]}")
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise RunError(f"no JSON report from: {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        return json.loads(lines[-1])
    except subprocess.TimeoutExpired:
        err = RunError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}")
    except RunError as e:
        err = e
    if check:
        fail(str(err))
    raise err


def run_llamacpp(request: dict, timeout: float = 3600) -> dict:
    """Runs one llama.cpp measurement in a fresh process (llamacpp_worker.py)."""
    cmd = [sys.executable, str(BENCH / "llamacpp_worker.py")]
    try:
        r = subprocess.run(cmd, input=json.dumps(request), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"llama.cpp worker timed out after {timeout:.0f} s")
    if r.returncode != 0:
        fail(f"llama.cpp worker exited with {r.returncode}:\n{r.stderr.strip()[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table; floats are printed with 1 decimal unless already strings."""

    def cell(x: object) -> str:
        return f"{x:.1f}" if isinstance(x, float) else str(x)

    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows]
    return "\n".join(out)
