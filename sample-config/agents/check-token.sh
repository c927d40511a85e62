#!/bin/sh
# check-token.sh: an agentcron `command` gate: is the API token still valid long enough?
#
# Usage: check-token.sh [EXPIRY_FILE [MIN_REMAINING]]
#   EXPIRY_FILE    first line: the token's expiry, RFC 3339 (2030-01-01T00:00:00Z)
#                  or unix seconds. Default: secrets/report-token.expiry. A relative
#                  path is tried from the working directory, then from the config
#                  folder (the folder above this script).
#   MIN_REMAINING  seconds, or 90s / 10m / 2h / 1d (default 10m)
# Environment overrides: CHECK_TOKEN_FILE, CHECK_TOKEN_MIN_REMAINING, and for tests
#   CHECK_TOKEN_FORCE=pass|wait|fail   answer that without looking.
#
# Gate contract: exit 0 pass, 75 wait (check again next tick), anything else fail.
# The first stdout line is the reason shown in the console.
#   pass  the token is valid for at least MIN_REMAINING
#   wait  the expiry file is not there yet, or the token expires within
#         MIN_REMAINING (a rotation job is expected to renew it)
#   fail  the token has already expired, or the file cannot be parsed

here=$(cd "$(dirname "$0")" && pwd)
file=${1:-${CHECK_TOKEN_FILE:-secrets/report-token.expiry}}
min=${2:-${CHECK_TOKEN_MIN_REMAINING:-10m}}

case "${CHECK_TOKEN_FORCE:-}" in
    pass) echo "forced pass (CHECK_TOKEN_FORCE)"; exit 0 ;;
    wait) echo "forced wait (CHECK_TOKEN_FORCE)"; exit 75 ;;
    fail) echo "forced fail (CHECK_TOKEN_FORCE)"; exit 1 ;;
esac

case "$file" in
    /*) ;;
    *) [ -e "$file" ] || file="$here/../$file" ;;
esac

to_seconds() { # 600, 90s, 10m, 2h, 1d
    case "$1" in
        *[!0-9smhd]*|"") return 1 ;;
        *d) echo $(( ${1%d} * 86400 )) ;;
        *h) echo $(( ${1%h} * 3600 )) ;;
        *m) echo $(( ${1%m} * 60 )) ;;
        *s) echo "${1%s}" ;;
        *) echo "$1" ;;
    esac
}
min_s=$(to_seconds "$min") || { echo "bad MIN_REMAINING '$min'"; exit 2; }

if [ ! -r "$file" ]; then
    echo "token expiry file $file not there yet"
    exit 75
fi
expiry=$(head -n 1 "$file" | tr -d '\r' | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
case "$expiry" in
    ""|*[!0-9]*)
        exp_s=$(date -u -d "$expiry" +%s 2>/dev/null) ||
        exp_s=$(python3 -c 'import sys,datetime as d; print(int(d.datetime.fromisoformat(sys.argv[1].replace("Z","+00:00")).timestamp()))' "$expiry" 2>/dev/null) ||
        { echo "cannot parse token expiry '$expiry' in $file"; exit 1; } ;;
    *) exp_s=$expiry ;;
esac
now_s=$(date -u +%s)
left=$(( exp_s - now_s ))
if [ "$left" -le 0 ]; then
    echo "token expired at $expiry"
    exit 1
fi
if [ "$left" -lt "$min_s" ]; then
    echo "token expires in ${left}s (< ${min_s}s), waiting for rotation"
    exit 75
fi
if [ "$left" -ge 86400 ]; then
    echo "token valid until $expiry ($(( left / 86400 ))d left)"
else
    echo "token valid until $expiry ($(( left / 60 ))m left)"
fi
exit 0
