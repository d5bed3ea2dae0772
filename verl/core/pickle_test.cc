// File: verl/core/pickle_test.cc
//
// The restricted unpickler against Python's own pickle (an independent
// writer) for protocols 0-5, memo sharing, dict key semantics, the int range,
// hooks, refusal of classes, and a table of malformed pickles that must give
// DataLoss errors with the byte offset, never a crash.
#include "verl/core/pickle.h"

#include <map>
#include <random>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::core {
namespace {

using ::verl::core::testing::StatusIs;

using Kind = PyObj::Kind;
using ::testing::HasSubstr;

// Pickles written by Python's own pickle module, by name (one python3 run
// for the whole test: starting it is the slow part).
const std::string& PythonPickle(const std::string& name) {
  static const auto* pickles = [] {
    constexpr char kScript[] = R"(
import collections, fractions, json, pickle
def out(name, data):
    print(name, data.hex())
f = {"filename": "a.py", "line": 3}
v = {"segments": [{"address": 2**45, "blocks": []}], "neg": -70000,
     "ints": [0, 255, 256, 65535, -1, -2**31, 2**31, -2**63, 2**63 - 1,
              2**64 - 1],
     "x": 0.25, "tiny": -1.5e-300, "t": (1, "b"), "n": None,
     "flags": [True, False], "fr": [f, f], "long": list(range(1500)),
     "s": "caf\u00e9 \u20ac", "empty": {}, "el": []}
for p in range(1, 6):
    out("v%d" % p, pickle.dumps(v, protocol=p))
out("v_json", json.dumps(v).encode())
out("p0", pickle.dumps([1, -2**40, 2.5, None, True, False, [3], (4,)],
                       protocol=0))
b = bytes([0, 65, 127, 128, 200, 255])
out("bytes2", pickle.dumps(b, protocol=2))
out("bytes3", pickle.dumps(b, protocol=3))
d = {"k": 1}
out("memo", pickle.dumps([d, d, {"inner": d}], protocol=4))
out("od", pickle.dumps(collections.OrderedDict([("z", 1), ("a", 2)]),
                       protocol=2))
out("fraction", pickle.dumps({"x": fractions.Fraction(1, 3)}, protocol=2))
out("set", pickle.dumps({1, 2}, protocol=4))
out("mixed", pickle.dumps({"a": [1, 2.5, "x" * 40, (None, True)],
                           "b": {"c": -7}}, protocol=4))
)";
    const std::string script = testing::FreshTestDir("pickle_gen.py");
    EXPECT_TRUE(WriteFileAtomic(script, kScript).ok());
    int rc = -1;
    const std::string out = testing::RunAndCapture("python3 " + script, &rc);
    EXPECT_EQ(rc, 0) << out;
    auto* map = new std::map<std::string, std::string>();
    for (absl::string_view line :
         absl::StrSplit(out, '\n', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv =
          absl::StrSplit(line, absl::MaxSplits(' ', 1));
      (*map)[kv.first] = absl::HexStringToBytes(kv.second);
    }
    return map;
  }();
  auto it = pickles->find(name);
  EXPECT_NE(it, pickles->end()) << name;
  static const std::string* empty = new std::string();
  return it == pickles->end() ? *empty : it->second;
}

// A byte string literal, embedded NULs included.
template <size_t N>
std::string Bytes(const char (&s)[N]) {
  return std::string(s, N - 1);
}

std::string Hex(const std::string& bytes) {
  return absl::BytesToHexString(bytes);
}

TEST(PickleTest, ReadsPythonPicklesOfEveryProtocol) {
  // Line 2p: pickle.dumps(v, p); line 2p+1: json.dumps(v) (the expectation,
  // tuples as lists).
  for (int p = 1; p <= 5; ++p) {
    const std::string& pickle = PythonPickle(absl::StrCat("v", p));
    auto got = ReadPickle(pickle, absl::StrCat("proto", p));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, nlohmann::json::parse(PythonPickle("v_json")))
        << "protocol " << p;
    EXPECT_EQ((*got)["ints"][9].get<uint64_t>(), ~uint64_t{0});
  }
}

TEST(PickleTest, ReadsProtocolZeroTextOpcodes) {
  // Protocol 0 spells ints, floats, bools and memo ids as text lines.
  auto top = Unpickle(PythonPickle("p0"), "p0");
  ASSERT_TRUE(top.ok()) << top.status();
  auto json = PyToJson(**top, "p0");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json,
            nlohmann::json::parse(
                "[1, -1099511627776, 2.5, null, true, false, [3], [4]]"));
  EXPECT_EQ((*top)->items[4]->kind, Kind::kBool);
  EXPECT_EQ((*top)->items[7]->kind, Kind::kTuple);
}

TEST(PickleTest, BytesOfProtocolTwoAndThree) {
  // Protocol 2 has no bytes opcode: _codecs.encode(latin-1 text, "latin1").
  for (const char* name : {"bytes2", "bytes3"}) {
    const std::string& pickle = PythonPickle(name);
    auto top = Unpickle(pickle, "bytes");
    ASSERT_TRUE(top.ok()) << top.status();
    EXPECT_EQ((*top)->kind, Kind::kBytes);
    EXPECT_EQ(Hex((*top)->s), "00417f80c8ff");
  }
}

TEST(PickleTest, MemoSharesObjectsFilledAfterTheirPut) {
  auto top = Unpickle(PythonPickle("memo"), "memo");
  ASSERT_TRUE(top.ok()) << top.status();
  const auto& items = (*top)->items;
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].get(), items[1].get());
  EXPECT_EQ(items[2]->items[1].get(), items[0].get());
  EXPECT_EQ(items[0]->items.size(), 2u);  // filled through every reference
}

TEST(PickleTest, RepeatedDictKeysKeepTheFirstPositionAndLastValue) {
  // {'a': 1, 'b': 3, 'a': 2} built with MARK ... DICT, as Python would.
  const std::string pickle = Bytes(
      "\x80\x02(X\x01\x00\x00\x00"
      "a"
      "K\x01X\x01\x00\x00\x00"
      "b"
      "K\x03X\x01\x00\x00\x00"
      "a"
      "K\x02"
      "d.");
  auto top = Unpickle(pickle, "dup");
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ((*top)->items.size(), 4u);
  EXPECT_EQ((*top)->items[0]->s, "a");
  EXPECT_EQ((*top)->items[1]->i, 2);
  EXPECT_EQ((*top)->items[2]->s, "b");
  EXPECT_EQ((*top)->items[3]->i, 3);
}

TEST(PickleTest, OrderedDictIsADict) {
  // OrderedDict pickles its items through SETITEMS after the call.
  auto top = Unpickle(PythonPickle("od"), "od");
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ((*top)->kind, Kind::kDict);
  ASSERT_EQ((*top)->items.size(), 4u);
  EXPECT_EQ((*top)->items[0]->s, "z");
  EXPECT_EQ((*top)->items[2]->s, "a");
}

TEST(PickleTest, RefusesClassesNamingThem) {
  auto fraction = Unpickle(PythonPickle("fraction"), "f.pkl");
  EXPECT_EQ(fraction.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fraction.status().message(),
              HasSubstr("f.pkl: holds an object of class fractions.Fraction"));
  auto set = Unpickle(PythonPickle("set"), "s.pkl");
  EXPECT_EQ(set.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(set.status().message(), HasSubstr("unsupported opcode 0x8f"));
  // GLOBAL os.system called with ("ls",): refused, never run.
  auto call = Unpickle(Bytes("\x80\x02"
                             "cos\nsystem\nX\x02\x00\x00\x00"
                             "ls\x85R."),
                       "evil");
  EXPECT_EQ(call.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(call.status().message(), HasSubstr("class os.system"));
  // A persistent id and a BUILD need hooks.
  auto pid = Unpickle(Bytes("\x80\x02K\x01Q."), "");
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pid.status().message(), HasSubstr("persistent id (Int)"));
  auto build = Unpickle(Bytes("\x80\x02}K\x01"
                              "b."),
                        "");
  EXPECT_EQ(build.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(build.status().message(),
              HasSubstr("state of a GenericDict (BUILD)"));
}

// Hooks that turn `point.Point(x, y)` into an object, persistent ids into
// strings, and refuse malformed points as DataLoss.
struct Point : PyExtension {
  int64_t x = 0, y = 0;
};
class PointHooks : public PickleHooks {
 public:
  absl::StatusOr<PyRef> Call(const std::string& callable,
                             const std::vector<PyRef>& args) override {
    if (callable != "point.Point") return PickleHooks::Call(callable, args);
    if (args.size() != 2 || args[0]->kind != Kind::kInt) {
      return absl::DataLossError("bad Point arguments");
    }
    auto p = std::make_shared<Point>();
    p->x = args[0]->i;
    p->y = args[1]->i;
    PyRef o = MakePyObj(Kind::kObject);
    o->s = "Point";
    o->ext = p;
    return o;
  }
  absl::StatusOr<PyRef> PersistentLoad(const PyRef& pid) override {
    PyRef o = MakePyObj(Kind::kStr);
    o->s = "pid:" + pid->s;
    return o;
  }
};

TEST(PickleTest, HooksBuildObjectsAndTheirErrorsNameTheSource) {
  PointHooks hooks;
  // [Point(3, -4), persistent "p7"] with GLOBAL + TUPLE2 + REDUCE, PERSID.
  const std::string good = Bytes(
      "\x80\x02]"
      "cpoint\nPoint\nK\x03J\xfc\xff\xff\xff\x86R"
      "aPp7\na.");
  auto top = Unpickle(good, "pts", &hooks);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ((*top)->items.size(), 2u);
  const Point* p = (*top)->items[0]->As<Point>();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->x, 3);
  EXPECT_EQ(p->y, -4);
  EXPECT_EQ(PyTypeName(*(*top)->items[0]), "Point");
  EXPECT_EQ((*top)->items[1]->s, "pid:p7");
  EXPECT_EQ((*top)->items[1]->As<Point>(), nullptr);
  auto json = PyToJson(**top, "pts");
  EXPECT_THAT(json.status().message(), HasSubstr("pts[0]: holds Point"));

  // Point("a", 1): the hook's DataLoss gets the byte offset of the REDUCE.
  const std::string bad = Bytes(
      "\x80\x02"
      "cpoint\nPoint\nX\x01\x00\x00\x00"
      "aK\x01\x86R.");
  auto err = Unpickle(bad, "pts", &hooks);
  EXPECT_EQ(err.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(err.status().message(),
              HasSubstr("pts: malformed pickle at byte 25: bad Point"));
  // A class the hooks do not know falls back to the default refusal.
  auto other = Unpickle(
      "\x80\x02"
      "cos\ngetcwd\n)R.",
      "pts", &hooks);
  EXPECT_THAT(other.status().message(),
              HasSubstr("pts: holds an object of class os.getcwd"));
}

TEST(PickleTest, IntRange) {
  // LONG1 with 9 bytes is uint64 when the top byte is 0; wider is an error.
  auto max = Unpickle(Bytes("\x80\x02\x8a\x09\xff\xff\xff\xff\xff\xff"
                            "\xff\xff\x00."),
                      "");
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_TRUE((*max)->is_uint);
  EXPECT_EQ(static_cast<uint64_t>((*max)->i), ~uint64_t{0});
  EXPECT_EQ(PyToJson(**max, "")->get<uint64_t>(), ~uint64_t{0});
  auto wide = Unpickle(Bytes("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00"
                             "\x00\x00\x01."),
                       "w");
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(wide.status().message(), HasSubstr("outside int64/uint64"));
  auto min =
      Unpickle(Bytes("\x80\x02\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."), "");
  ASSERT_TRUE(min.ok()) << min.status();
  EXPECT_EQ((*min)->i, INT64_MIN);
  EXPECT_FALSE((*min)->is_uint);
}

TEST(PickleTest, MalformedPicklesAreDataLossWithTheOffset) {
  struct Case {
    std::string pickle, message;
  };
  const std::vector<Case> cases = {
      {"", "byte 0: unexpected end of data"},
      {Bytes("\x80\x09."), "unsupported pickle protocol"},
      {Bytes("\x80\x02\xff"), "byte 2: unsupported opcode 0xff"},
      {"\x80\x02.", "stack underflow"},
      {Bytes("\x80\x02K\x01t."), "no mark"},
      {Bytes("\x80\x02h\x05."), "unknown memo 5"},
      {Bytes("\x80\x02K\x01r\xff\xff\xff\x7f."), "memo id out of range"},
      {Bytes("\x80\x02X\xff\x00\x00\x00"
             "ab."),
       "string runs past the end"},
      {Bytes("\x80\x02K\x00K\x01K\x02s."), "SETITEM on Int, not a dict"},
      {Bytes("\x80\x02K\x01K\x02"
             "a."),
       "APPEND to non-list"},
      {"\x80\x02"
       "cos\nsystem",
       "unterminated line"},
      {"\x80\x02"
       "K\x01)R.",
       "call of a Int object"},
      {"I12x\n.", "bad INT"},
  };
  for (const Case& c : cases) {
    auto top = Unpickle(c.pickle, "m.pkl");
    EXPECT_EQ(top.status().code(), absl::StatusCode::kDataLoss)
        << Hex(c.pickle) << ": " << top.status();
    EXPECT_THAT(top.status().message(), HasSubstr("m.pkl: malformed pickle"))
        << Hex(c.pickle);
    EXPECT_THAT(top.status().message(), HasSubstr(c.message)) << Hex(c.pickle);
  }
}

TEST(PickleTest, EveryPrefixAndRandomMutationIsSafe) {
  const std::string& good = PythonPickle("mixed");
  ASSERT_TRUE(Unpickle(good, "").ok());
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_THAT(
        Unpickle(good.substr(0, n), ""),
        StatusIs(absl::StatusCode::kDataLoss, "malformed pickle at byte"))
        << n;
  }
  std::mt19937 rng(11);
  int ok = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string p = good;
    for (int k = 0; k < 3; ++k) p[rng() % p.size()] = static_cast<char>(rng());
    auto top = Unpickle(p, "");
    if (top.ok()) {
      ++ok;
      (void)PyToJson(**top, "");  // whatever parses converts or errors
    }
  }
  EXPECT_LT(ok, 3000);
}

TEST(PickleTest, JsonNeedsStringKeysAndPlainValues) {
  auto top = Unpickle(Bytes("\x80\x02}(X\x01\x00\x00\x00"
                            "a}K\x01K\x02su."),
                      "");
  ASSERT_TRUE(top.ok()) << top.status();
  auto json = PyToJson(**top, "root");
  EXPECT_EQ(json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(json.status().message(),
              HasSubstr("root.a: dict key of type Int, expected a string"));
  EXPECT_EQ(ReadPickleFile("/nonexistent/x.pickle").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace verl::core
