// File: verl/core/batch_test.cc
//
// Every Batch operation against hand-computed row orders (the wire format is
// tested in batch_wire_test.cc).
#include "verl/core/batch.h"

#include <ATen/ATen.h>

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl {
namespace core {
namespace {

using ::verl::core::testing::StatusIs;

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
  EXPECT_THAT(bad,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Batch: tensor 'y' has 3 rows but the batch size is 2"));
  EXPECT_THAT(Batch::FromColumns({}, {}, Json::array()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Batch: meta_info must be a JSON object, got array"));
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
  EXPECT_THAT(b.Pop({"a"}, {"missing"}),
              StatusIs(absl::StatusCode::kNotFound,
                       "Batch: no non-tensor column 'missing'"));
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
  EXPECT_THAT(
      b.PopNonTensor("rm"),
      StatusIs(absl::StatusCode::kNotFound,
               "Batch: no non-tensor column 'rm' (non-tensor columns: [])"));
}

TEST(BatchTest, Rename) {
  Batch b = MakeBatch();
  ASSERT_TRUE(b.Rename("ids", "input_ids").ok());
  EXPECT_THAT(b.TensorKeys(), ElementsAre("a", "input_ids"));
  ASSERT_TRUE(b.Rename("uid", "group").ok());
  EXPECT_THAT(b.NonTensorKeys(), ElementsAre("group", "rm"));
  EXPECT_THAT(b.Rename("a", "input_ids"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Batch::Rename: tensor 'input_ids' already exists"));
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
  EXPECT_THAT(
      b.Slice(0, 6),
      StatusIs(absl::StatusCode::kOutOfRange,
               "Batch::Slice: bad range [0, 6) step 1 for batch size 5"));
  EXPECT_THAT(
      b.Slice(-1, 2),
      StatusIs(absl::StatusCode::kOutOfRange,
               "Batch::Slice: bad range [-1, 2) step 1 for batch size 5"));
  EXPECT_THAT(
      b.Slice(0, 2, 0),
      StatusIs(absl::StatusCode::kOutOfRange,
               "Batch::Slice: bad range [0, 2) step 0 for batch size 5"));
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
  EXPECT_THAT(b.Index(std::vector<int64_t>{-5}),
              StatusIs(absl::StatusCode::kOutOfRange,
                       "Batch::Index: index -5 out of range for batch size 4"));
  EXPECT_THAT(
      b.Index(at::tensor({1.0f})),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "Batch::Index: indices must be integer or bool, got Float"));
  EXPECT_THAT(b.Index(at::ones({2}, at::kBool)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Batch::Index: bool mask has length 2 but the batch "
                       "size is 4"));  // wrong mask length
  EXPECT_THAT(b.Index(at::zeros({2, 2}, at::kLong)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Batch::Index: indices must be a defined 1-D tensor"));

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
  EXPECT_THAT(
      b.Chunk(0),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "Batch::Chunk: cannot split a batch of 6 rows into 0 equal"));
  EXPECT_THAT(
      b.Chunk(-2),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "Batch::Chunk: cannot split a batch of 6 rows into -2 equal"));
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
  EXPECT_THAT(
      b.Split({1, 2}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "Batch::Split: sizes [1, 2] add up to 3, not the batch size 4"));
  EXPECT_THAT(
      b.Split({5, -1}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "Batch::Split: sizes [5, -1] do not add up to the batch size"));
  EXPECT_THAT(b.Split({std::numeric_limits<int64_t>::max(), 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, "Batch::Split"));
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
  EXPECT_THAT(b.SplitEvery(0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Batch::SplitEvery: part size must be >= 1, got 0"));
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
  EXPECT_THAT(b.Repeat(0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Batch::Repeat: bad repeat count 0 for batch size 3"));
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
  EXPECT_THAT(b.PadToDivisor(0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "Batch::PadToDivisor: divisor must be >= 1, got 0"));
  EXPECT_THAT(
      b.Unpad(5),
      StatusIs(absl::StatusCode::kOutOfRange,
               "Batch::Unpad: pad size 5 out of range for batch size 4"));
  EXPECT_THAT(
      b.Unpad(-1),
      StatusIs(absl::StatusCode::kOutOfRange,
               "Batch::Unpad: pad size -1 out of range for batch size 4"));
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
  EXPECT_THAT(
      b.Union(dtype),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "Batch::Union: tensor 'ids' exists in both batches with"));

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

}  // namespace
}  // namespace core
}  // namespace verl
