#!/bin/sh
# mini-swe-agent as a harness `command` agent, offline but for the model gateway.
#
# The harness gives: HARNESS_WORKSPACE (the repository to change), HARNESS_REQUEST (the
# task), HARNESS_RESULT (where to say "submitted"), HARNESS_AGENT_ENV (the declared agent
# environment holding mini-swe-agent), HARNESS_MODEL (the pinned model id) and
# OPENAI_BASE_URL / OPENAI_API_KEY (the gateway and a per-trial token, never the real key).
set -eu
export MSWEA_CONFIGURED=true               # no interactive first-run setup
export MSWEA_COST_TRACKING=ignore_errors   # the gateway meters cost, not litellm's price map
export LITELLM_LOCAL_MODEL_COST_MAP=True   # litellm must not fetch its price map
export HOME="${TMPDIR:-/tmp}/mini-home"    # no user config from anywhere else
mkdir -p "$HOME"
cd "$HARNESS_WORKSPACE"
status=0
"$HARNESS_AGENT_ENV/bin/python" -m minisweagent.run.mini \
  -m "openai/$HARNESS_MODEL" -t "$(cat "$HARNESS_REQUEST")" \
  -y -l 0 --exit-immediately -o "$HOME/trajectory.json" </dev/null || status=$?
if [ "$status" -eq 0 ]; then
  printf '{"status": "submitted"}' >"$HARNESS_RESULT"
fi
exit "$status"
