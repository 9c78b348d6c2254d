#include "foreground_info.hpp"

#include <cmath>
#include <limits>

#include <pickle/error.hpp>

#include "core/format.hpp"
#include "table_text.hpp"

namespace pickle::bench {

const char* run_status_name(RunStatus status) noexcept {
  switch (status) {
    case RunStatus::Ok: return "ok";
    case RunStatus::Unavailable: return "unavailable";
    case RunStatus::Failed: return "failed";
  }
  return "?";
}

RunStatus parse_run_status(const std::string& name, std::string_view what) {
  if (name == "ok") return RunStatus::Ok;
  if (name == "unavailable") return RunStatus::Unavailable;
  if (name == "failed") return RunStatus::Failed;
  throw ProtocolError(cat(what, ": unknown status '", name, "'"));
}

bool foreground_fails_run(const ForegroundInfo& info) noexcept {
  return info.status == RunStatus::Failed || (info.status == RunStatus::Unavailable && info.required);
}

json::Value foreground_to_json(const ForegroundInfo& info) {
  json::Value f = json::Value::object();
  f["name"] = info.name;
  f["kernel"] = info.kernel;
  f["description"] = info.description;
  f["status"] = run_status_name(info.status);
  f["detail"] = info.detail;
  f["required"] = info.required;
  f["flops"] = info.flops;
  if (info.verify_error) {
    json::Value v = json::Value::object();
    // JSON has no infinity or NaN (they would print as null): a failed check that produced NaN stays a number.
    v["max_error"] = std::isfinite(*info.verify_error) ? *info.verify_error : std::numeric_limits<double>::max();
    v["tolerance"] = info.verify_tolerance;
    v["shape"] = info.verify_shape;
    v["passed"] = *info.verify_error <= info.verify_tolerance;
    f["verify"] = std::move(v);
  } else {
    f["verify"] = nullptr;
  }
  return f;
}

ForegroundInfo foreground_from_json(const json::Value& value) {
  ForegroundInfo info;
  info.name = value.at("name").as_string();
  info.kernel = value.at("kernel").as_string();
  info.description = value.at("description").as_string();
  info.status = parse_run_status(value.at("status").as_string(), "foreground");
  info.detail = value.at("detail").as_string();
  info.required = value.at("required").as_bool();
  info.flops = value.at("flops").as_double();
  const json::Value& verify = value.at("verify");
  if (!verify.is_null()) {
    info.verify_error = verify.at("max_error").as_double();
    info.verify_tolerance = verify.at("tolerance").as_double();
    info.verify_shape = verify.at("shape").as_string();
  }
  return info;
}

std::string foreground_line(const ForegroundInfo& info) {
  std::string line = cat("# ", pad_right(info.name, 10), " ", run_status_name(info.status), ": ", info.description);
  if (!info.detail.empty()) line += cat(" [", info.detail, "]");
  if (info.verify_error) {
    line += cat("; verified on ", info.verify_shape, ": max error ", fixed(*info.verify_error, 5), " (tolerance ",
                fixed(info.verify_tolerance, 5), ")");
  }
  return line;
}

}  // namespace pickle::bench
