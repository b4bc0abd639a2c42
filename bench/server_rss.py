#!/usr/bin/env python3
"""RSS of a `snapkv serve` process around compressed sessions (issue 8: malloc_trim).

  python3 bench/server_rss.py --bin build/snapkv [--model smollm2.gguf] [--sessions 8] [--tokens 1000]

Starts a server (-t 1), measures its RSS when loaded and idle, runs N sessions at once (prompts of
about --tokens tokens of GPL-3 text, snapkv:budget=128, 8 generated tokens), waits for them to end
and measures the RSS again (idle, every sequence freed), then repeats the round once. Prints
the RSS (VmRSS) and the high-water mark (VmHWM) in MiB.
"""
import argparse
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
import server_test as st  # noqa: E402


def mem(pid):
    with open(f"/proc/{pid}/status") as f:
        s = f.read()
    return tuple(int(re.search(rf"{k}:\s+(\d+)", s).group(1)) / 1024 for k in ("VmRSS", "VmHWM"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", default=st.SMOLLM2)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--press", default="snapkv:budget=128,window=16")
    a = ap.parse_args()
    text = st.long_text()
    srv = st.Server(os.path.abspath(a.bin), a.model, "-c", str(a.tokens + 512))
    try:
        srv.post("/v1/completions", {"prompt": "Hello", "max_tokens": 1, "temperature": 0})
        print(f"idle after load: RSS {mem(srv.proc.pid)[0]:.1f} MiB")
        for rnd in range(2):
            out = [None] * a.sessions

            def w(i):
                start = (i * 1543 + rnd * 977) % (len(text) - a.tokens * 5)
                body = {"prompt": text[start:start + int(a.tokens * 4.2)], "max_tokens": 8, "temperature": 0,
                        "ignore_eos": True, "kv_compression": a.press}
                out[i] = srv.post("/v1/completions", body, timeout=600)

            t0 = time.time()
            ts = [threading.Thread(target=w, args=(i,)) for i in range(a.sessions)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            for status, _, res in out:
                st.check(status == 200 and res["snapkv"]["compressed"], f"{status} {res}")
            srv.wait_metric("snapkv_kv_cache_bytes_in_use", lambda v: v == 0)
            time.sleep(0.5)
            rss, hwm = mem(srv.proc.pid)
            n = [res["usage"]["prompt_tokens"] for _, _, res in out]
            print(f"round {rnd + 1}: {a.sessions} sessions of {min(n)}..{max(n)} prompt tokens ({a.press}) in "
                  f"{time.time() - t0:.1f}s; idle after: RSS {rss:.1f} MiB, peak (VmHWM) {hwm:.1f} MiB")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
