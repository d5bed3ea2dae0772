// File: verl/core/batch_test.cc
//
// Every Batch operation against hand-computed row orders, serialization round
// trips over all dtypes, and a table of malformed byte strings built by an
// independent encoder of the wire format.
#include "verl/core/batch.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace verl {
namespace core {
namespace {

using Json = Batch::Json;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using Keys = std::vector<std::string>;

// A 4-row batch where row r has a = [3r, 3r+1, 3r+2], ids = 10 + r,
// uid = "u<r>", rm = {"gt": r}.
Batch MakeBatch(int64_t rows = 4) {
  std::vector<Json> uid, rm;
  for (int64_t r = 0; r < rows; ++r) {
    uid.push_back("u" + std::to_string(r));
    rm.push_back(Json{{"gt", r}});
  }
  auto b = Batch::FromColumns(
      {{"a", at::arange(3 * rows, at::kFloat).reshape({rows, 3})},
       {"ids", at::arange(10, 10 + rows, at::kLong)}},
      {{"uid", uid}, {"rm", rm}}, Json{{"temperature", 0.7}});
  EXPECT_TRUE(b.ok()) << b.status();
  return *b;
}

// The source row of every row of a MakeBatch()-derived batch, after checking
// that all four columns agree about it.
std::vector<int64_t> SourceRows(const Batch& b) {
  std::vector<int64_t> rows;
  const at::Tensor ids = b.tensor("ids").contiguous();
  const at::Tensor a = b.tensor("a").contiguous();
  EXPECT_EQ(ids.size(0), b.size());
  for (int64_t i = 0; i < b.size(); ++i) {
    const int64_t r = ids[i].item<int64_t>() - 10;
    rows.push_back(r);
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(a[i][j].item<float>(), 3 * r + j) << "row " << i;
    }
    EXPECT_EQ(b.non_tensor("uid")[i], "u" + std::to_string(r));
    EXPECT_EQ(b.non_tensor("rm")[i], (Json{{"gt", r}}));
  }
  return rows;
}

// ---- Columns
// -----------------------------------------------------------------

TEST(BatchTest, ColumnsShareBatchSize) {
  Batch b;
  EXPECT_EQ(b.size(), 0);
  ASSERT_TRUE(b.SetTensor("x", at::zeros({5, 2})).ok());
  EXPECT_EQ(b.size(), 5);
  absl::Status s = b.SetTensor("y", at::zeros({4}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.ToString(),
              HasSubstr("'y' has 4 rows but the batch size is 5"));
  s = b.SetNonTensor("uid", std::vector<Json>(3, "x"));
  EXPECT_THAT(s.ToString(), HasSubstr("'uid' has 3 rows"));
  EXPECT_THAT(b.SetTensor("s", at::scalar_tensor(1.0)).ToString(),
              HasSubstr("0-dim"));
  EXPECT_THAT(b.SetTensor("u", at::Tensor()).ToString(),
              HasSubstr("undefined"));
  at::Tensor q = at::quantize_per_tensor(at::zeros({5}), 0.1, 0, at::kQInt8);
  EXPECT_THAT(b.SetTensor("q", q).ToString(), HasSubstr("unsupported dtype"));
  // Replacing keeps the size; popping the last column resets it.
  ASSERT_TRUE(b.SetTensor("x", at::ones({5})).ok());
  EXPECT_EQ(b.tensor("x").dim(), 1);
  ASSERT_TRUE(b.PopTensor("x").ok());
  EXPECT_EQ(b.size(), 0);
  EXPECT_TRUE(b.has_no_columns());
  ASSERT_TRUE(b.SetNonTensor("uid", {"a", "b"}).ok());
  EXPECT_EQ(b.size(), 2);

  auto bad = Batch::FromColumns({{"x", at::zeros({2})}, {"y", at::zeros({3})}});
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(Batch::FromColumns({}, {}, Json::array()).ok());
}

TEST(BatchTest, GetAndPopNameMissingKeys) {
  Batch b = MakeBatch();
  EXPECT_THAT(b.TensorKeys(), ElementsAre("a", "ids"));
  EXPECT_THAT(b.NonTensorKeys(), ElementsAre("rm", "uid"));
  auto t = b.GetTensor("nope");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().ToString(), HasSubstr("'nope' (tensors: [a, ids])"));
  EXPECT_THAT(b.GetNonTensor("x").status().ToString(),
              HasSubstr("non-tensor columns: [rm, uid]"));
  EXPECT_TRUE(b.GetTensor("ids")->equal(at::arange(10, 14, at::kLong)));
  EXPECT_EQ((*b.GetNonTensor("uid"))[3], "u3");

  // Pop checks all keys before removing anything.
  EXPECT_FALSE(b.Pop({"a"}, {"missing"}).ok());
  EXPECT_TRUE(b.HasTensor("a"));
  auto popped = b.Pop({"a"}, {"uid"}, {"temperature"});
  ASSERT_TRUE(popped.ok()) << popped.status();
  EXPECT_THAT(popped->TensorKeys(), ElementsAre("a"));
  EXPECT_THAT(popped->NonTensorKeys(), ElementsAre("uid"));
  EXPECT_EQ(popped->meta_info(), (Json{{"temperature", 0.7}}));
  EXPECT_EQ(popped->size(), 4);
  EXPECT_THAT(b.TensorKeys(), ElementsAre("ids"));
  EXPECT_THAT(b.NonTensorKeys(), ElementsAre("rm"));
  EXPECT_TRUE(b.meta_info().empty());
  auto rm = b.PopNonTensor("rm");
  ASSERT_TRUE(rm.ok());
  EXPECT_EQ(rm->size(), 4u);
  EXPECT_FALSE(b.PopNonTensor("rm").ok());
}

TEST(BatchTest, Rename) {
  Batch b = MakeBatch();
  ASSERT_TRUE(b.Rename("ids", "input_ids").ok());
  EXPECT_THAT(b.TensorKeys(), ElementsAre("a", "input_ids"));
  ASSERT_TRUE(b.Rename("uid", "group").ok());
  EXPECT_THAT(b.NonTensorKeys(), ElementsAre("group", "rm"));
  EXPECT_FALSE(b.Rename("a", "input_ids").ok());
  EXPECT_EQ(b.Rename("zzz", "y").code(), absl::StatusCode::kNotFound);
}

// ---- Row operations
// ----------------------------------------------------------

TEST(BatchTest, SelectKeepsKeysAndSharesStorage) {
  Batch b = MakeBatch();
  b.meta_info()["step"] = 3;
  auto s = b.Select(Keys{"a"}, Keys{}, Keys{"step"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->TensorKeys(), ElementsAre("a"));
  EXPECT_TRUE(s->NonTensorKeys().empty());
  EXPECT_EQ(s->meta_info(), (Json{{"step", 3}}));
  EXPECT_EQ(s->size(), 4);
  EXPECT_EQ(s->tensor("a").data_ptr(), b.tensor("a").data_ptr());

  auto all = b.Select(std::nullopt);
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->Equal(b));
  auto none = b.Select(Keys{}, Keys{}, Keys{});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size(), 0);
  EXPECT_EQ(b.Select(Keys{"q"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      b.Select(std::nullopt, std::nullopt, Keys{"nope"}).status().ToString(),
      HasSubstr("meta_info key 'nope'"));
}

TEST(BatchTest, SliceIsAViewOfTheRange) {
  Batch b = MakeBatch(5);
  auto s = b.Slice(1, 3);
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(SourceRows(*s), ElementsAre(1, 2));
  EXPECT_EQ(s->meta_info(), b.meta_info());
  EXPECT_EQ(s->tensor("a").data_ptr(),
            b.tensor("a").data_ptr<float>() + 3);  // a view of row 1
  auto stepped = b.Slice(0, 5, 2);
  ASSERT_TRUE(stepped.ok());
  EXPECT_THAT(SourceRows(*stepped), ElementsAre(0, 2, 4));
  EXPECT_EQ(b.Slice(2, 2)->size(), 0);
  EXPECT_EQ(b.Slice(3, 2).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(b.Slice(0, 6).ok());
  EXPECT_FALSE(b.Slice(-1, 2).ok());
  EXPECT_FALSE(b.Slice(0, 2, 0).ok());
}

TEST(BatchTest, IndexGathersRowsInOrder) {
  Batch b = MakeBatch();
  auto g = b.Index(std::vector<int64_t>{3, 1, 1, -4});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(SourceRows(*g), ElementsAre(3, 1, 1, 0));
  auto t = b.Index(at::tensor({2, 0}, at::kInt));
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(SourceRows(*t), ElementsAre(2, 0));
  auto mask = b.Index(at::tensor({1, 0, 0, 1}, at::kByte).to(at::kBool));
  ASSERT_TRUE(mask.ok());
  EXPECT_THAT(SourceRows(*mask), ElementsAre(0, 3));
  EXPECT_EQ(b.Index(std::vector<int64_t>{})->size(), 0);

  EXPECT_THAT(b.Index(std::vector<int64_t>{4}).status().ToString(),
              HasSubstr("index 4 out of range for batch size 4"));
  EXPECT_FALSE(b.Index(std::vector<int64_t>{-5}).ok());
  EXPECT_FALSE(b.Index(at::tensor({1.0f})).ok());
  EXPECT_FALSE(b.Index(at::ones({2}, at::kBool)).ok());  // wrong mask length
  EXPECT_FALSE(b.Index(at::zeros({2, 2}, at::kLong)).ok());

  ASSERT_TRUE(b.Reorder(at::tensor({1, 0, 3, 2}, at::kLong)).ok());
  EXPECT_THAT(SourceRows(b), ElementsAre(1, 0, 3, 2));
}

TEST(BatchTest, ChunkRequiresDivisibility) {
  Batch b = MakeBatch(6);
  auto c = b.Chunk(3);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->size(), 3u);
  EXPECT_THAT(SourceRows((*c)[0]), ElementsAre(0, 1));
  EXPECT_THAT(SourceRows((*c)[1]), ElementsAre(2, 3));
  EXPECT_THAT(SourceRows((*c)[2]), ElementsAre(4, 5));
  EXPECT_EQ((*c)[2].meta_info(), b.meta_info());
  EXPECT_EQ(b.Chunk(6)->size(), 6u);
  EXPECT_THAT(b.Chunk(4).status().ToString(),
              HasSubstr("cannot split a batch of 6 rows into 4 equal chunks"));
  EXPECT_FALSE(b.Chunk(0).ok());
  EXPECT_FALSE(b.Chunk(-2).ok());
  // An empty batch splits into empty chunks.
  auto empty = MakeBatch(0).Chunk(2);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)[1].size(), 0);
}

TEST(BatchTest, SplitBySizes) {
  Batch b = MakeBatch(4);
  auto parts = b.Split({1, 0, 3});
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_THAT(SourceRows((*parts)[0]), ElementsAre(0));
  EXPECT_EQ((*parts)[1].size(), 0);
  EXPECT_THAT(SourceRows((*parts)[2]), ElementsAre(1, 2, 3));
  EXPECT_FALSE(b.Split({1, 2}).ok());
  EXPECT_FALSE(b.Split({5, -1}).ok());
  EXPECT_FALSE(b.Split({std::numeric_limits<int64_t>::max(), 1}).ok());
}

TEST(BatchTest, SplitEveryLeavesARemainder) {
  Batch b = MakeBatch(5);
  auto parts = b.SplitEvery(2);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_THAT(SourceRows((*parts)[0]), ElementsAre(0, 1));
  EXPECT_THAT(SourceRows((*parts)[1]), ElementsAre(2, 3));
  EXPECT_THAT(SourceRows((*parts)[2]), ElementsAre(4));
  EXPECT_EQ(b.SplitEvery(5)->size(), 1u);
  EXPECT_EQ(b.SplitEvery(9)->size(), 1u);
  EXPECT_TRUE(MakeBatch(0).SplitEvery(3)->empty());
  EXPECT_FALSE(b.SplitEvery(0).ok());
}

TEST(BatchTest, RepeatInterleaveVersusTiled) {
  Batch b = MakeBatch(3);
  auto inter = b.Repeat(2, /*interleave=*/true);
  ASSERT_TRUE(inter.ok());
  EXPECT_THAT(SourceRows(*inter), ElementsAre(0, 0, 1, 1, 2, 2));
  auto tiled = b.Repeat(2, /*interleave=*/false);
  ASSERT_TRUE(tiled.ok());
  EXPECT_THAT(SourceRows(*tiled), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_THAT(SourceRows(*b.Repeat(1)), ElementsAre(0, 1, 2));
  // Agrees with LibTorch's own repeat_interleave / repeat on the tensors.
  EXPECT_TRUE(
      inter->tensor("a").equal(b.tensor("a").repeat_interleave(2, /*dim=*/0)));
  EXPECT_TRUE(tiled->tensor("a").equal(b.tensor("a").repeat({2, 1})));
  EXPECT_EQ(inter->meta_info(), b.meta_info());
  EXPECT_FALSE(b.Repeat(0).ok());
}

TEST(BatchTest, PadToDivisorCyclesLeadingRows) {
  Batch b = MakeBatch(4);
  auto p = b.PadToDivisor(3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->second, 2);
  EXPECT_THAT(SourceRows(p->first), ElementsAre(0, 1, 2, 3, 0, 1));
  auto unpadded = p->first.Unpad(p->second);
  ASSERT_TRUE(unpadded.ok());
  EXPECT_TRUE(unpadded->Equal(b));

  auto none = b.PadToDivisor(4);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->second, 0);
  EXPECT_TRUE(none->first.Equal(b));

  // More padding than rows: verl repeats the whole batch, then a prefix.
  auto big = MakeBatch(2).PadToDivisor(7);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->second, 5);
  EXPECT_THAT(SourceRows(big->first), ElementsAre(0, 1, 0, 1, 0, 1, 0));

  EXPECT_EQ(MakeBatch(0).PadToDivisor(4)->second, 0);
  EXPECT_FALSE(b.PadToDivisor(0).ok());
  EXPECT_FALSE(b.Unpad(5).ok());
  EXPECT_FALSE(b.Unpad(-1).ok());
}

TEST(BatchTest, ConcatInvertsChunk) {
  Batch b = MakeBatch(6);
  auto chunks = b.Chunk(3);
  ASSERT_TRUE(chunks.ok());
  std::vector<Batch> reversed(chunks->rbegin(), chunks->rend());
  auto cat = Batch::Concat(reversed);
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_THAT(SourceRows(*cat), ElementsAre(4, 5, 2, 3, 0, 1));
  auto same = Batch::Concat(*chunks);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->Equal(b));
  EXPECT_EQ(Batch::Concat({})->size(), 0);
}

TEST(BatchTest, ConcatRejectsMismatches) {
  Batch b = MakeBatch(2);
  Batch wrong_dtype = MakeBatch(2);
  ASSERT_TRUE(wrong_dtype.SetTensor("a", at::zeros({2, 3}, at::kDouble)).ok());
  EXPECT_THAT(Batch::Concat({b, wrong_dtype}).status().ToString(),
              HasSubstr("tensor 'a' is Double[2, 3]"));
  Batch wrong_shape = MakeBatch(2);
  ASSERT_TRUE(wrong_shape.SetTensor("a", at::zeros({2, 4})).ok());
  EXPECT_THAT(Batch::Concat({b, wrong_shape}).status().ToString(),
              HasSubstr("trailing shape"));
  Batch fewer = MakeBatch(2);
  ASSERT_TRUE(fewer.PopNonTensor("uid").ok());
  EXPECT_THAT(Batch::Concat({b, fewer}).status().ToString(),
              HasSubstr("batch 1 has keys"));
  Batch other_meta = MakeBatch(2);
  other_meta.meta_info()["temperature"] = 1.0;
  EXPECT_THAT(Batch::Concat({b, other_meta}).status().ToString(),
              HasSubstr("meta_info key 'temperature'"));
}

TEST(BatchTest, ConcatMergesMetaAndMetrics) {
  Batch x = MakeBatch(1), y = MakeBatch(1), z = MakeBatch(1);
  x.meta_info()["metrics"] = {{"loss", 1.0}, {"acc", 0.5}};
  y.meta_info()["metrics"] =
      Json::array({Json{{"loss", 2.0}, {"acc", 0.25}}, Json{{"loss", 3.0}}});
  y.meta_info()["only_y"] = "y";
  auto cat = Batch::Concat({x, y, z});
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_EQ(cat->meta_info()["metrics"],
            (Json{{"loss", {1.0, 2.0, 3.0}}, {"acc", {0.5, 0.25}}}));
  EXPECT_EQ(cat->meta_info()["only_y"], "y");
  EXPECT_EQ(cat->meta_info()["temperature"], 0.7);
  z.meta_info()["metrics"] = {{"new_key", 1}};
  EXPECT_THAT(Batch::Concat({x, z}).status().ToString(),
              HasSubstr("'new_key'"));
}

TEST(BatchTest, UnionMergesAndDetectsConflicts) {
  Batch b = MakeBatch(3);
  auto left = b.Select(Keys{"a"}, Keys{"uid"}, Keys{"temperature"});
  auto right = b.Select(Keys{"a", "ids"}, Keys{"rm"}, Keys{});
  ASSERT_TRUE(left.ok() && right.ok());
  right->meta_info()["step"] = 2;
  ASSERT_TRUE(left->Union(*right).ok());
  EXPECT_THAT(SourceRows(*left), ElementsAre(0, 1, 2));
  EXPECT_EQ(left->meta_info(), (Json{{"temperature", 0.7}, {"step", 2}}));

  // Same key, different content: error, and nothing changes.
  Batch conflict = MakeBatch(3);
  ASSERT_TRUE(conflict.SetTensor("a", at::zeros({3, 3})).ok());
  ASSERT_TRUE(conflict.SetTensor("extra", at::zeros({3})).ok());
  Batch before = b;
  absl::Status s = b.Union(conflict);
  EXPECT_THAT(s.ToString(), HasSubstr("tensor 'a' exists in both"));
  EXPECT_FALSE(b.HasTensor("extra"));
  EXPECT_TRUE(b.Equal(before));
  // Same values but another dtype is a conflict too.
  Batch dtype = MakeBatch(3);
  ASSERT_TRUE(dtype.SetTensor("ids", b.tensor("ids").to(at::kInt)).ok());
  EXPECT_FALSE(b.Union(dtype).ok());

  Batch json_conflict = MakeBatch(3);
  ASSERT_TRUE(json_conflict.SetNonTensor("uid", {"x", "y", "z"}).ok());
  EXPECT_THAT(b.Union(json_conflict).ToString(),
              HasSubstr("non-tensor column 'uid'"));
  Batch meta_conflict = MakeBatch(3);
  meta_conflict.meta_info()["temperature"] = 1.0;
  EXPECT_THAT(b.Union(meta_conflict).ToString(),
              HasSubstr("meta_info key 'temperature'"));
  EXPECT_THAT(b.Union(MakeBatch(2)).ToString(),
              HasSubstr("batch sizes differ (3 vs 2)"));

  // Union with an identical copy, and into an empty batch.
  ASSERT_TRUE(b.Union(MakeBatch(3)).ok());
  EXPECT_TRUE(b.Equal(MakeBatch(3)));
  Batch empty;
  ASSERT_TRUE(empty.Union(b).ok());
  EXPECT_TRUE(empty.Equal(b));
}

TEST(BatchTest, DebugStringListsColumns) {
  EXPECT_EQ(MakeBatch(2).DebugString(),
            "Batch(size=2, tensors={a: Float[2, 3], ids: Long[2]}, "
            "non_tensors={rm, uid}, meta={temperature})");
}

// ---- Serialization
// -----------------------------------------------------------

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

TEST(BatchSerializeTest, RoundTripsEveryDtypeAndLayout) {
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

  const std::string bytes = b.Serialize();
  auto back = Batch::Deserialize(bytes);
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
  EXPECT_EQ(back->Serialize(), bytes);  // deterministic
}

TEST(BatchSerializeTest, RoundTripsEmptyBatches) {
  for (const Batch& b : {Batch(), MakeBatch(0), MakeBatch(1)}) {
    auto back = Batch::Deserialize(b.Serialize());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(back->Equal(b)) << b.DebugString();
    EXPECT_EQ(back->TensorKeys(), b.TensorKeys());
  }
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

TEST(BatchSerializeTest, WireFormatMatchesIndependentEncoder) {
  const std::string bytes = Wire().Encode();
  auto b = Batch::Deserialize(bytes);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->size(), 2);
  EXPECT_TRUE(b->tensor("x").equal(at::tensor({7, -1}, at::kInt)));
  EXPECT_EQ(b->non_tensor("uid"), (std::vector<Json>{"a", "b"}));
  EXPECT_EQ(b->meta_info(), (Json{{"k", 1}}));
  EXPECT_EQ(b->Serialize(), bytes);
}

TEST(BatchSerializeTest, EveryTruncationIsAnError) {
  for (const std::string& bytes : {Wire().Encode(), MakeBatch(3).Serialize()}) {
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto b = Batch::Deserialize(absl::string_view(bytes.data(), n));
      EXPECT_FALSE(b.ok()) << "prefix of " << n << " bytes parsed";
    }
    EXPECT_TRUE(Batch::Deserialize(bytes).ok());
  }
}

TEST(BatchSerializeTest, MalformedFieldsAreErrors) {
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
       "Batch::Deserialize"},
      {"name len", [](Wire* w) { w->name_len = 0xffffffffu; }, "truncated"},
      {"dtype", [](Wire* w) { w->dtype = 99; }, "unknown dtype code 99"},
      {"ndim 0", [](Wire* w) { w->ndim = 0; }, "bad ndim"},
      {"ndim huge", [](Wire* w) { w->ndim = 1000; }, "bad ndim"},
      {"ndim overrun", [](Wire* w) { w->ndim = 60; }, "Batch::Deserialize"},
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
    auto b = Batch::Deserialize(w.Encode());
    ASSERT_FALSE(b.ok()) << c.name;
    EXPECT_THAT(b.status().ToString(), HasSubstr(c.message)) << c.name;
  }
}

TEST(BatchSerializeTest, RandomCorruptionNeverCrashes) {
  const std::string good = MakeBatch(3).Serialize();
  std::mt19937 rng(123);
  int failures = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = good;
    const int flips = 1 + iter % 4;
    for (int f = 0; f < flips; ++f) {
      bad[rng() % bad.size()] = static_cast<char>(rng() & 0xff);
    }
    auto b = Batch::Deserialize(bad);
    if (!b.ok()) {
      ++failures;
    } else {
      // Whatever parses is a valid batch that round-trips.
      EXPECT_EQ(Batch::Deserialize(b->Serialize())->size(), b->size());
    }
  }
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace core
}  // namespace verl
