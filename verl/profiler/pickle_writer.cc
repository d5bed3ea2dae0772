// File: verl/profiler/pickle_writer.cc
#include "verl/profiler/pickle_writer.h"

#include <cstring>

#include "glog/logging.h"

namespace verl::profiler {
namespace {

constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kNone = 'N';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kBinInt = 'J';
constexpr char kLong1 = '\x8a';
constexpr char kBinFloat = 'G';
constexpr char kBinUnicode = 'X';
constexpr char kEmptyDict = '}';
constexpr char kSetItems = 'u';
constexpr char kEmptyList = ']';
constexpr char kAppends = 'e';
constexpr char kLongBinPut = 'r';
constexpr char kLongBinGet = 'j';
constexpr int64_t kBatch = 1000;

void PutLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out->push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace

PickleWriter::PickleWriter() {
  out_.push_back(kProto);
  out_.push_back('\x02');
}

void PickleWriter::Item() {
  if (open_.empty()) return;
  Frame& f = open_.back();
  ++f.pending;
  if (f.pending == kBatch * f.per_item) {
    out_.push_back(f.batch_op);
    out_.push_back(kMark);
    f.pending = 0;
  }
}

void PickleWriter::None() {
  out_.push_back(kNone);
  Item();
}

void PickleWriter::Bool(bool v) {
  out_.push_back(v ? kNewTrue : kNewFalse);
  Item();
}

void PickleWriter::Int(int64_t v) {
  if (v >= 0 && v < 256) {
    out_.push_back(kBinInt1);
    PutLE(&out_, v, 1);
  } else if (v >= 0 && v < 65536) {
    out_.push_back(kBinInt2);
    PutLE(&out_, v, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    out_.push_back(kBinInt);
    PutLE(&out_, static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
  } else {
    // LONG1: little-endian two's complement, 8 bytes always suffice.
    out_.push_back(kLong1);
    out_.push_back('\x08');
    PutLE(&out_, static_cast<uint64_t>(v), 8);
  }
  Item();
}

void PickleWriter::UInt(uint64_t v) {
  if (v <= static_cast<uint64_t>(INT64_MAX))
    return Int(static_cast<int64_t>(v));
  // Needs a ninth zero byte so the sign bit stays clear.
  out_.push_back(kLong1);
  out_.push_back('\x09');
  PutLE(&out_, v, 8);
  out_.push_back('\0');
  Item();
}

void PickleWriter::Float(double v) {
  out_.push_back(kBinFloat);
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  for (int i = 7; i >= 0; --i)
    out_.push_back(static_cast<char>(bits >> (8 * i)));
  Item();
}

void PickleWriter::String(absl::string_view v) {
  CHECK_LE(v.size(), 0xffffffffu) << "pickle string too long";
  out_.push_back(kBinUnicode);
  PutLE(&out_, v.size(), 4);
  out_.append(v.data(), v.size());
  Item();
}

void PickleWriter::Begin(char empty_op) {
  out_.push_back(empty_op);
  out_.push_back(kMark);
  const bool dict = empty_op == kEmptyDict;
  open_.push_back(Frame{dict ? kSetItems : kAppends, 0, dict ? 2 : 1});
}

void PickleWriter::End(char batch_op) {
  CHECK(!open_.empty() && open_.back().batch_op == batch_op)
      << "PickleWriter: unbalanced Begin/End";
  CHECK_EQ(open_.back().pending % open_.back().per_item, 0)
      << "PickleWriter: dict key without a value";
  out_.push_back(batch_op);  // closes the last MARK (possibly empty)
  open_.pop_back();
  Item();
}

void PickleWriter::BeginDict() { Begin(kEmptyDict); }
void PickleWriter::EndDict() { End(kSetItems); }
void PickleWriter::BeginList() { Begin(kEmptyList); }
void PickleWriter::EndList() { End(kAppends); }

uint32_t PickleWriter::Memoize() {
  out_.push_back(kLongBinPut);
  PutLE(&out_, next_memo_, 4);
  return next_memo_++;
}

void PickleWriter::Get(uint32_t id) {
  CHECK_LT(id, next_memo_) << "PickleWriter: unknown memo id";
  out_.push_back(kLongBinGet);
  PutLE(&out_, id, 4);
  Item();
}

std::string PickleWriter::Finish() {
  CHECK(open_.empty()) << "PickleWriter: unclosed container";
  out_.push_back(kStop);
  return std::move(out_);
}

}  // namespace verl::profiler
