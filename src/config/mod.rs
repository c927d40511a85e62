//! Configuration: the TOML schema, strict parsing with located errors, validation.

pub mod applied;
pub mod diagnostic;
pub mod expect;
pub mod load;
pub mod model;

pub use applied::Applied;
pub use diagnostic::{Diagnostic, LoadError};
pub use expect::parse_expect;
pub use load::{load_file, load_str, load_str_with};
pub use model::*;
