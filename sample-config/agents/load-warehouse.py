#!/usr/bin/env python3
"""load-warehouse.py: the sample's upstream loader, run by the `warehouse-loader`
schedule, so the sample needs no manual setup step.

It lands the partitions up to yesterday (and today's so far) in warehouse.db
and writes data/crm-export.csv — both next to agentcron.toml, where the
`upstream_partition_ready` gate of daily-sales-report and the file gate of
hourly-crm-sync look (git-ignored). It is make-warehouse.py run as an agent:
it reads the envelope on stdin and prints one result line.
"""

import importlib.util
import io
import json
import os
import sys
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG_DIR = os.path.dirname(HERE)


def today(envelope):
    """`--today` from the envelope's `now` (the engine's clock in the schedule's
    zone, virtual in rehearsals and tests), else make-warehouse.py's own today."""
    now = str(envelope.get("now") or "")
    return ["--today", now[:10]] if len(now) >= 10 else []


def main():
    try:
        envelope = json.loads(sys.stdin.readline() or "{}")
    except ValueError:
        envelope = {}
    spec = importlib.util.spec_from_file_location("make_warehouse", os.path.join(CONFIG_DIR, "make-warehouse.py"))
    mw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mw)
    said = io.StringIO()
    with redirect_stdout(said):
        mw.main(["--days", "7", "--db", os.path.join(CONFIG_DIR, "warehouse.db")] + today(envelope))
    print(json.dumps({"event": "step", "name": "load", "status": "started"}), flush=True)
    print(json.dumps({"event": "step", "name": "load", "status": "done"}), flush=True)
    print(json.dumps({
        "event": "result",
        "status": "success",
        "summary": said.getvalue().strip() or "loaded",
        "processed": 8,
        "message": f"window {envelope.get('window', {}).get('key', '?')}",
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
