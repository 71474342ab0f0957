// The tests' one way to read a JSON object reply: Poco's parser, throwing on anything else.
#pragma once

#include <string>

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

namespace pvs::service {

inline Poco::JSON::Object::Ptr json(const std::string& text) {
  return Poco::JSON::Parser().parse(text).extract<Poco::JSON::Object::Ptr>();
}

}  // namespace pvs::service
