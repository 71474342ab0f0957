// Fuzzes the resolver's DNS parsers: whatever the bytes, parse_query() and parse_response()
// return a value or an error; an accepted query answered and re-read keeps its id and question,
// and an accepted response's chain stays within its bounds.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "dns_message.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pvs::dns;
  std::span<const std::uint8_t> wire(data, size);
  std::optional<std::uint16_t> id;
  if (auto query = parse_query(wire, &id)) {
    if (!id || *id != query->id) std::abort();
    auto answer = build_answer(*query, Rcode::kRefused, {}, 0, 512);
    auto again = parse_response(answer);
    if (query->question.size() + 12 <= 512 && (!again || again->id != query->id)) std::abort();
  }
  if (auto response = parse_response(wire)) {
    auto chain = follow_chain(*response, response->question_name);
    if (chain.chain.size() > response->answers.size()) std::abort();
    if (chain.addresses.size() > response->answers.size()) std::abort();
  }
  return 0;
}
