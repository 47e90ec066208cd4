//! Whole controllers built with this crate, each also an example binary (`examples/`).

pub mod stamper;
