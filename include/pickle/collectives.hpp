#pragma once
/// Datatypes and reduction operators of pickle's collectives (Communicator::allreduce and friends). Names and
/// meanings follow NCCL's (ncclFloat32 ... ncclSum ... ncclAvg), so that `pickle bench coll` lines up with nccl-tests.

#include <cstddef>
#include <optional>
#include <string_view>

namespace pickle {

enum class DataType { F32, F16, BF16, F64, I32, I64, U8 };
/// sum, prod, min, max; avg = sum divided by the number of ranks (integer division for integer types, as NCCL).
enum class ReduceOp { Sum, Prod, Min, Max, Avg };

/// Bytes of one element.
std::size_t datatype_size(DataType type) noexcept;
/// "float", "half", "bfloat16", "double", "int32", "int64", "uint8": nccl-tests' spelling.
const char* datatype_name(DataType type) noexcept;
/// "sum", "prod", "min", "max", "avg".
const char* reduce_op_name(ReduceOp op) noexcept;
/// Parses nccl-tests' names and common aliases (f32/float32/float, f16/half/float16, bf16/bfloat16, f64/double,
/// i32/int32/int, i64/int64, u8/uint8); nullopt when unknown.
std::optional<DataType> parse_datatype(std::string_view name) noexcept;
std::optional<ReduceOp> parse_reduce_op(std::string_view name) noexcept;

}  // namespace pickle
