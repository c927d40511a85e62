//! The process's one HTTP client. Alert webhooks, the `http` gate, HTTP agents and
//! webhook deliveries share it, so they share its connection pool and its
//! settings; each request sets its own timeout.

use std::sync::OnceLock;
use std::time::Duration;

/// The shared agent. A non-2xx status is an answer, not an error: every caller
/// decides for itself what a status means.
pub(crate) fn agent() -> &'static ureq::Agent {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    AGENT.get_or_init(|| {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into()
    })
}

/// A GET on the shared agent, bounded by `timeout` as a whole (resolve, connect,
/// send, receive).
pub(crate) fn get(url: &str, timeout: Duration) -> ureq::RequestBuilder<ureq::typestate::WithoutBody> {
    agent().get(url).config().timeout_global(Some(timeout)).build()
}

/// A POST on the shared agent, bounded by `timeout` as a whole.
pub(crate) fn post(url: &str, timeout: Duration) -> ureq::RequestBuilder<ureq::typestate::WithBody> {
    agent().post(url).config().timeout_global(Some(timeout)).build()
}
