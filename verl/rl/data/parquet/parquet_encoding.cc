#include "verl/rl/data/parquet/parquet_encoding.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace verl::rl::parquet {
namespace {

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

// LSB-first bit reader over a byte range.
class BitReader {
 public:
  explicit BitReader(absl::string_view d) : d_(d) {}
  // Reads `width` (<= 64) bits at the current bit position.
  bool Read(int width, uint64_t* v) {
    if (width == 0) {
      *v = 0;
      return true;
    }
    if (bit_ + width > d_.size() * 8) return false;
    uint64_t r = 0;
    int got = 0;
    while (got < width) {
      const size_t byte = bit_ >> 3;
      const int off = bit_ & 7;
      const int take = std::min(8 - off, width - got);
      const uint64_t bits =
          (static_cast<uint8_t>(d_[byte]) >> off) & ((1u << take) - 1);
      r |= bits << got;
      got += take;
      bit_ += take;
    }
    *v = r;
    return true;
  }

 private:
  absl::string_view d_;
  size_t bit_ = 0;
};

bool ReadVarint(absl::string_view d, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= d.size()) return false;
    const uint8_t b = static_cast<uint8_t>(d[(*pos)++]);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

int64_t Unzigzag(uint64_t u) {
  return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
}

template <typename U>
U LoadLE(const char* p) {
  U v;
  std::memcpy(&v, p, sizeof(U));
  return v;
}

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

}  // namespace

void ColumnValues::AppendFrom(const ColumnValues& dict, size_t index) {
  if (!dict.ints.empty()) {
    ints.push_back(dict.ints[index]);
  } else if (!dict.floats.empty()) {
    floats.push_back(dict.floats[index]);
  } else {
    bytes.push_back(dict.bytes[index]);
  }
}

int BitWidth(uint64_t max_value) {
  int w = 0;
  while (max_value) {
    ++w;
    max_value >>= 1;
  }
  return w;
}

absl::Status DecodePlain(PhysicalType type, int32_t type_length,
                         absl::string_view data, int64_t count,
                         ColumnValues* out, size_t* consumed) {
  size_t pos = 0;
  auto need = [&](uint64_t n) {
    return n <= data.size() - pos
               ? absl::OkStatus()
               : Corrupt(absl::StrCat("PLAIN ", PhysicalTypeName(type),
                                      " values run past the page (", count,
                                      " values in ", data.size(), " bytes)"));
  };
  switch (type) {
    case PhysicalType::kBoolean: {
      if (auto s = need((count + 7) / 8); !s.ok()) return s;
      for (int64_t i = 0; i < count; ++i) {
        out->ints.push_back((static_cast<uint8_t>(data[i >> 3]) >> (i & 7)) &
                            1);
      }
      pos = (count + 7) / 8;
      break;
    }
    case PhysicalType::kInt32:
    case PhysicalType::kFloat: {
      if (auto s = need(static_cast<uint64_t>(count) * 4); !s.ok()) return s;
      for (int64_t i = 0; i < count; ++i, pos += 4) {
        if (type == PhysicalType::kInt32) {
          out->ints.push_back(LoadLE<int32_t>(data.data() + pos));
        } else {
          out->floats.push_back(LoadLE<float>(data.data() + pos));
        }
      }
      break;
    }
    case PhysicalType::kInt64:
    case PhysicalType::kDouble: {
      if (auto s = need(static_cast<uint64_t>(count) * 8); !s.ok()) return s;
      for (int64_t i = 0; i < count; ++i, pos += 8) {
        if (type == PhysicalType::kInt64) {
          out->ints.push_back(LoadLE<int64_t>(data.data() + pos));
        } else {
          out->floats.push_back(LoadLE<double>(data.data() + pos));
        }
      }
      break;
    }
    case PhysicalType::kByteArray: {
      for (int64_t i = 0; i < count; ++i) {
        if (auto s = need(4); !s.ok()) return s;
        const uint32_t n = LoadLE<uint32_t>(data.data() + pos);
        pos += 4;
        if (auto s = need(n); !s.ok()) return s;
        out->bytes.emplace_back(data.data() + pos, n);
        pos += n;
      }
      break;
    }
    case PhysicalType::kInt96:
    case PhysicalType::kFixedLenByteArray: {
      const uint64_t w = type == PhysicalType::kInt96 ? 12 : type_length;
      if (w == 0 || w > (1u << 20)) {
        return Corrupt(absl::StrCat("bad fixed length ", w));
      }
      if (auto s = need(static_cast<uint64_t>(count) * w); !s.ok()) return s;
      for (int64_t i = 0; i < count; ++i, pos += w) {
        out->bytes.emplace_back(data.data() + pos, w);
      }
      break;
    }
  }
  if (consumed) *consumed = pos;
  return absl::OkStatus();
}

absl::Status DecodeRleHybrid(absl::string_view data, int bit_width,
                             int64_t count, std::vector<int32_t>* out) {
  if (bit_width < 0 || bit_width > 32) {
    return Corrupt(absl::StrCat("RLE bit width ", bit_width, " > 32"));
  }
  size_t pos = 0;
  int64_t left = count;
  const size_t value_bytes = (bit_width + 7) / 8;
  while (left > 0) {
    uint64_t header;
    if (!ReadVarint(data, &pos, &header)) {
      return Corrupt(absl::StrCat("RLE data ends with ", left, " of ", count,
                                  " values missing"));
    }
    if (header & 1) {  // bit-packed groups of 8
      const uint64_t groups = header >> 1;
      if (groups > data.size()) return Corrupt("RLE bit-packed run too long");
      const uint64_t n = groups * 8;
      const uint64_t nbytes = groups * bit_width;
      if (nbytes > data.size() - pos) {
        return Corrupt("RLE bit-packed run past the end of its data");
      }
      BitReader br(data.substr(pos, nbytes));
      for (uint64_t i = 0; i < n && left > 0; ++i, --left) {
        uint64_t v;
        br.Read(bit_width, &v);
        out->push_back(static_cast<int32_t>(v));
      }
      pos += nbytes;
    } else {
      const uint64_t n = header >> 1;
      if (value_bytes > data.size() - pos) {
        return Corrupt("RLE run value past the end of its data");
      }
      uint32_t v = 0;
      std::memcpy(&v, data.data() + pos, value_bytes);
      pos += value_bytes;
      if (n == 0) return Corrupt("RLE run of length 0");
      const int64_t take = static_cast<int64_t>(std::min<uint64_t>(n, left));
      out->insert(out->end(), take, static_cast<int32_t>(v));
      left -= take;
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeDeltaBinaryPacked(absl::string_view data, int64_t count,
                                     bool is_int32, std::vector<int64_t>* out,
                                     size_t* consumed) {
  size_t pos = 0;
  uint64_t block, minis, total, first;
  if (!ReadVarint(data, &pos, &block) || !ReadVarint(data, &pos, &minis) ||
      !ReadVarint(data, &pos, &total) || !ReadVarint(data, &pos, &first)) {
    return Corrupt("DELTA_BINARY_PACKED header truncated");
  }
  if (block == 0 || block % 128 || minis == 0 || block % minis ||
      (block / minis) % 8 || block > (1u << 20)) {
    return Corrupt(absl::StrCat("DELTA_BINARY_PACKED block size ", block,
                                " with ", minis, " miniblocks is invalid"));
  }
  // Padding beyond `count` is tolerated up to one block (bounds memory).
  if (total < static_cast<uint64_t>(count) || total - count > block) {
    return Corrupt(absl::StrCat("DELTA_BINARY_PACKED holds ", total,
                                " values, page needs ", count));
  }
  const uint64_t per_mini = block / minis;
  uint64_t last = static_cast<uint64_t>(Unzigzag(first));
  auto emit = [&](uint64_t v) {
    out->push_back(is_int32 ? static_cast<int32_t>(v)
                            : static_cast<int64_t>(v));
  };
  if (total > 0) emit(last);
  uint64_t done = total > 0 ? 1 : 0;
  while (done < total) {
    uint64_t min_delta_z;
    if (!ReadVarint(data, &pos, &min_delta_z)) {
      return Corrupt("DELTA_BINARY_PACKED block header truncated");
    }
    const uint64_t min_delta = static_cast<uint64_t>(Unzigzag(min_delta_z));
    if (minis > data.size() - pos) {
      return Corrupt("DELTA_BINARY_PACKED bit widths truncated");
    }
    const absl::string_view widths = data.substr(pos, minis);
    pos += minis;
    for (uint64_t m = 0; m < minis && done < total; ++m) {
      const int w = static_cast<uint8_t>(widths[m]);
      if (w > 64) return Corrupt("DELTA_BINARY_PACKED bit width > 64");
      const uint64_t full = per_mini * w / 8;
      const uint64_t n = std::min(per_mini, total - done);
      const uint64_t need = (n * w + 7) / 8;
      if (need > data.size() - pos) {
        return Corrupt("DELTA_BINARY_PACKED miniblock past the end");
      }
      BitReader br(data.substr(pos, need));
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t d;
        br.Read(w, &d);
        last += min_delta + d;
        if (is_int32) last = static_cast<uint32_t>(last);
        emit(last);
      }
      done += n;
      pos += std::min<uint64_t>(full, data.size() - pos);
    }
  }
  // Keep exactly `count` (a page's run may carry padding values).
  out->resize(out->size() - (total - count));
  if (consumed) *consumed = pos;
  return absl::OkStatus();
}

absl::Status DecodeDeltaLengthByteArray(absl::string_view data, int64_t count,
                                        std::vector<std::string>* out) {
  std::vector<int64_t> lengths;
  size_t pos = 0;
  if (auto s = DecodeDeltaBinaryPacked(data, count, true, &lengths, &pos);
      !s.ok()) {
    return s;
  }
  for (int64_t len : lengths) {
    if (len < 0 || static_cast<uint64_t>(len) > data.size() - pos) {
      return Corrupt("DELTA_LENGTH_BYTE_ARRAY value past the end of the page");
    }
    out->emplace_back(data.data() + pos, len);
    pos += len;
  }
  return absl::OkStatus();
}

absl::Status DecodeDeltaByteArray(absl::string_view data, int64_t count,
                                  std::vector<std::string>* out) {
  std::vector<int64_t> prefixes;
  size_t pos = 0;
  if (auto s = DecodeDeltaBinaryPacked(data, count, true, &prefixes, &pos);
      !s.ok()) {
    return s;
  }
  std::vector<std::string> suffixes;
  if (auto s = DecodeDeltaLengthByteArray(data.substr(pos), count, &suffixes);
      !s.ok()) {
    return s;
  }
  std::string prev;
  for (int64_t i = 0; i < count; ++i) {
    if (prefixes[i] < 0 || static_cast<size_t>(prefixes[i]) > prev.size()) {
      return Corrupt(absl::StrCat("DELTA_BYTE_ARRAY prefix ", prefixes[i],
                                  " longer than the previous value"));
    }
    prev = prev.substr(0, prefixes[i]) + suffixes[i];
    out->push_back(prev);
  }
  return absl::OkStatus();
}

absl::Status DecodeByteStreamSplit(PhysicalType type, int32_t type_length,
                                   absl::string_view data, int64_t count,
                                   ColumnValues* out) {
  size_t w = 0;
  switch (type) {
    case PhysicalType::kInt32:
    case PhysicalType::kFloat:
      w = 4;
      break;
    case PhysicalType::kInt64:
    case PhysicalType::kDouble:
      w = 8;
      break;
    case PhysicalType::kFixedLenByteArray:
      w = type_length;
      break;
    default:
      return Corrupt(
          absl::StrCat("BYTE_STREAM_SPLIT on ", PhysicalTypeName(type)));
  }
  if (w == 0 || static_cast<uint64_t>(count) * w > data.size()) {
    return Corrupt("BYTE_STREAM_SPLIT values run past the page");
  }
  std::string plain(count * w, '\0');
  for (int64_t i = 0; i < count; ++i) {
    for (size_t b = 0; b < w; ++b) plain[i * w + b] = data[b * count + i];
  }
  return DecodePlain(type, type_length, plain, count, out);
}

std::string EncodeRleHybrid(const std::vector<int32_t>& values, int bit_width) {
  std::string out;
  const size_t vbytes = (bit_width + 7) / 8;
  std::vector<int32_t> pending;  // values awaiting a bit-packed run
  auto flush_packed = [&] {
    if (pending.empty()) return;
    while (pending.size() % 8) pending.push_back(0);
    PutVarint(((pending.size() / 8) << 1) | 1, &out);
    std::string bits(pending.size() * bit_width / 8, '\0');
    size_t bit = 0;
    for (int32_t v : pending) {
      for (int b = 0; b < bit_width; ++b, ++bit) {
        if ((static_cast<uint32_t>(v) >> b) & 1)
          bits[bit >> 3] |= 1 << (bit & 7);
      }
    }
    out += bits;
    pending.clear();
  };
  size_t i = 0;
  while (i < values.size()) {
    size_t run = 1;
    while (i + run < values.size() && values[i + run] == values[i]) ++run;
    // Long runs (once the packed buffer is group-aligned) become RLE runs.
    if (run >= 8 && pending.size() % 8 == 0) {
      flush_packed();
      PutVarint(static_cast<uint64_t>(run) << 1, &out);
      const uint32_t v = static_cast<uint32_t>(values[i]);
      out.append(reinterpret_cast<const char*>(&v), vbytes);
      i += run;
    } else {
      pending.push_back(values[i++]);
    }
  }
  flush_packed();
  return out;
}

void EncodePlain(PhysicalType type, const ColumnValues& values, size_t begin,
                 size_t end, std::string* out) {
  switch (type) {
    case PhysicalType::kBoolean: {
      std::string bits((end - begin + 7) / 8, '\0');
      for (size_t i = begin; i < end; ++i) {
        if (values.ints[i]) bits[(i - begin) >> 3] |= 1 << ((i - begin) & 7);
      }
      *out += bits;
      break;
    }
    case PhysicalType::kInt32:
      for (size_t i = begin; i < end; ++i) {
        const int32_t v = static_cast<int32_t>(values.ints[i]);
        out->append(reinterpret_cast<const char*>(&v), 4);
      }
      break;
    case PhysicalType::kInt64:
      for (size_t i = begin; i < end; ++i) {
        out->append(reinterpret_cast<const char*>(&values.ints[i]), 8);
      }
      break;
    case PhysicalType::kFloat:
      for (size_t i = begin; i < end; ++i) {
        const float v = static_cast<float>(values.floats[i]);
        out->append(reinterpret_cast<const char*>(&v), 4);
      }
      break;
    case PhysicalType::kDouble:
      for (size_t i = begin; i < end; ++i) {
        out->append(reinterpret_cast<const char*>(&values.floats[i]), 8);
      }
      break;
    case PhysicalType::kByteArray:
      for (size_t i = begin; i < end; ++i) {
        const uint32_t n = values.bytes[i].size();
        out->append(reinterpret_cast<const char*>(&n), 4);
        *out += values.bytes[i];
      }
      break;
    case PhysicalType::kInt96:
    case PhysicalType::kFixedLenByteArray:
      for (size_t i = begin; i < end; ++i) *out += values.bytes[i];
      break;
  }
}

}  // namespace verl::rl::parquet
