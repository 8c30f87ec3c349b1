// launch/mpirun_output.h — reading what mpirun prints: rank-tagged lines and its failure notices.
//
// With --tag-output every line a rank writes arrives as "[JOB,RANK]<stdout>:text" (or <stderr>);
// lines without a tag are mpirun's own. When a rank dies mpirun says so in one of a few fixed
// forms (OpenMPI 4):
//   mpirun noticed that process rank 1 with PID 4242 on node n2 exited on signal 9 (Killed).
//   ... The first process to do so was:  Process name: [[40209,1],3]  Exit code: 2
//   MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD with errorcode 2.
// and a failing moe4d rank prints "moe4d: error (rank N): ..." or, when a collective deadline
// fires, "collective timeout: ... missing rank(s): 1,3 (world)" on its stderr. MpirunOutputParser collects the first of each, so that the launcher can say which
// rank failed and why. Pure (no I/O); not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moe4d {

struct OutputLine {
  int rank = -1;        // -1: mpirun's own line
  bool stderr_stream = false;
  std::string text;
};

OutputLine parse_output_line(std::string_view line);

// A rank's line that reports its failure: "moe4d: error ...", "collective timeout: ..." (or "deadline").
bool is_rank_error(std::string_view text);

// The step number of a trainer progress line ("step     5/20 | loss ..."), or -1.
int progress_step(std::string_view text);

struct RankFailure {
  int rank = -1;               // the rank mpirun names; -1 if it named none
  std::string how;             // "exited on signal 9 (Killed)", "exited with code 2", "called MPI_Abort (code 2)"
  int message_rank = -1;       // the rank whose own error line is `message`
  std::string message;         // "collective timeout: all_reduce on group dp[...] ...; missing rank(s): 1 (world)"
  std::vector<int> missing;    // the ranks a deadline message names as missing
};

class MpirunOutputParser {
 public:
  void feed(const OutputLine& line);
  // Something says the job is failing (a notice or a rank's error line).
  bool failing() const { return failure_.rank >= 0 || failure_.message_rank >= 0; }
  const RankFailure& failure() const { return failure_; }

 private:
  RankFailure failure_;
  int pending_process_rank_ = -1;
  bool abort_pending_ = false;     // "MPI_ABORT was invoked on rank R ..." seen, its error code not yet  // "Process name: [[J,R],R]" seen, its "Exit code:" not yet
};

}  // namespace moe4d
