//! `agentcron next`: upcoming fires of a schedule or an ad-hoc cron expression.
