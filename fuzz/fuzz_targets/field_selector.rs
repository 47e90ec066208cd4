#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kcp_fuzz::field_selector(data));
