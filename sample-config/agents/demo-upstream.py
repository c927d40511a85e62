#!/usr/bin/env python3
"""demo-upstream.py SECONDS: a DEMO `command` gate — simulated upstream data that
lands SECONDS (default 8) after each window starts. Exit 75 (wait) before, 0
(pass) after; the first stdout line is the reason the gate pane shows.

It reads only AGENTCRON_WINDOW_START and AGENTCRON_NOW (set by agentcron for
gate commands; NOW is the engine's clock, virtual in rehearsals and tests), so
every window of a demo schedule is seen waiting, then passing.
"""

import datetime
import os
import sys


def instant(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def main():
    delay = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
    raw = os.environ.get("AGENTCRON_WINDOW_START", "")
    try:
        start = instant(raw)
    except ValueError:
        print(f"no window start in AGENTCRON_WINDOW_START ({raw!r})")
        return 2
    try:
        now = instant(os.environ.get("AGENTCRON_NOW", ""))
    except ValueError:
        now = datetime.datetime.now(datetime.timezone.utc)
    age = (now - start).total_seconds()
    if age < delay:
        print(f"demo upstream: data lands {delay - age:.0f}s from now ({delay:.0f}s after the window starts)")
        return 75
    print(f"demo upstream: data landed {age - delay:.0f}s ago")
    return 0


if __name__ == "__main__":
    sys.exit(main())
