#include "verl/rl/data/parquet/parquet_schema.h"

#include "absl/strings/str_cat.h"

namespace verl::rl::parquet {
namespace {

constexpr int kMaxDepth = 64;

class Builder {
 public:
  Builder(const std::vector<SchemaElement>& e, std::vector<SchemaNode>* nodes,
          std::vector<int>* leaves)
      : e_(e), nodes_(nodes), leaves_(leaves) {}

  // Adds element next_ (and its subtree) below `parent`; returns its id.
  absl::StatusOr<int> Add(int parent, int depth) {
    if (depth > kMaxDepth) {
      return absl::InvalidArgumentError("schema nested deeper than 64");
    }
    if (next_ >= e_.size()) {
      return absl::InvalidArgumentError(
          "schema: num_children runs past the element list");
    }
    const int id = nodes_->size();
    SchemaNode n;
    n.element = e_[next_++];
    if (parent >= 0) {
      const SchemaNode& p = (*nodes_)[parent];
      n.path = p.path.empty() ? n.element.name
                              : absl::StrCat(p.path, ".", n.element.name);
      n.def_level =
          p.def_level + (n.element.repetition != Repetition::kRequired);
      n.rep_level =
          p.rep_level + (n.element.repetition == Repetition::kRepeated);
    } else {
      n.element.repetition = Repetition::kRequired;
    }
    n.leaf_begin = leaves_->size();
    const bool leaf = n.element.num_children == 0 && parent >= 0;
    if (leaf && !n.element.type) {
      return absl::InvalidArgumentError(
          absl::StrCat("schema: ", n.path, " has neither a type nor children"));
    }
    if (!leaf) n.element.type.reset();
    if (n.element.num_children < 0 ||
        static_cast<size_t>(n.element.num_children) > e_.size() - next_) {
      return absl::InvalidArgumentError(
          absl::StrCat("schema: element \"", n.element.name, "\" claims ",
                       n.element.num_children, " children, only ",
                       e_.size() - next_, " elements follow"));
    }
    nodes_->push_back(std::move(n));
    if (leaf) {
      leaves_->push_back(id);
    } else {
      for (int c = 0; c < (*nodes_)[id].element.num_children; ++c) {
        auto child = Add(id, depth + 1);
        if (!child.ok()) return child.status();
        (*nodes_)[id].children.push_back(*child);
      }
    }
    SchemaNode& self = (*nodes_)[id];
    self.leaf_end = leaves_->size();
    if (self.element.logical == Logical::kList && self.children.size() == 1) {
      const SchemaNode& r = (*nodes_)[self.children[0]];
      self.list_unwraps = r.repeated() && !r.is_leaf() &&
                          r.children.size() == 1 && r.element.name != "array" &&
                          r.element.name != self.element.name + "_tuple";
    }
    return id;
  }
  size_t used() const { return next_; }

 private:
  const std::vector<SchemaElement>& e_;
  std::vector<SchemaNode>* nodes_;
  std::vector<int>* leaves_;
  size_t next_ = 0;
};

}  // namespace

absl::StatusOr<Schema> Schema::Build(const std::vector<SchemaElement>& elems) {
  if (elems.empty()) return absl::InvalidArgumentError("schema is empty");
  Schema s;
  Builder b(elems, &s.nodes_, &s.leaves_);
  auto root = b.Add(-1, 0);
  if (!root.ok()) return root.status();
  if (b.used() != elems.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema: ", elems.size() - b.used(),
                     " elements are not reachable from the root"));
  }
  if (s.leaves_.empty())
    return absl::InvalidArgumentError("schema has no columns");
  return s;
}

}  // namespace verl::rl::parquet
