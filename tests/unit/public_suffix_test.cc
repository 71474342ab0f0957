// egress_wildcard_problem (public_suffix.h): a wildcard at a public suffix of the list's ICANN
// or private section, or under a wildcard DNS service, is refused and says why (#32, finding 5).
#include <gtest/gtest.h>

#include "pvesandbox/common/public_suffix.h"

namespace pvs {
namespace {

TEST(PublicSuffix, WildcardsAtAPublicSuffixAreRefusedWithTheReason) {
  struct Case {
    const char* pattern;
    const char* says;
  };
  for (auto [pattern, says] : {
           Case{"*.co.uk", "co.uk is a public suffix (Public Suffix List, ICANN section)"},
           Case{"*.com", "com is a public suffix (Public Suffix List, ICANN section)"},
           Case{"*.github.io",
                "github.io is a public suffix (Public Suffix List, private section)"},
           Case{"*.blogspot.com", "blogspot.com is a public suffix"},
           Case{"*.s3.amazonaws.com", "s3.amazonaws.com is a public suffix"},
           Case{"*.nip.io", "nip.io is a wildcard DNS service"},
           Case{"*.10.0.0.1.nip.io", "nip.io is a wildcard DNS service"},
           Case{"*.sslip.io", "sslip.io is a wildcard DNS service"},
       }) {
    auto why = egress_wildcard_problem(pattern);
    EXPECT_EQ(why.find(std::string(pattern) + ": "), 0u) << why;
    EXPECT_NE(why.find(says), std::string::npos) << pattern << ": " << why;
    EXPECT_NE(why.find("list the hosts"), std::string::npos) << why;
  }
}

TEST(PublicSuffix, WildcardsUnderOneOwnersDomainAndPlainNamesPass) {
  for (const char* pattern : {"*.example.com", "*.pythonhosted.org", "*.github.com",
                              "*.example.co.uk", "*.pages.github.io", "*.example.internal", "co.uk",
                              "github.io", "nip.io", "10.0.0.1.nip.io", "pypi.org"})
    EXPECT_EQ(egress_wildcard_problem(pattern), "") << pattern;
  EXPECT_EQ(egress_wildcards_problem({"pypi.org", "*.example.com"}), "");
  EXPECT_NE(egress_wildcards_problem({"pypi.org", "*.github.io"}).find("github.io"),
            std::string::npos);
}

}  // namespace
}  // namespace pvs
