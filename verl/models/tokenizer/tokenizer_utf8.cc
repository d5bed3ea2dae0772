#include "verl/models/tokenizer/tokenizer_utf8.h"

#include <cstdint>

namespace verl::models {
namespace {

// Length of the valid sequence starting at `i` (0 if invalid) and, for an
// invalid one, the length of its maximal subpart in `*bad_len`.
int ValidSequenceLength(absl::string_view s, size_t i, int* bad_len,
                        char32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t b = byte(i);
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  int need;
  uint8_t lo = 0x80, hi = 0xBF;
  char32_t value;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
    value = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    value = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    value = b & 0x07;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    *bad_len = 1;
    return 0;
  }
  size_t k = i + 1;
  for (int n = 0; n < need; ++n, ++k) {
    uint8_t lower = n == 0 ? lo : 0x80, upper = n == 0 ? hi : 0xBF;
    if (k >= s.size() || byte(k) < lower || byte(k) > upper) {
      *bad_len = static_cast<int>(k - i);
      return 0;
    }
    value = (value << 6) | (byte(k) & 0x3F);
  }
  *cp = value;
  return need + 1;
}

}  // namespace

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::vector<char32_t> DecodeUtf8Lossy(absl::string_view bytes) {
  std::vector<char32_t> out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    int bad = 0;
    char32_t cp = 0;
    int n = ValidSequenceLength(bytes, i, &bad, &cp);
    if (n > 0) {
      out.push_back(cp);
      i += n;
    } else {
      out.push_back(kReplacementChar);
      i += bad;
    }
  }
  return out;
}

bool IsValidUtf8(absl::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    int bad = 0;
    char32_t cp = 0;
    int n = ValidSequenceLength(bytes, i, &bad, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string EncodeUtf8(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

std::string Utf8Lossy(absl::string_view bytes) {
  if (IsValidUtf8(bytes)) return std::string(bytes);
  return EncodeUtf8(DecodeUtf8Lossy(bytes));
}

bool IsUnicodeSpace(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace verl::models
