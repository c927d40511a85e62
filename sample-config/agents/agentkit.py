"""agentkit: plumbing shared by the sample agents (python3, stdlib only, no network).

The agent protocol (the main README, "The agent protocol")
----------------------------------------------------------
agentcron starts the agent with ONE JSON envelope on stdin:

    {"run_id", "tenant", "schedule",
     "window": {"key", "start", "end", "timezone"},
     "idempotency_key",            # tenant/schedule/window key
     "attempt",                    # 1-based
     "reason",                     # scheduled | retry | catchup | manual | rehearsal | verify
     "now", "context", "memory",   # time context, summaries of the last runs
     "completed_steps",            # steps journaled as done by earlier attempts
     "uncertain_steps",            # steps started but never confirmed
     "verify_step",                # null unless reason == "verify"
     "payload",
     "protocol": 2, "acks": true}  # only for agents with `handshake = true`

and reads JSON lines from the agent's stdout:

    {"event":"heartbeat"}
    {"event":"step","name":"fetch","status":"started"}   ... "done"
    {"event":"usage","tokens":1234,"cost_usd":0.01}
    {"event":"result","status":"success"|"failure","error_class":"retryable"|
        "non_retryable"|"needs_human","summary":"...","processed":N,"message":"..."}

Anything else (stderr, non-JSON stdout) ends up in the attempt's log.

The step handshake (protocol 2; `handshake = true` on the agent): the envelope
is one line and stdin stays open. After printing `started` for a side-effect
step the agent waits for one line on stdin:

    {"event":"ack","step":"deliver","fence":N}     go ahead: agentcron journaled
                                                   the step under a valid lease
    {"event":"deny","step":"deliver","reason":…}   do not act (the attempt lost
                                                   its lease); EOF means the same

What agentkit does for you
--------------------------
* `Agent()` reads and parses the envelope (an empty stdin counts as `{}`, so an
  agent can be tried by hand; a non-JSON stdin ends with a non_retryable failure).
* `agent.step(name, work, side_effect=..., verify=...)` runs one step:
    - a step in `completed_steps` is skipped: never run again, no events;
    - a side-effect step in `uncertain_steps` is check-then-act: `verify()` asks
      the outside world whether it already landed; if yes the step is reported
      `done` without acting again, if no it runs normally;
    - otherwise `started`, the work, `done`;
    - with `"acks": true` in the envelope, a side-effect step's work runs only
      after agentcron's ack (`agent.await_ack(name)`, called for you): on a deny
      or EOF the agent reports a retryable failure and exits without acting.
      That one call is the whole handshake.
  Each side-effect step that really acted appends `"<idempotency_key> <step>"` to
  the file named by AGENT_LEDGER (if set), so tests can prove nothing ran twice.
  (`completed_steps` / `uncertain_steps` may hold plain names or objects with a
  `name` field; both are understood.)
* Verify mode: when `reason == "verify"` the engine only asks "did step
  `verify_step` land?". `agent.verify_mode(verifiers)` looks the step up in
  `verifiers` (name -> function returning bool), runs nothing else and prints
      {"event":"result","status":"success","verified":true|false,...}
  A step without a verifier gives a `needs_human` failure rather than a guess.
* `agent.result(...)`, `agent.usage(...)`, `agent.heartbeat()` emit lines
  (thread-safe, flushed at once).
* The fault switches below, so the scheduler's recovery rules can be exercised.

Environment switches (all optional)
-----------------------------------
AGENT_SLEEP=SECONDS        sleep that long at the fault point (a slow agent).
AGENT_FAIL=CLASS           at the fault point, print a failure result with
                           error_class CLASS (retryable | non_retryable |
                           needs_human) and exit 0.
AGENT_EXIT=N               at the fault point, exit with code N and no result line.
AGENT_HANG=1               at the fault point, stop heartbeats and never finish.
AGENT_FAULT_AT=POINT       where the faults above fire (default `start`):
                             start          after reading the envelope, before any step
                             STEP           just before STEP begins (no `started` event)
                             STEP:started   after STEP's `started` event, before its work
                                            (an uncertain step that did NOT land)
                             STEP:acked     after the ack of STEP, before its work
                             STEP:landed    after STEP's work, before its `done` event
                                            (an uncertain step that DID land)
                             verify         in verify mode, before answering
AGENT_FAULT_ATTEMPTS=N     faults fire only while attempt <= N (e.g. 1: the first
                           attempt fails, the retry succeeds). Default: every attempt.
AGENT_FAULT_WINDOWS=N      faults fire only in windows whose start, counted in slots of
                           AGENT_FAULT_SLOT seconds (default 60) since the epoch, is a
                           multiple of N (e.g. N=2, SLOT=20 with `every = "20s"`: every
                           other window). Default: every window.
AGENT_LEDGER=PATH          append "<idempotency_key> <step>" per side-effect step run.
AGENT_HEARTBEAT_EVERY=S    print {"event":"heartbeat"} every S seconds while running.
If several faults are set they apply in the order SLEEP, HANG, EXIT, FAIL.
AGENT_LEDGER is used as given (relative to the working directory).
"""

import datetime
import json
import os
import sys
import threading
import time

ERROR_CLASSES = ("retryable", "non_retryable", "needs_human")


def _window_slot(window, seconds):
    """Whole slots of `seconds` since the epoch of the window's start (0 when it has none)."""
    raw = str((window or {}).get("start") or "")
    try:
        start = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return 0
    return int(start.timestamp() // seconds)


def _env_float(name, default=None):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        sys.stderr.write(f"agentkit: ignoring {name}={raw!r} (not a number)\n")
        return default


def _step_names(items):
    """`completed_steps` / `uncertain_steps` entries: names or {"name": ...} objects."""
    names = []
    for item in items or []:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, dict):
            name = item.get("name") or item.get("step")
            if isinstance(name, str):
                names.append(name)
    return names


def append_line(path, line):
    """Appends one line to `path` (creating its folder) and fsyncs it."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line.rstrip("\n") + "\n")
        f.flush()
        os.fsync(f.fileno())


def jsonl_has(path, **fields):
    """True if a JSON line in `path` has all `fields` with those values."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and all(obj.get(k) == v for k, v in fields.items()):
                    return True
    except FileNotFoundError:
        return False
    return False


class Agent:
    def __init__(self, stdin=None, stdout=None):
        self._out = stdout or sys.stdout
        self._lock = threading.Lock()
        self._stop_heartbeat = threading.Event()
        self.finished = False
        self._in = stdin or sys.stdin
        # The envelope is the first line; stdin may stay open after it (the
        # handshake), so only a file that is not one line of JSON (an envelope
        # pretty-printed by hand) is read to its end.
        raw = self._in.readline()
        try:
            json.loads(raw)
        except ValueError:
            raw += self._in.read()
        try:
            env = json.loads(raw) if raw.strip() else {}
            if not isinstance(env, dict):
                raise ValueError("the envelope is not a JSON object")
        except ValueError as e:
            self.envelope = {}
            self.result("failure", error_class="non_retryable",
                        summary="bad envelope", message=f"stdin is not a JSON envelope: {e}")
            sys.exit(0)
        self.envelope = env
        self.run_id = env.get("run_id")
        self.tenant = env.get("tenant", "default")
        self.schedule = env.get("schedule", "")
        self.window = env.get("window") or {}
        self.window_key = self.window.get("key", "")
        self.attempt = int(env.get("attempt") or 1)
        self.reason = env.get("reason", "manual")
        self.idempotency_key = env.get("idempotency_key") or "/".join(
            [self.tenant, self.schedule, self.window_key])
        self.context = env.get("context") or {}
        self.memory = env.get("memory") or []
        self.payload = env.get("payload") or {}
        if not isinstance(self.payload, dict):
            self.payload = {"value": self.payload}
        self.completed_steps = set(_step_names(env.get("completed_steps")))
        self.uncertain_steps = set(_step_names(env.get("uncertain_steps")))
        self.acks = env.get("acks") is True
        self.fences = {}
        self.verify_step = env.get("verify_step")
        if isinstance(self.verify_step, dict):
            self.verify_step = self.verify_step.get("name")

        self.ledger = os.environ.get("AGENT_LEDGER") or None
        self.fault_at = os.environ.get("AGENT_FAULT_AT", "start").strip() or "start"
        fault_attempts = _env_float("AGENT_FAULT_ATTEMPTS")
        self.faults_active = fault_attempts is None or self.attempt <= fault_attempts
        fault_windows = _env_float("AGENT_FAULT_WINDOWS")
        if fault_windows and fault_windows >= 1:
            slot = _env_float("AGENT_FAULT_SLOT") or 60
            self.faults_active = (self.faults_active
                                  and _window_slot(self.window, slot) % int(fault_windows) == 0)

        every = _env_float("AGENT_HEARTBEAT_EVERY")
        if every and every > 0:
            t = threading.Thread(target=self._heartbeat_loop, args=(every,), daemon=True)
            t.start()

    # ---- output -----------------------------------------------------------

    def emit(self, obj):
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()

    def log(self, text):
        """Free text for the attempt log (stderr)."""
        sys.stderr.write(text.rstrip("\n") + "\n")
        sys.stderr.flush()

    def heartbeat(self):
        self.emit({"event": "heartbeat"})

    def _heartbeat_loop(self, every):
        while not self._stop_heartbeat.wait(every):
            self.heartbeat()

    def usage(self, tokens=0, cost_usd=0.0):
        self.emit({"event": "usage", "tokens": int(tokens), "cost_usd": round(float(cost_usd), 6)})

    def result(self, status, error_class=None, summary="", processed=0, message="", **extra):
        obj = {"event": "result", "status": status}
        if status != "success":
            obj["error_class"] = error_class or "retryable"
        obj.update({"summary": summary, "processed": processed, "message": message})
        obj.update(extra)
        self._stop_heartbeat.set()
        self.emit(obj)
        self.finished = True

    # ---- faults -----------------------------------------------------------

    def fault_point(self, point):
        """Fires the AGENT_* faults if `point` is where they are configured."""
        if not self.faults_active or point != self.fault_at:
            return
        sleep = _env_float("AGENT_SLEEP")
        if sleep and sleep > 0:
            self.log(f"agentkit: AGENT_SLEEP={sleep:g} at {point}")
            time.sleep(sleep)
        if os.environ.get("AGENT_HANG", "").strip() not in ("", "0", "false", "no"):
            self._stop_heartbeat.set()
            self.log(f"agentkit: AGENT_HANG at {point}: no heartbeat, never finishing")
            while True:
                time.sleep(3600)
        code = os.environ.get("AGENT_EXIT", "").strip()
        if code:
            self.log(f"agentkit: AGENT_EXIT={code} at {point}")
            sys.stdout.flush()
            os._exit(int(code))
        raw = os.environ.get("AGENT_FAIL", "").strip()
        cls = raw
        if cls:
            if cls not in ERROR_CLASSES:
                self.log(f"agentkit: AGENT_FAIL={cls!r} is not a class; using retryable")
                cls = "retryable"
            self.result("failure", error_class=cls,
                        summary=f"simulated {cls} failure at {point}",
                        message=f"AGENT_FAIL={raw} (attempt {self.attempt})")
            sys.exit(0)

    # ---- steps ------------------------------------------------------------

    def step(self, name, work, side_effect=False, verify=None):
        """Runs one journaled step; returns work()'s value (None when skipped)."""
        if name in self.completed_steps:
            self.log(f"agentkit: step {name} already completed by an earlier attempt; skipping")
            return None
        self.fault_point(name)
        if side_effect and name in self.uncertain_steps:
            if verify is None:
                self.result("failure", error_class="needs_human",
                            summary=f"step {name} is uncertain and cannot be verified",
                            message="a human has to check whether it landed")
                sys.exit(0)
            if verify():
                self.log(f"agentkit: uncertain step {name} already landed; not repeating it")
                self.emit({"event": "step", "name": name, "status": "done"})
                return None
            self.log(f"agentkit: uncertain step {name} did not land; running it")
        self.emit({"event": "step", "name": name, "status": "started"})
        self.fault_point(f"{name}:started")
        if side_effect and self.acks:
            self.await_ack(name)
            self.fault_point(f"{name}:acked")
        value = work()
        if side_effect and self.ledger:
            append_line(self.ledger, f"{self.idempotency_key} {name}")
        self.fault_point(f"{name}:landed")
        self.emit({"event": "step", "name": name, "status": "done"})
        return value

    def await_ack(self, name):
        """The handshake: waits for agentcron's answer to step `name`'s `started`.

        Returns the fence of the ack. On a deny (or stdin closed: agentcron is
        gone) it reports a retryable failure and exits WITHOUT acting, so the
        side effect happens only when agentcron has the step journaled."""
        while True:
            line = self._in.readline()
            if not line:
                reason = "stdin closed before an ack (agentcron is gone)"
                break
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict) or msg.get("step") != name:
                continue
            if msg.get("event") == "ack":
                self.fences[name] = msg.get("fence")
                return msg.get("fence")
            if msg.get("event") == "deny":
                reason = f"denied: {msg.get('reason', '')}"
                break
        self.log(f"agentkit: step {name} not acked ({reason}); not acting")
        self.result("failure", error_class="retryable",
                    summary=f"step {name} was not acked", message=reason)
        sys.exit(0)

    def verify_mode(self, verifiers):
        """Handles reason == "verify"; returns True if it did (and printed the result)."""
        if self.reason != "verify":
            return False
        self.fault_point("verify")
        step = self.verify_step
        check = verifiers.get(step) if step else None
        if check is None:
            self.result("failure", error_class="needs_human",
                        summary=f"cannot verify step {step!r}",
                        message="this agent has no verifier for that step")
            return True
        landed = bool(check())
        self.result("success", summary=f"step {step} {'landed' if landed else 'did not land'}",
                    verified=landed, message=f"verified {step} for {self.idempotency_key}")
        return True
