// pvesim's command line: every option as a row of a table (cli.cc), and the usage text.
//
//   auto cli = pvesim::parse_command_line({"--token", "root@pam!t=secret", "--port", "0"});
//   if (!cli) print(cli.error().message);   // names the option and what was wrong with it
//   else if (cli->help) print(pvesim::usage());
//   else run(cli->options);
#pragma once

#include <string>
#include <vector>

#include "pvesandbox/common/error.h"
#include "sim.h"

namespace pvesim {

struct CommandLine {
  Options options;
  std::string info_file;    // --info-file: where to write port=, fingerprint=, ... once listening
  bool help = false;        // --help / -h
  bool sweep_only = false;  // --lxc-sweep: only remove what killed runs left, then exit
};

// The text of --help: every option, one row each.
const char* usage();

// Parses the arguments after the program name. An unknown option, a missing or bad value, or
// no --token (unless --help or --lxc-sweep) is an invalid_argument error naming the option.
pvs::Result<CommandLine> parse_command_line(const std::vector<std::string>& args);

}  // namespace pvesim
