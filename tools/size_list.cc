// File: tools/size_list.cc
#include "tools/size_list.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace verl::tools {

bool ParseSizeList(absl::string_view list, std::vector<int>* sizes,
                   std::string* bad) {
  sizes->clear();
  for (absl::string_view s : absl::StrSplit(list, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(s, &v) || v < 1) {
      *bad = std::string(s);
      return false;
    }
    sizes->push_back(v);
  }
  return true;
}

}  // namespace verl::tools
