// Policy rules for tests, written as the rules of a policy: section are (policy/policy.h).
//
//   auto rm = test::rule("policy.default[0]", {PolicyAction::kExec}, Verdict::kDeny, "no");
//   rm.command = R"(^rm\s)";
//   config.policy = test::compiled({rm});   // a failure to compile fails the test
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "policy/policy.h"

namespace pvs::test {

inline service::PolicyRuleSpec rule(const std::string& where,
                                    std::set<service::PolicyAction> actions,
                                    service::Verdict verdict, const std::string& message = "") {
  service::PolicyRuleSpec r;
  r.where = where;
  r.actions = std::move(actions);
  r.verdict = verdict;
  r.message = message;
  return r;
}

// The policy of `spec`; a spec that does not compile fails the test (and allows everything).
inline service::Policy compiled(const service::PolicySpec& spec) {
  auto policy = service::Policy::compile(spec);
  EXPECT_TRUE(policy) << policy.error().message;
  return policy ? *policy : service::Policy();
}

}  // namespace pvs::test
