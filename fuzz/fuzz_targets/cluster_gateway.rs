#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| agentwire_fuzz_cluster_targets::cluster_gateway(data));
