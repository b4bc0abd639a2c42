// snapkv eval: the sample generators. RULER's synthetic tasks (NVIDIA/RULER,
// scripts/data/synthetic/ and synthetic.yaml; re-implemented from their definitions), the
// depth x length needle grid and the fidelity document. Every sample is a pure function of
// (task, length, seed, index[, depth]) and the tokenizer: sized to exactly length - gen_tokens
// prompt ids (docs/design.md, "Eval").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eval/prompt.h"

namespace snapkv::eval {

enum class TaskKind { Niah, VariableTracking, CommonWords, FrequentWords, NiahGrid, Fidelity, NiahFollowUp };

struct TaskInfo {
  std::string name;
  TaskKind kind;
  int gen_tokens;  ///< tokens generated (RULER's tokens_to_generate); fidelity: continuation tokens scored
  std::string doc;
};

/// Every task, in the order of the help text.
const std::vector<TaskInfo>& all_tasks();
/// Throws snapkv::Error listing the task names for an unknown one.
const TaskInfo& task_info(std::string_view name);
/// The 11 RULER tasks (niah_single_1 ... fwe).
std::vector<std::string> ruler_task_names();

/// A question of the multi-question protocol (asked after the compressed context).
struct Question {
  std::vector<int32_t> ids;
  std::vector<std::string> expected;
  /// The followup protocol: the ids after the context and question 0's ids (question 0's expected
  /// answer, then this question as a follow-up turn: PromptFormat::follow_up); empty for question 0.
  std::vector<int32_t> follow_up;
};

struct Sample {
  std::string id;  ///< "task/length/index", the grid adds "/d<depth percent>"
  std::string task;
  int64_t length = 0;  ///< positions the sample may use: prompt + gen_tokens
  int index = 0;
  uint64_t seed = 0;         ///< this sample's own seed (derived from the run's seed and the id)
  double depth = -1;         ///< niah_grid: requested needle depth in [0, 1]; else -1
  double depth_actual = -1;  ///< niah_grid: share of the haystack's tokens before the needle
  int gen_tokens = 0;
  PromptIds ids;  ///< context and question ids; ids.size() == length - gen_tokens
  std::vector<std::string> expected;
  std::vector<Question> questions;    ///< multi-question protocol (at least one)
  std::string context_text;           ///< the text the context ids came from (template included)
  std::string question_text;          ///< the same for the question ids
  std::vector<int32_t> continuation;  ///< fidelity: the gen_tokens + 1 ids after the context
};

struct SampleRequest {
  std::string task;
  int64_t length = 0;
  uint64_t seed = 0;  ///< the run's seed
  int index = 0;
  double depth = -1;  ///< niah_grid only, in [0, 1]
};

/// The id of a request ("task/length/index[/dNN]", the depth in percent to 0.01: "d33.25").
std::string sample_id(const SampleRequest& r);

class Generator {
 public:
  /// Keeps a reference to `format` (and its engine), which must outlive the generator.
  explicit Generator(const PromptFormat& format);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  /// Throws snapkv::Error for an unknown task, a length too short for the task's template (or
  /// longer than the text available), a depth outside [0, 1] or given to another task, or a
  /// prompt that cannot be sized exactly.
  Sample make(const SampleRequest& r);

  const PromptFormat& format() const { return *fmt_; }

  struct Impl;

 private:
  const PromptFormat* fmt_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace snapkv::eval
