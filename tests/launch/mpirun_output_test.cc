// Reading mpirun's output: rank tags, progress lines and the failure notices of OpenMPI 4.
#include "launch/mpirun_output.h"

#include <gtest/gtest.h>

namespace moe4d {
namespace {

TEST(MpirunOutput, TaggedAndUntaggedLines) {
  OutputLine l = parse_output_line("[1,3]<stderr>:moe4d: error (rank 3): boom");
  EXPECT_EQ(l.rank, 3);
  EXPECT_TRUE(l.stderr_stream);
  EXPECT_EQ(l.text, "moe4d: error (rank 3): boom");
  l = parse_output_line("[1,0]<stdout>:step     5/20 | loss 4.1");
  EXPECT_EQ(l.rank, 0);
  EXPECT_FALSE(l.stderr_stream);
  EXPECT_EQ(progress_step(l.text), 5);
  l = parse_output_line("mpirun noticed that ...");
  EXPECT_EQ(l.rank, -1);
  EXPECT_EQ(progress_step("[moe4d rank 0] info: step 3"), -1);
}

TEST(MpirunOutput, ProgressLinesAsTrainPrintsThem) {
  // The trainer's text progress line leads with a UTC timestamp; --log-format json is one object.
  EXPECT_EQ(progress_step("2026-12-01T13:59:11Z step     7/30 | loss 8.3593 | aux 2.0764"), 7);
  EXPECT_EQ(progress_step(R"({"aux_loss":4.2,"eta_s":0.0,"interval_steps":1,"loss":8.29,"step":12,"steps":50})"), 12);
  EXPECT_EQ(progress_step("2026-12-01T13:59:11Z [moe4d] info: step 3/4 | x"), -1);
  EXPECT_EQ(progress_step(R"({"step":3})"), -1);
}

TEST(MpirunOutput, SignalNotice) {
  MpirunOutputParser p;
  p.feed(parse_output_line("[1,0]<stdout>:step 1/4 | loss 1"));
  EXPECT_FALSE(p.failing());
  p.feed(parse_output_line(
      "mpirun noticed that process rank 1 with PID 12578 on node 127.0.0.2 exited on signal 9 (Killed)."));
  ASSERT_TRUE(p.failing());
  EXPECT_EQ(p.failure().rank, 1);
  EXPECT_EQ(p.failure().how, "exited on signal 9 (Killed)");
}

TEST(MpirunOutput, NonZeroExitBlockAndRankMessage) {
  MpirunOutputParser p;
  p.feed(parse_output_line("[1,2]<stderr>:moe4d: error (rank 2): all_reduce on dp[...]: deadline of 60 s passed; "
                           "missing ranks 3 (host n1)"));
  p.feed(parse_output_line("  Process name: [[40209,1],2]"));
  p.feed(parse_output_line("  Exit code:    2"));
  EXPECT_EQ(p.failure().rank, 2);
  EXPECT_EQ(p.failure().how, "exited with code 2");
  EXPECT_EQ(p.failure().message_rank, 2);
  EXPECT_NE(p.failure().message.find("deadline"), std::string::npos);
}

TEST(MpirunOutput, CollectiveTimeoutNamesTheMissingRanks) {
  MpirunOutputParser p;
  p.feed(parse_output_line("[1,0]<stderr>:collective timeout: all_reduce on group dp_ep[tp=0,pp=0] (world ranks "
                           "0,1,2,3) waited 8.0 s; missing rank(s): 1,3 (world)"));
  ASSERT_TRUE(p.failing());
  EXPECT_EQ(p.failure().message_rank, 0);
  EXPECT_EQ(p.failure().missing, (std::vector<int>{1, 3}));
}

TEST(MpirunOutput, InfoLinesMentioningADeadlineAreNoFailure) {
  MpirunOutputParser p;
  p.feed(parse_output_line("[1,0]<stderr>:[moe4d rank 0] info: checkpoint written: /runs/deadline/ckpt/step_4"));
  p.feed(parse_output_line("[1,1]<stderr>:[moe4d rank 1] WARNING: collective deadline 10 s is short"));
  EXPECT_FALSE(p.failing());
}

TEST(MpirunOutput, MpiAbort) {
  MpirunOutputParser p;
  p.feed(parse_output_line("MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD"));
  p.feed(parse_output_line("with errorcode 2."));
  EXPECT_EQ(p.failure().rank, 3);
  EXPECT_EQ(p.failure().how, "called MPI_Abort (code 2)");
}

}  // namespace
}  // namespace moe4d
