#!/bin/sh
# health.sh: a tiny agentcron health-check agent in POSIX sh (no network).
#
# Reads the JSON envelope on stdin, runs one step `check` and prints the agent
# protocol's JSON lines: heartbeat, step started/done, usage, one result.
# It checks that the file HEALTH_FILE exists (point it at a file your MCP server
# touches, e.g. a pid or status file); without HEALTH_FILE the check passes
# (a simulated healthy server).
#
# Environment
#   HEALTH_FILE=PATH      file that must exist; missing -> retryable failure
#   AGENT_SLEEP=SECONDS   sleep before the check (a slow agent)
#   AGENT_FAIL=CLASS      print a failure result with that error_class
#                         (retryable | non_retryable | needs_human)
#   AGENT_EXIT=N          exit with code N and no result line
#   AGENT_HANG=1          never finish, no heartbeat
#   AGENT_HEARTBEAT_EVERY=SECONDS   heartbeat while sleeping
#   AGENT_LEDGER=PATH     accepted for symmetry; `check` has no side effect, so
#                         nothing is ever written there
# The faults fire right after the envelope is read (order: SLEEP, HANG, EXIT, FAIL).
# Verify mode (reason "verify") answers {"status":"success","verified":false}: it has
# no side-effect steps, so nothing can have landed.

envelope=$(cat)
json_field() { # crude string-field extraction; enough for ids without quotes
    printf '%s' "$envelope" | tr -d '\n' |
        sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\([^\"]*\)\".*/\1/p"
}
key=$(json_field idempotency_key)
reason=$(json_field reason)
[ -n "$key" ] || key="$(json_field schedule)"

say() { printf '%s\n' "$1"; }

if [ "$reason" = "verify" ]; then
    say '{"event":"result","status":"success","verified":false,"summary":"health check has no side effects","processed":0,"message":"nothing to verify"}'
    exit 0
fi

if [ -n "${AGENT_SLEEP:-}" ]; then
    if [ -n "${AGENT_HEARTBEAT_EVERY:-}" ]; then
        end=$(( $(date +%s) + ${AGENT_SLEEP%.*} ))
        while [ "$(date +%s)" -lt "$end" ]; do
            sleep "$AGENT_HEARTBEAT_EVERY"
            say '{"event":"heartbeat"}'
        done
    else
        sleep "$AGENT_SLEEP"
    fi
fi
case "${AGENT_HANG:-}" in
    ""|0|false|no) ;;
    *) echo "health.sh: AGENT_HANG: never finishing" >&2
       # sleep in the background so SIGTERM/SIGINT end us (and the sleep) at once
       trap 'kill "$pid" 2>/dev/null; exit 143' TERM INT
       while :; do sleep 3600 & pid=$!; wait "$pid"; done ;;
esac
if [ -n "${AGENT_EXIT:-}" ]; then
    echo "health.sh: AGENT_EXIT=$AGENT_EXIT" >&2
    exit "$AGENT_EXIT"
fi
if [ -n "${AGENT_FAIL:-}" ]; then
    case "$AGENT_FAIL" in
        retryable|non_retryable|needs_human) class=$AGENT_FAIL ;;
        *) class=retryable ;;
    esac
    say "{\"event\":\"result\",\"status\":\"failure\",\"error_class\":\"$class\",\"summary\":\"simulated $class failure\",\"processed\":0,\"message\":\"AGENT_FAIL=$AGENT_FAIL\"}"
    exit 0
fi

say '{"event":"heartbeat"}'
say '{"event":"step","name":"check","status":"started"}'
if [ -n "${HEALTH_FILE:-}" ] && [ ! -e "$HEALTH_FILE" ]; then
    say '{"event":"step","name":"check","status":"done"}'
    say "{\"event\":\"result\",\"status\":\"failure\",\"error_class\":\"retryable\",\"summary\":\"unhealthy: $HEALTH_FILE is missing\",\"processed\":1,\"message\":\"$key\"}"
    exit 0
fi
say '{"event":"step","name":"check","status":"done"}'
say '{"event":"usage","tokens":0,"cost_usd":0}'
say "{\"event\":\"result\",\"status\":\"success\",\"summary\":\"mcp server healthy\",\"processed\":1,\"message\":\"$key\"}"
