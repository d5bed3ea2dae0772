// File: verl/infer/agent/interaction.cc
#include "verl/infer/agent/interaction.h"

#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"
#include "verl/infer/agent/tool_config.h"

namespace verl::infer::agent {

using Json = nlohmann::ordered_json;

absl::StatusOr<std::vector<InteractionSpec>> ParseInteractionConfig(
    const std::string& yaml_text, const std::string& source) {
  absl::StatusOr<Json> doc = YamlToJson(yaml_text, source);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object() || !doc->contains("interaction") ||
      !(*doc)["interaction"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": expected a mapping with an \"interaction\" list"));
  }
  std::vector<InteractionSpec> out;
  std::set<std::string> names;
  const Json& list = (*doc)["interaction"];
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& item = list[i];
    auto bad = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": interaction[", i, "]: ", what));
    };
    if (!item.is_object()) return bad("expected a mapping");
    if (!item.contains("class_name") || !item["class_name"].is_string()) {
      return bad("class_name (a string) is required");
    }
    InteractionSpec spec;
    spec.class_name = item["class_name"];
    if (item.contains("config") && !item["config"].is_null()) {
      if (!item["config"].is_object()) return bad("config must be a mapping");
      spec.config = item["config"];
    }
    if (item.contains("name") && !item["name"].is_null()) {
      if (!item["name"].is_string()) return bad("name must be a string");
      spec.name = item["name"];
    } else {
      // verl: the class's simple name, lower-cased, minus "Interaction".
      std::string simple =
          spec.class_name.substr(spec.class_name.rfind('.') == std::string::npos
                                     ? 0
                                     : spec.class_name.rfind('.') + 1);
      if (absl::EndsWith(simple, "Interaction")) {
        simple.resize(simple.size() - 11);
      }
      spec.name = absl::AsciiStrToLower(simple);
    }
    if (!names.insert(spec.name).second) {
      return bad(absl::StrCat("interaction name '", spec.name,
                              "' appears twice (names must be unique)"));
    }
    spec.config["name"] = spec.name;
    out.push_back(std::move(spec));
  }
  return out;
}

absl::StatusOr<std::vector<InteractionSpec>> LoadInteractionConfig(
    const std::string& path) {
  absl::StatusOr<std::string> text = core::ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseInteractionConfig(*text, path);
}

}  // namespace verl::infer::agent
