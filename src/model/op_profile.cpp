// snapkv: names of the profiled operations (snapkv/op_profile.h).
#include "snapkv/op_profile.h"

namespace snapkv {

const char* profile_op_name(ProfileOp op) {
  switch (op) {
    case ProfileOp::Embed:
      return "embed";
    case ProfileOp::Norm:
      return "norm";
    case ProfileOp::QKV:
      return "qkv";
    case ProfileOp::QKNormRope:
      return "qk_norm_rope";
    case ProfileOp::KVAppend:
      return "kv_append";
    case ProfileOp::Attention:
      return "attention";
    case ProfileOp::AttnOutput:
      return "attn_output";
    case ProfileOp::FfnGateUp:
      return "ffn_gate_up";
    case ProfileOp::FfnAct:
      return "ffn_act";
    case ProfileOp::FfnDown:
      return "ffn_down";
    case ProfileOp::Residual:
      return "residual";
    case ProfileOp::Logits:
      return "logits";
  }
  return "?";
}

}  // namespace snapkv
