// The HTTP client of the REST API (libcurl) and the output helpers.
#include <curl/curl.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <Poco/JSON/Parser.h>
#include <Poco/JSON/Stringifier.h>

#include "pvesandbox/common/text.h"
#include "sandboxctl.h"

namespace pvs::cli {

Reply Client::request(const std::string& method, const std::string& path, const std::string& body,
                      const std::string& content_type, const std::string& accept,
                      std::function<void(std::string_view)> on_data) {
  CURL* curl = curl_easy_init();
  if (!curl) throw std::runtime_error("curl_easy_init failed");
  Reply reply;
  struct Sink {
    Reply* reply;
    std::function<void(std::string_view)>* on_data;
  } sink{&reply, &on_data};
  std::string url = options_.url + path;
  curl_slist* headers = nullptr;
  std::string auth = "Authorization: Bearer " + options_.token;
  if (!options_.token.empty()) headers = curl_slist_append(headers, auth.c_str());
  headers = curl_slist_append(headers, ("Accept: " + accept).c_str());
  if (!body.empty() || method == "POST" || method == "PUT") {
    headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
  if (!options_.cacert.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.cacert.c_str());
  if (method == "POST" || method == "PUT" || !body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
        auto* s = static_cast<Sink*>(user);
        std::string_view chunk(data, size * n);
        long status = 0;
        (void)status;
        if (*s->on_data && s->reply->status == 0) {
          (*s->on_data)(chunk);
        } else {
          s->reply->body.append(chunk);
        }
        return size * n;
      });
  // The status is known once headers are in: stream only 200 replies.
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(
      curl, CURLOPT_HEADERFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
        auto* s = static_cast<Sink*>(user);
        std::string_view line(data, size * n);
        if (line.rfind("HTTP/", 0) == 0) {
          auto sp = line.find(' ');
          long code = sp == std::string_view::npos
                          ? 0
                          : std::atol(std::string(line.substr(sp + 1, 3)).c_str());
          // Streaming applies to a 200 only; errors are collected.
          s->reply->status = code == 200 ? 0 : code;
        }
        return size * n;
      });
  CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  char* ct = nullptr;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
  if (ct) reply.content_type = ct;
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    throw std::runtime_error("cannot reach " + options_.url + ": " + curl_easy_strerror(rc));
  }
  reply.status = status;
  return reply;
}

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string Args::query(const std::string& command, std::initializer_list<std::string_view> names) {
  std::string q;
  while (more()) {
    std::string f = next("option");
    bool known = false;
    for (auto n : names) known = known || f == n;
    if (!known) throw UsageError(command + ": unknown option " + f);
    q += (q.empty() ? "?" : "&") + f.substr(2) + "=" + url_encode(next(f));
  }
  return q;
}

std::string json_string(const std::string& s) {
  std::ostringstream out;
  Poco::JSON::Stringifier::formatString(s, out);
  return out.str();
}

Poco::JSON::Object::Ptr parse_object(const std::string& text) {
  Poco::JSON::Parser parser;
  return parser.parse(text).extract<Poco::JSON::Object::Ptr>();
}

void check(const Reply& r, std::initializer_list<long> ok) {
  for (long s : ok) {
    if (r.status == s) return;
  }
  std::string message = r.body;
  try {
    auto obj = parse_object(r.body);
    auto err = obj->getObject("error");
    if (err) {
      message = err->getValue<std::string>("code") + ": " + err->getValue<std::string>("message");
    }
  } catch (...) {
  }
  while (!message.empty() && message.back() == '\n') message.pop_back();
  throw std::runtime_error("HTTP " + std::to_string(r.status) + ": " + message);
}

std::string str(const Poco::JSON::Object::Ptr& o, const std::string& k) {
  if (!o->has(k) || o->isNull(k)) return "-";
  return o->get(k).toString();
}

std::string internet_text(const Poco::JSON::Object::Ptr& o) {
  auto list = o->getObject("internet");
  if (!list) return str(o, "internet") == "true" ? "yes" : "no";
  std::string out = "allow";
  auto join = [](const Poco::JSON::Array::Ptr& a) {
    std::string s;
    for (std::size_t i = 0; a && i < a->size(); ++i)
      s += (i == 0 ? "" : ",") + a->get(static_cast<unsigned>(i)).toString();
    return s;
  };
  out += " " + join(list->getArray("allow")) + " ports " + join(list->getArray("ports"));
  if (list->has("list")) out += " (list " + list->get("list").toString() + ")";
  return out;
}

std::string labels_text(const Poco::JSON::Object::Ptr& o) {
  auto labels = o->getObject("labels");
  std::string out;
  if (!labels) return "-";
  for (const auto& [k, v] : *labels) out += (out.empty() ? "" : ",") + k + "=" + v.toString();
  return out.empty() ? "-" : out;
}

void print_table(const std::vector<std::vector<std::string>>& cells) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : cells) {
    rows.emplace_back();
    for (const auto& cell : r) rows.back().push_back(terminal_safe(cell));
  }
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

void print_sandbox(const Poco::JSON::Object::Ptr& o) {
  print_table({{"id:", str(o, "id")},
               {"hostname:", str(o, "hostname")},
               {"address:", str(o, "address")},
               {"state:", str(o, "state") + " (" + str(o, "status") + ")"},
               {"internet:", internet_text(o)},
               {"resources:", str(o, "cpus") + " cpu, " + str(o, "memory_mb") + " MB, disk " +
                                  str(o, "disk_gb") + " GB"},
               {"created:", str(o, "created_at")},
               {"expires:", str(o, "expires_at")},
               {"labels:", labels_text(o)},
               {"owner:", str(o, "owner")},
               {"vmid:", str(o, "vmid") + " on " + str(o, "node")}});
}

void print_json(const std::string& body) {
  std::cout << terminal_safe(body, TerminalText::kJson);
}

}  // namespace pvs::cli
