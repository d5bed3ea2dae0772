// File: verl/ckpt/pt_pickle.cc
#include "verl/ckpt/pt_pickle.h"

#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace {

using Kind = PyObj::Kind;

PyRef Make(Kind kind) {
  auto o = std::make_shared<PyObj>();
  o->kind = kind;
  return o;
}

PyRef MakeInt(int64_t v, Kind kind = Kind::kInt) {
  PyRef o = Make(kind);
  o->i = v;
  return o;
}

PyRef MakeStr(std::string s, Kind kind = Kind::kStr) {
  PyRef o = Make(kind);
  o->s = std::move(s);
  return o;
}

constexpr char kRebuildV2[] = "torch._utils._rebuild_tensor_v2";
constexpr char kRebuild[] = "torch._utils._rebuild_tensor";
constexpr char kRebuildParam[] = "torch._utils._rebuild_parameter";
constexpr char kRebuildParamState[] =
    "torch._utils._rebuild_parameter_with_state";
constexpr char kOrderedDict[] = "collections.OrderedDict";
// Protocol 2 pickles bytes as _codecs.encode(latin-1 text, "latin1").
constexpr char kCodecsEncode[] = "_codecs.encode";

bool IsStorageClass(const std::string& global) {
  return absl::StartsWith(global, "torch.") &&
         absl::EndsWith(global, "Storage") &&
         global.find('.', 6) == std::string::npos;
}

bool IsKnownGlobal(const std::string& g) {
  static const std::set<std::string>* known = new std::set<std::string>{
      kRebuildV2,   kRebuild,        kRebuildParam, kRebuildParamState,
      kOrderedDict, "builtins.dict", kCodecsEncode};
  return known->count(g) > 0 || IsStorageClass(g);
}

// The first global inside `o` that this reader does not know (depth first).
std::string FirstUnknownGlobal(const PyRef& o, int depth = 0) {
  if (o == nullptr || depth > 16) return "";
  if (o->kind == Kind::kGlobal) return IsKnownGlobal(o->s) ? "" : o->s;
  for (const PyRef& item : o->items) {
    std::string g = FirstUnknownGlobal(item, depth + 1);
    if (!g.empty()) return g;
  }
  return "";
}

class Unpickler {
 public:
  Unpickler(absl::string_view data, absl::string_view source)
      : data_(data),
        prefix_(source.empty() ? "" : absl::StrCat(source, ": ")) {}

  absl::StatusOr<PyRef> Run();

 private:
  absl::Status Corrupt(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat(prefix_, "malformed pickle at byte ", pos_, ": ", what));
  }
  absl::Status Unsupported(const std::string& cls,
                           const std::string& via) const {
    std::string msg = absl::StrCat(
        prefix_, "holds an object of class ", cls,
        via.empty() || via == cls ? ""
                                  : absl::StrCat(" (rebuilt by ", via, ")"),
        ", which this reader cannot load: only dicts / OrderedDicts of "
        "plain tensors, strings and numbers are supported");
    if (absl::StrContains(cls, "DTensor") ||
        absl::StrContains(via, "DTensor")) {
      absl::StrAppend(&msg,
                      "; FSDP2 DTensor state dicts must be saved as local "
                      "tensors ({k: v.to_local() for k, v in sd.items()})");
    }
    return absl::InvalidArgumentError(msg);
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
  absl::StatusOr<PyRef> PersistentLoad(const PyRef& pid);

  absl::string_view data_;
  std::string prefix_;  // "<source>: " or ""
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
        absl::StrCat("SETITEM on ", PyKindName(dict->kind), ", not a dict"));
  }
  if (kv.size() % 2 != 0) return Corrupt("odd number of dict items");
  for (size_t k = 0; k < kv.size(); k += 2) {
    // Replace the value of an existing str/int key (Python semantics),
    // found through a per-dict index (state dicts have thousands of keys).
    if (kv[k]->kind == Kind::kStr || kv[k]->kind == Kind::kInt) {
      DictIndex& entry = dict_index_[dict.get()];
      entry.dict = dict;  // keeps the address from being reused
      auto& index = entry.positions;
      const std::string id = kv[k]->kind == Kind::kStr
                                 ? "s" + kv[k]->s
                                 : "i" + std::to_string(kv[k]->i);
      auto [it, inserted] = index.emplace(id, dict->items.size());
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

absl::StatusOr<std::vector<int64_t>> IntTuple(const PyRef& o) {
  if (o->kind != Kind::kTuple && o->kind != Kind::kList) {
    return absl::InvalidArgumentError("not a tuple");
  }
  std::vector<int64_t> out;
  for (const PyRef& x : o->items) {
    if (x->kind != Kind::kInt) return absl::InvalidArgumentError("not an int");
    out.push_back(x->i);
  }
  return out;
}

absl::StatusOr<PyRef> Unpickler::Call(const PyRef& callable,
                                      const PyRef& args) {
  if (callable->kind != Kind::kGlobal) {
    return Corrupt(
        absl::StrCat("call of a ", PyKindName(callable->kind), " object"));
  }
  if (args->kind != Kind::kTuple) return Corrupt("call arguments not a tuple");
  const std::string& fn = callable->s;
  const auto& a = args->items;
  if (fn == kRebuildV2 || fn == kRebuild) {
    if (a.size() < 4 || a[0]->kind != Kind::kStorage ||
        a[1]->kind != Kind::kInt) {
      return Corrupt(absl::StrCat("bad arguments to ", fn));
    }
    auto size = IntTuple(a[2]);
    auto stride = IntTuple(a[3]);
    if (!size.ok() || !stride.ok() || size->size() != stride->size()) {
      return Corrupt(absl::StrCat("bad size/stride for ", fn));
    }
    PyRef t = Make(Kind::kTensor);
    t->items = {a[0]};
    t->offset = a[1]->i;
    t->size = *size;
    t->stride = *stride;
    return t;
  }
  if (fn == kRebuildParam || fn == kRebuildParamState) {
    if (a.empty() || a[0]->kind != Kind::kTensor) {
      return Corrupt(absl::StrCat("bad arguments to ", fn));
    }
    return a[0];
  }
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
  if (fn == kOrderedDict || fn == "builtins.dict") {
    PyRef d = Make(Kind::kDict);
    if (!a.empty()) {  // OrderedDict([(k, v), ...])
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
      absl::Status s = SetItems(d, kv);
      if (!s.ok()) return s;
    }
    return d;
  }
  std::string cls = FirstUnknownGlobal(args);
  if (cls.empty()) cls = fn;
  return Unsupported(cls, fn);
}

absl::StatusOr<PyRef> Unpickler::PersistentLoad(const PyRef& pid) {
  // ('storage', torch.FloatStorage, key, location, numel)
  const auto& a = pid->items;
  if (pid->kind != Kind::kTuple || a.size() < 5 || a[0]->kind != Kind::kStr ||
      a[0]->s != "storage") {
    return Corrupt("persistent id is not a ('storage', ...) tuple");
  }
  if (a[1]->kind != Kind::kGlobal || !IsStorageClass(a[1]->s)) {
    return Unsupported(
        a[1]->kind == Kind::kGlobal ? a[1]->s : PyKindName(a[1]->kind), "");
  }
  if ((a[2]->kind != Kind::kStr && a[2]->kind != Kind::kInt) ||
      a[3]->kind != Kind::kStr || a[4]->kind != Kind::kInt || a[4]->i < 0) {
    return Corrupt("bad storage persistent id");
  }
  PyRef s = Make(Kind::kStorage);
  s->s = a[1]->s.substr(6);  // drop "torch."
  s->key = a[2]->kind == Kind::kStr ? a[2]->s : std::to_string(a[2]->i);
  s->location = a[3]->s;
  s->numel = a[4]->i;
  return s;
}

absl::StatusOr<PyRef> Unpickler::Run() {
  while (true) {
    VERL_RETURN_IF_ERROR(Need(1));
    const unsigned char op = static_cast<unsigned char>(data_[pos_++]);
    switch (op) {
      case 0x80:  // PROTO
        VERL_RETURN_IF_ERROR(Need(1));
        if (static_cast<unsigned char>(data_[pos_]) > 5) {
          return Corrupt("unsupported pickle protocol");
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
        stack_.push_back(Make(Kind::kNone));
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
        const uint64_t n = ReadLe(w);
        if (n > 8) return Corrupt("integer wider than 64 bits");
        VERL_RETURN_IF_ERROR(Need(n));
        uint64_t v = n == 0 ? 0 : ReadLe(static_cast<int>(n));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~0ull << (8 * n);
        stack_.push_back(MakeInt(static_cast<int64_t>(v)));
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
        if (!absl::SimpleAtoi(line, &v)) return Corrupt("bad INT");
        stack_.push_back(MakeInt(v));
        break;
      }
      case 'G': {  // BINFLOAT (big-endian)
        VERL_RETURN_IF_ERROR(Need(8));
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) {
          bits = (bits << 8) | static_cast<unsigned char>(data_[pos_ + k]);
        }
        pos_ += 8;
        PyRef o = Make(Kind::kFloat);
        std::memcpy(&o->f, &bits, 8);
        stack_.push_back(o);
        break;
      }
      case 'F': {
        VERL_ASSIGN_OR_RETURN(auto line, ReadLine());
        PyRef o = Make(Kind::kFloat);
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
        stack_.push_back(Make(Kind::kTuple));
        break;
      case 't': {
        VERL_ASSIGN_OR_RETURN(auto items, PopMark());
        PyRef t = Make(Kind::kTuple);
        t->items = std::move(items);
        stack_.push_back(t);
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84;
        PyRef t = Make(Kind::kTuple);
        t->items.resize(n);
        for (size_t k = n; k-- > 0;) {
          VERL_ASSIGN_OR_RETURN(auto x, Pop());
          t->items[k] = std::move(x);
        }
        stack_.push_back(t);
        break;
      }
      case ']':
        stack_.push_back(Make(Kind::kList));
        break;
      case 'l': {
        VERL_ASSIGN_OR_RETURN(auto items, PopMark());
        PyRef t = Make(Kind::kList);
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
        stack_.push_back(Make(Kind::kDict));
        break;
      case 'd': {
        VERL_ASSIGN_OR_RETURN(auto items, PopMark());
        PyRef d = Make(Kind::kDict);
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
        stack_.push_back(MakeStr(module + "." + name, Kind::kGlobal));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        VERL_ASSIGN_OR_RETURN(auto name, Pop());
        VERL_ASSIGN_OR_RETURN(auto module, Pop());
        if (name->kind != Kind::kStr || module->kind != Kind::kStr) {
          return Corrupt("STACK_GLOBAL needs two strings");
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
      case 'b': {  // BUILD: state of an OrderedDict (_metadata) or tensor
        VERL_ASSIGN_OR_RETURN(auto state, Pop());
        VERL_ASSIGN_OR_RETURN(auto obj, Top());
        (void)state;
        if ((*obj)->kind != Kind::kDict && (*obj)->kind != Kind::kTensor) {
          return Corrupt(absl::StrCat("BUILD on ", PyKindName((*obj)->kind)));
        }
        break;
      }
      case 'Q': {  // BINPERSID
        VERL_ASSIGN_OR_RETURN(auto pid, Pop());
        VERL_ASSIGN_OR_RETURN(auto storage, PersistentLoad(pid));
        stack_.push_back(std::move(storage));
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

const char* PyKindName(PyObj::Kind kind) {
  switch (kind) {
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
    case Kind::kStorage:
      return "Storage";
    case Kind::kTensor:
      return "Tensor";
  }
  return "?";
}

absl::StatusOr<PyRef> Unpickle(absl::string_view data,
                               absl::string_view source) {
  return Unpickler(data, source).Run();
}

}  // namespace verl::ckpt
