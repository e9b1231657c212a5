// A run's own configuration, kept in its folder (docs/training.md, "Resuming"): every run of
// tessera train writes DIR/run.json (the options that define what it computes) and
// DIR/model.json (its model, the canonical description), and `--resume DIR` takes the run's
// configuration from there: an option given on the command line is used as given (and the
// checkpoint's checks refuse one that changes what the run computes), every other is the run's.
// A resume continues in the run's own folder unless --out says otherwise.
#pragma once

#include <string>

#include "sw/tools/train_tool.h"

namespace tessera::tools {

// Writes DIR/run.json and DIR/model.json (atomically). `model_json`: the canonical description
// of the model the run trains (keras::model_description_json).
void write_run_options(const std::string& dir, const TrainOptions& opt,
                       const std::string& model_json);
// With opt.resume naming a run folder (or its checkpoint) that has a run.json: the options not in
// opt.given take the run's values, and opt.out becomes the run's folder unless given. Returns ""
// or a message naming the file and what is wrong with it (an unreadable or malformed run.json);
// a folder without one (a run of an older tessera, a bare checkpoint file) leaves opt as it is.
std::string apply_run_options(TrainOptions& opt);

}  // namespace tessera::tools
