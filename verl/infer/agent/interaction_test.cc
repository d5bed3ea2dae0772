// File: verl/infer/agent/interaction_test.cc
//
// verl's interaction config: names (given or derived from the class name),
// config passed through with the name injected, malformed files refused.
#include "verl/infer/agent/interaction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "verl/core/test_util.h"

namespace verl::infer::agent {
namespace {

using core::testing::StatusIs;

TEST(InteractionConfigTest, VerlGsm8kExample) {
  // verl's examples/sglang_multiturn/config/interaction_config/
  // gsm8k_interaction_config.yaml.
  auto specs = ParseInteractionConfig(R"(interaction:
  - name: "gsm8k"
    class_name: "verl.interactions.gsm8k_interaction.Gsm8kInteraction"
    config: {}
  - class_name: "my.pkg.WeatherInteraction"
    config: {city: "Paris"}
  - class_name: "my.pkg.Quiz"
)",
                                      "cfg.yaml");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].name, "gsm8k");
  EXPECT_EQ((*specs)[1].name, "weather");
  EXPECT_EQ((*specs)[1].config["city"], "Paris");
  EXPECT_EQ((*specs)[1].config["name"], "weather");
  EXPECT_EQ((*specs)[2].name, "quiz");
}

TEST(InteractionConfigTest, MalformedFilesNameTheProblem) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  for (const Case& c : std::vector<Case>{
           {"tools: []",
            "cfg.yaml: expected a mapping with an \"interaction\""},
           {"interaction: [1]", "interaction[0]: expected a mapping"},
           {"interaction: [{config: {}}]", "interaction[0]: class_name"},
           {"interaction: [{class_name: a.B, config: [1]}]",
            "config must be a mapping"},
           {"interaction: [{class_name: a.XInteraction}, {class_name: b.X}]",
            "interaction[1]: interaction name 'x' appears twice"},
           {"interaction: [{class_name: a.B, name: [1]}]",
            "name must be a string"},
           {"interaction: [ {", "cfg.yaml: line"},
       }) {
    EXPECT_THAT(ParseInteractionConfig(c.yaml, "cfg.yaml").status(),
                StatusIs(absl::StatusCode::kInvalidArgument, c.want))
        << c.yaml;
  }
  EXPECT_THAT(LoadInteractionConfig("/nonexistent/i.yaml"),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/i.yaml"));
}

}  // namespace
}  // namespace verl::infer::agent
