// File: verl/core/batch_wire_test.cc
//
// Round trips over every dtype and layout, byte equality with an independent
// encoder of the documented format, and a table of malformed byte strings
// (each changing one field) that must give errors, never crashes.
#include "verl/core/batch_wire.h"

#include <ATen/ATen.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl {
namespace core {
namespace {

using ::verl::core::testing::StatusIs;

using Json = Batch::Json;
using ::testing::HasSubstr;

// `rows` rows: x[r] = [r, -r] (float), id[r] = 100 + r, text[r] = "t<r>",
// info[r] = {"r": r}; meta {"step": 3}.
Batch SampleBatch(int64_t rows) {
  at::Tensor r = at::arange(rows, at::kFloat);
  Batch b;
  EXPECT_TRUE(b.SetTensor("x", at::stack({r, -r}, 1)).ok());
  EXPECT_TRUE(b.SetTensor("id", r.to(at::kLong) + 100).ok());
  std::vector<Json> text, info;
  for (int64_t i = 0; i < rows; ++i) {
    text.push_back("t" + std::to_string(i));
    info.push_back(Json{{"r", i}});
  }
  EXPECT_TRUE(b.SetNonTensor("text", text).ok());
  EXPECT_TRUE(b.SetNonTensor("info", info).ok());
  b.meta_info()["step"] = 3;
  return b;
}

at::Tensor RandomOf(at::ScalarType type, std::vector<int64_t> shape,
                    at::Generator& gen) {
  if (type == at::kBool) return at::randint(0, 2, shape, gen).to(at::kBool);
  if (at::isIntegralType(type, /*includeBool=*/false)) {
    at::Tensor t = at::randint(-1000000, 1000000, shape, gen, at::kLong);
    if (type == at::kLong) t.mul_(1000003);  // beyond 32 bits
    return t.to(type);
  }
  at::Tensor t =
      at::randn(shape, gen,
                at::TensorOptions().dtype(
                    at::isComplexType(type) ? type : at::ScalarType::Double));
  if (!at::isComplexType(type)) {
    t = t.to(type);
    t.view({-1})[0] = std::numeric_limits<double>::quiet_NaN();
    t.view({-1})[1] = -0.0;
    t.view({-1})[2] = std::numeric_limits<double>::infinity();
  }
  return t;
}

TEST(BatchWireTest, RoundTripsEveryDtypeAndLayout) {
  at::Generator gen = at::detail::createCPUGenerator(7);
  const std::vector<at::ScalarType> types = {
      at::kBool,  at::kByte,   at::kChar,         at::kShort,
      at::kInt,   at::kLong,   at::kHalf,         at::kBFloat16,
      at::kFloat, at::kDouble, at::kComplexFloat, at::kComplexDouble};
  Batch b;
  for (at::ScalarType type : types) {
    const std::string name = c10::toString(type);
    ASSERT_TRUE(b.SetTensor(name, RandomOf(type, {5, 4}, gen)).ok());
    // Non-contiguous views: a transpose and a strided slice.
    at::Tensor wide = RandomOf(type, {3, 10}, gen);
    ASSERT_TRUE(b.SetTensor(name + "_t", wide.t().slice(0, 0, 5)).ok());
    ASSERT_TRUE(b.SetTensor(name + "_s",
                            RandomOf(type, {10, 2}, gen).slice(0, 0, 10, 2))
                    .ok());
  }
  at::Tensor conj = RandomOf(at::kComplexFloat, {5}, gen).conj();
  ASSERT_TRUE(conj.is_conj());
  ASSERT_TRUE(b.SetTensor("conj", conj).ok());
  ASSERT_TRUE(b.SetTensor("zero_width", at::zeros({5, 0, 3})).ok());
  ASSERT_TRUE(b.SetNonTensor("rows", {1, "two", Json{{"three", {3, 3.5}}},
                                      nullptr, "\xc3\xa9\xe4\xb8\xad"})
                  .ok());
  ASSERT_TRUE(b.SetNonTensor("reward_model",
                             std::vector<Json>(5, {{"ground_truth", "42"},
                                                   {"style", "rule"}}))
                  .ok());
  b.meta_info() = {{"temperature", 0.1 + 0.2},
                   {"global_steps", int64_t{1} << 40},
                   {"nested", {{"list", {1, 2, 3}}, {"flag", true}}}};

  const std::string bytes = SerializeBatch(b);
  auto back = DeserializeBatch(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->Equal(b));
  EXPECT_EQ(back->meta_info()["temperature"].get<double>(), 0.1 + 0.2);
  for (const auto& kv : back->tensors()) {
    EXPECT_TRUE(kv.second.is_contiguous()) << kv.first;
    EXPECT_EQ(kv.second.scalar_type(), b.tensor(kv.first).scalar_type());
  }
  // NaN, -0.0 and inf survive bit for bit.
  at::Tensor f = back->tensor("Float").view({-1});
  EXPECT_TRUE(std::isnan(f[0].item<float>()));
  EXPECT_TRUE(std::signbit(f[1].item<float>()));
  EXPECT_TRUE(std::isinf(f[2].item<float>()));
  EXPECT_TRUE(back->tensor("conj").equal(conj.resolve_conj()));
  EXPECT_EQ(SerializeBatch(*back), bytes);  // deterministic
}

TEST(BatchWireTest, RoundTripsEmptyBatches) {
  for (const Batch& b : {Batch(), SampleBatch(0), SampleBatch(1)}) {
    auto back = DeserializeBatch(SerializeBatch(b));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(back->Equal(b)) << b.DebugString();
    EXPECT_EQ(back->TensorKeys(), b.TensorKeys());
  }
}

// Batch's dtype list and the wire's code table must not drift apart: every
// dtype a column may have round-trips (an uncovered one would abort Serialize).
TEST(BatchWireTest, EveryDtypeBatchAcceptsHasAWireCode) {
  int accepted = 0;
  for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions); ++i) {
    const auto type = static_cast<at::ScalarType>(i);
    if (!Batch::SupportsDtype(type)) continue;
    ++accepted;
    Batch b;
    ASSERT_TRUE(b.SetTensor("t", at::zeros({2, 1}, type)).ok());
    auto back = DeserializeBatch(SerializeBatch(b));
    ASSERT_TRUE(back.ok()) << c10::toString(type) << ": " << back.status();
    EXPECT_EQ(back->tensor("t").scalar_type(), type);
  }
  EXPECT_EQ(accepted, 12);
}

// Independent encoder of the documented wire format, with every field
// overridable so that each malformed case changes exactly one thing.
struct Wire {
  std::string magic = "VBAT";
  uint32_t version = 1;
  int64_t batch_size = 2;
  std::vector<uint8_t> meta = Json::to_cbor(Json{{"k", 1}});
  std::optional<uint64_t> meta_len;
  uint32_t n_tensors = 1;
  std::string name = "x";
  std::optional<uint32_t> name_len;
  uint8_t dtype = 5;  // int32
  uint32_t ndim = 1;
  std::vector<int64_t> sizes = {2};
  std::optional<uint64_t> nbytes;
  std::string data = std::string("\x07\x00\x00\x00\xff\xff\xff\xff", 8);
  uint32_t n_columns = 1;
  std::vector<uint8_t> rows = Json::to_cbor(Json::array({"a", "b"}));
  std::string trailer;

  template <typename T>
  static void Put(std::string* s, T v) {
    s->append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  std::string Encode() const {
    std::string s = magic;
    Put(&s, version);
    Put(&s, batch_size);
    Put<uint64_t>(&s, meta_len.value_or(meta.size()));
    s.append(meta.begin(), meta.end());
    Put(&s, n_tensors);
    Put<uint32_t>(&s, name_len.value_or(name.size()));
    s += name;
    Put(&s, dtype);
    Put(&s, ndim);
    for (int64_t d : sizes) Put(&s, d);
    Put<uint64_t>(&s, nbytes.value_or(data.size()));
    s += data;
    Put(&s, n_columns);
    Put<uint32_t>(&s, 3);
    s += "uid";
    Put<uint64_t>(&s, rows.size());
    s.append(rows.begin(), rows.end());
    return s + trailer;
  }
};

TEST(BatchWireTest, WireFormatMatchesIndependentEncoder) {
  const std::string bytes = Wire().Encode();
  auto b = DeserializeBatch(bytes);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->size(), 2);
  EXPECT_TRUE(b->tensor("x").equal(at::tensor({7, -1}, at::kInt)));
  EXPECT_EQ(b->non_tensor("uid"), (std::vector<Json>{"a", "b"}));
  EXPECT_EQ(b->meta_info(), (Json{{"k", 1}}));
  EXPECT_EQ(SerializeBatch(*b), bytes);
}

TEST(BatchWireTest, EveryTruncationIsAnError) {
  for (const std::string& bytes :
       {Wire().Encode(), SerializeBatch(SampleBatch(3))}) {
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto b = DeserializeBatch(absl::string_view(bytes.data(), n));
      EXPECT_THAT(b, StatusIs(absl::StatusCode::kDataLoss,
                              "DeserializeBatch: truncated input"))
          << "prefix of " << n << " bytes parsed";
    }
    EXPECT_TRUE(DeserializeBatch(bytes).ok());
  }
}

TEST(BatchWireTest, MalformedFieldsAreErrors) {
  struct Case {
    const char* name;
    std::function<void(Wire*)> corrupt;
    const char* message;
  };
  const uint64_t kHuge = std::numeric_limits<uint64_t>::max();
  // 100k nested CBOR arrays: must not recurse that deep.
  std::vector<uint8_t> bomb(100000, 0x81);
  bomb.push_back(0x00);
  const std::vector<Case> cases = {
      {"magic", [](Wire* w) { w->magic = "VBAX"; }, "bad magic"},
      {"version", [](Wire* w) { w->version = 2; }, "unsupported version 2"},
      {"negative batch", [](Wire* w) { w->batch_size = -1; }, "negative"},
      {"meta len huge", [&](Wire* w) { w->meta_len = kHuge; }, "truncated"},
      {"meta len short", [](Wire* w) { w->meta_len = 1; }, "CBOR"},
      {"meta not cbor",
       [](Wire* w) {
         w->meta = {0xff, 0xff};
       },
       "CBOR"},
      {"meta not object", [](Wire* w) { w->meta = Json::to_cbor(Json(3)); },
       "not a JSON object"},
      {"meta depth bomb", [&](Wire* w) { w->meta = bomb; }, "nesting"},
      {"meta array len",
       [](Wire* w) {
         w->meta = {0x9b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
       },
       "container length"},
      {"tensor count", [](Wire* w) { w->n_tensors = 0xffffffffu; },
       "DeserializeBatch"},
      {"name len", [](Wire* w) { w->name_len = 0xffffffffu; }, "truncated"},
      {"dtype", [](Wire* w) { w->dtype = 99; }, "unknown dtype code 99"},
      {"ndim 0", [](Wire* w) { w->ndim = 0; }, "bad ndim"},
      {"ndim huge", [](Wire* w) { w->ndim = 1000; }, "bad ndim"},
      {"ndim overrun", [](Wire* w) { w->ndim = 60; }, "DeserializeBatch"},
      {"negative dim", [](Wire* w) { w->sizes = {-2}; }, "negative size"},
      {"rows", [](Wire* w) { w->sizes = {3}; }, "has 3 rows"},
      {"overflow",
       [](Wire* w) {
         w->ndim = 3;
         w->sizes = {2, int64_t{1} << 40, int64_t{1} << 40};
       },
       "does not match"},
      {"nbytes", [](Wire* w) { w->nbytes = 4; }, "does not match"},
      {"nbytes huge", [&](Wire* w) { w->nbytes = kHuge; }, "does not match"},
      {"bool byte",
       [](Wire* w) {
         w->dtype = 1;
         w->data = std::string("\x01\x02", 2);
       },
       "bool byte"},
      {"column count", [](Wire* w) { w->n_columns = 2; }, "truncated"},
      {"column rows",
       [](Wire* w) { w->rows = Json::to_cbor(Json::array({"a"})); },
       "not an array of 2 rows"},
      {"column not array", [](Wire* w) { w->rows = Json::to_cbor(Json("ab")); },
       "not an array"},
      {"trailing", [](Wire* w) { w->trailer = "z"; }, "1 trailing bytes"},
  };
  for (const Case& c : cases) {
    Wire w;
    c.corrupt(&w);
    auto b = DeserializeBatch(w.Encode());
    // The code differs between cases; each case's message is checked below.
    ASSERT_FALSE(b.ok()) << c.name;
    EXPECT_THAT(b.status().ToString(), HasSubstr(c.message)) << c.name;
  }
}

TEST(BatchWireTest, RandomCorruptionNeverCrashes) {
  const std::string good = SerializeBatch(SampleBatch(3));
  std::mt19937 rng(123);
  int failures = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = good;
    const int flips = 1 + iter % 4;
    for (int f = 0; f < flips; ++f) {
      bad[rng() % bad.size()] = static_cast<char>(rng() & 0xff);
    }
    auto b = DeserializeBatch(bad);
    if (!b.ok()) {
      ++failures;
    } else {
      // Whatever parses is a valid batch that round-trips.
      EXPECT_EQ(DeserializeBatch(SerializeBatch(*b))->size(), b->size());
    }
  }
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace core
}  // namespace verl
