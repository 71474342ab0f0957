// GET /ui/...: the web console's files (console.h), with the console's security headers on
// every reply, 404s included. Public: the files hold no data; the console signs in with a
// token against the REST API like any other client. Needs only the reply helpers.
#pragma once

#include "http/replies.h"
#include "http/request_context.h"

namespace pvs::service {

class ConsoleRoutes {
 public:
  explicit ConsoleRoutes(Replies& replies) : replies_(replies) {}

  void serve(RequestContext& ctx);

 private:
  Replies& replies_;
};

}  // namespace pvs::service
