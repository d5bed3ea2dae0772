// The Qwen2-VL image processor against HF's, computed with PIL + numpy by
// testing/gen_image_golden.py: smart_resize on a table of sizes, and for 20
// images of odd sizes the bicubic-resized image (exact bytes), image_grid_thw
// and, for three of them, the full pixel_values (<= 1e-6).
#include "verl/models/vlm/image_processor.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/from_blob.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/models/vlm/image.h"

namespace verl::models::vlm {
namespace {

using ::verl::core::testing::StatusIs;

constexpr char kDir[] = "verl/models/vlm/testdata/";

nlohmann::json Golden() {
  auto text = core::ReadFile(std::string(kDir) + "image_golden.json");
  EXPECT_TRUE(text.ok()) << text.status();
  return nlohmann::json::parse(text.ok() ? *text : "{}");
}

TEST(ImageProcessorTest, SmartResizeMatchesHf) {
  const nlohmann::json golden = Golden();
  ASSERT_GE(golden["smart_resize"].size(), 10u);
  for (const auto& row : golden["smart_resize"]) {
    auto hw = SmartResize(row["h"], row["w"], 28, row["min_pixels"],
                          row["max_pixels"]);
    ASSERT_TRUE(hw.ok()) << hw.status();
    EXPECT_EQ(hw->first, row["out"][0].get<int64_t>()) << row.dump();
    EXPECT_EQ(hw->second, row["out"][1].get<int64_t>()) << row.dump();
  }
  EXPECT_THAT(SmartResize(10, 2001, 28, 3136, 1003520),
              StatusIs(absl::StatusCode::kInvalidArgument, "aspect ratio"));
  EXPECT_THAT(SmartResize(0, 5, 28, 3136, 1003520),
              StatusIs(absl::StatusCode::kInvalidArgument, "0x5"));
}

TEST(ImageProcessorTest, TwentyImagesMatchHfWithPil) {
  const nlohmann::json golden = Golden();
  ASSERT_EQ(golden["processor"].size(), 20u);
  int full_checks = 0;
  for (const auto& c : golden["processor"]) {
    const std::string name = c["name"];
    auto image = ReadImageFile(kDir + std::string("proc/") + name + ".png");
    ASSERT_TRUE(image.ok()) << image.status();
    auto want =
        ReadImageFile(kDir + std::string("proc/") + name + "_resized.png");
    ASSERT_TRUE(want.ok()) << want.status();

    ImageProcessorConfig config;
    config.min_pixels = c["min_pixels"];
    config.max_pixels = c["max_pixels"];
    auto hw = SmartResize(image->height, image->width, 28, config.min_pixels,
                          config.max_pixels);
    ASSERT_TRUE(hw.ok());
    const Image resized = ResizeBicubic(*image, hw->second, hw->first);
    ASSERT_EQ(resized.width, want->width) << name;
    ASSERT_EQ(resized.height, want->height) << name;
    EXPECT_EQ(resized.rgb, want->rgb)
        << name << " " << image->width << "x" << image->height;

    auto out = PreprocessImages({*image}, config);
    ASSERT_TRUE(out.ok()) << out.status();
    const auto grid = c["grid_thw"].get<std::vector<int64_t>>();
    EXPECT_EQ(out->image_grid_thw.sizes(), (std::vector<int64_t>{1, 3}));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(out->image_grid_thw[0][i].item<int64_t>(), grid[i]) << name;
    }
    EXPECT_EQ(out->pixel_values.size(0), grid[0] * grid[1] * grid[2]);
    EXPECT_EQ(out->pixel_values.size(1), 1176);
    if (c.contains("pixel_values")) {
      auto bytes = core::ReadFile(kDir + std::string("proc/") +
                                  c["pixel_values"].get<std::string>());
      ASSERT_TRUE(bytes.ok());
      at::Tensor ref =
          at::from_blob(bytes->data(),
                        {static_cast<int64_t>(bytes->size() / 4)}, at::kFloat)
              .reshape({-1, 1176});
      ASSERT_EQ(ref.sizes(), out->pixel_values.sizes()) << name;
      const double err = (ref - out->pixel_values).abs().max().item<double>();
      EXPECT_LE(err, 1e-6) << name;
      ++full_checks;
    }
  }
  EXPECT_EQ(full_checks, 3);
}

TEST(ImageProcessorTest, BatchConcatenatesPatches) {
  const nlohmann::json golden = Golden();
  std::vector<Image> images;
  for (const char* name : {"img01", "img02"}) {
    auto image = ReadImageFile(kDir + std::string("proc/") + name + ".png");
    ASSERT_TRUE(image.ok());
    images.push_back(*image);
  }
  ImageProcessorConfig config;
  config.min_pixels = 784;
  config.max_pixels = 1568;
  auto both = PreprocessImages(images, config);
  auto first = PreprocessImages({images[0]}, config);
  ASSERT_TRUE(both.ok() && first.ok());
  EXPECT_EQ(both->image_grid_thw.size(0), 2);
  const int64_t n0 = first->pixel_values.size(0);
  EXPECT_TRUE(both->pixel_values.slice(0, 0, n0).equal(first->pixel_values));
  EXPECT_EQ(both->pixel_values.size(0),
            n0 + (both->image_grid_thw[1].prod().item<int64_t>()));
}

TEST(ImageProcessorTest, ConfigJson) {
  auto c = ImageProcessorConfigFromJson(
      nlohmann::json::parse(R"({"min_pixels": 3136, "max_pixels": 12845056,
        "patch_size": 14, "merge_size": 2, "temporal_patch_size": 2,
        "image_mean": [0.5, 0.5, 0.5], "do_normalize": true,
        "image_processor_type": "Qwen2VLImageProcessor"})"),
      "preprocessor_config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_pixels, 12845056);
  EXPECT_EQ(c->image_mean[1], 0.5f);
  auto back = ImageProcessorConfigFromJson(ImageProcessorConfigToJson(*c), "x");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->max_pixels, c->max_pixels);
  EXPECT_EQ(back->image_std, c->image_std);
  auto sized = ImageProcessorConfigFromJson(
      nlohmann::json::parse(
          R"({"size": {"shortest_edge": 100, "longest_edge": 1000}})"),
      "p.json");
  ASSERT_TRUE(sized.ok());
  EXPECT_EQ(sized->min_pixels, 100);
  EXPECT_THAT(
      ImageProcessorConfigFromJson(
          nlohmann::json::parse(R"({"patch_size": "14"})"), "p.json"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "p.json: key 'patch_size': expected a positive integer"));
  EXPECT_THAT(ImageProcessorConfigFromJson(
                  nlohmann::json::parse(R"({"image_std": [1, 2]})"), "p.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, "image_std"));
}

}  // namespace
}  // namespace verl::models::vlm
