// sc_main() of the SystemC test binaries (libsystemc's main() calls it). The SystemC kernel cannot be restarted within a process,
// so each test must run in a process of its own: ctest does that (one test per invocation); run
// by hand with several tests selected, this main runs each of them in a child process of this
// binary (--gtest_filter=Suite.Name) and reports them together.
#include <gtest/gtest.h>
#include <systemc>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// The tests this invocation selects, from this binary's own --gtest_list_tests.
std::vector<std::string> selected_tests(const char* self, const std::string& filter) {
  const std::string cmd =
      std::string("'") + self + "' --gtest_list_tests '--gtest_filter=" + filter + "'";
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
    const std::vector<std::string> tests = selected_tests(argv[0], filter);
    if (tests.size() > 1) {
      std::vector<std::string> failed;
      for (const std::string& t : tests) {
        std::printf("[ process  ] %s\n", t.c_str());
        std::fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
          const std::string f = "--gtest_filter=" + t;
          execl(argv[0], argv[0], f.c_str(), static_cast<char*>(nullptr));
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
