"""A small Python binding of snapkv's C API (snapkv/snapkv_c.h) with ctypes: no compiler and
no dependency beyond the standard library.

    from snapkv_ctypes import Engine
    with Engine("model.gguf") as engine:
        seq = engine.new_sequence()
        ids = engine.tokenize("Once upon a time")
        out = seq.generate(ids, n_predict=32, temp=0, press="snapkv:budget=256",
                           on_token=lambda tok, text: print(text, end="", flush=True))
        print(out.stop_reason, seq.stats()["kv_cache_bytes"])

The library is found from the `lib` argument of Engine / load_library(), else $SNAPKV_LIB, else
the linker's search path (ctypes.util.find_library("snapkv")). Every failing C call raises
SnapkvError with the status name and the library's message.
"""

import ctypes
import ctypes.util
import operator
import os
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence as Seq

_STATUS = ["ok", "invalid_argument", "io", "out_of_memory", "context_full", "buffer_too_small", "internal"]
_STOP = ["eos", "n_predict", "context_full", "stop", "cancelled"]
KV_TYPES = {"f16": 0, "f32": 1, "q8_0": 2, "q4_0": 3}


class SnapkvError(RuntimeError):
    """A C call returned a status other than SNAPKV_OK."""

    def __init__(self, status: int, message: str):
        self.status = _STATUS[status] if 0 <= status < len(_STATUS) else f"status {status}"
        self.message = message
        super().__init__(f"{self.status}: {message}")


class ModelInfo(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("arch", ctypes.c_char_p), ("name", ctypes.c_char_p),
                ("n_layer", ctypes.c_int32), ("n_embd", ctypes.c_int32), ("n_head", ctypes.c_int32),
                ("n_head_kv", ctypes.c_int32), ("head_dim", ctypes.c_int32), ("n_vocab", ctypes.c_int32),
                ("n_ctx_train", ctypes.c_int64), ("weight_bytes", ctypes.c_uint64), ("n_threads", ctypes.c_int32),
                ("has_tokenizer", ctypes.c_int32), ("bos", ctypes.c_int32), ("eos", ctypes.c_int32)]


class Stats(ctypes.Structure):
    _fields_ = [("n_past", ctypes.c_int64), ("n_ctx", ctypes.c_int64), ("kv_cache_bytes", ctypes.c_uint64),
                ("kv_cache_bytes_full", ctypes.c_uint64), ("peak_kv_cache_bytes", ctypes.c_uint64),
                ("compressed", ctypes.c_int32), ("budget", ctypes.c_int64), ("n_prompt_tokens", ctypes.c_int64),
                ("prefill_ms", ctypes.c_double), ("compression_ms", ctypes.c_double),
                ("press", ctypes.c_char_p), ("compression_note", ctypes.c_char_p), ("window", ctypes.c_int32),
                ("kv_cold_bytes", ctypes.c_uint64), ("n_reselections", ctypes.c_int32), ("reselect_ms", ctypes.c_double)]


class GenerateParams(ctypes.Structure):
    _fields_ = [("n_predict", ctypes.c_int64), ("temp", ctypes.c_float), ("top_k", ctypes.c_int32),
                ("top_p", ctypes.c_float), ("seed", ctypes.c_uint64), ("ignore_eos", ctypes.c_int32),
                ("press", ctypes.c_char_p), ("stop", ctypes.POINTER(ctypes.c_char_p)), ("n_stop", ctypes.c_size_t),
                ("question", ctypes.POINTER(ctypes.c_int32)), ("n_question", ctypes.c_size_t),
                ("prompt_question_tokens", ctypes.c_size_t)]


class GenerateResult(ctypes.Structure):
    _fields_ = [("n_tokens", ctypes.c_int64), ("stop_reason", ctypes.c_int), ("n_prompt_tokens", ctypes.c_int64),
                ("n_decode_steps", ctypes.c_int64), ("ttft_ms", ctypes.c_double), ("prefill_ms", ctypes.c_double),
                ("prefill_tokens_per_s", ctypes.c_double), ("decode_ms", ctypes.c_double),
                ("decode_tokens_per_s", ctypes.c_double)]


TOKEN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_size_t)

_P = ctypes.c_void_p
_I32P = ctypes.POINTER(ctypes.c_int32)
_SIZEP = ctypes.POINTER(ctypes.c_size_t)
_FLOATP = ctypes.POINTER(ctypes.c_float)
# name: (restype, argtypes); restype int = snapkv_status.
_SIGNATURES = {
    "snapkv_version": (ctypes.c_char_p, []),
    "snapkv_last_error": (ctypes.c_char_p, []),
    "snapkv_engine_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int32, ctypes.POINTER(_P)]),
    "snapkv_engine_load_ex": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int32, ctypes.c_int, ctypes.POINTER(_P)]),
    "snapkv_engine_free": (None, [_P]),
    "snapkv_engine_info": (ctypes.c_int, [_P, ctypes.POINTER(ModelInfo)]),
    "snapkv_tokenize": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, _I32P,
                                       ctypes.c_size_t, _SIZEP]),
    "snapkv_token_to_piece": (ctypes.c_int, [_P, ctypes.c_int32, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                             _SIZEP]),
    "snapkv_detokenize": (ctypes.c_int, [_P, _I32P, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                         _SIZEP]),
    "snapkv_token_is_eog": (ctypes.c_int, [_P, ctypes.c_int32, ctypes.POINTER(ctypes.c_int)]),
    "snapkv_sequence_new": (ctypes.c_int, [_P, ctypes.c_int64, ctypes.c_int, ctypes.POINTER(_P)]),
    "snapkv_sequence_new_kv": (ctypes.c_int, [_P, ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                              ctypes.POINTER(_P)]),
    "snapkv_sequence_free": (None, [_P]),
    "snapkv_sequence_fork": (ctypes.c_int, [_P, ctypes.POINTER(_P)]),
    "snapkv_sequence_reset": (ctypes.c_int, [_P]),
    "snapkv_sequence_n_past": (ctypes.c_int64, [_P]),
    "snapkv_sequence_n_ctx": (ctypes.c_int64, [_P]),
    "snapkv_prefill": (ctypes.c_int, [_P, _I32P, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(_FLOATP)]),
    "snapkv_prefill_question": (ctypes.c_int, [_P, _I32P, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                                               ctypes.POINTER(_FLOATP)]),
    "snapkv_decode": (ctypes.c_int, [_P, ctypes.c_int32, ctypes.POINTER(_FLOATP)]),
    "snapkv_decode_batch": (ctypes.c_int, [ctypes.POINTER(_P), _I32P, ctypes.c_size_t, _FLOATP, ctypes.c_size_t]),
    "snapkv_sequence_stats": (ctypes.c_int, [_P, ctypes.POINTER(Stats)]),
    "snapkv_sequence_new_cold": (ctypes.c_int, [_P, ctypes.c_int64, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_P)]),
    "snapkv_prefill_reselect": (ctypes.c_int, [_P, _I32P, ctypes.c_size_t, ctypes.POINTER(_FLOATP)]),
    "snapkv_session_save": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "snapkv_session_load": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(_P)]),
    "snapkv_sampler_new": (ctypes.c_int, [ctypes.c_float, ctypes.c_int32, ctypes.c_float, ctypes.c_uint64,
                                          ctypes.POINTER(_P)]),
    "snapkv_sampler_free": (None, [_P]),
    "snapkv_sampler_sample": (ctypes.c_int, [_P, _FLOATP, ctypes.c_size_t, _I32P]),
    "snapkv_generate_params_default": (GenerateParams, []),
    "snapkv_generate": (ctypes.c_int, [_P, _I32P, ctypes.c_size_t, ctypes.POINTER(GenerateParams), TOKEN_CALLBACK,
                                       _P, ctypes.POINTER(GenerateResult)]),
}

_libs = {}

# Ranges of the integer types of the signatures: ctypes itself wraps an integer that does not
# fit (2**32 + 5 as a c_int32 is 5), which would slip past the C API's own range checks.
_INT_RANGES = {ctypes.c_int32: ("int32", -2**31, 2**31 - 1), ctypes.c_int: ("int", -2**31, 2**31 - 1),
               ctypes.c_int64: ("int64", -2**63, 2**63 - 1), ctypes.c_uint64: ("uint64", 0, 2**64 - 1),
               ctypes.c_size_t: ("size_t", 0, 2**(8 * ctypes.sizeof(ctypes.c_size_t)) - 1)}


def _fit(value, ctype, what: str) -> int:
    """value as an int (anything with __index__: int, numpy integers) if it fits ctype, an integer
    type of _INT_RANGES; else ValueError (TypeError for a bool or a non-integer) naming `what`."""
    name, lo, hi = _INT_RANGES[ctype]
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, not bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{what} {v} is outside the range of {name} [{lo}, {hi}]")
    return v


def _checked(name: str, fn, argtypes):
    """fn with every integer argument (anything with __index__ but a bool) checked against its C
    type's range first."""
    ints = [(i, t) for i, t in enumerate(argtypes) if t in _INT_RANGES]

    def call(*args):
        args = list(args)
        for i, t in ints:
            if i < len(args) and hasattr(args[i], "__index__") and not isinstance(args[i], bool):
                args[i] = _fit(args[i], t, f"{name}: argument {i + 1}")
        return fn(*args)
    return call


def load_library(path: Optional[str] = None) -> ctypes.CDLL:
    """The C library with every function's signature declared (loaded once per path)."""
    path = path or os.environ.get("SNAPKV_LIB") or ctypes.util.find_library("snapkv")
    if not path:
        raise OSError("libsnapkv.so not found: pass its path or set SNAPKV_LIB")
    if path not in _libs:
        lib = ctypes.CDLL(path)
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
            setattr(lib, name, _checked(name, fn, args))
        _libs[path] = lib
    return _libs[path]


def _check(lib: ctypes.CDLL, status: int) -> None:
    if status != 0:
        raise SnapkvError(status, lib.snapkv_last_error().decode("utf-8", "replace"))


def _cstr(value, what: str) -> bytes:
    """A str (UTF-8) or a path (os.fsencode) as a C string's bytes; a NUL inside would end the C
    string there and silently cut the value, so it is refused."""
    b = os.fsencode(value) if isinstance(value, os.PathLike) else value.encode()
    if b"\0" in b:
        raise ValueError(f"{what} contains a NUL character: {value!r}")
    return b


def _path(value, what: str) -> bytes:
    """A file path (str, bytes or os.PathLike) as a C string's bytes, a NUL inside refused."""
    b = os.fsencode(value)
    if b"\0" in b:
        raise ValueError(f"{what} contains a NUL character: {value!r}")
    return b


def _ids(tokens: Seq[int]):
    """Token ids as a C int32 array (ValueError for an id outside int32, which ctypes would wrap)."""
    return (ctypes.c_int32 * len(tokens))(*[_fit(t, ctypes.c_int32, "token id") for t in tokens])


@dataclass
class Generation:
    tokens: List[int] = field(default_factory=list)
    text: str = ""
    stop_reason: str = ""
    n_prompt_tokens: int = 0
    ttft_ms: float = 0.0
    prefill_ms: float = 0.0
    decode_tokens_per_s: float = 0.0


class Engine:
    """A loaded model (snapkv_engine). Safe to share between threads."""

    def __init__(self, path: str, n_threads: int = 0, lib: Optional[str] = None, prefill_attention: str = "exact"):
        """prefill_attention: "exact" (default), "bf16" (AVX512-BF16 CPUs) or "int8" (AVX2); see
        snapkv_c.h, snapkv_prefill_attention."""
        self.lib = load_library(lib)
        modes = {"exact": 0, "bf16": 1, "int8": 2}
        if prefill_attention not in modes:
            raise ValueError(f"prefill_attention must be one of {sorted(modes)}, not {prefill_attention!r}")
        h = _P()
        _check(self.lib, self.lib.snapkv_engine_load_ex(_path(path, "path"), n_threads, modes[prefill_attention],
                                                        ctypes.byref(h)))
        self._h = h
        info = ModelInfo()
        _check(self.lib, self.lib.snapkv_engine_info(self._h, ctypes.byref(info)))
        self.info = {name: getattr(info, name) for name, _ in ModelInfo._fields_}
        for k in ("path", "arch", "name"):
            self.info[k] = self.info[k].decode("utf-8", "replace")
        self.n_vocab = info.n_vocab

    def close(self) -> None:
        if getattr(self, "_h", None):
            self.lib.snapkv_engine_free(self._h)
            self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> List[int]:
        b = text.encode("utf-8")
        n = ctypes.c_size_t()
        st = self.lib.snapkv_tokenize(self._h, b, len(b), add_special, parse_special, None, 0, ctypes.byref(n))
        if st not in (0, 5):
            _check(self.lib, st)
        buf = (ctypes.c_int32 * max(n.value, 1))()
        _check(self.lib, self.lib.snapkv_tokenize(self._h, b, len(b), add_special, parse_special, buf, n.value,
                                                  ctypes.byref(n)))
        return list(buf[:n.value])

    def _text(self, call) -> str:
        n = ctypes.c_size_t()
        st = call(None, 0, ctypes.byref(n))
        if st not in (0, 5):
            _check(self.lib, st)
        buf = ctypes.create_string_buffer(n.value + 1)
        _check(self.lib, call(buf, len(buf), ctypes.byref(n)))
        return buf.raw[:n.value].decode("utf-8", "replace")

    def token_to_piece(self, token: int, render_special: bool = False) -> str:
        return self._text(lambda b, c, n: self.lib.snapkv_token_to_piece(self._h, token, render_special, b, c, n))

    def detokenize(self, tokens: Seq[int], render_special: bool = False) -> str:
        ids = _ids(tokens)
        return self._text(lambda b, c, n: self.lib.snapkv_detokenize(self._h, ids, len(tokens), render_special, b, c,
                                                                      n))

    def is_eog(self, token: int) -> bool:
        r = ctypes.c_int()
        _check(self.lib, self.lib.snapkv_token_is_eog(self._h, token, ctypes.byref(r)))
        return bool(r.value)

    def new_sequence(self, n_ctx: int = 0, kv_type: str = "f16", cold_tier: Optional[str] = None,
                     kv_type_v: Optional[str] = None) -> "Sequence":
        """A new sequence; cold_tier ("int8", "f16" or "disk:DIR") keeps what a press evicts for follow-up
        questions (Sequence.prefill_reselect). kv_type stores keys (and values unless kv_type_v): e.g.
        kv_type="q8_0", kv_type_v="q4_0"."""
        if kv_type not in KV_TYPES:
            raise ValueError(f"kv_type must be one of {sorted(KV_TYPES)}")
        if kv_type_v is not None and kv_type_v not in KV_TYPES:
            raise ValueError(f"kv_type_v must be one of {sorted(KV_TYPES)}")
        h = _P()
        if kv_type_v is not None:
            _check(self.lib, self.lib.snapkv_sequence_new_kv(self._h, n_ctx, KV_TYPES[kv_type], KV_TYPES[kv_type_v],
                                                             _cstr(cold_tier, "cold_tier") if cold_tier is not None else None,
                                                             ctypes.byref(h)))
        elif cold_tier is None:
            _check(self.lib, self.lib.snapkv_sequence_new(self._h, n_ctx, KV_TYPES[kv_type], ctypes.byref(h)))
        else:
            _check(self.lib, self.lib.snapkv_sequence_new_cold(self._h, n_ctx, KV_TYPES[kv_type], _cstr(cold_tier, "cold_tier"),
                                                               ctypes.byref(h)))
        return Sequence(self, h)

    def load_session(self, path: str, cold_dir: Optional[str] = None, n_ctx: int = 0) -> "Sequence":
        """Restores a sequence saved by Sequence.save_session with this model (n_ctx 0: the saved context)."""
        h = _P()
        _check(self.lib, self.lib.snapkv_session_load(self._h, _path(path, "path"),
                                                      _path(cold_dir, "cold_dir") if cold_dir else None,
                                                      n_ctx, ctypes.byref(h)))
        return Sequence(self, h)

    def decode_batch(self, seqs: Seq["Sequence"], tokens: Seq[int]) -> List[List[float]]:
        """One step over several sequences: row i appends tokens[i] to seqs[i]; returns the logits rows."""
        if len(tokens) != len(seqs):
            raise ValueError(f"decode_batch: {len(seqs)} sequences but {len(tokens)} tokens (one token per row)")
        handles = (_P * len(seqs))(*[s._h for s in seqs])
        out = (ctypes.c_float * (len(seqs) * self.n_vocab))()
        _check(self.lib, self.lib.snapkv_decode_batch(handles, _ids(tokens), len(seqs), out, len(out)))
        return [out[i * self.n_vocab:(i + 1) * self.n_vocab] for i in range(len(seqs))]


class Sequence:
    """The state of one request (snapkv_sequence). Use from one thread at a time."""

    def __init__(self, engine: Engine, handle):
        self.engine, self.lib, self._h = engine, engine.lib, handle

    def close(self) -> None:
        if getattr(self, "_h", None):
            self.lib.snapkv_sequence_free(self._h)
            self._h = None

    __del__ = close

    @property
    def n_past(self) -> int:
        return self.lib.snapkv_sequence_n_past(self._h)

    @property
    def n_ctx(self) -> int:
        return self.lib.snapkv_sequence_n_ctx(self._h)

    def _logits(self, p) -> List[float]:
        return p[:self.engine.n_vocab]

    def prefill(self, tokens: Seq[int], press: Optional[str] = None, question_tokens: int = 0) -> List[float]:
        """Runs the prompt (compressed by `press`, e.g. "snapkv:budget=256"); returns the last logits.
        question_tokens: the prompt's last tokens that are its question (window=question presses)."""
        out = _FLOATP()
        _check(self.lib, self.lib.snapkv_prefill_question(self._h, _ids(tokens), len(tokens),
                                                          _cstr(press, "press") if press else None, question_tokens,
                                                          ctypes.byref(out)))
        return self._logits(out)

    def prefill_reselect(self, tokens: Seq[int]) -> List[float]:
        """A follow-up question after a compressed prompt: re-selects the kept entries from the cold tier."""
        out = _FLOATP()
        _check(self.lib, self.lib.snapkv_prefill_reselect(self._h, _ids(tokens), len(tokens), ctypes.byref(out)))
        return self._logits(out)

    def save_session(self, path: str) -> None:
        """Writes this sequence (KV cache, cold tier, press statistics) to `path` (Engine.load_session)."""
        _check(self.lib, self.lib.snapkv_session_save(self._h, _path(path, "path")))

    def decode(self, token: int) -> List[float]:
        out = _FLOATP()
        _check(self.lib, self.lib.snapkv_decode(self._h, token, ctypes.byref(out)))
        return self._logits(out)

    def fork(self) -> "Sequence":
        h = _P()
        _check(self.lib, self.lib.snapkv_sequence_fork(self._h, ctypes.byref(h)))
        return Sequence(self.engine, h)

    def reset(self) -> None:
        _check(self.lib, self.lib.snapkv_sequence_reset(self._h))

    def stats(self) -> dict:
        s = Stats()
        _check(self.lib, self.lib.snapkv_sequence_stats(self._h, ctypes.byref(s)))
        d = {name: getattr(s, name) for name, _ in Stats._fields_}
        d["press"] = d["press"].decode()
        d["compression_note"] = d["compression_note"].decode()
        d["compressed"] = bool(d["compressed"])
        return d

    def generate(self, prompt: Seq[int], n_predict: int = 128, temp: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, seed: int = 0, ignore_eos: bool = False, press: Optional[str] = None,
                 stop: Seq[str] = (), question: Seq[int] = (), prompt_question_tokens: int = 0,
                 on_token: Optional[Callable[[int, str], Optional[bool]]] = None) -> Generation:
        """Prefill + sampling on an empty sequence. on_token(token, text) is called for every token
        (and once with token -1 and the held-back rest); returning True stops the generation."""
        p = self.lib.snapkv_generate_params_default()
        p.n_predict = _fit(n_predict, ctypes.c_int64, "n_predict")
        p.top_k = _fit(top_k, ctypes.c_int32, "top_k")
        p.seed = _fit(seed, ctypes.c_uint64, "seed")
        p.temp, p.top_p = temp, top_p
        p.ignore_eos = 1 if ignore_eos else 0
        press_b = _cstr(press, "press") if press else None
        p.press = press_b
        stops = (ctypes.c_char_p * max(len(stop), 1))(*[_cstr(s, f"stop[{i}]") for i, s in enumerate(stop)])
        p.stop, p.n_stop = stops, len(stop)
        q = _ids(question)
        p.question, p.n_question = q, len(question)
        p.prompt_question_tokens = _fit(prompt_question_tokens, ctypes.c_size_t, "prompt_question_tokens")
        gen = Generation()
        raised = []

        def callback(_user, token, text, length):
            try:
                piece = ctypes.string_at(text, length).decode("utf-8", "replace")  # valid UTF-8 from the library
                gen.text += piece
                if token >= 0:
                    gen.tokens.append(token)
                return 1 if on_token is not None and on_token(token, piece) else 0
            except BaseException as e:  # never let a Python exception unwind through C
                raised.append(e)
                return 1

        res = GenerateResult()
        st = self.lib.snapkv_generate(self._h, _ids(prompt), len(prompt), ctypes.byref(p), TOKEN_CALLBACK(callback),
                                      None, ctypes.byref(res))
        if raised:
            raise raised[0]
        _check(self.lib, st)
        gen.stop_reason = _STOP[res.stop_reason]
        gen.n_prompt_tokens, gen.ttft_ms, gen.prefill_ms = res.n_prompt_tokens, res.ttft_ms, res.prefill_ms
        gen.decode_tokens_per_s = res.decode_tokens_per_s
        return gen


class Sampler:
    """Greedy (temp <= 0) or top-k / temperature / top-p sampling with a seed (snapkv_sampler)."""

    def __init__(self, engine: Engine, temp: float = 0.8, top_k: int = 40, top_p: float = 0.95, seed: int = 0):
        self.lib = engine.lib
        h = _P()
        _check(self.lib, self.lib.snapkv_sampler_new(temp, top_k, top_p, seed, ctypes.byref(h)))
        self._h = h

    def close(self) -> None:
        if getattr(self, "_h", None):
            self.lib.snapkv_sampler_free(self._h)
            self._h = None

    __del__ = close

    def sample(self, logits: Seq[float]) -> int:
        arr = (ctypes.c_float * len(logits))(*logits)
        t = ctypes.c_int32()
        _check(self.lib, self.lib.snapkv_sampler_sample(self._h, arr, len(logits), ctypes.byref(t)))
        return t.value


def version(lib: Optional[str] = None) -> str:
    return load_library(lib).snapkv_version().decode()
