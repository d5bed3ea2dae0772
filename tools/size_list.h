// File: tools/size_list.h
//
// The benchmarks' size-sweep flags (--cps=1,2,4, --tps=..., --pps=...): a
// comma-separated list of positive integers.
#ifndef VERL_TOOLS_SIZE_LIST_H_
#define VERL_TOOLS_SIZE_LIST_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace verl::tools {

// The integers of `list` ("1,2,4") into *sizes; false, with *bad the first
// item that is not a positive integer (an empty one included), otherwise.
bool ParseSizeList(absl::string_view list, std::vector<int>* sizes,
                   std::string* bad);

}  // namespace verl::tools

#endif  // VERL_TOOLS_SIZE_LIST_H_
