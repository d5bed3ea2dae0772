// File: verl/core/batch_wire.h
//
// Batch's wire format: the exact, self-validating byte string that moves a
// Batch between ranks (verl/parallel/batch_comm) and to disk. Kept apart from
// Batch itself so that row operations do not carry the codec, and the codec's
// malformed-input guarantees are tested on their own.
#ifndef VERL_CORE_BATCH_WIRE_H_
#define VERL_CORE_BATCH_WIRE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verl/core/batch.h"

namespace verl {
namespace core {

// Exact binary encoding of all columns and meta_info (any device; tensors are
// copied to CPU, made contiguous). Little-endian, versioned, deterministic.
std::string SerializeBatch(const Batch& batch);

// Inverse of SerializeBatch(). Never crashes on bad input: truncation, bad
// magic or version, overflowing lengths, bad dtype codes, inconsistent sizes,
// malformed or over-deep CBOR and trailing bytes give InvalidArgument/DataLoss.
absl::StatusOr<Batch> DeserializeBatch(absl::string_view bytes);

}  // namespace core
}  // namespace verl

#endif  // VERL_CORE_BATCH_WIRE_H_
