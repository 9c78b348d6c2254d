// Names and sizes of the collectives' datatypes and reduction operators (include/pickle/collectives.hpp).
#include <pickle/collectives.hpp>

#include <cctype>
#include <string>

namespace pickle {
namespace {

/// Lower-cased copy: names are matched case-insensitively ("Float32", "BF16").
std::string lower(std::string_view name) {
  std::string out(name);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::size_t datatype_size(DataType type) noexcept {
  switch (type) {
    case DataType::F32: return 4;
    case DataType::F16: return 2;
    case DataType::BF16: return 2;
    case DataType::F64: return 8;
    case DataType::I32: return 4;
    case DataType::I64: return 8;
    case DataType::U8: return 1;
  }
  return 1;
}

const char* datatype_name(DataType type) noexcept {
  switch (type) {
    case DataType::F32: return "float";
    case DataType::F16: return "half";
    case DataType::BF16: return "bfloat16";
    case DataType::F64: return "double";
    case DataType::I32: return "int32";
    case DataType::I64: return "int64";
    case DataType::U8: return "uint8";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
  }
  return "?";
}

std::optional<DataType> parse_datatype(std::string_view name) noexcept {
  try {
    const std::string n = lower(name);
    if (n == "f32" || n == "float32" || n == "float") return DataType::F32;
    if (n == "f16" || n == "half" || n == "float16") return DataType::F16;
    if (n == "bf16" || n == "bfloat16") return DataType::BF16;
    if (n == "f64" || n == "float64" || n == "double") return DataType::F64;
    if (n == "i32" || n == "int32" || n == "int") return DataType::I32;
    if (n == "i64" || n == "int64") return DataType::I64;
    if (n == "u8" || n == "uint8") return DataType::U8;
  } catch (...) {
    // Only an allocation failure can get here; "unknown" is the honest answer of a noexcept parser.
  }
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) noexcept {
  try {
    const std::string n = lower(name);
    if (n == "sum") return ReduceOp::Sum;
    if (n == "prod") return ReduceOp::Prod;
    if (n == "min") return ReduceOp::Min;
    if (n == "max") return ReduceOp::Max;
    if (n == "avg") return ReduceOp::Avg;
  } catch (...) {
  }
  return std::nullopt;
}

}  // namespace pickle
