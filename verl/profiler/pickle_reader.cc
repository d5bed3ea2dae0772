// File: verl/profiler/pickle_reader.cc
#include "verl/profiler/pickle_reader.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"

namespace verl::profiler {
namespace {

using nlohmann::json;

// Containers are shared nodes so a memoized object that is filled after its
// PUT (as Python's pickler does) is seen filled through every reference.
struct Node;
using NodePtr = std::shared_ptr<Node>;
struct Node {
  enum class Kind { kScalar, kList, kDict } kind = Kind::kScalar;
  json scalar;
  std::vector<NodePtr> list;
  std::vector<std::pair<std::string, NodePtr>> dict;
};

NodePtr Scalar(json v) {
  auto n = std::make_shared<Node>();
  n->scalar = std::move(v);
  return n;
}

NodePtr Container(Node::Kind kind) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  return n;
}

json ToJson(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kScalar:
      return n.scalar;
    case Node::Kind::kList: {
      json out = json::array();
      for (const NodePtr& x : n.list) out.push_back(ToJson(*x));
      return out;
    }
    case Node::Kind::kDict: {
      json out = json::object();
      for (const auto& [k, x] : n.dict) out[k] = ToJson(*x);
      return out;
    }
  }
  return nullptr;
}

class Unpickler {
 public:
  Unpickler(absl::string_view bytes, absl::string_view source)
      : in_(bytes), source_(source) {}

  absl::StatusOr<json> Run() {
    while (pos_ < in_.size()) {
      const size_t op_pos = pos_;
      const unsigned char op = static_cast<unsigned char>(in_[pos_++]);
      absl::Status s = Step(op);
      if (!s.ok()) return Error(op_pos, s.message());
      if (op == '.') {
        if (stack_.size() != 1 || !marks_.empty())
          return Error(op_pos, "STOP with a malformed stack");
        return ToJson(*stack_.back());
      }
    }
    return Error(pos_, "truncated (no STOP)");
  }

 private:
  absl::Status Error(size_t at, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("pickle", source_.empty() ? "" : " ", source_, ": byte ",
                     at, ": ", what));
  }

  absl::Status Need(size_t n) {
    if (in_.size() - pos_ < n) return absl::InvalidArgumentError("truncated");
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> LE(int n) {
    if (in_.size() - pos_ < static_cast<size_t>(n))
      return absl::InvalidArgumentError("truncated");
    uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= static_cast<uint64_t>(static_cast<unsigned char>(in_[pos_ + i]))
           << (8 * i);
    pos_ += n;
    return v;
  }

  absl::Status PushString(uint64_t n) {
    if (in_.size() - pos_ < n) return absl::InvalidArgumentError("truncated");
    stack_.push_back(Scalar(json(std::string(in_.substr(pos_, n)))));
    pos_ += n;
    return absl::OkStatus();
  }

  absl::Status PushLong(uint64_t n) {
    if (n > 9 || in_.size() - pos_ < n)
      return absl::InvalidArgumentError("LONG wider than 64 bits or truncated");
    uint64_t v = 0;
    for (uint64_t i = 0; i < n && i < 8; ++i)
      v |= static_cast<uint64_t>(static_cast<unsigned char>(in_[pos_ + i]))
           << (8 * i);
    const bool negative =
        n > 0 && (static_cast<unsigned char>(in_[pos_ + n - 1]) & 0x80);
    if (n == 9) {
      if (in_[pos_ + 8] != 0)
        return absl::InvalidArgumentError("LONG outside uint64");
      stack_.push_back(Scalar(json(v)));
    } else if (negative) {
      if (n < 8) v |= ~uint64_t{0} << (8 * n);  // sign-extend
      stack_.push_back(Scalar(json(static_cast<int64_t>(v))));
    } else if (v > static_cast<uint64_t>(INT64_MAX)) {
      stack_.push_back(Scalar(json(v)));
    } else {
      stack_.push_back(Scalar(json(static_cast<int64_t>(v))));
    }
    pos_ += n;
    return absl::OkStatus();
  }

  absl::StatusOr<NodePtr> Pop() {
    if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size()))
      return absl::InvalidArgumentError("stack underflow");
    NodePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }

  // Items above the innermost MARK, which is popped.
  absl::StatusOr<std::vector<NodePtr>> PopMark() {
    if (marks_.empty()) return absl::InvalidArgumentError("no MARK");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<NodePtr> items(std::make_move_iterator(stack_.begin() + m),
                               std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }

  absl::Status SetItems(std::vector<NodePtr> items) {
    if (stack_.empty() || stack_.back()->kind != Node::Kind::kDict ||
        items.size() % 2)
      return absl::InvalidArgumentError("SETITEMS without a dict");
    for (size_t i = 0; i < items.size(); i += 2) {
      if (items[i]->kind != Node::Kind::kScalar ||
          !items[i]->scalar.is_string())
        return absl::InvalidArgumentError("non-string dict key");
      stack_.back()->dict.emplace_back(items[i]->scalar.get<std::string>(),
                                       std::move(items[i + 1]));
    }
    return absl::OkStatus();
  }

  absl::Status Append(std::vector<NodePtr> items) {
    if (stack_.empty() || stack_.back()->kind != Node::Kind::kList)
      return absl::InvalidArgumentError("APPEND(S) without a list");
    for (auto& v : items) stack_.back()->list.push_back(std::move(v));
    return absl::OkStatus();
  }

  void PushTuple(std::vector<NodePtr> items) {
    NodePtr t = Container(Node::Kind::kList);
    t->list = std::move(items);
    stack_.push_back(std::move(t));
  }

  absl::Status Tuple(size_t n) {
    if (stack_.size() < n ||
        (!marks_.empty() && stack_.size() - n < marks_.back()))
      return absl::InvalidArgumentError("stack underflow");
    std::vector<NodePtr> items(std::make_move_iterator(stack_.end() - n),
                               std::make_move_iterator(stack_.end()));
    stack_.resize(stack_.size() - n);
    PushTuple(std::move(items));
    return absl::OkStatus();
  }

  absl::Status Put(uint64_t id) {
    if (stack_.empty()) return absl::InvalidArgumentError("PUT on empty stack");
    memo_[id] = stack_.back();
    return absl::OkStatus();
  }

  absl::Status GetMemo(uint64_t id) {
    auto it = memo_.find(id);
    if (it == memo_.end())
      return absl::InvalidArgumentError(absl::StrCat("unknown memo id ", id));
    stack_.push_back(it->second);
    return absl::OkStatus();
  }

#define VERL_ASSIGN_LE(var, n)                  \
  auto var##_or = LE(n);                        \
  if (!var##_or.ok()) return var##_or.status(); \
  const uint64_t var = *var##_or;

  absl::Status Step(unsigned char op) {
    switch (op) {
      case 0x80: {  // PROTO
        VERL_ASSIGN_LE(proto, 1);
        if (proto > 5) return absl::InvalidArgumentError("unknown protocol");
        return absl::OkStatus();
      }
      case 0x95: {  // FRAME (length only)
        VERL_ASSIGN_LE(len, 8);
        (void)len;
        return absl::OkStatus();
      }
      case '.':
        return absl::OkStatus();
      case '(':
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case 'N':
        stack_.push_back(Scalar(json(nullptr)));
        return absl::OkStatus();
      case 0x88:
        stack_.push_back(Scalar(json(true)));
        return absl::OkStatus();
      case 0x89:
        stack_.push_back(Scalar(json(false)));
        return absl::OkStatus();
      case 'K': {
        VERL_ASSIGN_LE(v, 1);
        stack_.push_back(Scalar(json(static_cast<int64_t>(v))));
        return absl::OkStatus();
      }
      case 'M': {
        VERL_ASSIGN_LE(v, 2);
        stack_.push_back(Scalar(json(static_cast<int64_t>(v))));
        return absl::OkStatus();
      }
      case 'J': {
        VERL_ASSIGN_LE(v, 4);
        stack_.push_back(Scalar(json(static_cast<int64_t>(
            static_cast<int32_t>(static_cast<uint32_t>(v))))));
        return absl::OkStatus();
      }
      case 0x8a: {  // LONG1
        VERL_ASSIGN_LE(n, 1);
        return PushLong(n);
      }
      case 'G': {
        if (in_.size() - pos_ < 8)
          return absl::InvalidArgumentError("truncated");
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i)
          bits = (bits << 8) | static_cast<unsigned char>(in_[pos_ + i]);
        pos_ += 8;
        double d;
        std::memcpy(&d, &bits, sizeof(d));
        stack_.push_back(Scalar(json(d)));
        return absl::OkStatus();
      }
      case 0x8c: {  // SHORT_BINUNICODE
        VERL_ASSIGN_LE(n, 1);
        return PushString(n);
      }
      case 'X': {  // BINUNICODE
        VERL_ASSIGN_LE(n, 4);
        return PushString(n);
      }
      case 0x8d: {  // BINUNICODE8
        VERL_ASSIGN_LE(n, 8);
        return PushString(n);
      }
      case '}':
        stack_.push_back(Container(Node::Kind::kDict));
        return absl::OkStatus();
      case ']':
      case ')':
        stack_.push_back(Container(Node::Kind::kList));
        return absl::OkStatus();
      case 0x85:
        return Tuple(1);
      case 0x86:
        return Tuple(2);
      case 0x87:
        return Tuple(3);
      case 't': {  // TUPLE (from MARK)
        auto items = PopMark();
        if (!items.ok()) return items.status();
        PushTuple(std::move(*items));
        return absl::OkStatus();
      }
      case 'u': {
        auto items = PopMark();
        if (!items.ok()) return items.status();
        return SetItems(std::move(*items));
      }
      case 's': {
        auto v = Pop();
        if (!v.ok()) return v.status();
        auto k = Pop();
        if (!k.ok()) return k.status();
        return SetItems({std::move(*k), std::move(*v)});
      }
      case 'e': {
        auto items = PopMark();
        if (!items.ok()) return items.status();
        return Append(std::move(*items));
      }
      case 'a': {
        auto v = Pop();
        if (!v.ok()) return v.status();
        return Append({std::move(*v)});
      }
      case 'q': {  // BINPUT
        VERL_ASSIGN_LE(id, 1);
        return Put(id);
      }
      case 'r': {  // LONG_BINPUT
        VERL_ASSIGN_LE(id, 4);
        return Put(id);
      }
      case 0x94:  // MEMOIZE
        return Put(memo_.size());
      case 'h': {  // BINGET
        VERL_ASSIGN_LE(id, 1);
        return GetMemo(id);
      }
      case 'j': {  // LONG_BINGET
        VERL_ASSIGN_LE(id, 4);
        return GetMemo(id);
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("unsupported opcode 0x", absl::Hex(op)));
    }
  }
#undef VERL_ASSIGN_LE

  absl::string_view in_;
  absl::string_view source_;
  size_t pos_ = 0;
  std::vector<NodePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, NodePtr> memo_;
};

}  // namespace

absl::StatusOr<nlohmann::json> ReadPickle(absl::string_view bytes,
                                          absl::string_view source) {
  return Unpickler(bytes, source).Run();
}

absl::StatusOr<nlohmann::json> ReadPickleFile(const std::string& path) {
  auto bytes = core::ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  return ReadPickle(*bytes, path);
}

}  // namespace verl::profiler
