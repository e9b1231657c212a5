// A run's own configuration in its folder (run_options.h).
#include "sw/tools/run_options.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "sw/runlog/file_util.h"
#include "sw/tools/run_folder.h"

namespace tessera::tools {
namespace {

using Json = nlohmann::ordered_json;

// The options a run keeps, by their flag names: each a way to write it and to take it back.
// (--out, --resume, --threads, --stop-after, --dump-init and the progress bar belong to an
// invocation, not to the run.)
struct Field {
  const char* flag;
  void (*put)(Json&, const TrainOptions&);
  void (*take)(const Json&, TrainOptions&);
};
#define TESSERA_RUN_FIELD(flag, member)                                                         \
  Field {                                                                                       \
    flag, [](Json& j, const TrainOptions& o) { j[flag] = o.member; },                           \
        [](const Json& j, TrainOptions& o) { o.member = j.at(flag).get<decltype(o.member)>(); } \
  }
const Field kFields[] = {
    TESSERA_RUN_FIELD("backend", backend),
    TESSERA_RUN_FIELD("steps", steps),
    TESSERA_RUN_FIELD("epochs", epochs),
    TESSERA_RUN_FIELD("batch", batch),
    TESSERA_RUN_FIELD("array", array),
    TESSERA_RUN_FIELD("channels", channels),
    TESSERA_RUN_FIELD("arith", arith),
    TESSERA_RUN_FIELD("chips", chips),
    TESSERA_RUN_FIELD("seed", seed),
    TESSERA_RUN_FIELD("data", data),
    TESSERA_RUN_FIELD("sample-every", sample_every),
    TESSERA_RUN_FIELD("checkpoint-every", checkpoint_every),
    TESSERA_RUN_FIELD("eval-samples", eval_samples),
    TESSERA_RUN_FIELD("eval-backend", eval_backend),
    TESSERA_RUN_FIELD("optimizer", optimizer),
    TESSERA_RUN_FIELD("lr", lr),
    TESSERA_RUN_FIELD("momentum", momentum),
    TESSERA_RUN_FIELD("lr-schedule", lr_schedule),
    TESSERA_RUN_FIELD("beta1", beta1),
    TESSERA_RUN_FIELD("beta2", beta2),
    TESSERA_RUN_FIELD("label-smoothing", label_smoothing),
};
#undef TESSERA_RUN_FIELD

}  // namespace

void write_run_options(const std::string& dir, const TrainOptions& opt,
                       const std::string& model_json) {
  Json j;
  for (const Field& f : kFields) f.put(j, opt);
  j["model"] = opt.model;  // the file the run was given ("": the example CNN); model.json holds it
  runlog::write_file_atomically(dir + "/run.json", j.dump(2) + "\n");
  runlog::write_file_atomically(dir + "/model.json", model_json);
}

std::string apply_run_options(TrainOptions& opt) {
  if (opt.resume.empty()) return "";
  const std::string dir = resume_run_dir(opt.resume);
  if (dir.empty()) return "";
  const std::string path = dir + "/run.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return path + ": cannot read it";
  Json j;
  try {
    j = Json::parse(text.str());
    // --steps and --epochs are one choice: the run's length
    const bool length_given = opt.given.count("steps") || opt.given.count("epochs");
    for (const Field& f : kFields) {
      const std::string flag = f.flag;
      if (opt.given.count(flag) || ((flag == "steps" || flag == "epochs") && length_given))
        continue;
      f.take(j, opt);
    }
  } catch (const std::exception& e) {
    return path + ": not a run's options file (" + e.what() + ")";
  }
  if (!opt.given.count("model")) opt.model = dir + "/model.json";
  if (!opt.given.count("out")) opt.out = dir;
  return "";
}

}  // namespace tessera::tools
