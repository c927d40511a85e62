#!/usr/bin/env python3
"""make-warehouse.py: builds the sample upstream data for agentcron's sample config.

Creates (or recreates) warehouse.db next to this script with one table

    orders(day TEXT 'YYYY-MM-DD', amount REAL)

holding a few orders for each of the last N days up to today, which is what the
`upstream_partition_ready` gate of daily-sales-report and the `fetch` step of
agents/report.py look at. It also writes data/crm-export.csv, the file the
hourly-crm-sync schedule waits for.

    python3 make-warehouse.py                      # last 7 days
    python3 make-warehouse.py --days 30
    python3 make-warehouse.py --missing-yesterday  # upstream is late: no rows for yesterday,
                                                   # so the 09:00 report waits in its window
    python3 make-warehouse.py --add-day 2026-06-07 # late data arrives: add one day's rows

Options: --db PATH (default warehouse.db here), --today YYYY-MM-DD (default: today
in --tz, default Asia/Shanghai), --rows N orders per day (default 5).
"""

import argparse
import datetime
import os
import random
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def today_in(tz):
    try:
        from zoneinfo import ZoneInfo
        return datetime.datetime.now(ZoneInfo(tz)).date()
    except Exception:  # no tz database: fall back to the local date
        return datetime.date.today()


def insert_day(con, day, rows, rng):
    con.executemany("INSERT INTO orders(day, amount) VALUES (?, ?)",
                    [(day.isoformat(), round(rng.uniform(20, 500), 2)) for _ in range(rows)])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--days", type=int, default=7, help="days of history up to today (default 7)")
    p.add_argument("--missing-yesterday", action="store_true",
                   help="leave yesterday out (late upstream data)")
    p.add_argument("--add-day", metavar="YYYY-MM-DD",
                   help="only add rows for this day to the existing database")
    p.add_argument("--db", default=os.path.join(HERE, "warehouse.db"))
    p.add_argument("--today", help="pretend today is YYYY-MM-DD")
    p.add_argument("--tz", default="Asia/Shanghai")
    p.add_argument("--rows", type=int, default=5, help="orders per day (default 5)")
    a = p.parse_args(argv)

    rng = random.Random(42)
    today = datetime.date.fromisoformat(a.today) if a.today else today_in(a.tz)
    con = sqlite3.connect(a.db)
    with con:
        con.execute("CREATE TABLE IF NOT EXISTS orders(day TEXT NOT NULL, amount REAL NOT NULL)")
        con.execute("CREATE INDEX IF NOT EXISTS orders_day ON orders(day)")
        if a.add_day:
            day = datetime.date.fromisoformat(a.add_day)
            con.execute("DELETE FROM orders WHERE day = ?", (day.isoformat(),))
            insert_day(con, day, a.rows, rng)
        else:
            con.execute("DELETE FROM orders")
            yesterday = today - datetime.timedelta(days=1)
            for back in range(a.days, -1, -1):
                day = today - datetime.timedelta(days=back)
                if a.missing_yesterday and day == yesterday:
                    continue
                insert_day(con, day, a.rows, rng)
    summary = con.execute(
        "SELECT count(DISTINCT day), count(*), min(day), max(day) FROM orders").fetchone()
    con.close()

    export_dir = os.path.join(os.path.dirname(os.path.abspath(a.db)), "data")
    os.makedirs(export_dir, exist_ok=True)
    with open(os.path.join(export_dir, "crm-export.csv"), "w", encoding="utf-8") as f:
        f.write("account_id,name,updated\n")
        for i in range(1, 6):
            f.write(f"{1000 + i},Account {i},{today.isoformat()}\n")

    print(f"{a.db}: {summary[1]} orders over {summary[0]} days ({summary[2]} .. {summary[3]})"
          + (f"; no rows for {today - datetime.timedelta(days=1)}" if a.missing_yesterday
             and not a.add_day else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
