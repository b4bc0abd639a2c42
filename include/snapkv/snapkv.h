// snapkv: the public C++ API in one include. Load an Engine (model + tokenizer), make a
// Sequence per request and a Workspace per worker, then either call generate() or drive
// Engine::step with Batches (many sequences decoded together, prefills interleaved).
//
//   auto engine = snapkv::Engine::load("model.gguf");
//   snapkv::Workspace ws(*engine);
//   auto seq = engine->new_sequence({});
//   auto ids = engine->tokenizer().encode("The capital of France is", true, false);
//   snapkv::GenerateOptions opt;
//   opt.press = snapkv::PressSpec::parse("snapkv:budget=1024");
//   auto r = snapkv::generate(*engine, *seq, ids, {}, opt, ws);
#pragma once

#include "snapkv/batch.h"
#include "snapkv/chat.h"
#include "snapkv/chat_template.h"
#include "snapkv/cold_tier.h"
#include "snapkv/engine.h"
#include "snapkv/error.h"
#include "snapkv/generate.h"
#include "snapkv/kv_type.h"
#include "snapkv/op_profile.h"
#include "snapkv/prefill_attention.h"
#include "snapkv/press_spec.h"
#include "snapkv/sampling.h"
#include "snapkv/sequence.h"
#include "snapkv/session.h"
#include "snapkv/stop_filter.h"
#include "snapkv/tokenizer.h"
#include "snapkv/workspace.h"
