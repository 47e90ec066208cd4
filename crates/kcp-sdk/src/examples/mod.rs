//! Whole controllers built with this crate, each also an example binary (`examples/`).

pub mod provider;
pub mod stamper;
