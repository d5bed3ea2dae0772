// File: verl/infer/agent/tool_call.h
//
// Tool calls in model output and tool answers going back in, as verl's agent
// loop handles them (verl/experimental/agent_loop/tool_parser.py and
// tool_agent_loop.py):
// * Hermes format (Qwen2.5/3, `multi_turn.format: hermes`): every
//   `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` block of the
//   decoded turn is one call; the content is the text with the blocks
//   removed. A block that is not a JSON object with "name" and "arguments"
//   is reported as an error (verl logs and drops it; the loop here answers
//   the model with the error so it can retry), never a crash.
// * Tool responses longer than `max_tool_response_length` characters are cut
//   on `tool_response_truncate_side` with verl's markers.
#ifndef VERL_INFER_AGENT_TOOL_CALL_H_
#define VERL_INFER_AGENT_TOOL_CALL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace verl::infer::agent {

struct FunctionCall {
  std::string name;
  // The arguments as verl passes them on: json.dumps(arguments,
  // ensure_ascii=False) — Python's separators, key order kept.
  std::string arguments;
};

struct ParsedTurn {
  std::string content;              // the text without the call blocks
  std::vector<FunctionCall> calls;  // well-formed calls, in order
  std::vector<std::string> errors;  // one line per malformed block
};

ParsedTurn ParseHermesToolCalls(absl::string_view text);

// json.dumps(value, ensure_ascii=False) of Python for a parsed JSON value.
std::string PythonJsonDumps(const nlohmann::ordered_json& value);

enum class TruncateSide { kLeft, kMiddle, kRight };
// "left" | "middle" | "right" (rollout.multi_turn.tool_response_truncate_side).
absl::StatusOr<TruncateSide> ParseTruncateSide(const std::string& side);

// verl's rule, counted in characters (code points) as Python does: "left"
// keeps the first max characters + "...(truncated)", "right" keeps the last
// max after "(truncated)...", "middle" keeps max/2 at both ends around
// "...(truncated)...". Text of at most `max_length` characters is unchanged.
std::string TruncateToolResponse(const std::string& text, int64_t max_length,
                                 TruncateSide side);

}  // namespace verl::infer::agent

#endif  // VERL_INFER_AGENT_TOOL_CALL_H_
