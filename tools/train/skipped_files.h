// --on-bad-sample skip on image folders (issue 27): the files left out are said in the run's own output. At
// load time every file is checked and one line says how many were skipped and the first; files that fail
// later (during an epoch or an evaluation: changed on disk, or a decoder refused them) are printed after that
// epoch; each one goes to --log as a {"event": "skipped_file"} record and to the report JSON with its reason.
// Above --max-bad-fraction of a folder's files the run stops (IOError: exit 1), naming the count and the
// first files: a folder that is mostly unreadable is a mistake, not noise.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/image_folder.h"
#include "models/report/metrics_log.h"
#include "models/report/run_report.h"

namespace liftoff::tools {

class SkippedFiles {
 public:
  // folders: the run's image folders (train, test); null entries are left out.
  SkippedFiles(std::vector<std::shared_ptr<const ImageFolder>> folders, double max_bad_fraction);

  // Checks every file of every folder (ImageFolder::check_files, `threads` at a time), records what it found
  // as found at "load", then applies the threshold.
  void check_at_load(int threads);
  // "skipped N of M files (first: path: reason; full list in --report / --log)"; "" when none was.
  std::string load_line() const;
  // The files found bad since the last call (or the load): recorded as found during `when` ("epoch 3"),
  // written to `log` (when given) with the ones not logged yet, and printed when `print`. Then the threshold.
  void report_new(const std::string& when, MetricsLog* log, bool print);
  // The list (files found since the last epoch as found at the "end" of the run) and the file count, for
  // the report.
  void fill(LoaderReport& loader);

 private:
  // Moves the folders' new entries into found_ as found during `when`; returns how many.
  size_t collect(const std::string& when);
  // Throws IOError when a folder's bad files exceed the threshold.
  void check_threshold() const;

  struct Folder {
    std::shared_ptr<const ImageFolder> folder;
    int64_t seen = 0;  // entries of its list already in found_
  };
  std::vector<Folder> folders_;
  double max_bad_fraction_;
  std::vector<LoaderReport::SkippedFile> found_;
  size_t logged_ = 0;  // entries of found_ written to the log
};

}  // namespace liftoff::tools
