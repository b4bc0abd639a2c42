// snapkv tokenizer: UTF-8 decoding/encoding helpers and the GPT-2 byte <-> code point map.
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "snapkv/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace snapkv {
namespace tok {

namespace {

constexpr uint32_t kReplacement = 0xFFFD;

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

std::vector<uint32_t> utf8_to_cpts(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      out.push_back(b);
      i += 1;
    } else if ((b & 0x40) == 0) {  // stray continuation byte
      out.push_back(kReplacement);
      i += 1;
    } else if ((b & 0x20) == 0) {  // 2-byte form
      if (i + 1 < n && is_cont(p[i + 1])) {
        out.push_back((uint32_t(b & 0x1F) << 6) | (p[i + 1] & 0x3F));
        i += 2;
      } else {
        out.push_back(kReplacement);
        i += 1;
      }
    } else if ((b & 0x10) == 0) {  // 3-byte form
      if (i + 2 < n && is_cont(p[i + 1]) && is_cont(p[i + 2])) {
        out.push_back((uint32_t(b & 0x0F) << 12) | (uint32_t(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F));
        i += 3;
      } else {
        out.push_back(kReplacement);
        i += 1;
      }
    } else if ((b & 0x08) == 0) {  // 4-byte form
      if (i + 3 < n && is_cont(p[i + 1]) && is_cont(p[i + 2]) && is_cont(p[i + 3])) {
        out.push_back((uint32_t(b & 0x07) << 18) | (uint32_t(p[i + 1] & 0x3F) << 12) |
                      (uint32_t(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F));
        i += 4;
      } else {
        out.push_back(kReplacement);
        i += 1;
      }
    } else {  // 0xF8..0xFF
      out.push_back(kReplacement);
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0x10FFFF) {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    append_utf8(out, kReplacement);
  }
}

namespace {

struct Gpt2ByteMap {
  std::array<std::string, 256> to_utf8;
  std::array<uint32_t, 256> to_cpt{};
  Gpt2ByteMap() {
    // Printable bytes stand for themselves; the remaining ones get U+0100, U+0101, ... in byte order.
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cpt[b] = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(to_utf8[b], to_cpt[b]);
    }
  }
};

const Gpt2ByteMap& gpt2_map() {
  static const Gpt2ByteMap m;
  return m;
}

}  // namespace

const std::string& gpt2_byte_to_utf8(uint8_t b) { return gpt2_map().to_utf8[b]; }

int gpt2_cpt_to_byte(uint32_t cpt) {
  // Inverse of the construction above, computed arithmetically.
  if ((cpt >= 0x21 && cpt <= 0x7E) || (cpt >= 0xA1 && cpt <= 0xAC) || (cpt >= 0xAE && cpt <= 0xFF)) {
    return static_cast<int>(cpt);
  }
  if (cpt >= 256 && cpt < 256 + 68) {
    const auto& m = gpt2_map();
    for (int b = 0; b < 256; ++b) {
      if (m.to_cpt[b] == cpt) return b;
    }
  }
  return -1;
}

}  // namespace tok

size_t append_valid_utf8(std::string& out, std::string_view bytes, bool hold_tail) {
  static const char kFffd[] = "\xEF\xBF\xBD";
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    // Expected length and allowed range of the second byte (Unicode Table 3-7, well-formed sequences).
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b == 0xE0) {
      len = 3, lo = 0xA0;
    } else if (b >= 0xE1 && b <= 0xEC) {
      len = 3;
    } else if (b == 0xED) {
      len = 3, hi = 0x9F;
    } else if (b >= 0xEE && b <= 0xEF) {
      len = 3;
    } else if (b == 0xF0) {
      len = 4, lo = 0x90;
    } else if (b >= 0xF1 && b <= 0xF3) {
      len = 4;
    } else if (b == 0xF4) {
      len = 4, hi = 0x8F;
    }
    if (len == 0) {  // never valid as a lead byte
      out += kFffd;
      ++i;
      continue;
    }
    size_t j = 1;
    bool bad = false;
    while (j < len) {
      if (i + j >= n) break;  // incomplete so far
      const uint8_t c = p[i + j];
      const uint8_t l = (j == 1) ? lo : 0x80;
      const uint8_t h = (j == 1) ? hi : 0xBF;
      if (c < l || c > h) {
        bad = true;
        break;
      }
      ++j;
    }
    if (bad) {  // maximal subpart p[i, i+j) -> one U+FFFD
      out += kFffd;
      i += j;
    } else if (j < len) {  // ran out of bytes: a valid prefix
      if (hold_tail) return n - i;
      out += kFffd;
      i = n;
    } else {
      out.append(bytes.data() + i, len);
      i += len;
    }
  }
  return 0;
}

}  // namespace snapkv
