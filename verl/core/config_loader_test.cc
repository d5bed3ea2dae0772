// File: verl/core/config_loader_test.cc
#include "verl/core/config_loader.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "verl/core/config_loader_test.pb.h"
#include "verl/core/test_util.h"

namespace verl::core {
namespace {

using ::verl::core::testing::StatusIs;

using ::google::protobuf::util::MessageDifferencer;
using testing::Color;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TestConfig;

TestConfig Defaults() {
  TestConfig c;
  MaterializeDefaults(&c);
  return c;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(VerlInheritTest, SetsOnlyNullFieldsAndIsOneStatement) {
  testing::Inner set, null;
  set.set_steps(5);
  VERL_INHERIT(set, steps, 9);
  VERL_INHERIT(null, steps, 9);
  EXPECT_EQ(set.steps(), 5);
  EXPECT_EQ(null.steps(), 9);
  // An unbraced `if` in the macro captured this `else`: it ran because
  // `steps` was already set, although the outer condition was true.
  bool else_ran = false;
  if (set.has_steps())
    VERL_INHERIT(set, steps, 9);
  else
    else_ran = true;
  EXPECT_FALSE(else_ran);
}

TEST(MaterializeDefaultsTest, ExplicitDefaultsPresentNullsAbsent) {
  TestConfig c = Defaults();
  EXPECT_TRUE(c.has_title());
  EXPECT_TRUE(c.has_size());
  EXPECT_TRUE(c.has_inner());
  EXPECT_TRUE(c.inner().has_rate());
  EXPECT_TRUE(c.inner().has_color());
  EXPECT_TRUE(c.inner().leaf().has_count());
  EXPECT_FALSE(c.inner().has_steps());         // no default: null
  EXPECT_FALSE(c.inner().leaf().has_scale());  // no default: null
  EXPECT_EQ(c.inner().leaf().name(), "leaf");
  EXPECT_EQ(c.ids_size(), 0);
}

TEST(ApplyOverrideTest, EachScalarType) {
  TestConfig c = Defaults();
  ASSERT_TRUE(ApplyOverride("title=world", &c).ok());
  ASSERT_TRUE(ApplyOverride("size=-3", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.rate=1e-6", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.steps=12345678901", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.flag=False", &c).ok());
  ASSERT_TRUE(ApplyOverride("other.flag=false", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.color=blue", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.leaf.count=9", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.leaf.scale=2.5", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.leaf.name='a b=c'", &c).ok());
  EXPECT_EQ(c.title(), "world");
  EXPECT_EQ(c.size(), -3);
  EXPECT_DOUBLE_EQ(c.inner().rate(), 1e-6);
  EXPECT_EQ(c.inner().steps(), 12345678901LL);
  EXPECT_FALSE(c.inner().flag());
  EXPECT_FALSE(c.other().flag());
  EXPECT_EQ(c.inner().color(), Color::blue);
  EXPECT_EQ(c.inner().leaf().count(), 9u);
  EXPECT_FLOAT_EQ(c.inner().leaf().scale(), 2.5f);
  EXPECT_EQ(c.inner().leaf().name(), "a b=c");
  ASSERT_TRUE(ApplyOverride("inner.flag=True", &c).ok());
  EXPECT_TRUE(c.inner().flag());
}

TEST(ApplyOverrideTest, ListsReplaceAndAcceptScalarsAndEmpty) {
  TestConfig c = Defaults();
  c.add_ids(100);
  ASSERT_TRUE(ApplyOverride("ids=[1, 2,3]", &c).ok());
  EXPECT_THAT(c.ids(), ElementsAre(1, 2, 3));
  ASSERT_TRUE(ApplyOverride("inner.tags=[console,'a,b', \"jsonl\"]", &c).ok());
  EXPECT_THAT(c.inner().tags(), ElementsAre("console", "a,b", "jsonl"));
  ASSERT_TRUE(ApplyOverride("inner.tags=solo", &c).ok());
  EXPECT_THAT(c.inner().tags(), ElementsAre("solo"));
  ASSERT_TRUE(ApplyOverride("ids=[]", &c).ok());
  EXPECT_EQ(c.ids_size(), 0);
  // A bad element leaves the list untouched.
  ASSERT_TRUE(ApplyOverride("ids=[4]", &c).ok());
  absl::Status s = ApplyOverride("ids=[5,x]", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'ids'"));
  EXPECT_THAT(s.message(), HasSubstr("bad element 'x'"));
  EXPECT_THAT(c.ids(), ElementsAre(4));
}

TEST(ApplyOverrideTest, MapEntries) {
  TestConfig c = Defaults();
  ASSERT_TRUE(ApplyOverride("inner.extra.attn=sdpa", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.extra.rope.factor=2", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.extra.attn=eager", &c).ok());
  EXPECT_EQ(c.inner().extra().size(), 2u);
  EXPECT_EQ(c.inner().extra().at("attn"), "eager");
  EXPECT_EQ(c.inner().extra().at("rope.factor"), "2");
  ASSERT_TRUE(ApplyOverride("inner.extra.attn=null", &c).ok());
  EXPECT_EQ(c.inner().extra().count("attn"), 0u);
  ASSERT_TRUE(ApplyOverride("inner.extra={}", &c).ok());
  EXPECT_TRUE(c.inner().extra().empty());
}

TEST(ApplyOverrideTest, NullClearsScalarsListsAndSections) {
  TestConfig c = Defaults();
  ASSERT_TRUE(ApplyOverride("inner.steps=5", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.steps=null", &c).ok());
  EXPECT_FALSE(c.inner().has_steps());
  ASSERT_TRUE(ApplyOverride("inner.rate=null", &c).ok());
  EXPECT_FALSE(c.inner().has_rate());
  c.add_ids(1);
  ASSERT_TRUE(ApplyOverride("ids=null", &c).ok());
  EXPECT_EQ(c.ids_size(), 0);
  ASSERT_TRUE(ApplyOverride("other=null", &c).ok());
  EXPECT_FALSE(c.has_other());
  // A string field can still hold the text "null" when quoted.
  ASSERT_TRUE(ApplyOverride("title='null'", &c).ok());
  EXPECT_EQ(c.title(), "null");
}

TEST(ApplyOverrideTest, HydraPrefixes) {
  TestConfig c = Defaults();
  ASSERT_TRUE(ApplyOverride("+inner.extra.new=1", &c).ok());
  ASSERT_TRUE(ApplyOverride("++size=8", &c).ok());
  EXPECT_EQ(c.inner().extra().at("new"), "1");
  EXPECT_EQ(c.size(), 8);
  ASSERT_TRUE(ApplyOverride("~size", &c).ok());
  EXPECT_FALSE(c.has_size());
  ASSERT_TRUE(ApplyOverride("~inner.rate=0.1", &c).ok());
  EXPECT_FALSE(c.inner().has_rate());
  EXPECT_THAT(std::string(ApplyOverride("+inner.raet=1", &c).message()),
              HasSubstr("unknown config key 'inner.raet'"));
}

TEST(ApplyOverrideTest, UnknownKeySuggestsNearest) {
  TestConfig c = Defaults();
  absl::Status s = ApplyOverride("inner.raet=1", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "unknown config key 'inner.raet'; did you mean 'inner.rate'?");
  // Leading sections left out: the key that ends with the given path.
  s = ApplyOverride("leaf.count=1", &c);
  EXPECT_THAT(s.message(), HasSubstr("did you mean 'inner.leaf.count'?"));
  // Descending into a scalar is an unknown key too.
  s = ApplyOverride("size.x=1", &c);
  EXPECT_THAT(s.message(), HasSubstr("unknown config key 'size.x'"));
}

TEST(ApplyOverrideTest, BadValuesNameKeyAndExpectedType) {
  TestConfig c = Defaults();
  struct Case {
    std::string arg;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"size=abc",
       "bad value 'abc' for config key 'size': expected an integer (int32)"},
      {"size=3000000000", "expected an integer (int32)"},
      {"size=1.5", "expected an integer (int32)"},
      {"inner.rate=fast", "expected a number (double)"},
      {"inner.flag=yes", "expected a bool (true/false)"},
      {"inner.flag=1", "expected a bool (true/false)"},
      {"inner.color=purple", "expected one of: red, green, blue"},
      {"inner.leaf.count=-1", "expected an integer (uint32)"},
      {"inner=3", "'inner' is a section"},
      {"inner.extra=x", "'inner.extra' is a map"},
      {"ids=[1,2", "expected a list"},
      {"leaves=[]", "list of sections"},
      {"size", "is not of the form key=value"},
      {"=3", "is not of the form key=value"},
  };
  for (const Case& k : cases) {
    absl::Status s = ApplyOverride(k.arg, &c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.arg;
    EXPECT_THAT(std::string(s.message()), HasSubstr(k.expected)) << k.arg;
  }
  EXPECT_EQ(c.size(), 7);  // nothing was changed
}

TEST(MergeTextProtoTest, MergesScalarsAndReplacesLists) {
  TestConfig c = Defaults();
  c.add_ids(1);
  c.add_ids(2);
  (*c.mutable_inner()->mutable_extra())["keep"] = "no";
  c.mutable_other()->add_tags("untouched");
  ASSERT_TRUE(MergeTextProto(R"pb(
                               ids: [ 7 ]
                               inner {
                                 rate: 0.25
                                 color: red
                                 extra { key: "a" value: "b" }
                               }
                             )pb",
                             "test", &c)
                  .ok());
  EXPECT_THAT(c.ids(), ElementsAre(7));
  EXPECT_DOUBLE_EQ(c.inner().rate(), 0.25);
  EXPECT_EQ(c.inner().color(), Color::red);
  EXPECT_TRUE(c.inner().flag());  // kept from defaults
  EXPECT_EQ(c.inner().extra().size(), 1u);
  EXPECT_EQ(c.inner().extra().at("a"), "b");
  EXPECT_THAT(c.other().tags(), ElementsAre("untouched"));
  EXPECT_EQ(c.title(), "hello");
}

TEST(MergeTextProtoTest, MalformedInputsReportFileLineColumn) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"title: \"x\"\nsize: 3\nbogus: 1\n",
       "cfg.textproto:3:6: Message type \"verl.core.testing.TestConfig\" has "
       "no field named \"bogus\""},
      {"inner {\n  rat: 1\n}\n", "cfg.textproto:2:6:"},
      {"inner {\n  rat: 1\n}\n", "did you mean 'rate'?"},  // Inner: 2 places
      {"inner { leaf { nme: \"x\" } }", "did you mean 'name'?"},
      {"titl: \"x\"", "did you mean 'title'?"},
      {"size: \"abc\"\n", "cfg.textproto:1:7:"},
      {"size: 1\nsize: 2\n", "cfg.textproto:2:"},
      {"inner { rate: 1\n", "cfg.textproto:2:"},
      {"inner { color: purple }", "cfg.textproto:1:"},
      {"inner { flag: maybe }", "cfg.textproto:1:"},
      {"title: 'unterminated\n", "cfg.textproto:1:"},
      {"ids: [1, 2,]", "cfg.textproto:1:"},
      {"}", "cfg.textproto:1:1:"},
  };
  for (const Case& k : cases) {
    TestConfig c = Defaults();
    absl::Status s = MergeTextProto(k.text, "cfg.textproto", &c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.text;
    EXPECT_THAT(std::string(s.message()), HasSubstr(k.expected)) << k.text;
  }
}

TEST(MergeTextProtoTest, NullDirectives) {
  TestConfig c = Defaults();
  ASSERT_TRUE(MergeTextProto("size: 3\n  #@null inner.rate\n#@null other\n",
                             "n.textproto", &c)
                  .ok());
  EXPECT_EQ(c.size(), 3);
  EXPECT_FALSE(c.inner().has_rate());
  EXPECT_FALSE(c.has_other());
  absl::Status s =
      MergeTextProto("size: 3\n#@null inner.rat\n", "n.textproto", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("n.textproto:2: unknown config key 'inner.rat'; did "
                        "you mean 'inner.rate'?"));
}

TEST(LoadConfigTest, DefaultsThenFileThenOverrides) {
  const std::string path =
      WriteTemp("load.textproto", "size: 11\ninner { tags: [\"f\"] }\n");
  ConfigSources sources;
  sources.defaults_text =
      "size: 9\ntitle: \"d\"\ninner { tags: [\"x\", \"y\"] }";
  sources.config_file = path;
  sources.overrides = {"title=o", "inner.steps=4"};
  TestConfig c;
  ASSERT_TRUE(LoadConfig(sources, &c).ok());
  EXPECT_EQ(c.size(), 11);                          // file over defaults
  EXPECT_EQ(c.title(), "o");                        // override over defaults
  EXPECT_THAT(c.inner().tags(), ElementsAre("f"));  // file list replaces
  EXPECT_EQ(c.inner().steps(), 4);
  EXPECT_DOUBLE_EQ(c.inner().rate(), 0.5);  // proto default

  sources.config_file = "/nonexistent/x.textproto";
  EXPECT_THAT(LoadConfig(sources, &c).message(),
              HasSubstr("cannot read config file '/nonexistent/x.textproto'"));
}

TEST(PrintConfigTest, RoundTrips) {
  TestConfig c = Defaults();
  ASSERT_TRUE(ApplyOverride("ids=[3,4]", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.extra.k=v", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.rate=null", &c).ok());
  ASSERT_TRUE(ApplyOverride("other=null", &c).ok());
  const std::string text = PrintConfig(c);
  EXPECT_THAT(text, HasSubstr("\n#@null inner.rate\n#@null other\n"));
  EXPECT_THAT(text, HasSubstr("ids: [3, 4]"));
  EXPECT_THAT(text, HasSubstr("color: green"));
  TestConfig back = Defaults();
  ASSERT_TRUE(MergeTextProto(text, "printed", &back).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(back, c));
}

TEST(GetConfigValueTest, SpellsValuesAsOverridesWould) {
  TestConfig c = Defaults();
  ASSERT_TRUE(ApplyOverride("ids=[3,4]", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.extra.b=2", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.extra.a=1", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.rate=1e-6", &c).ok());
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"title", "hello"},
      {"size", "7"},
      {"ids", "[3, 4]"},
      {"inner.rate", "1e-06"},
      {"inner.steps", "null"},
      {"inner.flag", "true"},
      {"inner.color", "green"},
      {"inner.tags", "[]"},
      {"inner.extra", "{a: 1, b: 2}"},
      {"inner.leaf.count", "3"},
      {"other.leaf.scale", "null"},
  };
  for (const auto& [key, value] : expected) {
    absl::StatusOr<std::string> got = GetConfigValue(c, key);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status();
    EXPECT_EQ(*got, value) << key;
    // Feeding the value back as an override is a no-op.
    if (value != "null" && key != "inner.extra") {
      TestConfig copy = c;
      ASSERT_TRUE(ApplyOverride(key + "=" + value, &copy).ok()) << key;
      EXPECT_TRUE(MessageDifferencer::Equals(copy, c)) << key;
    }
  }
  EXPECT_THAT(std::string(GetConfigValue(c, "inner.rat").status().message()),
              HasSubstr("did you mean 'inner.rate'?"));
  EXPECT_THAT(GetConfigValue(c, "size.x"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "unknown config key 'size.x'; did you mean 'size'?"));
}

TEST(FlattenConfigTest, LeavesInFieldOrder) {
  TestConfig c = Defaults();
  ASSERT_TRUE(ApplyOverride("other=null", &c).ok());
  ASSERT_TRUE(ApplyOverride("inner.tags=[a,b]", &c).ok());
  const auto flat = FlattenConfig(c);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"title", "hello"},
      {"size", "7"},
      {"ids", "[]"},
      {"inner.rate", "0.5"},
      {"inner.steps", "null"},
      {"inner.flag", "true"},
      {"inner.color", "green"},
      {"inner.tags", "[a, b]"},
      {"inner.extra", "{}"},
      {"inner.leaf.name", "leaf"},
      {"inner.leaf.count", "3"},
      {"inner.leaf.scale", "null"},
      {"other", "null"},
  };
  EXPECT_EQ(flat, expected);
}

TEST(KeysTest, DottedKeysAndEditDistance) {
  const std::vector<std::string> keys = DottedKeys(*TestConfig::descriptor());
  EXPECT_THAT(keys, ::testing::Contains("inner.leaf.count"));
  EXPECT_THAT(keys, ::testing::Contains("inner.extra.<key>"));
  EXPECT_THAT(keys, ::testing::Contains("other.tags"));
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("same", "same"), 0);
  EXPECT_EQ(NearestKey(*TestConfig::descriptor(), "titel"), "title");
  // Nothing close: no suggestion rather than a misleading one.
  EXPECT_EQ(NearestKey(*TestConfig::descriptor(), "use_mbridge"), "");
  EXPECT_EQ(MaxSuggestionDistance("abc"), 2);
  EXPECT_EQ(MaxSuggestionDistance(std::string(45, 'x')), 4);
}

// All bad overrides of a command line are reported at once; the good ones
// still apply.
TEST(OverrideTest, EveryBadOverrideIsReported) {
  TestConfig c;
  absl::Status s = ApplyOverrides({"titel=a", "title=ok", "inner.leaf.count=x",
                                   "inner.megatron.tp=2", "zzzzzzzz=1"},
                                  &c);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> lines = absl::StrSplit(s.message(), '\n');
  ASSERT_EQ(lines.size(), 4u) << s;
  EXPECT_EQ(lines[0], "unknown config key 'titel'; did you mean 'title'?");
  EXPECT_THAT(lines[1], HasSubstr("bad value 'x' for config key"));
  EXPECT_THAT(lines[2], HasSubstr("not one of the megatron.* keys"));
  EXPECT_EQ(lines[3],
            "unknown config key 'zzzzzzzz' (no similar key; --print_config "
            "lists them all)");
  EXPECT_EQ(c.title(), "ok");
}

}  // namespace
}  // namespace verl::core
