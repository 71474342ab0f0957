// Fuzzes what the E2B-compatible API (controller/service/e2b) parses from a client before any
// sandbox is touched: envd's Connect messages (JSON, and the envelope of a server-stream
// request), the control plane's bodies and list query, multipart uploads, paths and Host
// names; and the sessions file it reads at start (e2b.sessions_file). Whatever the bytes, a
// parser returns a value or an error with a message; replies built from what was parsed are
// valid JSON; framing and the sessions file round-trip.
//
// Input: the first byte picks the target, the rest is its input.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include <Poco/Exception.h>
#include <Poco/JSON/Parser.h>

#include "e2b/base64.h"
#include "e2b/connect_codec.h"
#include "e2b/control_wire.h"
#include "e2b/envd_wire.h"
#include "e2b/filesystem/files_wire.h"
#include "e2b/session_store.h"
#include "fuzz_check.h"

namespace {

using namespace pvs::service::e2b;

using pvs::fuzz::require;
using pvs::fuzz::valid_json;

template <typename T>
void require_parsed(const Parsed<T>& p) {
  require(p.value.has_value() != p.error.has_value());
  if (p.error) {
    require(!p.error->message.empty());
    require(valid_json(unary_error_body(*p.error)));
  }
}

void fuzz_envd(std::string_view input, unsigned which) {
  switch (which % 10) {
    case 0: {
      auto s = parse_start(input);
      require_parsed(s);
      if (s) {
        require(!shell_line(s.value->process).empty());
        require(!policy_text(s.value->process).empty() || s.value->process.args.size() >= 2);
        ProcessInfo info{s.value->process, 1, s.value->tag};
        require(valid_json(list_reply({info})));
      }
      break;
    }
    case 1: require_parsed(parse_selector_request(input)); break;
    case 2: {
      auto in = parse_send_input(input);
      require_parsed(in);
      if (in) require(valid_json(data_event(Stream::kStdout, in.value->data)));
      break;
    }
    case 3: require_parsed(parse_send_signal(input)); break;
    case 4: require_parsed(parse_update(input)); break;
    case 5: require_parsed(parse_path_request(input)); break;
    case 6: require_parsed(parse_list_dir(input)); break;
    case 7: require_parsed(parse_move(input)); break;
    case 8: require_parsed(parse_watch_dir(input)); break;
    case 9: {
      auto id = parse_watcher_id(input);
      require_parsed(id);
      if (id) {
        require(valid_json(watcher_created_reply(*id.value)));
        require(valid_json(watcher_events_reply({{WatchEventType::kRename, *id.value}})));
      }
      break;
    }
  }
}

void fuzz_control(std::string_view input, unsigned which) {
  auto check = [](const auto& r) {
    if (!r) {
      require(r.error().status == 400 && !r.error().message.empty());
      require(valid_json(e2b_error_body(r.error())));
    }
  };
  switch (which % 4) {
    case 0: {
      auto r = parse_new_sandbox(input, {3600});
      check(r);
      if (r) require(r->create.ttl_seconds >= 0 && r->create.ttl_seconds <= 3600);
      break;
    }
    case 1: check(parse_timeout(input, 3600)); break;
    case 2: check(parse_network_update(input)); break;
    case 3: {
      std::multimap<std::string, std::string> q;
      auto eq = input.find('=');
      q.emplace(std::string(input.substr(0, eq)),
                eq == std::string_view::npos ? "" : std::string(input.substr(eq + 1)));
      check(parse_list_query(q));
      auto m = parse_metrics_query(q);
      check(m);
      if (m && m->start && m->end) require(*m->start <= *m->end);
      break;
    }
  }
}

void fuzz_framing(std::string_view input) {
  auto r = single_message(input, 1 << 16);
  require(r.message.has_value() != r.error.has_value());
  if (r.message) require(frame(0, *r.message) == input);
  EnvelopeReader reader(1 << 16);
  reader.feed(input);
  std::size_t consumed = 0;
  while (auto f = reader.next()) consumed += kEnvelopeHeader + f->payload.size();
  require(reader.error() || consumed + reader.pending() == input.size());
  auto decoded = base64_decode(input);
  if (decoded) require(base64_decode(base64_encode(*decoded)) == decoded);
}

void fuzz_files(std::string_view input, unsigned which) {
  switch (which % 4) {
    case 0: {
      auto parts = parse_multipart(input, "b");
      if (parts) {
        require(parts->size() <= kMaxMultipartParts);
        for (const auto& p : *parts)
          require(p.data.data() >= input.data() &&
                  p.data.data() + p.data.size() <= input.data() + input.size());
      }
      (void)multipart_boundary(input);
      break;
    }
    case 1: {
      auto p = resolve_path(input, "/root");
      if (p) require(!p->empty() && (*p)[0] == '/' && p->find("/../") == std::string::npos);
      break;
    }
    case 2:
      if (auto id = sandbox_from_host(input)) require(id->size() == 15);
      (void)classify_content_type(input);
      (void)parse_timeout_ms(input);
      break;
    case 3: {
      auto records = SessionStore::decode(input);
      if (!records) {
        require(!records.error().message.empty());
        break;
      }
      auto again = SessionStore::decode(SessionStore::encode(*records));
      require(again && again->sessions.size() == records->sessions.size() &&
              again->volume_key == records->volume_key);
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  unsigned which = data[0] >> 2;
  switch (data[0] % 4) {
    case 0: fuzz_envd(input, which); break;
    case 1: fuzz_control(input, which); break;
    case 2: fuzz_framing(input); break;
    case 3: fuzz_files(input, which); break;
  }
  return 0;
}
