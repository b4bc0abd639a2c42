// snapkv press `none`: keeps every prompt position (no compression; the baseline). It has no
// scorer and takes no keys; make_press() builds the keep-all press of press_base.h for it.
#include "kv/presses/scorer.h"

namespace snapkv::press_detail {

const PressDef& none_press() {
  static const PressDef def{.name = "none", .doc = "keeps every prompt position (no compression)"};
  return def;
}

}  // namespace snapkv::press_detail
