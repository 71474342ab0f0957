#!/bin/bash
# Shared by the egress benchmarks (sourced, with HERE set to this directory): the ruleset rig of
# tests/ruleset/rig-lib.sh with its cleanup on exit, TOOL (tests/egress/egress_tool.py) and
# agent LINE (one request to the rig's agent, its reply printed).
# shellcheck disable=SC2034 # TOOL is the benchmarks'
TOOL="$HERE/../../egress/egress_tool.py"
export RIG_ROUTER_TCP=22 RIG_ROUTER_UDP=""
# shellcheck source=../../ruleset/rig-lib.sh
source "$HERE/../../ruleset/rig-lib.sh"
trap rig_down EXIT
trap 'exit 143' TERM INT HUP

agent() { rig_in "$NS_NODE" "$RIG_PYTHON" "$TOOL" agent "$RIG_TMP/run/agent.sock" "$*"; }
