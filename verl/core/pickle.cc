// File: verl/core/pickle.cc
#include "verl/core/pickle.h"

#include <cstring>
#include <map>
#include <unordered_map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::core {
namespace {

using Kind = PyObj::Kind;

PyRef MakeInt(int64_t v, Kind kind = Kind::kInt) {
  PyRef o = MakePyObj(kind);
  o->i = v;
  return o;
}

PyRef MakeStr(std::string s, Kind kind = Kind::kStr) {
  PyRef o = MakePyObj(kind);
  o->s = std::move(s);
  return o;
}

constexpr char kOrderedDict[] = "collections.OrderedDict";
constexpr char kDict[] = "builtins.dict";
// Protocol 2 pickles bytes as _codecs.encode(latin-1 text, "latin1").
constexpr char kCodecsEncode[] = "_codecs.encode";

PickleHooks* DefaultHooks() {
  static PickleHooks* hooks = new PickleHooks();
  return hooks;
}

class Unpickler {
 public:
  Unpickler(absl::string_view data, absl::string_view source,
            PickleHooks* hooks, PickleTrace* trace)
      : data_(data),
        prefix_(source.empty() ? "" : absl::StrCat(source, ": ")),
        hooks_(hooks != nullptr ? hooks : DefaultHooks()),
        trace_(trace) {}

  absl::StatusOr<PyRef> Run();

 private:
  absl::Status Corrupt(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat(prefix_, "malformed pickle at byte ", pos_, ": ", what));
  }
  // A hook's error: DataLoss gets the byte offset, others the source.
  absl::Status FromHook(const absl::Status& s) const {
    if (absl::IsDataLoss(s)) return Corrupt(s.message());
    return absl::Status(s.code(), absl::StrCat(prefix_, s.message()));
  }

  absl::Status Need(size_t n) const {
    if (data_.size() - pos_ < n) return Corrupt("unexpected end of data");
    return absl::OkStatus();
  }
  uint64_t ReadLe(int n) {
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) {
      v = (v << 8) | static_cast<unsigned char>(data_[pos_ + k]);
    }
    pos_ += n;
    return v;
  }
  absl::StatusOr<std::string> ReadBytes(uint64_t n) {
    if (n > data_.size() - pos_) return Corrupt("string runs past the end");
    std::string s(data_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  absl::StatusOr<std::string> ReadLine() {
    const size_t nl = data_.find('\n', pos_);
    if (nl == absl::string_view::npos) return Corrupt("unterminated line");
    std::string s(data_.substr(pos_, nl - pos_));
    pos_ = nl + 1;
    return s;
  }
  // LONG1 / LONG4 payload: n little-endian two's-complement bytes. Up to 8
  // bytes is an int64; 9 bytes with a zero top byte is a uint64.
  absl::StatusOr<PyRef> ReadLong(uint64_t n) {
    if (n > 9) return Corrupt("integer wider than 64 bits");
    VERL_RETURN_IF_ERROR(Need(n));
    if (n == 9 && data_[pos_ + 8] != 0) {
      return Corrupt("integer outside int64/uint64");
    }
    const bool is_uint = n == 9;
    uint64_t v =
        n == 0 ? 0 : ReadLe(static_cast<int>(std::min<uint64_t>(n, 8)));
    if (is_uint) ++pos_;
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~0ull << (8 * n);
    PyRef o = MakeInt(static_cast<int64_t>(v));
    o->is_uint = is_uint && v > static_cast<uint64_t>(INT64_MAX);
    return o;
  }
  absl::StatusOr<PyRef> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return Corrupt("stack underflow");
    }
    PyRef o = std::move(stack_.back());
    stack_.pop_back();
    return o;
  }
  absl::StatusOr<PyRef*> Top() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      return Corrupt("stack underflow");
    }
    return &stack_.back();
  }
  // The items above the last mark, removing them and the mark.
  absl::StatusOr<std::vector<PyRef>> PopMark() {
    if (marks_.empty()) return Corrupt("no mark");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyRef> items(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return items;
  }
  absl::Status Memoize(uint64_t id) {
    if (stack_.empty()) return Corrupt("memo of empty stack");
    if (id > data_.size()) return Corrupt("memo id out of range");
    memo_[id] = stack_.back();
    return absl::OkStatus();
  }
  absl::Status Get(uint64_t id) {
    auto it = memo_.find(id);
    if (it == memo_.end()) return Corrupt(absl::StrCat("unknown memo ", id));
    stack_.push_back(it->second);
    return absl::OkStatus();
  }
  absl::Status SetItems(const PyRef& dict, const std::vector<PyRef>& kv);
  absl::StatusOr<PyRef> Call(const PyRef& callable, const PyRef& args);
  absl::StatusOr<PyRef> CallBuiltin(const std::string& fn,
                                    const std::vector<PyRef>& a);

  absl::string_view data_;
  std::string prefix_;  // "<source>: " or ""
  PickleHooks* hooks_;
  PickleTrace* trace_;  // may be null
  size_t pos_ = 0;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, PyRef> memo_;
  // Key -> position in items, per dict built so far; holding the dict keeps
  // its address from being reused by another dict.
  struct DictIndex {
    PyRef dict;
    std::unordered_map<std::string, size_t> positions;
  };
  std::unordered_map<const PyObj*, DictIndex> dict_index_;
};

absl::Status Unpickler::SetItems(const PyRef& dict,
                                 const std::vector<PyRef>& kv) {
  if (dict->kind != Kind::kDict) {
    return Corrupt(
        absl::StrCat("SETITEM on ", PyTypeName(*dict), ", not a dict"));
  }
  if (kv.size() % 2 != 0) return Corrupt("odd number of dict items");
  for (size_t k = 0; k < kv.size(); k += 2) {
    // Replace the value of an existing str/int key (Python semantics),
    // found through a per-dict index (state dicts have thousands of keys).
    if (kv[k]->kind == Kind::kStr || kv[k]->kind == Kind::kInt) {
      DictIndex& entry = dict_index_[dict.get()];
      entry.dict = dict;  // keeps the address from being reused
      const std::string id =
          kv[k]->kind == Kind::kStr
              ? "s" + kv[k]->s
              : absl::StrCat(kv[k]->is_uint ? "u" : "i", kv[k]->i);
      auto [it, inserted] = entry.positions.emplace(id, dict->items.size());
      if (!inserted) {
        dict->items[it->second + 1] = kv[k + 1];
        continue;
      }
    }
    dict->items.push_back(kv[k]);
    dict->items.push_back(kv[k + 1]);
  }
  return absl::OkStatus();
}

absl::StatusOr<PyRef> Unpickler::CallBuiltin(const std::string& fn,
                                             const std::vector<PyRef>& a) {
  if (fn == kCodecsEncode) {
    if (a.size() != 2 || a[0]->kind != Kind::kStr || a[1]->kind != Kind::kStr ||
        a[1]->s != "latin1") {
      return Corrupt("bad arguments to _codecs.encode");
    }
    std::string bytes;  // UTF-8 code points < 256 -> one byte each
    const std::string& u = a[0]->s;
    for (size_t k = 0; k < u.size(); ++k) {
      const unsigned char c = u[k];
      if (c < 0x80) {
        bytes.push_back(static_cast<char>(c));
      } else if ((c == 0xC2 || c == 0xC3) && k + 1 < u.size()) {
        bytes.push_back(static_cast<char>(((c & 0x03) << 6) | (u[++k] & 0x3F)));
      } else {
        return Corrupt("_codecs.encode of a non-latin-1 string");
      }
    }
    return MakeStr(std::move(bytes), Kind::kBytes);
  }
  // OrderedDict() / dict() or OrderedDict([(k, v), ...]).
  PyRef d = MakePyObj(Kind::kDict);
  if (!a.empty()) {
    if (a[0]->kind != Kind::kList && a[0]->kind != Kind::kTuple) {
      return Corrupt("bad OrderedDict arguments");
    }
    std::vector<PyRef> kv;
    for (const PyRef& pair : a[0]->items) {
      if (pair->kind != Kind::kTuple || pair->items.size() != 2) {
        return Corrupt("bad OrderedDict item");
      }
      kv.push_back(pair->items[0]);
      kv.push_back(pair->items[1]);
    }
    VERL_RETURN_IF_ERROR(SetItems(d, kv));
  }
  return d;
}

absl::StatusOr<PyRef> Unpickler::Call(const PyRef& callable,
                                      const PyRef& args) {
  if (callable->kind != Kind::kGlobal) {
    return Corrupt(
        absl::StrCat("call of a ", PyTypeName(*callable), " object"));
  }
  if (args->kind != Kind::kTuple) return Corrupt("call arguments not a tuple");
  if (IsBuiltinGlobal(callable->s))
    return CallBuiltin(callable->s, args->items);
  absl::StatusOr<PyRef> out = hooks_->Call(callable->s, args->items);
  if (!out.ok()) return FromHook(out.status());
  if (*out == nullptr) return Corrupt("a hook returned no object");
  return out;
}

absl::StatusOr<PyRef> Unpickler::Run() {
  while (true) {
    VERL_RETURN_IF_ERROR(Need(1));
    const unsigned char op = static_cast<unsigned char>(data_[pos_++]);
    if (trace_ != nullptr) trace_->opcodes.insert(op);
    switch (op) {
      case 0x80:  // PROTO
        VERL_RETURN_IF_ERROR(Need(1));
        if (static_cast<unsigned char>(data_[pos_]) > 5) {
          return Corrupt("unsupported pickle protocol");
        }
        if (trace_ != nullptr) {
          trace_->protocol = static_cast<unsigned char>(data_[pos_]);
        }
        ++pos_;
        break;
      case 0x95:  // FRAME
        VERL_RETURN_IF_ERROR(Need(8));
        pos_ += 8;
        break;
      case '.': {  // STOP
        VERL_ASSIGN_OR_RETURN(auto top, Pop());
        return top;
      }
      case '(':
        marks_.push_back(stack_.size());
        break;
      case '0': {
        VERL_ASSIGN_OR_RETURN(auto x, Pop());
        (void)x;
        break;
      }
      case '1': {
        VERL_ASSIGN_OR_RETURN(auto x, PopMark());
        (void)x;
        break;
      }
      case '2': {
        VERL_ASSIGN_OR_RETURN(auto top, Top());
        stack_.push_back(*top);
        break;
      }
      case 'N':
        stack_.push_back(MakePyObj(Kind::kNone));
        break;
      case 0x88:
      case 0x89:
        stack_.push_back(MakeInt(op == 0x88, Kind::kBool));
        break;
      case 'J':
        VERL_RETURN_IF_ERROR(Need(4));
        stack_.push_back(MakeInt(static_cast<int32_t>(ReadLe(4))));
        break;
      case 'K':
        VERL_RETURN_IF_ERROR(Need(1));
        stack_.push_back(MakeInt(ReadLe(1)));
        break;
      case 'M':
        VERL_RETURN_IF_ERROR(Need(2));
        stack_.push_back(MakeInt(ReadLe(2)));
        break;
      case 0x8a:    // LONG1
      case 0x8b: {  // LONG4
        const int w = op == 0x8a ? 1 : 4;
        VERL_RETURN_IF_ERROR(Need(w));
        VERL_ASSIGN_OR_RETURN(PyRef v, ReadLong(ReadLe(w)));
        stack_.push_back(std::move(v));
        break;
      }
      case 'I':
      case 'L': {  // INT / LONG (text)
        VERL_ASSIGN_OR_RETURN(auto line, ReadLine());
        if (!line.empty() && line.back() == 'L') line.pop_back();
        if (op == 'I' && (line == "00" || line == "01")) {
          stack_.push_back(MakeInt(line == "01", Kind::kBool));
          break;
        }
        int64_t v = 0;
        uint64_t u = 0;
        if (absl::SimpleAtoi(line, &v)) {
          stack_.push_back(MakeInt(v));
        } else if (absl::SimpleAtoi(line, &u)) {  // above INT64_MAX
          PyRef o = MakeInt(static_cast<int64_t>(u));
          o->is_uint = true;
          stack_.push_back(std::move(o));
        } else {
          return Corrupt("bad INT");
        }
        break;
      }
      case 'G': {  // BINFLOAT (big-endian)
        VERL_RETURN_IF_ERROR(Need(8));
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) {
          bits = (bits << 8) | static_cast<unsigned char>(data_[pos_ + k]);
        }
        pos_ += 8;
        PyRef o = MakePyObj(Kind::kFloat);
        std::memcpy(&o->f, &bits, 8);
        stack_.push_back(o);
        break;
      }
      case 'F': {
        VERL_ASSIGN_OR_RETURN(auto line, ReadLine());
        PyRef o = MakePyObj(Kind::kFloat);
        if (!absl::SimpleAtod(line, &o->f)) return Corrupt("bad FLOAT");
        stack_.push_back(o);
        break;
      }
      case 'X':     // BINUNICODE
      case 0x8c:    // SHORT_BINUNICODE
      case 0x8d:    // BINUNICODE8
      case 'T':     // BINSTRING
      case 'U':     // SHORT_BINSTRING
      case 'B':     // BINBYTES
      case 'C':     // SHORT_BINBYTES
      case 0x8e: {  // BINBYTES8
        const int w = (op == 0x8c || op == 'U' || op == 'C') ? 1
                      : (op == 0x8d || op == 0x8e)           ? 8
                                                             : 4;
        VERL_RETURN_IF_ERROR(Need(w));
        const uint64_t n = ReadLe(w);
        VERL_ASSIGN_OR_RETURN(auto s, ReadBytes(n));
        const bool bytes = op == 'B' || op == 'C' || op == 0x8e;
        stack_.push_back(
            MakeStr(std::move(s), bytes ? Kind::kBytes : Kind::kStr));
        break;
      }
      case ')':
        stack_.push_back(MakePyObj(Kind::kTuple));
        break;
      case 't': {
        VERL_ASSIGN_OR_RETURN(auto items, PopMark());
        PyRef t = MakePyObj(Kind::kTuple);
        t->items = std::move(items);
        stack_.push_back(t);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84;
        PyRef t = MakePyObj(Kind::kTuple);
        t->items.resize(n);
        for (size_t k = n; k-- > 0;) {
          VERL_ASSIGN_OR_RETURN(auto x, Pop());
          t->items[k] = std::move(x);
        }
        stack_.push_back(t);
        break;
      }
      case ']':
        stack_.push_back(MakePyObj(Kind::kList));
        break;
      case 'l': {
        VERL_ASSIGN_OR_RETURN(auto items, PopMark());
        PyRef t = MakePyObj(Kind::kList);
        t->items = std::move(items);
        stack_.push_back(t);
        break;
      }
      case 'a':
      case 'e': {
        std::vector<PyRef> items;
        if (op == 'a') {
          VERL_ASSIGN_OR_RETURN(auto x, Pop());
          items.push_back(std::move(x));
        } else {
          VERL_ASSIGN_OR_RETURN(auto xs, PopMark());
          items = std::move(xs);
        }
        VERL_ASSIGN_OR_RETURN(auto list, Top());
        if ((*list)->kind != Kind::kList) return Corrupt("APPEND to non-list");
        for (PyRef& x : items) (*list)->items.push_back(std::move(x));
        break;
      }
      case '}':
        stack_.push_back(MakePyObj(Kind::kDict));
        break;
      case 'd': {
        VERL_ASSIGN_OR_RETURN(auto items, PopMark());
        PyRef d = MakePyObj(Kind::kDict);
        VERL_RETURN_IF_ERROR(SetItems(d, items));
        stack_.push_back(d);
        break;
      }
      case 's':
      case 'u': {
        std::vector<PyRef> kv;
        if (op == 's') {
          VERL_ASSIGN_OR_RETURN(auto v, Pop());
          VERL_ASSIGN_OR_RETURN(auto k, Pop());
          kv = {std::move(k), std::move(v)};
        } else {
          VERL_ASSIGN_OR_RETURN(auto xs, PopMark());
          kv = std::move(xs);
        }
        VERL_ASSIGN_OR_RETURN(auto dict, Top());
        VERL_RETURN_IF_ERROR(SetItems(*dict, kv));
        break;
      }
      case 'c': {  // GLOBAL
        VERL_ASSIGN_OR_RETURN(auto module, ReadLine());
        VERL_ASSIGN_OR_RETURN(auto name, ReadLine());
        if (trace_ != nullptr) trace_->globals.push_back(module + "." + name);
        stack_.push_back(MakeStr(module + "." + name, Kind::kGlobal));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        VERL_ASSIGN_OR_RETURN(auto name, Pop());
        VERL_ASSIGN_OR_RETURN(auto module, Pop());
        if (name->kind != Kind::kStr || module->kind != Kind::kStr) {
          return Corrupt("STACK_GLOBAL needs two strings");
        }
        if (trace_ != nullptr) {
          trace_->globals.push_back(module->s + "." + name->s);
        }
        stack_.push_back(MakeStr(module->s + "." + name->s, Kind::kGlobal));
        break;
      }
      case 'R':     // REDUCE
      case 0x81: {  // NEWOBJ
        VERL_ASSIGN_OR_RETURN(auto args, Pop());
        VERL_ASSIGN_OR_RETURN(auto callable, Pop());
        VERL_ASSIGN_OR_RETURN(auto result, Call(callable, args));
        stack_.push_back(std::move(result));
        break;
      }
      case 0x92: {  // NEWOBJ_EX
        VERL_ASSIGN_OR_RETURN(auto kwargs, Pop());
        VERL_ASSIGN_OR_RETURN(auto args, Pop());
        VERL_ASSIGN_OR_RETURN(auto cls, Pop());
        (void)kwargs;
        VERL_ASSIGN_OR_RETURN(auto result, Call(cls, args));
        stack_.push_back(std::move(result));
        break;
      }
      case 'b': {  // BUILD
        VERL_ASSIGN_OR_RETURN(auto state, Pop());
        VERL_ASSIGN_OR_RETURN(auto obj, Top());
        absl::Status s = hooks_->Build(*obj, state);
        if (!s.ok()) return FromHook(s);
        break;
      }
      case 'P':    // PERSID (text)
      case 'Q': {  // BINPERSID
        PyRef pid;
        if (op == 'P') {
          VERL_ASSIGN_OR_RETURN(auto line, ReadLine());
          pid = MakeStr(std::move(line));
        } else {
          VERL_ASSIGN_OR_RETURN(pid, Pop());
        }
        absl::StatusOr<PyRef> obj = hooks_->PersistentLoad(pid);
        if (!obj.ok()) return FromHook(obj.status());
        if (*obj == nullptr) return Corrupt("a hook returned no object");
        stack_.push_back(std::move(*obj));
        break;
      }
      case 'p': {
        VERL_ASSIGN_OR_RETURN(auto line, ReadLine());
        uint64_t id = 0;
        if (!absl::SimpleAtoi(line, &id)) return Corrupt("bad PUT");
        VERL_RETURN_IF_ERROR(Memoize(id));
        break;
      }
      case 'q':
      case 'r': {
        const int w = op == 'q' ? 1 : 4;
        VERL_RETURN_IF_ERROR(Need(w));
        VERL_RETURN_IF_ERROR(Memoize(ReadLe(w)));
        break;
      }
      case 0x94:  // MEMOIZE
        VERL_RETURN_IF_ERROR(Memoize(memo_.size()));
        break;
      case 'g': {
        VERL_ASSIGN_OR_RETURN(auto line, ReadLine());
        uint64_t id = 0;
        if (!absl::SimpleAtoi(line, &id)) return Corrupt("bad GET");
        VERL_RETURN_IF_ERROR(Get(id));
        break;
      }
      case 'h':
      case 'j': {
        const int w = op == 'h' ? 1 : 4;
        VERL_RETURN_IF_ERROR(Need(w));
        VERL_RETURN_IF_ERROR(Get(ReadLe(w)));
        break;
      }
      default:
        --pos_;
        return Corrupt(absl::StrFormat("unsupported opcode 0x%02x", op));
    }
  }
}

}  // namespace

PyRef MakePyObj(PyObj::Kind kind) {
  auto o = std::make_shared<PyObj>();
  o->kind = kind;
  return o;
}

std::string PyTypeName(const PyObj& o) {
  switch (o.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "Bool";
    case Kind::kInt:
      return "Int";
    case Kind::kFloat:
      return "Double";
    case Kind::kStr:
      return "String";
    case Kind::kBytes:
      return "Bytes";
    case Kind::kTuple:
      return "Tuple";
    case Kind::kList:
      return "List";
    case Kind::kDict:
      return "GenericDict";
    case Kind::kGlobal:
      return "Global";
    case Kind::kObject:
      return o.s;
  }
  return "?";
}

bool IsBuiltinGlobal(absl::string_view global) {
  return global == kOrderedDict || global == kDict || global == kCodecsEncode;
}

std::string FirstUnknownGlobal(const PyRef& o,
                               bool (*known)(absl::string_view global)) {
  struct Walk {
    bool (*known)(absl::string_view);
    std::string operator()(const PyRef& o, int depth) const {
      if (o == nullptr || depth > 16) return "";
      if (o->kind == Kind::kGlobal) {
        const bool ok =
            IsBuiltinGlobal(o->s) || (known != nullptr && known(o->s));
        return ok ? "" : o->s;
      }
      for (const PyRef& item : o->items) {
        std::string g = (*this)(item, depth + 1);
        if (!g.empty()) return g;
      }
      return "";
    }
  };
  return Walk{known}(o, 0);
}

absl::StatusOr<PyRef> PickleHooks::Call(const std::string& callable,
                                        const std::vector<PyRef>& args) {
  PyRef tuple = MakePyObj(Kind::kTuple);
  tuple->items = args;
  std::string cls = FirstUnknownGlobal(tuple, nullptr);
  return absl::InvalidArgumentError(
      absl::StrCat("holds an object of class ", cls.empty() ? callable : cls,
                   ", which this reader cannot load (plain data only)"));
}

absl::StatusOr<PyRef> PickleHooks::PersistentLoad(const PyRef& pid) {
  return absl::InvalidArgumentError(
      absl::StrCat("holds a persistent id (", PyTypeName(*pid),
                   "), which this reader cannot load (plain data only)"));
}

absl::Status PickleHooks::Build(const PyRef& obj, const PyRef& state) {
  return absl::InvalidArgumentError(
      absl::StrCat("sets the state of a ", PyTypeName(*obj),
                   " (BUILD), which this reader cannot load (plain data "
                   "only)"));
}

absl::StatusOr<PyRef> Unpickle(absl::string_view data, absl::string_view source,
                               PickleHooks* hooks, PickleTrace* trace) {
  return Unpickler(data, source, hooks, trace).Run();
}

absl::StatusOr<nlohmann::json> PyToJson(const PyObj& o,
                                        const std::string& where) {
  switch (o.kind) {
    case Kind::kNone:
      return nlohmann::json(nullptr);
    case Kind::kBool:
      return nlohmann::json(o.i != 0);
    case Kind::kInt:
      if (o.is_uint) return nlohmann::json(static_cast<uint64_t>(o.i));
      return nlohmann::json(o.i);
    case Kind::kFloat:
      return nlohmann::json(o.f);
    case Kind::kStr:
      return nlohmann::json(o.s);
    case Kind::kList:
    case Kind::kTuple: {
      nlohmann::json out = nlohmann::json::array();
      for (size_t i = 0; i < o.items.size(); ++i) {
        VERL_ASSIGN_OR_RETURN(
            nlohmann::json v,
            PyToJson(*o.items[i], absl::StrCat(where, "[", i, "]")));
        out.push_back(std::move(v));
      }
      return out;
    }
    case Kind::kDict: {
      nlohmann::json out = nlohmann::json::object();
      for (size_t k = 0; k + 1 < o.items.size(); k += 2) {
        if (o.items[k]->kind != Kind::kStr) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": dict key of type ",
                           PyTypeName(*o.items[k]), ", expected a string"));
        }
        const std::string& key = o.items[k]->s;
        VERL_ASSIGN_OR_RETURN(
            out[key], PyToJson(*o.items[k + 1], absl::StrCat(where, ".", key)));
      }
      return out;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": holds ", PyTypeName(o),
                       ", expected dicts, lists, strings and numbers"));
  }
}

absl::StatusOr<nlohmann::json> ReadPickle(absl::string_view data,
                                          absl::string_view source) {
  VERL_ASSIGN_OR_RETURN(PyRef top, Unpickle(data, source));
  return PyToJson(*top, source.empty() ? "pickle" : std::string(source));
}

absl::StatusOr<nlohmann::json> ReadPickleFile(const std::string& path) {
  VERL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ReadPickle(bytes, path);
}

}  // namespace verl::core
