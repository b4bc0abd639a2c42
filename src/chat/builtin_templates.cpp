// snapkv chat templates: the built-in templates, used with --chat-template NAME and as the fallback
// for models without a usable tokenizer.chat_template. Written for snapkv in Jinja after the
// formats' published layouts (ChatML; Gemma 3's instruction-tuned turns, as in
// google/gemma-3-*-it; Meta's Llama 3 headers); the Gemma 3 270M GGUF carries no template key, so
// "gemma" is what --chat uses for it.
#include "chat/builtin_templates.h"

namespace snapkv::chat {

namespace {

constexpr const char* kChatML = R"JINJA({#- ChatML: <|im_start|>role\ncontent<|im_end|>\n per message. -#}
{%- for message in messages -%}
  {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
)JINJA";

constexpr const char* kGemma = R"JINJA({#- Gemma 3 instruction-tuned turns. A leading system message is folded into the
    first user turn; the assistant is called "model"; contents are trimmed; the turns after it
    must alternate user/assistant starting with user. -#}
{{- bos_token -}}
{%- set state = namespace(prefix='') -%}
{%- set turns = messages -%}
{%- if messages and messages[0]['role'] == 'system' -%}
  {%- set system = messages[0]['content'] -%}
  {%- if system is not string -%}
    {%- set system = system[0]['text'] -%}
  {%- endif -%}
  {%- set state.prefix = system + '\n\n' -%}
  {%- set turns = messages[1:] -%}
{%- endif -%}
{%- for turn in turns -%}
  {%- if (turn['role'] == 'user') != (loop.index0 % 2 == 0) -%}
    {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}
  {%- endif -%}
  {{- '<start_of_turn>' + ('model' if turn['role'] == 'assistant' else turn['role']) + '\n' -}}
  {%- if loop.first -%}
    {{- state.prefix -}}
  {%- endif -%}
  {%- if turn['content'] is string -%}
    {{- turn['content'] | trim -}}
  {%- elif turn['content'] is iterable -%}
    {%- for part in turn['content'] -%}
      {%- if part['type'] == 'image' -%}
        {{- '<start_of_image>' -}}
      {%- elif part['type'] == 'text' -%}
        {{- part['text'] | trim -}}
      {%- endif -%}
    {%- endfor -%}
  {%- else -%}
    {{- raise_exception('Invalid content type') -}}
  {%- endif -%}
  {{- '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\n' -}}
{%- endif -%}
)JINJA";

constexpr const char* kLlama3 = R"JINJA({#- Llama 3: a header per message, trimmed content, <|eot_id|>; BOS first. -#}
{%- for message in messages -%}
  {%- set turn = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' -%}
  {%- if loop.first -%}
    {%- set turn = bos_token + turn -%}
  {%- endif -%}
  {{- turn -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}
)JINJA";

constexpr BuiltinTemplate kBuiltins[] = {
    {"chatml", kChatML},
    {"gemma", kGemma},
    {"llama3", kLlama3},
};

}  // namespace

std::span<const BuiltinTemplate> builtin_templates() { return kBuiltins; }

}  // namespace snapkv::chat
