//! The append-only trace (`events`) and the posted named events that feed
//! `on_event` / `after_event` triggers.

use super::exec::stmt;
use super::exec::{self, Dialect, Row};
use super::sql::{Ms, event_from_cols, json_text, json_value, limit, ts};
use super::types::*;
use super::{Result, Tx};
use chrono::{DateTime, Utc};
use rusqlite::params;
use rusqlite::types::{ToSql, Value};

/// The queries the console and engine tail, named for [`Tx::hot_query_plans`].
pub(crate) fn hot_queries() -> Vec<(&'static str, String)> {
    let of_run = EventFilter {
        run_id: Some(0),
        ..EventFilter::default()
    };
    let of_schedule = EventFilter {
        schedule: Some(String::new()),
        newest_first: true,
        limit: Some(1),
        ..EventFilter::default()
    };
    let tail = EventFilter {
        after_id: Some(0),
        limit: Some(1),
        ..EventFilter::default()
    };
    vec![
        ("events of a run", events_sql(&of_run).0),
        ("events of a schedule", events_sql(&of_schedule).0),
        ("events after an id", events_sql(&tail).0),
        ("max_event_id", super::sqlite::events::MAX_EVENT_ID.to_string()),
        (
            "posted_events_after",
            super::sqlite::events::POSTED_AFTER.to_string(),
        ),
    ]
}

/// The SQL and parameters of an event listing.
fn events_sql(filter: &EventFilter) -> (String, Vec<Value>) {
    events_sql_before(Dialect::Sqlite, filter, None)
}

/// [`events_sql`], only rows with an id below `before_id` when given (the
/// next page of a listing newest first).
fn events_sql_before(d: Dialect, filter: &EventFilter, before_id: Option<i64>) -> (String, Vec<Value>) {
    let mut sql =
        String::from("SELECT id, at, kind, tenant, schedule, run_id, detail FROM events WHERE 1 = 1");
    let mut params: Vec<Value> = Vec::new();
    if let Some(run_id) = filter.run_id {
        params.push(Value::Integer(run_id));
        sql.push_str(&format!(" AND run_id = {}", d.mark(params.len())));
    }
    if let Some(schedule) = &filter.schedule {
        // The schedule's own events, and its runs' (see schema V8).
        params.push(Value::Text(schedule.clone()));
        let k = d.mark(params.len());
        sql.push_str(&format!(
            " AND id IN (SELECT id FROM events WHERE run_id IS NULL AND schedule = {k} \
             UNION ALL SELECT e.id FROM runs r JOIN events e ON e.run_id = r.id \
             WHERE r.schedule = {k} AND r.state <> 'running' \
             UNION ALL SELECT e.id FROM runs r JOIN events e ON e.run_id = r.id \
             WHERE r.schedule = {k} AND r.state = 'running')"
        ));
    }
    if !filter.kinds.is_empty() {
        let mut marks = Vec::with_capacity(filter.kinds.len());
        for kind in &filter.kinds {
            params.push(Value::Text(kind.clone()));
            marks.push(d.mark(params.len()));
        }
        sql.push_str(&format!(" AND kind IN ({})", marks.join(", ")));
    }
    if let Some(after) = filter.after_id {
        params.push(Value::Integer(after));
        sql.push_str(&format!(" AND id > {}", d.mark(params.len())));
    }
    if let Some(before) = before_id {
        params.push(Value::Integer(before));
        sql.push_str(&format!(" AND id < {}", d.mark(params.len())));
    }
    sql.push_str(if filter.newest_first {
        " ORDER BY id DESC"
    } else {
        " ORDER BY id"
    });
    if let Some(n) = filter.limit {
        // A literal: a bound LIMIT re-prepares the statement every time.
        sql.push_str(&format!(" LIMIT {}", limit(n)));
    }
    (sql, params)
}

/// [`Tx::events`] over any store: `fetch` runs one page's query (SQL with
/// `?N` placeholders, its values) and maps its rows.
pub(crate) fn list_events(
    d: Dialect,
    filter: &EventFilter,
    mut fetch: impl FnMut(&str, Vec<Value>) -> Result<Vec<Event>>,
) -> Result<Vec<Event>> {
    let mut query = filter.clone();
    if filter.kinds.iter().any(|k| FOLDED_KINDS.contains(&k.as_str())) {
        for k in FOLDING_KINDS {
            if !query.kinds.iter().any(|q| q == k) {
                query.kinds.push(k.into());
            }
        }
        // Rows read may hold none of the kinds asked for: pages of at
        // least this many rows, not one row at a time for a small limit.
        query.limit = filter.limit.map(|n| n.max(FOLDED_PAGE));
    }
    let wanted = |kind: &str| filter.kinds.is_empty() || filter.kinds.iter().any(|k| k == kind);
    let mut out: Vec<Event> = Vec::new();
    let mut before_id = None;
    loop {
        let (sql, params) = events_sql_before(d, &query, before_id);
        let rows = fetch(&sql, params)?;
        let fetched = rows.len();
        let edge = rows.last().map(|e| e.id);
        for row in rows {
            if !FOLDING_KINDS.contains(&row.kind.as_str()) {
                out.extend(Some(row).filter(|e| wanted(&e.kind)));
                continue;
            }
            let mut held = Vec::with_capacity(4);
            unfold(row, &mut held);
            if filter.newest_first {
                held.reverse();
            }
            out.extend(held.into_iter().filter(|e| wanted(&e.kind)));
        }
        // Rows read but fewer events kept (kinds folded in other rows):
        // the next page, until the limit is reached or no rows are left.
        match (filter.limit, edge) {
            (Some(n), Some(edge))
                if out.len() < n && query.limit.is_some_and(|page| fetched == limit(page) as usize) =>
            {
                if filter.newest_first {
                    before_id = Some(edge);
                } else {
                    query.after_id = Some(edge);
                }
            }
            _ => break,
        }
    }
    if let Some(n) = filter.limit
        && out.len() > n
    {
        // Not in the middle of one row's events, unless it is the only row.
        let cut_id = out[n].id;
        let whole = out[..n].iter().rposition(|e| e.id != cut_id).map_or(n, |i| i + 1);
        out.truncate(if out[n - 1].id == cut_id && whole < n {
            whole
        } else {
            n
        });
    }
    Ok(out)
}

/// The fewest rows a page of a listing of folded kinds reads.
const FOLDED_PAGE: usize = 256;

/// A stored row as the events it holds, appended to `out`: the events folded
/// into a `claimed` row ([`NewEvent::folding`]) at their own instants, then
/// the claim without them; any other row as it is.
fn unfold(mut row: Event, out: &mut Vec<Event>) {
    let folded = match row.detail.as_object_mut() {
        Some(detail) if FOLDING_KINDS.contains(&row.kind.as_str()) => detail.remove("folded"),
        _ => None,
    };
    if let Some(serde_json::Value::Array(items)) = folded {
        for item in items {
            let serde_json::Value::Object(mut f) = item else {
                continue;
            };
            let kind = f
                .get("kind")
                .and_then(|k| k.as_str())
                .unwrap_or_default()
                .to_string();
            let at = f
                .get("at")
                .and_then(|a| a.as_i64())
                .and_then(DateTime::from_timestamp_millis)
                .unwrap_or(row.at);
            out.push(Event {
                id: row.id,
                at,
                kind,
                tenant: row.tenant.clone(),
                schedule: row.schedule.clone(),
                run_id: row.run_id,
                detail: f.remove("detail").unwrap_or(serde_json::Value::Null),
            });
        }
    }
    out.push(row);
}

/// Writes one event row as given; its id.
pub(crate) fn write_event(conn: super::exec::Conn<'_>, ev: &NewEvent) -> Result<i64> {
    let (_, id) = conn.insert(
        stmt!(events::INSERT_EVENT),
        rusqlite::params![
            Ms(ev.at),
            ev.kind,
            ev.tenant,
            ev.schedule,
            ev.run_id,
            ev.detail_text().as_ref()
        ],
    )?;
    Ok(id)
}

impl Tx<'_> {
    /// Appends one row.
    pub(crate) fn insert_event(
        &self,
        at: DateTime<Utc>,
        kind: &str,
        tenant: Option<&str>,
        schedule: Option<&str>,
        run_id: Option<i64>,
        detail: &str,
    ) -> Result<i64> {
        let (_, id) = self.insert(
            stmt!(events::INSERT_EVENT),
            params![Ms(at), kind, tenant, schedule, run_id, detail],
        )?;
        Ok(id)
    }

    /// Writes a claim's `claimed` event (its run's tenant, schedule and id
    /// set) in one row with the events folded into it.
    pub(crate) fn write_claimed(&self, claimed: NewEvent, folded: Vec<NewEvent>) -> Result<()> {
        write_event(self.conn(), &claimed.folding(&folded)).map(drop)
    }

    /// Appends one trace row as given; returns its id (ids increase).
    pub fn append_event(&self, ev: &NewEvent) -> Result<i64> {
        self.append_event_text(ev)
    }

    fn append_event_text(&self, ev: &NewEvent) -> Result<i64> {
        self.insert_event(
            ev.at,
            &ev.kind,
            ev.tenant.as_deref(),
            ev.schedule.as_deref(),
            ev.run_id,
            &ev.detail_text(),
        )
    }

    /// Events matching every given condition (run, schedule, any of `kinds`,
    /// id > `after_id`), by id (ascending unless `newest_first`), at most `limit`.
    ///
    /// A `claimed` row with events folded in ([`NewEvent::folding`]) is
    /// listed as those events then the claim (newest first: the other way
    /// round), all with the row's id; a listing of a folded kind reads the
    /// `claimed` rows too and keeps only the kinds asked for. A `limit`
    /// counts events; it does not cut one row's events in two unless that
    /// row alone is over it (a reader tailing by id would skip the rest).
    pub fn events(&self, filter: &EventFilter) -> Result<Vec<Event>> {
        super::db::flush_fencing(self.conn(), self.model)?;
        list_events(self.dialect(), filter, |sql, params| {
            let params: Vec<&dyn ToSql> = params.iter().map(|v| v as &dyn ToSql).collect();
            self.all(exec::Sql::Text(sql), &params, |r: &Row<'_>| event_from_cols(r))
        })
    }

    /// The id of the newest event, 0 when there is none.
    pub fn max_event_id(&self) -> Result<i64> {
        super::db::flush_fencing(self.conn(), self.model)?;
        self.one(stmt!(events::MAX_EVENT_ID), params![], |r| r.get(0))
    }

    /// Records a posted named event once per (name, event id): `Some(seq)` if
    /// new, `None` if it was posted before.
    pub fn post_event(
        &self,
        name: &str,
        event_id: &str,
        payload: &serde_json::Value,
        at: DateTime<Utc>,
    ) -> Result<Option<i64>> {
        self.opt(
            stmt!(events::POST_EVENT),
            params![name, event_id, json_text(payload), Ms(at)],
            |r| r.get(0),
        )
    }

    /// Posted events with `seq > after_seq`, oldest first, at most `limit_to`.
    pub fn posted_events_after(&self, after_seq: i64, limit_to: usize) -> Result<Vec<PostedEvent>> {
        let sql = self.limited(stmt!(events::POSTED_AFTER), 2, limit_to);
        self.all(&sql, params![after_seq], |r| {
            Ok(PostedEvent {
                seq: r.get(0)?,
                name: r.get(1)?,
                event_id: r.get(2)?,
                payload: json_value(r.get(3)?),
                arrived_at: ts(r, 4)?,
            })
        })
    }
}
