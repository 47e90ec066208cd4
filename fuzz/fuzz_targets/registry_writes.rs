#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kcp_fuzz::registry_writes(data));
