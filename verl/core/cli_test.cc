// File: verl/core/cli_test.cc
#include "verl/core/cli.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

ABSL_FLAG(int, cli_test_number, 0, "An absl flag of this test.");

namespace verl::core {
namespace {

using ::verl::core::testing::StatusIs;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

TEST(ExpandFlagfilesTest, NestedCommentsBlanksAndCommaLists) {
  const std::string inner = WriteFile("inner.flags",
                                      "# inner comment\n"
                                      "--trainer.total_epochs=3\n"
                                      "   --cli_test_number=5   \n");
  const std::string other = WriteFile("other.flags", "--b.c=1\n");
  const std::string outer =
      WriteFile("outer.flags", "\n# comment\n  --a.b=x y\n--flagfile=" + inner +
                                   "\n\n--after=1\n");
  auto expanded = ExpandFlagfiles(
      {"prog", "--first", "--flagfile=" + outer + "," + other, "last"});
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  EXPECT_THAT(
      *expanded,
      ElementsAre("prog", "--first", "--a.b=x y", "--trainer.total_epochs=3",
                  "--cli_test_number=5", "--after=1", "--b.c=1", "last"));
  // Space-separated value form, and everything after "--" is left alone.
  expanded =
      ExpandFlagfiles({"prog", "--flagfile", other, "--", "--flagfile=x"});
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  EXPECT_THAT(*expanded, ElementsAre("prog", "--b.c=1", "--", "--flagfile=x"));
}

TEST(ExpandFlagfilesTest, MalformedFlagfiles) {
  const std::string self = TempPath("self.flags");
  std::ofstream(self) << "--flagfile=" << self << "\n";
  struct Case {
    std::string text;  // empty: use `self`
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"--ok=1\nkey.x=1\n", ":2: flagfile lines must start with '-'"},
      {"--\n", ":1: flagfile lines must start with '-'"},
      {"positional\n", "'positional'"},
      {"--flagfile=/nonexistent/f.flags\n",
       "cannot read flagfile '/nonexistent/f.flags'"},
      {"--flagfile=\n", "--flagfile needs a file name"},
      {"", "nested more than 16 levels deep"},
  };
  int n = 0;
  for (const Case& k : cases) {
    const std::string path =
        k.text.empty()
            ? self
            : WriteFile("bad" + std::to_string(n++) + ".flags", k.text);
    auto expanded = ExpandFlagfiles({"prog", "--flagfile=" + path});
    // The code differs between cases; each case's message is checked below.
    ASSERT_FALSE(expanded.ok()) << k.text;
    EXPECT_THAT(std::string(expanded.status().message()), HasSubstr(k.expected))
        << k.text;
  }
  EXPECT_THAT(ExpandFlagfiles({"prog", "--flagfile"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--flagfile needs a file name"));
}

TEST(SplitCommandLineTest, OverridesFromFlagsPositionalsAndFlagfiles) {
  const std::string flags =
      WriteFile("split.flags",
                "--actor_rollout_ref.actor.optim.lr=1e-5\n--cli_test_number=1\n"
                "--ulysses_sequence_parallel_size=2\n");
  auto split = SplitCommandLine(
      {"prog", "--config=c.textproto", "algorithm.adv_estimator=grpo",
       "--flagfile=" + flags, "-trainer.logger=[console,jsonl]",
       "use_remove_padding=true", "plain", "+a.x=1", "~b.y", "--",
       "data.seed=1", "--not.an=override"});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_THAT(
      split->overrides,
      ElementsAre("algorithm.adv_estimator=grpo",
                  "actor_rollout_ref.actor.optim.lr=1e-5",
                  "ulysses_sequence_parallel_size=2",
                  "trainer.logger=[console,jsonl]", "use_remove_padding=true",
                  "+a.x=1", "~b.y", "data.seed=1"));
  EXPECT_THAT(split->absl_args,
              ElementsAre("prog", "--config=c.textproto", "--cli_test_number=1",
                          "plain", "--", "--not.an=override"));
  auto missing = SplitCommandLine({"prog", "--trainer.total_epochs"});
  ASSERT_THAT(
      missing,
      StatusIs(absl::StatusCode::kInvalidArgument,
               "config override '--trainer.total_epochs' needs a value"));
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("needs a value"));
}

// Forms verl scripts type: keys with '-' (Hydra allows them, e.g. a map
// entry `capture-range`) and --config-name / --config-path.
TEST(SplitCommandLineTest, HydraFormsFromVerlScripts) {
  auto split = SplitCommandLine(
      {"prog", "a.nsight.capture-range=cudaProfilerApi", "--b.capture-range=x",
       "--config-name=ppo_trainer", "--config-path", "config", "-bad-start=1"});
  ASSERT_TRUE(split.ok()) << split.status();
  // A key=value flag naming no absl flag is an override too.
  EXPECT_THAT(split->overrides,
              ElementsAre("a.nsight.capture-range=cudaProfilerApi",
                          "b.capture-range=x", "bad-start=1"));
  EXPECT_EQ(split->hydra_config_name, "ppo_trainer");
  EXPECT_EQ(split->hydra_config_path, "config");
  EXPECT_THAT(split->absl_args, ElementsAre("prog"));

  CommandLine cl;
  EXPECT_TRUE(CheckHydraConfigName(cl, "ppo_trainer").ok());
  cl.hydra_config_name = "ppo_trainer.yaml";
  EXPECT_TRUE(CheckHydraConfigName(cl, "ppo_trainer").ok());
  cl.hydra_config_name = "ppo_megatron_trainer";
  absl::Status s = CheckHydraConfigName(cl, "ppo_trainer");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("Hydra YAML configs are not read here; the built-in "
                        "config is 'ppo_trainer'"));
  cl.hydra_config_name = "ppo_trainer";
  cl.hydra_config_path = "./config";  // verl's own folder, as its scripts say
  EXPECT_TRUE(CheckHydraConfigName(cl, "ppo_trainer").ok());
}

TEST(ParseCommandLineTest, ConfigFlagOverridesAndAbslFlags) {
  const std::string flags =
      WriteFile("parse.flags", "--config=base.textproto\n--a.b=2\n");
  // Under `bazel run`, relative paths are relative to where bazel ran.
  const std::string dir = TempPath("");
  ASSERT_EQ(setenv("BUILD_WORKING_DIRECTORY", dir.c_str(), 1), 0);
  std::vector<std::string> args = {"prog", "--flagfile=parse.flags",
                                   "--cli_test_number=7", "c.d=[1,2]"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  auto cl = ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config_file, "base.textproto");
  EXPECT_THAT(cl->overrides, ElementsAre("a.b=2", "c.d=[1,2]"));
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_test_number), 7);
  char cwd[4096], expected[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_NE(realpath(dir.c_str(), expected), nullptr);
  EXPECT_STREQ(cwd, expected);
}

}  // namespace
}  // namespace verl::core
