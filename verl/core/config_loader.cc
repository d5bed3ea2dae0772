// File: verl/core/config_loader.cc
#include "verl/core/config_loader.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/strutil.h"
#include "google/protobuf/text_format.h"
#include "verl/core/status.h"

namespace verl::core {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr int kMaxDepth = 32;  // guards recursive message types

bool IsMap(const FieldDescriptor* f) { return f->is_map(); }
bool IsSection(const FieldDescriptor* f) {
  return f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_map() &&
         !f->is_repeated();
}

void MaterializeImpl(Message* msg, int depth) {
  CHECK_LT(depth, kMaxDepth)
      << "recursive config message " << msg->GetDescriptor()->full_name();
  const Descriptor* d = msg->GetDescriptor();
  const Reflection* r = msg->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      MaterializeImpl(r->MutableMessage(msg, f), depth + 1);
      continue;
    }
    if (!f->has_default_value() || r->HasField(*msg, f)) continue;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        r->SetInt32(msg, f, f->default_value_int32());
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        r->SetInt64(msg, f, f->default_value_int64());
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        r->SetUInt32(msg, f, f->default_value_uint32());
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        r->SetUInt64(msg, f, f->default_value_uint64());
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        r->SetDouble(msg, f, f->default_value_double());
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        r->SetFloat(msg, f, f->default_value_float());
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        r->SetBool(msg, f, f->default_value_bool());
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        r->SetString(msg, f, f->default_value_string());
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        r->SetEnum(msg, f, f->default_value_enum());
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        break;
    }
  }
}

// Clears, in `target`, every repeated field that `given` sets (following
// singular sub-messages), so a later MergeFrom replaces those lists.
void ClearListsSetIn(const Message& given, Message* target) {
  const Reflection* r = given.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(given, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->is_repeated()) {
      target->GetReflection()->ClearField(target, f);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
               target->GetReflection()->HasField(*target, f)) {
      ClearListsSetIn(r->GetMessage(given, f),
                      target->GetReflection()->MutableMessage(target, f));
    }
  }
}

// Collects the first text-format error with its position.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber,
                  const std::string&) override {}

  bool has_error() const { return has_error_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// Appends "<path>." for every place (the root: "") where `target` sits in
// `d`'s tree.
void SectionPaths(const Descriptor& d, const Descriptor& target,
                  const std::string& prefix, int depth,
                  std::vector<std::string>* out) {
  if (&d == &target) out->push_back(prefix);
  if (depth >= kMaxDepth) return;
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor* f = d.field(i);
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_map()) {
      SectionPaths(*f->message_type(), target,
                   absl::StrCat(prefix, f->name(), "."), depth + 1, out);
    }
  }
}

constexpr absl::string_view kMegatronNote =
    "not one of the megatron.* keys of this build (docs/megatron.md lists "
    "them)";

// Whether a dotted key (or one segment) names a Megatron setting.
bool IsMegatronKey(absl::string_view key) {
  for (absl::string_view part : absl::StrSplit(key, '.')) {
    if (part == "megatron" || absl::StartsWith(part, "megatron_")) return true;
  }
  return false;
}

// For protobuf's 'Message type "T" has no field named "x".' returns a
// "; did you mean 'y'?" hint with T's field name nearest to x.
std::string UnknownFieldHint(const Message& root, const std::string& error) {
  const std::string kType = "Message type \"";
  const std::string kField = "has no field named \"";
  size_t t = error.find(kType), f = error.find(kField);
  if (t == std::string::npos || f == std::string::npos) return "";
  t += kType.size();
  f += kField.size();
  size_t t_end = error.find('"', t), f_end = error.find('"', f);
  if (t_end == std::string::npos || f_end == std::string::npos) return "";
  const Descriptor* d =
      root.GetDescriptor()->file()->pool()->FindMessageTypeByName(
          error.substr(t, t_end - t));
  if (d == nullptr || d->field_count() == 0) return "";
  const std::string unknown = error.substr(f, f_end - f);
  if (IsMegatronKey(unknown)) return absl::StrCat("; ", kMegatronNote);
  const FieldDescriptor* best = d->field(0);
  for (int i = 1; i < d->field_count(); ++i) {
    if (EditDistance(unknown, d->field(i)->name()) <
        EditDistance(unknown, best->name())) {
      best = d->field(i);
    }
  }
  if (EditDistance(unknown, best->name()) > MaxSuggestionDistance(unknown)) {
    return "";
  }
  // Name the full dotted key when the message type sits at one place only.
  std::vector<std::string> paths;
  SectionPaths(*root.GetDescriptor(), *d, "", 0, &paths);
  const std::string prefix = paths.size() == 1 ? paths[0] : "";
  return absl::StrCat("; did you mean '", prefix, best->name(), "'?");
}

std::string TypeName(const FieldDescriptor* f) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat("an integer (", f->cpp_type_name(), ")");
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return absl::StrCat("a number (", f->cpp_type_name(), ")");
    case FieldDescriptor::CPPTYPE_BOOL:
      return "a bool (true/false)";
    case FieldDescriptor::CPPTYPE_ENUM: {
      std::vector<std::string> names;
      for (int i = 0; i < f->enum_type()->value_count(); ++i) {
        names.push_back(f->enum_type()->value(i)->name());
      }
      return absl::StrCat("one of: ", absl::StrJoin(names, ", "));
    }
    case FieldDescriptor::CPPTYPE_STRING:
      return "a string";
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return "a section";
  }
  return "?";
}

// Removes one pair of matching surrounding quotes.
std::string Unquote(absl::string_view v) {
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') &&
      v.back() == v.front()) {
    return std::string(v.substr(1, v.size() - 2));
  }
  return std::string(v);
}

// Splits the inside of a "[a, 'b,c', d]" list on commas outside quotes.
std::vector<std::string> SplitList(absl::string_view inner) {
  std::vector<std::string> items;
  std::string current;
  char quote = 0;
  for (char c : inner) {
    if (quote != 0) {
      if (c == quote) quote = 0;
      current += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      current += c;
    } else if (c == ',') {
      items.push_back(std::string(absl::StripAsciiWhitespace(current)));
      current.clear();
    } else {
      current += c;
    }
  }
  std::string last(absl::StripAsciiWhitespace(current));
  if (!last.empty() || !items.empty()) items.push_back(last);
  return items;
}

absl::Status BadValue(absl::string_view key, absl::string_view value,
                      const FieldDescriptor* f) {
  return absl::InvalidArgumentError(absl::StrCat("bad value '", value,
                                                 "' for config key '", key,
                                                 "': expected ", TypeName(f)));
}

// Sets (or, for a repeated field, appends) `raw` parsed as `f`'s type.
absl::Status SetScalar(Message* msg, const FieldDescriptor* f,
                       absl::string_view key, absl::string_view raw) {
  const Reflection* r = msg->GetReflection();
  const bool add = f->is_repeated();
  const std::string v = Unquote(absl::StripAsciiWhitespace(raw));
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t x;
      if (!absl::SimpleAtoi(v, &x)) return BadValue(key, raw, f);
      add ? r->AddInt32(msg, f, x) : r->SetInt32(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t x;
      if (!absl::SimpleAtoi(v, &x)) return BadValue(key, raw, f);
      add ? r->AddInt64(msg, f, x) : r->SetInt64(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t x;
      if (!absl::SimpleAtoi(v, &x)) return BadValue(key, raw, f);
      add ? r->AddUInt32(msg, f, x) : r->SetUInt32(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t x;
      if (!absl::SimpleAtoi(v, &x)) return BadValue(key, raw, f);
      add ? r->AddUInt64(msg, f, x) : r->SetUInt64(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double x;
      if (!absl::SimpleAtod(v, &x)) return BadValue(key, raw, f);
      add ? r->AddDouble(msg, f, x) : r->SetDouble(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      float x;
      if (!absl::SimpleAtof(v, &x)) return BadValue(key, raw, f);
      add ? r->AddFloat(msg, f, x) : r->SetFloat(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool x;
      if (v == "true" || v == "True") {
        x = true;
      } else if (v == "false" || v == "False") {
        x = false;
      } else {
        return BadValue(key, raw, f);
      }
      add ? r->AddBool(msg, f, x) : r->SetBool(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const EnumValueDescriptor* e = f->enum_type()->FindValueByName(v);
      if (e == nullptr) return BadValue(key, raw, f);
      add ? r->AddEnum(msg, f, e) : r->SetEnum(msg, f, e);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING:
      add ? r->AddString(msg, f, v) : r->SetString(msg, f, v);
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return BadValue(key, raw, f);
  }
  return absl::OkStatus();
}

// Sets entry `map_key` of map field `f` to `value` (null: removes it).
absl::Status SetMapEntry(Message* msg, const FieldDescriptor* f,
                         absl::string_view key, const std::string& map_key,
                         absl::string_view value) {
  const Reflection* r = msg->GetReflection();
  const FieldDescriptor* key_f = f->message_type()->map_key();
  const FieldDescriptor* value_f = f->message_type()->map_value();
  if (key_f->cpp_type() != FieldDescriptor::CPPTYPE_STRING ||
      value_f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key '", key,
                     "': only string-keyed maps of scalars can be "
                     "overridden"));
  }
  int found = -1;
  for (int i = 0; i < r->FieldSize(*msg, f); ++i) {
    const Message& entry = r->GetRepeatedMessage(*msg, f, i);
    if (entry.GetReflection()->GetString(entry, key_f) == map_key) found = i;
  }
  if (value == "null") {
    if (found >= 0) {
      r->SwapElements(msg, f, found, r->FieldSize(*msg, f) - 1);
      r->RemoveLast(msg, f);
    }
    return absl::OkStatus();
  }
  // Parse into a scratch entry first so a bad value leaves the map intact.
  std::unique_ptr<Message> scratch(
      r->GetMessageFactory()->GetPrototype(f->message_type())->New());
  scratch->GetReflection()->SetString(scratch.get(), key_f, map_key);
  VERL_RETURN_IF_ERROR(SetScalar(scratch.get(), value_f, key, value));
  if (found >= 0) {
    r->MutableRepeatedMessage(msg, f, found)->CopyFrom(*scratch);
  } else {
    r->AddMessage(msg, f)->CopyFrom(*scratch);
  }
  return absl::OkStatus();
}

// Applies `value` to field `f` of `msg` (the last key segment).
absl::Status SetField(Message* msg, const FieldDescriptor* f,
                      absl::string_view key, absl::string_view value) {
  const Reflection* r = msg->GetReflection();
  if (value == "null") {
    r->ClearField(msg, f);
    return absl::OkStatus();
  }
  if (IsMap(f)) {
    if (value == "{}") {
      r->ClearField(msg, f);
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("config key '", key, "' is a map; set an entry ('", key,
                     ".<name>=value') or clear it with null or {}"));
  }
  if (IsSection(f)) {
    // `optim=fsdp`: Hydra selects a YAML file of a config group; here the
    // section's fields are set directly.
    return absl::InvalidArgumentError(absl::StrCat(
        "config key '", key, "' is a section, not a Hydra config group ('",
        value, "' selects nothing here); set one of its fields ('", key, ".",
        f->message_type()->field(0)->name(), "=...') or null"));
  }
  if (f->is_repeated()) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config key '", key, "' is a list of sections; use a config file"));
    }
    std::vector<std::string> items;
    if (absl::StartsWith(value, "[")) {
      if (!absl::EndsWith(value, "]")) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad value '", value, "' for config key '", key,
                         "': expected a list [a,b,...] of ", TypeName(f)));
      }
      items = SplitList(value.substr(1, value.size() - 2));
    } else {
      items.push_back(std::string(value));
    }
    // Parse into a scratch copy so a bad element leaves the list intact.
    std::unique_ptr<Message> scratch(msg->New());
    for (const std::string& item : items) {
      absl::Status s = SetScalar(scratch.get(), f, key, item);
      if (!s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad value '", value, "' for config key '", key,
                         "': expected a list of ", TypeName(f),
                         " (bad element '", item, "')"));
      }
    }
    r->ClearField(msg, f);
    for (int i = 0; i < static_cast<int>(items.size()); ++i) {
      VERL_RETURN_IF_ERROR(SetScalar(msg, f, key, items[i]));
    }
    return absl::OkStatus();
  }
  return SetScalar(msg, f, key, value);
}

absl::Status UnknownKey(const Descriptor& root, absl::string_view key) {
  if (IsMegatronKey(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown config key '", key, "': ", kMegatronNote));
  }
  const std::string nearest = NearestKey(root, key);
  if (nearest.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown config key '", key,
                     "' (no similar key; --print_config lists them all)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown config key '", key, "'; did you mean '", nearest, "'?"));
}

void CollectKeys(const Descriptor& d, const std::string& prefix, int depth,
                 std::vector<std::string>* out) {
  if (depth >= kMaxDepth) return;
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor* f = d.field(i);
    std::string key = absl::StrCat(prefix, f->name());
    out->push_back(key);
    if (IsMap(f)) {
      out->push_back(absl::StrCat(key, ".<key>"));
    } else if (IsSection(f)) {
      CollectKeys(*f->message_type(), absl::StrCat(key, "."), depth + 1, out);
    }
  }
}

// One element of `f` (index < 0: the singular value) as text.
std::string ValueText(const Message& msg, const FieldDescriptor* f, int index) {
  const Reflection* r = msg.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(rep ? r->GetRepeatedInt32(msg, f, index)
                              : r->GetInt32(msg, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(rep ? r->GetRepeatedInt64(msg, f, index)
                              : r->GetInt64(msg, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(rep ? r->GetRepeatedUInt32(msg, f, index)
                              : r->GetUInt32(msg, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(rep ? r->GetRepeatedUInt64(msg, f, index)
                              : r->GetUInt64(msg, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return google::protobuf::SimpleDtoa(
          rep ? r->GetRepeatedDouble(msg, f, index) : r->GetDouble(msg, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return google::protobuf::SimpleFtoa(
          rep ? r->GetRepeatedFloat(msg, f, index) : r->GetFloat(msg, f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(msg, f, index) : r->GetBool(msg, f))
                 ? "true"
                 : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r->GetRepeatedEnum(msg, f, index) : r->GetEnum(msg, f))
          ->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(msg, f, index) : r->GetString(msg, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return "{...}";
  }
  return "?";
}

// The whole field `f` of `msg` as text (see GetConfigValue).
std::string FieldText(const Message& msg, const FieldDescriptor* f) {
  const Reflection* r = msg.GetReflection();
  if (IsMap(f)) {
    std::vector<std::string> entries;
    for (int i = 0; i < r->FieldSize(msg, f); ++i) {
      const Message& e = r->GetRepeatedMessage(msg, f, i);
      entries.push_back(
          absl::StrCat(ValueText(e, f->message_type()->map_key(), -1), ": ",
                       ValueText(e, f->message_type()->map_value(), -1)));
    }
    std::sort(entries.begin(), entries.end());
    return absl::StrCat("{", absl::StrJoin(entries, ", "), "}");
  }
  if (f->is_repeated()) {
    std::vector<std::string> items;
    for (int i = 0; i < r->FieldSize(msg, f); ++i) {
      items.push_back(ValueText(msg, f, i));
    }
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }
  if (!r->HasField(msg, f)) return "null";
  return ValueText(msg, f, -1);
}

// Dotted keys of fields that are null in `msg` although their default is not
// (explicit-default scalars and sections), which text proto cannot express.
void CollectNulls(const Message& msg, const std::string& prefix, int depth,
                  std::vector<std::string>* out) {
  if (depth >= kMaxDepth) return;
  const Descriptor* d = msg.GetDescriptor();
  const Reflection* r = msg.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    const std::string key = absl::StrCat(prefix, f->name());
    if (IsSection(f)) {
      if (!r->HasField(msg, f)) {
        out->push_back(key);
      } else {
        CollectNulls(r->GetMessage(msg, f), key + ".", depth + 1, out);
      }
    } else if (f->has_default_value() && !r->HasField(msg, f)) {
      out->push_back(key);
    }
  }
}

constexpr absl::string_view kNullDirective = "#@null ";

// Applies the `#@null <dotted.key>` lines of `text` (see PrintConfig).
absl::Status ApplyNullDirectives(absl::string_view text,
                                 absl::string_view source, Message* msg) {
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, kNullDirective)) continue;
    absl::Status s = ApplyOverride(
        absl::StrCat(absl::StripAsciiWhitespace(line), "=null"), msg);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_number, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void MaterializeDefaults(Message* msg) { MaterializeImpl(msg, 0); }

absl::Status MergeTextProto(absl::string_view text, absl::string_view source,
                            Message* msg) {
  std::unique_ptr<Message> parsed(msg->New());
  FirstErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), parsed.get())) {
    if (!errors.has_error()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": cannot parse text proto"));
    }
    const std::string hint = UnknownFieldHint(*msg, errors.message());
    absl::string_view message = errors.message();
    if (!hint.empty()) absl::ConsumeSuffix(&message, ".");
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", errors.line() + 1, ":", errors.column() + 1,
                     ": ", message, hint));
  }
  ClearListsSetIn(*parsed, msg);
  msg->MergeFrom(*parsed);
  return ApplyNullDirectives(text, source, msg);
}

absl::Status MergeTextProtoFile(const std::string& path, Message* msg) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read config file '", path, "'"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return MergeTextProto(buffer.str(), path, msg);
}

absl::Status ApplyOverride(absl::string_view override_arg, Message* msg) {
  // Hydra spellings: `+key=v` / `++key=v` (add / force-add; every key is in
  // the schema here, so the same as `key=v`) and `~key` (delete: null).
  if (absl::ConsumePrefix(&override_arg, "~")) {
    const size_t eq = override_arg.find('=');
    return ApplyOverride(absl::StrCat(override_arg.substr(0, eq), "=null"),
                         msg);
  }
  if (!absl::ConsumePrefix(&override_arg, "++")) {
    absl::ConsumePrefix(&override_arg, "+");
  }
  const size_t eq = override_arg.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config override '", override_arg, "' is not of the form key=value"));
  }
  const absl::string_view key =
      absl::StripAsciiWhitespace(override_arg.substr(0, eq));
  const absl::string_view value =
      absl::StripAsciiWhitespace(override_arg.substr(eq + 1));
  const Descriptor& root = *msg->GetDescriptor();
  std::vector<std::string> parts = absl::StrSplit(key, '.');
  Message* current = msg;
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* f =
        current->GetDescriptor()->FindFieldByName(parts[i]);
    if (f == nullptr) return UnknownKey(root, key);
    const bool last = i + 1 == parts.size();
    if (last) return SetField(current, f, key, value);
    if (IsMap(f)) {
      std::vector<std::string> rest(parts.begin() + i + 1, parts.end());
      return SetMapEntry(current, f, key, absl::StrJoin(rest, "."), value);
    }
    if (!IsSection(f)) return UnknownKey(root, key);
    current = current->GetReflection()->MutableMessage(current, f);
  }
  return UnknownKey(root, key);
}

absl::Status ApplyOverrides(const std::vector<std::string>& overrides,
                            Message* msg) {
  std::vector<std::string> errors;
  for (const std::string& o : overrides) {
    absl::Status s = ApplyOverride(o, msg);
    if (!s.ok()) errors.emplace_back(s.message());
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

std::vector<std::string> DottedKeys(const Descriptor& d) {
  std::vector<std::string> keys;
  CollectKeys(d, "", 0, &keys);
  return keys;
}

int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string NearestKey(const Descriptor& d, absl::string_view key) {
  const std::vector<std::string> keys = DottedKeys(d);
  const std::string suffix = absl::StrCat(".", key);
  // Several keys may end so (rollout.n: actor_rollout_ref.rollout.n and
  // reward_model.rollout.n): the shallowest, then the first in field order.
  std::string best;
  auto depth = [](const std::string& k) { return absl::StrSplit(k, '.'); };
  size_t best_depth = 0;
  for (const std::string& k : keys) {
    if (!absl::EndsWith(k, suffix)) continue;
    const size_t d = std::vector<absl::string_view>(depth(k)).size();
    if (best.empty() || d < best_depth) {
      best = k;
      best_depth = d;
    }
  }
  if (!best.empty()) return best;
  int best_distance = MaxSuggestionDistance(key) + 1;
  for (const std::string& k : keys) {
    const int distance = EditDistance(key, k);
    if (distance < best_distance) {
      best_distance = distance;
      best = k;
    }
  }
  return best;
}

int MaxSuggestionDistance(absl::string_view key) {
  return std::max<int>(2, static_cast<int>(key.size()) / 10);
}

absl::Status LoadConfig(const ConfigSources& sources, Message* msg) {
  MaterializeDefaults(msg);
  if (!sources.defaults_text.empty()) {
    VERL_RETURN_IF_ERROR(
        MergeTextProto(sources.defaults_text, sources.defaults_name, msg));
  }
  if (!sources.config_file.empty()) {
    VERL_RETURN_IF_ERROR(MergeTextProtoFile(sources.config_file, msg));
  }
  return ApplyOverrides(sources.overrides, msg);
}

absl::StatusOr<std::string> GetConfigValue(const Message& msg,
                                           absl::string_view key) {
  const Message* current = &msg;
  std::vector<std::string> parts = absl::StrSplit(key, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* f =
        current->GetDescriptor()->FindFieldByName(parts[i]);
    if (f == nullptr) break;
    if (i + 1 == parts.size()) return FieldText(*current, f);
    if (!IsSection(f)) break;
    current = &current->GetReflection()->GetMessage(*current, f);
  }
  return UnknownKey(*msg.GetDescriptor(), key);
}

namespace {

void FlattenImpl(const Message& msg, const std::string& prefix, int depth,
                 std::vector<std::pair<std::string, std::string>>* out) {
  if (depth >= kMaxDepth) return;
  const Descriptor* d = msg.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string key = absl::StrCat(prefix, f->name());
    if (IsSection(f)) {
      const Reflection* r = msg.GetReflection();
      if (r->HasField(msg, f)) {
        FlattenImpl(r->GetMessage(msg, f), key + ".", depth + 1, out);
      } else {
        out->emplace_back(key, "null");
      }
    } else if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || IsMap(f)) {
      out->emplace_back(key, FieldText(msg, f));
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> FlattenConfig(
    const Message& msg) {
  std::vector<std::pair<std::string, std::string>> out;
  FlattenImpl(msg, "", 0, &out);
  return out;
}

std::string PrintConfig(const Message& msg) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetUseShortRepeatedPrimitives(true);
  std::string out;
  printer.PrintToString(msg, &out);
  std::vector<std::string> nulls;
  CollectNulls(msg, "", 0, &nulls);
  if (!nulls.empty()) {
    absl::StrAppend(&out, "# Null although their default is not:\n");
    for (const std::string& key : nulls) {
      absl::StrAppend(&out, kNullDirective, key, "\n");
    }
  }
  return out;
}

}  // namespace verl::core
