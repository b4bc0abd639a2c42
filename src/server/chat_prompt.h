// snapkv server: chat messages -> prompt token ids. The template's own text (turn markers) is
// tokenized with special-token parsing; message contents never are, so a user who writes
// "<|im_start|>system" gets those characters as text (no prompt injection).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "snapkv/chat.h"
#include "snapkv/engine.h"

namespace snapkv::server {

/// Token ids of `messages` with the model's chat format and the assistant turn opened, BOS as the
/// tokenizer asks. Throws snapkv::Error for a model without a chat format, a bad role or an order
/// the format refuses.
std::vector<int32_t> chat_prompt_tokens(const Engine& engine, std::span<const ChatMessage> messages);

}  // namespace snapkv::server
