// File: verl/infer/agent/tools.cc
#include "verl/infer/agent/tools.h"

#include <glog/logging.h>

#include <cctype>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace verl::infer::agent {

absl::StatusOr<std::string> Tool::Create(const nlohmann::ordered_json&) {
  absl::MutexLock lock(&mu_);
  const std::string id = absl::StrCat(spec_.name(), "-", next_id_++);
  rewards_[id] = 0.0;
  return id;
}

double Tool::CalcReward(const std::string& instance_id) {
  absl::MutexLock lock(&mu_);
  auto it = rewards_.find(instance_id);
  return it == rewards_.end() ? 0.0 : it->second;
}

void Tool::Release(const std::string& instance_id) {
  absl::MutexLock lock(&mu_);
  rewards_.erase(instance_id);
}

void Tool::AddReward(const std::string& instance_id, double reward) {
  absl::MutexLock lock(&mu_);
  rewards_[instance_id] += reward;
}

absl::StatusOr<ToolExecution> CodeInterpreterTool::Execute(
    const std::string& instance_id, const nlohmann::ordered_json& parameters) {
  ToolExecution out;
  if (!parameters.is_object() || !parameters.contains("code") ||
      !parameters["code"].is_string()) {
    out.text = "error: code_interpreter needs a string parameter \"code\"";
    return out;
  }
  absl::StatusOr<SandboxResult> r =
      RunPythonSandboxed(parameters["code"].get<std::string>(), limits_);
  if (!r.ok()) return r.status();
  out.text = r->stdout_text;
  const std::string summary = r->Summary();
  if (summary != "ok") {
    out.text = absl::StrCat(out.text, r->stderr_text, summary);
  }
  out.metrics = {{"status", summary}, {"truncated", r->output_truncated}};
  AddReward(instance_id, out.reward);
  return out;
}

absl::StatusOr<ToolExecution> CommandTool::Execute(
    const std::string& instance_id, const nlohmann::ordered_json& parameters) {
  const nlohmann::ordered_json request = {{"op", "execute"},
                                          {"instance_id", instance_id},
                                          {"parameters", parameters}};
  absl::StatusOr<SandboxResult> r =
      RunSandboxed(argv_, request.dump() + "\n", limits_);
  if (!r.ok()) return r.status();
  ToolExecution out;
  if (r->Summary() != "ok") {
    out.text = absl::StrCat("error: tool ", spec().name(), ": ", r->Summary(),
                            r->stderr_text.empty() ? "" : ": ", r->stderr_text);
    return out;
  }
  const nlohmann::ordered_json reply = nlohmann::ordered_json::parse(
      r->stdout_text, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded() || !reply.is_object() || !reply.contains("text") ||
      !reply["text"].is_string()) {
    out.text = absl::StrCat("error: tool ", spec().name(),
                            " did not answer with a JSON object with \"text\"");
    return out;
  }
  out.text = reply["text"];
  if (reply.contains("reward") && reply["reward"].is_number()) {
    out.reward = reply["reward"].get<double>();
  }
  if (reply.contains("metrics") && reply["metrics"].is_object()) {
    out.metrics = reply["metrics"];
  }
  AddReward(instance_id, out.reward);
  return out;
}

namespace {

// Recursive descent over expression := term (('+'|'-') term)*,
// term := factor (('*'|'/') factor)*, factor := '-' factor | number | '('
// expression ')'.
class ArithmeticParser {
 public:
  explicit ArithmeticParser(const std::string& text) : s_(text) {}
  absl::StatusOr<double> Parse() {
    absl::StatusOr<double> v = Expression(0);
    if (!v.ok()) return v;
    Skip();
    if (pos_ != s_.size()) return Error("unexpected character");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;
  void Skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  absl::Status Error(const char* what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " at position ", pos_));
  }
  absl::StatusOr<double> Expression(int depth) {
    absl::StatusOr<double> v = Term(depth);
    for (;;) {
      if (!v.ok()) return v;
      Skip();
      if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) return v;
      const char op = s_[pos_++];
      absl::StatusOr<double> r = Term(depth);
      if (!r.ok()) return r;
      v = op == '+' ? *v + *r : *v - *r;
    }
  }
  absl::StatusOr<double> Term(int depth) {
    absl::StatusOr<double> v = Factor(depth);
    for (;;) {
      if (!v.ok()) return v;
      Skip();
      if (pos_ >= s_.size() || (s_[pos_] != '*' && s_[pos_] != '/')) return v;
      const char op = s_[pos_++];
      absl::StatusOr<double> r = Factor(depth);
      if (!r.ok()) return r;
      if (op == '/' && *r == 0) return Error("division by zero");
      v = op == '*' ? *v * *r : *v / *r;
    }
  }
  absl::StatusOr<double> Factor(int depth) {
    if (depth > kMaxDepth) return Error("expression nested too deeply");
    Skip();
    if (pos_ >= s_.size()) return Error("expression ends early");
    if (s_[pos_] == '-') {
      ++pos_;
      absl::StatusOr<double> v = Factor(depth + 1);
      if (!v.ok()) return v;
      return -*v;
    }
    if (s_[pos_] == '(') {
      ++pos_;
      absl::StatusOr<double> v = Expression(depth + 1);
      if (!v.ok()) return v;
      Skip();
      if (pos_ >= s_.size() || s_[pos_] != ')') return Error("missing ')'");
      ++pos_;
      return v;
    }
    const size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isdigit(static_cast<unsigned char>(s_[pos_])) ||
            s_[pos_] == '.')) {
      ++pos_;
    }
    double d = 0;
    if (start == pos_ ||
        !absl::SimpleAtod(absl::string_view(s_).substr(start, pos_ - start),
                          &d)) {
      pos_ = start;
      return Error("expected a number");
    }
    return d;
  }
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<double> EvaluateArithmetic(const std::string& expression) {
  return ArithmeticParser(expression).Parse();
}

absl::StatusOr<ToolExecution> CalculatorTool::Execute(
    const std::string& instance_id, const nlohmann::ordered_json& parameters) {
  ToolExecution out;
  if (!parameters.is_object() || !parameters.contains("expression") ||
      !parameters["expression"].is_string()) {
    out.text = "error: calculator needs a string parameter \"expression\"";
    return out;
  }
  absl::StatusOr<double> v =
      EvaluateArithmetic(parameters["expression"].get<std::string>());
  if (!v.ok()) {
    out.text = absl::StrCat("error: ", v.status().message());
    return out;
  }
  const double r = *v;
  out.text = (std::abs(r) < 1e15 && r == std::floor(r))
                 ? absl::StrCat(static_cast<int64_t>(r))
                 : absl::StrCat(r);
  AddReward(instance_id, out.reward);
  return out;
}

absl::StatusOr<std::unique_ptr<Tool>> MakeTool(const ToolSpec& spec) {
  SandboxLimits limits;
  const auto& c = spec.config;
  auto number = [&](const char* key, double fallback) {
    return c.contains(key) && c[key].is_number() ? c[key].get<double>()
                                                 : fallback;
  };
  if (spec.class_name == "code_interpreter" ||
      spec.class_name == "verl.tools.sandbox_fusion_tools.SandboxFusionTool") {
    if (c.contains("sandbox_fusion_url")) {
      LOG(WARNING) << "tool " << spec.name()
                   << ": runs in the local sandbox; sandbox_fusion_url is not "
                      "used";
    }
    limits.wall_time_s = number("default_timeout", limits.wall_time_s);
    limits.cpu_time_s = static_cast<int64_t>(limits.wall_time_s) + 1;
    limits.memory_mb = static_cast<int64_t>(
        number("memory_limit_mb", static_cast<double>(limits.memory_mb)));
    return std::unique_ptr<Tool>(new CodeInterpreterTool(spec, limits));
  }
  if (spec.class_name == "calculator") {
    return std::unique_ptr<Tool>(new CalculatorTool(spec));
  }
  if (spec.class_name == "command") {
    if (!c.contains("command") || !c["command"].is_array() ||
        c["command"].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tool ", spec.name(),
          ": class_name command needs config.command, a non-empty list"));
    }
    std::vector<std::string> argv;
    for (const auto& a : c["command"]) {
      if (!a.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tool ", spec.name(), ": config.command entries must be strings"));
      }
      argv.push_back(a.get<std::string>());
    }
    limits.wall_time_s = number("timeout_s", 60.0);
    limits.cpu_time_s = static_cast<int64_t>(limits.wall_time_s) + 1;
    limits.isolate_network = false;  // user tools may need it (search)
    limits.drop_privileges = false;  // and their own files
    return std::unique_ptr<Tool>(new CommandTool(spec, argv, limits));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "tool ", spec.name(), ": class_name '", spec.class_name,
      "' is not available (built in: code_interpreter / "
      "verl.tools.sandbox_fusion_tools.SandboxFusionTool, calculator, "
      "command)"));
}

}  // namespace verl::infer::agent
