#include "verl/ckpt/safetensors_test_util.h"

#include "absl/strings/str_cat.h"

namespace verl::ckpt {

std::string StWithLength(uint64_t header_length, absl::string_view rest) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>((header_length >> (8 * i)) & 0xff);
  }
  return absl::StrCat(out, rest);
}

std::string StFile(absl::string_view header_json, absl::string_view data) {
  return StWithLength(header_json.size(), absl::StrCat(header_json, data));
}

std::vector<MalformedStCase> MalformedStCases() {
  const std::string f32x2 = R"("dtype":"F32","shape":[2])";
  const std::string eight(8, 'x');
  return {
      {"empty", "", "truncated file: 0 bytes"},
      {"short_length", std::string(5, '\0'), "truncated file: 5 bytes"},
      {"huge_length", StWithLength(uint64_t{1} << 63, "{}"),
       "exceeds the limit"},
      {"length_beyond_eof", StWithLength(100, "{}"), "beyond end of file"},
      {"zero_length", StWithLength(0, "abc"), "does not start with '{'"},
      {"array_header", StFile("[1]", ""), "does not start with '{'"},
      {"unterminated_json", StFile("{", ""), "bad JSON header"},
      {"trailing_garbage_json", StFile("{}x", ""), "bad JSON header"},
      {"invalid_utf8_key", StFile("{\"\xff\":1}", ""), "bad JSON header"},
      {"duplicate_key",
       StFile(
           absl::StrCat(R"({"a":{)", f32x2, R"(,"data_offsets":[0,8]},"a":{)",
                        f32x2, R"(,"data_offsets":[8,16]}})"),
           eight + eight),
       "duplicate key 'a'"},
      {"deep_nesting", StFile(R"({"a":{"b":{"c":[[[1]]]}}})", ""),
       "nesting too deep"},
      {"entry_not_object", StFile(R"({"a":1})", ""),
       "tensor 'a': entry is not a JSON object"},
      {"missing_shape",
       StFile(R"({"a":{"dtype":"F32","data_offsets":[0,0]}})", ""),
       "entry needs 'dtype', 'shape' and 'data_offsets'"},
      {"dtype_not_string",
       StFile(R"({"a":{"dtype":4,"shape":[],"data_offsets":[0,4]}})", "1234"),
       "'dtype' is not a string"},
      {"unknown_dtype",
       StFile(R"({"a":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})",
              "1234"),
       "tensor 'a': unknown dtype 'F12'"},
      {"negative_dim",
       StFile(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
              "1234"),
       "negative dimension -1"},
      {"float_dim",
       StFile(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",
              "1234"),
       "dimension must be a non-negative integer"},
      {"dim_beyond_int64",
       StFile(
           R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,4]}})",
           "1234"),
       "overflows int64"},
      {"size_overflow",
       StFile(
           R"({"a":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,8]}})",
           eight),
       "shape x dtype size overflows"},
      {"three_offsets",
       StFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
              "1234"),
       "'data_offsets' is not an array of two integers"},
      {"negative_offset",
       StFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})",
              "1234"),
       "negative data offset -4"},
      {"end_before_begin",
       StFile(absl::StrCat(R"({"a":{)", f32x2, R"(,"data_offsets":[8,0]}})"),
              eight),
       "end before begin"},
      {"offsets_out_of_range",
       StFile(absl::StrCat(R"({"a":{)", f32x2, R"(,"data_offsets":[0,8]}})"),
              "1234"),
       "out of range of the data buffer (4 bytes"},
      {"overlap",
       StFile(
           absl::StrCat(R"({"a":{)", f32x2, R"(,"data_offsets":[0,8]},"b":{)",
                        f32x2, R"(,"data_offsets":[4,12]}})"),
           "123456789012"),
       "tensor 'b': overlaps the previous tensor"},
      {"hole",
       StFile(absl::StrCat(R"({"a":{)", f32x2, R"(,"data_offsets":[4,12]}})"),
              "123456789012"),
       "tensor 'a': hole before the tensor"},
      {"size_mismatch",
       StFile(absl::StrCat(R"({"a":{)", f32x2, R"(,"data_offsets":[0,4]}})"),
              "1234"),
       "size mismatch: shape x F32 needs 8 bytes, data_offsets span 4"},
      {"trailing_bytes",
       StFile(absl::StrCat(R"({"a":{)", f32x2, R"(,"data_offsets":[0,8]}})"),
              eight + "zz"),
       "2 trailing bytes not covered"},
      {"metadata_not_object", StFile(R"({"__metadata__":[1]})", ""),
       "__metadata__ is not a JSON object"},
      {"metadata_value_not_string",
       StFile(R"({"__metadata__":{"format":1}})", ""),
       "__metadata__ value of 'format' is not a string"},
  };
}

}  // namespace verl::ckpt
