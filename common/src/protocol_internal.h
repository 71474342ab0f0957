// Helpers shared by the codec's translation units (protocol.cc, protocol_egress.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/protocol.h"

namespace pvs::proto::detail {

Error bad(std::string message);
// Fields separated by single spaces (check_line() has already refused doubled ones).
std::vector<std::string_view> split(std::string_view text);
// A decimal without sign or leading zeros, within [min, max].
Result<std::uint64_t> parse_decimal(std::string_view text, std::uint64_t min, std::uint64_t max,
                                    std::string_view what);
// "<n> item item ...": the items, once n matches their number.
Result<std::vector<std::string_view>> counted_items(std::string_view payload);
Status expect_arity(const std::vector<std::string_view>& fields, std::size_t min, std::size_t max,
                    std::string_view usage);
// The egress verbs (EGRESS, EGRESSES, ASK, PAIR); nullopt when `fields[0]` is none of them.
std::optional<Result<Request>> parse_egress_request(const std::vector<std::string_view>& fields);
std::string format_egress(const EgressRequest& r);
std::string format_ask(const AskRequest& r);
std::string format_pair(const PairRequest& r);

}  // namespace pvs::proto::detail
