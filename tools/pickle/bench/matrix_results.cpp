#include "matrix_results.hpp"

namespace pickle::bench {

Matrix::Status Matrix::status() const {
  bool measured = false, unavailable = false;
  for (const auto& row : cells) {
    for (const auto& cell : row) {
      if (!cell.run) continue;
      if (cell.status == RunResult::Status::Failed) return Status::Failed;
      measured |= cell.status == RunResult::Status::Ok;
      unavailable |= cell.status == RunResult::Status::Unavailable;
    }
  }
  return unavailable && !measured ? Status::Unavailable : Status::Ok;
}

std::string Matrix::detail() const {
  const Status overall = status();
  for (const auto& row : cells) {
    for (const auto& cell : row) {
      if (!cell.run) continue;
      if (overall == Status::Failed && cell.status == RunResult::Status::Failed) return cell.detail;
      if (overall != Status::Failed && cell.status == RunResult::Status::Unavailable) return cell.detail;
    }
  }
  return "";
}

std::uint64_t Matrix::wrong() const {
  std::uint64_t total = 0;
  for (const auto& row : cells) {
    for (const auto& cell : row) total += cell.wrong;
  }
  return total;
}

const char* matrix_status_name(Matrix::Status status) noexcept {
  switch (status) {
    case Matrix::Status::Ok: return "ok";
    case Matrix::Status::Unavailable: return "unavailable";
    case Matrix::Status::Failed: return "failed";
  }
  return "?";
}

const Matrix* MatrixReport::find(const std::string& mode, const std::string& backend) const {
  for (const auto& matrix : matrices) {
    if (matrix.mode == mode && matrix.backend == backend) return &matrix;
  }
  return nullptr;
}

int MatrixReport::exit_code() const {
  for (const auto& pair : pairs) {
    if (pair.failed) return 1;
  }
  for (const auto& matrix : matrices) {
    if (matrix.status() == Matrix::Status::Failed) return 1;
  }
  return 0;
}

std::vector<std::vector<std::optional<double>>> cell_ratios(const Matrix& numerator, const Matrix& denominator) {
  std::vector<std::vector<std::optional<double>>> ratios(numerator.cells.size());
  for (std::size_t i = 0; i < numerator.cells.size(); ++i) {
    ratios[i].resize(numerator.cells[i].size());
    for (std::size_t j = 0; j < numerator.cells[i].size(); ++j) {
      const auto& top = numerator.cells[i][j].gbps;
      const auto& bottom = denominator.cells[i][j].gbps;
      if (top && bottom && *bottom > 0) ratios[i][j] = *top / *bottom;
    }
  }
  return ratios;
}

}  // namespace pickle::bench
