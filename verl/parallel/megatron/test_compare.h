// File: verl/parallel/megatron/test_compare.h
//
// Test-only comparison for the tensor-parallel workers: the relative error
// of a tensor against a reference, max|got - want| / max|want|, and a
// Status naming the tensor when it exceeds the tolerance.
#ifndef VERL_PARALLEL_MEGATRON_TEST_COMPARE_H_
#define VERL_PARALLEL_MEGATRON_TEST_COMPARE_H_

#include <ATen/ATen.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace verl::parallel::megatron {

inline double MaxRelErr(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor g = got.detach().to(at::kDouble);
  const at::Tensor w = want.detach().to(at::kDouble);
  const double scale = std::max(w.abs().max().item<double>(), 1e-30);
  return (g - w).abs().max().item<double>() / scale;
}

// Tracks the worst relative error over a run of comparisons.
class Comparer {
 public:
  explicit Comparer(double tolerance) : tolerance_(tolerance) {}
  absl::Status Expect(const std::string& what, const at::Tensor& got,
                      const at::Tensor& want) {
    if (!got.defined() || !want.defined() || got.sizes() != want.sizes()) {
      return absl::InternalError(absl::StrCat(
          what, ": shape [",
          got.defined() ? absl::StrJoin(got.sizes(), ",") : "undefined",
          "] vs reference [",
          want.defined() ? absl::StrJoin(want.sizes(), ",") : "undefined",
          "]"));
    }
    const double err = MaxRelErr(got, want);
    if (err > worst_) {
      worst_ = err;
      worst_name_ = what;
    }
    if (!(err <= tolerance_)) {
      return absl::InternalError(
          absl::StrCat(what, ": max rel error ", err, " > ", tolerance_));
    }
    return absl::OkStatus();
  }
  double worst() const { return worst_; }
  const std::string& worst_name() const { return worst_name_; }

 private:
  double tolerance_;
  double worst_ = 0;
  std::string worst_name_;
};

// A test worker rank's failure: prints "rank R FAILED: <status>" on stdout
// and returns the worker's exit code, 1.
inline int RankFailed(int rank, const absl::Status& status) {
  std::cout << "rank " << rank << " FAILED: " << status << std::endl;
  return 1;
}

// The end of a test worker rank's run (or of one of its cases): RankFailed
// when `status` is an error, else prints "rank R: <label>OK (max rel err E at
// 'NAME')" with `cmp`'s worst comparison and returns 0.
inline int RankResult(int rank, const absl::Status& status, const Comparer& cmp,
                      absl::string_view label = "") {
  if (!status.ok()) return RankFailed(rank, status);
  std::cout << "rank " << rank << ": " << label << "OK (max rel err "
            << cmp.worst() << " at '" << cmp.worst_name() << "')" << std::endl;
  return 0;
}

}  // namespace verl::parallel::megatron

#endif  // VERL_PARALLEL_MEGATRON_TEST_COMPARE_H_
