#!/usr/bin/env python3
"""Smoke test of the C API through Python ctypes (examples/python/snapkv_ctypes.py): loads
libsnapkv.so from the given path (the build tree or an install prefix), generates from
stories260K and checks llama.cpp's greedy tokens, a manual prefill/decode loop, batched decode,
statistics of a compressed prompt, streaming/cancel, a follow-up question re-selected from a cold
tier on a saved and reloaded session, and that errors raise SnapkvError.

    python3 tests/python/test_ctypes.py --lib PREFIX/lib/libsnapkv.so --model ../shared/models/stories260K.gguf

Plain python3 + assert: no pytest needed. Exits non-zero on the first failure.
"""

import argparse
import os
import pathlib
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "python"))

import snapkv_ctypes as sk  # noqa: E402

# llama.cpp's greedy continuation of "Once upon a time" (../shared/models/golden/stories260K).
GOLDEN = [432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292]


def expect_error(status, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except sk.SnapkvError as e:
        assert e.status == status, f"expected {status}, got {e}"
        assert e.message.startswith("snapkv_"), e.message
        return e
    raise AssertionError(f"expected SnapkvError({status})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="path of libsnapkv.so")
    ap.add_argument("--model", required=True, help="path of stories260K.gguf")
    a = ap.parse_args()

    assert re.fullmatch(r"\d+\.\d+\.\d+", sk.version(a.lib)), sk.version(a.lib)
    e = expect_error("io", sk.Engine, "/no/such/model.gguf", lib=a.lib)
    assert "/no/such/model.gguf" in e.message, e.message
    expect_error("invalid_argument", sk.Engine, a.model, n_threads=-2, lib=a.lib)
    try:
        sk.Engine(a.model, lib=a.lib, prefill_attention="fp8")
        raise AssertionError("an unknown prefill_attention was accepted")
    except ValueError as err:
        assert "prefill_attention" in str(err), err
    # bf16 / int8 prefill attention: a clear error where the CPU lacks AVX512-BF16 / AVX2;
    # elsewhere stories260K (head_dim 8) runs the exact kernel, so llama.cpp's greedy tokens still
    # come out.
    for mode, needs in (("bf16", "AVX512-BF16"), ("int8", "AVX2")):
        try:
            with sk.Engine(a.model, n_threads=1, lib=a.lib, prefill_attention=mode) as eng:
                seq = eng.new_sequence(n_ctx=64)
                out = seq.generate(eng.tokenize("Once upon a time"), n_predict=len(GOLDEN), temp=0, ignore_eos=True)
                assert out.tokens == GOLDEN, (mode, out.tokens)
        except sk.SnapkvError as err:
            assert err.status == "invalid_argument" and needs in err.message, (mode, err)

    with sk.Engine(a.model, n_threads=2, lib=a.lib) as eng:
        assert eng.info["arch"] == "llama" and eng.n_vocab == 512, eng.info
        ids = eng.tokenize("Once upon a time")
        assert ids == [1, 403, 407, 261, 378], ids
        assert eng.token_to_piece(403) == " Once"
        assert eng.detokenize(ids[1:]) == "Once upon a time"
        assert eng.is_eog(eng.info["eos"]) and not eng.is_eog(403)
        expect_error("invalid_argument", eng.token_to_piece, 512)
        # Integers that do not fit the C types raise ValueError (ctypes would wrap 2**32 + 5 to 5,
        # past the C API's range checks).
        for fn, args, kwargs in [(eng.is_eog, (2**32 + 2,), {}), (eng.token_to_piece, (2**32 + 403,), {}),
                                 (eng.detokenize, ([1, 2**32 + 9],), {}), (eng.new_sequence, (), {"n_ctx": 2**64 + 16}),
                                 (eng.is_eog, (-2**31 - 1,), {})]:
            try:
                fn(*args, **kwargs)
                raise AssertionError(f"{fn.__name__}{args} {kwargs} was accepted")
            except ValueError as err:
                assert "outside the range" in str(err), err

        # Greedy generation with streaming: llama.cpp's tokens, streamed text == result text.
        seq = eng.new_sequence()
        streamed = []
        out = seq.generate(ids, n_predict=20, temp=0, ignore_eos=True,
                           on_token=lambda tok, text: streamed.append(text) and False)
        assert out.tokens == GOLDEN, out.tokens
        assert out.stop_reason == "n_predict", out.stop_reason
        assert "".join(streamed) == out.text, (streamed, out.text)
        assert out.text.startswith(", there was a little girl named Lily."), out.text
        assert seq.n_past == 5 + 19 and out.ttft_ms > 0

        # The same by hand: prefill, greedy sampler, decode.
        seq.reset()
        sampler = sk.Sampler(eng, temp=0)
        logits = seq.prefill(ids)
        assert len(logits) == 512
        manual = []
        for i in range(20):
            manual.append(sampler.sample(logits))
            if i + 1 < 20:
                logits = seq.decode(manual[-1])
        assert manual == GOLDEN, manual

        n_past = seq.n_past

        class Index:  # an integer that is not an int, as numpy's int64 is (ctypes takes its __index__)
            def __init__(self, v):
                self.v = v

            def __index__(self):
                return self.v

        for bad in (2**32 + 5, Index(2**32 + 5)):
            try:
                seq.decode(bad)
                raise AssertionError(f"decode({bad}) was accepted")
            except ValueError as err:
                assert "outside the range" in str(err), err
        assert seq.n_past == n_past
        fork_logits = seq.fork().decode(Index(manual[-1]))  # an in-range __index__ integer decodes
        assert len(fork_logits) == 512
        try:
            seq.generate(ids, n_predict=2**63)
            raise AssertionError("n_predict 2**63 was accepted")
        except ValueError as err:
            assert "n_predict" in str(err), err

        # Batched decode of a fork and the original: identical rows (same cache, same token).
        fork = seq.fork()
        rows = eng.decode_batch([seq, fork], [42, 42])
        assert rows[0] == rows[1]
        assert seq.n_past == fork.n_past == 5 + 20
        # One token per row: a short token list is refused before the library reads past it.
        try:
            eng.decode_batch([seq, fork], [42])
            raise AssertionError("decode_batch with 2 sequences and 1 token was accepted")
        except ValueError as err:
            assert "one token per row" in str(err), err
        assert seq.n_past == fork.n_past == 5 + 20  # nothing ran
        # A NUL inside a string would cut the C string: refused, nothing run.
        for bad in (lambda: seq.prefill([1], press="snapkv:budget=40\0,window=8"),
                    lambda: seq.generate(ids, n_predict=1, stop=["a\0b"])):
            try:
                bad()
                raise AssertionError("a string with a NUL was accepted")
            except ValueError as err:
                assert "NUL" in str(err), err

        # Cancel from the callback; a stop string.
        seq.reset()
        cancelled = seq.generate(ids, n_predict=50, temp=0, ignore_eos=True, on_token=lambda t, s: t >= 0)
        assert cancelled.stop_reason == "cancelled" and len(cancelled.tokens) == 1, cancelled
        seq.reset()
        stopped = seq.generate(ids, n_predict=30, temp=0, ignore_eos=True, stop=[" Lily"])
        assert stopped.stop_reason == "stop" and stopped.text == ", there was a little girl named", stopped

        # A compressed long prompt.
        long_ids = eng.tokenize(" ".join(["Lily and Ben went to the park to play with a big red ball."] * 20))
        assert len(long_ids) > 200, len(long_ids)
        comp = eng.new_sequence(kv_type="f32")
        comp.prefill(long_ids, press="snapkv:budget=64,window=16")
        st = comp.stats()
        assert st["compressed"] and st["budget"] == 64, st
        assert st["kv_cache_bytes"] < st["kv_cache_bytes_full"], st
        press = st["press"]  # canonical: the name, the values given and the defaults
        assert press.startswith("snapkv:") and "budget=64" in press and "window=16" in press, st
        assert st["window"] == 16, st
        # window=question: the prompt's last 20 tokens are its question, the observation window.
        qw = eng.new_sequence(kv_type="f32")
        qw.prefill(long_ids, press="snapkv:budget=64,window=question,window_max=40", question_tokens=20)
        assert qw.stats()["window"] == 20 and qw.stats()["compressed"], qw.stats()
        expect_error("invalid_argument", eng.new_sequence().prefill, ids, press="snapkv", question_tokens=len(ids) + 1)

        # Block-quantized KV types need head_dim % 32 == 0: stories260K's 8 is a clear error naming the type.
        for kv in ("q8_0", "q4_0"):
            err = expect_error("invalid_argument", eng.new_sequence, kv_type=kv)
            assert kv in err.message and "head_dim" in err.message, err.message
        try:
            eng.new_sequence(kv_type="q4_1")
            raise AssertionError("an unknown kv_type was accepted")
        except ValueError as err:
            assert "kv_type" in str(err), err
        # Keys and values of two types: both quantized, else a clear error naming the rule.
        err = expect_error("invalid_argument", eng.new_sequence, kv_type="f16", kv_type_v="q4_0")
        assert "both be quantized" in err.message, err.message
        err = expect_error("invalid_argument", eng.new_sequence, kv_type="q8_0", kv_type_v="q4_0")
        assert "head_dim" in err.message, err.message
        mixed_ok = eng.new_sequence(kv_type="f32", kv_type_v="f32", cold_tier="int8")
        mixed_ok.prefill(ids)
        assert mixed_ok.n_past == len(ids)

        # Errors: bad press, bad token id, full context, non-empty sequence for generate.
        bad = eng.new_sequence(n_ctx=8)
        expect_error("invalid_argument", bad.prefill, ids, press="nosuchpress")
        expect_error("invalid_argument", bad.prefill, [1, 9999])
        expect_error("context_full", bad.prefill, list(range(3, 12)))
        assert bad.n_past == 0
        bad.prefill(ids)
        expect_error("invalid_argument", bad.decode, -5)
        expect_error("invalid_argument", bad.generate, ids, n_predict=2)
        for _ in range(3):
            bad.decode(42)
        expect_error("context_full", bad.decode, 42)
        expect_error("invalid_argument", sk.Sampler, eng, top_p=0.0)
        expect_error("invalid_argument", sk.Engine.new_sequence, eng, n_ctx=-1)
        # Handles are void* to ctypes: one of the wrong kind is refused, not used.
        wrong = sk.Sequence(eng, sampler._h)
        expect_error("invalid_argument", wrong.decode, 42)
        assert wrong.n_past == -1
        wrong._h = None  # not ours to free

        # A Python exception in the callback stops generation and is re-raised (not lost in C).
        seq.reset()

        def boom(tok, text):
            raise KeyError("from the callback")

        try:
            seq.generate(ids, n_predict=5, temp=0, on_token=boom)
            raise AssertionError("the callback's exception was lost")
        except KeyError:
            pass

        # Follow-up questions (issue 10): a document compressed with a cold tier, saved and reloaded,
        # answers a re-selecting question exactly as the original sequence.
        doc_ids = eng.tokenize("Once upon a time, there was a little girl named Lily. She loved to play outside. " * 4)
        question = eng.tokenize(" Who was Lily?", add_special=False)
        doc = eng.new_sequence(cold_tier="int8")
        doc.prefill(doc_ids, press="snapkv:budget=16,window=4")
        dst = doc.stats()
        assert dst["compressed"] and dst["kv_cold_bytes"] > 0, dst
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "doc.snkv")
            doc.save_session(pathlib.Path(path))  # a path object, as Engine() takes one
            again = eng.load_session(pathlib.Path(path))
            assert again.stats()["kv_cold_bytes"] == dst["kv_cold_bytes"]
            a1, a2 = doc.fork(), again.fork()
            assert a1.prefill_reselect(question) == a2.prefill_reselect(question)
            assert a1.stats()["n_reselections"] == 1 and a2.stats()["n_reselections"] == 1
            with open(path, "r+b") as f:
                f.seek(100)
                f.write(b"\xff")
            expect_error("io", eng.load_session, path)
        expect_error("invalid_argument", eng.new_sequence, cold_tier="int4")

    print("test_ctypes: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
