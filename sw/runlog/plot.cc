// Training curves through gnuplot (sw/include/tessera/plot.h).
#include "tessera/plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "sw/runlog/file_util.h"

extern char** environ;

namespace tessera::runlog {
namespace {

// A gnuplot single-quoted string: a quote inside is written twice.
std::string gnuplot_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out.push_back(c);
    if (c == '\'') out.push_back('\'');
  }
  return out + "'";
}

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// Runs `argv`, stdin from /dev/null, stdout and stderr captured together; returns the wait
// status.
int run_capturing(const std::vector<std::string>& argv, std::string& output) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(errno_message("pipe", "gnuplot"));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  const int err = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    throw std::runtime_error(argv[0] + ": cannot run: " + std::strerror(err));
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

std::string find_gnuplot() {
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env ? path_env : "/usr/bin:/bin";
  for (const char* name : {"gnuplot", "gnuplot-nox"}) {
    size_t start = 0;
    for (;;) {
      const size_t end = path.find(':', start);
      std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
      if (dir.empty()) dir = ".";
      const std::string candidate = dir + "/" + name;
      if (is_executable_file(candidate)) return candidate;
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return "";
}

void plot_training_curves(const std::string& metrics_csv, const std::string& png_path) {
  const std::string gnuplot = find_gnuplot();
  if (gnuplot.empty()) {
    throw std::runtime_error("plot " + png_path +
                             ": gnuplot not found on PATH (Debian: apt-get install gnuplot-nox)");
  }
  const std::string csv = gnuplot_quote(metrics_csv);
  // gnuplot draws into a tmp file renamed over PNG_PATH once it succeeds: a failed plot leaves
  // no half-written picture and an older one stays.
  const std::string tmp_png = png_path + ".tmp." + std::to_string(::getpid()) + ".png";
  const std::string size = "size 960,720\n";
  std::string script;
  script += "# Training curves of " + metrics_csv + " (tessera::runlog::plot_training_curves).\n";
  script += "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n";
  script += "  set terminal pngcairo noenhanced " + size;
  script += "} else {\n";
  script += "  set terminal png noenhanced " + size;
  script += "}\n";
  script += "set output " + gnuplot_quote(tmp_png) + "\n";
  script += "set datafile separator ','\n";
  script += "set grid\n";
  script += "set multiplot layout 2,1 title " + gnuplot_quote(metrics_csv) + "\n";
  script += "set ylabel 'loss'\n";
  script += "set key top right\n";
  script += "plot " + csv + " skip 1 using 1:2 with lines linewidth 2 title 'loss'\n";
  script += "set xlabel 'step'\n";
  script += "set ylabel 'accuracy'\n";
  script += "set key bottom right\n";
  script +=
      "plot " + csv + " skip 1 using 1:3 with lines linewidth 2 linecolor 2 title 'accuracy'\n";
  script += "unset multiplot\n";
  script += "set output\n";
  const std::string script_path = png_path + ".gp";
  write_file_atomically(script_path, script);

  std::string output;
  const int status = run_capturing({gnuplot, script_path}, output);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ::unlink(tmp_png.c_str());
    const std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                              : "signal " + std::to_string(WTERMSIG(status));
    throw std::runtime_error("plot " + png_path + ": " + gnuplot + " " + script_path + " failed (" +
                             how + "):\n" + output);
  }
  struct stat st;
  if (::stat(tmp_png.c_str(), &st) != 0 || st.st_size == 0) {
    ::unlink(tmp_png.c_str());
    throw std::runtime_error("plot " + png_path + ": gnuplot wrote no PNG:\n" + output);
  }
  if (::rename(tmp_png.c_str(), png_path.c_str()) != 0) {
    const std::string message = errno_message(png_path, "cannot rename " + tmp_png + " over it");
    ::unlink(tmp_png.c_str());
    throw std::runtime_error(message);
  }
}

}  // namespace tessera::runlog
