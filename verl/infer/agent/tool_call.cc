// File: verl/infer/agent/tool_call.cc
#include "verl/infer/agent/tool_call.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace verl::infer::agent {
namespace {

constexpr absl::string_view kStart = "<tool_call>";
constexpr absl::string_view kEnd = "</tool_call>";

void DumpString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          *out += absl::StrFormat("\\u%04x", c);
        } else {
          out->push_back(static_cast<char>(c));  // UTF-8 kept as is
        }
    }
  }
  out->push_back('"');
}

// Python's float repr: the shortest digits that round-trip, fixed notation
// for exponents in [-4, 16) (with ".0" when integral), else d.ddde±XX.
std::string PythonFloat(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  int digits = 1;
  for (; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*e", digits - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  const int exponent = std::atoi(std::strchr(buf, 'e') + 1);
  if (v == 0 || (exponent >= -4 && exponent < 16)) {
    const int decimals = std::max(digits - 1 - exponent, 0);
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    std::string s = buf;
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  return buf;
}

void Dump(const nlohmann::ordered_json& v, std::string* out) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        if (!first) *out += ", ";
        first = false;
        DumpString(k, out);
        *out += ": ";
        Dump(x, out);
      }
      out->push_back('}');
      return;
    }
    case nlohmann::ordered_json::value_t::array: {
      out->push_back('[');
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) *out += ", ";
        Dump(v[i], out);
      }
      out->push_back(']');
      return;
    }
    case nlohmann::ordered_json::value_t::string:
      DumpString(v.get<std::string>(), out);
      return;
    case nlohmann::ordered_json::value_t::boolean:
      *out += v.get<bool>() ? "true" : "false";
      return;
    case nlohmann::ordered_json::value_t::number_float:
      *out += PythonFloat(v.get<double>());
      return;
    case nlohmann::ordered_json::value_t::null:
      *out += "null";
      return;
    default:  // integers
      *out += v.dump();
      return;
  }
}

// Byte offset of the end of the first `n` code points of `s` (UTF-8).
size_t CodePointPrefix(const std::string& s, int64_t n) {
  size_t i = 0;
  for (int64_t k = 0; k < n && i < s.size(); ++k) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) {
      ++i;
    }
  }
  return i;
}

int64_t CodePoints(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::string PythonJsonDumps(const nlohmann::ordered_json& value) {
  std::string out;
  Dump(value, &out);
  return out;
}

ParsedTurn ParseHermesToolCalls(absl::string_view text) {
  ParsedTurn turn;
  if (text.find(kStart) == absl::string_view::npos ||
      text.find(kEnd) == absl::string_view::npos) {
    turn.content = std::string(text);
    return turn;
  }
  size_t pos = 0;
  while (true) {
    const size_t open = text.find(kStart, pos);
    const size_t close = open == absl::string_view::npos
                             ? absl::string_view::npos
                             : text.find(kEnd, open + kStart.size());
    if (close == absl::string_view::npos) {
      absl::StrAppend(&turn.content, text.substr(pos));
      break;
    }
    absl::StrAppend(&turn.content, text.substr(pos, open - pos));
    const std::string body(
        text.substr(open + kStart.size(), close - open - kStart.size()));
    pos = close + kEnd.size();
    const nlohmann::ordered_json call = nlohmann::ordered_json::parse(
        body, nullptr, /*allow_exceptions=*/false);
    if (call.is_discarded()) {
      turn.errors.push_back(absl::StrCat("tool call ",
                                         turn.calls.size() + turn.errors.size(),
                                         " is not valid JSON: ", body));
      continue;
    }
    if (!call.is_object() || !call.contains("name") ||
        !call["name"].is_string() || !call.contains("arguments")) {
      turn.errors.push_back(
          absl::StrCat("tool call ", turn.calls.size() + turn.errors.size(),
                       " needs a string \"name\" and \"arguments\": ", body));
      continue;
    }
    turn.calls.push_back(
        {call["name"].get<std::string>(), PythonJsonDumps(call["arguments"])});
  }
  return turn;
}

absl::StatusOr<TruncateSide> ParseTruncateSide(const std::string& side) {
  if (side == "left") return TruncateSide::kLeft;
  if (side == "middle") return TruncateSide::kMiddle;
  if (side == "right") return TruncateSide::kRight;
  return absl::InvalidArgumentError(absl::StrCat(
      "actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side: '",
      side, "' (expected left, middle or right)"));
}

std::string TruncateToolResponse(const std::string& text, int64_t max_length,
                                 TruncateSide side) {
  const int64_t n = CodePoints(text);
  if (text.empty() || n <= max_length) return text;
  switch (side) {
    case TruncateSide::kLeft:
      return text.substr(0, CodePointPrefix(text, max_length)) +
             "...(truncated)";
    case TruncateSide::kRight:
      return "(truncated)..." +
             text.substr(CodePointPrefix(text, n - max_length));
    case TruncateSide::kMiddle: {
      const int64_t half = max_length / 2;
      // Python's s[-0:] is the whole string.
      const std::string tail =
          half == 0 ? text : text.substr(CodePointPrefix(text, n - half));
      return text.substr(0, CodePointPrefix(text, half)) + "...(truncated)..." +
             tail;
    }
  }
  return text;
}

}  // namespace verl::infer::agent
