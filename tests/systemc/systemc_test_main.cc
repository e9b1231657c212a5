// sc_main() of the SystemC test binaries (libsystemc's main() calls it). The SystemC kernel cannot
// be restarted within a process, so each test must run in a process of its own: ctest does that
// (one test per invocation); run by hand with several tests selected, this main runs each of them
// in a child process of this binary (--gtest_filter=Suite.Name) and reports them together.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <systemc>
#include <vector>

namespace {

// The tests this invocation selects, from this binary's own --gtest_list_tests.
// This binary's own path (argv[0] may be a bare name found through PATH).
std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::vector<std::string> selected_tests(const std::string& self, const std::string& filter) {
  const std::string cmd = "'" + self + "' --gtest_list_tests '--gtest_filter=" + filter + "'";
  std::vector<std::string> names;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return names;
  char line[1024];
  std::string suite;
  while (std::fgets(line, sizeof line, p)) {
    std::string s(line);
    s = s.substr(0, s.find_first_of("#\n"));
    while (!s.empty() && s.back() == ' ') s.pop_back();
    if (s.empty()) continue;
    if (s[0] != ' ') {
      suite = s;  // "Suite."
    } else {
      names.push_back(suite + s.substr(s.find_first_not_of(' ')));
    }
  }
  pclose(p);
  return names;
}

}  // namespace

int sc_main(int argc, char** argv) {
  std::string filter = "*";
  bool listing = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--gtest_filter=", 15) == 0) filter = argv[i] + 15;
    if (std::strncmp(argv[i], "--gtest_list_tests", 18) == 0) listing = true;
  }
  if (!listing) {
    setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);  // the children's banner
    const std::vector<std::string> tests = selected_tests(self_path(), filter);
    if (tests.size() > 1) {
      // Children: this very binary (/proc/self/exe, whatever argv[0] says) with every flag
      // given, the filter narrowed to one test.
      std::vector<std::string> args;
      for (int i = 1; i < argc; ++i)
        if (std::strncmp(argv[i], "--gtest_filter=", 15) != 0) args.push_back(argv[i]);
      std::vector<std::string> failed;
      for (const std::string& t : tests) {
        std::printf("[ process  ] %s\n", t.c_str());
        std::fflush(stdout);
        const pid_t pid = fork();
        if (pid < 0) {
          std::perror("fork");
          return 1;
        }
        if (pid == 0) {
          std::vector<std::string> own = args;
          own.push_back("--gtest_filter=" + t);
          std::vector<char*> cargv{argv[0]};
          for (auto& a : own) cargv.push_back(a.data());
          cargv.push_back(nullptr);
          execv("/proc/self/exe", cargv.data());
          std::perror("execv /proc/self/exe");
          _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed.push_back(t);
      }
      std::printf("[==========] %zu tests, each in its own process: %zu failed\n", tests.size(),
                  failed.size());
      for (const auto& t : failed) std::printf("[  FAILED  ] %s\n", t.c_str());
      return failed.empty() ? 0 : 1;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
