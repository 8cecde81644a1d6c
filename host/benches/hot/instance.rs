//! `instance/instantiate`: a fresh `Store` and instance, dropped again.
//!
//! `instance/instantiate_and_describe`: what every turn pays before the
//! guest's own work. From the deployment's cached `InstancePre`, a fresh
//! wasmtime `Store` (WASI context with only the given environment, memory
//! limiter, fuel, epoch deadline), a fresh instance of the hello example,
//! and one call of its cheapest export, `describe`.
//!
//! The engine and linker are those of a real `Runtime` (so the engine comes
//! from `runtime::compile::engine`, the one place that configures
//! wasmtime, with its epoch ticker running). Compiling the component and
//! the `InstancePre` happen once, outside the timing, as the deployment
//! cache does. Throughput is in instances.

use agenthost::bench_api;
use criterion::{Criterion, Throughput};

use crate::support::{hello_wasm, temp_dir};

pub fn instantiate_and_call(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("start a tokio runtime");
    let dir = temp_dir();
    let runtime = bench_api::runtime(dir.path()).expect("start the runtime");
    let pre = bench_api::instance_pre(&runtime, &hello_wasm()).expect("compile hello");
    let routes = rt
        .block_on(bench_api::instantiate_and_describe(&runtime, &pre))
        .expect("describe");
    assert!(routes > 0, "hello lists its routes");

    let mut group = c.benchmark_group("instance");
    group.throughput(Throughput::Elements(1));
    group.bench_function("instantiate_and_describe", |b| {
        b.iter(|| {
            rt.block_on(bench_api::instantiate_and_describe(&runtime, &pre))
                .expect("describe")
        })
    });
    group.bench_function("instantiate", |b| {
        b.iter(|| {
            rt.block_on(bench_api::instantiate(&runtime, &pre))
                .expect("instantiate")
        })
    });
    group.finish();
}
