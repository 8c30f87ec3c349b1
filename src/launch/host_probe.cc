#include "launch/host_probe.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/cpu_isa.h"
#include "core/error.h"
#include "core/sha256.h"

namespace moe4d {
namespace {

double read_mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  return 0;
}

// The interface's MTU from the kernel (SIOCGIFMTU), not /sys/class/net: containers and chroots
// often have no sysfs, and the socket ioctl works wherever the network stack does. 0 = unknown.
int read_mtu(const std::string& iface) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return 0;
  ifreq request{};
  std::strncpy(request.ifr_name, iface.c_str(), IFNAMSIZ - 1);
  const int mtu = ioctl(fd, SIOCGIFMTU, &request) == 0 ? request.ifr_mtu : 0;
  close(fd);
  return mtu;
}

struct Interface {
  std::string name;
  uint32_t ipv4 = 0;  // host order
  bool loopback = false;
};

std::vector<Interface> ipv4_interfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    out.push_back({a->ifa_name, ntohl(in->sin_addr.s_addr), (a->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  return out;
}

bool parse_ipv4(const std::string& text, uint32_t* out) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return false;
  *out = ntohl(a.s_addr);
  return true;
}

// btl_tcp_if_include entries are interface names or CIDR subnets (OpenMPI accepts both).
bool matches(const Interface& iface, const std::string& spec) {
  const size_t slash = spec.find('/');
  if (slash == std::string::npos) return iface.name == spec;
  uint32_t net = 0;
  if (!parse_ipv4(spec.substr(0, slash), &net)) return false;
  const int bits = std::atoi(spec.c_str() + slash + 1);
  const uint32_t mask = bits <= 0 ? 0 : (bits >= 32 ? 0xffffffffu : ~((1u << (32 - bits)) - 1));
  return (iface.ipv4 & mask) == (net & mask);
}

void choose_interfaces(const ProbeRequest& request, HostFacts* facts) {
  const std::vector<Interface> ifaces = ipv4_interfaces();
  if (!request.interfaces.empty()) {
    for (const Interface& i : ifaces)
      for (const std::string& spec : request.interfaces)
        if (matches(i, spec)) facts->mtu[i.name] = read_mtu(i.name);
    facts->interface_note = "btl_tcp_if_include";
    return;
  }
  // The interface that holds the host's hostfile address; a 127.x address is loopback.
  uint32_t addr = 0;
  if (parse_ipv4(request.address, &addr)) {
    for (const Interface& i : ifaces)
      if (i.ipv4 == addr || (i.loopback && (addr >> 24) == 127)) facts->mtu[i.name] = read_mtu(i.name);
    if (!facts->mtu.empty()) {
      facts->interface_note = "holds " + request.address;
      return;
    }
  }
  // Otherwise every non-loopback interface that is up (OpenMPI's TCP transport uses them all).
  for (const Interface& i : ifaces)
    if (!i.loopback) facts->mtu[i.name] = read_mtu(i.name);
  facts->interface_note = "all non-loopback interfaces";
}

std::string readable_problem(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::strerror(errno);
  char c;
  in.read(&c, 1);
  if (in.bad()) return "read error";
  return "";
}

}  // namespace

std::vector<std::string> probe_command(const std::string& exe, const ProbeRequest& request) {
  std::vector<std::string> argv = {exe, "launch", "--probe", "--probe-address", request.address};
  for (const std::string& i : request.interfaces) argv.insert(argv.end(), {"--probe-iface", i});
  for (const std::string& p : request.readable) argv.insert(argv.end(), {"--probe-read", p});
  if (!request.disk_dir.empty()) argv.insert(argv.end(), {"--probe-disk", request.disk_dir});
  return argv;
}

HostFacts probe_this_host(const ProbeRequest& request, const std::string& version) {
  namespace fs = std::filesystem;
  HostFacts f;
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  f.hostname = name;
  f.version = version;
  std::error_code ec;
  f.exe = fs::read_symlink("/proc/self/exe", ec).string();
  f.exe_sha256 = sha256_file("/proc/self/exe");
  f.mem_available = read_mem_available();
  f.cpu_model = cpu_model_name();
  f.cpu_needed = needed_isa_list();
  f.cpu_missing = missing_isa_list();
  choose_interfaces(request, &f);
  if (!request.disk_dir.empty()) {
    fs::path dir = fs::absolute(request.disk_dir, ec);
    while (!dir.empty() && !fs::exists(dir, ec) && dir != dir.parent_path()) dir = dir.parent_path();
    struct statvfs st{};
    if (::statvfs(dir.c_str(), &st) == 0) {
      f.disk_free = double(st.f_bavail) * double(st.f_frsize);
      f.disk_path = dir.string();
    }
  }
  for (const std::string& p : request.readable)
    if (std::string why = readable_problem(p); !why.empty()) f.unreadable[p] = why;
  f.unix_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return f;
}

nlohmann::json host_facts_to_json(const HostFacts& f) {
  return {{"probe", "moe4d"},          {"hostname", f.hostname},   {"version", f.version},
          {"exe", f.exe},              {"exe_sha256", f.exe_sha256}, {"unix_time", f.unix_time},
          {"mem_available", f.mem_available}, {"mtu", f.mtu},    {"interface_note", f.interface_note},
          {"disk_free", f.disk_free},  {"disk_path", f.disk_path}, {"unreadable", f.unreadable},
          {"cpu_model", f.cpu_model},  {"cpu_needed", f.cpu_needed}, {"cpu_missing", f.cpu_missing}};
}

HostFacts host_facts_from_json(const std::string& text) {
  // The answer is the last line that parses as a probe object (a login banner may precede it).
  std::istringstream lines(text);
  nlohmann::json j;
  for (std::string line; std::getline(lines, line);) {
    auto parsed = nlohmann::json::parse(line, nullptr, false);
    if (parsed.is_object() && parsed.value("probe", "") == "moe4d") j = std::move(parsed);
  }
  if (j.is_null()) fail("no probe answer in the output");
  try {
    HostFacts f;
    f.hostname = j.at("hostname").get<std::string>();
    f.version = j.at("version").get<std::string>();
    f.exe = j.at("exe").get<std::string>();
    f.exe_sha256 = j.at("exe_sha256").get<std::string>();
    f.unix_time = j.at("unix_time").get<double>();
    f.mem_available = j.at("mem_available").get<double>();
    f.mtu = j.at("mtu").get<std::map<std::string, int>>();
    f.interface_note = j.at("interface_note").get<std::string>();
    f.disk_free = j.at("disk_free").get<double>();
    f.disk_path = j.at("disk_path").get<std::string>();
    f.unreadable = j.at("unreadable").get<std::map<std::string, std::string>>();
    f.cpu_model = j.at("cpu_model").get<std::string>();
    f.cpu_needed = j.at("cpu_needed").get<std::string>();
    f.cpu_missing = j.at("cpu_missing").get<std::string>();
    return f;
  } catch (const nlohmann::json::exception& e) {
    fail("malformed probe answer: {}", e.what());
  }
}

}  // namespace moe4d
