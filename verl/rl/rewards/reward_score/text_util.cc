// File: verl/rl/rewards/reward_score/text_util.cc
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {

std::string LastChars(const std::string& s, size_t n) {
  size_t count = 0;
  size_t pos = s.size();
  while (pos > 0 && count < n) {
    --pos;
    while (pos > 0 && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80)
      --pos;
    ++count;
  }
  return s.substr(pos);
}

std::string ReplaceAll(std::string s, const std::string& from,
                       const std::string& to) {
  if (from.empty()) return s;
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

std::string StripWhitespace(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace verl::rl::reward
