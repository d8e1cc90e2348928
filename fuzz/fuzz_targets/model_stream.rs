#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| agentwire_fuzz::model_targets::model_stream(data));
