# The guests build for wasm32-wasip2; fmt and clippy run in CI.
rustup target add wasm32-wasip2 >/dev/null
