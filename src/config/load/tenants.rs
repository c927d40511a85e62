//! The `[tenants.NAME]` sections: per-tenant concurrency caps.

use super::Loader;
use super::table::Tbl;
use crate::config::model::TenantConfig;
use std::collections::BTreeMap;

pub(super) const TENANT_KEYS: &[&str] = &["max_concurrent"];

impl Loader<'_> {
    pub(super) fn tenants(&mut self, root: &Tbl) -> BTreeMap<String, TenantConfig> {
        let mut out = BTreeMap::new();
        for (name, t) in self.named_tables(root, "tenants") {
            self.check_keys(&t, TENANT_KEYS, &[], None);
            let max_concurrent = self.opt_uint::<u32>(&t, "max_concurrent", 1).map(|(n, _)| n);
            if max_concurrent.is_some() || !t.has("max_concurrent") {
                out.insert(name, TenantConfig { max_concurrent });
            }
        }
        out
    }
}
