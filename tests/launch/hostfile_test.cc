// Hostfile parsing: the articles' msrun lines, OpenMPI's and MPICH's syntax, and bad lines.
#include "launch/hostfile.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace moe4d {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_hostfile(text, "hosts");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Hostfile, ArticlesMsrunLines) {
  const auto hosts = parse_hostfile("192.168.1.10 slots=8\n192.168.1.11 slots=8\n192.168.1.17 slots=8\n", "hf");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].host, "192.168.1.10");
  EXPECT_EQ(hosts[2].host, "192.168.1.17");
  for (const HostEntry& h : hosts) EXPECT_EQ(h.slots, 8);
  EXPECT_EQ(hosts[1].line, 2);
}

TEST(Hostfile, OpenMpiSyntaxCommentsAndBlankLines) {
  const std::string text =
      "# cluster A\n"
      "\n"
      "node01 slots=4 max_slots=8   # trailing comment\n"
      "   node02\tslots = 4\n"
      "node03 max-slots=6 slots=2\r\n"
      "node04\n"
      "node05 count=3\n"
      "   \n";
  const auto hosts = parse_hostfile(text, "hf");
  ASSERT_EQ(hosts.size(), 5u);
  EXPECT_EQ(hosts[0].host, "node01");
  EXPECT_EQ(hosts[0].slots, 4);
  EXPECT_EQ(hosts[0].max_slots, 8);
  EXPECT_EQ(hosts[0].line, 3);
  EXPECT_EQ(hosts[1].host, "node02");
  EXPECT_EQ(hosts[1].slots, 4);
  EXPECT_EQ(hosts[2].slots, 2);
  EXPECT_EQ(hosts[2].max_slots, 6);
  EXPECT_EQ(hosts[3].slots, 0);  // not given
  EXPECT_EQ(hosts[4].slots, 3);
}

TEST(Hostfile, MpichColonForm) {
  const auto hosts = parse_hostfile("127.0.0.2:2\n127.0.0.3:4\n", "hf");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].host, "127.0.0.3");
  EXPECT_EQ(hosts[1].slots, 4);
}

TEST(Hostfile, RepeatedHostAddsSlots) {
  const auto hosts = parse_hostfile("a slots=2\nb slots=1\na slots=3\n", "hf");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].host, "a");
  EXPECT_EQ(hosts[0].slots, 5);
  EXPECT_EQ(error_of("n:2\nn slots=2 max_slots=2\n"),
            "hosts:2: 'n slots=2 max_slots=2': host n now has slots=4 (lines 1 and 2), more than its max_slots=2");
}

TEST(Hostfile, BadLinesNameFileLineAndText) {
  EXPECT_EQ(error_of("node01 slots=8\nnode02 slot=8\n"),
            "hosts:2: 'node02 slot=8': unknown keyword 'slot' (expected 'HOST', 'HOST slots=N [max_slots=M]' or "
            "'HOST:N'; known keywords: slots, max_slots)");
  EXPECT_EQ(error_of("node01 slots=eight\n"), "hosts:1: 'node01 slots=eight': slots needs a positive integer, got 'eight'");
  EXPECT_EQ(error_of("node01 slots=0\n"), "hosts:1: 'node01 slots=0': slots needs a positive integer, got '0'");
  EXPECT_EQ(error_of("node01 slots=-2\n"), "hosts:1: 'node01 slots=-2': slots needs a positive integer, got '-2'");
  EXPECT_EQ(error_of("node01 slots\n"), "hosts:1: 'node01 slots': slots needs a positive integer, got ''");
  EXPECT_EQ(error_of("node01 slots=4 max_slots=2\n"), "hosts:1: 'node01 slots=4 max_slots=2': slots=4 is more than max_slots=2");
  EXPECT_NE(error_of("\n\nnode01:x\n").find("hosts:3: 'node01:x': expected"), std::string::npos);
  EXPECT_NE(error_of("node01:4 slots=4\n").find("hosts:1:"), std::string::npos);
  EXPECT_NE(error_of("no/de slots=1\n").find("hosts:1: 'no/de slots=1': host name 'no/de' has characters"),
            std::string::npos);
  EXPECT_NE(error_of("-n 4\n").find("hosts:1:"), std::string::npos);
  EXPECT_EQ(error_of("# nothing\n\n"), "hosts: no hosts (every line is blank or a comment)");
  EXPECT_EQ(error_of(""), "hosts: no hosts (every line is blank or a comment)");
  EXPECT_NE(error_of(std::string("node\x01 slots=1\n")).find("'node? slots=1'"), std::string::npos);
  EXPECT_NE(error_of("node01 slots=99999999\n").find("positive integer"), std::string::npos);
}

TEST(Hostfile, MissingFile) {
  try {
    read_hostfile("/nonexistent/hostfile");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read hostfile '/nonexistent/hostfile'"), std::string::npos);
  }
}

}  // namespace
}  // namespace moe4d
