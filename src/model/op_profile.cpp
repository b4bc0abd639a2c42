// snapkv: names of the profiled operations (snapkv/op_profile.h).
#include "snapkv/op_profile.h"

namespace snapkv {

const char* op_name(Op op) {
  switch (op) {
    case Op::Embed:
      return "embed";
    case Op::Norm:
      return "norm";
    case Op::QKV:
      return "qkv";
    case Op::QKNormRope:
      return "qk_norm_rope";
    case Op::KVAppend:
      return "kv_append";
    case Op::Attention:
      return "attention";
    case Op::AttnOutput:
      return "attn_output";
    case Op::FfnGateUp:
      return "ffn_gate_up";
    case Op::FfnAct:
      return "ffn_act";
    case Op::FfnDown:
      return "ffn_down";
    case Op::Residual:
      return "residual";
    case Op::Logits:
      return "logits";
  }
  return "?";
}

}  // namespace snapkv
