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

nlohmann::json UnhexBinary(const nlohmann::json& j) {
  if (j.is_string() && j.get_ref<const std::string&>().rfind("hex:", 0) == 0) {
    const std::string& s = j.get_ref<const std::string&>();
    std::vector<uint8_t> b;
    for (size_t i = 4; i + 1 < s.size(); i += 2) {
      b.push_back(std::stoi(s.substr(i, 2), nullptr, 16));
    }
    return nlohmann::json::binary(std::move(b));
  }
  if (j.is_array() || j.is_object()) {
    nlohmann::json out = j;
    for (auto it = out.begin(); it != out.end(); ++it) *it = UnhexBinary(*it);
    return out;
  }
  return j;
}

}  // namespace verl::rl::parquet::testing
