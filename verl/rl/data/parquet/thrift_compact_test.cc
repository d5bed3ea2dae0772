// Thrift compact protocol: hand-encoded bytes from the protocol spec decode
// to the expected tree, encode/decode round-trips, and malformed input fails
// with a Status (never reads out of bounds).
#include "verl/rl/data/parquet/thrift_compact.h"

#include <string>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::rl::parquet {
namespace {

using ::verl::core::testing::StatusIs;

using T = ThriftType;

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

TEST(ThriftCompactTest, DecodesSpecBytes) {
  // field 1 i32 = -2 (zigzag 3); field 2 bool true (nibble 1); field 3
  // binary "hi"; field 20 (long form: nibble type, zigzag id 40) i64 = 300
  // (zigzag 600 = 0xd8 0x04); field 21 list<i32> [1, -1]; field 22 struct
  // {1: bool false}; stop.
  const std::string b =
      Bytes({0x15, 0x03, 0x11, 0x18, 0x02, 'h',  'i',  0x06, 0x28, 0xd8,
             0x04, 0x19, 0x25, 0x02, 0x01, 0x1c, 0x12, 0x00, 0x00, 0xff});
  size_t used = 0;
  auto v = DecodeThriftStruct(b, &used);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(used, b.size() - 1);  // the trailing 0xff is not part of it
  ASSERT_EQ(v->fields.size(), 6u);
  EXPECT_EQ(v->Find(1)->i, -2);
  EXPECT_EQ(v->Find(2)->type, T::kBool);
  EXPECT_EQ(v->Find(2)->i, 1);
  EXPECT_EQ(v->Find(3)->bin, "hi");
  EXPECT_EQ(v->Find(20)->type, T::kI64);
  EXPECT_EQ(v->Find(20)->i, 300);
  ASSERT_EQ(v->Find(21)->items.size(), 2u);
  EXPECT_EQ(v->Find(21)->items[1].i, -1);
  EXPECT_EQ(v->Find(22)->Find(1)->i, 0);

  StructReader r(*v, "Test");
  EXPECT_EQ(r.I32(1, "a", true), -2);
  EXPECT_TRUE(r.Bool(2, "b", false));
  EXPECT_EQ(r.Binary(3, "c", true), "hi");
  EXPECT_EQ(r.I64(20, "d", true), 300);
  EXPECT_EQ(r.List(21, "e", true, T::kI32)->size(), 2u);
  EXPECT_TRUE(r.status().ok()) << r.status();
}

TEST(ThriftCompactTest, RoundTrip) {
  ThriftValue inner;
  inner.Add(1, ThriftValue::Binary(std::string(300, 'x')));
  std::vector<ThriftValue> many;
  for (int i = 0; i < 40; ++i)
    many.push_back(ThriftValue::Int(T::kI64, -i * 1000003LL));
  ThriftValue v;
  v.Add(1, ThriftValue::Int(T::kI32, 2147483647))
      .Add(2, ThriftValue::Bool(false))
      .Add(5, ThriftValue::Int(T::kI16, -32768))
      .Add(17, ThriftValue::List(T::kI64, many))  // long list header
      .Add(40, std::move(inner))                  // long field id form
      .Add(41, ThriftValue::Int(T::kI8, -5));
  ThriftValue d;
  d.type = T::kDouble;
  d.d = 3.25;
  v.Add(100, d);
  const std::string enc = EncodeThriftStruct(v);
  size_t used;
  auto back = DecodeThriftStruct(enc, &used);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(used, enc.size());
  EXPECT_EQ(EncodeThriftStruct(*back), enc);
  EXPECT_EQ(back->Find(17)->items[39].i, -39 * 1000003LL);
  EXPECT_EQ(back->Find(40)->Find(1)->bin.size(), 300u);
  EXPECT_EQ(back->Find(100)->d, 3.25);
  EXPECT_EQ(back->Find(41)->i, -5);
}

TEST(ThriftCompactTest, WrongTypeAndMissingFieldsName) {
  ThriftValue v;
  v.Add(1, ThriftValue::Binary("not an int"));
  StructReader r(v, "PageHeader");
  r.I32(1, "type", true);
  EXPECT_EQ(r.status().message(),
            "PageHeader: field type (1) has wire type binary, expected i32");
  StructReader m(v, "PageHeader");
  m.I32(2, "uncompressed_page_size", true);
  EXPECT_EQ(m.status().message(),
            "PageHeader: required field uncompressed_page_size (2) is missing");
  ThriftValue big;
  big.Add(1, ThriftValue::Int(T::kI64, int64_t{1} << 40));
  StructReader b(big, "X");
  b.I32(1, "n", true);
  EXPECT_NE(b.status().message().find("does not fit in i32"),
            std::string::npos);
}

TEST(ThriftCompactTest, MalformedInputFails) {
  const std::vector<std::string> bad = {
      "",                                     // nothing
      Bytes({0x15}),                          // field without value
      Bytes({0x15, 0x80}),                    // truncated varint
      Bytes({0x18, 0x05, 'a'}),               // binary past the end
      Bytes({0x19, 0xf5, 0xff, 0xff, 0x7f}),  // list of 2M items, no bytes
      Bytes({0x1d}),                          // wire type 13
      Bytes({0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
             0x01}),                                      // varint > 10 bytes
      Bytes({0x15, 0xfe, 0xff, 0xff, 0xff, 0x1f, 0x00}),  // i32 overflow
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_THAT(DecodeThriftStruct(bad[i]),
                StatusIs(absl::StatusCode::kInvalidArgument, "thrift"))
        << i;
  }
  // 40 nested structs exceed the depth limit.
  std::string deep;
  for (int i = 0; i < 40; ++i) deep.push_back(0x1c);
  deep += std::string(41, '\0');
  auto d = DecodeThriftStruct(deep);
  ASSERT_THAT(d, StatusIs(absl::StatusCode::kInvalidArgument,
                          "thrift: nesting deeper than 32 at byte 33"));
  EXPECT_NE(d.status().message().find("deeper"), std::string::npos);
}

}  // namespace
}  // namespace verl::rl::parquet
