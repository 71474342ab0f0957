// pvesim's HTTPS front end: the certificate, the request pipeline (auth, routing, faults,
// schema validation) and the /_pvesim/ control endpoints.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <Poco/JSON/Parser.h>
#include <Poco/JSON/Stringifier.h>
#include <Poco/URI.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>

#include "pvesandbox/common/log.h"
#include "sim_impl.h"

namespace pvesim {

namespace {

ParamMap parse_form(const std::string& text) {
  ParamMap out;
  std::stringstream in(text);
  std::string pair;
  while (std::getline(in, pair, '&')) {
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    std::string key = pair.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    std::replace(key.begin(), key.end(), '+', ' ');
    std::replace(value.begin(), value.end(), '+', ' ');
    std::string k, v;
    Poco::URI::decode(key, k);
    Poco::URI::decode(value, v);
    out[k] = v;
  }
  return out;
}

std::string json(const Var& v) {
  std::ostringstream out;
  Poco::JSON::Stringifier::stringify(v, out, 0, -1);
  return out.str();
}

}  // namespace

// Sleeps, but returns early when the server shuts down.
void Simulator::Impl::nap(int ms) {
  auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (!closing.load() && Clock::now() < until)
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(5), until - Clock::now()));
}

// ---- TLS ------------------------------------------------------------------------------

pvs::Status Simulator::Impl::make_certificate() {
  // Under $TMPDIR when set: a test that kills the simulator with SIGKILL points it at a
  // directory of its own, which it removes.
  std::error_code ec;
  auto base = std::filesystem::temp_directory_path(ec);
  std::string tmpl = (ec ? std::string("/tmp") : base.string()) + "/pvesim-XXXXXX";
  if (!mkdtemp(tmpl.data())) return pvs::fail(pvs::errno_error("mkdtemp", errno));
  tmpdir = tmpl;
  key_file = tmpdir + "/key.pem";
  cert_path = tmpdir + "/cert.pem";
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(cert), static_cast<long>(rng() & 0x7fffffff));
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 86400L * 365);
  X509_set_version(cert, 2);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("PVE Cluster Node"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cluster->first_node().c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, cert, cert, nullptr, nullptr, 0);
  std::string san = "DNS:localhost,DNS:" + cluster->first_node() + ",IP:127.0.0.1";
  if (options.listen != "0.0.0.0" && options.listen != "127.0.0.1") san += ",IP:" + options.listen;
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name, san.c_str());
  if (ext) {
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(cert, key, EVP_sha256());
  unsigned char md[32];
  unsigned int len = 0;
  X509_digest(cert, EVP_sha256(), md, &len);
  for (unsigned int i = 0; i < len; ++i) {
    if (i) fingerprint += ':';
    fingerprint += hex_upper(md[i], 2);
  }
  FILE* kf = std::fopen(key_file.c_str(), "w");
  FILE* cf = std::fopen(cert_path.c_str(), "w");
  bool ok = kf && cf && PEM_write_PrivateKey(kf, key, nullptr, nullptr, 0, nullptr, nullptr) &&
            PEM_write_X509(cf, cert);
  if (kf) std::fclose(kf);
  if (cf) std::fclose(cf);
  X509_free(cert);
  EVP_PKEY_free(key);
  if (!ok) return pvs::fail(pvs::ErrorCode::kIo, "cannot write the certificate");
  return {};
}

// ---- the HTTP pipeline ----------------------------------------------------------------

void Simulator::Impl::send(Poco::Net::HTTPServerResponse& resp, int status,
                           const std::string& reason, const std::string& body) {
  resp.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(status), reason);
  if (status >= 400) resp.setKeepAlive(false);
  resp.setContentType("application/json;charset=UTF-8");
  resp.setContentLength(static_cast<std::streamsize>(body.size()));
  resp.send() << body;
}

void Simulator::Impl::send_error(Poco::Net::HTTPServerResponse& resp, const ApiFail& f) {
  Object::Ptr o = new Object;
  o->set("data", Var());
  if (!f.errors.empty()) {
    Object::Ptr e = new Object;
    for (const auto& [k, v] : f.errors) e->set(k, v);
    o->set("errors", e);
  }
  o->set("message", f.message + "\n");
  // Only the first line of the message goes into the reason phrase.
  std::string reason = f.message.substr(0, f.message.find('\n'));
  send(resp, f.status, reason, json(o));
}

void Simulator::Impl::handle(Poco::Net::HTTPServerRequest& req,
                             Poco::Net::HTTPServerResponse& resp) {
  struct Active {
    std::atomic<int>& n;
    explicit Active(std::atomic<int>& count) : n(count) { ++n; }
    ~Active() { --n; }
  } active_guard(active);
  if (closing.load()) {
    resp.setKeepAlive(false);
    return send_error(resp, {503, "simulator shutting down", {}});
  }
  Poco::URI uri(req.getURI());
  std::string path = uri.getPath();
  std::string method = req.getMethod();
  std::string body;
  if (req.hasContentLength() || req.getChunkedTransferEncoding()) {
    std::ostringstream os;
    os << req.stream().rdbuf();
    body = os.str();
  }
  if (path.rfind("/_pvesim/", 0) == 0) return control(method, path, body, resp);
  const std::string prefix = "/api2/json";
  std::string api_path = path.rfind(prefix, 0) == 0 ? path.substr(prefix.size()) : "";
  ParamMap path_params;
  const Endpoint* endpoint =
      api_path.empty() ? nullptr : schema.match(method, api_path, &path_params);
  {
    std::lock_guard lock(mutex);
    ++request_total;
    ++counts[method + " " + (endpoint ? endpoint->path : api_path.empty() ? path : api_path)];
  }
  if (api_path.empty()) return send_error(resp, {501, "no such uri", {}});
  // Authentication (pveproxy): token header, split at the last '='.
  std::string auth = req.get("Authorization", "");
  std::string user;
  {
    auto pos = auth.find("PVEAPIToken");
    if (pos == std::string::npos ||
        (pos > 0 && !std::isspace(static_cast<unsigned char>(auth[pos - 1])))) {
      if (!auth.empty()) nap(options.auth_delay_ms);
      resp.setStatusAndReason(Poco::Net::HTTPResponse::HTTP_UNAUTHORIZED,
                              auth.empty() ? "No ticket" : "Authentication failed!");
      resp.setKeepAlive(false);
      resp.setContentLength(0);
      resp.send();
      return;
    }
    std::string value = auth.substr(pos + 11);
    if (!value.empty() && (value[0] == '=' || value[0] == ' ')) value.erase(0, 1);
    value = value.substr(0, value.find(';'));
    std::string decoded;
    Poco::URI::decode(value, decoded);
    auto eq = decoded.rfind('=');
    std::string id = eq == std::string::npos ? "" : decoded.substr(0, eq);
    std::string secret = eq == std::string::npos ? "" : decoded.substr(eq + 1);
    auto it = options.tokens.find(id);
    if (it == options.tokens.end() || it->second != secret) {
      nap(options.auth_delay_ms);
      resp.setStatusAndReason(Poco::Net::HTTPResponse::HTTP_UNAUTHORIZED, "Authentication failed!");
      resp.setKeepAlive(false);
      resp.setContentLength(0);
      resp.send();
      return;
    }
    user = id;
  }
  if ((method == "GET" || method == "DELETE") && !body.empty())
    return send_error(resp, {501, "Unexpected content for method '" + method + "'", {}});
  if (!endpoint) {
    return send_error(resp, {501, "Method '" + method + " " + path + "' not implemented", {}});
  }
  int latency = 0;
  std::optional<ApiFail> fault;
  {
    std::lock_guard lock(mutex);
    latency = options.latency_ms;
    for (std::size_t i = 0; i < options.faults.size(); ++i) {
      auto& rule = options.faults[i];
      if (rule.method != "*" && rule.method != method) continue;
      if (rule.path != "*" && rule.path != endpoint->path && rule.path != api_path) continue;
      if (rule.count == 0) continue;
      if (std::uniform_real_distribution<double>(0, 1)(rng) >= rule.rate) continue;
      if (rule.count > 0) --rule.count;
      fault = ApiFail{rule.status, rule.message, {}};
      break;
    }
  }
  if (latency > 0) nap(latency);
  if (fault) return send_error(resp, *fault);
  if (unreachable(path_params)) {  // pveproxy cannot proxy to the node: no body
    resp.setKeepAlive(false);
    return send(resp, kUnreachableStatus, kUnreachable, "");
  }
  // Parameters: body (form or JSON), then the query string overrides.
  ParamMap params;
  if (method == "POST" || method == "PUT") {
    if (req.getContentType().find("application/json") != std::string::npos && !body.empty()) {
      try {
        Poco::JSON::Parser parser;
        auto o = parser.parse(body).extract<Object::Ptr>();
        for (const auto& [k, v] : *o)
          params[k] = v.isBoolean() ? (v.convert<bool>() ? "1" : "0") : v.convert<std::string>();
      } catch (const std::exception&) {
        return send_error(resp, {400, "malformed JSON body", {}});
      }
    } else {
      params = parse_form(body);
    }
  }
  for (const auto& [k, v] : parse_form(uri.getRawQuery())) params[k] = v;
  for (const auto& [k, v] : path_params) {
    std::string decoded;
    Poco::URI::decode(v, decoded);
    auto it = params.find(k);
    if (it != params.end() && it->second != decoded)
      return send_error(resp, {400,
                               "Parameter verification failed.",
                               {{k, "duplicate parameter (path and body differ)"}}});
    params[k] = decoded;
  }
  auto errors = schema.validate(*endpoint, params);
  if (!errors.empty()) {
    {
      std::lock_guard lock(mutex);
      ++schema_rejections;
    }
    std::string detail;
    for (const auto& [k, v] : errors) detail += " " + k + ": " + v + ";";
    pvs::log::info("pvesim: " + method + " " + api_path + " rejected:" + detail);
    return send_error(resp, {400, "Parameter verification failed.", errors});
  }
  if (!endpoint->allowtoken)
    return send_error(resp, {403,
                             "Permission check failed (URI '" + path +
                                 "' not available with API token, need proper ticket.)",
                             {}});
  Call call{endpoint, std::move(params), user, method, api_path};
  try {
    Reply reply;
    {
      std::lock_guard lock(mutex);
      reply = dispatch(call);
    }
    Object::Ptr o = new Object;
    o->set("data", reply.data);
    if (reply.total >= 0) o->set("total", reply.total);
    send(resp, 200, "OK", json(o));
  } catch (const ApiFail& f) {
    send_error(resp, f);
  } catch (const std::exception& ex) {
    send_error(resp, {500, ex.what(), {}});
  }
}

// Whether the request is for a node that is cut from the API (set_node_offline).
bool Simulator::Impl::unreachable(const ParamMap& path_params) {
  auto it = path_params.find("node");
  if (it == path_params.end()) return false;
  std::string node;
  Poco::URI::decode(it->second, node);
  std::lock_guard lock(mutex);
  return cluster->offline(node);
}

void Simulator::Impl::control(const std::string& method, const std::string& path,
                              const std::string& body, Poco::Net::HTTPServerResponse& resp) {
  try {
    Object::Ptr in;
    if (!body.empty()) {
      Poco::JSON::Parser parser;
      in = parser.parse(body).extract<Object::Ptr>();
    }
    Object::Ptr out = new Object;
    if (path == "/_pvesim/stats" && method == "GET") {
      std::lock_guard lock(mutex);
      Object::Ptr c = new Object;
      for (const auto& [k, v] : counts) c->set(k, v);
      out->set("requests", c);
      out->set("total", request_total);
    } else if (path == "/_pvesim/stats" && method == "DELETE") {
      std::lock_guard lock(mutex);
      counts.clear();
      request_total = 0;
    } else if (path == "/_pvesim/faults" && method == "POST" && in) {
      std::lock_guard lock(mutex);
      if (in->has("latency_ms")) options.latency_ms = in->getValue<int>("latency_ms");
      if (in->has("interfaces_delay_ms"))
        options.interfaces_delay_ms = in->getValue<int>("interfaces_delay_ms");
      if (in->has("rules")) {
        options.faults.clear();
        for (const auto& r : *in->getArray("rules")) {
          auto ro = r.extract<Object::Ptr>();
          FaultRule rule;
          if (ro->has("method")) rule.method = ro->getValue<std::string>("method");
          if (ro->has("path")) rule.path = ro->getValue<std::string>("path");
          if (ro->has("status")) rule.status = ro->getValue<int>("status");
          if (ro->has("message")) rule.message = ro->getValue<std::string>("message");
          if (ro->has("rate")) rule.rate = ro->getValue<double>("rate");
          if (ro->has("count")) rule.count = ro->getValue<int>("count");
          options.faults.push_back(rule);
        }
      }
      if (in->has("fail_tasks")) {
        options.fail_tasks.clear();
        for (const auto& [k, v] : *in->getObject("fail_tasks"))
          options.fail_tasks[k] = v.convert<std::string>();
      }
      if (in->has("task_ms"))
        for (const auto& [k, v] : *in->getObject("task_ms")) options.task_ms[k] = v.convert<int>();
      if (in->has("offline"))
        for (const auto& [k, v] : *in->getObject("offline"))
          if (!cluster->set_offline(k, v.convert<bool>())) throw ApiFail{400, "no node " + k, {}};
      if (in->has("locks")) {
        for (const auto& [k, v] : *in->getObject("locks")) {
          Container* ct = find(std::stoi(k));
          if (!ct) throw ApiFail{400, "no CT " + k, {}};
          std::string value = v.convert<std::string>();
          if (value.empty())
            ct->config.erase("lock");
          else
            ct->config["lock"] = value;
        }
      }
    } else {
      throw ApiFail{501, "no such control endpoint", {}};
    }
    Object::Ptr o = new Object;
    o->set("data", out);
    send(resp, 200, "OK", json(o));
  } catch (const ApiFail& f) {
    send_error(resp, f);
  } catch (const std::exception& ex) {
    send_error(resp, {400, ex.what(), {}});
  }
}

}  // namespace pvesim
