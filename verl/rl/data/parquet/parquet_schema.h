// File: verl/rl/data/parquet/parquet_schema.h
//
// The schema tree of a Parquet file, rebuilt from the footer's flat
// depth-first SchemaElement list, with each node's definition and repetition
// level (Dremel) and the contiguous range of leaf columns below it. The
// reader assembles records over it; the writer shreds records over it.
#ifndef VERL_RL_DATA_PARQUET_PARQUET_SCHEMA_H_
#define VERL_RL_DATA_PARQUET_PARQUET_SCHEMA_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/rl/data/parquet/parquet_format.h"

namespace verl::rl::parquet {

struct SchemaNode {
  SchemaElement element;
  std::string path;   // dotted path from the root ("" for the root)
  int def_level = 0;  // definition level at which this node is present
  int rep_level = 0;  // number of repeated nodes from the root to here
  std::vector<int> children;
  int leaf_begin = 0;  // leaf columns [leaf_begin, leaf_end) below here
  int leaf_end = 0;
  // LIST-annotated group whose elements are the single child of its repeated
  // group (the 3-level form); false for the legacy 2-level forms.
  bool list_unwraps = false;
  bool is_leaf() const { return element.type.has_value(); }
  bool repeated() const { return element.repetition == Repetition::kRepeated; }
  bool optional() const { return element.repetition == Repetition::kOptional; }
};

class Schema {
 public:
  // Validates the element list (children counts, leaf types, depth <= 64).
  static absl::StatusOr<Schema> Build(const std::vector<SchemaElement>& elems);

  const SchemaNode& node(int i) const { return nodes_[i]; }
  const SchemaNode& root() const { return nodes_[0]; }
  // Leaf node ids in column order.
  const std::vector<int>& leaves() const { return leaves_; }
  const SchemaNode& leaf(int column) const { return nodes_[leaves_[column]]; }

 private:
  std::vector<SchemaNode> nodes_;
  std::vector<int> leaves_;
};

}  // namespace verl::rl::parquet

#endif  // VERL_RL_DATA_PARQUET_PARQUET_SCHEMA_H_
