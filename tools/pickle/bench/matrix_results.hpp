#pragma once
// What `pickle bench matrix` measured: one matrix per mode x backend (row = sender, column = receiver), and the
// children that filled them. Filled by the orchestrator (matrix.cpp), rendered by matrix_table and matrix_json.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "matrix_options.hpp"
#include "transports_results.hpp"

namespace pickle::bench {

/// One off-diagonal cell: what the child of its pair said about the backend and mode.
struct MatrixCell {
  bool run = false;  ///< a child measured it (false: the diagonal, or a child that never ran)
  RunResult::Status status = RunResult::Status::Failed;
  std::optional<double> gbps;  ///< the child's median at the matrix's size (bi: both directions summed)
  std::uint64_t wrong = 0;
  std::string detail;  ///< why unavailable or failed
};

/// One mode x backend matrix, devices x devices.
struct Matrix {
  enum class Status { Ok, Unavailable, Failed };
  std::string mode, backend;
  std::vector<std::vector<MatrixCell>> cells;  ///< [sender][receiver]

  /// Failed when a cell failed; Unavailable when no cell measured and one was unavailable; else Ok.
  Status status() const;
  /// Why it is unavailable or failed (the first such cell's detail); when ok, why some cells are n/a ("" if none).
  std::string detail() const;
  std::uint64_t wrong() const;
};

/// "ok", "unavailable", "failed".
const char* matrix_status_name(Matrix::Status status) noexcept;

/// One child: `pickle bench p2p` with CUDA_VISIBLE_DEVICES=sender,receiver.
struct PairRun {
  int sender = 0, receiver = 0;
  std::vector<std::string> modes;    ///< what this child measured: uni (and bi for sender < receiver)
  bool failed = false;               ///< the child failed, or a cell it measured did
  std::string detail;                ///< why (the first failed cell's detail, or how the child ended)
  std::vector<std::string> command;  ///< "pickle", "bench", "p2p", ...
  std::vector<std::pair<std::string, std::string>> env;  ///< the variables set for it
  int exit_code = -1;
  double seconds = 0;
  std::string stderr_tail;  ///< its last lines on stderr, kept when it failed
};

struct MatrixReport {
  MatrixOptions options;
  std::vector<std::string> command;  ///< the command line as typed ("pickle", "bench", "matrix", ...)
  std::string started_utc;
  std::vector<std::string> notes;
  std::string memory;     ///< "cuda" or "host"
  int devices = 0;        ///< the matrix is devices x devices
  std::size_t size = 0;   ///< bytes per message
  std::string waived;     ///< non-empty: nothing ran, and why
  std::vector<Matrix> matrices;  ///< per mode (options order), per backend (options order)
  std::vector<PairRun> pairs;    ///< in the order they ran

  const Matrix* find(const std::string& mode, const std::string& backend) const;
  /// 1 when a child or a cell failed; else 0 (unavailable backends and a waiver are not failures).
  int exit_code() const;
};

/// numerator / denominator per cell, when both measured it (the ratio matrices pickle/nccl and pickle/ce).
std::vector<std::vector<std::optional<double>>> cell_ratios(const Matrix& numerator, const Matrix& denominator);

}  // namespace pickle::bench
