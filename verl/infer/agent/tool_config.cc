// File: verl/infer/agent/tool_config.cc
#include "verl/infer/agent/tool_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"

namespace verl::infer::agent {
namespace {

using Json = nlohmann::ordered_json;

// YAML 1.2 core schema for plain scalars; quoted ones ("!" tag) are strings.
Json Scalar(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;
  if (s == "null" || s == "Null" || s == "NULL" || s == "~" || s.empty()) {
    return nullptr;
  }
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  int64_t i = 0;
  if (absl::SimpleAtoi(s, &i)) return i;
  double d = 0;
  const std::string lower = absl::AsciiStrToLower(s);
  if (lower == ".inf" || lower == "+.inf") return INFINITY;
  if (lower == "-.inf") return -INFINITY;
  if (lower.find_first_of("0123456789") != std::string::npos &&
      lower.find_first_not_of("0123456789+-.e") == std::string::npos &&
      absl::SimpleAtod(s, &d)) {
    return d;
  }
  return s;
}

absl::StatusOr<Json> Convert(const YAML::Node& node,
                             const std::string& source) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return Json(nullptr);
    case YAML::NodeType::Scalar:
      return Scalar(node);
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      for (const YAML::Node& item : node) {
        absl::StatusOr<Json> v = Convert(item, source);
        if (!v.ok()) return v.status();
        out.push_back(*std::move(v));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return absl::InvalidArgumentError(
              absl::StrCat(source, ": line ", kv.first.Mark().line + 1,
                           ": mapping keys must be scalars"));
        }
        absl::StatusOr<Json> v = Convert(kv.second, source);
        if (!v.ok()) return v.status();
        out[kv.first.Scalar()] = *std::move(v);
      }
      return out;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": unsupported YAML node"));
  }
}

}  // namespace

absl::StatusOr<Json> YamlToJson(const std::string& yaml_text,
                                const std::string& source) {
  try {
    return Convert(YAML::Load(yaml_text), source);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": line ", e.mark.line + 1, ": ", e.msg));
  }
}

absl::StatusOr<std::vector<ToolSpec>> ParseToolConfig(
    const std::string& yaml_text, const std::string& source) {
  absl::StatusOr<Json> doc = YamlToJson(yaml_text, source);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object() || !doc->contains("tools") ||
      !(*doc)["tools"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a mapping with a \"tools\" list"));
  }
  std::vector<ToolSpec> tools;
  std::set<std::string> names;
  const Json& list = (*doc)["tools"];
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& t = list[i];
    auto bad = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": tools[", i, "]: ", what));
    };
    if (!t.is_object()) return bad("expected a mapping");
    if (!t.contains("class_name") || !t["class_name"].is_string()) {
      return bad("class_name (a string) is required");
    }
    ToolSpec spec;
    spec.class_name = t["class_name"];
    if (t.contains("config") && !t["config"].is_null()) {
      if (!t["config"].is_object()) return bad("config must be a mapping");
      spec.config = t["config"];
    }
    if (!t.contains("tool_schema") || !t["tool_schema"].is_object()) {
      return bad("tool_schema (a mapping) is required");
    }
    spec.tool_schema = t["tool_schema"];
    const Json& schema = spec.tool_schema;
    if (schema.value("type", "") != "function") {
      return bad("tool_schema.type must be \"function\"");
    }
    if (!schema.contains("function") || !schema["function"].is_object() ||
        !schema["function"].contains("name") ||
        !schema["function"]["name"].is_string() ||
        schema["function"]["name"].get<std::string>().empty()) {
      return bad("tool_schema.function.name (a string) is required");
    }
    const Json& fn = schema["function"];
    if (fn.contains("parameters") &&
        (!fn["parameters"].is_object() ||
         fn["parameters"].value("type", "object") != "object")) {
      return bad("tool_schema.function.parameters must be an object schema");
    }
    if (!names.insert(spec.name()).second) {
      return bad(absl::StrCat("tool name '", spec.name(), "' appears twice"));
    }
    tools.push_back(std::move(spec));
  }
  return tools;
}

absl::StatusOr<std::vector<ToolSpec>> LoadToolConfig(const std::string& path) {
  absl::StatusOr<std::string> text = core::ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseToolConfig(*text, path);
}

absl::StatusOr<std::map<std::string, std::string>> ParseAgentLoopConfig(
    const std::string& yaml_text, const std::string& source) {
  absl::StatusOr<Json> doc = YamlToJson(yaml_text, source);
  if (!doc.ok()) return doc.status();
  if (!doc->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": expected a list of agent loops ({name, _target_})"));
  }
  std::map<std::string, std::string> loops;
  for (size_t i = 0; i < doc->size(); ++i) {
    const Json& e = (*doc)[i];
    auto bad = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": [", i, "]: ", what));
    };
    if (!e.is_object()) return bad("expected a mapping");
    if (!e.contains("name") || !e["name"].is_string() ||
        e["name"].get<std::string>().empty()) {
      return bad("name (a string) is required");
    }
    const std::string name = e["name"];
    if (!e.contains("_target_") || !e["_target_"].is_string()) {
      return bad(absl::StrCat("'", name, "': _target_ (a string) is required"));
    }
    const std::string target = e["_target_"];
    const bool verl_class = absl::StartsWith(target, "verl.");
    std::string builtin;
    if (verl_class && absl::EndsWith(target, ".SingleTurnAgentLoop")) {
      builtin = "single_turn_agent";
    } else if (verl_class && absl::EndsWith(target, ".ToolAgentLoop")) {
      builtin = "tool_agent";
    } else {
      return bad(absl::StrCat(
          "'", name, "': _target_ ", target,
          " is a Python class; the loops here are verl's SingleTurnAgentLoop "
          "and ToolAgentLoop (tools in any language: the command tool)"));
    }
    for (const auto& [key, value] : e.items()) {
      if (key != "name" && key != "_target_") {
        return bad(absl::StrCat("'", name, "': ", key,
                                ": built-in loops take their settings from "
                                "rollout.multi_turn.*, not constructor "
                                "arguments"));
      }
    }
    if (!loops.emplace(name, builtin).second) {
      return bad(absl::StrCat("'", name, "' appears twice"));
    }
  }
  return loops;
}

absl::StatusOr<std::map<std::string, std::string>> LoadAgentLoopConfig(
    const std::string& path) {
  absl::StatusOr<std::string> text = core::ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseAgentLoopConfig(*text, path);
}

}  // namespace verl::infer::agent
