#include "verl/rl/data/parquet/parquet_test_util.h"

namespace verl::rl::parquet::testing {

std::string Testdata(const std::string& name) {
  return "verl/rl/data/parquet/testdata/" + name;
}

nlohmann::json HexBinary(const nlohmann::json& j) {
  if (j.is_binary()) {
    static const char kHex[] = "0123456789abcdef";
    std::string s = "hex:";
    for (uint8_t b : j.get_binary()) {
      s += kHex[b >> 4];
      s += kHex[b & 15];
    }
    return s;
  }
  if (j.is_array() || j.is_object()) {
    nlohmann::json out = j;
    for (auto it = out.begin(); it != out.end(); ++it) *it = HexBinary(*it);
    return out;
  }
  return j;
}

}  // namespace verl::rl::parquet::testing
