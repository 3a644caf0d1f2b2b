//! Compiles `proto/` into Rust with tonic-prost-build, using a vendored
//! `protoc` so a fresh machine needs nothing but cargo. Output goes to
//! OUT_DIR (never checked in), plus a file descriptor set for reflection.

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Respect an explicit PROTOC; otherwise use the vendored binary.
    if env::var_os("PROTOC").is_none() {
        let protoc = protoc_bin_vendored::protoc_bin_path()?;
        // SAFETY: build scripts are single-threaded; nothing else reads the
        // environment concurrently.
        unsafe { env::set_var("PROTOC", protoc) };
    }
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("mnemo_descriptor.bin"))
        .compile_protos(
            &[
                "proto/mnemo/v1/session.proto",
                "proto/mnemo/v1/summary.proto",
                "proto/mnemo/v1/context.proto",
                "proto/mnemo/v1/knowledge.proto",
                "proto/mnemo/v1/subject.proto",
                "proto/mnemo/v1/memory_service.proto",
            ],
            &["proto"],
        )?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
