// File: verl/rl/rewards/reward_score/search_r1.h
//
// verl's Search-R1 QA exact-match scorer (searchR1_nq, _triviaqa, _popqa,
// _hotpotqa, _2wikimultihopqa, _musique, _bamboogle): the last
// <answer>…</answer> (DOTALL, stripped), SQuAD normalisation (lowercase,
// drop ASCII punctuation, drop articles a/an/the, collapse whitespace),
// exact match against any target → `score`, divided by 4 if the response has
// more than 10 <answer> or </answer> tags; wrong → format_score; none → 0.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_SEARCH_R1_H_
#define VERL_RL_REWARDS_REWARD_SCORE_SEARCH_R1_H_

#include <optional>
#include <string>
#include <vector>

namespace verl::rl::reward {

std::string NormalizeQaAnswer(const std::string& s);
std::optional<std::string> ExtractSearchR1Answer(const std::string& solution);
double SearchR1ComputeScore(const std::string& solution,
                            const std::vector<std::string>& targets,
                            double format_score = 0.0, double score = 1.0);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_SEARCH_R1_H_
