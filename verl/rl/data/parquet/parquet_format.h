// File: verl/rl/data/parquet/parquet_format.h
//
// The parts of parquet.thrift (apache/parquet-format) that a reader and writer
// of datasets need: file footer, schema, row groups, column chunks and page
// headers, parsed from / serialized to the Thrift compact protocol. Fields
// the project does not use (statistics, indexes, bloom filters, encryption)
// are skipped on read and not written.
#ifndef VERL_RL_DATA_PARQUET_PARQUET_FORMAT_H_
#define VERL_RL_DATA_PARQUET_PARQUET_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl::rl::parquet {

enum class PhysicalType : int32_t {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kInt96 = 3,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixedLenByteArray = 7,
};

enum class Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };

// ConvertedType values the reader acts on.
enum ConvertedType : int32_t {
  kConvUtf8 = 0,
  kConvMap = 1,
  kConvMapKeyValue = 2,
  kConvList = 3,
  kConvEnum = 4,
  kConvDecimal = 5,
  kConvUint8 = 11,
  kConvUint64 = 14,
  kConvJson = 19,
};

enum class Encoding : int32_t {
  kPlain = 0,
  kPlainDictionary = 2,
  kRle = 3,
  kBitPacked = 4,
  kDeltaBinaryPacked = 5,
  kDeltaLengthByteArray = 6,
  kDeltaByteArray = 7,
  kRleDictionary = 8,
  kByteStreamSplit = 9,
};

enum class Codec : int32_t {
  kUncompressed = 0,
  kSnappy = 1,
  kGzip = 2,
  kLzo = 3,
  kBrotli = 4,
  kLz4 = 5,
  kZstd = 6,
  kLz4Raw = 7,
};

enum class PageType : int32_t {
  kDataPage = 0,
  kIndexPage = 1,
  kDictionaryPage = 2,
  kDataPageV2 = 3,
};

const char* PhysicalTypeName(PhysicalType t);
const char* EncodingName(Encoding e);
const char* CodecName(Codec c);

// The LogicalType union, reduced to what changes how a value reads.
enum class Logical {
  kNone,
  kString,
  kMap,
  kList,
  kEnum,
  kJson,
  kDecimal,
  kUnsignedInt,
  kOther
};

struct SchemaElement {
  std::string name;
  std::optional<PhysicalType> type;  // set for leaves only
  int32_t type_length = 0;
  Repetition repetition = Repetition::kRequired;
  bool has_repetition = false;  // the root usually has none
  int32_t num_children = 0;
  std::optional<int32_t> converted_type;
  int32_t scale = 0;
  int32_t precision = 0;
  Logical logical = Logical::kNone;  // from logicalType, else converted_type
};

struct ColumnMetaData {
  PhysicalType type = PhysicalType::kInt32;
  std::vector<Encoding> encodings;
  std::vector<std::string> path_in_schema;
  Codec codec = Codec::kUncompressed;
  int64_t num_values = 0;
  int64_t total_uncompressed_size = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = 0;
  std::optional<int64_t> dictionary_page_offset;
};

struct ColumnChunk {
  std::string file_path;  // external column files are refused
  int64_t file_offset = 0;
  ColumnMetaData meta;
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  int64_t total_byte_size = 0;
  int64_t num_rows = 0;
};

struct KeyValue {
  std::string key;
  std::string value;
};

struct FileMetaData {
  int32_t version = 1;
  std::vector<SchemaElement> schema;  // depth-first, root first
  int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
  std::vector<KeyValue> key_value_metadata;
  std::string created_by;
};

struct PageHeader {
  PageType type = PageType::kDataPage;
  int32_t uncompressed_page_size = 0;
  int32_t compressed_page_size = 0;
  // Data page v1 and v2, and dictionary page fields.
  int32_t num_values = 0;
  Encoding encoding = Encoding::kPlain;
  Encoding definition_level_encoding = Encoding::kRle;
  Encoding repetition_level_encoding = Encoding::kRle;
  // v2 only.
  int32_t num_nulls = 0;
  int32_t num_rows = 0;
  int32_t definition_levels_byte_length = 0;
  int32_t repetition_levels_byte_length = 0;
  bool is_compressed = true;
};

absl::StatusOr<FileMetaData> ParseFileMetaData(absl::string_view bytes);
std::string SerializeFileMetaData(const FileMetaData& md);

// Parses the header at bytes[0]; *consumed receives its length.
absl::StatusOr<PageHeader> ParsePageHeader(absl::string_view bytes,
                                           size_t* consumed);
std::string SerializePageHeader(const PageHeader& h);

}  // namespace verl::rl::parquet

#endif  // VERL_RL_DATA_PARQUET_PARQUET_FORMAT_H_
