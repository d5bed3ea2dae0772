#include "verl/rl/data/parquet/parquet_column.h"

#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "verl/rl/data/parquet/parquet_codec.h"

namespace verl::rl::parquet {
namespace {

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

// Reads a 4-byte little-endian length prefix and the run it announces.
absl::StatusOr<absl::string_view> Prefixed(absl::string_view* data,
                                           const char* what) {
  if (data->size() < 4) return Corrupt(absl::StrCat(what, " length truncated"));
  uint32_t n;
  std::memcpy(&n, data->data(), 4);
  if (n > data->size() - 4) {
    return Corrupt(absl::StrCat(what, " of ", n, " bytes past the page end"));
  }
  absl::string_view run = data->substr(4, n);
  data->remove_prefix(4 + n);
  return run;
}

class ChunkDecoder {
 public:
  ChunkDecoder(const ColumnMetaData& meta, int max_def, int max_rep,
               int32_t type_length)
      : meta_(meta),
        max_def_(max_def),
        max_rep_(max_rep),
        type_length_(type_length) {}

  absl::StatusOr<ColumnData> Run(absl::string_view chunk) {
    if (meta_.num_values < 0 || meta_.num_values > kMaxChunkValues) {
      return Corrupt(absl::StrCat("column chunk claims ", meta_.num_values,
                                  " values (limit ", kMaxChunkValues, ")"));
    }
    size_t pos = 0;
    while (static_cast<int64_t>(out_.def.size()) < meta_.num_values) {
      if (pos >= chunk.size()) {
        return Corrupt(absl::StrCat("column chunk ends after ", out_.def.size(),
                                    " of ", meta_.num_values, " values"));
      }
      size_t hlen = 0;
      auto h = ParsePageHeader(chunk.substr(pos), &hlen);
      if (!h.ok()) return h.status();
      pos += hlen;
      if (h->compressed_page_size > chunk.size() - pos) {
        return Corrupt(absl::StrCat("page of ", h->compressed_page_size,
                                    " bytes at chunk offset ", pos,
                                    " runs past the end of the column chunk (",
                                    chunk.size() - pos, " bytes left)"));
      }
      if (h->uncompressed_page_size > kMaxPageBytes) {
        return Corrupt(absl::StrCat("page of ", h->uncompressed_page_size,
                                    " bytes exceeds the 256 MiB limit"));
      }
      if (h->num_values > kMaxPageValues ||
          h->num_values >
              meta_.num_values - static_cast<int64_t>(out_.def.size())) {
        return Corrupt(absl::StrCat(
            "page claims ", h->num_values, " values; the chunk has ",
            meta_.num_values - static_cast<int64_t>(out_.def.size()),
            " left (page limit ", kMaxPageValues, ")"));
      }
      const absl::string_view body = chunk.substr(pos, h->compressed_page_size);
      pos += h->compressed_page_size;
      absl::Status s;
      switch (h->type) {
        case PageType::kDictionaryPage:
          s = Dictionary(*h, body);
          break;
        case PageType::kDataPage:
          s = DataV1(*h, body);
          break;
        case PageType::kDataPageV2:
          s = DataV2(*h, body);
          break;
        case PageType::kIndexPage:
          break;
      }
      if (!s.ok()) return s;
    }
    if (static_cast<int64_t>(out_.def.size()) != meta_.num_values) {
      return Corrupt(absl::StrCat("pages hold ", out_.def.size(),
                                  " values, column metadata says ",
                                  meta_.num_values));
    }
    return std::move(out_);
  }

 private:
  absl::Status Dictionary(const PageHeader& h, absl::string_view body) {
    if (dict_) return Corrupt("second dictionary page in a column chunk");
    if (h.encoding != Encoding::kPlain &&
        h.encoding != Encoding::kPlainDictionary) {
      return Corrupt(
          absl::StrCat("dictionary page encoding ", EncodingName(h.encoding)));
    }
    auto raw = Decompress(meta_.codec, body, h.uncompressed_page_size);
    if (!raw.ok()) return raw.status();
    dict_.emplace();
    return DecodePlain(meta_.type, type_length_, *raw, h.num_values, &*dict_);
  }

  absl::Status Levels(absl::string_view data, int max, int64_t n,
                      std::vector<int32_t>* out, const char* what) {
    const size_t before = out->size();
    if (max == 0) {
      out->insert(out->end(), n, 0);
      return absl::OkStatus();
    }
    if (auto s = DecodeRleHybrid(data, BitWidth(max), n, out); !s.ok()) {
      return Corrupt(absl::StrCat(what, " levels: ", s.message()));
    }
    for (size_t i = before; i < out->size(); ++i) {
      if ((*out)[i] > max) {
        return Corrupt(absl::StrCat(what, " level ", (*out)[i],
                                    " exceeds the maximum ", max));
      }
    }
    return absl::OkStatus();
  }

  int64_t NonNull(size_t first_level) const {
    int64_t n = 0;
    for (size_t i = first_level; i < out_.def.size(); ++i) {
      n += out_.def[i] == max_def_;
    }
    return n;
  }

  absl::Status DataV1(const PageHeader& h, absl::string_view body) {
    auto raw = Decompress(meta_.codec, body, h.uncompressed_page_size);
    if (!raw.ok()) return raw.status();
    absl::string_view data = *raw;
    const size_t first = out_.def.size();
    for (auto [max, enc, levels, what] :
         {std::make_tuple(max_rep_, h.repetition_level_encoding, &out_.rep,
                          "repetition"),
          std::make_tuple(max_def_, h.definition_level_encoding, &out_.def,
                          "definition")}) {
      absl::string_view run;
      if (max > 0) {
        if (enc != Encoding::kRle) {
          return Corrupt(absl::StrCat(what, " level encoding ",
                                      EncodingName(enc), " is not supported"));
        }
        auto r = Prefixed(&data, what);
        if (!r.ok()) return r.status();
        run = *r;
      }
      if (auto s = Levels(run, max, h.num_values, levels, what); !s.ok()) {
        return s;
      }
    }
    return Values(h.encoding, data, NonNull(first));
  }

  absl::Status DataV2(const PageHeader& h, absl::string_view body) {
    const uint64_t lv = static_cast<uint64_t>(h.repetition_levels_byte_length) +
                        h.definition_levels_byte_length;
    if (lv > body.size() ||
        lv > static_cast<uint64_t>(h.uncompressed_page_size)) {
      return Corrupt("data page v2 level lengths exceed the page");
    }
    const size_t first = out_.def.size();
    if (auto s = Levels(body.substr(0, h.repetition_levels_byte_length),
                        max_rep_, h.num_values, &out_.rep, "repetition");
        !s.ok()) {
      return s;
    }
    if (auto s = Levels(body.substr(h.repetition_levels_byte_length,
                                    h.definition_levels_byte_length),
                        max_def_, h.num_values, &out_.def, "definition");
        !s.ok()) {
      return s;
    }
    const absl::string_view rest = body.substr(lv);
    const size_t values_size = h.uncompressed_page_size - lv;
    std::string raw;
    if (h.is_compressed && meta_.codec != Codec::kUncompressed) {
      auto d = Decompress(meta_.codec, rest, values_size);
      if (!d.ok()) return d.status();
      raw = *std::move(d);
    } else {
      raw.assign(rest.data(), rest.size());
    }
    return Values(h.encoding, raw, NonNull(first));
  }

  absl::Status Values(Encoding enc, absl::string_view data, int64_t n) {
    ColumnValues& v = out_.values;
    const PhysicalType type = meta_.type;
    switch (enc) {
      case Encoding::kPlain:
        return DecodePlain(type, type_length_, data, n, &v);
      case Encoding::kPlainDictionary:
      case Encoding::kRleDictionary: {
        if (!dict_)
          return Corrupt("dictionary-encoded page without a dictionary");
        if (n == 0) return absl::OkStatus();
        if (data.empty()) return Corrupt("dictionary page data is empty");
        std::vector<int32_t> idx;
        const int width = static_cast<uint8_t>(data[0]);
        if (auto s = DecodeRleHybrid(data.substr(1), width, n, &idx); !s.ok()) {
          return Corrupt(absl::StrCat("dictionary indices: ", s.message()));
        }
        for (int32_t i : idx) {
          if (i < 0 || static_cast<size_t>(i) >= dict_->size()) {
            return Corrupt(absl::StrCat("dictionary index ", i,
                                        " out of range (dictionary has ",
                                        dict_->size(), " entries)"));
          }
          v.AppendFrom(*dict_, i);
        }
        return absl::OkStatus();
      }
      case Encoding::kRle: {
        if (type != PhysicalType::kBoolean) break;
        auto run = Prefixed(&data, "RLE boolean run");
        if (!run.ok()) return run.status();
        std::vector<int32_t> bits;
        if (auto s = DecodeRleHybrid(*run, 1, n, &bits); !s.ok()) return s;
        v.ints.insert(v.ints.end(), bits.begin(), bits.end());
        return absl::OkStatus();
      }
      case Encoding::kDeltaBinaryPacked:
        if (type != PhysicalType::kInt32 && type != PhysicalType::kInt64) break;
        return DecodeDeltaBinaryPacked(data, n, type == PhysicalType::kInt32,
                                       &v.ints, nullptr);
      case Encoding::kDeltaLengthByteArray:
        if (type != PhysicalType::kByteArray) break;
        return DecodeDeltaLengthByteArray(data, n, &v.bytes);
      case Encoding::kDeltaByteArray:
        if (type != PhysicalType::kByteArray &&
            type != PhysicalType::kFixedLenByteArray) {
          break;
        }
        return DecodeDeltaByteArray(data, n, &v.bytes);
      case Encoding::kByteStreamSplit:
        return DecodeByteStreamSplit(type, type_length_, data, n, &v);
      default:
        break;
    }
    return absl::UnimplementedError(absl::StrCat(
        "encoding ", EncodingName(enc), " (", static_cast<int>(enc),
        ") is not supported for ", PhysicalTypeName(type)));
  }

  const ColumnMetaData& meta_;
  const int max_def_;
  const int max_rep_;
  const int32_t type_length_;
  std::optional<ColumnValues> dict_;
  ColumnData out_;
};

}  // namespace

absl::StatusOr<ColumnData> ReadColumnChunk(absl::string_view chunk,
                                           const ColumnMetaData& meta,
                                           int max_def, int max_rep,
                                           int32_t type_length) {
  return ChunkDecoder(meta, max_def, max_rep, type_length).Run(chunk);
}

}  // namespace verl::rl::parquet
