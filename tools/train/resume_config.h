// train --resume: the run continues with the flags its checkpoint stores. Flags given again override them
// where that is safe (more --epochs or --max-steps, outputs, loader and device choices: one note each); a
// change of what defines the trained model (--model, --batch, --amp, --lr, ...) is refused with the reason.
#pragma once
#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "tools/train/flags.h"

namespace liftoff::tools {

// A checkpoint's "config" metadata as flag name -> value text. Reads the JSON this build writes
// ({"batch": "128", ...}) and the older one ({"batch": 128, "max_steps": -1, "lr": -1.0 (auto)}). Throws
// IOError naming `path` when the text is not a JSON object.
std::map<std::string, std::string> parse_stored_config(const std::string& json, const std::string& path);

struct ResumedRun {
  std::string checkpoint;                // the file resumed (a directory's latest valid one)
  std::vector<std::string> passed_over;  // newer files of the directory that were rejected, with the reason
  std::vector<std::string> notes;        // one line per flag given again that overrides the stored value
};

// With f.resume set: resolves the checkpoint, re-parses argv with the stored flags added where the command
// line does not give them (app's final callback checks them again), points f.resume at the file, and checks
// the flags given again. Throws ValueError (a usage error) for an unsafe change, IOError for an unreadable
// checkpoint.
ResumedRun apply_resumed_config(CLI::App& app, Flags& f, int argc, char** argv);

}  // namespace liftoff::tools
