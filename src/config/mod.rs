//! Configuration: the TOML schema, strict parsing with located errors, validation.

pub mod model;

pub use model::*;
