#include "matrix_json.hpp"

#include "result_file.hpp"

namespace pickle::bench {
namespace {

/// A devices x devices array of arrays: `value(cell)` for cells a child measured, null elsewhere (the diagonal).
template <typename Value>
json::Value grid(const Matrix& matrix, Value value) {
  json::Value rows = json::Value::array();
  for (const auto& row : matrix.cells) {
    json::Value cells = json::Value::array();
    for (const auto& cell : row) cells.push_back(cell.run ? value(cell) : json::Value());
    rows.push_back(std::move(cells));
  }
  return rows;
}

json::Value matrix_json(const Matrix& matrix) {
  json::Value m = json::Value::object();
  m["mode"] = matrix.mode;
  m["backend"] = matrix.backend;
  m["status"] = matrix_status_name(matrix.status());
  m["detail"] = matrix.detail();
  m["gbps"] = grid(matrix, [](const MatrixCell& cell) { return cell.gbps ? json::Value(*cell.gbps) : json::Value(); });
  // The wrong bytes a child found, 0 where it measured the cell and found none, null where no check says anything
  // (the diagonal, an unavailable backend, a child that failed before its check): a 0 there read as "checked,
  // nothing wrong" (found by review).
  m["wrong"] = grid(matrix, [](const MatrixCell& cell) {
    const bool checked = cell.wrong > 0 || (cell.run && cell.status == RunResult::Status::Ok);
    return checked ? json::Value(cell.wrong) : json::Value();
  });
  // Why each cell that did not measure did not ("" for measured cells), so that a failed cell names its child.
  m["cell_details"] = grid(matrix, [](const MatrixCell& cell) { return json::Value(cell.detail); });
  return m;
}

json::Value pair_json(const PairRun& pair) {
  json::Value p = json::Value::object();
  p["sender"] = pair.sender;
  p["receiver"] = pair.receiver;
  p["modes"] = string_array(pair.modes);
  p["status"] = pair.failed ? "failed" : "ok";
  p["detail"] = pair.detail;
  p["command"] = string_array(pair.command);
  json::Value env = json::Value::object();
  for (const auto& [name, value] : pair.env) env[name] = value;
  p["env"] = std::move(env);
  p["exit_code"] = pair.exit_code;
  p["seconds"] = pair.seconds;
  p["stderr_tail"] = pair.stderr_tail;
  return p;
}

}  // namespace

json::Value matrix_to_json(const MatrixReport& report) {
  const auto& o = report.options;
  json::Value root = result_head("matrix", report.command, report.started_utc);
  json::Value options = json::Value::object();
  options["size"] = report.size;
  options["iterations"] = o.iterations_given ? json::Value(o.iterations) : json::Value();
  options["warmup"] = o.warmup_given ? json::Value(o.warmup) : json::Value();
  options["repeats"] = o.repeats > 0 ? json::Value(o.repeats) : json::Value();
  options["backends"] = string_array(o.backends);
  options["modes"] = string_array(o.modes);
  options["gpus"] = o.gpus > 0 ? json::Value(o.gpus) : json::Value();
  options["memory"] = report.memory;
  root["options"] = std::move(options);
  root["notes"] = string_array(report.notes);
  root["waived"] = report.waived.empty() ? json::Value() : json::Value(report.waived);
  root["devices"] = report.devices;
  root["size"] = report.size;
  json::Value matrices = json::Value::array();
  for (const auto& matrix : report.matrices) matrices.push_back(matrix_json(matrix));
  root["matrices"] = std::move(matrices);
  json::Value pairs = json::Value::array();
  for (const auto& pair : report.pairs) pairs.push_back(pair_json(pair));
  root["pairs"] = std::move(pairs);
  root["exit_code"] = report.exit_code();
  return root;
}

}  // namespace pickle::bench
