#include "launch/mpirun_output.h"

#include <regex>

#include <fmt/format.h>

namespace moe4d {

OutputLine parse_output_line(std::string_view line) {
  static const std::regex tagged(R"(^\[(\d+),(\d+)\]<(stdout|stderr)>:(.*)$)");
  OutputLine out;
  std::match_results<std::string_view::const_iterator> m;
  if (std::regex_match(line.begin(), line.end(), m, tagged)) {
    out.rank = std::stoi(m[2].str());
    out.stderr_stream = m[3].str() == "stderr";
    out.text = m[4].str();
  } else {
    out.text = std::string(line);
  }
  return out;
}

int progress_step(std::string_view text) {
  // The text line starts with its UTC timestamp ("2026-12-01T10:15:03Z step    10/200 | ..."; older
  // builds printed none); --log-format json prints {"...","step":10,"steps":200,...} instead.
  static const std::regex step(R"(^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ )?step\s+(\d+)/\d+ \|)");
  static const std::regex json_step(R"(^\{.*"step":(\d+),.*"steps":\d+)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(text.begin(), text.end(), m, step) &&
      !std::regex_search(text.begin(), text.end(), m, json_step))
    return -1;
  return std::stoi(m[1].str());
}

bool is_rank_error(std::string_view text) {
  // Anchored: an info line that merely mentions a deadline (or a path containing the word) is not one.
  static const std::regex error(R"(^(moe4d: error|collective (timeout|deadline)))");
  return std::regex_search(text.begin(), text.end(), error);
}

void MpirunOutputParser::feed(const OutputLine& line) {
  static const std::regex noticed(
      R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?)");
  static const std::regex process_name(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
  static const std::regex exit_code(R"(Exit code:\s*(-?\d+))");
  static const std::regex aborted(R"(MPI_ABORT was invoked on rank (\d+) in communicator \S+(?: with errorcode (-?\d+))?)");
  static const std::regex rank_error(R"(moe4d: error \(rank (\d+)\))");
  std::smatch m;
  const std::string& text = line.text;
  if (line.rank >= 0) {
    // A rank's own words: its first error line explains the failure (deadline messages included).
    if (failure_.message_rank < 0 && line.stderr_stream && is_rank_error(text)) {
      failure_.message_rank = std::regex_search(text, m, rank_error) ? std::stoi(m[1].str()) : line.rank;
      failure_.message = text;
      static const std::regex missing(R"(missing rank\(s\): ([0-9][0-9,]*))");
      if (std::regex_search(text, m, missing)) {
        const std::string list = m[1].str();
        for (size_t i = 0; i < list.size();) {
          size_t j = list.find(',', i);
          if (j == std::string::npos) j = list.size();
          if (j > i) failure_.missing.push_back(std::stoi(list.substr(i, j - i)));
          i = j + 1;
        }
      }
    }
    if (failure_.rank < 0 && std::regex_search(text, m, aborted)) {
      failure_.rank = std::stoi(m[1].str());
      failure_.how = m[2].matched ? fmt::format("called MPI_Abort (code {})", m[2].str()) : "called MPI_Abort";
    }
    return;
  }
  static const std::regex abort_code(R"(^with errorcode (-?\d+))");
  if (abort_pending_ && std::regex_search(text, m, abort_code)) {  // OpenMPI wraps the abort notice here
    failure_.how = fmt::format("called MPI_Abort (code {})", m[1].str());
    abort_pending_ = false;
    return;
  }
  abort_pending_ = false;
  if (failure_.rank >= 0) return;  // the first failure is the one that counts
  if (std::regex_search(text, m, noticed)) {
    failure_.rank = std::stoi(m[1].str());
    failure_.how = m[4].matched ? fmt::format("exited on signal {} ({})", m[3].str(), m[4].str())
                                : fmt::format("exited on signal {}", m[3].str());
  } else if (std::regex_search(text, m, aborted)) {
    failure_.rank = std::stoi(m[1].str());
    failure_.how = m[2].matched ? fmt::format("called MPI_Abort (code {})", m[2].str()) : "called MPI_Abort";
    abort_pending_ = !m[2].matched;
  } else if (std::regex_search(text, m, process_name)) {
    pending_process_rank_ = std::stoi(m[1].str());
  } else if (pending_process_rank_ >= 0 && std::regex_search(text, m, exit_code)) {
    failure_.rank = pending_process_rank_;
    failure_.how = fmt::format("exited with code {}", m[1].str());
  }
}

}  // namespace moe4d
