//! `http`: a readiness endpoint answers the expected status (default 200) and,
//! optionally, a JSON pointer into its body meets `expect`. This gate never fails:
//! an endpoint that is down or says "not yet" means not ready, so it waits.
//! Its `headers` may name secrets (`${ENV:NAME}`, `${FILE:path}`), read at each
//! check; reasons name the URL without its userinfo and never a header value.

use super::{Gate, GateContext, GateOutcome, compare, expect_text, value_text};
use crate::config::model::Expect;
use crate::time::duration::format_duration;

/// Bodies larger than this are not read (a readiness answer is small).
const BODY_LIMIT: u64 = 1 << 20;

pub struct HttpGate {
    name: String,
    url: String,
    status: u16,
    json_pointer: Option<String>,
    expect: Option<Expect>,
    headers: std::collections::BTreeMap<String, String>,
    /// Where `${FILE:…}` header values are read from (the config's folder).
    dir: std::path::PathBuf,
}

impl HttpGate {
    pub fn new(
        name: String,
        url: String,
        status: u16,
        json_pointer: Option<String>,
        expect: Option<Expect>,
    ) -> Self {
        Self {
            name,
            url,
            status,
            json_pointer,
            expect,
            headers: Default::default(),
            dir: std::path::PathBuf::from("."),
        }
    }

    /// Sends `headers` (templates resolved against `dir` at each check).
    pub fn with_headers(
        mut self,
        headers: std::collections::BTreeMap<String, String>,
        dir: &std::path::Path,
    ) -> Self {
        self.headers = headers;
        self.dir = dir.to_path_buf();
        self
    }
}

impl Gate for HttpGate {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "http"
    }

    fn check(&self, ctx: &GateContext<'_>) -> GateOutcome {
        let (headers, redactor) = match crate::secrets::resolve_headers(&self.headers, &self.dir) {
            Ok(resolved) => resolved,
            Err(e) => {
                return GateOutcome::wait(format!("GET {}: {e}", crate::secrets::redact_url(&self.url)));
            }
        };
        let mut outcome = self.ask(ctx, &headers);
        outcome.reason = redactor.redact(&outcome.reason);
        outcome
    }
}

impl HttpGate {
    fn ask(&self, ctx: &GateContext<'_>, headers: &[(String, String)]) -> GateOutcome {
        // Shown without its userinfo; requested with it.
        let url = &crate::secrets::redact_url(&self.url);
        let mut request = crate::http::get(&self.url, ctx.timeout);
        for (k, v) in headers {
            request = request.header(k, v);
        }
        let mut response = match request.call() {
            Ok(r) => r,
            Err(ureq::Error::Timeout(_)) => {
                return GateOutcome::wait(format!(
                    "GET {url}: timed out after {}",
                    format_duration(ctx.timeout)
                ));
            }
            Err(e) => return GateOutcome::wait(format!("GET {url}: {e}")),
        };
        let status = response.status().as_u16();
        if status != self.status {
            return GateOutcome::wait(format!("GET {url} → {status} (expected {})", self.status));
        }
        if self.json_pointer.is_none() && self.expect.is_none() {
            return GateOutcome::pass(format!("GET {url} → {status}"));
        }
        let body = match response
            .body_mut()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_string()
        {
            Ok(b) => b,
            Err(e) => {
                return GateOutcome::wait(format!("GET {url} → {status}, body unreadable: {e}"));
            }
        };
        let doc: serde_json::Value = match serde_json::from_str(&body) {
            Ok(d) => d,
            Err(e) => {
                return GateOutcome::wait(format!("GET {url} → {status}, body is not JSON: {e}"));
            }
        };
        // Without a pointer, `expect` applies to the whole document.
        let (label, value) = match &self.json_pointer {
            Some(p) => match doc.pointer(p) {
                Some(v) => (p.as_str(), v),
                None => {
                    return GateOutcome::wait(format!("GET {url} → {status}, no {p} in the body"));
                }
            },
            None => ("body", &doc),
        };
        let measured = format!("{label} = {}", value_text(value));
        match &self.expect {
            // A pointer alone only asks that the value be there.
            None => GateOutcome::pass(measured),
            Some(expect) => match compare(expect, value) {
                Ok(true) => GateOutcome::pass(format!("{measured} (expected {})", expect_text(expect))),
                Ok(false) => GateOutcome::wait(format!("{measured} (expected {})", expect_text(expect))),
                Err(e) => GateOutcome::wait(format!("{label}: {e}")),
            },
        }
    }
}
