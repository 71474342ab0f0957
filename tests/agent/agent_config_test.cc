// The agent's config parser and state-file codec (pure functions, no kernel).
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "config.h"
#include "nft_backend.h"
#include "state.h"

namespace pvs::agent {
namespace {

std::string error_of(std::string_view yaml) {
  auto config = parse_config(yaml, "agent.yaml");
  return config ? "<ok>" : config.error().message;
}

TEST(AgentConfig, DefaultsAndTheDesignExample) {
  auto config = parse_config(
      "socket: /run/pve-sandbox/agent.sock\n"
      "socket_group: pve-sandbox\n"
      "allowed_uids: [0]\n"
      "allowed_gids: []\n"
      "sandbox_cidr: 10.99.0.0/16\n"
      "gateway: 10.99.0.1\n"
      "family: inet\n"
      "table: sandbox\n"
      "set: internet_allowed\n"
      "state_file: /var/lib/pve-sandbox/agent-state\n"
      "max_elements: 65536\n",
      "agent.yaml");
  ASSERT_TRUE(config) << config.error().message;
  EXPECT_EQ(config->sandbox_cidr.to_string(), "10.99.0.0/16");
  EXPECT_EQ(config->gateway.to_string(), "10.99.0.1");
  EXPECT_EQ(config->max_elements, 65536u);
  EXPECT_EQ(config->allowed_uids, std::vector<uid_t>{0});

  auto minimal = parse_config("sandbox_cidr: 10.50.0.0/24\n", "x");
  ASSERT_TRUE(minimal);
  EXPECT_EQ(minimal->gateway.to_string(), "10.50.0.1");  // first host by default
  EXPECT_EQ(minimal->set, "internet_allowed");
  // The desired state lives in the runtime directory without fsync (docs/agent.md).
  EXPECT_EQ(minimal->state_file, "/run/pve-sandbox/agent-state");
  EXPECT_FALSE(minimal->state_fsync);
  EXPECT_EQ(minimal->socket, pvs::kDefaultAgentSocket);
}

TEST(AgentConfig, PreciseErrors) {
  EXPECT_EQ(error_of("gateway: 10.99.0.1\n"), "agent.yaml: sandbox_cidr: is required");
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\ngateway: 10.98.0.1\n"),
            "agent.yaml:2: gateway: 10.98.0.1 is not a host address of sandbox_cidr "
            "10.99.0.0/16");
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\ngateway: 10.99.255.255\n").substr(0, 22),
            "agent.yaml:2: gateway:");
  EXPECT_NE(error_of("sandbox_cidr: 10.99.0.5/16\n").find("agent.yaml:1: sandbox_cidr:"),
            std::string::npos);
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\ntabel: x\n"), "agent.yaml:2: tabel: unknown key");
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\ntable: x\ntable: y\n"),
            "agent.yaml:3: duplicate key \"table\"");
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\nmax_elements: -1\n"),
            "agent.yaml:2: max_elements: must be an integer in [1, 1000000], not \"-1\"");
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\nmax_elements: 0x10\n").substr(0, 27),
            "agent.yaml:2: max_elements:");
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\nallowed_uids: 0\n"),
            "agent.yaml:2: allowed_uids: must be a list of integers in [0, 4294967294]");
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\nsocket: relative.sock\n"),
            "agent.yaml:2: socket: must be an absolute path");
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\nfamily: bridge\n"),
            "agent.yaml:2: family: must be one of inet, ip, not \"bridge\"");
  EXPECT_NE(error_of("sandbox_cidr: 10.99.0.0/16\nset: \"bad name\"\n").find("invalid nftables"),
            std::string::npos);
  EXPECT_NE(error_of("sandbox_cidr: [\n").find("agent.yaml:"), std::string::npos);
  EXPECT_EQ(error_of("- a\n- b\n"), "agent.yaml:1: the top level must be a mapping");
  EXPECT_NE(error_of("sandbox_cidr: 10.99.0.0/16\nallowed_uids: []\n").find("nobody could"),
            std::string::npos);
  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\nstate_fsync: maybe\n"),
            "agent.yaml:2: state_fsync: must be true or false, not \"maybe\"");
}

TEST(AgentConfig, DhcpHostsDir) {
  auto off = parse_config("sandbox_cidr: 10.99.0.0/16\n", "x");
  ASSERT_TRUE(off);
  EXPECT_EQ(off->dhcp_hosts_dir, "");
  auto on = parse_config(
      "sandbox_cidr: 10.99.0.0/16\ndhcp_hosts_dir: /run/pve-sandbox/dhcp-hosts/\n", "x");
  ASSERT_TRUE(on) << on.error().message;
  EXPECT_EQ(on->dhcp_hosts_dir, "/run/pve-sandbox/dhcp-hosts");  // trailing '/' dropped
  auto empty = parse_config("sandbox_cidr: 10.99.0.0/16\ndhcp_hosts_dir: \"\"\n", "x");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->dhcp_hosts_dir, "");

  EXPECT_EQ(error_of("sandbox_cidr: 10.99.0.0/16\ndhcp_hosts_dir: dhcp-hosts\n"),
            "agent.yaml:2: dhcp_hosts_dir: must be an absolute path");
  EXPECT_NE(error_of("sandbox_cidr: 10.99.0.0/16\ndhcp_hosts_dir: /\n").find("not a usable"),
            std::string::npos);
  EXPECT_NE(error_of("sandbox_cidr: 10.99.0.0/16\ndhcp_hosts_dir: /etc\n").find("not a usable"),
            std::string::npos);
  EXPECT_NE(
      error_of("sandbox_cidr: 10.99.0.0/16\ndhcp_hosts_dir: /run/../etc\n").find("not a usable"),
      std::string::npos);
  EXPECT_NE(error_of("sandbox_cidr: 10.99.0.0/16\ndhcp_hosts_dir: [a]\n").find("must be a string"),
            std::string::npos);
  // Never the directory of the state file or of the socket: the mirror deletes foreign files.
  EXPECT_NE(error_of("sandbox_cidr: 10.99.0.0/16\nstate_file: /var/lib/pvs/agent-state\n"
                     "dhcp_hosts_dir: /var/lib/pvs\n")
                .find("must be a directory of its own"),
            std::string::npos);
  EXPECT_NE(error_of("sandbox_cidr: 10.99.0.0/16\nsocket: /srv/pvs/agent.sock\n"
                     "dhcp_hosts_dir: /srv/pvs\n")
                .find("must be a directory of its own"),
            std::string::npos);
}

// The reference config documents the defaults (the feature off); the package turns it on.
TEST(AgentConfig, ShippedConfigsParse) {
  auto reference = load_config(PVS_SOURCE_ROOT "/hostagent/agent.yaml");
  ASSERT_TRUE(reference) << reference.error().message;
  EXPECT_EQ(reference->dhcp_hosts_dir, "");
  auto packaged = load_config(PVS_SOURCE_ROOT "/packaging/deb/agent.yaml");
  ASSERT_TRUE(packaged) << packaged.error().message;
  EXPECT_EQ(packaged->dhcp_hosts_dir, "/run/pve-sandbox/dhcp-hosts");
}

TEST(AgentState, RoundTripAndPrune) {
  DesiredState state;
  state.grants[*Ipv4Address::parse("10.99.0.5")] = std::nullopt;
  state.grants[*Ipv4Address::parse("10.99.0.6")] = 1000;
  state.grants[*Ipv4Address::parse("10.99.0.7")] = 5000;
  state.bindings["veth100i0"] = proto::Binding{"veth100i0", *MacAddress::parse("bc:24:11:2a:3b:4c"),
                                               *Ipv4Address::parse("10.99.0.7")};
  std::string text = format_state(state);
  EXPECT_EQ(text,
            "pve-sandbox-agent-state 1\n"
            "epoch 0\n"
            "grant 10.99.0.5 -\n"
            "grant 10.99.0.6 1000\n"
            "grant 10.99.0.7 5000\n"
            "bind veth100i0 bc:24:11:2a:3b:4c 10.99.0.7\n");
  auto parsed = parse_state(text);
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, state);
  EXPECT_EQ(parsed->prune(1000), 1u);
  EXPECT_EQ(parsed->grants.size(), 2u);
}

TEST(AgentState, StrictParser) {
  auto err = [](std::string_view text) {
    auto s = parse_state(text);
    return s ? "<ok>" : s.error().message;
  };
  EXPECT_EQ(err(""), "empty state file");
  EXPECT_EQ(err("garbage\n"), "line 1: expected pve-sandbox-agent-state 1");
  EXPECT_EQ(err("pve-sandbox-agent-state 1\ngrant 10.99.0.5 -"),
            "line 2: not terminated by a newline (truncated file?)");
  EXPECT_EQ(err("pve-sandbox-agent-state 1\ngrant 10.99.0.5 -\ngrant 10.99.0.5 7\n"),
            "line 3: address 10.99.0.5 listed twice");
  EXPECT_EQ(err("pve-sandbox-agent-state 1\ngrant 10.99.0.5 007\n"),
            "line 2: invalid expiry \"007\"");
  EXPECT_EQ(err("pve-sandbox-agent-state 1\nbind eth0 bc:24:11:2a:3b:4c 10.99.0.7\n").substr(0, 20),
            "line 2: invalid port");
  EXPECT_EQ(err("pve-sandbox-agent-state 1\nfoo\n"), "line 2: unknown record \"foo\"");
  EXPECT_EQ(err("pve-sandbox-agent-state 1\n\n"), "line 2: empty line");
}

TEST(AgentState, SaveAndLoad) {
  char tmpl[] = "/tmp/pvs-agent-state-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string path = std::string(tmpl) + "/state";
  auto missing = load_state(path);
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->has_value());
  DesiredState state;
  state.grants[*Ipv4Address::parse("10.99.0.5")] = 42;
  ASSERT_TRUE(save_state(path, state, true));
  auto loaded = load_state(path);
  ASSERT_TRUE(loaded && loaded->has_value());
  EXPECT_EQ(**loaded, state);
  std::filesystem::remove_all(tmpl);
}

TEST(AgentState, JournalReplay) {
  DesiredState state;
  auto epoch = apply_journal(
      "epoch 3\n"
      "grant 10.99.0.5 -\n"
      "grant 10.99.0.6 99\n"
      "bind veth100i0 bc:24:11:2a:3b:4c 10.99.0.7\n"
      "revoke 10.99.0.5\n"
      "bind veth101i0 bc:24:11:2a:3b:4d 10.99.0.8\n"
      "unbind veth100i0\n"
      "grant 10.99.0.9 -",  // torn: the crash came before the reply, so it never happened
      &state);
  ASSERT_TRUE(epoch) << epoch.error().message;
  EXPECT_EQ(*epoch, 3u);
  ASSERT_EQ(state.grants.size(), 1u);
  EXPECT_EQ(state.grants.begin()->second, 99);
  ASSERT_EQ(state.bindings.size(), 1u);
  EXPECT_EQ(state.bindings.begin()->first, "veth101i0");
  EXPECT_FALSE(apply_journal("grant 10.99.0.5 -\n", &state));  // no epoch line
  EXPECT_FALSE(apply_journal("epoch 1\nallow 10.99.0.5\n", &state));
}

TEST(AgentState, JournalSyncGroupIsAllOrNothing) {
  DesiredState state;
  state.grants[*Ipv4Address::parse("10.99.0.5")] = std::nullopt;
  std::string sync;
  std::map<Ipv4Address, std::optional<std::int64_t>> grants{
      {*Ipv4Address::parse("10.99.1.1"), std::nullopt},
      {*Ipv4Address::parse("10.99.1.2"), 1763900000123}};
  append_sync_records(&sync, grants);
  EXPECT_EQ(sync, "sync 2\ngrant 10.99.1.1 -\ngrant 10.99.1.2 1763900000123\n");
  {
    DesiredState s = state;
    ASSERT_TRUE(apply_journal("epoch 1\n" + sync + "grant 10.99.0.9 -\n", &s));
    EXPECT_EQ(s.grants.size(), 3u);
    EXPECT_FALSE(s.grants.contains(*Ipv4Address::parse("10.99.0.5")));
  }
  // Cut anywhere inside the group (a crash mid-append): the SYNC never happened.
  for (std::size_t cut = 1; cut < sync.size(); ++cut) {
    DesiredState s = state;
    auto epoch = apply_journal("epoch 1\n" + sync.substr(0, cut), &s);
    ASSERT_TRUE(epoch) << cut << ": " << epoch.error().message;
    EXPECT_EQ(s, state) << "cut at " << cut;
  }
  {
    DesiredState s = state;
    ASSERT_TRUE(apply_journal("epoch 1\nsync 0\n", &s));
    EXPECT_TRUE(s.grants.empty());
  }
  DesiredState s = state;
  EXPECT_FALSE(apply_journal("epoch 1\nsync 2\ngrant 10.99.1.1 -\nrevoke 10.99.1.1\n", &s));
  EXPECT_FALSE(apply_journal("epoch 1\nsync 2\ngrant 10.99.1.1 -\ngrant 10.99.1.1 -\n", &s));
  EXPECT_FALSE(apply_journal("epoch 1\nsync 02\n", &s));
}

TEST(AgentState, StoreSurvivesACrashAtEveryStep) {
  char tmpl[] = "/tmp/pvs-agent-store-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string path = std::string(tmpl) + "/state";
  DesiredState state;
  {
    StateStore store(path, false);
    auto opened = store.open();
    ASSERT_TRUE(opened);
    EXPECT_FALSE(opened->has_value());
    ASSERT_TRUE(store.snapshot(state));
    ASSERT_TRUE(store.append("grant 10.99.0.5 -\n"));
    ASSERT_TRUE(store.append("grant 10.99.0.6 -\nrevoke 10.99.0.6\n"));
  }
  {
    StateStore store(path, true);
    auto opened = store.open();
    ASSERT_TRUE(opened && opened->has_value()) << (opened ? "" : opened.error().message);
    EXPECT_EQ((*opened)->grants.size(), 1u);
    state = **opened;
    // Compaction that "crashes" after the new snapshot but before the journal restarts: the old
    // journal (previous epoch) must not be replayed over the newer snapshot.
    std::filesystem::copy_file(path + ".journal", path + ".old-journal");
    state.grants.clear();
    ASSERT_TRUE(store.snapshot(state));
  }
  std::filesystem::copy_file(path + ".old-journal", path + ".journal",
                             std::filesystem::copy_options::overwrite_existing);
  {
    StateStore store(path, false);
    auto opened = store.open();
    ASSERT_TRUE(opened && opened->has_value());
    EXPECT_TRUE((*opened)->grants.empty());  // 10.99.0.5 stays revoked
  }
  std::filesystem::remove_all(tmpl);
}

TEST(ElementKey, InlineKeysAndOversizedOnes) {
  auto key = port_mac_key("veth100i0", *MacAddress::parse("bc:24:11:2a:3b:4c"));
  EXPECT_EQ(key.size(), 24u);
  EXPECT_TRUE(key.complete());
  auto decoded = decode_port_mac_key(key);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->first, "veth100i0");
  EXPECT_EQ(decode_ipv4_key(ipv4_key(*Ipv4Address::parse("10.99.0.5")))->to_string(), "10.99.0.5");
  // A foreign set's 36-byte key: its first 24 bytes must never pass for a binding.
  std::uint8_t long_key[36] = {};
  std::memcpy(long_key, key.data(), key.size());
  ElementKey oversized(long_key, sizeof(long_key));
  EXPECT_EQ(oversized.size(), 36u);
  EXPECT_FALSE(oversized.complete());
  EXPECT_FALSE(decode_port_mac_key(oversized));
  EXPECT_FALSE(oversized == key);
}

}  // namespace
}  // namespace pvs::agent
