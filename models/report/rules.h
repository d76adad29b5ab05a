// The verdict: what holds a run back, with the numbers, and the one change most likely to help. A table of
// small named rules over the run's facts (facts.h), walked in priority order; the first that fires gives the
// verdict. docs/report-schema.md states each rule, its thresholds and its suggestions.
//
// A rule returns its verdict's kind, evidence and suggestion (diagnose() stamps the rule's name), or nothing
// when it does not apply. A rule may assume the rules before it in the table did not fire (R5 host is the
// fallback of CUDA runs).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "models/report/facts.h"
#include "models/report/run_report.h"

namespace liftoff {

using VerdictRuleFn = std::optional<Verdict> (*)(const RunReport& report, const VerdictFacts& facts,
                                                 const VerdictThresholds& thresholds);

struct VerdictRule {
  const char* name;  // the verdict's `rule`, e.g. "R2 input"
  VerdictRuleFn apply;
};

// In priority order: R0 no-steps, R0 too-short; R1 copy, R2 input, R3 communication (among these three, the
// one that fires with the largest share wins); R4 compute (cpu), R5 host (cpu); R6 unmeasured; R4 compute; R5
// host.
const std::vector<VerdictRule>& verdict_rules();
// The rule of that name (tests run one rule alone); throws ValueError naming the known rules.
const VerdictRule& verdict_rule(const std::string& name);

// Computes the facts once and walks the table.
Verdict diagnose(const RunReport& report, const VerdictThresholds& thresholds = {});

}  // namespace liftoff
