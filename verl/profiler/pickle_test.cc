// File: verl/profiler/pickle_test.cc
// PickleWriter output is read back by Python's pickle (an independent
// reader), and ReadPickle reads what Python's pickle writes.
#include "verl/core/pickle.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/profiler/pickle_writer.h"

namespace verl::profiler {
namespace {

using ::verl::core::testing::StatusIs;

using nlohmann::json;

std::string TmpDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

// Runs a python3 snippet; returns its exit status.
int Python(const std::string& code) {
  const std::string script = TmpDir() + "/snippet.py";
  EXPECT_TRUE(core::WriteFileAtomic(script, code).ok());
  return std::system(("python3 " + script).c_str());
}

// A writer exercising every value kind, batching and the memo.
std::string WriteSample() {
  PickleWriter w;
  w.BeginDict();
  w.String("ints");
  w.BeginList();
  for (int64_t v : {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{65535},
                    int64_t{65536}, int64_t{-1}, int64_t{-2147483648LL},
                    int64_t{2147483648LL}, int64_t{-9000000000LL},
                    int64_t{140737488355328LL}, INT64_MAX, INT64_MIN})
    w.Int(v);
  w.UInt(18446744073709551615ULL);
  w.EndList();
  w.String("float");
  w.Float(-1.5e-3);
  w.String("flags");
  w.BeginList();
  w.Bool(true);
  w.Bool(false);
  w.None();
  w.EndList();
  w.String("text \xc3\xa9");
  w.String("caf\xc3\xa9 \xe2\x82\xac");
  w.String("big");
  w.BeginList();
  for (int i = 0; i < 2500; ++i) w.Int(i);
  w.EndList();
  w.String("bigdict");
  w.BeginDict();
  for (int i = 0; i < 1200; ++i) {
    w.String("k" + std::to_string(i));
    w.Int(i * 2);
  }
  w.EndDict();
  w.String("shared");
  w.BeginList();
  w.BeginDict();
  w.String("name");
  w.String("frame");
  w.EndDict();
  const uint32_t id = w.Memoize();
  w.Get(id);
  w.Get(id);
  w.EndList();
  w.String("empty");
  w.BeginDict();
  w.EndDict();
  w.EndDict();
  return w.Finish();
}

TEST(PickleTest, PythonReadsWriterOutput) {
  const std::string path = TmpDir() + "/sample.pickle";
  ASSERT_TRUE(core::WriteFileAtomic(path, WriteSample()).ok());
  const int rc = Python(R"(
import pickle, sys
d = pickle.load(open(')" +
                        path + R"(', 'rb'))
ok = (d['ints'] == [0, 255, 256, 65535, 65536, -1, -2**31, 2**31, -9000000000,
                   2**47, 2**63 - 1, -2**63, 2**64 - 1]
      and d['float'] == -1.5e-3 and d['flags'] == [True, False, None]
      and d['text \u00e9'] == 'caf\u00e9 \u20ac'
      and d['big'] == list(range(2500))
      and d['bigdict'] == {'k%d' % i: 2 * i for i in range(1200)}
      and d['shared'] == [{'name': 'frame'}] * 3
      and d['shared'][0] is d['shared'][2] and d['empty'] == {}
      and len(d) == 8)
sys.exit(0 if ok else 1)
)");
  EXPECT_EQ(rc, 0);
}

TEST(PickleTest, ReaderRoundTripsWriterOutput) {
  auto d = core::ReadPickle(WriteSample());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)["ints"][1], 255);
  EXPECT_EQ((*d)["ints"][6], -2147483648LL);
  EXPECT_EQ((*d)["ints"][8], -9000000000LL);
  EXPECT_EQ((*d)["ints"][10], INT64_MAX);
  EXPECT_EQ((*d)["ints"][11], INT64_MIN);
  EXPECT_EQ((*d)["ints"][12].get<uint64_t>(), 18446744073709551615ULL);
  EXPECT_DOUBLE_EQ((*d)["float"].get<double>(), -1.5e-3);
  EXPECT_EQ((*d)["flags"], json::parse("[true,false,null]"));
  EXPECT_EQ((*d)["big"].size(), 2500u);
  EXPECT_EQ((*d)["big"][2499], 2499);
  EXPECT_EQ((*d)["bigdict"].size(), 1200u);
  EXPECT_EQ((*d)["bigdict"]["k1199"], 2398);
  EXPECT_EQ((*d)["shared"][2]["name"], "frame");
}

TEST(PickleTest, ReaderReadsPythonPickles) {
  for (int proto : {2, 4}) {
    const std::string path =
        TmpDir() + "/py" + std::to_string(proto) + ".pickle";
    ASSERT_EQ(Python("import pickle\nf = {'filename': 'a.py', 'line': 3}\n"
                     "d = {'segments': [{'address': 2**45, 'blocks': []}], "
                     "'neg': -70000, 'huge': -2**62, 'x': 0.25, 't': (1, "
                     "'b'), 'n': None, 'flags': [True, False], 'fr': [f, f], "
                     "'long': list(range(1500)), 's': 'caf\\u00e9'}\n"
                     "open('" +
                     path +
                     "', 'wb').write(pickle.dumps(d, "
                     "protocol=" +
                     std::to_string(proto) + "))\n"),
              0);
    auto d = core::ReadPickleFile(path);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ((*d)["segments"][0]["address"], int64_t{1} << 45);
    EXPECT_EQ((*d)["neg"], -70000);
    EXPECT_EQ((*d)["huge"], -(int64_t{1} << 62));
    EXPECT_DOUBLE_EQ((*d)["x"].get<double>(), 0.25);
    EXPECT_EQ((*d)["t"], json::parse("[1, \"b\"]"));
    EXPECT_TRUE((*d)["n"].is_null());
    EXPECT_EQ((*d)["fr"][1]["line"], 3);
    EXPECT_EQ((*d)["long"].size(), 1500u);
    EXPECT_EQ((*d)["s"], "caf\xc3\xa9");
  }
}

TEST(PickleTest, ReaderRejectsBadInput) {
  const std::string good = WriteSample();
  auto truncated =
      core::ReadPickle(good.substr(0, good.size() / 2), "x.pickle");
  ASSERT_THAT(truncated, StatusIs(absl::StatusCode::kDataLoss,
                                  "x.pickle: malformed pickle"));
  EXPECT_NE(truncated.status().message().find("x.pickle"), std::string::npos);
  EXPECT_THAT(core::ReadPickle(std::string("\x80\x02") + "c" + "os\nsystem\n."),
              StatusIs(absl::StatusCode::kInvalidArgument, "holds Global"));
  EXPECT_THAT(core::ReadPickle(""), StatusIs(absl::StatusCode::kDataLoss,
                                             "byte 0: unexpected end of data"));
  EXPECT_THAT(core::ReadPickleFile("/nonexistent/x.pickle"),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/x.pickle"));
}

}  // namespace
}  // namespace verl::profiler
