#include "matrix_table.hpp"

#include <optional>
#include <string>
#include <vector>

#include "core/format.hpp"
#include "environment.hpp"
#include "sizes.hpp"
#include "table_text.hpp"

namespace pickle::bench {
namespace {

constexpr std::size_t kLabelWidth = 6, kCellWidth = 10;

const char* mode_words(const std::string& mode) {
  return mode == "bi" ? "bidirectional GB/s (both directions at once, summed)" : "unidirectional GB/s";
}

/// The column header and one row per sender; `cell(i, j)` is the text of an off-diagonal cell.
template <typename CellText>
void print_grid(int devices, std::FILE* out, CellText cell) {
  std::string header = "#";
  header += pad_left("S\\R", kLabelWidth - 1);
  for (int j = 0; j < devices; ++j) header += pad_left(cat(j), kCellWidth);
  std::fprintf(out, "%s\n", header.c_str());
  for (int i = 0; i < devices; ++i) {
    std::string line = pad_left(cat(i), kLabelWidth);
    for (int j = 0; j < devices; ++j) {
      // Appended in two steps: `" " + pad_left(...)` trips GCC 12's -Wrestrict at -O3 (a false positive).
      line += ' ';
      line += pad_left(i == j ? std::string("-") : cell(i, j), kCellWidth - 1);
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
}

std::string cell_text(const MatrixCell& cell) {
  if (!cell.run || cell.status == RunResult::Status::Failed) return "FAILED";
  if (cell.status == RunResult::Status::Unavailable) return "n/a";
  return cell.gbps ? fixed(*cell.gbps, 1) : std::string("n/a");
}

void print_matrix(const MatrixReport& report, const Matrix& matrix, std::FILE* out) {
  const Matrix::Status status = matrix.status();
  std::fprintf(out, "#\n# %s, %s: %s, row = sender, column = receiver\n", matrix.mode.c_str(), matrix.backend.c_str(),
               mode_words(matrix.mode));
  if (status == Matrix::Status::Unavailable) {
    std::fprintf(out, "# %s unavailable: %s\n", matrix.backend.c_str(), matrix.detail().c_str());
    return;
  }
  print_grid(report.devices, out, [&](int i, int j) { return cell_text(matrix.cells[i][j]); });
  if (status == Matrix::Status::Failed) {
    std::fprintf(out, "# %s %s FAILED: %s\n", matrix.mode.c_str(), matrix.backend.c_str(), matrix.detail().c_str());
  } else if (!matrix.detail().empty()) {
    std::fprintf(out, "# n/a: %s\n", matrix.detail().c_str());
  }
}

void print_ratio(const MatrixReport& report, const Matrix& top, const Matrix& bottom, std::FILE* out) {
  if (top.status() == Matrix::Status::Unavailable || bottom.status() == Matrix::Status::Unavailable) return;
  std::fprintf(out, "#\n# %s, %s/%s: ratio per cell\n", top.mode.c_str(), top.backend.c_str(), bottom.backend.c_str());
  auto ratios = cell_ratios(top, bottom);
  print_grid(report.devices, out, [&](int i, int j) { return ratios[i][j] ? fixed(*ratios[i][j], 2) : "n/a"; });
}

}  // namespace

void print_matrix_tables(const MatrixReport& report, std::FILE* out) {
  std::fprintf(out, "# pickle bench matrix: all-pairs P2P bandwidth, %d devices, %s memory, %s per message\n",
               report.devices, report.memory.c_str(), short_size(report.size).c_str());
  std::fprintf(out, "# machine: %s\n", hostname().c_str());
  std::fprintf(out, "# method: one `pickle bench p2p --ranks 2` child per ordered pair, one at a time, with "
                    "CUDA_VISIBLE_DEVICES=sender,receiver and NCCL_NVLS_ENABLE=0; a cell is the child's median over "
                    "its repeats; GB/s = 1e9 bytes/s\n");
  for (const auto& note : report.notes) std::fprintf(out, "# note: %s\n", note.c_str());
  if (!report.waived.empty()) {
    std::fprintf(out, "# matrix: waived: %s\n", report.waived.c_str());
    std::fflush(out);
    return;
  }
  std::uint64_t wrong = 0;
  for (const auto& mode : report.options.modes) {
    for (const auto& backend : report.options.backends) {
      if (const Matrix* matrix = report.find(mode, backend)) {
        print_matrix(report, *matrix, out);
        wrong += matrix->wrong();
      }
    }
    const Matrix* pickle = report.find(mode, "pickle");
    for (const char* other : {"nccl", "ce"}) {
      const Matrix* bottom = report.find(mode, other);
      if (pickle != nullptr && bottom != nullptr) print_ratio(report, *pickle, *bottom, out);
    }
  }
  for (const auto& pair : report.pairs) {
    if (pair.failed) std::fprintf(out, "# GPU %d -> GPU %d FAILED: %s\n", pair.sender, pair.receiver, pair.detail.c_str());
  }
  std::fprintf(out, "#\n# #wrong: %llu (bytes, over every cell of every matrix)\n",
               static_cast<unsigned long long>(wrong));
  std::fflush(out);
}

}  // namespace pickle::bench
