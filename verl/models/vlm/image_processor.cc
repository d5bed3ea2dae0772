// File: verl/models/vlm/image_processor.cc
#include "verl/models/vlm/image_processor.h"

#include <ATen/ops/from_blob.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace verl::models::vlm {
namespace {

// PIL's bicubic kernel (a = -0.5) and its 8-bit fixed-point precision.
constexpr double kBicubicSupport = 2.0;
constexpr int kPrecisionBits = 32 - 8 - 2;

double BicubicFilter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// One axis of PIL's resample: for each output index, the first input index
// and the fixed-point weights of its (at most ksize) inputs.
struct Coeffs {
  int ksize = 0;
  std::vector<int> first, count;  // per output
  std::vector<int32_t> weights;   // [out, ksize]
};

// PIL precompute_coeffs + normalize_coeffs_8bpc for box [0, in_size).
Coeffs PrecomputeCoeffs(int in_size, int out_size) {
  double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = kBicubicSupport * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weights.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = BicubicFilter((x + xmin - center + 0.5) * ss);
      ww += k[x];
    }
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[x] / ww : k[x];
      c.weights[xx * c.ksize + x] =
          static_cast<int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits)
                                     : 0.5 + w * (1 << kPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

uint8_t Clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

// out(o) = sum_k in(first[o] + k) * w[o, k] over one axis; `in_at(i, c)` and
// `out_at(o, c)` address the pixels along it.
void ConvolveLine(const Coeffs& c, int out_size,
                  const std::function<uint8_t(int, int)>& in_at,
                  const std::function<uint8_t&(int, int)>& out_at) {
  for (int o = 0; o < out_size; ++o) {
    const int32_t* w = &c.weights[static_cast<size_t>(o) * c.ksize];
    for (int ch = 0; ch < 3; ++ch) {
      int32_t ss = 1 << (kPrecisionBits - 1);
      for (int k = 0; k < c.count[o]; ++k)
        ss += in_at(c.first[o] + k, ch) * w[k];
      out_at(o, ch) = Clip8(ss);
    }
  }
}

absl::Status ConfigError(absl::string_view source, absl::string_view key,
                         absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": key '", key, "': expected ", what));
}

}  // namespace

absl::StatusOr<std::pair<int64_t, int64_t>> SmartResize(int64_t height,
                                                        int64_t width,
                                                        int64_t factor,
                                                        int64_t min_pixels,
                                                        int64_t max_pixels) {
  if (height <= 0 || width <= 0 || factor <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("smart_resize: bad image size ", height, "x", width));
  }
  const double ratio = static_cast<double>(std::max(height, width)) /
                       static_cast<double>(std::min(height, width));
  if (ratio > 200) {
    return absl::InvalidArgumentError(
        absl::StrCat("smart_resize: absolute aspect ratio must be smaller "
                     "than 200, got ",
                     ratio, " for ", height, "x", width));
  }
  const double f = static_cast<double>(factor);
  // Python's round(): half to even, which nearbyint does in the default mode.
  int64_t h_bar = static_cast<int64_t>(std::nearbyint(height / f)) * factor;
  int64_t w_bar = static_cast<int64_t>(std::nearbyint(width / f)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(static_cast<double>(height * width) /
                                  static_cast<double>(max_pixels));
    h_bar = std::max(
        factor, static_cast<int64_t>(std::floor(height / beta / f)) * factor);
    w_bar = std::max(
        factor, static_cast<int64_t>(std::floor(width / beta / f)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) /
                                  static_cast<double>(height * width));
    h_bar = static_cast<int64_t>(std::ceil(height * beta / f)) * factor;
    w_bar = static_cast<int64_t>(std::ceil(width * beta / f)) * factor;
  }
  return std::make_pair(h_bar, w_bar);
}

Image ResizeBicubic(const Image& in, int64_t width, int64_t height) {
  if (width == in.width && height == in.height) return in;
  const int in_w = static_cast<int>(in.width),
            in_h = static_cast<int>(in.height);
  const int out_w = static_cast<int>(width), out_h = static_cast<int>(height);
  const Coeffs horiz = PrecomputeCoeffs(in_w, out_w);
  const Coeffs vert = PrecomputeCoeffs(in_h, out_h);

  // Horizontal pass over the source rows the vertical pass reads.
  Image tmp = in;
  int row0 = 0;
  if (out_w != in_w) {
    row0 = vert.first.front();
    const int row1 = vert.first.back() + vert.count.back();
    tmp.width = out_w;
    tmp.height = row1 - row0;
    tmp.rgb.assign(static_cast<size_t>(tmp.width) * tmp.height * 3, 0);
    for (int y = 0; y < tmp.height; ++y) {
      const uint8_t* src = &in.rgb[static_cast<size_t>(y + row0) * in_w * 3];
      uint8_t* dst = &tmp.rgb[static_cast<size_t>(y) * out_w * 3];
      ConvolveLine(
          horiz, out_w, [&](int i, int ch) { return src[i * 3 + ch]; },
          [&](int o, int ch) -> uint8_t& { return dst[o * 3 + ch]; });
    }
  }
  if (out_h == in_h) return tmp;

  Image out;
  out.width = out_w;
  out.height = out_h;
  out.rgb.assign(static_cast<size_t>(out_w) * out_h * 3, 0);
  for (int x = 0; x < out_w; ++x) {
    ConvolveLine(
        vert, out_h,
        [&](int i, int ch) {
          return tmp.rgb[(static_cast<size_t>(i - row0) * out_w + x) * 3 + ch];
        },
        [&](int o, int ch) -> uint8_t& {
          return out.rgb[(static_cast<size_t>(o) * out_w + x) * 3 + ch];
        });
  }
  return out;
}

absl::StatusOr<ProcessedImages> PreprocessImages(
    const std::vector<Image>& images, const ImageProcessorConfig& config) {
  const int64_t p = config.patch_size, m = config.merge_size;
  const int64_t tp = config.temporal_patch_size;
  std::vector<float> values;
  std::vector<int64_t> grids;
  for (size_t n = 0; n < images.size(); ++n) {
    const Image& image = images[n];
    Image resized = image;
    if (config.do_resize) {
      auto hw = SmartResize(image.height, image.width, p * m, config.min_pixels,
                            config.max_pixels);
      if (!hw.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("image ", n, ": ", hw.status().message()));
      }
      resized = ResizeBicubic(image, hw->second, hw->first);
    }
    const int64_t h = resized.height, w = resized.width;
    if (h % (p * m) != 0 || w % (p * m) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("image ", n, ": size ", h, "x", w,
                       " is not a multiple of ", p * m, " (enable do_resize)"));
    }
    // Rescale in float64 then cast (HF rescale), normalize in float32.
    std::vector<float> plane(static_cast<size_t>(h) * w * 3);
    for (size_t i = 0; i < plane.size(); ++i) {
      float v = resized.rgb[i];
      if (config.do_rescale) {
        v = static_cast<float>(resized.rgb[i] * config.rescale_factor);
      }
      if (config.do_normalize) {
        const int c = i % 3;
        v = (v - config.image_mean[c]) / config.image_std[c];
      }
      plane[i] = v;
    }
    // HF: reshape to (t, tp, c, gh/m, m, p, gw/m, m, p), transpose to
    // (t, gh/m, gw/m, m, m, c, tp, p, p).
    const int64_t gh = h / p, gw = w / p;
    for (int64_t bh = 0; bh < gh / m; ++bh) {
      for (int64_t bw = 0; bw < gw / m; ++bw) {
        for (int64_t mh = 0; mh < m; ++mh) {
          for (int64_t mw = 0; mw < m; ++mw) {
            const int64_t y0 = (bh * m + mh) * p, x0 = (bw * m + mw) * p;
            for (int c = 0; c < 3; ++c) {
              for (int64_t t = 0; t < tp; ++t) {
                for (int64_t py = 0; py < p; ++py) {
                  for (int64_t px = 0; px < p; ++px) {
                    values.push_back(plane[((y0 + py) * w + x0 + px) * 3 + c]);
                  }
                }
              }
            }
          }
        }
      }
    }
    grids.insert(grids.end(), {1, gh, gw});
  }
  ProcessedImages out;
  const int64_t dim = config.PatchDim();
  out.pixel_values =
      at::tensor(values, at::kFloat)
          .reshape({static_cast<int64_t>(values.size()) / dim, dim});
  out.image_grid_thw = at::tensor(grids, at::kLong)
                           .reshape({static_cast<int64_t>(images.size()), 3});
  return out;
}

absl::StatusOr<ImageProcessorConfig> ImageProcessorConfigFromJson(
    const nlohmann::json& json, absl::string_view source) {
  ImageProcessorConfig c;
  if (!json.is_object()) return ConfigError(source, "<root>", "an object");
  auto read_int = [&](const nlohmann::json& obj, const char* key,
                      int64_t* out) -> absl::Status {
    if (!obj.contains(key) || obj[key].is_null()) return absl::OkStatus();
    if (!obj[key].is_number_integer() || obj[key].get<int64_t>() <= 0) {
      return ConfigError(source, key, "a positive integer");
    }
    *out = obj[key].get<int64_t>();
    return absl::OkStatus();
  };
  auto read_bool = [&](const char* key, bool* out) -> absl::Status {
    if (!json.contains(key)) return absl::OkStatus();
    if (!json[key].is_boolean()) return ConfigError(source, key, "a boolean");
    *out = json[key].get<bool>();
    return absl::OkStatus();
  };
  auto read_triple = [&](const char* key,
                         std::array<float, 3>* out) -> absl::Status {
    if (!json.contains(key)) return absl::OkStatus();
    const auto& v = json[key];
    if (!v.is_array() || v.size() != 3) {
      return ConfigError(source, key, "a list of 3 numbers");
    }
    for (int i = 0; i < 3; ++i) {
      if (!v[i].is_number()) return ConfigError(source, key, "numbers");
      (*out)[i] = v[i].get<float>();
    }
    return absl::OkStatus();
  };
  absl::Status s;
  if (json.contains("size") && json["size"].is_object()) {
    if (!(s = read_int(json["size"], "shortest_edge", &c.min_pixels)).ok())
      return s;
    if (!(s = read_int(json["size"], "longest_edge", &c.max_pixels)).ok())
      return s;
  }
  for (auto [key, out] :
       {std::make_pair("min_pixels", &c.min_pixels),
        std::make_pair("max_pixels", &c.max_pixels),
        std::make_pair("patch_size", &c.patch_size),
        std::make_pair("temporal_patch_size", &c.temporal_patch_size),
        std::make_pair("merge_size", &c.merge_size)}) {
    if (!(s = read_int(json, key, out)).ok()) return s;
  }
  for (auto [key, out] : {std::make_pair("do_resize", &c.do_resize),
                          std::make_pair("do_rescale", &c.do_rescale),
                          std::make_pair("do_normalize", &c.do_normalize)}) {
    if (!(s = read_bool(key, out)).ok()) return s;
  }
  if (json.contains("rescale_factor")) {
    if (!json["rescale_factor"].is_number()) {
      return ConfigError(source, "rescale_factor", "a number");
    }
    c.rescale_factor = json["rescale_factor"].get<double>();
  }
  if (!(s = read_triple("image_mean", &c.image_mean)).ok()) return s;
  if (!(s = read_triple("image_std", &c.image_std)).ok()) return s;
  if (c.min_pixels > c.max_pixels) {
    return ConfigError(source, "min_pixels", "min_pixels <= max_pixels");
  }
  return c;
}

nlohmann::json ImageProcessorConfigToJson(const ImageProcessorConfig& c) {
  return {
      {"image_processor_type", "Qwen2VLImageProcessor"},
      {"processor_class", "Qwen2_5_VLProcessor"},
      {"min_pixels", c.min_pixels},
      {"max_pixels", c.max_pixels},
      {"size",
       {{"shortest_edge", c.min_pixels}, {"longest_edge", c.max_pixels}}},
      {"patch_size", c.patch_size},
      {"temporal_patch_size", c.temporal_patch_size},
      {"merge_size", c.merge_size},
      {"do_resize", c.do_resize},
      {"do_rescale", c.do_rescale},
      {"do_normalize", c.do_normalize},
      {"do_convert_rgb", true},
      {"resample", 3},
      {"rescale_factor", c.rescale_factor},
      {"image_mean", c.image_mean},
      {"image_std", c.image_std},
  };
}

}  // namespace verl::models::vlm
