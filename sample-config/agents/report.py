#!/usr/bin/env python3
"""report.py: a generic, configurable sample agent for agentcron (stdlib only, no network).

It reads the JSON envelope on stdin and runs its steps in order (default
`fetch`, `summarize`, `deliver`), printing the agent protocol's JSON lines
(see agentkit.py for the protocol, step skipping, check-then-act and verify mode).

Steps
  fetch      with payload.database: counts the window's rows in that SQLite file
             (default query below; payload.query overrides it, with :window_key,
             :window_start, :window_end and :window_date bound). A missing database
             or zero rows is a retryable failure (upstream not ready / vanished).
             Without payload.database: pretends to fetch payload.items (default 3).
             The sample keeps no state between attempts: when a retry skips an
             already-completed fetch, `processed` is reported as payload.items or 0.
  summarize  builds the summary, then reports usage (tokens, cost).
  deliver    side effect: appends one JSON line (idempotency_key, step, schedule,
             window, summary, ...) to the outbox. Verifiable: "did it land?" means
             "is there a line with this idempotency key and step in the outbox?".
  any other  name in AGENT_STEPS: a no-op if it is not a side effect, or an outbox
             append like deliver if it is listed in AGENT_SIDE_EFFECTS.

Payload keys (all optional). Relative paths in the payload resolve against the
config folder (the folder above agents/, where agentcron.toml lives), like every
path in agentcron.toml; paths from environment variables are used as given.
  database   SQLite file to read in `fetch`
  query      SQL for `fetch`; first column of the first row is `processed`
  items      processed count when there is no database (default 3)
  outbox     outbox file for side-effect steps (default $AGENT_OUTBOX, else
             out/outbox.jsonl in the config folder)
  title      text put in front of the summary (default: the schedule id)

Environment
  AGENT_STEPS=a,b,c          step names, in order (default fetch,summarize,deliver)
  AGENT_SIDE_EFFECTS=a,b     which of them are side effects (default deliver)
  AGENT_OUTBOX=PATH          outbox when payload.outbox is not set
  AGENT_TOKENS=N             tokens reported by the usage event (default 800 + 50 per item)
  AGENT_COST_USD=X           cost reported by the usage event (default tokens * 0.000002)
  and the fault switches of agentkit.py:
  AGENT_SLEEP=SECONDS  AGENT_FAIL=retryable|non_retryable|needs_human  AGENT_EXIT=N
  AGENT_HANG=1  AGENT_FAULT_AT=start|STEP|STEP:started|STEP:landed|verify
  AGENT_FAULT_ATTEMPTS=N  AGENT_FAULT_WINDOWS=N  AGENT_FAULT_SLOT=S
  AGENT_LEDGER=PATH  AGENT_HEARTBEAT_EVERY=SECONDS

Try it by hand:
  echo '{"tenant":"acme","schedule":"demo","window":{"key":"2026-06-08"},"attempt":1}' \\
    | python3 agents/report.py
"""

import datetime
import json
import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agentkit  # noqa: E402

CONFIG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def config_path(path):
    """A payload path: relative ones resolve against the config folder."""
    return path if os.path.isabs(path) else os.path.join(CONFIG_DIR, path)


DEFAULT_QUERY = "SELECT count(*) FROM orders WHERE day = date(:window_date, '-1 day')"


def csv_env(name, default):
    raw = os.environ.get(name)
    if raw is None:
        raw = default
    return [s.strip() for s in raw.split(",") if s.strip()]


def window_date(agent):
    """The window's local date: the key when it is a date, else the start's date part."""
    key = agent.window_key or ""
    try:
        return datetime.date.fromisoformat(key[:10]).isoformat()
    except ValueError:
        start = agent.window.get("start") or agent.envelope.get("now") or ""
        try:
            return datetime.date.fromisoformat(start[:10]).isoformat()
        except ValueError:
            return datetime.date.today().isoformat()


class Report:
    def __init__(self, agent):
        self.agent = agent
        self.payload = agent.payload
        self.processed = int(self.payload.get("items", 0))  # when there is no fetch step
        self.summary = ""
        if self.payload.get("outbox"):
            self.outbox = config_path(self.payload["outbox"])
        else:
            self.outbox = os.environ.get("AGENT_OUTBOX") or config_path("out/outbox.jsonl")

    # -- steps --

    def fetch(self):
        db = self.payload.get("database")
        if db:
            db = config_path(db)
        if not db:
            self.processed = int(self.payload.get("items", 3))
            return
        if not os.path.exists(db):
            self.fail("retryable", f"upstream database {db} not found",
                      "run make-warehouse.py, or wait for the upstream load")
        params = {
            "window_key": self.agent.window_key,
            "window_start": self.agent.window.get("start"),
            "window_end": self.agent.window.get("end"),
            "window_date": window_date(self.agent),
        }
        query = self.payload.get("query") or DEFAULT_QUERY
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                row = con.execute(query, params).fetchone()
            finally:
                con.close()
        except sqlite3.Error as e:
            self.fail("non_retryable", "warehouse query failed", f"{e} (query: {query})")
        self.processed = int(row[0] or 0) if row else 0
        if self.processed == 0:
            self.fail("retryable", f"no upstream rows for the day before {params['window_date']}",
                      "the partition is empty: upstream data late or removed")

    def summarize(self):
        title = self.payload.get("title") or self.agent.schedule or "report"
        ok = sum(1 for m in self.agent.memory
                 if isinstance(m, dict) and m.get("state") == "succeeded")
        self.summary = (f"{title} {self.agent.window_key}: {self.processed} items"
                        f" ({ok} of the last {len(self.agent.memory)} runs succeeded)")
        tokens = agentkit._env_float("AGENT_TOKENS", 800 + 50 * self.processed)
        cost = agentkit._env_float("AGENT_COST_USD", tokens * 0.000002)
        self.agent.usage(tokens=tokens, cost_usd=cost)

    def side_effect(self, step):
        def act():
            record = {
                "idempotency_key": self.agent.idempotency_key,
                "step": step,
                "run_id": self.agent.run_id,
                "tenant": self.agent.tenant,
                "schedule": self.agent.schedule,
                "window": self.agent.window_key,
                "attempt": self.agent.attempt,
                "summary": self.summary,
                "processed": self.processed,
                "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            }
            agentkit.append_line(self.outbox, json.dumps(record, ensure_ascii=False))
        return act

    def landed(self, step):
        return lambda: agentkit.jsonl_has(self.outbox, idempotency_key=self.agent.idempotency_key,
                                          step=step)

    def fail(self, cls, summary, message):
        self.agent.result("failure", error_class=cls, summary=summary,
                          processed=self.processed, message=message)
        sys.exit(0)


def main():
    agent = agentkit.Agent()
    report = Report(agent)
    steps = csv_env("AGENT_STEPS", "fetch,summarize,deliver")
    side_effects = set(csv_env("AGENT_SIDE_EFFECTS", "deliver"))

    if agent.verify_mode({s: report.landed(s) for s in side_effects}):
        return
    agent.fault_point("start")
    for name in steps:
        if name in side_effects:
            agent.step(name, report.side_effect(name), side_effect=True,
                       verify=report.landed(name))
        elif name == "fetch":
            agent.step(name, report.fetch)
        elif name == "summarize":
            agent.step(name, report.summarize)
        else:
            agent.step(name, lambda n=name: agent.log(f"report.py: step {n} (no-op)"))
    if not report.summary:
        # summarize was skipped (completed earlier) or not configured
        report.summary = f"{agent.schedule} {agent.window_key}: done"
    agent.result("success", summary=report.summary, processed=report.processed,
                 message=f"attempt {agent.attempt} ({agent.reason})")


if __name__ == "__main__":
    main()
